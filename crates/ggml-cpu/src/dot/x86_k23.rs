//! AVX2 dot products for Q2_K and Q3_K against Q8_K, on AVX-512 CPUs too. They sum exact
//! integers per super-block, then follow ggml's AVX2 lane order (8 float lanes fused per
//! block). They are shaped as ggml's: the block's scales widened into 16-bit lanes once and
//! broadcast pair by pair with `pshufb`, Q3_K's +4 code bias taken off in 16-bit lanes before
//! the scales (the integer lanes are exact, so they equal ggml's whatever the order). (The
//! AVX-512 VNNI variants they replaced, vpdpbusd + vpmulld per sub-block pair and each scale
//! unpacked in scalar code, ran at half their speed on Zen 4: the 1.1B Q3_K_M tg16 -t 1 13.3
//! -> 22.4 t/s, Q2_K 17-20 -> 40.7.)

use std::arch::x86_64::*;

use super::scalar::check;
use super::x86::{h2f_f16c, hsum_ps, load32};

pub(super) fn q2_k_avx2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 84, y, 292);
    // SAFETY: handed out only after AVX2/FMA/F16C were detected; `check` proved the sizes.
    unsafe { q2_k_k2(nb, x, y) }
}

pub(super) fn q3_k_avx2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 110, y, 292);
    // SAFETY: as for Q2_K.
    unsafe { q3_k_k2(nb, x, y) }
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

/// `pshufb` control giving 16-bit scale 2s in every lane of the low 128 bits and 2s + 1 in the
/// high 128 bits, from a vector holding eight 16-bit scales in both halves (ggml's
/// get_scale_shuffle_q3k).
#[inline]
#[target_feature(enable = "avx2")]
fn pair_shuffle(s: i32) -> __m256i {
    let lane = |i: i32| _mm_set1_epi16((((2 * i + 1) << 8) | (2 * i)) as i16);
    _mm256_set_m128i(lane(2 * s + 1), lane(2 * s))
}

/// Eight 16-bit values, lanes 0..8 of `v`, in both halves / lanes 8..16 in both halves.
#[inline]
#[target_feature(enable = "avx2")]
fn halves(v: __m256i) -> [__m256i; 2] {
    [
        _mm256_permute2x128_si256::<0x00>(v, v),
        _mm256_permute2x128_si256::<0x11>(v, v),
    ]
}

/// [yd * d, -yd * dmin] from a block's adjacent f16 d and dmin at `p` and the column's f32
/// scale at `py` (each the scalar product's bits: the conversion and the sign are exact).
///
/// # Safety
/// `p` has 4 readable bytes, `py` 4.
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn scales_times(p: *const u8, py: *const u8) -> __m128 {
    // SAFETY: guaranteed by the caller.
    let (h, yd) = unsafe {
        (
            (p as *const i32).read_unaligned(),
            _mm_broadcast_ss(&*(py as *const f32)),
        )
    };
    let dm = _mm_cvtph_ps(_mm_cvtsi32_si128(h));
    _mm_mul_ps(_mm_xor_ps(yd, _mm_setr_ps(0.0, -0.0, 0.0, 0.0)), dm)
}

/// # Safety
/// The CPU has AVX2, FMA and F16C; `x`, `y` hold `nb` Q2_K / Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q2_k_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let m3 = _mm256_set1_epi8(3);
    let m4 = _mm_set1_epi8(0xF);
    let (px, py) = (x.as_ptr(), y.as_ptr());
    // ggml's AVX2 order: one 8-lane float accumulator, per block first fused with -dmin times
    // the 8 lanes of mins * bsums, then with d times the 8 lanes of the scaled quant sums
    let mut accf = _mm256_setzero_ps();
    for i in 0..nb {
        // SAFETY: block i of both operands is within the nb blocks the caller checked; every
        // offset below stays inside its 84- or 292-byte block.
        unsafe {
            let (bx, by) = (px.add(84 * i), py.add(292 * i));
            let dd = scales_times(bx.add(80), by);
            let raw = _mm_loadu_si128(bx as *const __m128i);
            let mins = _mm256_cvtepi8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), m4));
            let bsums = _mm256_loadu_si256(by.add(260) as *const __m256i);
            let prod = _mm256_madd_epi16(mins, bsums);
            let dmin = _mm256_broadcastss_ps(_mm_movehdup_ps(dd));
            accf = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(prod), accf);
            let sc = halves(_mm256_cvtepi8_epi16(_mm_and_si128(raw, m4)));
            let mut acc = _mm256_setzero_si256();
            for (k, sck) in sc.iter().enumerate() {
                let q2 = load32(bx.add(16 + 32 * k));
                for s in 0..4 {
                    let q = _mm256_and_si256(shr16(q2, 2 * s), m3);
                    let q8 = load32(by.add(4 + 128 * k + 32 * s));
                    let scale = _mm256_shuffle_epi8(*sck, pair_shuffle(s as i32));
                    acc = _mm256_add_epi32(
                        acc,
                        _mm256_madd_epi16(scale, _mm256_maddubs_epi16(q, q8)),
                    );
                }
            }
            let dall = _mm256_broadcastss_ps(dd);
            accf = _mm256_fmadd_ps(dall, _mm256_cvtepi32_ps(acc), accf);
        }
    }
    hsum_ps(accf)
}

/// Q3_K's sixteen signed 6-bit scales as 16-bit lanes (ggml's aux unpacking, less 32).
///
/// # Safety
/// `p` points at the block's 12 scale bytes.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn q3k_scales16(p: *const u8) -> __m256i {
    // SAFETY: guaranteed by the caller.
    let a = |i: usize| unsafe { (p.add(4 * i) as *const u32).read_unaligned() };
    let (a0, a1, a2) = (a(0), a(1), a(2));
    const K1: u32 = 0x0303_0303;
    const K2: u32 = 0x0f0f_0f0f;
    let s0 = (a0 & K2) | ((a2 & K1) << 4);
    let s1 = (a1 & K2) | (((a2 >> 2) & K1) << 4);
    let s2 = ((a0 >> 4) & K2) | (((a2 >> 4) & K1) << 4);
    let s3 = ((a1 >> 4) & K2) | (((a2 >> 6) & K1) << 4);
    let v = _mm_setr_epi32(s0 as i32, s1 as i32, s2 as i32, s3 as i32);
    _mm256_cvtepi8_epi16(_mm_sub_epi8(v, _mm_set1_epi8(32)))
}

/// # Safety
/// The CPU has AVX2, FMA and F16C; `x`, `y` hold `nb` Q3_K / Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q3_k_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let m3 = _mm256_set1_epi8(3);
    let one = _mm256_set1_epi8(1);
    let (px, py) = (x.as_ptr(), y.as_ptr());
    // ggml's float order: per block, 8 lanes of exact sums of scale x (q - 4) x q8 fused times
    // d into 8 float lanes, summed last
    let mut accf = _mm256_setzero_ps();
    for i in 0..nb {
        // SAFETY: block i of both operands is within the nb blocks the caller checked; every
        // offset below stays inside its 110- or 292-byte block.
        unsafe {
            let (bx, by) = (px.add(110 * i), py.add(292 * i));
            let sc = halves(q3k_scales16(bx.add(96)));
            // a clear high bit means the code is 4 less (its bias), a set one adds nothing
            let low_hm = _mm256_xor_si256(load32(bx), _mm256_set1_epi8(-1));
            let mut acc = _mm256_setzero_si256();
            for (k, sck) in sc.iter().enumerate() {
                let q3 = load32(bx.add(32 + 32 * k));
                for s in 0..4 {
                    let low = _mm256_and_si256(shr16(q3, 2 * s), m3);
                    let bias =
                        _mm256_slli_epi16(_mm256_and_si256(shr16(low_hm, 4 * k + s), one), 2);
                    let q8 = load32(by.add(4 + 128 * k + 32 * s));
                    let p16 = _mm256_sub_epi16(
                        _mm256_maddubs_epi16(low, q8),
                        _mm256_maddubs_epi16(bias, q8),
                    );
                    let scale = _mm256_shuffle_epi8(*sck, pair_shuffle(s as i32));
                    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(scale, p16));
                }
            }
            let d = std::ptr::read_unaligned(by as *const f32) * h2f_f16c(bx.add(108));
            accf = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(acc), accf);
        }
    }
    hsum_ps(accf)
}
