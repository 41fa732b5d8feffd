//! NEON dot products in ggml's aarch64 float order (ggml-cpu/arch/arm/quants.c and vec.cpp
//! as GCC compiles them): F32, F16 and the 32-element block types here, the K-quants and
//! IQ4_XS in `neon_k`. BF16 keeps the scalar kernel: ggml's aarch64 build has only its
//! generic loop (a double sum in element order), which the scalar kernel is.
//! NEON is part of the aarch64 baseline; the SDOT (dotprod) variants are picked at run time
//! by the caller. Where ggml keeps per-lane float accumulators (Q4_0, Q4_1, Q5_0, Q5_1,
//! Q8_0) the lanes SDOT fills differ from those of ggml's vmull/vpaddl emulation, so the two
//! builds give different bits and each variant follows its own. GCC contracts ggml's scalar
//! `a += b * c` into one fused multiply-add (the vector vmlaq_n_f32 it leaves unfused), so
//! those lines are `mul_add` here.

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

use std::arch::aarch64::*;
use std::arch::asm;

use super::scalar::check;
use ggml::quants::{
    e8m0_to_fp32_half, fp16_to_fp32 as h2f, ue4m3_to_fp32, KVALUES_IQ4NL, KVALUES_MXFP4,
};
use ggml::Type;

type Kernel = super::VecDotFn;

/// The NEON kernel of `ty`, with SDOT where `dotprod` (the CPU has FEAT_DotProd).
pub(super) fn kernel(ty: Type, dotprod: bool) -> Option<Kernel> {
    if let Some(k) = super::neon_k::kernel(ty, dotprod) {
        return Some(k);
    }
    if let Some(k) = super::neon_iq::kernel(ty, dotprod) {
        return Some(k);
    }
    if let Some(k) = super::neon_q1q2::kernel(ty, dotprod) {
        return Some(k);
    }
    if let Some(k) = super::neon_iq_grid::kernel(ty, dotprod) {
        return Some(k);
    }
    Some(match (ty, dotprod) {
        (Type::F32, _) => f32_neon,
        (Type::F16, _) => f16_neon,
        (Type::Q4_0, false) => q4_0::<false>,
        (Type::Q4_0, true) => q4_0::<true>,
        (Type::Q4_1, false) => q4_1::<false>,
        (Type::Q4_1, true) => q4_1::<true>,
        (Type::Q5_0, false) => q5_0::<false>,
        (Type::Q5_0, true) => q5_0::<true>,
        (Type::Q5_1, false) => q5_1::<false>,
        (Type::Q5_1, true) => q5_1::<true>,
        (Type::Q8_0, false) => q8_0::<false>,
        (Type::Q8_0, true) => q8_0::<true>,
        (Type::Iq4Nl, false) => iq4_nl::<false>,
        (Type::Iq4Nl, true) => iq4_nl::<true>,
        (Type::Mxfp4, false) => mxfp4::<false>,
        (Type::Mxfp4, true) => mxfp4::<true>,
        (Type::Nvfp4, false) => nvfp4::<false>,
        (Type::Nvfp4, true) => nvfp4::<true>,
        _ => return None,
    })
}

/// ggml_vdotq_s32: SDOT where `DOT`, else ggml's emulation (vmull_s8 + vpaddlq_s16), whose
/// four lanes hold other partial sums than SDOT's (the same total).
///
/// # Safety
/// NEON must be available, and FEAT_DotProd where `DOT`.
#[target_feature(enable = "neon")]
#[inline]
pub(super) unsafe fn vdot<const DOT: bool>(
    acc: int32x4_t,
    a: int8x16_t,
    b: int8x16_t,
) -> int32x4_t {
    if DOT {
        let mut r = acc;
        // SAFETY: the caller guarantees FEAT_DotProd; SDOT reads and writes registers only.
        unsafe {
            asm!(
                ".arch_extension dotprod",
                "sdot {r:v}.4s, {a:v}.16b, {b:v}.16b",
                r = inout(vreg) r,
                a = in(vreg) a,
                b = in(vreg) b,
                options(pure, nomem, nostack, preserves_flags)
            );
        }
        r
    } else {
        let p0 = vmull_s8(vget_low_s8(a), vget_low_s8(b));
        let p1 = vmull_s8(vget_high_s8(a), vget_high_s8(b));
        vaddq_s32(acc, vaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1)))
    }
}

#[inline(always)]
pub(super) fn rd16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

#[inline(always)]
fn hf(b: &[u8], o: usize) -> f32 {
    h2f(rd16(b, o))
}

fn f32_neon(n: usize, x: &[u8], y: &[u8]) -> f32 {
    check(n, 1, x, 4, y, 4);
    // SAFETY: NEON is the aarch64 baseline and `check` proved both hold n floats.
    unsafe { f32_k(n, x.as_ptr() as *const f32, y.as_ptr() as *const f32) }
}

/// ggml_vec_dot_f32 (GGML_F32_STEP 16: four fused accumulators, reduced as (0 + 2) + (1 + 3),
/// then the leftovers, which GCC fuses into the float sum).
///
/// # Safety
/// NEON must be available; `px` and `py` must point to `n` floats.
#[target_feature(enable = "neon")]
unsafe fn f32_k(n: usize, px: *const f32, py: *const f32) -> f32 {
    let np = n & !15;
    let mut acc = [vdupq_n_f32(0.0); 4];
    for i in (0..np).step_by(16) {
        for (k, a) in acc.iter_mut().enumerate() {
            // SAFETY: 4 floats from i + 4k < np are in bounds.
            unsafe {
                *a = vfmaq_f32(
                    *a,
                    vld1q_f32(px.add(i + 4 * k)),
                    vld1q_f32(py.add(i + 4 * k)),
                );
            }
        }
    }
    let mut sum = reduce4(acc);
    for i in np..n {
        // SAFETY: i < n.
        sum = unsafe { (*px.add(i)).mul_add(*py.add(i), sum) };
    }
    sum
}

/// GGML_F32x4_REDUCE: (acc0 + acc2) + (acc1 + acc3), then the lanes pairwise.
#[target_feature(enable = "neon")]
#[inline]
fn reduce4(acc: [float32x4_t; 4]) -> f32 {
    vaddvq_f32(vaddq_f32(
        vaddq_f32(acc[0], acc[2]),
        vaddq_f32(acc[1], acc[3]),
    ))
}

/// Four halves widened to floats (FCVTL, exact; part of the aarch64 baseline, unlike the
/// half-precision arithmetic ggml uses only when built with +fp16).
///
/// # Safety
/// `p` must point to 4 halves.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn ld_f16x4(p: *const u16) -> float32x4_t {
    // SAFETY: as documented.
    let h = unsafe { vld1_u16(p) };
    let out: float32x4_t;
    // SAFETY: FCVTL reads and writes registers only.
    unsafe {
        asm!(
            "fcvtl {o:v}.4s, {i:v}.4h",
            o = out(vreg) out,
            i = in(vreg) h,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    out
}

fn f16_neon(n: usize, x: &[u8], y: &[u8]) -> f32 {
    check(n, 1, x, 2, y, 2);
    // SAFETY: NEON is the aarch64 baseline and `check` proved both hold n halves.
    unsafe { f16_k(n, x.as_ptr() as *const u16, y.as_ptr() as *const u16) }
}

/// ggml_vec_dot_f16 without half-precision arithmetic (GGML_F32Cx4: halves widened, four
/// fused f32 accumulators of 4, reduced as for F32 into a double that takes the leftovers).
///
/// # Safety
/// NEON must be available; `px` and `py` must point to `n` halves.
#[target_feature(enable = "neon")]
unsafe fn f16_k(n: usize, px: *const u16, py: *const u16) -> f32 {
    let np = n & !15;
    let mut acc = [vdupq_n_f32(0.0); 4];
    for i in (0..np).step_by(16) {
        for (k, a) in acc.iter_mut().enumerate() {
            // SAFETY: 4 halves from i + 4k < np are in bounds.
            unsafe {
                *a = vfmaq_f32(*a, ld_f16x4(px.add(i + 4 * k)), ld_f16x4(py.add(i + 4 * k)));
            }
        }
    }
    let mut sum = reduce4(acc) as f64;
    for i in np..n {
        // SAFETY: i < n.
        let (a, b) = unsafe { (h2f(*px.add(i)), h2f(*py.add(i))) };
        sum += (a * b) as f64;
    }
    sum as f32
}

/// A 32-element weight block as ggml's NEON code unpacks it.
trait Block {
    /// Bytes per block.
    const SIZE: usize;
    /// Whether the partner is Q8_1 (scale and d*sum(q) before the quants) rather than Q8_0.
    const Q8_1: bool;
    /// The 32 weights as signed bytes: elements 0..16 and 16..32.
    ///
    /// # Safety
    /// NEON must be available; `b` holds one block.
    unsafe fn unpack(b: &[u8]) -> (int8x16_t, int8x16_t);
    /// The block's scale.
    fn scale(b: &[u8]) -> f32 {
        hf(b, 0)
    }
}

/// The nibbles of 16 bytes: low ones (elements 0..16) and high ones (16..32).
#[target_feature(enable = "neon")]
#[inline]
unsafe fn nibbles(p: &[u8]) -> (int8x16_t, int8x16_t) {
    // SAFETY: the callers pass at least 16 bytes.
    let v = unsafe { vld1q_u8(p.as_ptr()) };
    (
        vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))),
        vreinterpretq_s8_u8(vshrq_n_u8(v, 4)),
    )
}

/// The fifth bits of Q5_0/Q5_1 as 0x10 bytes: bits 0..16 of `qh`, then bits 16..32 (ggml's
/// table_b2b_0 lookup, computed instead of looked up).
#[target_feature(enable = "neon")]
#[inline]
unsafe fn fifth_bits(qh: &[u8]) -> (uint8x16_t, uint8x16_t) {
    const LO: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
    const HI: [u8; 16] = [2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3];
    const BITS: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];
    let w = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
    // SAFETY: the tables are 16 bytes each.
    let (lo, hi, bits) = unsafe {
        (
            vld1q_u8(LO.as_ptr()),
            vld1q_u8(HI.as_ptr()),
            vld1q_u8(BITS.as_ptr()),
        )
    };
    let q = vreinterpretq_u8_u32(vdupq_n_u32(w));
    let m = vdupq_n_u8(0x10);
    (
        vandq_u8(vtstq_u8(vqtbl1q_u8(q, lo), bits), m),
        vandq_u8(vtstq_u8(vqtbl1q_u8(q, hi), bits), m),
    )
}

struct Q40;
impl Block for Q40 {
    const SIZE: usize = 18;
    const Q8_1: bool = false;
    #[target_feature(enable = "neon")]
    #[inline]
    unsafe fn unpack(b: &[u8]) -> (int8x16_t, int8x16_t) {
        // SAFETY: 16 quant bytes follow the scale.
        let (l, h) = unsafe { nibbles(&b[2..18]) };
        (vsubq_s8(l, vdupq_n_s8(8)), vsubq_s8(h, vdupq_n_s8(8)))
    }
}

struct Q41;
impl Block for Q41 {
    const SIZE: usize = 20;
    const Q8_1: bool = true;
    #[target_feature(enable = "neon")]
    #[inline]
    unsafe fn unpack(b: &[u8]) -> (int8x16_t, int8x16_t) {
        // SAFETY: 16 quant bytes follow d and m.
        unsafe { nibbles(&b[4..20]) }
    }
}

struct Q50;
impl Block for Q50 {
    const SIZE: usize = 22;
    const Q8_1: bool = false;
    #[target_feature(enable = "neon")]
    #[inline]
    unsafe fn unpack(b: &[u8]) -> (int8x16_t, int8x16_t) {
        // SAFETY: qh (4 bytes) and 16 quant bytes follow the scale.
        let ((l, h), (bl, bh)) = unsafe { (nibbles(&b[6..22]), fifth_bits(&b[2..6])) };
        // ggml subtracts (!b) << 4: the nibble with its fifth bit, minus 16
        let s = vdupq_n_u8(0x10);
        (
            vsubq_s8(l, vreinterpretq_s8_u8(veorq_u8(bl, s))),
            vsubq_s8(h, vreinterpretq_s8_u8(veorq_u8(bh, s))),
        )
    }
}

struct Q51;
impl Block for Q51 {
    const SIZE: usize = 24;
    const Q8_1: bool = true;
    #[target_feature(enable = "neon")]
    #[inline]
    unsafe fn unpack(b: &[u8]) -> (int8x16_t, int8x16_t) {
        // SAFETY: qh (4 bytes) and 16 quant bytes follow d and m.
        let ((l, h), (bl, bh)) = unsafe { (nibbles(&b[8..24]), fifth_bits(&b[4..8])) };
        (
            vorrq_s8(l, vreinterpretq_s8_u8(bl)),
            vorrq_s8(h, vreinterpretq_s8_u8(bh)),
        )
    }
}

struct Q80;
impl Block for Q80 {
    const SIZE: usize = 34;
    const Q8_1: bool = false;
    #[target_feature(enable = "neon")]
    #[inline]
    unsafe fn unpack(b: &[u8]) -> (int8x16_t, int8x16_t) {
        // SAFETY: 32 quant bytes follow the scale.
        unsafe {
            (
                vld1q_s8(b.as_ptr().add(2) as *const i8),
                vld1q_s8(b.as_ptr().add(18) as *const i8),
            )
        }
    }
}

struct Iq4Nl;
impl Block for Iq4Nl {
    const SIZE: usize = 18;
    const Q8_1: bool = false;
    #[target_feature(enable = "neon")]
    #[inline]
    unsafe fn unpack(b: &[u8]) -> (int8x16_t, int8x16_t) {
        // SAFETY: the table has 16 entries; 16 quant bytes follow the scale.
        unsafe {
            let values = vld1q_s8(KVALUES_IQ4NL.as_ptr());
            let v = vld1q_u8(b.as_ptr().add(2));
            (
                vqtbl1q_s8(values, vandq_u8(v, vdupq_n_u8(0x0F))),
                vqtbl1q_s8(values, vshrq_n_u8(v, 4)),
            )
        }
    }
}

struct Mxfp4;
impl Block for Mxfp4 {
    const SIZE: usize = 17;
    const Q8_1: bool = false;
    #[target_feature(enable = "neon")]
    #[inline]
    unsafe fn unpack(b: &[u8]) -> (int8x16_t, int8x16_t) {
        // SAFETY: the table has 16 entries; 16 quant bytes follow the exponent.
        unsafe {
            let values = vld1q_s8(KVALUES_MXFP4.as_ptr());
            let v = vld1q_u8(b.as_ptr().add(1));
            (
                vqtbl1q_s8(values, vandq_u8(v, vdupq_n_u8(0x0F))),
                vqtbl1q_s8(values, vshrq_n_u8(v, 4)),
            )
        }
    }
    fn scale(b: &[u8]) -> f32 {
        e8m0_to_fp32_half(b[0])
    }
}

/// The integer dot product of one weight block with its activation block, in ggml's lanes.
///
/// # Safety
/// As `vdot`; `bx` holds one `B` block and `by` one Q8_0/Q8_1 block.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn block_dot<B: Block, const DOT: bool>(bx: &[u8], by: &[u8]) -> int32x4_t {
    let q = if B::Q8_1 { 4 } else { 2 };
    // SAFETY: as documented; the activation block holds 32 quants from q.
    unsafe {
        let (xl, xh) = B::unpack(bx);
        let yl = vld1q_s8(by.as_ptr().add(q) as *const i8);
        let yh = vld1q_s8(by.as_ptr().add(q + 16) as *const i8);
        vdot::<DOT>(vdot::<DOT>(vdupq_n_s32(0), xl, yl), xh, yh)
    }
}

/// What differs between the types in how ggml turns the block sums into floats.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Finish {
    /// Q4_0: lane accumulators; the tail block adds `sumi * dx * dy` (left to right).
    Q40,
    /// Q5_0, Q8_0: lane accumulators; the tail adds `(dx * dy) * sumi`.
    Plain,
    /// Q4_1: lane accumulators and one running sum of `mx0 * sy0 + mx1 * sy1` per pair.
    Q41,
    /// Q5_1: lane accumulators and a running `mx * sy` per block of the pair.
    Q51,
    /// IQ4_NL, MXFP4: no lane accumulators, `sumf += d0 * sumi0 + d1 * sumi1` per pair.
    Iq4Nl,
}

/// ggml's NEON loop over pairs of blocks and its scalar tail.
///
/// # Safety
/// As `vdot`; `x` and `y` hold `nb` blocks each.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn pairs<B: Block, const DOT: bool>(nb: usize, x: &[u8], y: &[u8], fin: Finish) -> f32 {
    let ys = if B::Q8_1 { 36 } else { 34 };
    let xb = |i: usize| &x[B::SIZE * i..B::SIZE * (i + 1)];
    let yb = |i: usize| &y[ys * i..ys * (i + 1)];
    let mut sumv0 = vdupq_n_f32(0.0);
    let mut sumv1 = vdupq_n_f32(0.0);
    let (mut summs0, mut summs1) = (0.0f32, 0.0f32);
    let mut sumf = 0.0f32;
    let mut ib = 0;
    while ib + 1 < nb {
        let (x0, x1, y0, y1) = (xb(ib), xb(ib + 1), yb(ib), yb(ib + 1));
        // SAFETY: blocks ib and ib + 1 exist.
        let (p0, p1) = unsafe { (block_dot::<B, DOT>(x0, y0), block_dot::<B, DOT>(x1, y1)) };
        let d0 = B::scale(x0) * hf(y0, 0);
        let d1 = B::scale(x1) * hf(y1, 0);
        match fin {
            Finish::Iq4Nl => {
                let s1 = vaddvq_s32(p1) as f32;
                sumf += d0.mul_add(vaddvq_s32(p0) as f32, d1 * s1);
            }
            _ => {
                if fin == Finish::Q41 {
                    summs0 += hf(x0, 2).mul_add(hf(y0, 2), hf(x1, 2) * hf(y1, 2));
                } else if fin == Finish::Q51 {
                    summs0 = hf(x0, 2).mul_add(hf(y0, 2), summs0);
                    summs1 = hf(x1, 2).mul_add(hf(y1, 2), summs1);
                }
                sumv0 = vmlaq_n_f32(sumv0, vcvtq_f32_s32(p0), d0);
                sumv1 = vmlaq_n_f32(sumv1, vcvtq_f32_s32(p1), d1);
            }
        }
        ib += 2;
    }
    match fin {
        Finish::Iq4Nl => {}
        Finish::Q41 => sumf = vaddvq_f32(sumv0) + vaddvq_f32(sumv1) + summs0,
        Finish::Q51 => sumf = vaddvq_f32(sumv0) + vaddvq_f32(sumv1) + summs0 + summs1,
        _ => sumf = vaddvq_f32(sumv0) + vaddvq_f32(sumv1),
    }
    if ib < nb {
        let (bx, by) = (xb(ib), yb(ib));
        // SAFETY: block ib exists.
        let sumi = unsafe { vaddvq_s32(block_dot::<B, DOT>(bx, by)) } as f32;
        let (dx, dy) = (B::scale(bx), hf(by, 0));
        sumf = match fin {
            Finish::Q40 => (sumi * dx).mul_add(dy, sumf),
            Finish::Plain | Finish::Iq4Nl => (dx * dy).mul_add(sumi, sumf),
            Finish::Q41 | Finish::Q51 => sumf + (dx * dy).mul_add(sumi, hf(bx, 2) * hf(by, 2)),
        };
    }
    sumf
}

macro_rules! block_kernel {
    ($name:ident, $blk:ty, $ys:expr, $fin:expr) => {
        fn $name<const DOT: bool>(n: usize, x: &[u8], y: &[u8]) -> f32 {
            let nb = check(n, 32, x, <$blk>::SIZE, y, $ys);
            // SAFETY: NEON is the aarch64 baseline and the DOT variant is only chosen where
            // FEAT_DotProd is detected; `check` proved both operands hold nb blocks.
            unsafe { pairs::<$blk, DOT>(nb, x, y, $fin) }
        }
    };
}

block_kernel!(q4_0, Q40, 34, Finish::Q40);
block_kernel!(q4_1, Q41, 36, Finish::Q41);
block_kernel!(q5_0, Q50, 34, Finish::Plain);
block_kernel!(q5_1, Q51, 36, Finish::Q51);
block_kernel!(q8_0, Q80, 34, Finish::Plain);
block_kernel!(iq4_nl, Iq4Nl, 34, Finish::Iq4Nl);
block_kernel!(mxfp4, Mxfp4, 34, Finish::Iq4Nl);

fn nvfp4<const DOT: bool>(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 64, x, 36, y, 68);
    // SAFETY: NEON is the aarch64 baseline, FEAT_DotProd is detected where DOT; `check`
    // proved both operands hold nb blocks.
    unsafe { nvfp4_k::<DOT>(nb, x, y) }
}

/// ggml_vec_dot_nvfp4_q8_0: the four 16-element sub-block sums in the lanes of one vector
/// (in both of ggml's variants), scaled by UE4M3 * the Q8_0 scale and fused into one
/// accumulator.
///
/// # Safety
/// As `vdot`; `x` holds `nb` NVFP4 blocks and `y` 2 * nb Q8_0 blocks.
#[target_feature(enable = "neon")]
unsafe fn nvfp4_k<const DOT: bool>(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut acc = vdupq_n_f32(0.0);
    // SAFETY: the table has 16 entries.
    let values = unsafe { vld1q_s8(KVALUES_MXFP4.as_ptr()) };
    let m4 = vdupq_n_u8(0x0F);
    for ib in 0..nb {
        let bx = &x[36 * ib..36 * (ib + 1)];
        let y0 = &y[68 * ib..68 * ib + 34];
        let y1 = &y[68 * ib + 34..68 * (ib + 1)];
        let mut sumi = [0i32; 4];
        for (si, s) in sumi.iter_mut().enumerate() {
            let by = if si < 2 { y0 } else { y1 };
            // SAFETY: 8 quant bytes at 4 + 8si; 16 activation quants at 2 + 16 (si % 2).
            unsafe {
                let q = vld1_u8(bx.as_ptr().add(4 + 8 * si));
                let lo = vqtbl1_s8(values, vand_u8(q, vget_low_u8(m4)));
                let hi = vqtbl1_s8(values, vshr_n_u8(q, 4));
                let yv = vld1q_s8(by.as_ptr().add(2 + 16 * (si % 2)) as *const i8);
                *s = vaddvq_s32(vdot::<DOT>(vdupq_n_s32(0), vcombine_s8(lo, hi), yv));
            }
        }
        let (dy0, dy1) = (hf(y0, 0), hf(y1, 0));
        let sc = [
            ue4m3_to_fp32(bx[0]) * dy0,
            ue4m3_to_fp32(bx[1]) * dy0,
            ue4m3_to_fp32(bx[2]) * dy1,
            ue4m3_to_fp32(bx[3]) * dy1,
        ];
        // SAFETY: both arrays hold 4 values.
        unsafe {
            acc = vfmaq_f32(
                acc,
                vcvtq_f32_s32(vld1q_s32(sumi.as_ptr())),
                vld1q_f32(sc.as_ptr()),
            );
        }
    }
    vaddvq_f32(acc)
}
