//! ADD, SUB, MUL, DIV with ggml's broadcasting (b's dims divide a's; b's rows repeat along
//! dim 0 when shorter), and ADD_ID.

use super::{Node, Params};
use crate::tref::split;
use ggml::Type;

pub(crate) fn binary(p: &mut Params, n: &Node, f: impl Fn(f32, f32) -> f32 + Copy) {
    let (a, b, d) = (n.s(0), n.s(1), n.dst);
    let nr = a.nrows();
    let (r0, r1) = split(nr, p.ith, p.nth);
    let ne00 = a.ne[0];
    let ne10 = b.ne[0];
    let all_f32 = a.ty == Type::F32 && b.ty == Type::F32 && d.ty == Type::F32;
    let fast = all_f32 && a.nb[0] == 4 && b.nb[0] == 4 && d.nb[0] == 4;
    let buf = if fast {
        &mut [][..]
    } else {
        p.scratch(ne00 * 2 + ne10)
    };
    for r in r0..r1 {
        let (i1, i2, i3) = a.unflat_row(r);
        let (j1, j2, j3) = (i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3]);
        // SAFETY: rows exist (a's row index space, b's by modulo); this thread owns dst row r.
        unsafe {
            if fast {
                // raw pointers: dst may be a's memory (in-place ops)
                let x = a.row_ptr(i1, i2, i3) as *const f32;
                let y = b.row_ptr(j1, j2, j3) as *const f32;
                let z = d.row_ptr(i1, i2, i3) as *mut f32;
                if ne10 == ne00 {
                    for i in 0..ne00 {
                        *z.add(i) = f(*x.add(i), *y.add(i));
                    }
                } else if ne10 == 1 {
                    let yy = *y;
                    for i in 0..ne00 {
                        *z.add(i) = f(*x.add(i), yy);
                    }
                } else {
                    for k in 0..ne00 / ne10 {
                        for i in 0..ne10 {
                            let o = k * ne10 + i;
                            *z.add(o) = f(*x.add(o), *y.add(i));
                        }
                    }
                }
            } else {
                let (x, rest) = buf.split_at_mut(ne00);
                let (z, y) = rest.split_at_mut(ne00);
                a.load_row(i1, i2, i3, x);
                b.load_row(j1, j2, j3, y);
                for (i, zz) in z.iter_mut().enumerate() {
                    *zz = f(x[i], y[i % ne10]);
                }
                d.store_row(i1, i2, i3, z);
            }
        }
    }
}

/// dst[:, i1, i2] = a[:, i1, i2] + b[:, ids[i1, i2]]
pub(crate) fn add_id(p: &mut Params, n: &Node) {
    let (a, b, ids, d) = (n.s(0), n.s(1), n.s(2), n.dst);
    let nr = a.nrows();
    let (r0, r1) = split(nr, p.ith, p.nth);
    let ne0 = a.ne[0];
    let err = p.err();
    let buf = p.scratch(ne0 * 2);
    for r in r0..r1 {
        let (i1, i2, i3) = a.unflat_row(r);
        // SAFETY: ids has one entry per (i1, i2) (checked by the constructor); the expert index
        // is range-checked before use; this thread owns dst row r.
        unsafe {
            let e = crate::tref::load_index(ids.ty, ids.ptr(i1, i2, 0, 0));
            if e < 0 || e as usize >= b.ne[1] {
                err.store(true, std::sync::atomic::Ordering::Relaxed);
                continue;
            }
            let (x, y) = buf.split_at_mut(ne0);
            a.load_row(i1, i2, i3, x);
            b.load_row(e as usize, 0, 0, y);
            for (xx, yy) in x.iter_mut().zip(y.iter()) {
                *xx += *yy;
            }
            d.store_row(i1, i2, i3, x);
        }
    }
}
