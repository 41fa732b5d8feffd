//! The ternary types of BitNet b1.58 and TriLMs (ggml-quants.c "Ternary (de)-quantization"):
//! TQ1_0 packs five trits per byte (1.6875 bpw), TQ2_0 four 2-bit codes per byte (2.0625 bpw).
//! Both ignore an importance matrix, as ggml's quantize_tq*_0 do.
//!
//! Layouts (ggml-common.h): TQ1_0 = qs[48], qh[4], d (f16) = 54 bytes; TQ2_0 = qs[64], d = 66.

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

use super::fp::{fp16_to_fp32, fp32_to_fp16};

pub const TQ1_0_SIZE: usize = 54;
pub const TQ2_0_SIZE: usize = 66;
const QK_K: usize = 256;

/// The block's scale: its largest |x|, and that scale's inverse (0 for an all-zero block).
fn absmax_scale(x: &[f32]) -> (f32, f32) {
    let mut amax = 0.0f32;
    for &v in x {
        amax = amax.max(v.abs());
    }
    (amax, if amax != 0.0 { 1.0 / amax } else { 0.0 })
}

/// -1, 0, 1 -> 0, 1, 2, with C's lroundf (halves away from zero) truncated to a byte as
/// ggml's uint8_t arithmetic does.
fn trit(v: f32, id: f32) -> u8 {
    ((v * id).round() as i64 + 1) as u8
}

/// Packs five (or four, then shifted) trits most significant first into one byte holding
/// ceil(q * 256 / 243), so that multiplying by 3^n and taking the top bits reads trit n.
fn pack_trits(q: u8) -> u8 {
    (q as u16 * 256).div_ceil(243) as u8
}

pub fn quantize_row_tq1_0_ref(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(QK_K).zip(dst.chunks_exact_mut(TQ1_0_SIZE)) {
        let (d, id) = absmax_scale(x);
        y[52..54].copy_from_slice(&fp32_to_fp16(d).to_le_bytes());
        // 32 bytes of 5 trits each over x[0..160], then 16 bytes over x[160..240]
        for m in 0..32 {
            let mut q = 0u8;
            for n in 0..5 {
                q = q.wrapping_mul(3).wrapping_add(trit(x[m + n * 32], id));
            }
            y[m] = pack_trits(q);
        }
        for m in 0..16 {
            let mut q = 0u8;
            for n in 0..5 {
                q = q
                    .wrapping_mul(3)
                    .wrapping_add(trit(x[160 + m + n * 16], id));
            }
            y[32 + m] = pack_trits(q);
        }
        // 4 bytes of 4 trits over x[240..256], the first trit moved to the top
        for j in 0..4 {
            let mut q = 0u8;
            for m in 0..4 {
                q = q.wrapping_mul(3).wrapping_add(trit(x[240 + j + m * 4], id));
            }
            y[48 + j] = pack_trits(q.wrapping_mul(3));
        }
    }
}

const POW3: [u8; 6] = [1, 3, 9, 27, 81, 243];

/// Trit `n` (0-based from the most significant) of a packed byte, as -1, 0 or 1.
#[inline]
pub fn unpack_trit(b: u8, n: usize) -> i32 {
    let q = b.wrapping_mul(POW3[n]);
    ((q as u16 * 3) >> 8) as i32 - 1
}

pub fn dequantize_row_tq1_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(TQ1_0_SIZE).zip(dst.chunks_exact_mut(QK_K)) {
        let d = fp16_to_fp32(u16::from_le_bytes([b[52], b[53]]));
        let mut o = 0;
        for n in 0..5 {
            for m in 0..32 {
                y[o] = unpack_trit(b[m], n) as f32 * d;
                o += 1;
            }
        }
        for n in 0..5 {
            for m in 0..16 {
                y[o] = unpack_trit(b[32 + m], n) as f32 * d;
                o += 1;
            }
        }
        for n in 0..4 {
            for j in 0..4 {
                y[o] = unpack_trit(b[48 + j], n) as f32 * d;
                o += 1;
            }
        }
    }
}

pub fn quantize_row_tq2_0_ref(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(QK_K).zip(dst.chunks_exact_mut(TQ2_0_SIZE)) {
        let (d, id) = absmax_scale(x);
        y[64..66].copy_from_slice(&fp32_to_fp16(d).to_le_bytes());
        for j in (0..64).step_by(32) {
            let xs = &x[4 * j..];
            for m in 0..32 {
                let mut q = 0u8;
                for n in 0..4 {
                    q = q.wrapping_add((trit(xs[m + n * 32], id) & 3) << (2 * n));
                }
                y[j + m] = q;
            }
        }
    }
}

pub fn dequantize_row_tq2_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(TQ2_0_SIZE).zip(dst.chunks_exact_mut(QK_K)) {
        let d = fp16_to_fp32(u16::from_le_bytes([b[64], b[65]]));
        let mut o = 0;
        for j in (0..64).step_by(32) {
            for l in 0..4 {
                for m in 0..32 {
                    let q = (b[j + m] >> (2 * l)) & 3;
                    y[o] = (q as i32 - 1) as f32 * d;
                    o += 1;
                }
            }
        }
    }
}
