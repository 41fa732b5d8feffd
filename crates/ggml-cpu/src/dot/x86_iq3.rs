//! AVX2 dot products of IQ3_XXS and IQ3_S against Q8_K, ported from ggml's AVX2 code: the
//! same 8 exact i32 lanes per super-block, one fma by d into 8 float lanes, hsum_float_8 at
//! the end (llama.cpp's AVX2 digits).

use std::arch::x86_64::*;

use super::scalar::check;
use super::x86::{h2f_f16c, hsum_ps, load32};
use super::x86_iq2::{
    apply_sign_bits, rd32, rdf32, set64, BIT_SELECTOR, KEVEN_SIGNS, SIGN_BYTE_MASK,
};
use ggml::quants::iq_grids::{IQ3S_GRID, IQ3XXS_GRID};

pub(super) fn iq3_xxs_avx2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 98, y, 292);
    // SAFETY: handed out only after AVX2/FMA/F16C were detected; `check` proved the sizes.
    unsafe { iq3_xxs_k2(nb, x, y) }
}

pub(super) fn iq3_s_avx2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 110, y, 292);
    // SAFETY: as for IQ3_XXS.
    unsafe { iq3_s_k2(nb, x, y) }
}

/// _mm256_set_epi32 of 8 grid entries, entry 0 in the lowest lane.
#[inline]
#[target_feature(enable = "avx2")]
fn set32(g: [u32; 8]) -> __m256i {
    _mm256_set_epi32(
        g[7] as i32,
        g[6] as i32,
        g[5] as i32,
        g[4] as i32,
        g[3] as i32,
        g[2] as i32,
        g[1] as i32,
        g[0] as i32,
    )
}

/// The 8 exact i32 lanes of one block (ggml's sumi1 + sumi2, the scales applied).
///
/// # Safety
/// AVX2 must be available; `bx` and `by` point at one whole block each.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn iq3_xxs_lanes(bx: *const u8, by: *const u8) -> __m256i {
    let s64 = |v: u32| KEVEN_SIGNS[(v & 127) as usize];
    // SAFETY: the caller's promise; every offset below stays inside the two blocks.
    unsafe {
        let mut sumi1 = _mm256_setzero_si256();
        let mut sumi2 = _mm256_setzero_si256();
        for step in 0..4 {
            let q8 = by.add(4 + 64 * step);
            let q8_1 = load32(q8);
            let q8_2 = load32(q8.add(32));
            let q3 = bx.add(2 + 16 * step);
            let grid = |o: usize| -> [u32; 8] {
                std::array::from_fn(|k| IQ3XXS_GRID[*q3.add(o + k) as usize])
            };
            let q2_1 = set32(grid(0));
            let q2_2 = set32(grid(8));
            let gas = bx.add(66 + 8 * step);
            let a0 = rd32(gas);
            let a1 = rd32(gas.add(4));
            let s2_1 = set64(s64(a0 >> 21), s64(a0 >> 14), s64(a0 >> 7), s64(a0));
            let s2_2 = set64(s64(a1 >> 21), s64(a1 >> 14), s64(a1 >> 7), s64(a1));
            let dot1 = _mm256_maddubs_epi16(q2_1, _mm256_sign_epi8(q8_1, s2_1));
            let dot2 = _mm256_maddubs_epi16(q2_2, _mm256_sign_epi8(q8_2, s2_2));
            let ls1 = (a0 >> 28) as i16;
            let ls2 = (a1 >> 28) as i16;
            let p1 = _mm256_madd_epi16(dot1, _mm256_set1_epi16(2 * ls1 + 1));
            let p2 = _mm256_madd_epi16(dot2, _mm256_set1_epi16(2 * ls2 + 1));
            sumi1 = _mm256_add_epi32(sumi1, p1);
            sumi2 = _mm256_add_epi32(sumi2, p2);
        }
        _mm256_add_epi32(sumi1, sumi2)
    }
}

/// # Safety
/// AVX2, FMA and F16C must be available; `x` and `y` must hold `nb` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn iq3_xxs_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let mut accumf = _mm256_setzero_ps();
    for i in 0..nb {
        // SAFETY: block i of both operands is within the nb blocks the caller checked; every
        // offset below stays inside its 98- or 292-byte block.
        unsafe {
            let (bx, by) = (px.add(98 * i), py.add(292 * i));
            let d = h2f_f16c(bx) * rdf32(by);
            let lanes = iq3_xxs_lanes(bx, by);
            let sum = _mm256_cvtepi32_ps(lanes);
            accumf = _mm256_fmadd_ps(_mm256_set1_ps(d), sum, accumf);
        }
    }
    0.25 * hsum_ps(accumf)
}

/// The 8 exact i32 lanes of one block (ggml's sumi1 + sumi2, the scales applied).
///
/// # Safety
/// AVX2 must be available; `bx` and `by` point at one whole block each.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn iq3_s_lanes(bx: *const u8, by: *const u8) -> __m256i {
    let mask1 = load32(SIGN_BYTE_MASK.as_ptr());
    let mask2 = load32(BIT_SELECTOR.as_ptr());
    // SAFETY: the caller's promise; every offset below stays inside the two blocks.
    unsafe {
        let (qs, qh, signs, scales) = (bx.add(2), bx.add(66), bx.add(74), bx.add(106));
        let mut sumi1 = _mm256_setzero_si256();
        let mut sumi2 = _mm256_setzero_si256();
        for ib32 in (0..8).step_by(2) {
            let q8 = by.add(4 + 32 * ib32);
            let q8_1 = load32(q8);
            let q8_2 = load32(q8.add(32));
            // the ninth index bit of value k is bit k of the sub-block's qh byte
            let grid = |k: usize| -> [u32; 8] {
                let h = *qh.add(ib32 + k) as usize;
                let q = qs.add(8 * (ib32 + k));
                std::array::from_fn(|j| IQ3S_GRID[*q.add(j) as usize | ((h << (8 - j)) & 256)])
            };
            let q2_1 = set32(grid(0));
            let q2_2 = set32(grid(1));
            let sg = signs.add(4 * ib32);
            let q8s_1 = apply_sign_bits(rd32(sg), q8_1, mask1, mask2);
            let q8s_2 = apply_sign_bits(rd32(sg.add(4)), q8_2, mask1, mask2);
            let dot1 = _mm256_maddubs_epi16(q2_1, q8s_1);
            let dot2 = _mm256_maddubs_epi16(q2_2, q8s_2);
            let sc = *scales.add(ib32 / 2);
            let ls1 = (sc & 0xf) as i16;
            let ls2 = (sc >> 4) as i16;
            let p1 = _mm256_madd_epi16(dot1, _mm256_set1_epi16(2 * ls1 + 1));
            let p2 = _mm256_madd_epi16(dot2, _mm256_set1_epi16(2 * ls2 + 1));
            sumi1 = _mm256_add_epi32(sumi1, p1);
            sumi2 = _mm256_add_epi32(sumi2, p2);
        }
        _mm256_add_epi32(sumi1, sumi2)
    }
}

/// # Safety
/// AVX2, FMA and F16C must be available; `x` and `y` must hold `nb` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn iq3_s_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let mut accumf = _mm256_setzero_ps();
    for i in 0..nb {
        // SAFETY: block i of both operands is within the nb blocks the caller checked; every
        // offset below stays inside its 110- or 292-byte block.
        unsafe {
            let (bx, by) = (px.add(110 * i), py.add(292 * i));
            let d = h2f_f16c(bx) * rdf32(by);
            let lanes = iq3_s_lanes(bx, by);
            let sum = _mm256_cvtepi32_ps(lanes);
            accumf = _mm256_fmadd_ps(_mm256_set1_ps(d), sum, accumf);
        }
    }
    hsum_ps(accumf)
}
