//! Vector helpers chosen at run time: the f16 accumulations of FLASH_ATTN_EXT
//! (ggml_vec_mad_f16, ggml_vec_scale_f16; each element rounded to f16 after every step, the
//! multiply-add fused as in ggml's SIMD path) and ggml's vectorised expf (ggml_v_expf, within
//! 1.5 ulp of expf) for SILU, SWIGLU and SOFT_MAX, with expf for the tail as ggml does: its
//! 16-lane AVX-512 variant on CPUs with AVX-512F/DQ, its 8-lane AVX2 one otherwise.

use crate::fp;

pub(crate) mod features;
pub(crate) mod table_act;
#[cfg(target_arch = "x86_64")]
pub(crate) mod transpose;

/// Asks for the cache lines of `len` bytes at `p`, into L2 only (`to_l2`) or into L1 too (a
/// hint: never faults, even out of bounds).
#[inline(always)]
pub(crate) fn prefetch_lines(p: *const u8, len: usize, to_l2: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0, _MM_HINT_T1};
        let mut off = 0;
        while off < len {
            let line = p.wrapping_add(off) as *const i8;
            // SAFETY: prefetch is a hint that does not access memory architecturally.
            unsafe {
                if to_l2 {
                    _mm_prefetch::<_MM_HINT_T1>(line);
                } else {
                    _mm_prefetch::<_MM_HINT_T0>(line);
                }
            }
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (p, len, to_l2);
    }
}

/// Where the `len` bytes at `p` end on a later 4 KiB page than they start, asks for the first
/// line of the page `ahead` bytes past the one they end on, into L2 (a hint: never faults).
/// One line a page: the page walk and the hardware prefetcher's start on that page happen
/// before the loads reach it (the prefetcher stops at every page boundary).
#[inline(always)]
pub(crate) fn prefetch_page_ahead(p: *const u8, len: usize, ahead: usize) {
    let (start, end) = (p as usize, p as usize + len);
    if start >> 12 != end >> 12 {
        prefetch_lines(((end & !4095) + ahead) as *const u8, 1, true);
    }
}

/// y[i] = f16(y[i] + x[i] * v)
pub(crate) fn mad_f16(y: &mut [u16], x: &[u16], v: f32) {
    let n = y.len().min(x.len());
    #[cfg(target_arch = "x86_64")]
    {
        if x86::has_avx512f() {
            // SAFETY: the CPU supports AVX-512F (which implies F16C and FMA); both hold n.
            unsafe { x86::mad_f16_512(&mut y[..n], &x[..n], v) };
            return;
        }
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

/// x[i] = silu(x[i]) (ggml_vec_silu_f32).
pub(crate) fn silu_inplace(x: &mut [f32]) {
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    {
        if x86::has_avx512dq() {
            // SAFETY: AVX-512F/DQ and FMA are available (checked above).
            i = unsafe { x86::silu_512(x) };
        } else if x86::has_avx2_fma() {
            // SAFETY: AVX2 and FMA are available (checked above).
            i = unsafe { x86::silu(x) };
        }
    }
    for v in &mut x[i..] {
        *v = *v / (1.0 + (-*v).exp());
    }
}

/// y[i] = silu(x[i]) * g[i] (ggml_vec_swiglu_f32).
pub(crate) fn swiglu(y: &mut [f32], x: &[f32], g: &[f32]) {
    let n = y.len().min(x.len()).min(g.len());
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    {
        if x86::has_avx512dq() {
            // SAFETY: AVX-512F/DQ and FMA are available (checked above); all slices hold n.
            i = unsafe { x86::swiglu_512(&mut y[..n], &x[..n], &g[..n]) };
        } else if x86::has_avx2_fma() {
            // SAFETY: AVX2 and FMA are available (checked above); all slices hold n.
            i = unsafe { x86::swiglu(&mut y[..n], &x[..n], &g[..n]) };
        }
    }
    for j in i..n {
        y[j] = x[j] / (1.0 + (-x[j]).exp()) * g[j];
    }
}

/// x[i] = exp(x[i] - max); returns the sum in f64 (ggml_vec_soft_max_f32).
pub(crate) fn exp_sub_sum(x: &mut [f32], max: f32) -> f64 {
    let mut i = 0;
    let mut sum = 0.0f64;
    #[cfg(target_arch = "x86_64")]
    {
        if x86::has_avx512dq() {
            // SAFETY: AVX-512F/DQ and FMA are available (checked above).
            (i, sum) = unsafe { x86::exp_sub_sum_512(x, max) };
        } else if x86::has_avx2_fma() {
            // SAFETY: AVX2 and FMA are available (checked above).
            (i, sum) = unsafe { x86::exp_sub_sum(x, max) };
        }
    }
    for v in &mut x[i..] {
        *v = (*v - max).exp();
        sum += *v as f64;
    }
    sum
}

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::has_avx2_fma;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    pub fn has_f16c_fma() -> bool {
        super::features::cpu().f16c_fma()
    }

    pub fn has_avx512f() -> bool {
        super::features::cpu().avx512_f16()
    }

    /// mad_f16 sixteen lanes at a time (each lane computes exactly what the 8-lane loop does:
    /// one fma, rounded to half to nearest even), the rest by `mad_f16`.
    ///
    /// # Safety
    /// Requires AVX-512F, F16C and FMA; y and x have the same length.
    #[target_feature(enable = "avx512f,avx,f16c,fma")]
    pub unsafe fn mad_f16_512(y: &mut [u16], x: &[u16], v: f32) {
        let n = y.len() / 16 * 16;
        let vv = _mm512_set1_ps(v);
        let (py, px) = (y.as_mut_ptr(), x.as_ptr());
        let mut i = 0;
        while i < n {
            // SAFETY: i + 16 <= n <= both lengths.
            unsafe {
                let a = _mm512_cvtph_ps(_mm256_loadu_si256(py.add(i) as *const __m256i));
                let b = _mm512_cvtph_ps(_mm256_loadu_si256(px.add(i) as *const __m256i));
                let r = _mm512_fmadd_ps(b, vv, a);
                _mm256_storeu_si256(
                    py.add(i) as *mut __m256i,
                    _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(r),
                );
            }
            i += 16;
        }
        // SAFETY: the caller's features cover mad_f16's; the tails have equal lengths.
        unsafe { mad_f16(&mut y[n..], &x[n..], v) }
    }

    /// ggml takes its 16-lane exp, SILU and SOFT_MAX paths on CPUs with AVX-512F and DQ;
    /// their exp is another polynomial and the tail is scalar, so results differ from the
    /// 8-lane path in the last bit.
    pub fn has_avx512dq() -> bool {
        super::features::cpu().avx512_exp()
    }

    #[inline(always)]
    unsafe fn c16(bits: u32) -> __m512 {
        _mm512_set1_ps(f32::from_bits(bits))
    }

    /// ggml_v_expf (AVX-512): scalef of the polynomial; |n| > 192 gives 0 or inf.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,fma")]
    unsafe fn v_expf_512(x: __m512) -> __m512 {
        let r = c16(0x4b40_0000);
        let z = _mm512_fmadd_ps(x, c16(0x3fb8_aa3b), r);
        let n = _mm512_sub_ps(z, r);
        let b = _mm512_fnmadd_ps(
            n,
            c16(0x35bf_be8e),
            _mm512_fnmadd_ps(n, c16(0x3f31_7200), x),
        );
        let d = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(_mm512_abs_ps(n), _mm512_set1_ps(192.0));
        let u = _mm512_mul_ps(b, b);
        let j = _mm512_fmadd_ps(
            _mm512_fmadd_ps(
                _mm512_fmadd_ps(c16(0x3c07_2010), b, c16(0x3d2b_9f17)),
                u,
                _mm512_fmadd_ps(c16(0x3e2a_af33), b, c16(0x3eff_fedb)),
            ),
            u,
            _mm512_fmadd_ps(c16(0x3f7f_fff6), b, _mm512_set1_ps(1.0)),
        );
        let res = _mm512_scalef_ps(j, n);
        if d == 0 {
            return res;
        }
        let le0 = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(n, _mm512_setzero_ps());
        let alt = _mm512_mask_blend_ps(le0, _mm512_set1_ps(f32::INFINITY), _mm512_setzero_ps());
        _mm512_mask_blend_ps(d, res, alt)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,fma")]
    unsafe fn v_silu_512(x: __m512) -> __m512 {
        let neg = _mm512_sub_ps(_mm512_setzero_ps(), x);
        _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0), v_expf_512(neg)))
    }

    /// # Safety
    /// Requires AVX-512F/DQ and FMA.
    #[target_feature(enable = "avx512f,avx512dq,fma")]
    pub unsafe fn silu_512(x: &mut [f32]) -> usize {
        let p = x.as_mut_ptr();
        let mut i = 0;
        while i + 16 <= x.len() {
            _mm512_storeu_ps(p.add(i), v_silu_512(_mm512_loadu_ps(p.add(i))));
            i += 16;
        }
        i
    }

    /// # Safety
    /// Requires AVX-512F/DQ and FMA; the slices have the same length.
    #[target_feature(enable = "avx512f,avx512dq,fma")]
    pub unsafe fn swiglu_512(y: &mut [f32], x: &[f32], g: &[f32]) -> usize {
        let (py, px, pg) = (y.as_mut_ptr(), x.as_ptr(), g.as_ptr());
        let mut i = 0;
        while i + 16 <= y.len() {
            let v = _mm512_mul_ps(
                v_silu_512(_mm512_loadu_ps(px.add(i))),
                _mm512_loadu_ps(pg.add(i)),
            );
            _mm512_storeu_ps(py.add(i), v);
            i += 16;
        }
        i
    }

    /// # Safety
    /// Requires AVX-512F/DQ and FMA.
    #[target_feature(enable = "avx512f,avx512dq,fma")]
    pub unsafe fn exp_sub_sum_512(x: &mut [f32], max: f32) -> (usize, f64) {
        let p = x.as_mut_ptr();
        let m = _mm512_set1_ps(max);
        let mut sum = 0.0f64;
        let mut i = 0;
        while i + 16 <= x.len() {
            let v = v_expf_512(_mm512_sub_ps(_mm512_loadu_ps(p.add(i)), m));
            _mm512_storeu_ps(p.add(i), v);
            // _mm512_reduce_add_ps as GCC expands it: halves, then quarters, then pairs
            let h8 = _mm256_add_ps(_mm512_extractf32x8_ps::<1>(v), _mm512_castps512_ps256(v));
            let h = _mm_add_ps(_mm256_extractf128_ps::<1>(h8), _mm256_castps256_ps128(h8));
            let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
            let h = _mm_add_ss(h, _mm_movehdup_ps(h));
            sum += _mm_cvtss_f32(h) as f64;
            i += 16;
        }
        (i, sum)
    }

    pub fn has_avx2_fma() -> bool {
        super::features::cpu().avx2_fma()
    }

    #[inline(always)]
    unsafe fn c(bits: u32) -> __m256 {
        _mm256_set1_ps(f32::from_bits(bits))
    }

    /// ggml_v_expf (AVX2): exp with at most 1.45 ulp + 0.5 error; above 88.38 gives inf,
    /// below -103.97 gives 0.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn v_expf(x: __m256) -> __m256 {
        let r = c(0x4b40_0000);
        let z = _mm256_fmadd_ps(x, c(0x3fb8_aa3b), r);
        let n = _mm256_sub_ps(z, r);
        let b = _mm256_fnmadd_ps(n, c(0x35bf_be8e), _mm256_fnmadd_ps(n, c(0x3f31_7200), x));
        let e = _mm256_slli_epi32::<23>(_mm256_castps_si256(z));
        let k = _mm256_castsi256_ps(_mm256_add_epi32(
            e,
            _mm256_castps_si256(_mm256_set1_ps(1.0)),
        ));
        let abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0), n);
        let cm = _mm256_cmp_ps::<_CMP_GT_OQ>(abs_n, _mm256_set1_ps(126.0));
        let u = _mm256_mul_ps(b, b);
        let j = _mm256_fmadd_ps(
            _mm256_fmadd_ps(
                _mm256_fmadd_ps(c(0x3c07_2010), b, c(0x3d2b_9f17)),
                u,
                _mm256_fmadd_ps(c(0x3e2a_af33), b, c(0x3eff_fedb)),
            ),
            u,
            _mm256_mul_ps(c(0x3f7f_fff6), b),
        );
        if _mm256_movemask_ps(cm) == 0 {
            return _mm256_fmadd_ps(j, k, k);
        }
        let g = _mm256_and_si256(
            _mm256_castps_si256(_mm256_cmp_ps::<_CMP_LE_OQ>(n, _mm256_setzero_ps())),
            _mm256_set1_epi32(0x8200_0000u32 as i32),
        );
        let s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f00_0000)));
        let s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
        let d = _mm256_cmp_ps::<_CMP_GT_OQ>(abs_n, _mm256_set1_ps(192.0));
        _mm256_or_ps(
            _mm256_and_ps(d, _mm256_mul_ps(s1, s1)),
            _mm256_andnot_ps(
                d,
                _mm256_or_ps(
                    _mm256_and_ps(cm, _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1)),
                    _mm256_andnot_ps(cm, _mm256_fmadd_ps(k, j, k)),
                ),
            ),
        )
    }

    /// ggml_v_silu
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn v_silu(x: __m256) -> __m256 {
        let neg = _mm256_sub_ps(_mm256_setzero_ps(), x);
        _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0), v_expf(neg)))
    }

    /// Returns how many leading elements were done.
    ///
    /// # Safety
    /// Requires AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn silu(x: &mut [f32]) -> usize {
        let p = x.as_mut_ptr();
        let mut i = 0;
        while i + 8 <= x.len() {
            _mm256_storeu_ps(p.add(i), v_silu(_mm256_loadu_ps(p.add(i))));
            i += 8;
        }
        i
    }

    /// # Safety
    /// Requires AVX2 and FMA; the slices have the same length.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn swiglu(y: &mut [f32], x: &[f32], g: &[f32]) -> usize {
        let (py, px, pg) = (y.as_mut_ptr(), x.as_ptr(), g.as_ptr());
        let mut i = 0;
        while i + 8 <= y.len() {
            let v = _mm256_mul_ps(
                v_silu(_mm256_loadu_ps(px.add(i))),
                _mm256_loadu_ps(pg.add(i)),
            );
            _mm256_storeu_ps(py.add(i), v);
            i += 8;
        }
        i
    }

    /// # Safety
    /// Requires AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn exp_sub_sum(x: &mut [f32], max: f32) -> (usize, f64) {
        let p = x.as_mut_ptr();
        let m = _mm256_set1_ps(max);
        let mut sum = 0.0f64;
        let mut i = 0;
        while i + 8 <= x.len() {
            let v = v_expf(_mm256_sub_ps(_mm256_loadu_ps(p.add(i)), m));
            _mm256_storeu_ps(p.add(i), v);
            let h = _mm_add_ps(_mm256_extractf128_ps::<1>(v), _mm256_castps256_ps128(v));
            let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
            let h = _mm_add_ss(h, _mm_movehdup_ps(h));
            sum += _mm_cvtss_f32(h) as f64;
            i += 8;
        }
        (i, sum)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f32, b: f32) -> i64 {
        (a.to_bits() as i64 - b.to_bits() as i64).abs()
    }

    #[test]
    fn vector_exp_is_within_two_ulp_of_expf() {
        let mut xs: Vec<f32> = (-20000..=20000).map(|i| i as f32 * 0.0044).collect();
        xs.extend([0.0, -0.0, 88.3, -103.0, -87.0, f32::NEG_INFINITY]);
        let mut ys = xs.clone();
        let sum = exp_sub_sum(&mut ys, 0.0);
        let mut want_sum = 0.0f64;
        for (x, y) in xs.iter().zip(&ys) {
            let e = x.exp();
            want_sum += e as f64;
            if e.is_normal() {
                assert!(ulps(*y, e) <= 2, "exp({x}) = {y}, expf says {e}");
            } else {
                assert!(
                    (y - e).abs() <= f32::MIN_POSITIVE,
                    "exp({x}) = {y}, expf says {e}"
                );
            }
        }
        // lanes are summed in f32 (as ggml): only softmax's range x <= 0 keeps that finite
        assert!(sum.is_infinite() || (sum - want_sum).abs() <= 1e-5 * want_sum);
        let mut neg: Vec<f32> = (0..5000).map(|i| -(i as f32) * 0.01).collect();
        let want: f64 = neg.iter().map(|x| x.exp() as f64).sum();
        let got = exp_sub_sum(&mut neg, 0.0);
        assert!((got - want).abs() <= 1e-6 * want, "{got} vs {want}");
    }

    #[test]
    fn silu_and_swiglu_match_the_scalar_formula() {
        let x: Vec<f32> = (-500..500).map(|i| i as f32 * 0.037).collect();
        let g: Vec<f32> = (0..1000).map(|i| (i as f32 * 0.01).sin()).collect();
        let mut s = x.clone();
        silu_inplace(&mut s);
        let mut w = vec![0.0; x.len()];
        swiglu(&mut w, &x, &g);
        for i in 0..x.len() {
            let want = x[i] / (1.0 + (-x[i]).exp());
            assert!(
                (s[i] - want).abs() <= 4.0 * f32::EPSILON * want.abs().max(1e-30),
                "silu({})",
                x[i]
            );
            assert!(
                (w[i] - want * g[i]).abs() <= 8.0 * f32::EPSILON * (want * g[i]).abs().max(1e-30)
            );
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn wide_f16_accumulation_equals_the_eight_lane_one() {
        if !x86::has_f16c_fma() {
            return;
        }
        let n = 16 * 3 + 8 + 5;
        let x: Vec<u16> = (0..n)
            .map(|i| fp::f32_to_f16((i as f32 * 0.37).sin() * 3.0))
            .collect();
        let mut wide: Vec<u16> = (0..n)
            .map(|i| fp::f32_to_f16((i as f32 * 0.11).cos()))
            .collect();
        let mut narrow = wide.clone();
        for step in 0..20 {
            let v = 0.1 + step as f32 * 0.07;
            mad_f16(&mut wide, &x, v);
            // SAFETY: F16C and FMA were detected above; both slices hold n.
            unsafe { x86::mad_f16(&mut narrow, &x, v) };
        }
        assert_eq!(wide, narrow);
    }

    #[test]
    fn f16_accumulation_rounds_every_step() {
        let x: Vec<u16> = (0..19).map(|i| fp::f32_to_f16(i as f32 * 0.1)).collect();
        let mut y: Vec<u16> = (0..19)
            .map(|i| fp::f32_to_f16(1.0 + i as f32 * 0.01))
            .collect();
        let mut want = y.clone();
        mad_f16(&mut y, &x, 0.3);
        for (w, &xv) in want.iter_mut().zip(&x) {
            let fused =
                (fp::f16_to_f32(xv) as f64 * 0.3f32 as f64 + fp::f16_to_f32(*w) as f64) as f32;
            *w = fp::f32_to_f16(fused);
        }
        for (a, b) in y.iter().zip(&want) {
            assert!((*a as i32 - *b as i32).abs() <= 1, "{a:#x} vs {b:#x}");
        }
        scale_f16(&mut y, 0.5);
        assert!(y
            .iter()
            .zip(&want)
            .all(|(a, b)| (fp::f16_to_f32(*a) - 0.5 * fp::f16_to_f32(*b)).abs() < 1e-3));
    }
}
