//! AVX2 dot products of IQ4_XS, MXFP4, TQ1_0 and TQ2_0. The integer sum of each block is
//! computed with SIMD (exact), and the f32 scaling and accumulation are done in the order of
//! the scalar kernels, so the results equal theirs bit for bit.

use std::arch::x86_64::*;

use super::scalar::check;
use super::VecDotFn;
use ggml::quants::{
    e8m0_to_fp32_half, fp16_to_fp32 as h2f, iq4_xs_scale, unpack_trit, KVALUES_IQ4NL, KVALUES_MXFP4,
};
use ggml::Type;

/// The kernel of `ty` for a CPU with AVX2, FMA and F16C (every AVX-512 level has them too).
pub(super) fn avx2_kernel(ty: Type) -> Option<VecDotFn> {
    Some(match ty {
        Type::Iq4Xs => iq4_xs_avx2,
        Type::Mxfp4 => mxfp4_avx2,
        Type::Tq1_0 => tq1_0_avx2,
        Type::Tq2_0 => tq2_0_avx2,
        _ => return None,
    })
}

macro_rules! wrapper {
    ($name:ident, $kernel:ident, $qk:expr, $xs:expr, $ys:expr) => {
        fn $name(n: usize, x: &[u8], y: &[u8]) -> f32 {
            let nb = check(n, $qk, x, $xs, y, $ys);
            // SAFETY: the table hands out this kernel only after AVX2 was detected, and
            // `check` proved that x and y hold nb blocks.
            unsafe { $kernel(nb, x, y) }
        }
    };
}

wrapper!(iq4_xs_avx2, iq4_xs_k2, 256, 136, 292);
wrapper!(mxfp4_avx2, mxfp4_k2, 32, 17, 34);
wrapper!(tq1_0_avx2, tq1_0_k2, 256, 54, 292);
wrapper!(tq2_0_avx2, tq2_0_k2, 256, 66, 292);

#[inline]
fn rd16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

#[inline]
fn rdf32(b: &[u8], o: usize) -> f32 {
    f32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// The sum of a Q8_K block's 256 codes, from its 16 partial sums.
#[inline]
fn q8k_sum(b: &[u8]) -> i32 {
    (0..16).map(|j| rd16(b, 260 + 2 * j) as i16 as i32).sum()
}

#[target_feature(enable = "avx2")]
fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s)
}

/// Products of 32 signed bytes in 8 i32 lanes. With |x|, |y| <= 127 the pair sums of maddubs
/// stay below 2^15, so nothing saturates.
#[target_feature(enable = "avx2")]
fn dot_i8(x: __m256i, y: __m256i) -> __m256i {
    let p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    _mm256_madd_epi16(p, _mm256_set1_epi16(1))
}

/// 16 bytes of nibbles looked up in `table`: the low nibbles give values 0..16, the high ones
/// 16..32 (ggml's order within a 32-value block).
#[target_feature(enable = "avx2")]
fn lookup_nibbles(b: &[u8], table: __m128i) -> __m256i {
    // SAFETY: `b` holds at least 16 bytes (asserted), read with an unaligned load.
    let v = unsafe {
        assert!(b.len() >= 16);
        _mm_loadu_si128(b.as_ptr() as *const __m128i)
    };
    let m = _mm_set1_epi8(0x0f);
    let lo = _mm_shuffle_epi8(table, _mm_and_si128(v, m));
    let hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(v, 4), m));
    _mm256_set_m128i(hi, lo)
}

#[target_feature(enable = "avx2")]
fn load32(b: &[u8]) -> __m256i {
    assert!(b.len() >= 32);
    // SAFETY: `b` holds at least 32 bytes, read with an unaligned load.
    unsafe { _mm256_loadu_si256(b.as_ptr() as *const __m256i) }
}

#[target_feature(enable = "avx2")]
fn load16(b: &[u8]) -> __m128i {
    assert!(b.len() >= 16);
    // SAFETY: `b` holds at least 16 bytes, read with an unaligned load.
    unsafe { _mm_loadu_si128(b.as_ptr() as *const __m128i) }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn iq4_xs_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let table = load16(&KVALUES_IQ4NL.map(|v| v as u8));
    let mut sumf = 0.0f32;
    for ibl in 0..nb {
        let bx = &x[136 * ibl..136 * ibl + 136];
        let by = &y[292 * ibl..292 * ibl + 292];
        let d4d8 = h2f(rd16(bx, 0)) * rdf32(by, 0);
        for ib in 0..8 {
            let q4 = lookup_nibbles(&bx[8 + 16 * ib..], table);
            let q8 = load32(&by[4 + 32 * ib..]);
            let s = hsum_i32(dot_i8(q4, q8));
            let dl = d4d8 * iq4_xs_scale(bx, ib) as f32;
            sumf += dl * s as f32;
        }
    }
    sumf
}

#[target_feature(enable = "avx2,fma,f16c")]
fn mxfp4_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let table = load16(&KVALUES_MXFP4.map(|v| v as u8));
    let mut sumf = 0.0f32;
    for ib in 0..nb {
        let bx = &x[17 * ib..17 * ib + 17];
        let by = &y[34 * ib..34 * ib + 34];
        let d = h2f(rd16(by, 0)) * e8m0_to_fp32_half(bx[0]);
        let s = hsum_i32(dot_i8(lookup_nibbles(&bx[1..], table), load32(&by[2..])));
        sumf += d * s as f32;
    }
    sumf
}

/// Multiplies each byte by `p` modulo 256 and returns the top bits of `3 * q` (the trit the
/// packing put there, 0..2), in byte lanes.
#[target_feature(enable = "avx2")]
fn trits256(b: __m256i, p: i16) -> __m256i {
    let lo8 = _mm256_set1_epi16(0x00ff);
    let pv = _mm256_set1_epi16(p);
    let three = _mm256_set1_epi16(3);
    let even = _mm256_and_si256(_mm256_mullo_epi16(b, pv), lo8);
    let odd = _mm256_and_si256(_mm256_mullo_epi16(_mm256_srli_epi16(b, 8), pv), lo8);
    let te = _mm256_srli_epi16(_mm256_mullo_epi16(even, three), 8);
    let to = _mm256_srli_epi16(_mm256_mullo_epi16(odd, three), 8);
    _mm256_or_si256(te, _mm256_slli_epi16(to, 8))
}

#[target_feature(enable = "avx2")]
fn trits128(b: __m128i, p: i16) -> __m128i {
    let lo8 = _mm_set1_epi16(0x00ff);
    let pv = _mm_set1_epi16(p);
    let three = _mm_set1_epi16(3);
    let even = _mm_and_si128(_mm_mullo_epi16(b, pv), lo8);
    let odd = _mm_and_si128(_mm_mullo_epi16(_mm_srli_epi16(b, 8), pv), lo8);
    let te = _mm_srli_epi16(_mm_mullo_epi16(even, three), 8);
    let to = _mm_srli_epi16(_mm_mullo_epi16(odd, three), 8);
    _mm_or_si128(te, _mm_slli_epi16(to, 8))
}

const POW3: [i16; 5] = [1, 3, 9, 27, 81];

#[target_feature(enable = "avx2,fma,f16c")]
fn tq1_0_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let ones = _mm256_set1_epi16(1);
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[54 * i..54 * i + 54];
        let by = &y[292 * i..292 * i + 292];
        let qy = &by[4..260];
        // sum of (trit + 1) * y over the block, minus sum of y below
        let mut acc = _mm256_setzero_si256();
        let b32 = load32(bx);
        for (n, &p) in POW3.iter().enumerate() {
            let t = trits256(b32, p);
            let prod = _mm256_maddubs_epi16(t, load32(&qy[32 * n..]));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(prod, ones));
        }
        let b16 = load16(&bx[32..]);
        let mut acc16 = _mm_setzero_si128();
        for (n, &p) in POW3.iter().enumerate() {
            let t = trits128(b16, p);
            let prod = _mm_maddubs_epi16(t, load16(&qy[160 + 16 * n..]));
            acc16 = _mm_add_epi32(acc16, _mm_madd_epi16(prod, _mm_set1_epi16(1)));
        }
        let mut sum = hsum_i32(acc) + hsum_i32(_mm256_set_m128i(_mm_setzero_si128(), acc16));
        sum -= q8k_sum(by);
        // the last 16 values (4 bytes of 4 trits) in scalar code; these are already -1..1
        for l in 0..4 {
            for j in 0..4 {
                sum += (unpack_trit(bx[48 + j], l) + 1) * qy[240 + 4 * l + j] as i8 as i32;
            }
        }
        let d = h2f(rd16(bx, 52));
        sumf += sum as f32 * (d * rdf32(by, 0));
    }
    sumf
}

#[target_feature(enable = "avx2,fma,f16c")]
fn tq2_0_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let ones = _mm256_set1_epi16(1);
    let m3 = _mm256_set1_epi8(3);
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[66 * i..66 * i + 66];
        let by = &y[292 * i..292 * i + 292];
        let qy = &by[4..260];
        let mut acc = _mm256_setzero_si256();
        for j in [0usize, 32] {
            let b = load32(&bx[j..]);
            for l in 0..4 {
                let q = match l {
                    0 => _mm256_and_si256(b, m3),
                    1 => _mm256_and_si256(_mm256_srli_epi16(b, 2), m3),
                    2 => _mm256_and_si256(_mm256_srli_epi16(b, 4), m3),
                    _ => _mm256_and_si256(_mm256_srli_epi16(b, 6), m3),
                };
                let prod = _mm256_maddubs_epi16(q, load32(&qy[4 * j + 32 * l..]));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(prod, ones));
            }
        }
        // the codes are q + 1, so subtract the sum of y once
        let sumi = hsum_i32(acc) - q8k_sum(by);
        let d = rdf32(by, 0) * h2f(rd16(bx, 64));
        sumf += sumi as f32 * d;
    }
    sumf
}
