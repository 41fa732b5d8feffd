//! NEON dot products for the float types and Q8_0/Q4_0. NEON is part of the aarch64 baseline,
//! so the kernels need no run-time check beyond the feature detection done by the caller.

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

use std::arch::aarch64::*;

use super::scalar::check;
use ggml::quants::fp16_to_fp32 as h2f;
use ggml::Type;

type Kernel = super::VecDotFn;

pub(super) fn kernel(ty: Type) -> Option<Kernel> {
    Some(match ty {
        Type::F32 => f32_neon,
        Type::Q8_0 => q8_0_neon,
        Type::Q4_0 => q4_0_neon,
        _ => return None,
    })
}

fn f32_neon(n: usize, x: &[u8], y: &[u8]) -> f32 {
    check(n, 1, x, 4, y, 4);
    // SAFETY: NEON is detected by the caller and `check` proved both hold n floats.
    unsafe { f32_k(n, x.as_ptr() as *const f32, y.as_ptr() as *const f32) }
}

/// # Safety
/// NEON must be available; `px` and `py` must point to `n` floats.
#[target_feature(enable = "neon")]
unsafe fn f32_k(n: usize, px: *const f32, py: *const f32) -> f32 {
    let mut acc = [vdupq_n_f32(0.0); 4];
    let mut i = 0;
    while i + 16 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            // SAFETY: 4 floats from i + 4k are in bounds.
            unsafe {
                *a = vfmaq_f32(
                    *a,
                    vld1q_f32(px.add(i + 4 * k)),
                    vld1q_f32(py.add(i + 4 * k)),
                );
            }
        }
        i += 16;
    }
    let mut sum = vaddvq_f32(vaddq_f32(
        vaddq_f32(acc[0], acc[1]),
        vaddq_f32(acc[2], acc[3]),
    ));
    while i < n {
        // SAFETY: i < n.
        sum += unsafe { *px.add(i) * *py.add(i) };
        i += 1;
    }
    sum
}

fn q8_0_neon(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 32, x, 34, y, 34);
    // SAFETY: NEON is detected by the caller and `check` proved both hold nb blocks.
    unsafe { q_k(nb, x, 34, y, false) }
}

fn q4_0_neon(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 32, x, 18, y, 34);
    // SAFETY: as above.
    unsafe { q_k(nb, x, 18, y, true) }
}

/// # Safety
/// NEON must be available; `x` must hold nb blocks of `xs` bytes, `y` nb Q8_0 blocks.
#[target_feature(enable = "neon")]
unsafe fn q_k(nb: usize, x: &[u8], xs: usize, y: &[u8], nibbles: bool) -> f32 {
    let mut sumf = 0.0f32;
    for ib in 0..nb {
        let bx = &x[xs * ib..xs * (ib + 1)];
        let by = &y[34 * ib..34 * (ib + 1)];
        // SAFETY: each block holds its quants after the 2-byte scale (16 or 32 bytes).
        let (x0, x1) = unsafe {
            if nibbles {
                let b = vld1q_u8(bx.as_ptr().add(2));
                let lo = vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(0x0F)));
                let hi = vreinterpretq_s8_u8(vshrq_n_u8(b, 4));
                (vsubq_s8(lo, vdupq_n_s8(8)), vsubq_s8(hi, vdupq_n_s8(8)))
            } else {
                (
                    vld1q_s8(bx.as_ptr().add(2) as *const i8),
                    vld1q_s8(bx.as_ptr().add(18) as *const i8),
                )
            }
        };
        // SAFETY: the Q8_0 block has 32 quants after its scale.
        let (y0, y1) = unsafe {
            (
                vld1q_s8(by.as_ptr().add(2) as *const i8),
                vld1q_s8(by.as_ptr().add(18) as *const i8),
            )
        };
        let p0 = vaddq_s32(
            vpaddlq_s16(vmull_s8(vget_low_s8(x0), vget_low_s8(y0))),
            vpaddlq_s16(vmull_s8(vget_high_s8(x0), vget_high_s8(y0))),
        );
        let p1 = vaddq_s32(
            vpaddlq_s16(vmull_s8(vget_low_s8(x1), vget_low_s8(y1))),
            vpaddlq_s16(vmull_s8(vget_high_s8(x1), vget_high_s8(y1))),
        );
        let sumi = vaddvq_s32(vaddq_s32(p0, p1));
        let d = h2f(u16::from_le_bytes([bx[0], bx[1]])) * h2f(u16::from_le_bytes([by[0], by[1]]));
        sumf += sumi as f32 * d;
    }
    sumf
}
