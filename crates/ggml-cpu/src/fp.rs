//! Half and bfloat16 conversions for the kernels: ggml's own rounding (nearest even), from the
//! quants module, so CPU results match the bytes ggml writes.

pub(crate) use ggml::quants::{
    bf16_to_fp32 as bf16_to_f32, fp16_to_fp32 as f16_to_f32, fp32_to_bf16 as f32_to_bf16,
    fp32_to_fp16 as f32_to_f16,
};

pub(crate) fn f16_to_f32_row(src: &[u16], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = f16_to_f32(*s);
    }
}

pub(crate) fn f32_to_f16_row(src: &[f32], dst: &mut [u16]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = f32_to_f16(*s);
    }
}
