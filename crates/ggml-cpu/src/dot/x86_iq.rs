//! AVX2 dot products of IQ4_XS, TQ1_0 and TQ2_0 against Q8_K, ported from ggml's AVX2 code
//! (ggml-cpu/arch/x86/quants.c): the same exact integer lanes per super-block, scaled by d
//! into 8 float lanes with one fma (GCC contracts TQ's `mul_ps` + `add_ps` into one), summed
//! at the end as hsum_float_8 does, so the results are llama.cpp's AVX2 digits. The IQ2,
//! IQ3, IQ1 and FP4/Q1_0/Q2_0 kernels live in their own files; this one holds the table.

use std::arch::x86_64::*;

use super::scalar::check;
use super::x86::{h2f_f16c, hsum_ps, load32};
use super::x86_iq2::rdf32;
use super::VecDotFn;
use ggml::quants::KVALUES_IQ4NL;
use ggml::Type;

/// The kernel of `ty` for a CPU with AVX2, FMA and F16C (every AVX-512 level has them too).
pub(super) fn avx2_kernel(ty: Type) -> Option<VecDotFn> {
    use super::{x86_fp4 as f, x86_iq1 as i1, x86_iq2 as i2, x86_iq3 as i3};
    Some(match ty {
        Type::Iq4Xs => iq4_xs_avx2,
        Type::Tq1_0 => tq1_0_avx2,
        Type::Tq2_0 => tq2_0_avx2,
        Type::Iq2Xxs => i2::iq2_xxs_avx2,
        Type::Iq2Xs => i2::iq2_xs_avx2,
        Type::Iq2S => i2::iq2_s_avx2,
        Type::Iq3Xxs => i3::iq3_xxs_avx2,
        Type::Iq3S => i3::iq3_s_avx2,
        Type::Iq1S => i1::iq1_s_avx2,
        Type::Iq1M => i1::iq1_m_avx2,
        Type::Mxfp4 => f::mxfp4_avx2,
        Type::Nvfp4 => f::nvfp4_avx2,
        Type::Q1_0 => f::q1_0_avx2,
        Type::Q2_0 => f::q2_0_avx2,
        _ => return None,
    })
}

macro_rules! wrapper {
    ($name:ident, $kernel:ident, $qk:expr, $xs:expr, $ys:expr) => {
        fn $name(n: usize, x: &[u8], y: &[u8]) -> f32 {
            let nb = check(n, $qk, x, $xs, y, $ys);
            // SAFETY: the table hands out this kernel only after AVX2/FMA/F16C were detected,
            // and `check` proved that x and y hold nb blocks.
            unsafe { $kernel(nb, x, y) }
        }
    };
}

wrapper!(iq4_xs_avx2, iq4_xs_k2, 256, 136, 292);
wrapper!(tq1_0_avx2, tq1_0_k2, 256, 54, 292);
wrapper!(tq2_0_avx2, tq2_0_k2, 256, 66, 292);

/// ggml's mul_add_epi8: pair sums of x * y as i16 (x's signs moved onto y).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn mul_add_epi8(x: __m256i, y: __m256i) -> __m256i {
    _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x))
}

/// 16 bytes of nibbles looked up in `table`: the low nibbles give values 0..16, the high ones
/// 16..32 (ggml's order within a 32-value block).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn lookup_nibbles(v: __m128i, table: __m128i) -> __m256i {
    let m = _mm_set1_epi8(0x0f);
    let lo = _mm_shuffle_epi8(table, _mm_and_si128(v, m));
    let hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(v, 4), m));
    _mm256_set_m128i(hi, lo)
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn load16(p: *const u8) -> __m128i {
    // SAFETY: the caller passes a pointer with 16 readable bytes.
    unsafe { _mm_loadu_si128(p as *const __m128i) }
}

/// The 8 exact i32 lanes of one IQ4_XS block (ggml's sumi1 + sumi2, the scales applied).
///
/// # Safety
/// AVX2 must be available; `bx` and `by` point at one whole block each.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn iq4_xs_lanes(bx: *const u8, by: *const u8) -> __m256i {
    // SAFETY: the caller's promise; every offset below stays inside the two blocks.
    unsafe {
        let table = load16(KVALUES_IQ4NL.as_ptr() as *const u8);
        let mut sh = std::ptr::read_unaligned(bx.add(2) as *const u16);
        let mut sumi1 = _mm256_setzero_si256();
        let mut sumi2 = _mm256_setzero_si256();
        for ib in (0..8).step_by(2) {
            let qs = bx.add(8 + 16 * ib);
            let q8 = by.add(4 + 32 * ib);
            let q4b_1 = lookup_nibbles(load16(qs), table);
            let q4b_2 = lookup_nibbles(load16(qs.add(16)), table);
            let p16_1 = mul_add_epi8(q4b_1, load32(q8));
            let p16_2 = mul_add_epi8(q4b_2, load32(q8.add(32)));
            let sl = *bx.add(4 + ib / 2) as i16;
            let ls1 = ((sl & 0xf) | ((sh << 4) & 0x30) as i16) - 32;
            let ls2 = ((sl >> 4) | ((sh << 2) & 0x30) as i16) - 32;
            sh >>= 4;
            let p_1 = _mm256_madd_epi16(p16_1, _mm256_set1_epi16(ls1));
            let p_2 = _mm256_madd_epi16(p16_2, _mm256_set1_epi16(ls2));
            sumi1 = _mm256_add_epi32(p_1, sumi1);
            sumi2 = _mm256_add_epi32(p_2, sumi2);
        }
        _mm256_add_epi32(sumi1, sumi2)
    }
}

/// # Safety
/// AVX2, FMA and F16C must be available; `x` and `y` must hold `nb` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn iq4_xs_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let mut accum = _mm256_setzero_ps();
    for ibl in 0..nb {
        // SAFETY: block ibl of both operands is within the nb blocks the caller checked.
        unsafe {
            let (bx, by) = (px.add(136 * ibl), py.add(292 * ibl));
            let sum = _mm256_cvtepi32_ps(iq4_xs_lanes(bx, by));
            let d = h2f_f16c(bx) * rdf32(by);
            accum = _mm256_fmadd_ps(_mm256_set1_ps(d), sum, accum);
        }
    }
    hsum_ps(accum)
}

/// The top two bits of 3 * q as ggml gets them: q - 1 (saturating), then two rounding
/// averages with 0 (q + q/2), then bits 6..8.
#[inline]
#[target_feature(enable = "avx2")]
fn top_trit(q: __m256i) -> __m256i {
    let q = _mm256_subs_epu8(q, _mm256_set1_epi8(1));
    let q = _mm256_avg_epu8(q, _mm256_avg_epu8(q, _mm256_setzero_si256()));
    _mm256_and_si256(_mm256_srli_epi16(q, 6), _mm256_set1_epi8(3))
}

/// q * 9 modulo 256 per byte: (q << 3 with the bits that crossed bytes cleared) + q.
#[inline]
#[target_feature(enable = "avx2")]
fn times9(q: __m256i) -> __m256i {
    _mm256_add_epi8(
        _mm256_and_si256(_mm256_slli_epi16(q, 3), _mm256_set1_epi8(-8)),
        q,
    )
}

#[inline]
#[target_feature(enable = "avx2")]
fn times9_128(q: __m128i) -> __m128i {
    _mm_add_epi8(_mm_and_si128(_mm_slli_epi16(q, 3), _mm_set1_epi8(-8)), q)
}

/// # Safety
/// AVX2, FMA and F16C must be available; `x` and `y` must hold `nb` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tq1_0_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let mut sumf = _mm256_setzero_ps();
    for i in 0..nb {
        // SAFETY: block i of both operands is within the nb blocks the caller checked; every
        // offset below stays inside its 54- or 292-byte block.
        unsafe {
            let (bx, by) = (px.add(54 * i), py.add(292 * i));
            let qy = by.add(4);
            // 16-bit sums
            let qx0 = load32(bx);
            let qx1 = _mm256_add_epi8(qx0, _mm256_add_epi8(qx0, qx0));
            let qx2 = times9(qx0);
            let qx3 = times9(qx1);
            let qx4 = times9(qx2);
            let m = |q: __m256i, o: usize| _mm256_maddubs_epi16(top_trit(q), load32(qy.add(o)));
            let (p0, p1, p2, p3, p4) = (m(qx0, 0), m(qx1, 32), m(qx2, 64), m(qx3, 96), m(qx4, 128));
            let mut sumi0 = _mm256_add_epi16(p0, p1);
            let mut sumi1 = _mm256_add_epi16(p2, p3);
            let mut sumi2 = p4;

            // the last 16 bytes of 5 trits, and the 4 bytes of 4 trits
            let qx0 = load16(bx.add(32));
            let qh = std::ptr::read_unaligned(bx.add(48) as *const u32);
            let qx5_l = _mm256_cvtepu8_epi16(_mm_set1_epi32(qh as i32));
            let qx1 = _mm_add_epi8(qx0, _mm_add_epi8(qx0, qx0));
            let qx2 = times9_128(qx0);
            let qx3 = times9_128(qx1);
            let qx4 = times9_128(qx2);
            let qx01 = _mm256_set_m128i(qx1, qx0);
            let qx23 = _mm256_set_m128i(qx3, qx2);
            // AVX2 has no 8-bit multiply: 16 bits, then the low bytes
            let pow = _mm256_set_epi16(27, 27, 27, 27, 9, 9, 9, 9, 3, 3, 3, 3, 1, 1, 1, 1);
            let qx5_l = _mm256_and_si256(_mm256_mullo_epi16(qx5_l, pow), _mm256_set1_epi16(0xff));
            let qx5 = _mm_packus_epi16(
                _mm256_castsi256_si128(qx5_l),
                _mm256_extracti128_si256(qx5_l, 1),
            );
            let qx45 = _mm256_set_m128i(qx5, qx4);
            sumi0 = _mm256_add_epi16(sumi0, m(qx01, 160));
            sumi1 = _mm256_add_epi16(sumi1, m(qx23, 192));
            sumi2 = _mm256_add_epi16(sumi2, m(qx45, 224));

            let ysum = load32(by.add(260));
            let d = _mm256_set1_ps(rdf32(by) * h2f_f16c(bx.add(52)));
            sumi0 = _mm256_sub_epi16(sumi0, ysum);
            sumi0 = _mm256_add_epi16(sumi0, _mm256_add_epi16(sumi1, sumi2));
            let s = _mm256_madd_epi16(sumi0, _mm256_set1_epi16(1));
            sumf = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, sumf);
        }
    }
    hsum_ps(sumf)
}

/// # Safety
/// AVX2, FMA and F16C must be available; `x` and `y` must hold `nb` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tq2_0_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let m3 = _mm256_set1_epi8(3);
    let mut sumf = _mm256_setzero_ps();
    for i in 0..nb {
        // SAFETY: block i of both operands is within the nb blocks the caller checked; every
        // offset below stays inside its 66- or 292-byte block.
        unsafe {
            let (bx, by) = (px.add(66 * i), py.add(292 * i));
            // 16-bit sums: 256 * 127 still fits
            let mut sumi0 = _mm256_setzero_si256();
            let mut sumi1 = _mm256_setzero_si256();
            for j in [0usize, 32] {
                let qx0 = load32(bx.add(j));
                let qx1 = _mm256_and_si256(_mm256_srli_epi16(qx0, 2), m3);
                let qx2 = _mm256_and_si256(_mm256_srli_epi16(qx0, 4), m3);
                let qx3 = _mm256_and_si256(_mm256_srli_epi16(qx0, 6), m3);
                let qx0 = _mm256_and_si256(qx0, m3);
                let qy = by.add(4 + 4 * j);
                let p0 = _mm256_maddubs_epi16(qx0, load32(qy));
                let p1 = _mm256_maddubs_epi16(qx1, load32(qy.add(32)));
                let p2 = _mm256_maddubs_epi16(qx2, load32(qy.add(64)));
                let p3 = _mm256_maddubs_epi16(qx3, load32(qy.add(96)));
                sumi0 = _mm256_add_epi16(sumi0, _mm256_add_epi16(p0, p1));
                sumi1 = _mm256_add_epi16(sumi1, _mm256_add_epi16(p2, p3));
            }
            let ysum = load32(by.add(260));
            let d = _mm256_set1_ps(rdf32(by) * h2f_f16c(bx.add(64)));
            let s = _mm256_sub_epi16(_mm256_add_epi16(sumi0, sumi1), ysum);
            let s = _mm256_madd_epi16(s, _mm256_set1_epi16(1));
            sumf = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, sumf);
        }
    }
    hsum_ps(sumf)
}
