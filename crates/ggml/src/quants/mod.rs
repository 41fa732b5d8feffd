//! Block layouts and reference quantizers, bit-exact with ggml (ggml-quants.c), so a model we
//! quantize is byte-identical to llama-quantize's output.
//!
//! Every function takes whole rows: element counts must be multiples of the type's block size,
//! and byte buffers must hold `row_size` bytes per row. A violated size is a caller bug and
//! panics with a message; the data itself (NaN, inf, any bit pattern) never does.

pub mod blocks;
mod fp;
mod fp4;
mod iq1;
mod iq2;
mod iq3;
mod iq4;
pub mod iq_grids;
mod k23;
mod k456;
mod legacy;
mod q1q2;
mod search;
mod tq;

pub use blocks::*;
pub use fp::{
    bf16_to_fp32, bf16_to_fp32_row, fp16_to_fp32, fp16_to_fp32_row, fp32_to_bf16, fp32_to_bf16_row,
    fp32_to_fp16, fp32_to_fp16_row,
};
pub use fp4::{
    dequantize_row_mxfp4, dequantize_row_nvfp4, e8m0_to_fp32_half, fp32_to_ue4m3,
    quantize_row_mxfp4_ref, quantize_row_nvfp4_ref, ue4m3_to_fp32, KVALUES_MXFP4,
};
pub use iq1::{dequantize_row_iq1_m, dequantize_row_iq1_s, quantize_row_iq1_m_ref};
pub use iq2::{
    dequantize_row_iq2_s, dequantize_row_iq2_xs, dequantize_row_iq2_xxs, quantize_row_iq2_s_ref,
};
pub use iq3::{
    dequantize_row_iq3_s, dequantize_row_iq3_xxs, quantize_row_iq3_s_ref, quantize_row_iq3_xxs_ref,
};
pub use iq4::{dequantize_row_iq4_xs, iq4_xs_scale, quantize_row_iq4_xs_ref};
pub use k23::{
    dequantize_row_q2_k, dequantize_row_q3_k, quantize_row_q2_k_ref, quantize_row_q3_k_ref,
};
pub use k456::{
    dequantize_row_q4_k, dequantize_row_q5_k, dequantize_row_q6_k, dequantize_row_q8_k,
    get_scale_min_k4, quantize_row_q4_k_ref, quantize_row_q5_k_ref, quantize_row_q6_k_ref,
    quantize_row_q8_k_ref,
};
pub use legacy::{
    dequantize_row_iq4_nl, dequantize_row_q4_0, dequantize_row_q4_1, dequantize_row_q5_0,
    dequantize_row_q5_1, dequantize_row_q8_0, dequantize_row_q8_1, quantize_row_iq4_nl_ref,
    quantize_row_q4_0_ref, quantize_row_q4_1_ref, quantize_row_q5_0_ref, quantize_row_q5_1_ref,
    quantize_row_q8_0_ref, quantize_row_q8_1_ref,
};
pub use q1q2::{
    dequantize_row_q1_0, dequantize_row_q2_0, quantize_row_q1_0_ref, quantize_row_q2_0_ref,
};
pub use tq::{
    dequantize_row_tq1_0, dequantize_row_tq2_0, quantize_row_tq1_0_ref, quantize_row_tq2_0_ref,
    unpack_trit,
};

use crate::Type;

/// Bytes needed for `n` elements of `ty` (`n` a multiple of the block size).
pub fn bytes_for(ty: Type, n: usize) -> usize {
    assert_eq!(
        n % ty.block_size(),
        0,
        "{n} elements is not a whole number of {ty} blocks"
    );
    n / ty.block_size() * ty.type_size()
}

/// Whether `quantize_chunk` refuses to run without an importance matrix (ggml's
/// ggml_quantize_requires_imatrix), and `quantize_row_ref` has no quantizer for the type.
pub fn requires_imatrix(ty: Type) -> bool {
    matches!(ty, Type::Iq2Xxs | Type::Iq2Xs | Type::Iq1S)
}

/// Whether `quantize_row_ref` / `dequantize_row` / `quantize_chunk` accept `ty`.
pub fn is_supported(ty: Type) -> bool {
    !matches!(ty, Type::I8 | Type::I16 | Type::I64 | Type::F64)
}

fn check_sizes(ty: Type, nelem: usize, nbytes: usize, what: &str) {
    assert!(is_supported(ty), "{what}: type {ty} is not supported");
    let need = bytes_for(ty, nelem);
    assert!(
        nbytes >= need,
        "{what}: {ty} buffer of {nbytes} bytes is smaller than the {need} needed"
    );
}

fn as_u16(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[2 * i], b[2 * i + 1]])
}

/// Reference quantization of `src` (one or more whole rows) into `dst`, like ggml's
/// `quantize_row_*_ref` (and the plain conversions for F32/F16/BF16/I32).
pub fn quantize_row_ref(ty: Type, src: &[f32], dst: &mut [u8]) {
    check_sizes(ty, src.len(), dst.len(), "quantize_row_ref");
    match ty {
        Type::F32 => {
            for (o, v) in dst.chunks_exact_mut(4).zip(src) {
                o.copy_from_slice(&v.to_le_bytes());
            }
        }
        Type::I32 => {
            for (o, v) in dst.chunks_exact_mut(4).zip(src) {
                o.copy_from_slice(&(*v as i32).to_le_bytes());
            }
        }
        Type::F16 => {
            for (o, v) in dst.chunks_exact_mut(2).zip(src) {
                o.copy_from_slice(&fp32_to_fp16(*v).to_le_bytes());
            }
        }
        Type::Bf16 => {
            for (o, v) in dst.chunks_exact_mut(2).zip(src) {
                o.copy_from_slice(&fp32_to_bf16(*v).to_le_bytes());
            }
        }
        Type::Q4_0 => quantize_row_q4_0_ref(src, dst),
        Type::Q4_1 => quantize_row_q4_1_ref(src, dst),
        Type::Q5_0 => quantize_row_q5_0_ref(src, dst),
        Type::Q5_1 => quantize_row_q5_1_ref(src, dst),
        Type::Q8_0 => quantize_row_q8_0_ref(src, dst),
        Type::Q8_1 => quantize_row_q8_1_ref(src, dst),
        Type::Q2K => quantize_row_q2_k_ref(src, dst),
        Type::Q3K => quantize_row_q3_k_ref(src, dst),
        Type::Q4K => quantize_row_q4_k_ref(src, dst),
        Type::Q5K => quantize_row_q5_k_ref(src, dst),
        Type::Q6K => quantize_row_q6_k_ref(src, dst),
        Type::Q8K => quantize_row_q8_k_ref(src, dst),
        Type::Iq4Nl => quantize_row_iq4_nl_ref(src, dst),
        Type::Iq4Xs => quantize_row_iq4_xs_ref(src, dst),
        Type::Iq3Xxs => quantize_row_iq3_xxs_ref(src, dst),
        Type::Iq3S => quantize_row_iq3_s_ref(src, dst),
        Type::Iq2S => quantize_row_iq2_s_ref(src, dst),
        Type::Iq1M => quantize_row_iq1_m_ref(src, dst),
        Type::Iq2Xxs | Type::Iq2Xs | Type::Iq1S => {
            panic!("quantize_row_ref: {ty} needs an importance matrix (use quantize_chunk)")
        }
        Type::Tq1_0 => quantize_row_tq1_0_ref(src, dst),
        Type::Tq2_0 => quantize_row_tq2_0_ref(src, dst),
        Type::Mxfp4 => quantize_row_mxfp4_ref(src, dst),
        Type::Nvfp4 => quantize_row_nvfp4_ref(src, dst),
        Type::Q1_0 => quantize_row_q1_0_ref(src, dst),
        Type::Q2_0 => quantize_row_q2_0_ref(src, dst),
        _ => unreachable!("checked by check_sizes"),
    }
}

/// Expands `dst.len()` elements (whole rows) of `ty` from `src` into f32.
pub fn dequantize_row(ty: Type, src: &[u8], dst: &mut [f32]) {
    check_sizes(ty, dst.len(), src.len(), "dequantize_row");
    match ty {
        Type::F32 => {
            for (i, o) in dst.iter_mut().enumerate() {
                *o = f32::from_le_bytes([
                    src[4 * i],
                    src[4 * i + 1],
                    src[4 * i + 2],
                    src[4 * i + 3],
                ]);
            }
        }
        Type::I32 => {
            for (i, o) in dst.iter_mut().enumerate() {
                *o = i32::from_le_bytes([
                    src[4 * i],
                    src[4 * i + 1],
                    src[4 * i + 2],
                    src[4 * i + 3],
                ]) as f32;
            }
        }
        Type::F16 => {
            for (i, o) in dst.iter_mut().enumerate() {
                *o = fp16_to_fp32(as_u16(src, i));
            }
        }
        Type::Bf16 => {
            for (i, o) in dst.iter_mut().enumerate() {
                *o = bf16_to_fp32(as_u16(src, i));
            }
        }
        Type::Q4_0 => dequantize_row_q4_0(src, dst),
        Type::Q4_1 => dequantize_row_q4_1(src, dst),
        Type::Q5_0 => dequantize_row_q5_0(src, dst),
        Type::Q5_1 => dequantize_row_q5_1(src, dst),
        Type::Q8_0 => dequantize_row_q8_0(src, dst),
        Type::Q8_1 => dequantize_row_q8_1(src, dst),
        Type::Q2K => dequantize_row_q2_k(src, dst),
        Type::Q3K => dequantize_row_q3_k(src, dst),
        Type::Q4K => dequantize_row_q4_k(src, dst),
        Type::Q5K => dequantize_row_q5_k(src, dst),
        Type::Q6K => dequantize_row_q6_k(src, dst),
        Type::Q8K => dequantize_row_q8_k(src, dst),
        Type::Iq4Nl => dequantize_row_iq4_nl(src, dst),
        Type::Iq4Xs => dequantize_row_iq4_xs(src, dst),
        Type::Iq2Xxs => dequantize_row_iq2_xxs(src, dst),
        Type::Iq2Xs => dequantize_row_iq2_xs(src, dst),
        Type::Iq2S => dequantize_row_iq2_s(src, dst),
        Type::Iq3Xxs => dequantize_row_iq3_xxs(src, dst),
        Type::Iq3S => dequantize_row_iq3_s(src, dst),
        Type::Iq1S => dequantize_row_iq1_s(src, dst),
        Type::Iq1M => dequantize_row_iq1_m(src, dst),
        Type::Tq1_0 => dequantize_row_tq1_0(src, dst),
        Type::Tq2_0 => dequantize_row_tq2_0(src, dst),
        Type::Mxfp4 => dequantize_row_mxfp4(src, dst),
        Type::Nvfp4 => dequantize_row_nvfp4(src, dst),
        Type::Q1_0 => dequantize_row_q1_0(src, dst),
        Type::Q2_0 => dequantize_row_q2_0(src, dst),
        _ => unreachable!("checked by check_sizes"),
    }
}

/// ggml_quantize_chunk: quantizes rows `start_row .. start_row + nrows` of the tensor `src`
/// (rows of `n_per_row` elements) into the same rows of `dst`, and returns the bytes written.
/// `imatrix` holds `n_per_row` importance weights; without it most types use their reference
/// quantizer, while IQ4_NL (and Q3_K..Q6_K with one) run their search quantizers as ggml does.
pub fn quantize_chunk(
    ty: Type,
    src: &[f32],
    dst: &mut [u8],
    start_row: usize,
    nrows: usize,
    n_per_row: usize,
    imatrix: Option<&[f32]>,
) -> usize {
    let row_size = bytes_for(ty, n_per_row);
    let src = &src[start_row * n_per_row..(start_row + nrows) * n_per_row];
    let dst = &mut dst[start_row * row_size..(start_row + nrows) * row_size];
    if let Some(w) = imatrix {
        assert!(
            w.len() >= n_per_row,
            "quantize_chunk: imatrix has {} of {n_per_row} weights",
            w.len()
        );
    }
    let per_row = |dst: &mut [u8], f: &dyn Fn(&[f32], &mut [u8])| {
        for (x, y) in src
            .chunks_exact(n_per_row)
            .zip(dst.chunks_exact_mut(row_size))
        {
            f(x, y);
        }
    };
    match (ty, imatrix) {
        (Type::Q4_0, Some(w)) => per_row(dst, &|x, y| legacy::quantize_row_q4_0_imatrix(x, y, w)),
        (Type::Q4_1, Some(w)) => per_row(dst, &|x, y| legacy::quantize_row_q4_1_imatrix(x, y, w)),
        (Type::Q5_0, Some(w)) => per_row(dst, &|x, y| legacy::quantize_row_q5_0_imatrix(x, y, w)),
        (Type::Q5_1, Some(w)) => per_row(dst, &|x, y| legacy::quantize_row_q5_1_imatrix(x, y, w)),
        (Type::Q2K, Some(w)) => per_row(dst, &|x, y| k23::quantize_row_q2_k_imatrix(x, y, w)),
        (Type::Q3K, Some(w)) => per_row(dst, &|x, y| k23::quantize_row_q3_k_imatrix(x, y, Some(w))),
        (Type::Q4K, Some(w)) => {
            per_row(dst, &|x, y| k456::quantize_row_q4_k_imatrix(x, y, Some(w)))
        }
        (Type::Q5K, Some(w)) => {
            per_row(dst, &|x, y| k456::quantize_row_q5_k_imatrix(x, y, Some(w)))
        }
        (Type::Q6K, Some(w)) => per_row(dst, &|x, y| k456::quantize_row_q6_k_imatrix(x, y, w)),
        (Type::Iq4Nl, w) => per_row(dst, &|x, y| legacy::quantize_row_iq4_nl_chunk(x, y, w)),
        (Type::Iq4Xs, w) => per_row(dst, &|x, y| iq4::quantize_row_iq4_xs(x, y, w)),
        (Type::Iq3Xxs, w) => per_row(dst, &|x, y| iq3::quantize_row_iq3_xxs(x, y, w)),
        (Type::Iq3S, w) => per_row(dst, &|x, y| iq3::quantize_row_iq3_s(x, y, w)),
        (Type::Iq2S, w) => per_row(dst, &|x, y| iq2::quantize_row_iq2_s(x, y, w)),
        (Type::Iq2Xxs, Some(w)) => per_row(dst, &|x, y| iq2::quantize_row_iq2_xxs(x, y, w)),
        (Type::Iq2Xs, Some(w)) => per_row(dst, &|x, y| iq2::quantize_row_iq2_xs(x, y, w)),
        (Type::Iq1S, Some(w)) => per_row(dst, &|x, y| iq1::quantize_row_iq1_s(x, y, w)),
        (Type::Iq1M, w) => per_row(dst, &|x, y| iq1::quantize_row_iq1_m(x, y, w)),
        // Every other type ignores the imatrix and converts all rows in one go.
        _ => {
            quantize_row_ref(ty, src, dst);
        }
    }
    nrows * row_size
}

#[cfg(test)]
mod tests;
