//! MUL_MAT of a weight in plain memory times a batch through the 16-row AVX-512 VNNI kernels:
//! K-quants in the tiled K-quant order (`dot::x86_kt16`), Q8_0 / Q4_0 / Q5_0 in the order of
//! ggml's AVX2 dot products (`dot::x86_q0x16`). Each unit lays its 16 rows out once and runs
//! a group of columns through them.
//!
//! Work units are (16-row span, column group), span-major within a group, taken from the
//! shared counter; a thread keeps the span it laid out last (a weight of 16 rows or fewer is
//! laid out once per thread) and, for Q8_0 columns, the column group it prepared last.

use super::ktile::{self, Order};
use super::mm_repacked::BRow;
use super::Params;
use crate::dot::{x86_kt16 as kt, x86_q0x16 as q0};
use crate::tref::TRef;
use std::sync::atomic::Ordering;

/// Columns one unit runs through its prepared rows (their Q8_K rows, ~2.3 KiB each at
/// K = 2048, stay in L2 while the unit works).
const GROUP: usize = 128;

const ROWS: usize = kt::ROWS;

/// Writes one column's results for rows r0.. (`col`: what `b_row` gave for it) into dst.
fn store(d: &TRef, r0: usize, out: &[f32], col: &(*const u8, usize, usize, usize)) {
    let &(_, i11, i12, i13) = col;
    for (r, v) in out.iter().enumerate() {
        // SAFETY: (r0 + r, column) is a cell of dst owned by the caller's unit.
        unsafe { (d.ptr(r0 + r, i11, i12, i13) as *mut f32).write_unaligned(*v) };
    }
}

/// Whether `a` is a 2-D weight in plain memory on a CPU with the kernels.
fn plain_2d(a: &TRef) -> bool {
    crate::dot::x86_k512::available() && a.ne[2] == 1 && a.ne[3] == 1 && !a.repacked
}

/// Whether `kquant` computes `a` under `plan`.
pub(crate) fn kquant_applies(plan: ktile::Plan, a: &TRef) -> bool {
    plain_2d(a) && plan.order(0, 8) == Order::Tiled
}

/// Whether `q0` computes `a` times `nr1` Q8_0 columns.
pub(crate) fn q0_applies(a: &TRef, nr1: usize) -> bool {
    plain_2d(a) && q0::handles(a.ty) && nr1 >= 4 && a.nb[1] < (i32::MAX as usize) / 16
}

/// dst = a x b for the columns `b_row` gives (Q8_K rows), every cell in the tiled order.
pub(crate) fn kquant(
    p: &mut Params,
    plan: ktile::Plan,
    a: &TRef,
    d: &TRef,
    nr1: usize,
    b_row: BRow,
) {
    let (nr0, nb) = (a.ne[1], a.ne[0] / 256);
    let stride = ktile::block_bytes(plan.ty);
    let spans = nr0.div_ceil(ROWS);
    let units = spans * nr1.div_ceil(GROUP);
    let buf = p.scratch((nb * kt::PREP_BLOCK).div_ceil(4));
    let tmp = buf.as_mut_ptr() as *mut u8;
    let counter = p.counter;
    let mut ch = p.ith;
    let mut prepped = usize::MAX;
    while ch < units {
        let (si, g) = (ch % spans, ch / spans);
        let (c0, c1) = (g * GROUP, ((g + 1) * GROUP).min(nr1));
        let r0 = si * ROWS;
        let n = ROWS.min(nr0 - r0);
        if prepped != si {
            let x: [*const u8; ROWS] =
                std::array::from_fn(|r| a.row_ptr(r0 + r.min(n - 1), 0, 0) as *const u8);
            // SAFETY: rows r0..r0 + n exist, each nb blocks of `stride` bytes; tmp holds nb
            // prepared blocks.
            unsafe { kt::prep16(plan.ty, nb, stride, &x, n, tmp) };
            prepped = si;
        }
        let mut c = c0;
        while c < c1 {
            macro_rules! pass {
                ($w:expr) => {{
                    let cols: [_; $w] = std::array::from_fn(|j| b_row(c + j));
                    let b = cols.map(|col| col.0);
                    let mut out = [[0.0f32; ROWS]; $w];
                    // SAFETY: AVX-512 VNNI is present (applies()); tmp holds the span
                    // prepared; each column has nb Q8_K blocks.
                    unsafe { kt::gemm16::<$w>(plan.ty, nb, tmp, &b, &mut out) };
                    for (o, col) in out.iter().zip(&cols) {
                        store(d, r0, &o[..n], col);
                    }
                    $w
                }};
            }
            c += match c1 - c {
                8.. => pass!(8),
                4..=7 => pass!(4),
                3 => pass!(3),
                2 => pass!(2),
                _ => pass!(1),
            };
        }
        ch = counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Bytes of prepared columns one Q8_0 unit runs through its span: they stay in L2 next to it,
/// and the more columns a span serves, the less its layout costs (for short rows it costs as
/// much as a few dozen columns).
const Q0_COL_BYTES: usize = 1536 << 10;

/// dst = a x b for `a` of Q8_0 / Q4_0 / Q5_0 and the Q8_0 columns `b_row` gives, every cell in
/// the order of ggml's AVX2 dot product.
pub(crate) fn q0(p: &mut Params, a: &TRef, d: &TRef, nr1: usize, b_row: BRow) {
    let (nr0, nb, ty) = (a.ne[1], a.ne[0] / 32, a.ty);
    let spans = nr0.div_ceil(ROWS);
    let (wbytes, cbytes) = (nb * q0::PREP_BLOCK, nb * q0::COL_BLOCK);
    let q0_group = (Q0_COL_BYTES / cbytes).max(16);
    let units = spans * nr1.div_ceil(q0_group);
    let buf = p.scratch((wbytes + q0_group * cbytes).div_ceil(4));
    let tmp = buf.as_mut_ptr() as *mut u8;
    // SAFETY: buf holds wbytes + q0_group * cbytes bytes.
    let cols = unsafe { tmp.add(wbytes) };
    let counter = p.counter;
    let mut ch = p.ith;
    let (mut prepped, mut group) = (usize::MAX, usize::MAX);
    while ch < units {
        let (si, g) = (ch % spans, ch / spans);
        let (c0, c1) = (g * q0_group, ((g + 1) * q0_group).min(nr1));
        let r0 = si * ROWS;
        let n = ROWS.min(nr0 - r0);
        // SAFETY (both blocks): rows r0..r0 + n exist with nb blocks each; every column has nb
        // Q8_0 blocks; tmp and cols have room for the span and the group.
        if prepped != si {
            let x0 = a.row_ptr(r0, 0, 0) as *const u8;
            unsafe { q0::prep16(ty, nb, x0, a.nb[1], n, tmp) };
            prepped = si;
        }
        if group != g {
            for c in c0..c1 {
                unsafe { q0::prep_col(nb, b_row(c).0, cols.add((c - c0) * cbytes)) };
            }
            group = g;
        }
        let mut c = c0;
        while c < c1 {
            macro_rules! pass {
                ($w:expr) => {{
                    // SAFETY: column c + j of the group is prepared at cols + (c + j - c0) * cbytes.
                    let b: [*const u8; $w] =
                        std::array::from_fn(|j| unsafe { cols.add((c + j - c0) * cbytes) as *const u8 });
                    let mut out = [[0.0f32; ROWS]; $w];
                    // SAFETY: AVX-512 VNNI is present (q0_applies()); the span and the columns
                    // are prepared.
                    unsafe { q0::gemm16::<$w>(nb, tmp, &b, &mut out) };
                    for (j, o) in out.iter().enumerate() {
                        store(d, r0, &o[..n], &b_row(c + j));
                    }
                    $w
                }};
            }
            c += match c1 - c {
                3.. => pass!(3),
                2 => pass!(2),
                _ => pass!(1),
            };
        }
        ch = counter.fetch_add(1, Ordering::Relaxed);
    }
}
