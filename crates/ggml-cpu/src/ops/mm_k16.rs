//! MUL_MAT of a K-quant weight in plain memory times a batch (the tiled K-quant order) through
//! the 16-row AVX-512 VNNI kernel (`dot::x86_kt16`): each unit lays its 16 rows out once and
//! runs up to GROUP columns through them.
//!
//! Work units are (16-row span, column group), span-major within a group, taken from the
//! shared counter; a thread keeps the span it laid out last, so a weight of 16 rows or fewer
//! is laid out once per thread.

use super::ktile::{self, Order};
use super::mm_repacked::BRow;
use super::Params;
use crate::dot::x86_kt16::{gemm16, prep16, PREP_BLOCK, ROWS};
use crate::tref::TRef;
use std::sync::atomic::Ordering;

/// Columns one unit runs through its prepared rows (their Q8_K rows, ~2.3 KiB each at
/// K = 2048, stay in L2 while the unit works).
const GROUP: usize = 128;

/// Whether this path computes `a` (2-D, in plain memory) under `plan`.
pub(crate) fn applies(plan: ktile::Plan, a: &TRef) -> bool {
    crate::dot::x86_k512::available()
        && plan.order(0, 8) == Order::Tiled
        && a.ne[2] == 1
        && a.ne[3] == 1
        && !a.repacked
}

/// dst = a x b for the columns `b_row` gives (Q8_K rows), every cell in the tiled order.
pub(crate) fn mul_mat(
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
    let buf = p.scratch((nb * PREP_BLOCK).div_ceil(4));
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
            unsafe { prep16(plan.ty, nb, stride, &x, n, tmp) };
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
                    unsafe { gemm16::<$w>(plan.ty, nb, tmp, &b, &mut out) };
                    for (o, &(_, i11, i12, i13)) in out.iter().zip(&cols) {
                        for (r, v) in o.iter().enumerate().take(n) {
                            // SAFETY: (r0 + r, column) is a cell of dst owned by this unit.
                            unsafe {
                                (d.ptr(r0 + r, i11, i12, i13) as *mut f32).write_unaligned(*v)
                            };
                        }
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
