//! REPEAT (tile a source to the destination's shape) and CONCAT along one dimension.

use super::{Node, Params};
use crate::tref::split;

pub(crate) fn repeat(p: &mut Params, n: &Node) {
    let (a, d) = (n.s(0), n.dst);
    let (r0, r1) = split(d.nrows(), p.ith, p.nth);
    let ts = d.ty.type_size();
    for r in r0..r1 {
        let (i1, i2, i3) = d.unflat_row(r);
        let (j1, j2, j3) = (i1 % a.ne[1], i2 % a.ne[2], i3 % a.ne[3]);
        for i0 in 0..d.ne[0] {
            // SAFETY: source indices are taken modulo its shape; dst row r is this thread's.
            unsafe { std::ptr::copy(a.ptr(i0 % a.ne[0], j1, j2, j3), d.ptr(i0, i1, i2, i3), ts) };
        }
    }
}

pub(crate) fn concat(p: &mut Params, n: &Node, dim: usize) {
    let (a, b, d) = (n.s(0), n.s(1), n.dst);
    let (r0, r1) = split(d.nrows(), p.ith, p.nth);
    let ts = d.ty.type_size();
    for r in r0..r1 {
        let (i1, i2, i3) = d.unflat_row(r);
        for i0 in 0..d.ne[0] {
            let mut idx = [i0, i1, i2, i3];
            let src = if idx[dim] < a.ne[dim] {
                a
            } else {
                idx[dim] -= a.ne[dim];
                b
            };
            // SAFETY: idx is inside the chosen source (shapes checked by the constructor);
            // dst row r belongs to this thread.
            unsafe {
                std::ptr::copy(
                    src.ptr(idx[0], idx[1], idx[2], idx[3]),
                    d.ptr(i0, i1, i2, i3),
                    ts,
                )
            };
        }
    }
}
