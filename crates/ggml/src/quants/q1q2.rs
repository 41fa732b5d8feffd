//! Q1_0 (128 signs and their mean |x|) and Q2_0 (64 two-bit codes -1..2 of the block's
//! largest |x|). ggml's quantize_q1_0 / quantize_q2_0 use the reference quantizer with or
//! without an importance matrix.
//!
//! Layouts (ggml-common.h): Q1_0 = d (f16), qs[16] = 18 bytes; Q2_0 = d, qs[16] = 18 bytes.

use super::fp::{fp16_to_fp32, fp32_to_fp16};

pub const Q1_0_SIZE: usize = 18;
pub const Q2_0_SIZE: usize = 18;

pub fn quantize_row_q1_0_ref(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(128).zip(dst.chunks_exact_mut(Q1_0_SIZE)) {
        let mut sum_abs = 0.0f32;
        for &v in x {
            sum_abs += v.abs();
        }
        let d = sum_abs / 128.0;
        y[0..2].copy_from_slice(&fp32_to_fp16(d).to_le_bytes());
        y[2..].fill(0);
        for (j, &v) in x.iter().enumerate() {
            if v >= 0.0 {
                y[2 + j / 8] |= 1 << (j % 8);
            }
        }
    }
}

pub fn dequantize_row_q1_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(Q1_0_SIZE).zip(dst.chunks_exact_mut(128)) {
        let d = fp16_to_fp32(u16::from_le_bytes([b[0], b[1]]));
        for (j, o) in y.iter_mut().enumerate() {
            *o = if (b[2 + j / 8] >> (j % 8)) & 1 != 0 {
                d
            } else {
                -d
            };
        }
    }
}

pub fn quantize_row_q2_0_ref(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(64).zip(dst.chunks_exact_mut(Q2_0_SIZE)) {
        let mut amax = 0.0f32;
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
            }
        }
        let id = if amax > 0.0 { 1.0 / amax } else { 0.0 };
        y[0..2].copy_from_slice(&fp32_to_fp16(amax).to_le_bytes());
        y[2..].fill(0);
        for (j, &v) in x.iter().enumerate() {
            // C's (int)roundf(w * id) + 1, clamped to the four codes
            let q = ((v * id).round() as i32 + 1).clamp(0, 3) as u8;
            y[2 + j / 4] |= q << ((j % 4) * 2);
        }
    }
}

pub fn dequantize_row_q2_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(Q2_0_SIZE).zip(dst.chunks_exact_mut(64)) {
        let d = fp16_to_fp32(u16::from_le_bytes([b[0], b[1]]));
        for (j, o) in y.iter_mut().enumerate() {
            let q = (b[2 + j / 4] >> ((j % 4) * 2)) & 3;
            *o = (q as i32 - 1) as f32 * d;
        }
    }
}
