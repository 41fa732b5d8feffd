//! The 32-element block types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1 and IQ4_NL.
//! Reference quantizers follow ggml's `quantize_row_*_ref`; the `*_imatrix` row quantizers
//! follow `quantize_row_*_impl`, used by `quantize_chunk` when an importance matrix is given.

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

use super::blocks::*;
use super::fp::{fp16_to_fp32 as h2f, fp32_to_fp16 as f2h};
use super::search::{best_index_int8, make_qkx3_quants, make_qx_quants, GROUP_MAX_EPS};

/// Value of largest magnitude in `x` (the first one on ties), as ggml picks it.
#[inline]
fn signed_absmax(x: &[f32]) -> f32 {
    let mut amax = 0.0f32;
    let mut max = 0.0f32;
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}

#[inline]
fn min_max(x: &[f32]) -> (f32, f32) {
    let mut min = f32::MAX;
    let mut max = -f32::MAX;
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

pub fn quantize_row_q4_0_ref(src: &[f32], dst: &mut [u8]) {
    quantize_blocks(src, dst, |x| {
        let max = signed_absmax(x);
        let d = max / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut b = BlockQ4_0 {
            d: f2h(d),
            ..Default::default()
        };
        for j in 0..QK4_0 / 2 {
            let x0 = x[j] * id;
            let x1 = x[QK4_0 / 2 + j] * id;
            let xi0 = ((x0 + 8.5) as i8).min(15) as u8;
            let xi1 = ((x1 + 8.5) as i8).min(15) as u8;
            b.qs[j] = xi0 | (xi1 << 4);
        }
        b
    });
}

pub fn quantize_row_q4_1_ref(src: &[f32], dst: &mut [u8]) {
    quantize_blocks(src, dst, |x| {
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut b = BlockQ4_1 {
            d: f2h(d),
            m: f2h(min),
            ..Default::default()
        };
        for j in 0..QK4_1 / 2 {
            let x0 = (x[j] - min) * id;
            let x1 = (x[QK4_1 / 2 + j] - min) * id;
            let xi0 = ((x0 + 0.5) as i8).min(15) as u8;
            let xi1 = ((x1 + 0.5) as i8).min(15) as u8;
            b.qs[j] = xi0 | (xi1 << 4);
        }
        b
    });
}

/// Packs 32 five-bit values (low nibbles into `qs`, fifth bits into `qh`).
#[inline]
fn pack5(l: impl Fn(usize) -> u8) -> ([u8; 16], [u8; 4]) {
    let mut qs = [0u8; 16];
    let mut qh = 0u32;
    for j in 0..16 {
        let xi0 = l(j);
        let xi1 = l(j + 16);
        qs[j] = (xi0 & 0x0F) | ((xi1 & 0x0F) << 4);
        qh |= (((xi0 as u32) & 0x10) >> 4) << j;
        qh |= (((xi1 as u32) & 0x10) >> 4) << (j + 16);
    }
    (qs, qh.to_le_bytes())
}

pub fn quantize_row_q5_0_ref(src: &[f32], dst: &mut [u8]) {
    quantize_blocks(src, dst, |x| {
        let max = signed_absmax(x);
        let d = max / -16.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let (qs, qh) = pack5(|j| (((x[j] * id + 16.5) as i8).min(31)) as u8);
        BlockQ5_0 { d: f2h(d), qh, qs }
    });
}

pub fn quantize_row_q5_1_ref(src: &[f32], dst: &mut [u8]) {
    quantize_blocks(src, dst, |x| {
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let (qs, qh) = pack5(|j| ((x[j] - min) * id + 0.5) as u8);
        BlockQ5_1 {
            d: f2h(d),
            m: f2h(min),
            qh,
            qs,
        }
    });
}

pub fn quantize_row_q8_0_ref(src: &[f32], dst: &mut [u8]) {
    quantize_blocks(src, dst, |x| {
        let amax = x
            .iter()
            .fold(0.0f32, |a, v| if a > v.abs() { a } else { v.abs() });
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut b = BlockQ8_0 {
            d: f2h(d),
            ..Default::default()
        };
        for j in 0..QK8_0 {
            b.qs[j] = (x[j] * id).round() as i8;
        }
        b
    });
}

pub fn quantize_row_q8_1_ref(src: &[f32], dst: &mut [u8]) {
    quantize_blocks(src, dst, |x| {
        let amax = x
            .iter()
            .fold(0.0f32, |a, v| if a > v.abs() { a } else { v.abs() });
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut b = BlockQ8_1 {
            d: f2h(d),
            ..Default::default()
        };
        let mut sum = 0i32;
        for j in 0..QK8_1 {
            b.qs[j] = (x[j] * id).round() as i8;
            sum += b.qs[j] as i32;
        }
        b.s = f2h(sum as f32 * d);
        b
    });
}

pub fn dequantize_row_q4_0(src: &[u8], dst: &mut [f32]) {
    dequantize_blocks(src, dst, |b: &BlockQ4_0, y| {
        let d = h2f(b.d);
        for j in 0..16 {
            y[j] = ((b.qs[j] & 0x0F) as i32 - 8) as f32 * d;
            y[j + 16] = ((b.qs[j] >> 4) as i32 - 8) as f32 * d;
        }
    });
}

pub fn dequantize_row_q4_1(src: &[u8], dst: &mut [f32]) {
    dequantize_blocks(src, dst, |b: &BlockQ4_1, y| {
        let d = h2f(b.d);
        let m = h2f(b.m);
        for j in 0..16 {
            y[j] = (b.qs[j] & 0x0F) as f32 * d + m;
            y[j + 16] = (b.qs[j] >> 4) as f32 * d + m;
        }
    });
}

#[inline]
fn unpack5(qs: &[u8; 16], qh: [u8; 4], j: usize) -> (i32, i32) {
    let qh = u32::from_le_bytes(qh);
    let xh0 = ((qh >> j) << 4) & 0x10;
    let xh1 = (qh >> (j + 12)) & 0x10;
    (
        ((qs[j] & 0x0F) as u32 | xh0) as i32,
        ((qs[j] >> 4) as u32 | xh1) as i32,
    )
}

pub fn dequantize_row_q5_0(src: &[u8], dst: &mut [f32]) {
    dequantize_blocks(src, dst, |b: &BlockQ5_0, y| {
        let d = h2f(b.d);
        for j in 0..16 {
            let (x0, x1) = unpack5(&b.qs, b.qh, j);
            y[j] = (x0 - 16) as f32 * d;
            y[j + 16] = (x1 - 16) as f32 * d;
        }
    });
}

pub fn dequantize_row_q5_1(src: &[u8], dst: &mut [f32]) {
    dequantize_blocks(src, dst, |b: &BlockQ5_1, y| {
        let d = h2f(b.d);
        let m = h2f(b.m);
        for j in 0..16 {
            let (x0, x1) = unpack5(&b.qs, b.qh, j);
            y[j] = x0 as f32 * d + m;
            y[j + 16] = x1 as f32 * d + m;
        }
    });
}

pub fn dequantize_row_q8_0(src: &[u8], dst: &mut [f32]) {
    dequantize_blocks(src, dst, |b: &BlockQ8_0, y| {
        let d = h2f(b.d);
        for j in 0..QK8_0 {
            y[j] = b.qs[j] as f32 * d;
        }
    });
}

/// ggml has no dequantize_row_q8_1 (it is only a dot-product partner); this one ignores `s`.
pub fn dequantize_row_q8_1(src: &[u8], dst: &mut [f32]) {
    dequantize_blocks(src, dst, |b: &BlockQ8_1, y| {
        let d = h2f(b.d);
        for j in 0..QK8_1 {
            y[j] = b.qs[j] as f32 * d;
        }
    });
}

pub fn dequantize_row_iq4_nl(src: &[u8], dst: &mut [f32]) {
    dequantize_blocks(src, dst, |b: &BlockIq4Nl, y| {
        let d = h2f(b.d);
        for j in 0..16 {
            y[j] = d * KVALUES_IQ4NL[(b.qs[j] & 0xf) as usize] as f32;
            y[j + 16] = d * KVALUES_IQ4NL[(b.qs[j] >> 4) as usize] as f32;
        }
    });
}

/// sigma^2 of a row, the base of the imatrix weights `qw * sqrt(sigma2 + x^2)`.
#[inline]
fn row_sigma2(x: &[f32]) -> f32 {
    let mut sum_x2 = 0.0f32;
    for &v in x {
        sum_x2 += v * v;
    }
    sum_x2 / x.len() as f32
}

#[inline]
fn imatrix_weights(xb: &[f32], qw: &[f32], sigma2: f32, weight: &mut [f32]) {
    for j in 0..xb.len() {
        weight[j] = qw[j] * (sigma2 + xb[j] * xb[j]).sqrt();
    }
}

pub(crate) fn quantize_row_q4_0_imatrix(x: &[f32], dst: &mut [u8], qw: &[f32]) {
    let sigma2 = row_sigma2(x);
    let mut weight = [0f32; 32];
    let mut l = [0i8; 32];
    let mut ib = 0;
    quantize_blocks(x, dst, |xb| {
        imatrix_weights(xb, &qw[32 * ib..32 * ib + 32], sigma2, &mut weight);
        ib += 1;
        let d = make_qx_quants(8, xb, &mut l, 1, Some(&weight));
        let mut b = BlockQ4_0 {
            d: f2h(d),
            ..Default::default()
        };
        for j in 0..16 {
            b.qs[j] = (l[j] as u8) | ((l[j + 16] as u8) << 4);
        }
        b
    });
}

pub(crate) fn quantize_row_q4_1_imatrix(x: &[f32], dst: &mut [u8], qw: &[f32]) {
    let sigma2 = row_sigma2(x);
    let mut weight = [0f32; 32];
    let mut l = [0u8; 32];
    let mut laux = [0u8; 32];
    let mut ib = 0;
    quantize_blocks(x, dst, |xb| {
        imatrix_weights(xb, &qw[32 * ib..32 * ib + 32], sigma2, &mut weight);
        ib += 1;
        let mut min = 0.0;
        let d = make_qkx3_quants(
            15,
            xb,
            Some(&weight),
            &mut l,
            &mut min,
            &mut laux,
            -0.9,
            0.05,
            36,
            false,
        );
        let mut b = BlockQ4_1 {
            d: f2h(d),
            m: f2h(-min),
            ..Default::default()
        };
        for j in 0..16 {
            b.qs[j] = l[j] | (l[j + 16] << 4);
        }
        b
    });
}

pub(crate) fn quantize_row_q5_0_imatrix(x: &[f32], dst: &mut [u8], qw: &[f32]) {
    let sigma2 = row_sigma2(x);
    let mut weight = [0f32; 32];
    let mut l = [0i8; 32];
    let mut ib = 0;
    quantize_blocks(x, dst, |xb| {
        imatrix_weights(xb, &qw[32 * ib..32 * ib + 32], sigma2, &mut weight);
        ib += 1;
        let d = make_qx_quants(16, xb, &mut l, 1, Some(&weight));
        let (qs, qh) = pack5(|j| l[j] as u8);
        BlockQ5_0 { d: f2h(d), qh, qs }
    });
}

pub(crate) fn quantize_row_q5_1_imatrix(x: &[f32], dst: &mut [u8], qw: &[f32]) {
    let sigma2 = row_sigma2(x);
    let mut weight = [0f32; 32];
    let mut l = [0u8; 32];
    let mut laux = [0u8; 32];
    let mut ib = 0;
    quantize_blocks(x, dst, |xb| {
        imatrix_weights(xb, &qw[32 * ib..32 * ib + 32], sigma2, &mut weight);
        ib += 1;
        let mut min = 0.0;
        let d = make_qkx3_quants(
            31,
            xb,
            Some(&weight),
            &mut l,
            &mut min,
            &mut laux,
            -0.9,
            0.05,
            36,
            false,
        );
        let (qs, qh) = pack5(|j| l[j]);
        BlockQ5_1 {
            d: f2h(d),
            m: f2h(-min),
            qh,
            qs,
        }
    });
}

/// IQ4_NL for one 32-element block (ggml's `quantize_row_iq4_nl_impl` with one sub-block).
/// `ntry` < 0 is the reference quantizer, 7 the chunk quantizer. `l` persists across blocks
/// because ggml leaves it untouched for an all-zero block and then packs whatever it holds.
fn iq4_nl_block(x: &[f32], qw: Option<&[f32]>, ntry: i32, l: &mut [u8; 32]) -> BlockIq4Nl {
    let values = &KVALUES_IQ4NL;
    let mut sigma2 = 0.0f32;
    for &v in x {
        sigma2 += v * v;
    }
    sigma2 *= 2.0 / 32.0;
    let mut weight = [0f32; 32];
    match qw {
        Some(qw) => imatrix_weights(x, qw, sigma2, &mut weight),
        None => {
            for j in 0..32 {
                weight[j] = x[j] * x[j];
            }
        }
    }
    let mut amax = 0.0f32;
    let mut max = 0.0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    let scale = if amax < GROUP_MAX_EPS {
        0.0
    } else {
        let v0 = values[0] as f32;
        let mut d = if ntry > 0 { -max / v0 } else { max / v0 };
        let mut id = 1.0 / d;
        let mut sumqx = 0.0f32;
        let mut sumq2 = 0.0f32;
        for j in 0..32 {
            let al = id * x[j];
            let li = best_index_int8(values, al);
            l[j] = li as u8;
            let q = values[li] as f32;
            let w = weight[j];
            sumqx += w * q * x[j];
            sumq2 += w * q * q;
        }
        d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
        let mut best = d * sumqx;
        for itry in -ntry..=ntry {
            id = (itry as f32 + v0) / max;
            sumqx = 0.0;
            sumq2 = 0.0;
            for j in 0..32 {
                let al = id * x[j];
                let li = best_index_int8(values, al);
                let q = values[li] as f32;
                let w = weight[j];
                sumqx += w * q * x[j];
                sumq2 += w * q * q;
            }
            if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        d
    };
    let mut b = BlockIq4Nl {
        d: f2h(scale),
        ..Default::default()
    };
    if ntry > 0 {
        let id = if scale != 0.0 { 1.0 / scale } else { 0.0 };
        for j in 0..32 {
            l[j] = best_index_int8(values, id * x[j]) as u8;
        }
    }
    for j in 0..16 {
        b.qs[j] = l[j] | (l[16 + j] << 4);
    }
    b
}

pub fn quantize_row_iq4_nl_ref(src: &[f32], dst: &mut [u8]) {
    let mut l = [0u8; 32];
    quantize_blocks(src, dst, |x| iq4_nl_block(x, None, -1, &mut l));
}

/// `quantize_iq4_nl` for one row: the search with 7 tries each side, imatrix optional.
pub(crate) fn quantize_row_iq4_nl_chunk(src: &[f32], dst: &mut [u8], qw: Option<&[f32]>) {
    let mut l = [0u8; 32];
    let mut ib = 0;
    quantize_blocks(src, dst, |x| {
        let w = qw.map(|q| &q[32 * ib..32 * ib + 32]);
        ib += 1;
        iq4_nl_block(x, w, 7, &mut l)
    });
}
