//! Vector helpers for the hot element-wise paths. Written as lane-blocked loops that the
//! compiler vectorises; the AVX2 variants are chosen at run time.

use crate::fp;

/// Sum of x[i]*y[i], accumulated in 8 f32 lanes as ggml's SIMD dot does.
pub(crate) fn dot_f32(x: &[f32], y: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if x86::has_avx2_fma() {
            // SAFETY: the CPU supports AVX2 and FMA (checked above).
            return unsafe { x86::dot_f32_avx2(x, y) };
        }
    }
    dot_f32_generic(x, y)
}

fn dot_f32_generic(x: &[f32], y: &[f32]) -> f32 {
    let n = x.len().min(y.len());
    let mut acc = [0.0f32; 8];
    let chunks = n / 8;
    for c in 0..chunks {
        for l in 0..8 {
            acc[l] += x[c * 8 + l] * y[c * 8 + l];
        }
    }
    let mut s = acc.iter().map(|&v| v as f64).sum::<f64>();
    for i in chunks * 8..n {
        s += (x[i] * y[i]) as f64;
    }
    s as f32
}

/// Dot product of two f16 rows in f32.
pub(crate) fn dot_f16(x: &[u16], y: &[u16]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if x86::has_f16c_avx2_fma() {
            // SAFETY: the CPU supports AVX2, FMA and F16C (checked above).
            return unsafe { x86::dot_f16_avx2(x, y) };
        }
    }
    let n = x.len().min(y.len());
    let mut acc = [0.0f32; 8];
    let chunks = n / 8;
    for c in 0..chunks {
        for l in 0..8 {
            acc[l] += fp::f16_to_f32(x[c * 8 + l]) * fp::f16_to_f32(y[c * 8 + l]);
        }
    }
    let mut s = acc.iter().map(|&v| v as f64).sum::<f64>();
    for i in chunks * 8..n {
        s += (fp::f16_to_f32(x[i]) * fp::f16_to_f32(y[i])) as f64;
    }
    s as f32
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;
    use std::sync::OnceLock;

    pub fn has_avx2_fma() -> bool {
        static F: OnceLock<bool> = OnceLock::new();
        *F.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
    }

    pub fn has_f16c_avx2_fma() -> bool {
        static F: OnceLock<bool> = OnceLock::new();
        *F.get_or_init(|| has_avx2_fma() && is_x86_feature_detected!("f16c"))
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn hsum(v: __m256) -> f32 {
        let lo = _mm256_castps256_ps128(v);
        let hi = _mm256_extractf128_ps(v, 1);
        let s = _mm_add_ps(lo, hi);
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }

    /// # Safety
    /// Requires AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot_f32_avx2(x: &[f32], y: &[f32]) -> f32 {
        let n = x.len().min(y.len());
        let (px, py) = (x.as_ptr(), y.as_ptr());
        let mut a0 = _mm256_setzero_ps();
        let mut a1 = _mm256_setzero_ps();
        let mut a2 = _mm256_setzero_ps();
        let mut a3 = _mm256_setzero_ps();
        let mut i = 0;
        while i + 32 <= n {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(px.add(i)), _mm256_loadu_ps(py.add(i)), a0);
            a1 = _mm256_fmadd_ps(
                _mm256_loadu_ps(px.add(i + 8)),
                _mm256_loadu_ps(py.add(i + 8)),
                a1,
            );
            a2 = _mm256_fmadd_ps(
                _mm256_loadu_ps(px.add(i + 16)),
                _mm256_loadu_ps(py.add(i + 16)),
                a2,
            );
            a3 = _mm256_fmadd_ps(
                _mm256_loadu_ps(px.add(i + 24)),
                _mm256_loadu_ps(py.add(i + 24)),
                a3,
            );
            i += 32;
        }
        while i + 8 <= n {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(px.add(i)), _mm256_loadu_ps(py.add(i)), a0);
            i += 8;
        }
        let acc = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
        let mut s = hsum(acc) as f64;
        while i < n {
            s += (*px.add(i) * *py.add(i)) as f64;
            i += 1;
        }
        s as f32
    }

    /// # Safety
    /// Requires AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_f16_avx2(x: &[u16], y: &[u16]) -> f32 {
        let n = x.len().min(y.len());
        let (px, py) = (x.as_ptr(), y.as_ptr());
        let mut a0 = _mm256_setzero_ps();
        let mut a1 = _mm256_setzero_ps();
        let mut i = 0;
        while i + 16 <= n {
            let x0 = _mm256_cvtph_ps(_mm_loadu_si128(px.add(i) as *const __m128i));
            let y0 = _mm256_cvtph_ps(_mm_loadu_si128(py.add(i) as *const __m128i));
            let x1 = _mm256_cvtph_ps(_mm_loadu_si128(px.add(i + 8) as *const __m128i));
            let y1 = _mm256_cvtph_ps(_mm_loadu_si128(py.add(i + 8) as *const __m128i));
            a0 = _mm256_fmadd_ps(x0, y0, a0);
            a1 = _mm256_fmadd_ps(x1, y1, a1);
            i += 16;
        }
        while i + 8 <= n {
            let x0 = _mm256_cvtph_ps(_mm_loadu_si128(px.add(i) as *const __m128i));
            let y0 = _mm256_cvtph_ps(_mm_loadu_si128(py.add(i) as *const __m128i));
            a0 = _mm256_fmadd_ps(x0, y0, a0);
            i += 8;
        }
        let mut s = hsum(_mm256_add_ps(a0, a1)) as f64;
        while i < n {
            s += (crate::fp::f16_to_f32(*px.add(i)) * crate::fp::f16_to_f32(*py.add(i))) as f64;
            i += 1;
        }
        s as f32
    }
}
