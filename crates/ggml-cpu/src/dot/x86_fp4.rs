//! AVX2 dot products of MXFP4, NVFP4, Q1_0 and Q2_0 against Q8_0. The first three are ported
//! from ggml's AVX2 code: exact i32 lanes per block, fused times the block's scales into 8
//! float lanes in ggml's order, hsum_float_8 at the end (MXFP4's odd last block in scalar
//! f32, as ggml). ggml has no x86 Q2_0 kernel (its AVX2 build runs the generic code), so Q2_0
//! sums its integers with AVX2 and scales them in the generic code's f32 order. All four
//! give llama.cpp's AVX2 digits.

use std::arch::x86_64::*;

use super::scalar::check;
use super::x86::{h2f_f16c, hsum_epi32, hsum_ps, load32};
use super::x86_iq::{load16, lookup_nibbles, mul_add_epi8};
use ggml::quants::{e8m0_to_fp32_half, ue4m3_to_fp32, KVALUES_MXFP4};

pub(super) fn mxfp4_avx2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 32, x, 17, y, 34);
    // SAFETY: handed out only after AVX2/FMA/F16C were detected; `check` proved the sizes.
    unsafe { mxfp4_k2(nb, x, y) }
}

pub(super) fn nvfp4_avx2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 64, x, 36, y, 68);
    // SAFETY: as for MXFP4.
    unsafe { nvfp4_k2(nb, x, y) }
}

pub(super) fn q2_0_avx2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 64, x, 18, y, 68);
    // SAFETY: as for MXFP4.
    unsafe { q2_0_k2(nb, x, y) }
}

pub(super) fn q1_0_avx2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 128, x, 18, y, 136);
    // SAFETY: as for MXFP4.
    unsafe { q1_0_k2(nb, x, y) }
}

/// # Safety
/// AVX2, FMA and F16C must be available; `x` and `y` must hold `nb` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn mxfp4_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let table = load16(KVALUES_MXFP4.as_ptr() as *const u8);
    let mone = _mm256_set1_epi16(1);
    let mut accum1 = _mm256_setzero_ps();
    let mut accum2 = _mm256_setzero_ps();
    let mut ib = 0;
    while ib + 1 < nb {
        // SAFETY: blocks ib and ib + 1 of both operands are within the nb blocks checked.
        unsafe {
            let (x0, x1) = (px.add(17 * ib), px.add(17 * ib + 17));
            let (y0, y1) = (py.add(34 * ib), py.add(34 * ib + 34));
            let q4b_1 = lookup_nibbles(load16(x0.add(1)), table);
            let q4b_2 = lookup_nibbles(load16(x1.add(1)), table);
            let p_1 = _mm256_madd_epi16(mul_add_epi8(q4b_1, load32(y0.add(2))), mone);
            let p_2 = _mm256_madd_epi16(mul_add_epi8(q4b_2, load32(y1.add(2))), mone);
            let scale0 = _mm256_set1_ps(h2f_f16c(y0) * e8m0_to_fp32_half(*x0));
            let scale1 = _mm256_set1_ps(h2f_f16c(y1) * e8m0_to_fp32_half(*x1));
            accum1 = _mm256_fmadd_ps(scale0, _mm256_cvtepi32_ps(p_1), accum1);
            accum2 = _mm256_fmadd_ps(scale1, _mm256_cvtepi32_ps(p_2), accum2);
        }
        ib += 2;
    }
    let mut sumf = hsum_ps(_mm256_add_ps(accum1, accum2));
    if ib < nb {
        let bx = &x[17 * ib..17 * ib + 17];
        let by = &y[34 * ib..34 * ib + 34];
        let d = h2f_f16c(by.as_ptr()) * e8m0_to_fp32_half(bx[0]);
        let (mut s1, mut s2) = (0i32, 0i32);
        for j in 0..16 {
            s1 += by[2 + j] as i8 as i32 * KVALUES_MXFP4[(bx[1 + j] & 0xf) as usize] as i32;
            s2 += by[18 + j] as i8 as i32 * KVALUES_MXFP4[(bx[1 + j] >> 4) as usize] as i32;
        }
        // GCC keeps this product and sum apart (no fma), as here
        sumf += d * (s1 + s2) as f32;
    }
    sumf
}

/// ue4m3_to_fp32 of every byte, looked up instead of recomputed four times per block.
fn ue4m3_table() -> &'static [f32; 256] {
    static T: std::sync::OnceLock<[f32; 256]> = std::sync::OnceLock::new();
    T.get_or_init(|| std::array::from_fn(|b| ue4m3_to_fp32(b as u8)))
}

/// # Safety
/// AVX2, FMA and F16C must be available; `x` and `y` must hold `nb` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn nvfp4_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let table = load16(KVALUES_MXFP4.as_ptr() as *const u8);
    let m4b = _mm_set1_epi8(0x0f);
    let mone = _mm256_set1_epi16(1);
    let ue = ue4m3_table();
    let mut accum = _mm256_setzero_ps();
    for ib in 0..nb {
        // SAFETY: block ib (and Q8_0 blocks 2ib, 2ib + 1) are within the nb blocks checked.
        unsafe {
            let bx = px.add(36 * ib);
            let (y0, y1) = (py.add(68 * ib), py.add(68 * ib + 34));
            let q4bits_01 = load16(bx.add(4));
            let q4bits_23 = load16(bx.add(20));
            let look = |v: __m128i| _mm_shuffle_epi8(table, _mm_and_si128(v, m4b));
            let lo01 = look(q4bits_01);
            let hi01 = look(_mm_srli_epi16(q4bits_01, 4));
            let lo23 = look(q4bits_23);
            let hi23 = look(_mm_srli_epi16(q4bits_23, 4));
            // each 16-value sub-block: 8 low nibbles, then 8 high ones
            let q4_01 = _mm256_set_m128i(
                _mm_unpackhi_epi64(lo01, hi01),
                _mm_unpacklo_epi64(lo01, hi01),
            );
            let q4_23 = _mm256_set_m128i(
                _mm_unpackhi_epi64(lo23, hi23),
                _mm_unpacklo_epi64(lo23, hi23),
            );
            let p_1 = _mm256_madd_epi16(mul_add_epi8(q4_01, load32(y0.add(2))), mone);
            let p_2 = _mm256_madd_epi16(mul_add_epi8(q4_23, load32(y1.add(2))), mone);
            let dy0 = h2f_f16c(y0);
            let dy1 = h2f_f16c(y1);
            let s0 = ue[*bx as usize] * dy0;
            let s1 = ue[*bx.add(1) as usize] * dy0;
            let s2 = ue[*bx.add(2) as usize] * dy1;
            let s3 = ue[*bx.add(3) as usize] * dy1;
            let scales01 = _mm256_set_m128(_mm_set1_ps(s1), _mm_set1_ps(s0));
            let scales23 = _mm256_set_m128(_mm_set1_ps(s3), _mm_set1_ps(s2));
            accum = _mm256_fmadd_ps(scales01, _mm256_cvtepi32_ps(p_1), accum);
            accum = _mm256_fmadd_ps(scales23, _mm256_cvtepi32_ps(p_2), accum);
        }
    }
    hsum_ps(accum)
}

/// Byte k of each 8 picks byte k / 8 of the 4 broadcast sign bytes.
static BYTE_SHUF: [u8; 32] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3,
];
static BIT_MASKS: [u8; 32] = [
    1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4,
    8, 16, 32, 64, 128,
];

/// # Safety
/// AVX2, FMA and F16C must be available; `x` and `y` must hold `nb` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q1_0_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let ones_8 = _mm256_set1_epi8(1);
    let ones_16 = _mm256_set1_epi16(1);
    let byte_shuf = load32(BYTE_SHUF.as_ptr());
    let bit_masks = load32(BIT_MASKS.as_ptr());
    let zero = _mm256_setzero_si256();
    let mut acc = _mm256_setzero_ps();
    for ib in 0..nb {
        // SAFETY: block ib (and its four Q8_0 blocks) are within the nb blocks checked.
        unsafe {
            let bx = px.add(18 * ib);
            let yb = py.add(136 * ib);
            // the 32 values of Q8_0 block k: +q where the bit is set, -q where it is clear
            let block = |k: usize| {
                let bits = std::ptr::read_unaligned(bx.add(2 + 4 * k) as *const u32);
                let qy = load32(yb.add(34 * k + 2));
                let spread = _mm256_shuffle_epi8(_mm256_set1_epi32(bits as i32), byte_shuf);
                let sm = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit_masks), zero);
                let sy = _mm256_sub_epi8(_mm256_xor_si256(qy, sm), sm);
                let s32 = _mm256_madd_epi16(_mm256_maddubs_epi16(ones_8, sy), ones_16);
                (
                    _mm256_set1_ps(h2f_f16c(yb.add(34 * k))),
                    _mm256_cvtepi32_ps(s32),
                )
            };
            let (d, s) = block(0);
            let mut acc_block = _mm256_mul_ps(d, s);
            for k in 1..4 {
                let (d, s) = block(k);
                acc_block = _mm256_fmadd_ps(d, s, acc_block);
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f_f16c(bx)), acc_block, acc);
        }
    }
    hsum_ps(acc)
}

/// Byte j reads packed byte j / 4 (the low lane codes 0..16, the high one 16..32).
static CODE_BYTE: [u8; 32] = [
    0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7,
];
/// The low bit of code j within its byte: 1 << 2 (j % 4).
static CODE_LO: [u8; 32] = [
    1, 4, 16, 64, 1, 4, 16, 64, 1, 4, 16, 64, 1, 4, 16, 64, 1, 4, 16, 64, 1, 4, 16, 64, 1, 4, 16,
    64, 1, 4, 16, 64,
];

/// # Safety
/// AVX2, FMA and F16C must be available; `x` and `y` must hold `nb` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q2_0_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let pick = load32(CODE_BYTE.as_ptr());
    let lo = load32(CODE_LO.as_ptr());
    let hi = _mm256_add_epi8(lo, lo);
    let ones8 = _mm256_set1_epi8(1);
    let ones16 = _mm256_set1_epi16(1);
    let mut sumf = 0.0f32;
    for i in 0..nb {
        // SAFETY: block i (and its two Q8_0 blocks) are within the nb blocks checked.
        unsafe {
            let bx = px.add(18 * i);
            let mut sumi = 0.0f32;
            for k in 0..2 {
                let yb = py.add(68 * i + 34 * k);
                let packed = std::ptr::read_unaligned(bx.add(2 + 8 * k) as *const u64);
                let b = _mm256_shuffle_epi8(_mm256_set1_epi64x(packed as i64), pick);
                // code = bit_lo + 2 bit_hi, from the two compare masks (0 or -1)
                let bit_lo = _mm256_cmpeq_epi8(_mm256_and_si256(b, lo), lo);
                let bit_hi = _mm256_cmpeq_epi8(_mm256_and_si256(b, hi), hi);
                let code = _mm256_sub_epi8(
                    _mm256_sub_epi8(_mm256_setzero_si256(), bit_lo),
                    _mm256_add_epi8(bit_hi, bit_hi),
                );
                let qy = load32(yb.add(2));
                // sum of (code - 1) * y, the -1 as the sum of y taken off pair by pair
                let pairs = _mm256_sub_epi16(
                    _mm256_maddubs_epi16(code, qy),
                    _mm256_maddubs_epi16(ones8, qy),
                );
                let s = hsum_epi32(_mm256_madd_epi16(pairs, ones16));
                sumi += h2f_f16c(yb) * s as f32;
            }
            sumf += h2f_f16c(bx) * sumi;
        }
    }
    sumf
}
