//! Vector helpers for the f16 accumulations of FLASH_ATTN_EXT (ggml_vec_mad_f16,
//! ggml_vec_scale_f16): F16C + FMA when the CPU has them, chosen at run time. Each element is
//! rounded to f16 after every step, as ggml does; the SIMD and scalar paths differ only in
//! that the SIMD one fuses the multiply-add, as ggml's does.

use crate::fp;

/// y[i] = f16(y[i] + x[i] * v)
pub(crate) fn mad_f16(y: &mut [u16], x: &[u16], v: f32) {
    let n = y.len().min(x.len());
    #[cfg(target_arch = "x86_64")]
    {
        if x86::has_f16c_fma() {
            // SAFETY: the CPU supports AVX, F16C and FMA (checked above); both slices hold n.
            unsafe { x86::mad_f16(&mut y[..n], &x[..n], v) };
            return;
        }
    }
    for (a, &b) in y[..n].iter_mut().zip(&x[..n]) {
        *a = fp::f32_to_f16(fp::f16_to_f32(*a) + fp::f16_to_f32(b) * v);
    }
}

/// y[i] = f16(y[i] * v)
pub(crate) fn scale_f16(y: &mut [u16], v: f32) {
    #[cfg(target_arch = "x86_64")]
    {
        if x86::has_f16c_fma() {
            // SAFETY: the CPU supports AVX, F16C and FMA (checked above).
            unsafe { x86::scale_f16(y, v) };
            return;
        }
    }
    for a in y.iter_mut() {
        *a = fp::f32_to_f16(fp::f16_to_f32(*a) * v);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::sync::OnceLock;

    pub fn has_f16c_fma() -> bool {
        static F: OnceLock<bool> = OnceLock::new();
        *F.get_or_init(|| {
            is_x86_feature_detected!("avx")
                && is_x86_feature_detected!("f16c")
                && is_x86_feature_detected!("fma")
        })
    }

    /// # Safety
    /// Requires AVX, F16C and FMA; y and x have the same length.
    #[target_feature(enable = "avx,f16c,fma")]
    pub unsafe fn mad_f16(y: &mut [u16], x: &[u16], v: f32) {
        let n = y.len();
        let vv = _mm256_set1_ps(v);
        let (py, px) = (y.as_mut_ptr(), x.as_ptr());
        let mut i = 0;
        while i + 8 <= n {
            let a = _mm256_cvtph_ps(_mm_loadu_si128(py.add(i) as *const __m128i));
            let b = _mm256_cvtph_ps(_mm_loadu_si128(px.add(i) as *const __m128i));
            let r = _mm256_fmadd_ps(b, vv, a);
            _mm_storeu_si128(
                py.add(i) as *mut __m128i,
                _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(r),
            );
            i += 8;
        }
        while i < n {
            let a = crate::fp::f16_to_f32(*py.add(i));
            let b = crate::fp::f16_to_f32(*px.add(i));
            *py.add(i) = crate::fp::f32_to_f16(a + b * v);
            i += 1;
        }
    }

    /// # Safety
    /// Requires AVX, F16C and FMA.
    #[target_feature(enable = "avx,f16c,fma")]
    pub unsafe fn scale_f16(y: &mut [u16], v: f32) {
        let n = y.len();
        let vv = _mm256_set1_ps(v);
        let py = y.as_mut_ptr();
        let mut i = 0;
        while i + 8 <= n {
            let a = _mm256_cvtph_ps(_mm_loadu_si128(py.add(i) as *const __m128i));
            let r = _mm256_mul_ps(a, vv);
            _mm_storeu_si128(
                py.add(i) as *mut __m128i,
                _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(r),
            );
            i += 8;
        }
        while i < n {
            *py.add(i) = crate::fp::f32_to_f16(crate::fp::f16_to_f32(*py.add(i)) * v);
            i += 1;
        }
    }
}
