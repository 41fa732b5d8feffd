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
            let sum: f64 = buf.iter().map(|&x| x as f64).sum();
            let mean = (sum / ne0 as f64) as f32;
            let mut sum2 = 0.0f64;
            for v in buf.iter_mut() {
                *v -= mean;
                sum2 += (*v * *v) as f64;
            }
            let variance = (sum2 / ne0 as f64) as f32;
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
