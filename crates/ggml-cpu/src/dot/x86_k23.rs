//! AVX2 and AVX-512 VNNI dot products for Q2_K and Q3_K against Q8_K. They sum exact integers
//! per super-block, then follow ggml's AVX2 lane order (8 float lanes fused per block).

use std::arch::x86_64::*;

use super::scalar::check;
use super::x86::{
    dot_u8_i8_scaled, dot_u8_i8_scaled_vnni, h2f_f16c, hsum_ps, load32, pair16, pair32,
};

pub(super) fn q2_k_avx2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 84, y, 292);
    // SAFETY: handed out only after AVX2/FMA/F16C were detected; `check` proved the sizes.
    unsafe { q2_k_k2(nb, x, y) }
}

pub(super) fn q2_k_avx512(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 84, y, 292);
    // SAFETY: handed out only after AVX-512 VNNI/VL were detected; `check` proved the sizes.
    unsafe { q2_k_k512(nb, x, y) }
}

pub(super) fn q3_k_avx2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 110, y, 292);
    // SAFETY: as for Q2_K.
    unsafe { q3_k_k2(nb, x, y) }
}

pub(super) fn q3_k_avx512(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 110, y, 292);
    // SAFETY: as for Q2_K.
    unsafe { q3_k_k512(nb, x, y) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn shr16(v: __m256i, shift: usize) -> __m256i {
    match shift {
        0 => v,
        1 => _mm256_srli_epi16(v, 1),
        2 => _mm256_srli_epi16(v, 2),
        3 => _mm256_srli_epi16(v, 3),
        4 => _mm256_srli_epi16(v, 4),
        5 => _mm256_srli_epi16(v, 5),
        6 => _mm256_srli_epi16(v, 6),
        _ => _mm256_srli_epi16(v, 7),
    }
}

macro_rules! q2_k_kernel {
    ($name:ident, $feat:literal, $dot:ident, $pair:ident) => {
        /// # Safety
        /// The CPU features must be available; `x`, `y` must hold `nb` blocks.
        #[target_feature(enable = $feat)]
        unsafe fn $name(nb: usize, x: &[u8], y: &[u8]) -> f32 {
            let m3 = _mm256_set1_epi8(3);
            let (px, py) = (x.as_ptr(), y.as_ptr());
            // ggml's AVX2 order (its AVX-512 build runs the same code): one 8-lane float
            // accumulator, per block first fused with -dmin times the 8 lanes of
            // mins * bsums (pairs of sub-blocks), then with d times the 8 lanes of the
            // scaled quant sums; hsum at the end
            let mut accf = _mm256_setzero_ps();
            for i in 0..nb {
                // SAFETY: block i of both operands is within the nb blocks the caller checked;
                // every offset below stays inside its 84- or 292-byte block.
                unsafe {
                    let (bx, by) = (px.add(84 * i), py.add(292 * i));
                    let sc = |j: usize| *bx.add(j) as i32;
                    let yd = std::ptr::read_unaligned(by as *const f32);
                    let dall = yd * h2f_f16c(bx.add(80));
                    let dmin = -yd * h2f_f16c(bx.add(82));
                    let scales = _mm_loadu_si128(bx as *const __m128i);
                    let mins = _mm256_cvtepi8_epi16(_mm_and_si128(
                        _mm_srli_epi16(scales, 4),
                        _mm_set1_epi8(0xF),
                    ));
                    let bsums = _mm256_loadu_si256(by.add(260) as *const __m256i);
                    let prod = _mm256_madd_epi16(mins, bsums);
                    accf = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod), accf);
                    let mut acc = _mm256_setzero_si256();
                    for k in 0..2 {
                        let q2 = load32(bx.add(16 + 32 * k));
                        for s in 0..4 {
                            let q = _mm256_and_si256(shr16(q2, 2 * s), m3);
                            let q8 = load32(by.add(4 + 128 * k + 32 * s));
                            let is = 8 * k + 2 * s;
                            let scale = $pair(sc(is) & 0xF, sc(is + 1) & 0xF);
                            acc = _mm256_add_epi32(acc, $dot(q, q8, scale));
                        }
                    }
                    accf = _mm256_fmadd_ps(_mm256_set1_ps(dall), _mm256_cvtepi32_ps(acc), accf);
                }
            }
            hsum_ps(accf)
        }
    };
}

q2_k_kernel!(q2_k_k2, "avx2,fma,f16c", dot_u8_i8_scaled, pair16);
q2_k_kernel!(
    q2_k_k512,
    "avx2,fma,f16c,avx512vnni,avx512vl",
    dot_u8_i8_scaled_vnni,
    pair32
);

/// The signed 6-bit scale of Q3_K sub-block j.
#[inline]
fn q3k_scale(s: &[u8; 12], j: usize) -> i32 {
    let lo = if j < 8 { s[j] & 0xF } else { s[j - 8] >> 4 };
    ((lo | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) as i32) - 32
}

macro_rules! q3_k_kernel {
    ($name:ident, $feat:literal, $dot:ident, $pair:ident) => {
        /// # Safety
        /// The CPU features must be available; `x`, `y` must hold `nb` blocks.
        #[target_feature(enable = $feat)]
        unsafe fn $name(nb: usize, x: &[u8], y: &[u8]) -> f32 {
            let m3 = _mm256_set1_epi8(3);
            let one = _mm256_set1_epi8(1);
            let four = _mm256_set1_epi8(4);
            let (px, py) = (x.as_ptr(), y.as_ptr());
            // ggml's float order: per block, 8 lanes of exact sums of scale x (q - 4) x q8 (the
            // -4 taken off byte by byte, as its maddubs pair does) fused times d into 8 float
            // lanes, summed last
            let mut accf = _mm256_setzero_ps();
            for i in 0..nb {
                // SAFETY: block i of both operands is within the nb blocks the caller checked;
                // every offset below stays inside its 110- or 292-byte block.
                unsafe {
                    let (bx, by) = (px.add(110 * i), py.add(292 * i));
                    let raw = &*(bx.add(96) as *const [u8; 12]);
                    let mut scales = [0i32; 16];
                    for (j, v) in scales.iter_mut().enumerate() {
                        *v = q3k_scale(raw, j);
                    }
                    let hm = load32(bx);
                    let mut acc = _mm256_setzero_si256();
                    for k in 0..2 {
                        let q3 = load32(bx.add(32 + 32 * k));
                        for s in 0..4 {
                            let low = _mm256_and_si256(shr16(q3, 2 * s), m3);
                            let high =
                                _mm256_slli_epi16(_mm256_and_si256(shr16(hm, 4 * k + s), one), 2);
                            let q = _mm256_or_si256(low, high);
                            let q8 = load32(by.add(4 + 128 * k + 32 * s));
                            let is = 8 * k + 2 * s;
                            let sc = $pair(scales[is], scales[is + 1]);
                            let lanes = _mm256_sub_epi32($dot(q, q8, sc), $dot(four, q8, sc));
                            acc = _mm256_add_epi32(acc, lanes);
                        }
                    }
                    let d = std::ptr::read_unaligned(by as *const f32) * h2f_f16c(bx.add(108));
                    accf = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(acc), accf);
                }
            }
            hsum_ps(accf)
        }
    };
}

q3_k_kernel!(q3_k_k2, "avx2,fma,f16c", dot_u8_i8_scaled, pair16);
q3_k_kernel!(
    q3_k_k512,
    "avx2,fma,f16c,avx512vnni,avx512vl",
    dot_u8_i8_scaled_vnni,
    pair32
);
