//! Reductions and orderings: SUM, SUM_ROWS, MEAN (row sums in f64 as ggml_vec_sum_f32; f16
//! and bf16 rows in f32 as ggml_vec_sum_f16_ggf), ARGMAX (ggml's tie rule), ARGSORT and TOP_K.

use super::{Node, Params};
use crate::tref::split;
use ggml::SortOrder;
use std::cmp::Ordering;

/// Sum of a row: f32 rows in f64 rounded to f32 (ggml_vec_sum_f32), half-precision rows in
/// f32 (ggml_vec_sum_f16_ggf / _bf16_ggf).
fn row_sum(ty: ggml::Type, x: &[f32]) -> f32 {
    if ty == ggml::Type::F32 {
        x.iter().map(|&v| v as f64).sum::<f64>() as f32
    } else {
        x.iter().sum()
    }
}

pub(crate) fn sum(p: &mut Params, n: &Node) {
    if p.ith != 0 {
        return;
    }
    let (a, d) = (n.s(0), n.dst);
    let buf = p.scratch(a.ne[0]);
    let mut total = 0.0f64;
    for r in 0..a.nrows() {
        let (i1, i2, i3) = a.unflat_row(r);
        // SAFETY: the row exists; only thread 0 writes the single result.
        unsafe { a.load_row(i1, i2, i3, buf) };
        total += row_sum(a.ty, buf) as f64;
    }
    // SAFETY: dst has one element.
    unsafe { d.set_f32(0, 0, 0, 0, total as f32) };
}

pub(crate) fn sum_rows(p: &mut Params, n: &Node, mean: bool) {
    let (a, d) = (n.s(0), n.dst);
    let ne0 = a.ne[0];
    let (r0, r1) = split(a.nrows(), p.ith, p.nth);
    let buf = p.scratch(ne0);
    for r in r0..r1 {
        let (i1, i2, i3) = a.unflat_row(r);
        // SAFETY: dst has a's shape with ne0 = 1; this thread owns row r.
        unsafe {
            a.load_row(i1, i2, i3, buf);
            let mut s = row_sum(a.ty, buf);
            if mean {
                s /= ne0 as f32;
            }
            d.set_f32(0, i1, i2, i3, s);
        }
    }
}

pub(crate) fn argmax(p: &mut Params, n: &Node) {
    let (a, d) = (n.s(0), n.dst);
    let (r0, r1) = split(a.ne[1], p.ith, p.nth);
    let buf = p.scratch(a.ne[0]);
    for r in r0..r1 {
        // SAFETY: a is a matrix; dst holds one i32 per row, row r owned by this thread.
        unsafe {
            a.load_row(r, 0, 0, buf);
            // ggml_vec_argmax_f32: the last index holding the running maximum
            let mut best = 0usize;
            let mut max = f32::NEG_INFINITY;
            for (i, &v) in buf.iter().enumerate() {
                max = if max > v { max } else { v };
                if max == v {
                    best = i;
                }
            }
            (d.ptr(r, 0, 0, 0) as *mut i32).write_unaligned(best as i32);
        }
    }
}

fn sorted_indices(x: &[f32], order: SortOrder) -> Vec<i32> {
    let mut idx: Vec<i32> = (0..x.len() as i32).collect();
    let cmp = |a: &i32, b: &i32| {
        let (va, vb) = (x[*a as usize], x[*b as usize]);
        match order {
            SortOrder::Asc => va.partial_cmp(&vb).unwrap_or(Ordering::Equal),
            SortOrder::Desc => vb.partial_cmp(&va).unwrap_or(Ordering::Equal),
        }
    };
    idx.sort_by(cmp);
    idx
}

pub(crate) fn argsort(p: &mut Params, n: &Node, order: SortOrder) {
    sort_rows(p, n, order, usize::MAX);
}

/// Indices of the k largest values of each row. ggml leaves their order unspecified and, to
/// make that plain, swaps the first two of its partially sorted list; so do we.
pub(crate) fn top_k(p: &mut Params, n: &Node, k: usize) {
    sort_rows(p, n, SortOrder::Desc, k);
    let d = n.dst;
    if d.ne[0] < 2 {
        return;
    }
    let (r0, r1) = split(d.nrows(), p.ith, p.nth);
    for r in r0..r1 {
        let (i1, i2, i3) = d.unflat_row(r);
        // SAFETY: row r of dst has at least two i32s and belongs to this thread.
        unsafe {
            let a = d.ptr(0, i1, i2, i3) as *mut i32;
            let b = d.ptr(1, i1, i2, i3) as *mut i32;
            let (va, vb) = (a.read_unaligned(), b.read_unaligned());
            a.write_unaligned(vb);
            b.write_unaligned(va);
        }
    }
}

fn sort_rows(p: &mut Params, n: &Node, order: SortOrder, k: usize) {
    let (a, d) = (n.s(0), n.dst);
    let (r0, r1) = split(a.nrows(), p.ith, p.nth);
    let buf = p.scratch(a.ne[0]);
    let keep = k.min(d.ne[0]);
    for r in r0..r1 {
        let (i1, i2, i3) = a.unflat_row(r);
        // SAFETY: dst has a's row count with at most ne0 i32s per row; row r is this thread's.
        unsafe {
            a.load_row(i1, i2, i3, buf);
            let idx = sorted_indices(buf, order);
            for (i, &v) in idx.iter().take(keep).enumerate() {
                (d.ptr(i, i1, i2, i3) as *mut i32).write_unaligned(v);
            }
        }
    }
}
