//! IQ4_XS against Q8_K on AVX-512 (VNNI, BMI2): the exact integer lanes of ggml's AVX2 kernel
//! (`x86_iq::iq4_xs_lanes`: lane l sums, over the block's eight 32-value sub-blocks, the
//! scale times the products of values 4l..4l + 4 of the sub-block's first half for l < 4, of
//! its second half (l - 4) otherwise), then the same d fused per block and hsum_float_8, so
//! the same digits, with a quarter of the instructions per block.
//!
//! One 64-byte load of codes is four sub-blocks, one per 128-bit lane: its low nibbles are
//! the first halves, its high nibbles the second halves. The column is rearranged to match
//! once per product (`prep`: per block four registers of activations and four of biases):
//! vpdpbusd multiplies the table values + 128 (unsigned) by the activations, starting from
//! -128 x each dword's four activations. The dword sums (|sum| <= 4 x 127 x 127) take their
//! sub-block's scale by vpmulld.

use std::arch::x86_64::*;

use super::scalar::check;
use super::x86::{h2f_f16c, hsum_ps};
use super::x86_prepared as prepared;
use ggml::quants::KVALUES_IQ4NL;

pub(super) fn iq4_xs_avx512(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 136, y, 292);
    // SAFETY: handed out only where `Features::avx512_iq4_xs` holds; `check` proved the sizes.
    unsafe {
        let y = y.as_ptr();
        hsum_ps(rows_n::<1>(nb, &[x.as_ptr()], y, |ib| column(y, ib))[0])
    }
}

/// Block ib of a Q8_K column as `rows_n` takes it: register 2h + p holds the p-th halves of
/// sub-blocks 4h..4h + 4 (16 activations each, one per 128-bit lane); its bias is -128 x
/// each dword's four activations.
///
/// # Safety
/// The AVX-512 dot-product set; y holds more than ib Q8_K blocks.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2")]
unsafe fn column(y: *const u8, ib: usize) -> ([__m512i; 4], [__m512i; 4]) {
    let z = _mm512_setzero_si512();
    let yv: [__m512i; 4] = std::array::from_fn(|v| {
        let (h, p) = (v / 2, v % 2);
        // SAFETY: block ib of y is readable (the caller's promise).
        let at = |k: usize| unsafe {
            _mm_loadu_si128(y.add(292 * ib + 4 + 32 * (4 * h + k) + 16 * p) as *const __m128i)
        };
        let lo = _mm256_set_m128i(at(1), at(0));
        let hi = _mm256_set_m128i(at(3), at(2));
        _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
    });
    let m128 = _mm512_set1_epi8(-128);
    let bias = std::array::from_fn(|v| _mm512_sub_epi32(z, _mm512_dpbusd_epi32(z, m128, yv[v])));
    (yv, bias)
}

/// Fills `prep` (`x86_prepared::PREP_SLOTS` * nb slots) with the nb blocks of column `y` as
/// `column` gives them, once for all the rows of a one-column product.
///
/// # Safety
/// The AVX-512 dot-product set; y holds nb Q8_K blocks.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2")]
pub(crate) unsafe fn prep(nb: usize, y: *const u8, prep: &mut [f32]) {
    // SAFETY: the caller's promise.
    unsafe { prepared::fill(nb, prep, |ib| column(y, ib)) }
}

prepared::rows_fn!(
    /// out[i] = the IQ4_XS dot product (the bits of `iq4_xs_avx512`) of row i and column y,
    /// the column prepared by `prep` (see `x86_prepared::rows_fn`).
    ///
    /// # Safety
    /// `Features::avx512_iq4_xs`; each of the out.len() rows holds nb IQ4_XS blocks, y nb Q8_K
    /// blocks and prep their prepared blocks.
    rows,
    rows_n,
    "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,bmi2"
);

/// The 8-lane float sums (before `hsum_ps`) of R IQ4_XS rows times one Q8_K column whose
/// blocks `column` gives (see the module's comment).
///
/// # Safety
/// `Features::avx512_iq4_xs`; each x[r] holds `nb` IQ4_XS blocks, `y` nb Q8_K blocks.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,bmi2")]
unsafe fn rows_n<const R: usize>(
    nb: usize,
    x: &[*const u8; R],
    y: *const u8,
    column: impl Fn(usize) -> ([__m512i; 4], [__m512i; 4]),
) -> [__m256; R] {
    // SAFETY: block ib of y is within the nb blocks the caller vouches for.
    let yd = |ib: usize| unsafe { (y.add(292 * ib) as *const f32).read_unaligned() };
    let lanes = |r: usize, ib: usize, yv: &[__m512i; 4], bias: &[__m512i; 4]| {
        // SAFETY: block ib of row r is within its nb blocks.
        _mm256_cvtepi32_ps(unsafe { block_lanes(x[r].add(136 * ib), yv, bias) })
    };
    // SAFETY: block ib of row r is within its nb blocks.
    let dx = |r: usize, ib: usize| unsafe { h2f_f16c(x[r].add(136 * ib)) };
    let mut accf = [_mm256_setzero_ps(); R];
    for ib in 0..nb {
        let (yv, bias) = column(ib);
        let d = yd(ib);
        for (r, acc) in accf.iter_mut().enumerate() {
            let l = lanes(r, ib, &yv, &bias);
            *acc = _mm256_fmadd_ps(_mm256_set1_ps(dx(r, ib) * d), l, *acc);
        }
    }
    accf
}

/// The 8 exact i32 lanes of one IQ4_XS block at `bx` (ggml's sumi1 + sumi2, the scales
/// applied) against a column block as `column` gives it.
///
/// # Safety
/// `Features::avx512_iq4_xs`; bx points at a whole block.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,bmi2")]
unsafe fn block_lanes(bx: *const u8, yv: &[__m512i; 4], bias: &[__m512i; 4]) -> __m256i {
    let m4 = _mm512_set1_epi8(0x0f);
    // the table + 128, as unsigned bytes, in every 128-bit lane
    let table = _mm512_broadcast_i32x4(_mm_add_epi8(
        // SAFETY: the table is 16 bytes.
        unsafe { _mm_loadu_si128(KVALUES_IQ4NL.as_ptr() as *const __m128i) },
        _mm_set1_epi8(-128),
    ));
    // sub-block k's scale in every dword of 128-bit lane k % 4 (of register k / 4)
    let spread = |k: i32| {
        _mm512_setr_epi32(
            k,
            k,
            k,
            k,
            k + 1,
            k + 1,
            k + 1,
            k + 1,
            k + 2,
            k + 2,
            k + 2,
            k + 2,
            k + 3,
            k + 3,
            k + 3,
            k + 3,
        )
    };
    // SAFETY: the caller's promise; every offset below stays inside the 136-byte block.
    unsafe {
        // the eight 6-bit scales (ggml's ls: low nibble from scales_l, two high bits from
        // scales_h), less 32, as bytes
        let sl = (bx.add(4) as *const u32).read_unaligned() as u64;
        let sh = (bx.add(2) as *const u16).read_unaligned() as u64;
        let s8 = _pdep_u64(sl, 0x0f0f_0f0f_0f0f_0f0f) | _pdep_u64(sh, 0x3030_3030_3030_3030);
        let s32 = _mm512_cvtepi8_epi32(_mm_sub_epi8(
            _mm_cvtsi64_si128(s8 as i64),
            _mm_set1_epi8(32),
        ));
        let sc = [
            _mm512_permutexvar_epi32(spread(0), s32),
            _mm512_permutexvar_epi32(spread(4), s32),
        ];
        let mut acc = [_mm512_setzero_si512(); 2];
        for h in 0..2 {
            let q = _mm512_loadu_si512(bx.add(8 + 64 * h) as *const __m512i);
            let lo = _mm512_shuffle_epi8(table, _mm512_and_si512(q, m4));
            let hi = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16::<4>(q), m4));
            for (p, v) in [lo, hi].into_iter().enumerate() {
                let t = _mm512_dpbusd_epi32(bias[2 * h + p], v, yv[2 * h + p]);
                acc[p] = _mm512_add_epi32(acc[p], _mm512_mullo_epi32(t, sc[h]));
            }
        }
        // lanes 0-3 (first halves) and 4-7 (second halves), each summed over the four
        // 128-bit lanes (exact integers, in any order)
        let a = _mm512_add_epi32(
            _mm512_shuffle_i64x2::<0x88>(acc[0], acc[1]),
            _mm512_shuffle_i64x2::<0xDD>(acc[0], acc[1]),
        );
        let a = _mm512_add_epi32(
            _mm512_shuffle_i64x2::<0x88>(a, a),
            _mm512_shuffle_i64x2::<0xDD>(a, a),
        );
        _mm512_castsi512_si256(a)
    }
}

/// The exact integer sum of one IQ4_XS block at `bx` times the Q8_K block at `by` (the total
/// of `block_lanes`), for llama.cpp's tiled order (`x86_tiled`).
///
/// # Safety
/// `Features::avx512_iq4_xs`; bx and by point at whole blocks.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,bmi2")]
pub(crate) unsafe fn block_sum(bx: *const u8, by: *const u8) -> i32 {
    // SAFETY: the caller's promise.
    unsafe {
        let (yv, bias) = column(by, 0);
        super::x86::hsum_epi32(block_lanes(bx, &yv, &bias))
    }
}

#[cfg(test)]
mod tests {
    /// One column's rows in one call equal the one-row kernel (`x86_prepared::check_rows`).
    #[test]
    fn rows_equal_the_one_row_kernel() {
        if !crate::simd::features::cpu().avx512_iq4_xs() {
            eprintln!("skipped: this CPU lacks the AVX-512 dot-product set or BMI2");
            return;
        }
        // SAFETY: the features are present.
        unsafe {
            super::prepared::check_rows(136, 0, super::iq4_xs_avx512, super::prep, super::rows)
        };
    }
}
