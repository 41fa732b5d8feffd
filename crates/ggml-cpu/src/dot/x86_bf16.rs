//! ggml_vec_dot_bf16 as llama.cpp's AVX-512 builds compile it (ggml-cpu/vec.cpp): with
//! `__AVX512BF16__`, two vdpbf16ps accumulators over 64 values a step; with only
//! `__AVX512F__`, two 16-lane accumulators over 32 values a step, `c + x * y` fused by GCC.
//! Either way each accumulator is reduced apart (_mm512_reduce_add_ps) and added in double,
//! then the tail's (exact) products are added in double.

use std::arch::x86_64::*;

use super::scalar::check;

/// The kernel for ggml's AVX-512 build on this CPU: vdpbf16ps where AVX512_BF16 is present.
pub(super) fn kernel() -> super::VecDotFn {
    if crate::simd::features::cpu().avx512bf16 {
        bf16_avx512bf16
    } else {
        bf16_avx512f
    }
}

pub(super) fn bf16_avx512f(n: usize, x: &[u8], y: &[u8]) -> f32 {
    check(n, 1, x, 2, y, 2);
    // SAFETY: handed out only on a CPU with AVX-512F; `check` proved x and y hold n values.
    unsafe { bf16_k512f(n, x, y) }
}

fn bf16_avx512bf16(n: usize, x: &[u8], y: &[u8]) -> f32 {
    check(n, 1, x, 2, y, 2);
    // SAFETY: `kernel` hands this out only after AVX512_BF16 (and, with the AVX-512 level,
    // AVX-512F) were detected; `check` proved x and y hold n values.
    unsafe { bf16_k512bf16(n, x, y) }
}

/// GCC's _mm512_reduce_add_ps: the 256-bit halves, the 128-bit halves, lanes 0+2 and 1+3,
/// then those two.
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) fn reduce_add(v: __m512) -> f32 {
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
    let h8 = _mm256_add_ps(hi, _mm512_castps512_ps256(v));
    let h = _mm_add_ps(_mm256_extractf128_ps::<1>(h8), _mm256_castps256_ps128(h8));
    let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)))
}

/// The accumulators' double sum plus the products of elements `i..n`, as f32.
fn finish(acc: [f32; 2], mut i: usize, n: usize, x: &[u8], y: &[u8]) -> f32 {
    let f = |b: &[u8], i: usize| {
        f32::from_bits((u16::from_le_bytes([b[2 * i], b[2 * i + 1]]) as u32) << 16)
    };
    let mut sum = acc[0] as f64 + acc[1] as f64;
    while i < n {
        sum += (f(x, i) * f(y, i)) as f64;
        i += 1;
    }
    sum as f32
}

/// # Safety
/// AVX-512F must be available; `x` and `y` must hold `n` bf16.
#[target_feature(enable = "avx512f")]
unsafe fn bf16_k512f(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let cvt = |v: __m256i| _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
    let mut acc = [_mm512_setzero_ps(); 2];
    let mut i = 0;
    while i + 32 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            let o = 2 * (i + 16 * k);
            // SAFETY: 16 bf16 from element i + 16k are in bounds.
            let (vx, vy) = unsafe {
                (
                    cvt(_mm256_loadu_si256(px.add(o) as *const __m256i)),
                    cvt(_mm256_loadu_si256(py.add(o) as *const __m256i)),
                )
            };
            *a = _mm512_fmadd_ps(vx, vy, *a);
        }
        i += 32;
    }
    finish([reduce_add(acc[0]), reduce_add(acc[1])], i, n, x, y)
}

/// # Safety
/// AVX-512F and AVX512_BF16 must be available; `x` and `y` must hold `n` bf16.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn bf16_k512bf16(n: usize, x: &[u8], y: &[u8]) -> f32 {
    // SAFETY: the caller's promise.
    unsafe { rows_n::<1>(n, &[x.as_ptr()], y.as_ptr(), 0)[0] }
}

/// out[i] = the BF16 dot product of the row of `n` values at `x + i * stride` and `y` (the
/// bits of `bf16_k512bf16`), in one call for one column's rows, as `x86_f16_rows::rows` takes
/// F16 rows: one after another, touching a page ahead where the CPU's policy says so, or with
/// `halves` row r of the first half of `out` beside row r of the second.
///
/// # Safety
/// AVX-512F and AVX512_BF16 must be available; `y` and each of the out.len() rows hold `n`
/// values.
#[target_feature(enable = "avx512f,avx512bf16")]
pub(crate) unsafe fn rows(
    n: usize,
    x: *const u8,
    stride: usize,
    y: *const u8,
    out: &mut [f32],
    halves: bool,
) {
    let ahead = crate::simd::features::cpu().rows_page_ahead(ggml::Type::Bf16);
    super::x86_f16_rows::drive(
        out,
        halves,
        |i| x.wrapping_add(i * stride),
        // SAFETY: every row the driver names exists (the caller's promise), and so do the
        // CPU features.
        |r| unsafe { rows_n::<1>(n, &[r], y, ahead)[0] },
        // SAFETY: as above.
        |r| unsafe { rows_n::<2>(n, &r, y, 0) },
    );
}

/// R rows' BF16 dot products with `y`, each in ggml's vdpbf16ps order (two accumulators over
/// 64 values a step, each reduced apart, summed in double with the tail); y's loads shared by
/// the R rows. With `ahead` > 0, a row whose next step starts on a new page first asks for the
/// line `ahead` bytes past that page's start, into L2.
///
/// # Safety
/// AVX-512F and AVX512_BF16; every x[r] and y hold n values.
#[inline]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn rows_n<const R: usize>(
    n: usize,
    x: &[*const u8; R],
    y: *const u8,
    ahead: usize,
) -> [f32; R] {
    // __m512bh and __m512i are both 64 plain bytes
    let load = |p: *const u8| {
        // SAFETY: the callers below read 64 bytes inside a row or y.
        unsafe { std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(p as *const __m512i)) }
    };
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    let mut i = 0;
    while i + 64 <= n {
        if ahead > 0 {
            for xr in x {
                crate::simd::prefetch_page_ahead(xr.wrapping_add(2 * i), 128, ahead);
            }
        }
        for k in 0..2 {
            // 32 values from element i + 32k are in bounds of y and of every row
            let o = 2 * (i + 32 * k);
            let vy = load(y.wrapping_add(o));
            for (ar, xr) in acc.iter_mut().zip(x) {
                ar[k] = _mm512_dpbf16_ps(ar[k], load(xr.wrapping_add(o)), vy);
            }
        }
        i += 64;
    }
    std::array::from_fn(|r| {
        // SAFETY: row r and y hold n values (2n bytes).
        let (xs, ys) = unsafe {
            (
                std::slice::from_raw_parts(x[r], 2 * n),
                std::slice::from_raw_parts(y, 2 * n),
            )
        };
        finish([reduce_add(acc[r][0]), reduce_add(acc[r][1])], i, n, xs, ys)
    })
}

#[cfg(test)]
mod tests {
    /// One column's rows in one call equal `bf16_k512bf16` (`test_rows::check_float_rows`).
    #[test]
    fn rows_equal_the_one_row_kernel() {
        let cpu = crate::simd::features::cpu();
        if !cpu.avx512bf16 || !cpu.avx512f {
            eprintln!("skipped: this CPU lacks AVX-512F / AVX512_BF16");
            return;
        }
        // SAFETY: the features are present.
        unsafe {
            super::super::test_rows::check_float_rows(
                ggml::Type::Bf16,
                super::bf16_k512bf16,
                super::rows,
            )
        };
    }
}
