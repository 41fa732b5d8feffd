//! Q2_K and Q3_K: 2- and 3-bit super-blocks of 256 with 16 sub-block scales.

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

use super::blocks::*;
use super::fp::{fp16_to_fp32 as h2f, fp32_to_fp16 as f2h};
use super::search::{
    make_q3_quants, make_qkx2_quants, make_qkx3_quants, make_qp_quants, make_qx_quants, nearest_int,
};

/// Packs 256 2-bit values: byte l of each 32-byte group holds values l, l+32, l+64, l+96.
#[inline]
fn pack2(l: &[u8; QK_K], qs: &mut [u8; QK_K / 4]) {
    for j in (0..QK_K).step_by(128) {
        for i in 0..32 {
            qs[j / 4 + i] =
                l[j + i] | (l[j + i + 32] << 2) | (l[j + i + 64] << 4) | (l[j + i + 96] << 6);
        }
    }
}

fn q2k_requantize(x: &[f32], b: &BlockQ2K, dm: f32, mm: f32, l: &mut [u8; QK_K]) {
    for j in 0..QK_K / 16 {
        let d = dm * (b.scales[j] & 0xF) as f32;
        if d == 0.0 {
            continue;
        }
        let m = mm * (b.scales[j] >> 4) as f32;
        for ii in 0..16 {
            let q = nearest_int((x[16 * j + ii] + m) / d);
            l[16 * j + ii] = q.clamp(0, 3) as u8;
        }
    }
}

pub fn quantize_row_q2_k_ref(src: &[f32], dst: &mut [u8]) {
    let q4scale = 15.0f32;
    let mut l = [0u8; QK_K];
    let mut laux = [0u8; 16];
    let mut weights = [0f32; 16];
    let mut mins = [0f32; QK_K / 16];
    let mut scales = [0f32; QK_K / 16];
    quantize_blocks(src, dst, |x| {
        let mut max_scale = 0.0f32;
        let mut max_min = 0.0f32;
        for j in 0..QK_K / 16 {
            let xs = &x[16 * j..16 * j + 16];
            for i in 0..16 {
                weights[i] = xs[i].abs();
            }
            scales[j] = make_qkx2_quants(
                3,
                xs,
                &weights,
                &mut l[16 * j..16 * j + 16],
                &mut mins[j],
                &mut laux,
                -0.5,
                0.1,
                15,
                true,
            );
            if scales[j] > max_scale {
                max_scale = scales[j];
            }
            if mins[j] > max_min {
                max_min = mins[j];
            }
        }
        let mut b = BlockQ2K::default();
        if max_scale > 0.0 {
            let iscale = q4scale / max_scale;
            for j in 0..QK_K / 16 {
                b.scales[j] = nearest_int(iscale * scales[j]) as u8;
            }
            b.d = f2h(max_scale / q4scale);
        } else {
            b.d = f2h(0.0);
        }
        if max_min > 0.0 {
            let iscale = q4scale / max_min;
            for j in 0..QK_K / 16 {
                let q = nearest_int(iscale * mins[j]);
                b.scales[j] |= (q << 4) as u8;
            }
            b.dmin = f2h(max_min / q4scale);
        } else {
            b.dmin = f2h(0.0);
        }
        q2k_requantize(x, &b, h2f(b.d), h2f(b.dmin), &mut l);
        pack2(&l, &mut b.qs);
        b
    });
}

pub(crate) fn quantize_row_q2_k_imatrix(src: &[f32], dst: &mut [u8], quant_weights: &[f32]) {
    let mut l = [0u8; QK_K];
    let mut laux = [0u8; 16];
    let mut mins = [0f32; QK_K / 16];
    let mut scales = [0f32; QK_K / 16];
    let mut sw = [0f32; QK_K / 16];
    let mut weight = [0f32; 16];
    let mut ls = [0u8; QK_K / 16];
    let mut lm = [0u8; QK_K / 16];
    let mut i = 0;
    quantize_blocks(src, dst, |x| {
        sw.fill(0.0);
        let mut sumx2 = 0.0f32;
        for &v in x {
            sumx2 += v * v;
        }
        let sigma2 = sumx2 / QK_K as f32;
        for j in 0..QK_K / 16 {
            let qw = &quant_weights[QK_K * i + 16 * j..QK_K * i + 16 * j + 16];
            for k in 0..16 {
                weight[k] = qw[k] * (sigma2 + x[16 * j + k] * x[16 * j + k]).sqrt();
            }
            // ggml sums QK_K/16 (= 16) of the weights here, which is all of them.
            for w in weight.iter().take(QK_K / 16) {
                sw[j] += *w;
            }
            scales[j] = make_qkx3_quants(
                3,
                &x[16 * j..16 * j + 16],
                Some(&weight),
                &mut l[16 * j..16 * j + 16],
                &mut mins[j],
                &mut laux,
                -0.9,
                0.05,
                36,
                false,
            );
        }
        i += 1;
        let dm = make_qp_quants(15, &scales, &mut ls, &sw);
        let mm = make_qp_quants(15, &mins, &mut lm, &sw);
        let mut b = BlockQ2K {
            d: f2h(dm),
            dmin: f2h(mm),
            ..Default::default()
        };
        for j in 0..QK_K / 16 {
            b.scales[j] = ls[j] | (lm[j] << 4);
        }
        q2k_requantize(x, &b, h2f(b.d), h2f(b.dmin), &mut l);
        pack2(&l, &mut b.qs);
        b
    });
}

pub fn dequantize_row_q2_k(src: &[u8], dst: &mut [f32]) {
    dequantize_blocks(src, dst, |b: &BlockQ2K, y| {
        let d = h2f(b.d);
        let min = h2f(b.dmin);
        let mut is = 0;
        let mut out = 0;
        for n in (0..QK_K).step_by(128) {
            let q = &b.qs[n / 4..n / 4 + 32];
            for shift in [0, 2, 4, 6] {
                for half in 0..2 {
                    let sc = b.scales[is];
                    is += 1;
                    let dl = d * (sc & 0xF) as f32;
                    let ml = min * (sc >> 4) as f32;
                    for l in 0..16 {
                        y[out] = dl * ((q[l + 16 * half] >> shift) & 3) as f32 - ml;
                        out += 1;
                    }
                }
            }
        }
    });
}

/// Stores the 16 six-bit Q3_K scales (already offset by 32) into the 12-byte layout.
#[inline]
fn q3k_pack_scales(ls: impl Fn(usize) -> i32, scales: &mut [u8; 12]) {
    scales.fill(0);
    for j in 0..16 {
        let mut l = ls(j);
        if j < 8 {
            scales[j] = (l & 0xF) as u8;
        } else {
            scales[j - 8] |= ((l & 0xF) << 4) as u8;
        }
        l >>= 4;
        scales[j % 4 + 8] |= (l << (2 * (j / 4))) as u8;
    }
}

/// The signed scale of sub-block j, -32..31.
#[inline]
pub(crate) fn q3k_scale(scales: &[u8; 12], j: usize) -> i8 {
    let sc = if j < 8 {
        scales[j] & 0xF
    } else {
        scales[j - 8] >> 4
    } as i8;
    (sc | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) as i8).wrapping_sub(32)
}

/// Final pass of both Q3_K quantizers: requantize with the stored scales, then pack.
fn q3k_finish(x: &[f32], b: &mut BlockQ3K, l: &mut [i8; QK_K]) {
    for j in 0..QK_K / 16 {
        let sc = q3k_scale(&b.scales, j);
        let d = h2f(b.d) * sc as f32;
        if d == 0.0 {
            continue;
        }
        for ii in 0..16 {
            let q = nearest_int(x[16 * j + ii] / d).clamp(-4, 3);
            l[16 * j + ii] = (q + 4) as i8;
        }
    }
    b.hmask.fill(0);
    let mut m = 0;
    let mut hm = 1u8;
    for v in l.iter_mut() {
        if *v > 3 {
            b.hmask[m] |= hm;
            *v -= 4;
        }
        m += 1;
        if m == QK_K / 8 {
            m = 0;
            hm <<= 1;
        }
    }
    let mut lu = [0u8; QK_K];
    for (d, s) in lu.iter_mut().zip(l.iter()) {
        *d = *s as u8;
    }
    pack2(&lu, &mut b.qs);
}

pub fn quantize_row_q3_k_ref(src: &[f32], dst: &mut [u8]) {
    let mut l = [0i8; QK_K];
    let mut scales = [0f32; QK_K / 16];
    quantize_blocks(src, dst, |x| {
        let mut max_scale = 0.0f32;
        let mut amax = 0.0f32;
        for j in 0..QK_K / 16 {
            scales[j] = make_q3_quants(
                4,
                &x[16 * j..16 * j + 16],
                &mut l[16 * j..16 * j + 16],
                true,
            );
            let scale = scales[j].abs();
            if scale > amax {
                amax = scale;
                max_scale = scales[j];
            }
        }
        let mut b = BlockQ3K::default();
        if max_scale != 0.0 {
            let iscale = -32.0f32 / max_scale;
            q3k_pack_scales(
                |j| {
                    // ggml stores nearest_int into an int8_t before clamping.
                    let q = nearest_int(iscale * scales[j]) as i8 as i32;
                    q.clamp(-32, 31) + 32
                },
                &mut b.scales,
            );
            b.d = f2h(1.0 / iscale);
        } else {
            b.d = f2h(0.0);
        }
        q3k_finish(x, &mut b, &mut l);
        b
    });
}

pub(crate) fn quantize_row_q3_k_imatrix(
    src: &[f32],
    dst: &mut [u8],
    quant_weights: Option<&[f32]>,
) {
    let mut l = [0i8; QK_K];
    let mut scales = [0f32; QK_K / 16];
    let mut weight = [0f32; 16];
    let mut sw = [0f32; QK_K / 16];
    let mut ls = [0i8; QK_K / 16];
    let mut i = 0;
    quantize_blocks(src, dst, |x| {
        let mut sumx2 = 0.0f32;
        for &v in x {
            sumx2 += v * v;
        }
        let sigma2 = 2.0 * sumx2 / QK_K as f32;
        for j in 0..QK_K / 16 {
            let xs = &x[16 * j..16 * j + 16];
            match quant_weights {
                Some(qwall) => {
                    let qw = &qwall[QK_K * i + 16 * j..QK_K * i + 16 * j + 16];
                    for k in 0..16 {
                        weight[k] = qw[k] * (sigma2 + xs[k] * xs[k]).sqrt();
                    }
                }
                None => {
                    for k in 0..16 {
                        weight[k] = xs[k] * xs[k];
                    }
                }
            }
            let mut sumw = 0.0f32;
            for w in &weight {
                sumw += *w;
            }
            sw[j] = sumw;
            scales[j] = make_qx_quants(4, xs, &mut l[16 * j..16 * j + 16], 1, Some(&weight));
        }
        i += 1;
        let d_block = make_qx_quants(32, &scales, &mut ls, 1, Some(&sw));
        let mut b = BlockQ3K::default();
        q3k_pack_scales(|j| ls[j] as i32, &mut b.scales);
        b.d = f2h(d_block);
        q3k_finish(x, &mut b, &mut l);
        b
    });
}

pub fn dequantize_row_q3_k(src: &[u8], dst: &mut [f32]) {
    dequantize_blocks(src, dst, |b: &BlockQ3K, y| {
        let d_all = h2f(b.d);
        let mut m = 1u8;
        let mut is = 0;
        let mut out = 0;
        for n in (0..QK_K).step_by(128) {
            let q = &b.qs[n / 4..n / 4 + 32];
            for shift in [0, 2, 4, 6] {
                for half in 0..2 {
                    let dl = d_all * q3k_scale(&b.scales, is) as f32;
                    is += 1;
                    for l in 0..16 {
                        let k = l + 16 * half;
                        let hi = if b.hmask[k] & m != 0 { 0 } else { 4 };
                        y[out] = dl * (((q[k] >> shift) & 3) as i32 - hi) as f32;
                        out += 1;
                    }
                }
                m <<= 1;
            }
        }
    });
}
