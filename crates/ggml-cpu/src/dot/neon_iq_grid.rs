//! NEON dot products of the grid IQ types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
//! IQ3_S) with Q8_K, after ggml's arm quants.c. ggml reduces each 16- or 32-element group to
//! an exact integer (vaddvq_s32), so SDOT changes only the speed; the floats follow its lines
//! as GCC compiles them (`a += b * c` fused), e.g. IQ2_XXS's `sumf1 += sumi * (0.5 + s)`.

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

use std::arch::aarch64::*;

use super::neon::{rd16, vdot};
use super::scalar::check;
use ggml::quants::fp16_to_fp32 as h2f;
use ggml::quants::iq_grids::{
    IQ1M_DELTA, IQ1S_DELTA, IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID,
    KSIGNS_IQ2XS,
};
use ggml::Type;

type Kernel = super::VecDotFn;

pub(super) fn kernel(ty: Type, dotprod: bool) -> Option<Kernel> {
    macro_rules! pick {
        ($f:ident) => {
            if dotprod {
                $f::<true>
            } else {
                $f::<false>
            }
        };
    }
    Some(match ty {
        Type::Iq2Xxs => pick!(iq2_xxs),
        Type::Iq2Xs => pick!(iq2_xs),
        Type::Iq2S => pick!(iq2_s),
        Type::Iq3Xxs => pick!(iq3_xxs),
        Type::Iq3S => pick!(iq3_s),
        Type::Iq1S => pick!(iq1_s),
        Type::Iq1M => pick!(iq1_m),
        _ => return None,
    })
}

fn rd32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn f32_at(b: &[u8], o: usize) -> f32 {
    f32::from_bits(rd32(b, o))
}

/// 8 grid bytes with the signs of `signs` (bit j set: element j negated).
#[target_feature(enable = "neon")]
#[inline]
fn signed(grid: u64, signs: u8) -> int8x8_t {
    const BITS: u64 = 0x8040_2010_0804_0201;
    let neg = vtst_u8(vdup_n_u8(signs), vcreate_u8(BITS));
    vmul_s8(
        vcreate_s8(grid),
        vreinterpret_s8_u8(vorr_u8(neg, vdup_n_u8(1))),
    )
}

/// 16 activation quants of the Q8_K block `by` from element `o`.
#[target_feature(enable = "neon")]
#[inline]
fn q8(by: &[u8], o: usize) -> int8x16_t {
    assert!(o + 16 <= 256 && by.len() >= 260);
    // SAFETY: just checked.
    unsafe { vld1q_s8(by.as_ptr().add(4 + o) as *const i8) }
}

/// The exact sum of a 16-element product.
///
/// # Safety
/// As `vdot`.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn dot16<const DOT: bool>(a: int8x16_t, b: int8x16_t) -> i32 {
    // SAFETY: as documented.
    vaddvq_s32(unsafe { vdot::<DOT>(vdupq_n_s32(0), a, b) })
}

/// The sum of 32 elements given as four 8-element signed grid points times the activations
/// from `o`.
///
/// # Safety
/// As `vdot`.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn dot32<const DOT: bool>(g: [int8x8_t; 4], by: &[u8], o: usize) -> i32 {
    // SAFETY: as documented.
    unsafe {
        let a = vdot::<DOT>(vdupq_n_s32(0), vcombine_s8(g[0], g[1]), q8(by, o));
        vaddvq_s32(vdot::<DOT>(a, vcombine_s8(g[2], g[3]), q8(by, o + 16)))
    }
}

fn join(a: u32, b: u32) -> u64 {
    a as u64 | (b as u64) << 32
}

macro_rules! entry {
    ($name:ident, $k:ident, $bs:expr) => {
        fn $name<const DOT: bool>(n: usize, x: &[u8], y: &[u8]) -> f32 {
            let nb = check(n, 256, x, $bs, y, 292);
            // SAFETY: NEON is the aarch64 baseline, FEAT_DotProd is detected where DOT;
            // `check` proved both operands hold nb blocks.
            unsafe { $k::<DOT>(nb, x, y) }
        }
    };
}

entry!(iq2_xxs, iq2_xxs_k, 66);
entry!(iq2_xs, iq2_xs_k, 74);
entry!(iq2_s, iq2_s_k, 82);
entry!(iq3_xxs, iq3_xxs_k, 98);
entry!(iq3_s, iq3_s_k, 110);
entry!(iq1_s, iq1_s_k, 50);
entry!(iq1_m, iq1_m_k, 56);

/// # Safety
/// As `vdot`; `x` and `y` hold `nb` blocks.
#[target_feature(enable = "neon")]
unsafe fn iq2_xxs_k<const DOT: bool>(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[66 * i..66 * (i + 1)];
        let by = &y[292 * i..292 * (i + 1)];
        let d = h2f(rd16(bx, 0)) * f32_at(by, 0);
        let (mut sumf1, mut sumf2) = (0.0f32, 0.0f32);
        for ib32 in (0..8).step_by(2) {
            let mut s = [0i32; 2];
            let mut sc = [0u32; 2];
            for h in 0..2 {
                let o = 2 + 8 * (ib32 + h);
                let aux = rd32(bx, o + 4);
                let g = [0, 1, 2, 3].map(|l| {
                    signed(
                        IQ2XXS_GRID[bx[o + l] as usize],
                        KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize],
                    )
                });
                // SAFETY: as documented.
                s[h] = unsafe { dot32::<DOT>(g, by, 32 * (ib32 + h)) };
                sc[h] = aux >> 28;
            }
            sumf1 = (s[0] as f32).mul_add(0.5 + sc[0] as f32, sumf1);
            sumf2 = (s[1] as f32).mul_add(0.5 + sc[1] as f32, sumf2);
        }
        sumf = d.mul_add(sumf1 + sumf2, sumf);
    }
    0.25 * sumf
}

/// # Safety
/// As `vdot`; `x` and `y` hold `nb` blocks.
#[target_feature(enable = "neon")]
unsafe fn iq2_xs_k<const DOT: bool>(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[74 * i..74 * (i + 1)];
        let by = &y[292 * i..292 * (i + 1)];
        let d = h2f(rd16(bx, 0)) * f32_at(by, 0);
        let mut sumi = 0i32;
        for g16 in 0..16 {
            let q = [rd16(bx, 2 + 4 * g16), rd16(bx, 4 + 4 * g16)];
            let [a, b] = q.map(|v| {
                signed(
                    IQ2XS_GRID[(v & 511) as usize],
                    KSIGNS_IQ2XS[(v >> 9) as usize],
                )
            });
            let sb = bx[66 + g16 / 2];
            let ls = if g16 % 2 == 0 { sb & 0xf } else { sb >> 4 };
            // SAFETY: as documented.
            sumi +=
                unsafe { dot16::<DOT>(vcombine_s8(a, b), q8(by, 16 * g16)) } * (2 * ls as i32 + 1);
        }
        sumf = d.mul_add(sumi as f32, sumf);
    }
    0.125 * sumf
}

/// # Safety
/// As `vdot`; `x` and `y` hold `nb` blocks.
#[target_feature(enable = "neon")]
unsafe fn iq2_s_k<const DOT: bool>(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[82 * i..82 * (i + 1)];
        let by = &y[292 * i..292 * (i + 1)];
        let d = h2f(rd16(bx, 0)) * f32_at(by, 0);
        let mut sumi = 0i32;
        for ib32 in 0..8 {
            let qh = bx[66 + ib32] as usize;
            let g = [0, 1, 2, 3].map(|l| {
                let idx = bx[2 + 4 * ib32 + l] as usize | ((qh << (8 - 2 * l)) & 0x300);
                signed(IQ2S_GRID[idx], bx[34 + 4 * ib32 + l])
            });
            let sb = bx[74 + ib32];
            // SAFETY: as documented.
            unsafe {
                let lo = dot16::<DOT>(vcombine_s8(g[0], g[1]), q8(by, 32 * ib32));
                let hi = dot16::<DOT>(vcombine_s8(g[2], g[3]), q8(by, 32 * ib32 + 16));
                sumi += lo * (1 + 2 * (sb & 0xf) as i32) + hi * (1 + 2 * (sb >> 4) as i32);
            }
        }
        sumf = d.mul_add(sumi as f32, sumf);
    }
    0.125 * sumf
}

/// # Safety
/// As `vdot`; `x` and `y` hold `nb` blocks.
#[target_feature(enable = "neon")]
unsafe fn iq3_xxs_k<const DOT: bool>(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[98 * i..98 * (i + 1)];
        let by = &y[292 * i..292 * (i + 1)];
        let d = h2f(rd16(bx, 0)) * f32_at(by, 0);
        let (mut sumf1, mut sumf2) = (0.0f32, 0.0f32);
        for ib32 in (0..8).step_by(2) {
            let mut s = [0i32; 2];
            let mut sc = [0u32; 2];
            for h in 0..2 {
                let q3 = &bx[2 + 8 * (ib32 + h)..];
                let aux = rd32(bx, 66 + 4 * (ib32 + h));
                let g = [0, 1, 2, 3].map(|l| {
                    let grid = join(
                        IQ3XXS_GRID[q3[2 * l] as usize],
                        IQ3XXS_GRID[q3[2 * l + 1] as usize],
                    );
                    signed(grid, KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize])
                });
                // SAFETY: as documented.
                s[h] = unsafe { dot32::<DOT>(g, by, 32 * (ib32 + h)) };
                sc[h] = aux >> 28;
            }
            sumf1 = (s[0] as f32).mul_add(0.5 + sc[0] as f32, sumf1);
            sumf2 = (s[1] as f32).mul_add(0.5 + sc[1] as f32, sumf2);
        }
        sumf = d.mul_add(sumf1 + sumf2, sumf);
    }
    0.5 * sumf
}

/// # Safety
/// As `vdot`; `x` and `y` hold `nb` blocks.
#[target_feature(enable = "neon")]
unsafe fn iq3_s_k<const DOT: bool>(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[110 * i..110 * (i + 1)];
        let by = &y[292 * i..292 * (i + 1)];
        let d = h2f(rd16(bx, 0)) * f32_at(by, 0);
        let mut sumi = 0i32;
        for ib32 in 0..8 {
            let qh = bx[66 + ib32] as usize;
            let qs = &bx[2 + 8 * ib32..];
            let g = [0, 1, 2, 3].map(|l| {
                let i1 = qs[2 * l] as usize | ((qh << (8 - 2 * l)) & 256);
                let i2 = qs[2 * l + 1] as usize | ((qh << (7 - 2 * l)) & 256);
                signed(join(IQ3S_GRID[i1], IQ3S_GRID[i2]), bx[74 + 4 * ib32 + l])
            });
            let sc = bx[106 + ib32 / 2];
            let ls = if ib32 % 2 == 0 { sc & 0xf } else { sc >> 4 };
            // SAFETY: as documented.
            sumi += unsafe { dot32::<DOT>(g, by, 32 * ib32) } * (2 * ls as i32 + 1);
        }
        sumf = d.mul_add(sumi as f32, sumf);
    }
    sumf
}

/// # Safety
/// As `vdot`; `x` and `y` hold `nb` blocks.
#[target_feature(enable = "neon")]
unsafe fn iq1_s_k<const DOT: bool>(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[50 * i..50 * (i + 1)];
        let by = &y[292 * i..292 * (i + 1)];
        let bsum = |j: usize| rd16(by, 260 + 2 * j) as i16 as i32;
        let (mut sumi12, mut sumi3) = (0i32, 0i32);
        for ib in 0..8 {
            let qh = rd16(bx, 34 + 2 * ib) as usize;
            let g = [0, 1, 2, 3].map(|l| {
                let idx = bx[2 + 4 * ib + l] as usize | (((qh >> (3 * l)) & 7) << 8);
                vcreate_s8(IQ1S_GRID[idx])
            });
            let ls = 2 * ((qh >> 12) & 7) as i32 + 1;
            // SAFETY: as documented.
            sumi12 += unsafe { dot32::<DOT>(g, by, 32 * ib) } * ls;
            let sign = if qh & 0x8000 != 0 { -1 } else { 1 };
            sumi3 += (bsum(2 * ib) + bsum(2 * ib + 1)) * ls * sign;
        }
        let dd = f32_at(by, 0) * h2f(rd16(bx, 0));
        sumf = dd.mul_add(IQ1S_DELTA.mul_add(sumi3 as f32, sumi12 as f32), sumf);
    }
    sumf
}

/// # Safety
/// As `vdot`; `x` and `y` hold `nb` blocks.
#[target_feature(enable = "neon")]
unsafe fn iq1_m_k<const DOT: bool>(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[56 * i..56 * (i + 1)];
        let by = &y[292 * i..292 * (i + 1)];
        let sc = |j: usize| rd16(bx, 48 + 2 * j);
        let u =
            (sc(0) >> 12) | ((sc(1) >> 8) & 0x00f0) | ((sc(2) >> 4) & 0x0f00) | (sc(3) & 0xf000);
        let (mut sumi1, mut sumi2) = (0i32, 0i32);
        for g16 in 0..16 {
            let qh = bx[32 + g16] as usize;
            let a = vcreate_s8(IQ1S_GRID[bx[2 * g16] as usize | ((qh << 8) & 0x700)]);
            let b = vcreate_s8(IQ1S_GRID[bx[2 * g16 + 1] as usize | ((qh << 4) & 0x700)]);
            // the delta of each 8 values: -1 where its bit (3 or 7) is set
            let da = if qh & 0x08 != 0 { -1 } else { 1 };
            let db = if qh & 0x80 != 0 { -1 } else { 1 };
            let dv = vcombine_s8(vdup_n_s8(da), vdup_n_s8(db));
            let ls = 2 * ((sc(g16 / 4) as i32 >> (3 * (g16 % 4))) & 7) + 1;
            let qy = q8(by, 16 * g16);
            // SAFETY: as documented.
            unsafe {
                sumi1 += ls * dot16::<DOT>(vcombine_s8(a, b), qy);
                sumi2 += ls * dot16::<DOT>(dv, qy);
            }
        }
        let dd = f32_at(by, 0) * h2f(u);
        sumf = dd.mul_add(IQ1M_DELTA.mul_add(sumi2 as f32, sumi1 as f32), sumf);
    }
    sumf
}
