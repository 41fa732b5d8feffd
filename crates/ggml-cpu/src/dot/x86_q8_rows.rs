//! Eight Q8_0 weight rows times one Q8_0 column (token generation) in the order of ggml's
//! AVX2 dot product: per block, fma(dx * dy, f32(exact sum of 4 values), lane) in 8 lanes, the
//! lanes added last as `hsum_ps` adds them.
//!
//! Two rows share a 512-bit register (one per 256-bit half) and one vpdpbusd per block makes
//! both rows' 8 lane sums. vpdpbusd multiplies unsigned by signed bytes: the weights go in as
//! x + 128 (one xor) and the column's extra 128 * (sum of 4 values) is computed once per block
//! for all eight rows and is the vpdpbusd's start value. The rows' scales are converted
//! together (F16C, exact like ggml's bit conversion).

use std::arch::x86_64::*;

/// Rows of one pass.
pub(crate) const ROWS: usize = 8;

/// out[r] = ggml's AVX2 Q8_0 dot product of row x[r] and column y, bit for bit.
///
/// # Safety
/// `x86_k512::available()`; each x[r] and y point at nb Q8_0 blocks.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn q8_0_rows8(
    nb: usize,
    x: &[*const u8; ROWS],
    y: *const u8,
    out: &mut [f32; ROWS],
) {
    let c80 = _mm512_set1_epi8(0x80u8 as i8);
    let ones = _mm512_set1_epi8(1);
    let zero = _mm512_setzero_si512();
    // lanes 0-7: scale of row 2k, lanes 8-15: of row 2k + 1
    let pick: [__m512i; 4] = std::array::from_fn(|k| {
        let v: [i32; 16] = std::array::from_fn(|l| (2 * k + l / 8) as i32);
        // SAFETY: v holds 16 i32.
        unsafe { _mm512_loadu_si512(v.as_ptr() as *const __m512i) }
    });
    let mut acc = [_mm512_setzero_ps(); 4];
    for ib in 0..nb {
        // SAFETY: block ib of every row and of the column lies within the caller's nb blocks.
        unsafe {
            let by = y.add(34 * ib);
            let dy = crate::fp::f16_to_f32((by as *const u16).read_unaligned());
            let yv = _mm512_broadcast_i64x4(_mm256_loadu_si256(by.add(2) as *const __m256i));
            // -128 * (sum of each 4 activations)
            let corr = _mm512_sub_epi32(
                zero,
                _mm512_slli_epi32::<7>(_mm512_dpbusd_epi32(zero, ones, yv)),
            );
            let h: [u16; 8] =
                std::array::from_fn(|r| (x[r].add(34 * ib) as *const u16).read_unaligned());
            let dx = _mm256_cvtph_ps(_mm_loadu_si128(h.as_ptr() as *const __m128i));
            let d8 = _mm512_castps256_ps512(_mm256_mul_ps(dx, _mm256_set1_ps(dy)));
            for k in 0..4 {
                let lo = _mm256_loadu_si256(x[2 * k].add(34 * ib + 2) as *const __m256i);
                let hi = _mm256_loadu_si256(x[2 * k + 1].add(34 * ib + 2) as *const __m256i);
                let xv = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi);
                let p = _mm512_dpbusd_epi32(corr, _mm512_xor_si512(xv, c80), yv);
                let d = _mm512_permutexvar_ps(pick[k], d8);
                acc[k] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(p), acc[k]);
            }
        }
    }
    for k in 0..4 {
        let lo = _mm512_castps512_ps256(acc[k]);
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(acc[k])));
        out[2 * k] = super::x86::hsum_ps(lo);
        out[2 * k + 1] = super::x86::hsum_ps(hi);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dot::{traits_for, SimdLevel};
    use ggml::Type;

    #[test]
    fn rows8_equals_the_avx2_dot_product_bit_for_bit() {
        if !crate::dot::x86_k512::available() {
            eprintln!("skipped: no AVX-512 VNNI");
            return;
        }
        let tr = traits_for(SimdLevel::Avx2, Type::Q8_0).expect("traits");
        for k in [32usize, 32 * 9, 2048] {
            let vals = |seed: usize| -> Vec<f32> {
                (0..k)
                    .map(|i| ((i * 2654435761 + seed * 40503) % 1000) as f32 / 97.0 - 5.0)
                    .collect()
            };
            let row = |seed: usize| {
                let mut out = vec![0u8; Type::Q8_0.row_size(k as i64)];
                (tr.from_float)(&vals(seed), &mut out);
                out
            };
            let rows: Vec<Vec<u8>> = (0..ROWS).map(row).collect();
            let col = row(99);
            let x: [*const u8; ROWS] = std::array::from_fn(|r| rows[r].as_ptr());
            let mut out = [f32::NAN; ROWS];
            // SAFETY: available() holds; rows and column hold k / 32 blocks.
            unsafe { q8_0_rows8(k / 32, &x, col.as_ptr(), &mut out) };
            for r in 0..ROWS {
                let want = (tr.vec_dot)(k, &rows[r], &col);
                assert_eq!(out[r].to_bits(), want.to_bits(), "k {k} row {r}");
            }
        }
    }
}
