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

pub(crate) fn rms_norm(p: &mut Params, n: &Node, eps: f32) {
    let (a, d) = (n.s(0), n.dst);
    let ne0 = a.ne[0];
    let (r0, r1) = split(a.nrows(), p.ith, p.nth);
    let buf = p.scratch(ne0);
    for r in r0..r1 {
        let (i1, i2, i3) = a.unflat_row(r);
        // SAFETY: dst has a's shape; this thread owns row r.
        unsafe {
            a.load_row(i1, i2, i3, buf);
            let sum: f64 = buf.iter().map(|&x| (x * x) as f64).sum();
            let mean = (sum / ne0 as f64) as f32;
            let scale = 1.0 / (mean + eps).sqrt();
            for v in buf.iter_mut() {
                *v *= scale;
            }
            d.store_row(i1, i2, i3, buf);
        }
    }
}

/// ggml_vec_cvar_f32's sum in its x86 AVX2 order: `buf` centred on `mean` in place, the squares
/// of each 8 lanes reduced in float as _mm256 halves then _mm_movehl / _mm_movehdup pair them,
/// ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7)), each group and the tail added in double.
fn centred_sq_sum(buf: &mut [f32], mean: f32) -> f64 {
    let mut sum = 0.0f64;
    let mut chunks = buf.chunks_exact_mut(8);
    for c in &mut chunks {
        let mut v = [0f32; 8];
        for (x, sq) in c.iter_mut().zip(v.iter_mut()) {
            *x -= mean;
            *sq = *x * *x;
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
