//! IQ4_XS: IQ4_NL's 16 non-linear levels in 256-value super-blocks of eight 32-value blocks,
//! each block with a 6-bit scale of the super-block's f16 scale (ggml's
//! quantize_row_iq4_nl_impl with super_block_size = QK_K, block_size = 32, ntry = 7).
//!
//! Layout (ggml-common.h): d (f16), scales_h (u16, 2 high bits per block), scales_l[4]
//! (4 low bits per block), qs[128] = 136 bytes.

use super::blocks::KVALUES_IQ4NL;
use super::fp::{fp16_to_fp32, fp32_to_fp16};
use super::search::{best_index_int8, nearest_int, GROUP_MAX_EPS};

pub const IQ4_XS_SIZE: usize = 136;
const QK_K: usize = 256;

/// The search of one 32-value block: the scale that best fits the weighted levels, trying
/// the 15 scales that put the block's extreme on levels -127 - 7 .. -127 + 7 (over max).
fn block_scale(xb: &[f32], weight: &[f32; 32]) -> f32 {
    let values = &KVALUES_IQ4NL;
    let mut amax = 0.0f32;
    let mut max = 0.0f32;
    for &v in xb {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        return 0.0;
    }
    let v0 = values[0] as f32;
    let fit = |id: f32| {
        let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
        for j in 0..32 {
            let q = values[best_index_int8(values, id * xb[j])] as f32;
            sumqx += weight[j] * q * xb[j];
            sumq2 += weight[j] * q * q;
        }
        (sumqx, sumq2)
    };
    let d = -max / v0;
    let (sumqx, sumq2) = fit(1.0 / d);
    let mut d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
    let mut best = d * sumqx;
    for itry in -7..=7 {
        let (sumqx, sumq2) = fit((itry as f32 + v0) / max);
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    d
}

fn quantize_block(x: &[f32], qw: Option<&[f32]>, y: &mut [u8]) {
    let values = &KVALUES_IQ4NL;
    let mut sigma2 = 0.0f32;
    for &v in x {
        sigma2 += v * v;
    }
    sigma2 *= 2.0 / QK_K as f32;
    let mut scales = [0.0f32; 8];
    let mut weight = [0.0f32; 32];
    let (mut max_scale, mut amax_scale) = (0.0f32, 0.0f32);
    for ib in 0..8 {
        let xb = &x[32 * ib..32 * ib + 32];
        match qw {
            Some(qw) => {
                for j in 0..32 {
                    weight[j] = qw[32 * ib + j] * (sigma2 + xb[j] * xb[j]).sqrt();
                }
            }
            None => {
                for j in 0..32 {
                    weight[j] = xb[j] * xb[j];
                }
            }
        }
        let d = block_scale(xb, &weight);
        scales[ib] = d;
        if d.abs() > amax_scale {
            amax_scale = d.abs();
            max_scale = d;
        }
    }
    // -max_scale / 32 keeps ggml's -0.0 for an all-zero super-block
    let d = -max_scale / 32.0;
    y[0..2].copy_from_slice(&fp32_to_fp16(d).to_le_bytes());
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut l = [0u8; QK_K];
    let mut scales_h = 0u16;
    let mut scales_l = [0u8; 4];
    for ib in 0..8 {
        let ls = nearest_int(id * scales[ib]).clamp(-32, 31);
        let dl = d * ls as f32;
        let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
        for j in 0..32 {
            l[32 * ib + j] = best_index_int8(values, idl * x[32 * ib + j]) as u8;
        }
        let ls = (ls + 32) as u8;
        scales_l[ib / 2] |= (ls & 0xf) << (4 * (ib % 2));
        scales_h |= ((ls >> 4) as u16) << (2 * ib);
    }
    y[2..4].copy_from_slice(&scales_h.to_le_bytes());
    y[4..8].copy_from_slice(&scales_l);
    for i in 0..8 {
        for j in 0..16 {
            y[8 + 16 * i + j] = l[32 * i + j] | (l[32 * i + 16 + j] << 4);
        }
    }
}

/// `quantize_iq4_xs` for one row; `qw` (the row's importance weights) is optional.
pub(crate) fn quantize_row_iq4_xs(src: &[f32], dst: &mut [u8], qw: Option<&[f32]>) {
    for (ib, (x, y)) in src
        .chunks_exact(QK_K)
        .zip(dst.chunks_exact_mut(IQ4_XS_SIZE))
        .enumerate()
    {
        quantize_block(x, qw.map(|w| &w[QK_K * ib..QK_K * ib + QK_K]), y);
    }
}

pub fn quantize_row_iq4_xs_ref(src: &[f32], dst: &mut [u8]) {
    quantize_row_iq4_xs(src, dst, None);
}

/// The 6-bit scale of block `ib` of an IQ4_XS block `b`, minus its bias of 32.
#[inline]
pub fn iq4_xs_scale(b: &[u8], ib: usize) -> i32 {
    let scales_h = u16::from_le_bytes([b[2], b[3]]);
    let lo = (b[4 + ib / 2] >> (4 * (ib % 2))) & 0xf;
    let hi = ((scales_h >> (2 * ib)) & 3) as u8;
    (lo | (hi << 4)) as i32 - 32
}

pub fn dequantize_row_iq4_xs(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src
        .chunks_exact(IQ4_XS_SIZE)
        .zip(dst.chunks_exact_mut(QK_K))
    {
        let d = fp16_to_fp32(u16::from_le_bytes([b[0], b[1]]));
        for ib in 0..8 {
            let dl = d * iq4_xs_scale(b, ib) as f32;
            let qs = &b[8 + 16 * ib..8 + 16 * ib + 16];
            for j in 0..16 {
                y[32 * ib + j] = dl * KVALUES_IQ4NL[(qs[j] & 0xf) as usize] as f32;
                y[32 * ib + 16 + j] = dl * KVALUES_IQ4NL[(qs[j] >> 4) as usize] as f32;
            }
        }
    }
}
