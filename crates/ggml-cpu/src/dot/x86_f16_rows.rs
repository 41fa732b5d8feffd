//! One F16 column's weight rows in one call (generation's F16 products): each row's dot
//! product in ggml_vec_dot_f16's AVX-512 order (`x86::f16_k512`: four 16-lane chains over 64
//! values a step, GGML_F32x16_REDUCE, the tail in double), row after row or two a pass from
//! the two halves of the chunk (two streams far apart in flight). Rows taken one after
//! another touch a page ahead of their loads where the CPU's policy says so
//! (`simd::features::rows_page_ahead`): the hardware prefetcher stops at every 4 KiB page.

use std::arch::x86_64::*;

use super::x86::{f16_tail, reduce_f32x16};

/// out[i] = the F16 dot product of the row of `n` halves at `x + i * stride` and `y` (the
/// bits of `x86::f16_k512`); with `halves`, row r of the first half of `out` beside row r of
/// the second.
///
/// # Safety
/// AVX-512F must be available; `y` and each of the out.len() rows hold `n` halves.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn rows(
    n: usize,
    x: *const u8,
    stride: usize,
    y: *const u8,
    out: &mut [f32],
    halves: bool,
) {
    let ahead = crate::simd::features::cpu().rows_page_ahead(ggml::Type::F16);
    drive(
        out,
        halves,
        |i| x.wrapping_add(i * stride),
        // SAFETY: every row the driver names exists (the caller's promise).
        |r| unsafe { rows_n::<1>(n, &[r], y, ahead)[0] },
        // SAFETY: as above.
        |r| unsafe { rows_n::<2>(n, &r, y, 0) },
    );
}

/// The order in which one column's rows are taken (F16's here, BF16's in `x86_bf16`): `one`
/// over row after row, or with `halves`, `two` over row r of the first half of `out` beside
/// row r of the second (and `one` over an odd count's last row). `row(i)` is row i's start.
#[inline(always)]
pub(super) fn drive(
    out: &mut [f32],
    halves: bool,
    row: impl Fn(usize) -> *const u8,
    one: impl Fn(*const u8) -> f32,
    two: impl Fn([*const u8; 2]) -> [f32; 2],
) {
    if !halves {
        for (i, o) in out.iter_mut().enumerate() {
            *o = one(row(i));
        }
        return;
    }
    let h = out.len() / 2;
    let (lo, hi) = out.split_at_mut(h);
    for r in 0..h {
        [lo[r], hi[r]] = two([row(r), row(r + h)]);
    }
    if hi.len() > h {
        hi[h] = one(row(2 * h));
    }
}

/// R rows' dot products with `y`, each in `x86::f16_k512`'s order; y's halves converted once
/// for the R rows. With `ahead` > 0, a row whose next step's 128 bytes start on a new page
/// first asks for the line `ahead` bytes past that page's start, into L2 (a hint: never
/// faults).
///
/// # Safety
/// AVX-512F; every x[r] and y hold n halves.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn rows_n<const R: usize>(
    n: usize,
    x: &[*const u8; R],
    y: *const u8,
    ahead: usize,
) -> [f32; R] {
    let mut acc = [[_mm512_setzero_ps(); 4]; R];
    let mut i = 0;
    while i + 64 <= n {
        if ahead > 0 {
            for xr in x {
                crate::simd::prefetch_page_ahead(xr.wrapping_add(2 * i), 128, ahead);
            }
        }
        for k in 0..4 {
            let o = 2 * (i + 16 * k);
            // SAFETY: 16 halves from element i + 16k are in bounds of y and of every row.
            unsafe {
                let vy = _mm512_cvtph_ps(_mm256_loadu_si256(y.add(o) as *const __m256i));
                for (ar, xr) in acc.iter_mut().zip(x) {
                    let vx = _mm512_cvtph_ps(_mm256_loadu_si256(xr.add(o) as *const __m256i));
                    ar[k] = _mm512_fmadd_ps(vx, vy, ar[k]);
                }
            }
        }
        i += 64;
    }
    std::array::from_fn(|r| {
        let head = reduce_f32x16(&acc[r]);
        if i == n {
            return head;
        }
        // SAFETY: row r and y hold n halves.
        unsafe { f16_tail(head as f64, x[r], y, i, n) as f32 }
    })
}

#[cfg(test)]
mod tests {
    /// One column's rows in one call equal `x86::f16_k512` (`test_rows::check_float_rows`).
    #[test]
    fn rows_equal_the_one_row_kernel() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("skipped: this CPU lacks AVX-512F");
            return;
        }
        // SAFETY: AVX-512F is present.
        unsafe {
            super::super::test_rows::check_float_rows(
                ggml::Type::F16,
                super::super::x86::f16_k512,
                super::rows,
            )
        };
    }
}
