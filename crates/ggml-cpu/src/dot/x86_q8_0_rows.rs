//! Q8_0 weight rows times one Q8_0 column (token generation), row after row, each result
//! ggml's AVX2 `ggml_vec_dot_q8_0_q8_0` to the bit (the order of `x86::q8_0_k512`: per block
//! fma(dx * dy, f32(sums of 4 products), lane) in 8 lanes, the lanes added as `hsum_ps` adds
//! them), in fewer instructions:
//!
//! - the column's parts that every row needs are made once (`prep`): each block's scale as f32
//!   and -128 x its sums of 4 codes;
//! - vpdpbusd multiplies unsigned by signed bytes: the weights go in as x + 128 (one xor) and
//!   the column's -128 x (sum of 4 codes) is its start value, where ggml's sign trick takes two
//!   vpsignb (the same integer sums: codes lie in -127..=127);
//! - eight rows' horizontal sums are done together (`hsum8`), in each row's order.
//!
//! The rows go one after another (not block by block across rows): streaming from memory, the
//! hardware prefetcher keeps up with one ascending stream, not with eight interleaved ones.
//! It stops at each 4 KiB page, though: where the CPU's policy says so
//! (`simd::features::q8_0_rows_page_ahead`), a row that ends on a new page asks for a line of
//! the page after it first.

use std::arch::x86_64::*;

use super::x86::by_eight;

/// f32 slots of `prep` per block: the scale, then eight i32 start values.
pub(crate) const PREP_SLOTS: usize = 9;

/// Fills `prep` (PREP_SLOTS * nb slots) for column `y`: nb scales as f32, then per block the
/// eight i32 lanes -128 x (sum of codes 4l..4l + 4).
///
/// # Safety
/// `super::x86::has_avx512()`; `y` points at nb Q8_0 blocks.
#[target_feature(enable = "avx2,f16c,avx512vnni,avx512vl")]
pub(crate) unsafe fn prep(nb: usize, y: *const u8, prep: &mut [f32]) {
    assert!(prep.len() >= PREP_SLOTS * nb);
    let (scales, starts) = prep.split_at_mut(nb);
    let c80 = _mm256_set1_epi8(0x80u8 as i8);
    for (b, scale) in scales.iter_mut().enumerate() {
        // SAFETY: block b of y is readable (the caller's promise); starts holds 8 * nb slots.
        unsafe {
            let by = y.add(34 * b);
            *scale = super::x86::h2f_f16c(by);
            let q = _mm256_loadu_si256(by.add(2) as *const __m256i);
            // 128 x (sum of 4 codes), negated
            let s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), c80, q);
            let neg = _mm256_sub_epi32(_mm256_setzero_si256(), s);
            _mm256_storeu_si256(starts.as_mut_ptr().add(8 * b) as *mut __m256i, neg);
        }
    }
}

/// One row's 8 lanes: per block fma(dx * dy, f32(integer sums), acc), as ggml's kernel.
///
/// # Safety
/// `x` points at nb Q8_0 blocks, `y` at the column's, `prep` is `prep`'s for that column.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
unsafe fn row(nb: usize, x: *const u8, y: *const u8, prep: &[f32]) -> __m256 {
    let c80 = _mm256_set1_epi8(0x80u8 as i8);
    let (scales, starts) = prep.split_at(nb);
    let mut acc = _mm256_setzero_ps();
    for (b, &dy) in scales.iter().enumerate() {
        // SAFETY: block b of x and y is readable; starts holds 8 i32 per block.
        unsafe {
            let bx = x.add(34 * b);
            let d = _mm256_set1_ps(super::x86::h2f_f16c(bx) * dy);
            let qx = _mm256_xor_si256(_mm256_loadu_si256(bx.add(2) as *const __m256i), c80);
            let qy = _mm256_loadu_si256(y.add(34 * b + 2) as *const __m256i);
            let st = _mm256_loadu_si256(starts.as_ptr().add(8 * b) as *const __m256i);
            let s = _mm256_dpbusd_epi32(st, qx, qy);
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
        }
    }
    acc
}

/// out[i] = the Q8_0 dot product of the row at `x + i * stride` and column `y` (`prep`'s).
///
/// # Safety
/// `super::x86::has_avx512()`; `y` holds nb blocks, `prep` is `prep(nb, y, ..)`'s, and each
/// of the out.len() rows holds nb blocks.
#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
pub(crate) unsafe fn rows(
    nb: usize,
    x: *const u8,
    stride: usize,
    y: *const u8,
    prep: &[f32],
    out: &mut [f32],
) {
    assert!(prep.len() >= PREP_SLOTS * nb);
    let ahead = crate::simd::features::cpu().q8_0_rows_page_ahead();
    let one = |r: usize| {
        let at = x.wrapping_add(r * stride);
        if ahead > 0 {
            crate::simd::prefetch_page_ahead(at, 34 * nb, ahead);
        }
        // SAFETY: AVX2 is enabled here; every row r the loop asks for exists (the caller's
        // promise).
        unsafe { row(nb, at, y, prep) }
    };
    // SAFETY: AVX2 is enabled here.
    unsafe { by_eight(out, |r| std::array::from_fn(|i| one(r + i)), one) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Q8_0 blocks with codes in -127..=127 (as quantize_row_q8_0 makes them) and scales
    /// from 1e-4 to 1e2.
    fn blocks(n: usize, seed: u64) -> Vec<u8> {
        let mut s = seed;
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) as u32
        };
        let mut v = vec![0u8; 34 * n];
        for b in v.chunks_exact_mut(34) {
            let d = 10f32.powf((next() % 600) as f32 / 100.0 - 4.0);
            b[..2].copy_from_slice(&ggml::quants::fp32_to_fp16(d).to_le_bytes());
            for q in &mut b[2..] {
                *q = ((next() % 255) as i32 - 127) as i8 as u8;
            }
        }
        v
    }

    #[test]
    fn rows_equal_the_one_row_kernel_bit_for_bit() {
        if !crate::dot::x86::has_avx512() {
            eprintln!("skipped: no AVX-512 VNNI on this CPU");
            return;
        }
        let kernel = crate::dot::cpu_traits(ggml::Type::Q8_0).vec_dot;
        for (nb, nrows) in [(1, 3), (8, 8), (8, 21), (7, 16), (64, 13)] {
            let x = blocks(nb * nrows, 1 + nb as u64);
            let y = blocks(nb, 99);
            let mut pre = vec![0.0f32; PREP_SLOTS * nb];
            let mut out = vec![0.0f32; nrows];
            // SAFETY: AVX-512 VNNI checked; x holds nrows rows of nb blocks, y nb blocks.
            unsafe {
                prep(nb, y.as_ptr(), &mut pre);
                rows(nb, x.as_ptr(), 34 * nb, y.as_ptr(), &pre, &mut out);
            }
            for (r, o) in out.iter().enumerate() {
                let want = kernel(32 * nb, &x[34 * nb * r..34 * nb * (r + 1)], &y);
                assert_eq!(
                    o.to_bits(),
                    want.to_bits(),
                    "nb {nb} row {r}: {o} vs {want}"
                );
            }
        }
    }
}
