//! NORM and RMS_NORM per row, with ggml's accumulation: sums in f64 (ggml_float), the mean and
//! the scale rounded to f32.

use super::{Node, Params};
use crate::tref::split;

pub(crate) fn norm(p: &mut Params, n: &Node, eps: f32) {
    let (a, d) = (n.s(0), n.dst);
    let ne0 = a.ne[0];
    let (r0, r1) = split(a.nrows(), p.ith, p.nth);
    let buf = p.scratch(ne0);
    for r in r0..r1 {
        let (i1, i2, i3) = a.unflat_row(r);
        // SAFETY: dst has a's shape; this thread owns row r.
        unsafe {
            a.load_row(i1, i2, i3, buf);
            // ggml_vec_sum_f32 (a double sum stored as float), then a float mean
            let sum: f64 = buf.iter().map(|&x| x as f64).sum();
            let mean = sum as f32 / ne0 as f32;
            let variance = (centred_sq_sum(buf, mean) / ne0 as f64) as f32;
            let scale = 1.0 / (variance + eps).sqrt();
            for v in buf.iter_mut() {
                *v *= scale;
            }
            d.store_row(i1, i2, i3, buf);
        }
    }
}

/// Rows normalised together by `rms_norm`: each row's sum of squares is one chain of double
/// additions in element order (ggml's loop), latency-bound alone; eight rows side by side keep
/// eight chains in flight, each the same additions in the same order.
const RMS_ROWS: usize = 8;

pub(crate) fn rms_norm(p: &mut Params, n: &Node, eps: f32) {
    let (a, d) = (n.s(0), n.dst);
    let ne0 = a.ne[0];
    let (r0, r1) = split(a.nrows(), p.ith, p.nth);
    let buf = p.scratch(RMS_ROWS * ne0);
    let mut r = r0;
    while r < r1 {
        let nr = RMS_ROWS.min(r1 - r);
        let rows = &mut buf[..nr * ne0];
        for (j, row) in rows.chunks_exact_mut(ne0).enumerate() {
            let (i1, i2, i3) = a.unflat_row(r + j);
            // SAFETY: row r + j of a exists (r + j < r1).
            unsafe { a.load_row(i1, i2, i3, row) };
        }
        let mut sums = [0.0f64; RMS_ROWS];
        if nr == RMS_ROWS {
            sums = sq_sums(std::array::from_fn(|j| &rows[j * ne0..(j + 1) * ne0]));
        } else {
            for (s, row) in sums.iter_mut().zip(rows.chunks_exact(ne0)) {
                [*s] = sq_sums([row]);
            }
        }
        for (j, row) in rows.chunks_exact_mut(ne0).enumerate() {
            let mean = (sums[j] / ne0 as f64) as f32;
            let scale = 1.0 / (mean + eps).sqrt();
            for v in row.iter_mut() {
                *v *= scale;
            }
            let (i1, i2, i3) = a.unflat_row(r + j);
            // SAFETY: dst has a's shape; this thread owns row r + j.
            unsafe { d.store_row(i1, i2, i3, row) };
        }
        r += nr;
    }
}

/// Each row's sum of squares, ggml's chain: the f32 squares added in double in element order
/// (R rows' chains side by side).
fn sq_sums<const R: usize>(x: [&[f32]; R]) -> [f64; R] {
    let mut sums = [0.0f64; R];
    for i in 0..x[0].len() {
        for (s, xr) in sums.iter_mut().zip(&x) {
            *s += (xr[i] * xr[i]) as f64;
        }
    }
    sums
}

/// ggml_vec_cvar_f32's sum in the order of llama.cpp's x86 build for this CPU: `buf` centred
/// on `mean` in place, then the squares of each vector reduced in float and added in double,
/// the tail one by one. With AVX-512F/DQ (its `__AVX512F__ && __AVX512DQ__` branch) 16 lanes
/// as _mm512_reduce_add_ps (halves, quarters, then pairs); otherwise 8 lanes as _mm256 halves
/// then _mm_movehl / _mm_movehdup pair them, ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7)).
fn centred_sq_sum(buf: &mut [f32], mean: f32) -> f64 {
    #[cfg(target_arch = "x86_64")]
    let lanes16 = crate::simd::features::cpu().avx512_exp();
    #[cfg(not(target_arch = "x86_64"))]
    let lanes16 = false;
    centred_sq_sum_order(buf, mean, lanes16)
}

fn centred_sq_sum_order(buf: &mut [f32], mean: f32, lanes16: bool) -> f64 {
    let width = if lanes16 { 16 } else { 8 };
    let mut sum = 0.0f64;
    let mut chunks = buf.chunks_exact_mut(width);
    for c in &mut chunks {
        let mut v = [0f32; 16];
        for (x, sq) in c.iter_mut().zip(v.iter_mut()) {
            *x -= mean;
            *sq = *x * *x;
        }
        if lanes16 {
            for l in 0..8 {
                v[l] += v[8 + l];
            }
        }
        let a = [v[0] + v[4], v[1] + v[5], v[2] + v[6], v[3] + v[7]];
        sum += ((a[0] + a[2]) + (a[1] + a[3])) as f64;
    }
    for x in chunks.into_remainder() {
        *x -= mean;
        sum += (*x * *x) as f64;
    }
    sum
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::centred_sq_sum_order;
    use std::arch::x86_64::*;

    fn row(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 7919 % 1013) as f32 - 506.0) / 37.0 + 1e-3 * i as f32)
            .collect()
    }

    /// ggml_vec_cvar_f32's AVX-512 loop as llama.cpp writes it, with the intrinsics.
    #[target_feature(enable = "avx512f,avx512dq")]
    fn cvar_avx512(x: &[f32], mean: f32) -> f64 {
        let mut sum = 0.0f64;
        let mut i = 0;
        while i + 16 <= x.len() {
            // SAFETY: 16 floats from i are in bounds.
            let v = unsafe { _mm512_loadu_ps(x.as_ptr().add(i)) };
            let v = _mm512_sub_ps(v, _mm512_set1_ps(mean));
            sum += _mm512_reduce_add_ps(_mm512_mul_ps(v, v)) as f64;
            i += 16;
        }
        for &v in &x[i..] {
            let d = v - mean;
            sum += (d * d) as f64;
        }
        sum
    }

    /// Its AVX2 loop.
    #[target_feature(enable = "avx2,fma")]
    fn cvar_avx2(x: &[f32], mean: f32) -> f64 {
        let mut sum = 0.0f64;
        let mut i = 0;
        while i + 8 <= x.len() {
            // SAFETY: 8 floats from i are in bounds.
            let v = unsafe { _mm256_loadu_ps(x.as_ptr().add(i)) };
            let v = _mm256_sub_ps(v, _mm256_set1_ps(mean));
            let v = _mm256_mul_ps(v, v);
            let h = _mm_add_ps(_mm256_extractf128_ps::<1>(v), _mm256_castps256_ps128(v));
            let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
            let h = _mm_add_ss(h, _mm_movehdup_ps(h));
            sum += _mm_cvtss_f32(h) as f64;
            i += 8;
        }
        for &v in &x[i..] {
            let d = v - mean;
            sum += (d * d) as f64;
        }
        sum
    }

    #[test]
    fn centred_sums_follow_ggml_s_vector_orders() {
        for (feature, has) in [
            (
                "AVX-512F/DQ",
                is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512dq"),
            ),
            (
                "AVX2/FMA",
                is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
            ),
        ] {
            if !has {
                eprintln!("skipped: no {feature} on this CPU to check its order against");
            }
        }
        for n in [7, 16, 64, 100, 768, 1001] {
            let x = row(n);
            let mean = 0.37f32;
            if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512dq") {
                let mut b = x.clone();
                // SAFETY: the features were detected above.
                let want = unsafe { cvar_avx512(&x, mean) };
                assert_eq!(
                    centred_sq_sum_order(&mut b, mean, true).to_bits(),
                    want.to_bits()
                );
            }
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                let mut b = x.clone();
                // SAFETY: the features were detected above.
                let want = unsafe { cvar_avx2(&x, mean) };
                assert_eq!(
                    centred_sq_sum_order(&mut b, mean, false).to_bits(),
                    want.to_bits()
                );
            }
        }
    }
}
