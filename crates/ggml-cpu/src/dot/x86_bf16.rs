//! ggml_vec_dot_bf16 as llama.cpp's AVX-512 builds compile it (ggml-cpu/vec.cpp): with
//! `__AVX512BF16__`, two vdpbf16ps accumulators over 64 values a step; with only
//! `__AVX512F__`, two 16-lane accumulators over 32 values a step, `c + x * y` fused by GCC.
//! Either way each accumulator is reduced apart (_mm512_reduce_add_ps) and added in double,
//! then the tail's (exact) products are added in double.

use std::arch::x86_64::*;

use super::scalar::check;

/// The kernel for ggml's AVX-512 build on this CPU: vdpbf16ps where AVX512_BF16 is present.
pub(super) fn kernel() -> super::VecDotFn {
    if is_x86_feature_detected!("avx512bf16") {
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
fn reduce_add(v: __m512) -> f32 {
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
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let mut acc = [_mm512_setzero_ps(); 2];
    let mut i = 0;
    while i + 64 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            let o = 2 * (i + 32 * k);
            // SAFETY: 32 bf16 from element i + 32k are in bounds; __m512bh and __m512i are
            // both 64 plain bytes.
            let (vx, vy): (__m512bh, __m512bh) = unsafe {
                (
                    std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(
                        px.add(o) as *const __m512i
                    )),
                    std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(
                        py.add(o) as *const __m512i
                    )),
                )
            };
            *a = _mm512_dpbf16_ps(*a, vx, vy);
        }
        i += 64;
    }
    finish([reduce_add(acc[0]), reduce_add(acc[1])], i, n, x, y)
}
