//! Q4_K, Q5_K (asymmetric, 8 sub-blocks of 32 with 6-bit scales and mins), Q6_K and Q8_K.

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

use super::blocks::*;
use super::fp::{fp16_to_fp32 as h2f, fp32_to_fp16 as f2h};
use super::search::{
    make_qkx2_quants, make_qkx3_quants, make_qp_quants, make_qx_quants, nearest_int, GROUP_MAX_EPS,
};

/// Scale and min of sub-block j from the 12-byte 6-bit packing of Q4_K/Q5_K.
#[inline]
pub fn get_scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

#[inline]
fn pack_scale_min_k4(ls: &[u8; 8], lm: &[u8; 8], scales: &mut [u8; 12]) {
    for j in 0..8 {
        let (s, m) = (ls[j], lm[j]);
        if j < 4 {
            scales[j] = s;
            scales[j + 4] = m;
        } else {
            scales[j + 4] = (s & 0xF) | ((m & 0xF) << 4);
            scales[j - 4] |= (s >> 4) << 6;
            scales[j] |= (m >> 4) << 6;
        }
    }
}

/// Requantizes each sub-block with its stored 6-bit scale/min into 0..=nmax.
fn requantize_k4(x: &[f32], dh: u16, dminh: u16, scales: &[u8; 12], nmax: i32, l: &mut [u8; QK_K]) {
    for j in 0..QK_K / 32 {
        let (sc, m) = get_scale_min_k4(j, scales);
        let d = h2f(dh) * sc as f32;
        if d == 0.0 {
            continue;
        }
        let dm = h2f(dminh) * m as f32;
        for ii in 0..32 {
            let q = nearest_int((x[32 * j + ii] + dm) / d);
            l[32 * j + ii] = q.clamp(0, nmax) as u8;
        }
    }
}

/// The reference sub-block search shared by Q4_K and Q5_K; returns (scale, min) per sub-block.
fn kx2_subblocks(
    x: &[f32],
    nmax: i32,
    rmin: f32,
    nstep: i32,
    l: &mut [u8; QK_K],
) -> ([f32; 8], [f32; 8]) {
    let mut scales = [0f32; 8];
    let mut mins = [0f32; 8];
    let mut weights = [0f32; 32];
    let mut laux = [0u8; 32];
    for j in 0..QK_K / 32 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0.0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        for k in 0..32 {
            weights[k] = av_x + xs[k].abs();
        }
        scales[j] = make_qkx2_quants(
            nmax,
            xs,
            &weights,
            &mut l[32 * j..32 * j + 32],
            &mut mins[j],
            &mut laux,
            rmin,
            0.1,
            nstep,
            false,
        );
    }
    (scales, mins)
}

/// Reference path: 6-bit scales relative to the largest, d = max/63.
fn k4_ref_scales(scales: &[f32; 8], mins: &[f32; 8], out: &mut [u8; 12]) -> (u16, u16) {
    let mut max_scale = 0.0f32;
    let mut max_min = 0.0f32;
    for j in 0..8 {
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut ls = [0u8; 8];
    let mut lm = [0u8; 8];
    for j in 0..8 {
        // ggml truncates nearest_int to uint8_t before the clamp.
        ls[j] = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        lm[j] = (nearest_int(inv_min * mins[j]) as u8).min(63);
    }
    pack_scale_min_k4(&ls, &lm, out);
    (f2h(max_scale / 63.0), f2h(max_min / 63.0))
}

/// imatrix path: sub-block search with make_qkx3_quants, super-block scales with make_qp_quants.
fn k4_imatrix_scales(
    x: &[f32],
    qw: Option<&[f32]>,
    nmax: i32,
    l: &mut [u8; QK_K],
    out: &mut [u8; 12],
) -> (u16, u16) {
    let mut sum_x2 = 0.0f32;
    for &v in x {
        sum_x2 += v * v;
    }
    let sigma2 = 2.0 * sum_x2 / QK_K as f32;
    let av_x = sigma2.sqrt();
    let mut weights = [0f32; 32];
    let mut laux = [0u8; 32];
    let mut sw = [0f32; 8];
    let mut scales = [0f32; 8];
    let mut mins = [0f32; 8];
    for j in 0..QK_K / 32 {
        let xs = &x[32 * j..32 * j + 32];
        match qw {
            Some(q) => {
                let q = &q[32 * j..32 * j + 32];
                for k in 0..32 {
                    weights[k] = q[k] * (sigma2 + xs[k] * xs[k]).sqrt();
                }
            }
            None => {
                for k in 0..32 {
                    weights[k] = av_x + xs[k].abs();
                }
            }
        }
        let mut sumw = 0.0f32;
        for w in &weights {
            sumw += *w;
        }
        sw[j] = sumw;
        scales[j] = make_qkx3_quants(
            nmax,
            xs,
            Some(&weights),
            &mut l[32 * j..32 * j + 32],
            &mut mins[j],
            &mut laux,
            -0.9,
            0.05,
            36,
            false,
        );
    }
    let mut ls = [0u8; 8];
    let mut lm = [0u8; 8];
    let d_block = make_qp_quants(63, &scales, &mut ls, &sw);
    let m_block = make_qp_quants(63, &mins, &mut lm, &sw);
    for j in 0..8 {
        ls[j] = ls[j].min(63);
        lm[j] = lm[j].min(63);
    }
    pack_scale_min_k4(&ls, &lm, out);
    (f2h(d_block), f2h(m_block))
}

fn q4k_pack(l: &[u8; QK_K], qs: &mut [u8; QK_K / 2]) {
    for (g, j) in (0..QK_K).step_by(64).enumerate() {
        for i in 0..32 {
            qs[32 * g + i] = l[j + i] | (l[j + i + 32] << 4);
        }
    }
}

fn q5k_pack(l: &[u8; QK_K], qh: &mut [u8; 32], qs: &mut [u8; QK_K / 2]) {
    qh.fill(0);
    let (mut m1, mut m2) = (1u8, 2u8);
    for (g, n) in (0..QK_K).step_by(64).enumerate() {
        for j in 0..32 {
            let mut l1 = l[n + j];
            if l1 > 15 {
                l1 -= 16;
                qh[j] |= m1;
            }
            let mut l2 = l[n + j + 32];
            if l2 > 15 {
                l2 -= 16;
                qh[j] |= m2;
            }
            qs[32 * g + j] = l1 | (l2 << 4);
        }
        m1 <<= 2;
        m2 <<= 2;
    }
}

pub fn quantize_row_q4_k_ref(src: &[f32], dst: &mut [u8]) {
    let mut l = [0u8; QK_K];
    quantize_blocks(src, dst, |x| {
        let (scales, mins) = kx2_subblocks(x, 15, -1.0, 20, &mut l);
        let mut b = BlockQ4K::default();
        (b.d, b.dmin) = k4_ref_scales(&scales, &mins, &mut b.scales);
        requantize_k4(x, b.d, b.dmin, &b.scales, 15, &mut l);
        q4k_pack(&l, &mut b.qs);
        b
    });
}

pub(crate) fn quantize_row_q4_k_imatrix(src: &[f32], dst: &mut [u8], qw: Option<&[f32]>) {
    let mut l = [0u8; QK_K];
    let mut i = 0;
    quantize_blocks(src, dst, |x| {
        let w = qw.map(|q| &q[QK_K * i..QK_K * (i + 1)]);
        i += 1;
        let mut b = BlockQ4K::default();
        (b.d, b.dmin) = k4_imatrix_scales(x, w, 15, &mut l, &mut b.scales);
        requantize_k4(x, b.d, b.dmin, &b.scales, 15, &mut l);
        q4k_pack(&l, &mut b.qs);
        b
    });
}

pub fn dequantize_row_q4_k(src: &[u8], dst: &mut [f32]) {
    dequantize_blocks(src, dst, |b: &BlockQ4K, y| {
        let d = h2f(b.d);
        let min = h2f(b.dmin);
        for g in 0..4 {
            let (sc1, m1) = get_scale_min_k4(2 * g, &b.scales);
            let (sc2, m2) = get_scale_min_k4(2 * g + 1, &b.scales);
            let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
            let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
            let q = &b.qs[32 * g..32 * g + 32];
            for l in 0..32 {
                y[64 * g + l] = d1 * (q[l] & 0xF) as f32 - m1;
                y[64 * g + 32 + l] = d2 * (q[l] >> 4) as f32 - m2;
            }
        }
    });
}

pub fn quantize_row_q5_k_ref(src: &[f32], dst: &mut [u8]) {
    let mut l = [0u8; QK_K];
    quantize_blocks(src, dst, |x| {
        let (scales, mins) = kx2_subblocks(x, 31, -0.5, 15, &mut l);
        let mut b = BlockQ5K::default();
        (b.d, b.dmin) = k4_ref_scales(&scales, &mins, &mut b.scales);
        requantize_k4(x, b.d, b.dmin, &b.scales, 31, &mut l);
        q5k_pack(&l, &mut b.qh, &mut b.qs);
        b
    });
}

pub(crate) fn quantize_row_q5_k_imatrix(src: &[f32], dst: &mut [u8], qw: Option<&[f32]>) {
    let mut l = [0u8; QK_K];
    let mut i = 0;
    quantize_blocks(src, dst, |x| {
        let w = qw.map(|q| &q[QK_K * i..QK_K * (i + 1)]);
        i += 1;
        let mut b = BlockQ5K::default();
        (b.d, b.dmin) = k4_imatrix_scales(x, w, 31, &mut l, &mut b.scales);
        requantize_k4(x, b.d, b.dmin, &b.scales, 31, &mut l);
        q5k_pack(&l, &mut b.qh, &mut b.qs);
        b
    });
}

pub fn dequantize_row_q5_k(src: &[u8], dst: &mut [f32]) {
    dequantize_blocks(src, dst, |b: &BlockQ5K, y| {
        let d = h2f(b.d);
        let min = h2f(b.dmin);
        let (mut u1, mut u2) = (1u8, 2u8);
        for g in 0..4 {
            let (sc1, m1) = get_scale_min_k4(2 * g, &b.scales);
            let (sc2, m2) = get_scale_min_k4(2 * g + 1, &b.scales);
            let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
            let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
            let ql = &b.qs[32 * g..32 * g + 32];
            for l in 0..32 {
                let h1 = if b.qh[l] & u1 != 0 { 16 } else { 0 };
                let h2 = if b.qh[l] & u2 != 0 { 16 } else { 0 };
                y[64 * g + l] = d1 * ((ql[l] & 0xF) + h1) as f32 - m1;
                y[64 * g + 32 + l] = d2 * ((ql[l] >> 4) + h2) as f32 - m2;
            }
            u1 <<= 2;
            u2 <<= 2;
        }
    });
}

/// Both Q6_K quantizers: per-16 symmetric search (imatrix weights optional), 8-bit scales.
fn q6k_block(x: &[f32], qw: Option<&[f32]>, l: &mut [i8; QK_K]) -> BlockQ6K {
    let mut scales = [0f32; QK_K / 16];
    let mut max_scale = 0.0f32;
    let mut max_abs_scale = 0.0f32;
    for ib in 0..QK_K / 16 {
        let w = qw.map(|q| &q[16 * ib..16 * ib + 16]);
        let scale = make_qx_quants(
            32,
            &x[16 * ib..16 * ib + 16],
            &mut l[16 * ib..16 * ib + 16],
            1,
            w,
        );
        scales[ib] = scale;
        let abs_scale = scale.abs();
        if abs_scale > max_abs_scale {
            max_abs_scale = abs_scale;
            max_scale = scale;
        }
    }
    let mut b = BlockQ6K::default();
    if max_abs_scale < GROUP_MAX_EPS {
        b.d = f2h(0.0);
        return b;
    }
    let iscale = -128.0f32 / max_scale;
    b.d = f2h(1.0 / iscale);
    for ib in 0..QK_K / 16 {
        b.scales[ib] = nearest_int(iscale * scales[ib]).min(127) as i8;
    }
    for j in 0..QK_K / 16 {
        let d = h2f(b.d) * b.scales[j] as f32;
        if d == 0.0 {
            continue;
        }
        for ii in 0..16 {
            let q = nearest_int(x[16 * j + ii] / d).clamp(-32, 31);
            l[16 * j + ii] = (q + 32) as i8;
        }
    }
    for (g, j) in (0..QK_K).step_by(128).enumerate() {
        let ql = &mut b.ql[64 * g..64 * g + 64];
        for i in 0..32 {
            let q1 = l[j + i] as u8 & 0xF;
            let q2 = l[j + i + 32] as u8 & 0xF;
            let q3 = l[j + i + 64] as u8 & 0xF;
            let q4 = l[j + i + 96] as u8 & 0xF;
            ql[i] = q1 | (q3 << 4);
            ql[i + 32] = q2 | (q4 << 4);
        }
        let qh = &mut b.qh[32 * g..32 * g + 32];
        for i in 0..32 {
            qh[i] = (l[j + i] as u8 >> 4)
                | ((l[j + i + 32] as u8 >> 4) << 2)
                | ((l[j + i + 64] as u8 >> 4) << 4)
                | ((l[j + i + 96] as u8 >> 4) << 6);
        }
    }
    b
}

pub fn quantize_row_q6_k_ref(src: &[f32], dst: &mut [u8]) {
    let mut l = [0i8; QK_K];
    quantize_blocks(src, dst, |x| q6k_block(x, None, &mut l));
}

pub(crate) fn quantize_row_q6_k_imatrix(src: &[f32], dst: &mut [u8], qw: &[f32]) {
    let mut l = [0i8; QK_K];
    let mut i = 0;
    quantize_blocks(src, dst, |x| {
        let w = &qw[QK_K * i..QK_K * (i + 1)];
        i += 1;
        q6k_block(x, Some(w), &mut l)
    });
}

pub fn dequantize_row_q6_k(src: &[u8], dst: &mut [f32]) {
    dequantize_blocks(src, dst, |b: &BlockQ6K, y| {
        let d = h2f(b.d);
        for g in 0..2 {
            let ql = &b.ql[64 * g..64 * g + 64];
            let qh = &b.qh[32 * g..32 * g + 32];
            let sc = &b.scales[8 * g..8 * g + 8];
            let yy = &mut y[128 * g..128 * g + 128];
            for l in 0..32 {
                let is = l / 16;
                let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i8 - 32;
                let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
                let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
                let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
                yy[l] = d * sc[is] as f32 * q1 as f32;
                yy[l + 32] = d * sc[is + 2] as f32 * q2 as f32;
                yy[l + 64] = d * sc[is + 4] as f32 * q3 as f32;
                yy[l + 96] = d * sc[is + 6] as f32 * q4 as f32;
            }
        }
    });
}

/// Q8_K: the activation partner of the K-quants, f32 scale and per-16 sums.
pub fn quantize_row_q8_k_ref(src: &[f32], dst: &mut [u8]) {
    quantize_blocks(src, dst, |x| {
        let mut b = BlockQ8K::default();
        let mut max = 0.0f32;
        let mut amax = 0.0f32;
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            return b;
        }
        let iscale = -127.0f32 / max;
        for j in 0..QK_K {
            b.qs[j] = nearest_int(iscale * x[j]).min(127) as i8;
        }
        for j in 0..QK_K / 16 {
            b.bsums[j] = b.qs[16 * j..16 * j + 16].iter().map(|&q| q as i16).sum();
        }
        b.d = 1.0 / iscale;
        b
    });
}

pub fn dequantize_row_q8_k(src: &[u8], dst: &mut [f32]) {
    dequantize_blocks(src, dst, |b: &BlockQ8K, y| {
        for j in 0..QK_K {
            y[j] = b.d * b.qs[j] as f32;
        }
    });
}
