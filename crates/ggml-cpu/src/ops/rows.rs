//! GET_ROWS (rows picked by i32 indices, converted to f32; i32 sources copied as is) and
//! SET_ROWS (f32 rows written, converted, at i64/i32 row indices of the destination).

use super::{Node, Params};
use crate::tref::{load_index, split};
use ggml::Type;
use std::sync::atomic::Ordering;

pub(crate) fn get_rows(p: &mut Params, n: &Node) {
    let (a, b, d) = (n.s(0), n.s(1), n.dst);
    let err = p.err();
    let (r0, r1) = split(d.nrows(), p.ith, p.nth);
    let ne0 = a.ne[0];
    let buf = p.scratch(ne0);
    for r in r0..r1 {
        let (i10, i11, i12) = d.unflat_row(r);
        // SAFETY: the index is range-checked; dst row (i10, i11, i12) belongs to this thread.
        unsafe {
            let idx = load_index(b.ty, b.ptr(i10, i11, i12, 0));
            if idx < 0 || idx as usize >= a.ne[1] {
                err.store(true, Ordering::Relaxed);
                buf.fill(0.0);
                if d.ty == Type::F32 {
                    d.store_row(i10, i11, i12, buf);
                }
                continue;
            }
            let idx = idx as usize;
            if a.ty == d.ty && a.rows_contiguous() && d.rows_contiguous() {
                let rs = a.ty.row_size(ne0 as i64);
                std::ptr::copy(a.row_ptr(idx, i11, i12), d.row_ptr(i10, i11, i12), rs);
            } else if a.ty == Type::I32 {
                for i in 0..ne0 {
                    std::ptr::copy(a.ptr(i, idx, i11, i12), d.ptr(i, i10, i11, i12), 4);
                }
            } else {
                a.load_row(idx, i11, i12, buf);
                d.store_row(i10, i11, i12, buf);
            }
        }
    }
}

pub(crate) fn set_rows(p: &mut Params, n: &Node) {
    let (b, c, d) = (n.s(0), n.s(1), n.dst);
    let err = p.err();
    let (r0, r1) = split(b.nrows(), p.ith, p.nth);
    let buf = p.scratch(b.ne[0]);
    for r in r0..r1 {
        let (i01, i02, i03) = b.unflat_row(r);
        // SAFETY: the index is range-checked; each source row writes its own destination row
        // (the graph's indices are distinct, as ggml requires).
        unsafe {
            let idx = load_index(c.ty, c.ptr(i01, i02 % c.ne[1], i03 % c.ne[2], 0));
            if idx < 0 || idx as usize >= d.ne[1] {
                err.store(true, Ordering::Relaxed);
                continue;
            }
            b.load_row(i01, i02, i03, buf);
            d.store_row(idx as usize, i02, i03, buf);
        }
    }
}
