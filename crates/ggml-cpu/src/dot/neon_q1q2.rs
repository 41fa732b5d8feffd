//! NEON dot products of Q1_0 and Q2_0 with Q8_0, after ggml's arm quants.c: one lane
//! accumulator that takes each Q8_0 block's four lanes times d * dy (unfused vmlaq_n_f32), so
//! SDOT and ggml's emulation give different bits and each variant follows its own.

use std::arch::aarch64::*;

use super::neon::{rd16, vdot};
use super::scalar::check;
use ggml::quants::fp16_to_fp32 as h2f;
use ggml::Type;

type Kernel = super::VecDotFn;

pub(super) fn kernel(ty: Type, dotprod: bool) -> Option<Kernel> {
    Some(match (ty, dotprod) {
        (Type::Q1_0, false) => q1_0::<false>,
        (Type::Q1_0, true) => q1_0::<true>,
        (Type::Q2_0, false) => q2_0::<false>,
        (Type::Q2_0, true) => q2_0::<true>,
        _ => return None,
    })
}

/// 32 Q8_0 quants of the block `yb`.
#[target_feature(enable = "neon")]
#[inline]
fn q8_pair(yb: &[u8]) -> (int8x16_t, int8x16_t) {
    assert!(yb.len() >= 34);
    // SAFETY: just checked.
    unsafe {
        (
            vld1q_s8(yb.as_ptr().add(2) as *const i8),
            vld1q_s8(yb.as_ptr().add(18) as *const i8),
        )
    }
}

fn q1_0<const DOT: bool>(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 128, x, 18, y, 136);
    // SAFETY: NEON is the aarch64 baseline, FEAT_DotProd is detected where DOT; `check`
    // proved both operands hold nb blocks.
    unsafe { q1_0_k::<DOT>(nb, x, y) }
}

/// # Safety
/// As `vdot`; `x` holds `nb` Q1_0 blocks and `y` 4 * nb Q8_0 blocks.
#[target_feature(enable = "neon")]
unsafe fn q1_0_k<const DOT: bool>(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    const LO: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
    const BITS: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];
    // SAFETY: the tables hold 16 bytes.
    let (lo, bits) = unsafe { (vld1q_u8(LO.as_ptr()), vld1q_u8(BITS.as_ptr())) };
    let hi = vaddq_u8(lo, vdupq_n_u8(2));
    let (two, one) = (vdupq_n_u8(2), vdupq_n_s8(1));
    let mut sumv = vdupq_n_f32(0.0);
    for i in 0..nb {
        let bx = &x[18 * i..18 * (i + 1)];
        let d0 = h2f(rd16(bx, 0));
        for k in 0..4 {
            let yb = &y[34 * (4 * i + k)..34 * (4 * i + k + 1)];
            let w =
                u32::from_le_bytes([bx[2 + 4 * k], bx[3 + 4 * k], bx[4 + 4 * k], bx[5 + 4 * k]]);
            let q = vreinterpretq_u8_u32(vdupq_n_u32(w));
            // bit set: +1, clear: -1
            let sign = |idx| {
                let set = vtstq_u8(vqtbl1q_u8(q, idx), bits);
                vsubq_s8(vreinterpretq_s8_u8(vandq_u8(set, two)), one)
            };
            let (s0, s1) = (sign(lo), sign(hi));
            let (y0, y1) = q8_pair(yb);
            // SAFETY: as documented.
            let p = unsafe { vdot::<DOT>(vdot::<DOT>(vdupq_n_s32(0), s0, y0), s1, y1) };
            sumv = vmlaq_n_f32(sumv, vcvtq_f32_s32(p), d0 * h2f(rd16(yb, 0)));
        }
    }
    vaddvq_f32(sumv)
}

fn q2_0<const DOT: bool>(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 64, x, 18, y, 68);
    // SAFETY: as in q1_0.
    unsafe { q2_0_k::<DOT>(nb, x, y) }
}

/// # Safety
/// As `vdot`; `x` holds `nb` Q2_0 blocks and `y` 2 * nb Q8_0 blocks.
#[target_feature(enable = "neon")]
unsafe fn q2_0_k<const DOT: bool>(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    const IDX_LO: [u8; 16] = [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3];
    const SHIFTS: [i8; 16] = [0, -2, -4, -6, 0, -2, -4, -6, 0, -2, -4, -6, 0, -2, -4, -6];
    // SAFETY: the tables hold 16 bytes.
    let (idx_lo, shifts) = unsafe { (vld1q_u8(IDX_LO.as_ptr()), vld1q_s8(SHIFTS.as_ptr())) };
    let idx_hi = vaddq_u8(idx_lo, vdupq_n_u8(4));
    let (m3, one) = (vdupq_n_u8(3), vdupq_n_s8(1));
    let mut sumv = vdupq_n_f32(0.0);
    for i in 0..nb {
        let bx = &x[18 * i..18 * (i + 1)];
        let d0 = h2f(rd16(bx, 0));
        for k in 0..2 {
            let yb = &y[34 * (2 * i + k)..34 * (2 * i + k + 1)];
            // SAFETY: 8 bytes of codes at 2 + 8k within the 18-byte block.
            let raw = unsafe { vld1_u8(bx.as_ptr().add(2 + 8 * k)) };
            let raw16 = vcombine_u8(raw, raw);
            let codes = |idx| {
                let b = vqtbl1q_u8(raw16, idx);
                vsubq_s8(vreinterpretq_s8_u8(vandq_u8(vshlq_u8(b, shifts), m3)), one)
            };
            let (q0, q1) = (codes(idx_lo), codes(idx_hi));
            let (y0, y1) = q8_pair(yb);
            // SAFETY: as documented.
            let p = unsafe { vdot::<DOT>(vdot::<DOT>(vdupq_n_s32(0), q0, y0), q1, y1) };
            sumv = vmlaq_n_f32(sumv, vcvtq_f32_s32(p), d0 * h2f(rd16(yb, 0)));
        }
    }
    vaddvq_f32(sumv)
}
