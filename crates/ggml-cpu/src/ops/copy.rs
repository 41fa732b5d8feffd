//! DUP, CONT and CPY: element-wise copy in flat index order (the source walked row-major, the
//! destination filled row-major, shapes may differ) with type conversion. Same-type copies move
//! bytes (blocks for quantized types), conversions go through f32, and a quantized destination
//! (contiguous) gets whole rows quantized.

use super::{Node, Params};
use crate::tref::{load_scalar, split, store_scalar, TRef};
use ggml::Type;

pub(crate) fn dup(p: &mut Params, n: &Node) {
    let (a, d) = (n.s(0), n.dst);
    if a.ty == d.ty {
        copy_blocks(p, &a, &d);
    } else if d.ty.is_quantized() {
        to_quantized(p, &a, &d);
    } else {
        convert(p, &a, &d);
    }
}

/// Position (block index in row, flat row) of flat block `k` in `t`.
#[inline(always)]
fn unflat_block(t: &TRef, k: usize) -> (usize, usize) {
    let nk0 = t.ne[0] / t.ty.block_size();
    (k % nk0, k / nk0)
}

fn copy_blocks(p: &mut Params, a: &TRef, d: &TRef) {
    let ts = a.ty.type_size();
    if a.is_contiguous() && d.is_contiguous() {
        let total = a.ty.row_size(a.nelements() as i64);
        let nblocks = total / ts;
        let (b0, b1) = split(nblocks, p.ith, p.nth);
        // SAFETY: both tensors are contiguous with the same byte size; this thread copies its
        // own block range (ptr::copy tolerates in-place copies).
        unsafe { std::ptr::copy(a.data.add(b0 * ts), d.data.add(b0 * ts), (b1 - b0) * ts) };
        return;
    }
    let nk00 = a.ne[0] / a.ty.block_size();
    let (r0, r1) = split(a.nrows(), p.ith, p.nth);
    for r in r0..r1 {
        let (i1, i2, i3) = a.unflat_row(r);
        for kb in 0..nk00 {
            let (j0, jr) = unflat_block(d, r * nk00 + kb);
            // SAFETY: both tensors hold the same number of blocks; this thread writes the
            // destination blocks of its own source rows.
            unsafe {
                let dst = d.flat_row_ptr(jr).add(j0 * d.nb[0]);
                std::ptr::copy(a.ptr(kb, i1, i2, i3), dst, ts);
            }
        }
    }
}

fn to_quantized(p: &mut Params, a: &TRef, d: &TRef) {
    let ne00 = a.ne[0];
    let bs = d.ty.block_size();
    let (r0, r1) = split(a.nrows(), p.ith, p.nth);
    let buf = p.scratch(ne00);
    for r in r0..r1 {
        let (i1, i2, i3) = a.unflat_row(r);
        // SAFETY: d is contiguous (supports_op) and a's rows are whole blocks, so source row r
        // is a contiguous run of blocks of d that only this thread writes.
        unsafe {
            a.load_row(i1, i2, i3, buf);
            let off = (r * ne00 / bs) * d.ty.type_size();
            let out = std::slice::from_raw_parts_mut(d.data.add(off), d.ty.row_size(ne00 as i64));
            crate::quant::quantize_row(d.ty, buf, out);
        }
    }
}

fn convert(p: &mut Params, a: &TRef, d: &TRef) {
    let ne00 = a.ne[0];
    let (r0, r1) = split(a.nrows(), p.ith, p.nth);
    let buf = p.scratch(ne00);
    for r in r0..r1 {
        let (i1, i2, i3) = a.unflat_row(r);
        // SAFETY: the element counts are equal; this thread writes the destination elements
        // of its own source rows.
        unsafe {
            if a.ty.is_quantized() {
                a.load_row(i1, i2, i3, buf);
            } else {
                let sp = a.row_ptr(i1, i2, i3);
                for (i, v) in buf.iter_mut().enumerate() {
                    *v = load_scalar(a.ty, sp.add(i * a.nb[0]));
                }
            }
            write_run(d, r * ne00, buf);
        }
    }
}

/// Writes `vals` to `d` starting at flat element index `k`.
///
/// # Safety
/// The run must lie inside `d` and belong to the calling thread.
unsafe fn write_run(d: &TRef, mut k: usize, vals: &[f32]) {
    let ne0 = d.ne[0];
    let mut done = 0;
    while done < vals.len() {
        let (j0, jr) = (k % ne0, k / ne0);
        let m = (ne0 - j0).min(vals.len() - done);
        let base = d.flat_row_ptr(jr).add(j0 * d.nb[0]);
        let run = &vals[done..done + m];
        if d.ty == Type::F32 && d.nb[0] == 4 {
            std::ptr::copy_nonoverlapping(run.as_ptr(), base as *mut f32, m);
        } else {
            for (i, &v) in run.iter().enumerate() {
                store_scalar(d.ty, base.add(i * d.nb[0]), v);
            }
        }
        done += m;
        k += m;
    }
}
