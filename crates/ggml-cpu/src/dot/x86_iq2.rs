//! AVX2 dot products of IQ2_XXS, IQ2_XS and IQ2_S against Q8_K, ported from ggml's AVX2
//! code (ggml-cpu/arch/x86/quants.c): each super-block's 8 i32 lanes hold the same exact
//! integer sums as ggml's, are scaled by d into 8 float lanes with one fma, and the lanes are
//! summed at the end as hsum_float_8 does, so the results are llama.cpp's AVX2 digits.

use std::arch::x86_64::*;

use super::scalar::check;
use super::x86::{h2f_f16c, hsum_ps, load32};
use ggml::quants::iq_grids::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, KSIGNS_IQ2XS};

/// ggml's keven_signs_q2xs: for each 7-bit sign index, 8 bytes of +1 / -1 (the eighth sign
/// is the parity of the seven), read as one little-endian u64.
pub(super) static KEVEN_SIGNS: [u64; 128] = keven_signs();

const fn keven_signs() -> [u64; 128] {
    let mut t = [0u64; 128];
    let mut k = 0;
    while k < 128 {
        let s = KSIGNS_IQ2XS[k];
        let mut v = 0u64;
        let mut j = 0;
        while j < 8 {
            let b: u64 = if s & (1 << j) != 0 { 0xff } else { 0x01 };
            v |= b << (8 * j);
            j += 1;
        }
        t[k] = v;
        k += 1;
    }
    t
}

pub(super) fn iq2_xxs_avx2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 66, y, 292);
    // SAFETY: handed out only after AVX2/FMA/F16C were detected; `check` proved the sizes.
    unsafe { iq2_xxs_k2(nb, x, y) }
}

pub(super) fn iq2_xs_avx2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 74, y, 292);
    // SAFETY: as for IQ2_XXS.
    unsafe { iq2_xs_k2(nb, x, y) }
}

pub(super) fn iq2_s_avx2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 82, y, 292);
    // SAFETY: as for IQ2_XXS.
    unsafe { iq2_s_k2(nb, x, y) }
}

/// _mm256_set_epi64x of four u64 (the highest first, as the intrinsic).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn set64(a3: u64, a2: u64, a1: u64, a0: u64) -> __m256i {
    _mm256_set_epi64x(a3 as i64, a2 as i64, a1 as i64, a0 as i64)
}

#[inline]
pub(super) fn rd32(p: *const u8) -> u32 {
    // SAFETY: every caller passes a pointer with 4 readable bytes inside its block.
    unsafe { std::ptr::read_unaligned(p as *const u32) }
}

#[inline]
pub(super) fn rdf32(p: *const u8) -> f32 {
    f32::from_bits(rd32(p))
}

/// The 8 exact i32 lanes of one block (ggml's sumi1 + sumi2, the scales applied).
///
/// # Safety
/// AVX2 must be available; `bx` and `by` point at one whole block each.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn iq2_xxs_lanes(bx: *const u8, by: *const u8) -> __m256i {
    let s64 = |v: u32| KEVEN_SIGNS[(v & 127) as usize];
    // SAFETY: the caller's promise; every offset below stays inside the two blocks.
    unsafe {
        let mut sumi1 = _mm256_setzero_si256();
        let mut sumi2 = _mm256_setzero_si256();
        for ib in 0..4 {
            let q2 = bx.add(2 + 16 * ib);
            let q8 = by.add(4 + 64 * ib);
            let q8_1 = load32(q8);
            let q8_2 = load32(q8.add(32));
            let aux = [rd32(q2), rd32(q2.add(4)), rd32(q2.add(8)), rd32(q2.add(12))];
            let g = |k: usize| IQ2XXS_GRID[*q2.add(k) as usize];
            let q2_1 = set64(g(3), g(2), g(1), g(0));
            let q2_2 = set64(g(11), g(10), g(9), g(8));
            let s2_1 = set64(
                s64(aux[1] >> 21),
                s64(aux[1] >> 14),
                s64(aux[1] >> 7),
                s64(aux[1]),
            );
            let s2_2 = set64(
                s64(aux[3] >> 21),
                s64(aux[3] >> 14),
                s64(aux[3] >> 7),
                s64(aux[3]),
            );
            let dot1 = _mm256_maddubs_epi16(q2_1, _mm256_sign_epi8(q8_1, s2_1));
            let dot2 = _mm256_maddubs_epi16(q2_2, _mm256_sign_epi8(q8_2, s2_2));
            let ls1 = (aux[1] >> 28) as i16;
            let ls2 = (aux[3] >> 28) as i16;
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
unsafe fn iq2_xxs_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let mut accumf = _mm256_setzero_ps();
    for i in 0..nb {
        // SAFETY: block i of both operands is within the nb blocks the caller checked; every
        // offset below stays inside its 66- or 292-byte block.
        unsafe {
            let (bx, by) = (px.add(66 * i), py.add(292 * i));
            let d = h2f_f16c(bx) * rdf32(by);
            let lanes = iq2_xxs_lanes(bx, by);
            let sum = _mm256_cvtepi32_ps(lanes);
            accumf = _mm256_fmadd_ps(_mm256_set1_ps(d), sum, accumf);
        }
    }
    0.125 * hsum_ps(accumf)
}

/// ggml's get_scale_shuffle: bytes 2i (8 times) then 2i + 1 (8 times).
static SCALE_SHUFFLE: [[u8; 16]; 8] = {
    let mut t = [[0u8; 16]; 8];
    let mut i = 0;
    while i < 8 {
        let mut j = 0;
        while j < 16 {
            t[i][j] = (2 * i + j / 8) as u8;
            j += 1;
        }
        i += 1;
    }
    t
};

static SIGN_SHUFFLE_1: [u8; 32] = [
    0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6,
];
static SIGN_SHUFFLE_2: [u8; 32] = [
    8, 8, 8, 8, 8, 8, 8, 8, 10, 10, 10, 10, 10, 10, 10, 10, 12, 12, 12, 12, 12, 12, 12, 12, 14, 14,
    14, 14, 14, 14, 14, 14,
];
/// Bit j of each group of 8 bytes.
pub(super) static BIT_SELECTOR: [u8; 32] = [
    1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4,
    8, 16, 32, 64, 128,
];
/// 0x80 where the 4-bit index has odd parity.
static BIT_HELPER: [u8; 32] = [
    0x00, 0x80, 0x80, 0x00, 0x80, 0x00, 0x00, 0x80, 0x80, 0x00, 0x00, 0x80, 0x00, 0x80, 0x80, 0x00,
    0x00, 0x80, 0x80, 0x00, 0x80, 0x00, 0x00, 0x80, 0x80, 0x00, 0x00, 0x80, 0x00, 0x80, 0x80, 0x00,
];

#[inline]
#[target_feature(enable = "avx2")]
fn load16(p: &[u8; 16]) -> __m128i {
    // SAFETY: `p` is 16 readable bytes.
    unsafe { _mm_loadu_si128(p.as_ptr() as *const __m128i) }
}

/// The signs of 32 q8 values from 4 sign bytes chosen by `shuffle` out of `full`.
#[inline]
#[target_feature(enable = "avx2")]
fn xs_signs(full: __m256i, shuffle: __m256i, bits: __m256i, q8: __m256i) -> __m256i {
    let s = _mm256_shuffle_epi8(full, shuffle);
    let s = _mm256_cmpeq_epi8(_mm256_and_si256(s, bits), bits);
    _mm256_sign_epi8(q8, _mm256_or_si256(s, _mm256_set1_epi8(1)))
}

/// The 8 exact i32 lanes of one block (ggml's sumi1 + sumi2, the scales applied).
///
/// # Safety
/// AVX2 must be available; `bx` and `by` point at one whole block each.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn iq2_xs_lanes(bx: *const u8, by: *const u8) -> __m256i {
    let bits = load32(BIT_SELECTOR.as_ptr());
    let shuf1 = load32(SIGN_SHUFFLE_1.as_ptr());
    let shuf2 = load32(SIGN_SHUFFLE_2.as_ptr());
    let helper = load32(BIT_HELPER.as_ptr());
    let m511 = _mm256_set1_epi16(511);
    let m4 = _mm_set1_epi8(0xf);
    let m1 = _mm_set1_epi8(1);
    // SAFETY: the caller's promise; every offset below stays inside the two blocks.
    unsafe {
        let aux64 = std::ptr::read_unaligned(bx.add(66) as *const u64);
        let stmp = _mm_set1_epi64x(aux64 as i64);
        let stmp = _mm_unpacklo_epi8(
            _mm_and_si128(stmp, m4),
            _mm_and_si128(_mm_srli_epi16(stmp, 4), m4),
        );
        let scales = _mm_add_epi8(_mm_slli_epi16(stmp, 1), m1);
        let mut sumi1 = _mm256_setzero_si256();
        let mut sumi2 = _mm256_setzero_si256();
        for half in 0..2 {
            let ib32 = 4 * half;
            let q2_data = load32(bx.add(2 + 32 * half));
            let mut gindex = [0u16; 16];
            _mm256_storeu_si256(
                gindex.as_mut_ptr() as *mut __m256i,
                _mm256_and_si256(q2_data, m511),
            );
            let partial = _mm256_srli_epi16(q2_data, 9);
            let upper = _mm256_srli_epi16(q2_data, 13);
            let odd = _mm256_shuffle_epi8(helper, _mm256_xor_si256(partial, upper));
            let full = _mm256_or_si256(partial, odd);

            let q8 = by.add(4 + 128 * half);
            let g = |k: usize| IQ2XS_GRID[gindex[k] as usize];
            let q2_1 = set64(g(3), g(2), g(1), g(0));
            let q2_2 = set64(g(7), g(6), g(5), g(4));
            let q2_3 = set64(g(11), g(10), g(9), g(8));
            let q2_4 = set64(g(15), g(14), g(13), g(12));

            let lo = _mm256_castsi256_si128(full);
            let hi = _mm256_extracti128_si256(full, 1);
            let full1 = _mm256_set_m128i(lo, lo);
            let full2 = _mm256_set_m128i(hi, hi);
            let q8s_1 = xs_signs(full1, shuf1, bits, load32(q8));
            let q8s_2 = xs_signs(full1, shuf2, bits, load32(q8.add(32)));
            let q8s_3 = xs_signs(full2, shuf1, bits, load32(q8.add(64)));
            let q8s_4 = xs_signs(full2, shuf2, bits, load32(q8.add(96)));

            let dot1 = _mm256_maddubs_epi16(q2_1, q8s_1);
            let dot2 = _mm256_maddubs_epi16(q2_2, q8s_2);
            let dot3 = _mm256_maddubs_epi16(q2_3, q8s_3);
            let dot4 = _mm256_maddubs_epi16(q2_4, q8s_4);

            let sc = |k: usize| {
                _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, load16(&SCALE_SHUFFLE[k])))
            };
            sumi1 = _mm256_add_epi32(sumi1, _mm256_madd_epi16(dot1, sc(ib32)));
            sumi2 = _mm256_add_epi32(sumi2, _mm256_madd_epi16(dot2, sc(ib32 + 1)));
            sumi1 = _mm256_add_epi32(sumi1, _mm256_madd_epi16(dot3, sc(ib32 + 2)));
            sumi2 = _mm256_add_epi32(sumi2, _mm256_madd_epi16(dot4, sc(ib32 + 3)));
        }
        _mm256_add_epi32(sumi1, sumi2)
    }
}

/// # Safety
/// AVX2, FMA and F16C must be available; `x` and `y` must hold `nb` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn iq2_xs_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let mut accumf = _mm256_setzero_ps();
    for i in 0..nb {
        // SAFETY: block i of both operands is within the nb blocks the caller checked; every
        // offset below stays inside its 74- or 292-byte block.
        unsafe {
            let (bx, by) = (px.add(74 * i), py.add(292 * i));
            let d = h2f_f16c(bx) * rdf32(by);
            let lanes = iq2_xs_lanes(bx, by);
            let sum = _mm256_cvtepi32_ps(lanes);
            accumf = _mm256_fmadd_ps(_mm256_set1_ps(d), sum, accumf);
        }
    }
    0.125 * hsum_ps(accumf)
}

/// Bytes 0..8 pick byte 0, 8..16 byte 1, and so on: one sign byte per 8 values.
pub(super) static SIGN_BYTE_MASK: [u8; 32] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3,
];

/// q8 with the signs of the 32 bits of `signs` (bit j negates value j).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn apply_sign_bits(signs: u32, q8: __m256i, mask1: __m256i, mask2: __m256i) -> __m256i {
    let aux = _mm256_and_si256(
        _mm256_shuffle_epi8(_mm256_set1_epi32(signs as i32), mask1),
        mask2,
    );
    let s = _mm256_cmpeq_epi8(aux, mask2);
    _mm256_sub_epi8(_mm256_xor_si256(s, q8), s)
}

/// K_SHUFFLE of get_scale_shuffle_k4(i): the i16 at 2i, in every lane.
#[inline]
#[target_feature(enable = "avx2")]
fn scale_shuffle_k4(i: usize) -> __m256i {
    let b = (2 * i) as i16;
    _mm256_set1_epi16(b | ((b + 1) << 8))
}

/// The 8 exact i32 lanes of one block (ggml's sumi1 + sumi2, the scales applied).
///
/// # Safety
/// AVX2 must be available; `bx` and `by` point at one whole block each.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn iq2_s_lanes(bx: *const u8, by: *const u8) -> __m256i {
    let m4 = _mm_set1_epi8(0xf);
    let m1 = _mm_set1_epi8(1);
    let mask1 = load32(SIGN_BYTE_MASK.as_ptr());
    let mask2 = load32(BIT_SELECTOR.as_ptr());
    // SAFETY: the caller's promise; every offset below stays inside the two blocks.
    unsafe {
        let qs = bx.add(2);
        let signs = bx.add(34);
        let qh = bx.add(66);
        let aux64 = std::ptr::read_unaligned(bx.add(74) as *const u64);
        let both = _mm_set_epi64x((aux64 >> 4) as i64, aux64 as i64);
        let scales8 = _mm_add_epi8(_mm_slli_epi16(_mm_and_si128(both, m4), 1), m1);
        // i16 order: 0 2 4 .. 14 in the low lane, 1 3 .. 15 in the high one
        let scales16 = _mm256_cvtepi8_epi16(scales8);
        let mut sumi1 = _mm256_setzero_si256();
        let mut sumi2 = _mm256_setzero_si256();
        for ib32 in (0..8).step_by(2) {
            let q8 = by.add(4 + 32 * ib32);
            let q8_1 = load32(q8);
            let q8_2 = load32(q8.add(32));
            let q = qs.add(4 * ib32);
            let h = |k: usize| *qh.add(ib32 + k) as usize;
            let g = |j: usize, k: usize, sh: u32| {
                IQ2S_GRID[*q.add(j) as usize | ((h(k) << sh) & 0x300)]
            };
            let q2_1 = set64(g(3, 0, 2), g(2, 0, 4), g(1, 0, 6), g(0, 0, 8));
            let q2_2 = set64(g(7, 1, 2), g(6, 1, 4), g(5, 1, 6), g(4, 1, 8));
            let sg = signs.add(4 * ib32);
            let q8s_1 = apply_sign_bits(rd32(sg), q8_1, mask1, mask2);
            let q8s_2 = apply_sign_bits(rd32(sg.add(4)), q8_2, mask1, mask2);
            let dot1 = _mm256_maddubs_epi16(q2_1, q8s_1);
            let dot2 = _mm256_maddubs_epi16(q2_2, q8s_2);
            let sc1 = _mm256_shuffle_epi8(scales16, scale_shuffle_k4(ib32));
            let sc2 = _mm256_shuffle_epi8(scales16, scale_shuffle_k4(ib32 + 1));
            sumi1 = _mm256_add_epi32(sumi1, _mm256_madd_epi16(dot1, sc1));
            sumi2 = _mm256_add_epi32(sumi2, _mm256_madd_epi16(dot2, sc2));
        }
        _mm256_add_epi32(sumi1, sumi2)
    }
}

/// # Safety
/// AVX2, FMA and F16C must be available; `x` and `y` must hold `nb` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn iq2_s_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let mut accumf = _mm256_setzero_ps();
    for i in 0..nb {
        // SAFETY: block i of both operands is within the nb blocks the caller checked; every
        // offset below stays inside its 82- or 292-byte block.
        unsafe {
            let (bx, by) = (px.add(82 * i), py.add(292 * i));
            let d = h2f_f16c(bx) * rdf32(by);
            let lanes = iq2_s_lanes(bx, by);
            let sum = _mm256_cvtepi32_ps(lanes);
            accumf = _mm256_fmadd_ps(_mm256_set1_ps(d), sum, accumf);
        }
    }
    0.125 * hsum_ps(accumf)
}
