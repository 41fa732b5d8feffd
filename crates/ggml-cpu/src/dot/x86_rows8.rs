//! Eight weight rows times one column (token generation) in the order of ggml's AVX2 dot
//! products: per block, fma(dx * dy, f32(exact sum of 4 values), lane) in 8 lanes, the lanes
//! added last as `hsum_ps` adds them (plus, for Q4_1, the sum of m * s kept on the side).
//!
//! - `q8_0_rows8`: two rows share a 512-bit register (one per 256-bit half), and one vpdpbusd
//!   per block makes both rows' 8 lane sums. vpdpbusd multiplies unsigned by signed bytes: the
//!   weights go in as x + 128 (one xor), and the column's extra 128 * (sum of 4 values) is
//!   computed once per block for all eight rows and is the vpdpbusd's start value.
//! - `q4_1_rows8`: four rows share a register, one per 128-bit lane. The low nibbles (lanes
//!   0-3 of the order) and the high nibbles (lanes 4-7) go into two registers, so the nibbles
//!   need no interleaving and each activation half is a 128-bit broadcast.
//!
//! The rows' scales are converted together (F16C, exact like ggml's bit conversion).

use std::arch::x86_64::*;

/// Rows of one pass.
pub(crate) const ROWS: usize = 8;

/// Byte offsets of rows 1..8 from row 0 as i32 lanes, when they all fit (the rows of one
/// weight always do): the rows' block headers are then one gather.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,avx2")]
pub(crate) fn row_offsets(x: &[*const u8; ROWS]) -> Option<__m256i> {
    let mut o = [0i32; ROWS];
    for (r, v) in o.iter_mut().enumerate() {
        *v = i32::try_from((x[r] as isize).wrapping_sub(x[0] as isize)).ok()?;
    }
    // SAFETY: o holds 8 i32.
    Some(unsafe { _mm256_loadu_si256(o.as_ptr() as *const __m256i) })
}

/// The dword at x[r] + at of each row, lane r: gathered when `offs` is known, else read one by
/// one (lane inserts, not small stores that a wide load would wait for).
///
/// # Safety
/// AVX2; 4 bytes readable at x[r] + at for every r; offs from `row_offsets(x)`.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,avx2")]
pub(crate) unsafe fn heads(x: &[*const u8; ROWS], offs: Option<__m256i>, at: usize) -> __m256i {
    // SAFETY: the caller's promise.
    unsafe {
        match offs {
            Some(o) => _mm256_i32gather_epi32::<1>(x[0].add(at) as *const i32, o),
            None => {
                let d = |r: usize| (x[r].add(at) as *const i32).read_unaligned();
                _mm256_set_epi32(d(7), d(6), d(5), d(4), d(3), d(2), d(1), d(0))
            }
        }
    }
}

/// Eight f16 values in the low halves of `v`'s dwords, as f32.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,avx2,f16c")]
pub(crate) fn halves(v: __m256i) -> __m256 {
    _mm256_cvtph_ps(_mm256_cvtepi32_epi16(v))
}

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
    let offs = row_offsets(x);
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
            let dx = halves(heads(x, offs, 34 * ib));
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

/// out[r] = ggml's AVX2 Q4_1 x Q8_1 dot product of row x[r] and column y, bit for bit.
///
/// # Safety
/// `x86_k512::available()`; each x[r] points at nb Q4_1 blocks, y at nb Q8_1 blocks.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn q4_1_rows8(
    nb: usize,
    x: &[*const u8; ROWS],
    y: *const u8,
    out: &mut [f32; ROWS],
) {
    let m4 = _mm512_set1_epi8(0x0F);
    let zero = _mm512_setzero_si512();
    let offs = row_offsets(x);
    // 128-bit lane r: the scale of row 4g + r
    let pick: [__m512i; 2] = std::array::from_fn(|g| {
        let v: [i32; 16] = std::array::from_fn(|l| (4 * g + l / 4) as i32);
        // SAFETY: v holds 16 i32.
        unsafe { _mm512_loadu_si512(v.as_ptr() as *const __m512i) }
    });
    let mut acc_lo = [_mm512_setzero_ps(); 2];
    let mut acc_hi = [_mm512_setzero_ps(); 2];
    let mut summs = _mm256_setzero_ps();
    for ib in 0..nb {
        // SAFETY: block ib of every row and of the column lies within the caller's nb blocks.
        unsafe {
            let by = y.add(36 * ib);
            let dy = _mm256_set1_ps(super::x86::h2f_f16c(by));
            let sy = _mm256_set1_ps(super::x86::h2f_f16c(by.add(2)));
            let ylo = _mm512_broadcast_i32x4(_mm_loadu_si128(by.add(4) as *const __m128i));
            let yhi = _mm512_broadcast_i32x4(_mm_loadu_si128(by.add(20) as *const __m128i));
            let bx: [*const u8; ROWS] = std::array::from_fn(|r| x[r].add(20 * ib));
            // d and m of each row: one dword
            let dm = heads(x, offs, 20 * ib);
            let dx = halves(dm);
            let mx = halves(_mm256_srli_epi32::<16>(dm));
            // summs += m * s per row, a product then a sum as the scalar code does
            summs = _mm256_add_ps(summs, _mm256_mul_ps(mx, sy));
            let d8 = _mm512_castps256_ps512(_mm256_mul_ps(dx, dy));
            for g in 0..2 {
                let q = |r: usize| _mm_loadu_si128(bx[4 * g + r].add(4) as *const __m128i);
                let v = _mm512_castsi128_si512(q(0));
                let v = _mm512_inserti32x4::<1>(v, q(1));
                let v = _mm512_inserti32x4::<2>(v, q(2));
                let v = _mm512_inserti32x4::<3>(v, q(3));
                let lo = _mm512_and_si512(v, m4);
                let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(v), m4);
                let d = _mm512_permutexvar_ps(pick[g], d8);
                let plo = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, lo, ylo));
                let phi = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, hi, yhi));
                acc_lo[g] = _mm512_fmadd_ps(d, plo, acc_lo[g]);
                acc_hi[g] = _mm512_fmadd_ps(d, phi, acc_hi[g]);
            }
        }
    }
    let mut sm = [0.0f32; ROWS];
    // SAFETY: sm holds 8 floats.
    unsafe { _mm256_storeu_ps(sm.as_mut_ptr(), summs) };
    for g in 0..2 {
        // lane i + 4 of a row's 8 sits in acc_hi where lane i sits in acc_lo: their sum is
        // hsum_ps's first step
        let mut s = [0.0f32; 16];
        // SAFETY: s holds 16 floats.
        unsafe { _mm512_storeu_ps(s.as_mut_ptr(), _mm512_add_ps(acc_lo[g], acc_hi[g])) };
        for r in 0..4 {
            let v = &s[4 * r..4 * r + 4];
            out[4 * g + r] = ((v[0] + v[2]) + (v[1] + v[3])) + sm[4 * g + r];
        }
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

    #[test]
    fn q4_1_rows8_equals_the_avx2_dot_product_bit_for_bit() {
        if !crate::dot::x86_k512::available() {
            eprintln!("skipped: no AVX-512 VNNI");
            return;
        }
        let tr = traits_for(SimdLevel::Avx2, Type::Q4_1).expect("traits");
        for k in [32usize, 32 * 9, 576] {
            let vals = |seed: usize| -> Vec<f32> {
                (0..k)
                    .map(|i| ((i * 2654435761 + seed * 40503) % 1000) as f32 / 97.0 - 3.0)
                    .collect()
            };
            let rows: Vec<Vec<u8>> = (0..ROWS)
                .map(|r| {
                    let mut out = vec![0u8; Type::Q4_1.row_size(k as i64)];
                    ggml::quants::quantize_row_ref(Type::Q4_1, &vals(r), &mut out);
                    out
                })
                .collect();
            let mut col = vec![0u8; Type::Q8_1.row_size(k as i64)];
            (tr.from_float)(&vals(99), &mut col);
            let x: [*const u8; ROWS] = std::array::from_fn(|r| rows[r].as_ptr());
            let mut out = [f32::NAN; ROWS];
            // SAFETY: available() holds; rows and column hold k / 32 blocks.
            unsafe { q4_1_rows8(k / 32, &x, col.as_ptr(), &mut out) };
            for r in 0..ROWS {
                let want = (tr.vec_dot)(k, &rows[r], &col);
                assert_eq!(out[r].to_bits(), want.to_bits(), "k {k} row {r}");
            }
        }
    }
}
