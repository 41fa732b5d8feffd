//! AVX2 dot products of IQ1_S and IQ1_M against Q8_K, ported from ggml's AVX2 code: the same
//! exact i32 lanes per super-block, scaled by d into float lanes with one fma, and for IQ1_S
//! the delta term in one f32 that GCC contracts into an fma (`accum1 += d * sumi1`), so the
//! results are llama.cpp's AVX2 digits.

use std::arch::x86_64::*;

use super::scalar::check;
use super::x86::{h2f_f16c, hsum_ps, load32};
use super::x86_iq2::{rdf32, set64};
use ggml::quants::iq_grids::{IQ1M_DELTA, IQ1S_DELTA, IQ1S_GRID};

pub(super) fn iq1_s_avx2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 50, y, 292);
    // SAFETY: handed out only after AVX2/FMA/F16C were detected; `check` proved the sizes.
    unsafe { iq1_s_k2(nb, x, y) }
}

pub(super) fn iq1_m_avx2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 56, y, 292);
    // SAFETY: as for IQ1_S.
    unsafe { iq1_m_k2(nb, x, y) }
}

#[inline]
fn rd16(p: *const u8) -> u16 {
    // SAFETY: every caller passes a pointer with 2 readable bytes inside its block.
    unsafe { std::ptr::read_unaligned(p as *const u16) }
}

/// ggml's mul_add_epi8: pair sums of x * y as i16 (x's signs moved onto y).
#[inline]
#[target_feature(enable = "avx2")]
fn mul_add_epi8(x: __m256i, y: __m256i) -> __m256i {
    _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x))
}

/// One IQ1_S block's exact integer parts: ggml's 8 i32 lanes (scales times grid values times
/// q8) and its delta sum (scales times signs times q8 sums).
///
/// # Safety
/// AVX2 must be available; `bx` and `by` point at one whole block each.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn iq1_s_lanes(bx: *const u8, by: *const u8) -> (__m256i, i32) {
    // SAFETY: the caller's promise; every offset below stays inside the two blocks.
    unsafe {
        let bsum = |j: usize| rd16(by.add(260 + 2 * j)) as i16 as i32;
        let mut sumi = _mm256_setzero_si256();
        let mut sumi1 = 0i32;
        for ib in (0..8).step_by(2) {
            let qs = bx.add(2 + 4 * ib);
            let h0 = rd16(bx.add(34 + 2 * ib)) as usize;
            let h1 = rd16(bx.add(36 + 2 * ib)) as usize;
            // SAFETY (of the unchecked lookup): a byte or'ed with bits 8..10 is below 2048,
            // the grid's length
            let g = |k: usize, idx_hi: usize| {
                *IQ1S_GRID.get_unchecked(*qs.add(k) as usize | (idx_hi & 0x700))
            };
            let q1b_1 = set64(
                g(3, (h0 >> 1) & 0x700),
                g(2, (h0 << 2) & 0x700),
                g(1, (h0 << 5) & 0x700),
                g(0, (h0 << 8) & 0x700),
            );
            let q1b_2 = set64(
                g(7, (h1 >> 1) & 0x700),
                g(6, (h1 << 2) & 0x700),
                g(5, (h1 << 5) & 0x700),
                g(4, (h1 << 8) & 0x700),
            );
            let q8 = by.add(4 + 32 * ib);
            let dot1 = mul_add_epi8(q1b_1, load32(q8));
            let dot2 = mul_add_epi8(q1b_2, load32(q8.add(32)));
            let ls1 = 2 * ((h0 >> 12) & 7) as i16 + 1;
            let ls2 = 2 * ((h1 >> 12) & 7) as i16 + 1;
            let p1 = _mm256_madd_epi16(dot1, _mm256_set1_epi16(ls1));
            let p2 = _mm256_madd_epi16(dot2, _mm256_set1_epi16(ls2));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p1, p2));
            let sign = |h: usize| if h & 0x8000 != 0 { -1 } else { 1 };
            sumi1 += (bsum(2 * ib) + bsum(2 * ib + 1)) * sign(h0) * ls1 as i32
                + (bsum(2 * ib + 2) + bsum(2 * ib + 3)) * sign(h1) * ls2 as i32;
        }
        (sumi, sumi1)
    }
}

/// # Safety
/// AVX2, FMA and F16C must be available; `x` and `y` must hold `nb` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn iq1_s_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let mut accum = _mm256_setzero_ps();
    let mut accum1 = 0.0f32;
    for i in 0..nb {
        // SAFETY: block i of both operands is within the nb blocks the caller checked; every
        // offset below stays inside its 50- or 292-byte block.
        unsafe {
            let (bx, by) = (px.add(50 * i), py.add(292 * i));
            let (sumi, sumi1) = iq1_s_lanes(bx, by);
            let d = rdf32(by) * h2f_f16c(bx);
            accum = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), accum);
            accum1 = d.mul_add(sumi1 as f32, accum1);
        }
    }
    hsum_ps(accum) + IQ1S_DELTA * accum1
}

/// One IQ1_M block's exact integer parts: ggml's lanes of grid sums and of delta sums (both
/// with the scales applied), and the bits of its fp16 scale.
///
/// # Safety
/// AVX2 must be available; `bx` and `by` point at one whole block each.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn iq1_m_lanes(bx: *const u8, by: *const u8) -> (__m256i, __m256i, u16) {
    let mask = _mm256_set1_epi16(0x7);
    let mone = _mm256_set1_epi16(1);
    let mone8 = _mm256_set1_epi8(1);
    let mtwo8 = _mm256_set1_epi8(2);
    // vpshufb cannot cross 128-bit lanes, so the odd shifts go to the upper half
    let scales_shift = _mm256_set_epi64x(9, 3, 6, 0);
    // SAFETY: the caller's promise; every offset below stays inside the two blocks.
    unsafe {
        let sc = |j: usize| rd16(bx.add(48 + 2 * j));
        let scale_bits =
            (sc(0) >> 12) | ((sc(1) >> 8) & 0x00f0) | ((sc(2) >> 4) & 0x0f00) | (sc(3) & 0xf000);
        let sc64 = std::ptr::read_unaligned(bx.add(48) as *const u64);
        let scales = _mm256_srlv_epi64(_mm256_set1_epi64x(sc64 as i64), scales_shift);
        let scales = _mm256_add_epi16(_mm256_slli_epi16(_mm256_and_si256(scales, mask), 1), mone);
        let mut idx1 = _mm256_set1_epi16(0x0100);
        let mut idx2 = _mm256_add_epi8(idx1, _mm256_set1_epi8(8));
        let mut sumi1 = _mm256_setzero_si256();
        let mut sumi2 = _mm256_setzero_si256();
        for ib in (0..8).step_by(2) {
            let qs = bx.add(4 * ib);
            let qh = bx.add(32 + 2 * ib);
            let h = |k: usize| *qh.add(k) as usize;
            // SAFETY (of the unchecked lookup): a byte or'ed with bits 8..10 is below 2048,
            // the grid's length
            let g = |k: usize, idx_hi: usize| {
                *IQ1S_GRID.get_unchecked(*qs.add(k) as usize | (idx_hi & 0x700))
            };
            let q1b_1 = set64(
                g(3, (h(1) << 4) & 0x700),
                g(2, (h(1) << 8) & 0x700),
                g(1, (h(0) << 4) & 0x700),
                g(0, (h(0) << 8) & 0x700),
            );
            let q1b_2 = set64(
                g(7, (h(3) << 4) & 0x700),
                g(6, (h(3) << 8) & 0x700),
                g(5, (h(2) << 4) & 0x700),
                g(4, (h(2) << 8) & 0x700),
            );
            // all ones (-1) where the delta bit is set, else +1 bytes; without a branch
            let dl = |k: usize, m: usize| {
                0u64.wrapping_sub((h(k) & m != 0) as u64) | 0x0101_0101_0101_0101
            };
            let delta1 = set64(dl(1, 0x80), dl(1, 0x08), dl(0, 0x80), dl(0, 0x08));
            let delta2 = set64(dl(3, 0x80), dl(3, 0x08), dl(2, 0x80), dl(2, 0x08));
            let q8 = by.add(4 + 32 * ib);
            let q8b_1 = load32(q8);
            let q8b_2 = load32(q8.add(32));
            let dot1 = mul_add_epi8(q1b_1, q8b_1);
            let dot2 = mul_add_epi8(q1b_2, q8b_2);
            let dot3 = _mm256_maddubs_epi16(mone8, _mm256_sign_epi8(q8b_1, delta1));
            let dot4 = _mm256_maddubs_epi16(mone8, _mm256_sign_epi8(q8b_2, delta2));
            let scale1 = _mm256_shuffle_epi8(scales, idx1);
            let scale2 = _mm256_shuffle_epi8(scales, idx2);
            idx1 = _mm256_add_epi8(idx1, mtwo8);
            idx2 = _mm256_add_epi8(idx2, mtwo8);
            let p1 = _mm256_madd_epi16(dot1, scale1);
            let p2 = _mm256_madd_epi16(dot2, scale2);
            let p3 = _mm256_madd_epi16(dot3, scale1);
            let p4 = _mm256_madd_epi16(dot4, scale2);
            sumi1 = _mm256_add_epi32(sumi1, _mm256_add_epi32(p1, p2));
            sumi2 = _mm256_add_epi32(sumi2, _mm256_add_epi32(p3, p4));
        }
        (sumi1, sumi2, scale_bits)
    }
}

/// # Safety
/// AVX2, FMA and F16C must be available; `x` and `y` must hold `nb` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn iq1_m_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let mut accum1 = _mm256_setzero_ps();
    let mut accum2 = _mm256_setzero_ps();
    for i in 0..nb {
        // SAFETY: block i of both operands is within the nb blocks the caller checked; every
        // offset below stays inside its 56- or 292-byte block.
        unsafe {
            let (bx, by) = (px.add(56 * i), py.add(292 * i));
            let (sumi1, sumi2, scale_bits) = iq1_m_lanes(bx, by);
            let mut d16 = [0u8; 2];
            d16.copy_from_slice(&scale_bits.to_le_bytes());
            let d = _mm256_set1_ps(rdf32(by) * h2f_f16c(d16.as_ptr()));
            accum1 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi1), accum1);
            accum2 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi2), accum2);
        }
    }
    hsum_ps(accum1) + IQ1M_DELTA * hsum_ps(accum2)
}
