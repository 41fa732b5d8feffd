//! Element-wise maps: SQR, SQRT, CLAMP, SCALE, the UNARY ops and the GLU family. GELU and
//! GELU_QUICK go through ggml's f16 lookup tables (ggml defines GGML_GELU_FP16 and
//! GGML_GELU_QUICK_FP16 for its CPU backend), so their values match ggml's bit for bit.

use super::{Node, Params};
use crate::fp;
use crate::simd::table_act::table_act;
use crate::tref::split;
use ggml::{GluOp, Type, UnaryOp};
use std::sync::OnceLock;

const GELU_COEF_A: f32 = 0.044715;
const GELU_QUICK_COEF: f32 = -1.702;
#[allow(clippy::excessive_precision)]
const SQRT_2_OVER_PI: f32 = 0.797_884_560_802_865_4;
#[allow(clippy::excessive_precision)]
const SQRT_2_INV: f32 = 0.707_106_781_186_547_5;

/// Applies `f` to every element, rows split across threads.
pub(crate) fn map(p: &mut Params, n: &Node, f: impl Fn(f32) -> f32) {
    let (a, d) = (n.s(0), n.dst);
    let (r0, r1) = split(a.nrows(), p.ith, p.nth);
    let ne0 = a.ne[0];
    let fast = a.ty == Type::F32 && d.ty == Type::F32 && a.nb[0] == 4 && d.nb[0] == 4;
    let buf = if fast { &mut [][..] } else { p.scratch(ne0) };
    for r in r0..r1 {
        let (i1, i2, i3) = a.unflat_row(r);
        // SAFETY: dst has a's shape; this thread owns row r of dst (possibly the same memory as
        // a's row for in-place ops, which is read before it is written element by element).
        unsafe {
            if fast {
                let x = a.row_ptr(i1, i2, i3) as *const f32;
                let y = d.row_ptr(i1, i2, i3) as *mut f32;
                for i in 0..ne0 {
                    *y.add(i) = f(*x.add(i));
                }
            } else {
                a.load_row(i1, i2, i3, buf);
                for v in buf.iter_mut() {
                    *v = f(*v);
                }
                d.store_row(i1, i2, i3, buf);
            }
        }
    }
}

/// Applies `f` to whole rows (loaded as f32), rows split across threads.
fn map_rows(p: &mut Params, n: &Node, f: impl Fn(&mut [f32])) {
    let (a, d) = (n.s(0), n.dst);
    let (r0, r1) = split(a.nrows(), p.ith, p.nth);
    let buf = p.scratch(a.ne[0]);
    for r in r0..r1 {
        let (i1, i2, i3) = a.unflat_row(r);
        // SAFETY: dst has a's shape; this thread owns row r (read before it is written).
        unsafe {
            a.load_row(i1, i2, i3, buf);
            f(buf);
            d.store_row(i1, i2, i3, buf);
        }
    }
}

/// GELU-type maps through their f16 table (`simd::table_act`), rows split across threads.
fn map_table(p: &mut Params, n: &Node, table: &[u16], clamp: bool) {
    let (a, d) = (n.s(0), n.dst);
    let (r0, r1) = split(a.nrows(), p.ith, p.nth);
    let buf = p.scratch(2 * a.ne[0]);
    let (x, y) = buf.split_at_mut(a.ne[0]);
    for r in r0..r1 {
        let (i1, i2, i3) = a.unflat_row(r);
        // SAFETY: dst has a's shape; this thread owns row r (read before it is written).
        unsafe {
            a.load_row(i1, i2, i3, x);
            table_act(y, x, None, table, clamp);
            d.store_row(i1, i2, i3, y);
        }
    }
}

pub(crate) fn scale(p: &mut Params, n: &Node, s: f32, b: f32) {
    if b == 0.0 {
        map(p, n, |x| x * s)
    } else {
        map(p, n, |x| x * s + b)
    }
}

fn gelu_f32(x: f32) -> f32 {
    // GCC contracts ggml's `1.0f + GELU_COEF_A*x*x` into one fused multiply-add
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (GELU_COEF_A * x).mul_add(x, 1.0)).tanh())
}

fn gelu_quick_f32(x: f32) -> f32 {
    x * (1.0 / (1.0 + (GELU_QUICK_COEF * x).exp()))
}

fn table(f: fn(f32) -> f32) -> Box<[u16]> {
    (0..=u16::MAX)
        .map(|h| fp::f32_to_f16(f(fp::f16_to_f32(h))))
        .collect()
}

fn gelu_table() -> &'static [u16] {
    static T: OnceLock<Box<[u16]>> = OnceLock::new();
    T.get_or_init(|| table(gelu_f32))
}

fn gelu_quick_table() -> &'static [u16] {
    static T: OnceLock<Box<[u16]>> = OnceLock::new();
    T.get_or_init(|| table(gelu_quick_f32))
}

#[inline]
pub(crate) fn gelu_erf(x: f32) -> f32 {
    0.5 * x * (1.0 + libm::erff(x * SQRT_2_INV))
}

pub(crate) fn unary(p: &mut Params, n: &Node, op: UnaryOp) {
    match op {
        UnaryOp::Abs => map(p, n, f32::abs),
        UnaryOp::Sgn => map(p, n, |x| {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }
        }),
        UnaryOp::Neg => map(p, n, |x| -x),
        UnaryOp::Step => map(p, n, |x| if x > 0.0 { 1.0 } else { 0.0 }),
        UnaryOp::Tanh => map(p, n, f32::tanh),
        UnaryOp::Elu => map(p, n, |x| if x > 0.0 { x } else { x.exp_m1() }),
        UnaryOp::Relu => map(p, n, |x| if x > 0.0 { x } else { 0.0 }),
        UnaryOp::Sigmoid => map(p, n, |x| 1.0 / (1.0 + (-x).exp())),
        UnaryOp::Gelu => map_table(p, n, gelu_table(), true),
        UnaryOp::GeluQuick => map_table(p, n, gelu_quick_table(), false),
        UnaryOp::Silu => map_rows(p, n, crate::simd::silu_inplace),
        UnaryOp::HardSwish => map(p, n, |x| x * (1.0f32).min((0.0f32).max((x + 3.0) / 6.0))),
        UnaryOp::HardSigmoid => map(p, n, |x| (1.0f32).min((0.0f32).max((x + 3.0) / 6.0))),
        UnaryOp::Exp => map(p, n, f32::exp),
        UnaryOp::GeluErf => map(p, n, gelu_erf),
    }
}

/// The activation applied to x times the gate g. Without src 1, x and g are the two halves of
/// each row of src 0 (x first unless swapped).
pub(crate) fn glu(p: &mut Params, n: &Node, op: GluOp, swapped: bool) {
    let a = n.s(0);
    let b = n.src[1];
    let d = n.dst;
    let nc = d.ne[0];
    let (r0, r1) = split(d.nrows(), p.ith, p.nth);
    let buf = p.scratch(a.ne[0] + nc * 2);
    let (xa, rest) = buf.split_at_mut(a.ne[0]);
    let (gb, out) = rest.split_at_mut(nc);
    // SWIGLU of F32 rows of adjacent elements, x and the gate in two tensors: straight from
    // the sources into dst (the same products, without the row copies)
    let f32_rows = |t: &crate::tref::TRef| t.ty == ggml::Type::F32 && t.nb[0] == 4;
    if let (GluOp::Swiglu, Some(b)) = (op, b) {
        if f32_rows(&a) && f32_rows(&b) && f32_rows(&d) {
            let (mut i1, mut i2, mut i3) = d.unflat_row(r0);
            for _ in r0..r1 {
                // SAFETY: a and b have one row of at least nc adjacent f32 per dst row; this
                // thread owns dst row (i1, i2, i3). The result goes through scratch, so an
                // in-place GLU (dst over a or b) has read both rows before dst is written.
                unsafe {
                    let x = std::slice::from_raw_parts(a.row_ptr(i1, i2, i3) as *const f32, nc);
                    let g = std::slice::from_raw_parts(b.row_ptr(i1, i2, i3) as *const f32, nc);
                    crate::simd::swiglu(&mut out[..nc], x, g);
                    let dst = d.row_ptr(i1, i2, i3) as *mut f32;
                    std::ptr::copy_nonoverlapping(out.as_ptr(), dst, nc);
                }
                (i1, i2, i3) = d.next_row((i1, i2, i3));
            }
            return;
        }
    }
    for r in r0..r1 {
        let (i1, i2, i3) = d.unflat_row(r);
        // SAFETY: a (and b) have one row per dst row; this thread owns dst row r.
        unsafe {
            a.load_row(i1, i2, i3, xa);
            let (x, g): (&[f32], &[f32]) = match b {
                Some(b) => {
                    b.load_row(i1, i2, i3, gb);
                    (&xa[..nc], &gb[..])
                }
                None if swapped => (&xa[nc..2 * nc], &xa[..nc]),
                None => (&xa[..nc], &xa[nc..2 * nc]),
            };
            match op {
                GluOp::Swiglu => crate::simd::swiglu(out, x, g),
                GluOp::Geglu => table_act(out, x, Some(g), gelu_table(), true),
                GluOp::GegluQuick => table_act(out, x, Some(g), gelu_quick_table(), false),
                GluOp::Reglu => {
                    for i in 0..nc {
                        out[i] = if x[i] > 0.0 { x[i] * g[i] } else { 0.0 };
                    }
                }
                GluOp::GegluErf => {
                    for i in 0..nc {
                        out[i] = gelu_erf(x[i]) * g[i];
                    }
                }
            }
            d.store_row(i1, i2, i3, out);
        }
    }
}
