//! NEON dot products of the ternary types (TQ1_0, TQ2_0) with Q8_K, after ggml's arm
//! quants.c. The codes are summed as 0..=2 and the activation sums subtracted once, exactly
//! (ggml's 16-bit lanes without SDOT cannot overflow for codes in -127..=127), so only
//! `sumf += d * sumi` decides the float result: one fused multiply-add per block, as GCC
//! compiles it.

use std::arch::aarch64::*;

use super::neon::{rd16, vdot};
use super::scalar::check;
use ggml::quants::fp16_to_fp32 as h2f;
use ggml::Type;

type Kernel = super::VecDotFn;

pub(super) fn kernel(ty: Type, dotprod: bool) -> Option<Kernel> {
    Some(match (ty, dotprod) {
        (Type::Tq1_0, false) => tq1_0::<false>,
        (Type::Tq1_0, true) => tq1_0::<true>,
        (Type::Tq2_0, false) => tq2_0::<false>,
        (Type::Tq2_0, true) => tq2_0::<true>,
        _ => return None,
    })
}

/// 16 bytes of `b` from `o`.
#[target_feature(enable = "neon")]
#[inline]
fn ld(b: &[u8], o: usize) -> uint8x16_t {
    assert!(o + 16 <= b.len());
    // SAFETY: just checked.
    unsafe { vld1q_u8(b.as_ptr().add(o)) }
}

/// 16 activation quants of the Q8_K block `by` from element `o`.
#[target_feature(enable = "neon")]
#[inline]
fn q8(by: &[u8], o: usize) -> int8x16_t {
    vreinterpretq_s8_u8(ld(by, 4 + o))
}

/// The sum of the block's 16 activation sums.
fn bsums(by: &[u8]) -> i32 {
    (0..16).map(|j| rd16(by, 260 + 2 * j) as i16 as i32).sum()
}

/// The top two bits of 3 * q (a base-3 digit of TQ1_0), as ggml: (q + q / 2) / 2 >> 6.
#[target_feature(enable = "neon")]
#[inline]
fn trit(q: uint8x16_t) -> int8x16_t {
    vreinterpretq_s8_u8(vshrq_n_u8(vhaddq_u8(q, vshrq_n_u8(q, 1)), 6))
}

fn tq1_0<const DOT: bool>(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 54, y, 292);
    // SAFETY: NEON is the aarch64 baseline, FEAT_DotProd is detected where DOT; `check`
    // proved both operands hold nb blocks.
    unsafe { tq1_0_k::<DOT>(nb, x, y) }
}

/// # Safety
/// As `vdot`; `x` and `y` hold `nb` blocks.
#[target_feature(enable = "neon")]
unsafe fn tq1_0_k<const DOT: bool>(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    const POW3: [u8; 5] = [1, 3, 9, 27, 81];
    const SHIFT: [u8; 16] = [1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27];
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[54 * i..54 * (i + 1)];
        let by = &y[292 * i..292 * (i + 1)];
        let mut acc = vdupq_n_s32(0);
        // SAFETY: as documented; every load is bounds-checked by `ld`.
        unsafe {
            // the first 32 bytes hold five digits each, for elements 0..160
            let (qa, qb) = (ld(bx, 0), ld(bx, 16));
            for (k, &p) in POW3.iter().enumerate() {
                let m = vdupq_n_u8(p);
                acc = vdot::<DOT>(acc, trit(vmulq_u8(qa, m)), q8(by, 32 * k));
                acc = vdot::<DOT>(acc, trit(vmulq_u8(qb, m)), q8(by, 32 * k + 16));
            }
            // the next 16 bytes: five digits each, elements 160..240
            let qc = ld(bx, 32);
            for (k, &p) in POW3.iter().enumerate() {
                acc = vdot::<DOT>(acc, trit(vmulq_u8(qc, vdupq_n_u8(p))), q8(by, 160 + 16 * k));
            }
            // the 4 bytes of qh: four digits each, elements 240..256
            let qh = u32::from_le_bytes([bx[48], bx[49], bx[50], bx[51]]);
            let qd = vmulq_u8(
                vreinterpretq_u8_u32(vdupq_n_u32(qh)),
                vld1q_u8(SHIFT.as_ptr()),
            );
            acc = vdot::<DOT>(acc, trit(qd), q8(by, 240));
        }
        let sumi = vaddvq_s32(acc) - bsums(by);
        let d = h2f(rd16(bx, 52)) * f32::from_le_bytes([by[0], by[1], by[2], by[3]]);
        sumf = d.mul_add(sumi as f32, sumf);
    }
    sumf
}

fn tq2_0<const DOT: bool>(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 66, y, 292);
    // SAFETY: as in tq1_0.
    unsafe { tq2_0_k::<DOT>(nb, x, y) }
}

/// # Safety
/// As `vdot`; `x` and `y` hold `nb` blocks.
#[target_feature(enable = "neon")]
unsafe fn tq2_0_k<const DOT: bool>(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let m3 = vdupq_n_u8(3);
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[66 * i..66 * (i + 1)];
        let by = &y[292 * i..292 * (i + 1)];
        let mut acc = vdupq_n_s32(0);
        for j in [0, 32] {
            let (q0, q1) = (ld(bx, j), ld(bx, j + 16));
            let parts = [
                (q0, q1),
                (vshrq_n_u8(q0, 2), vshrq_n_u8(q1, 2)),
                (vshrq_n_u8(q0, 4), vshrq_n_u8(q1, 4)),
                (vshrq_n_u8(q0, 6), vshrq_n_u8(q1, 6)),
            ];
            for (k, (a, b)) in parts.into_iter().enumerate() {
                let o = 4 * j + 32 * k;
                // SAFETY: as documented.
                unsafe {
                    acc = vdot::<DOT>(acc, vreinterpretq_s8_u8(vandq_u8(a, m3)), q8(by, o));
                    acc = vdot::<DOT>(acc, vreinterpretq_s8_u8(vandq_u8(b, m3)), q8(by, o + 16));
                }
            }
        }
        let sumi = vaddvq_s32(acc) - bsums(by);
        let d = h2f(rd16(bx, 64)) * f32::from_le_bytes([by[0], by[1], by[2], by[3]]);
        sumf = d.mul_add(sumi as f32, sumf);
    }
    sumf
}
