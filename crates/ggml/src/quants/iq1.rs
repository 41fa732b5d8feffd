//! IQ1_S (1.56 bpw) and IQ1_M (1.75 bpw): groups of 8 ternary values from a 2048-point grid,
//! shifted by +-1/8 (ggml's quantize_row_iq1_s_impl / quantize_row_iq1_m_impl). The scale of
//! each block is found by an exhaustive search over the two boundaries that split the sorted
//! values into -1, 0 and 1. IQ1_S cannot be made without an importance matrix.
//!
//! Layouts (ggml-common.h): IQ1_S = d (f16), qs[32] index bytes, qh u16[8] (3 high index
//! bits per group, a 3-bit scale and the shift sign) = 50 bytes; IQ1_M = qs[32], qh[16]
//! (3 high index bits and a shift bit per group), scales[8] (3-bit scales, with the f16
//! super-block scale spread over the top nibbles of its four u16) = 56 bytes.

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

use super::fp::{fp16_to_fp32, fp32_to_fp16};
use super::iq_grids::{iq1s_map, GridMap, IQ1M_DELTA, IQ1S_DELTA, IQ1S_GRID};
use super::search::nearest_int;

pub const IQ1_S_SIZE: usize = 50;
pub const IQ1_M_SIZE: usize = 56;
const QK_K: usize = 256;
const GROUP_MAX_EPS_IQ1_M: f32 = 1e-7;
const GROUP_MAX_EPS_IQ1_S: f32 = 1e-12;

#[inline]
fn rd16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

/// Eight values of IQ1S_GRID point `idx`, shifted by `delta`, times `dl`.
#[inline]
fn put8(y: &mut [f32], dl: f32, idx: usize, delta: f32) {
    let g = IQ1S_GRID[idx].to_le_bytes();
    for j in 0..8 {
        y[j] = dl * (g[j] as i8 as f32 + delta);
    }
}

pub fn dequantize_row_iq1_s(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(IQ1_S_SIZE).zip(dst.chunks_exact_mut(QK_K)) {
        let d = fp16_to_fp32(rd16(b, 0));
        for ib in 0..8 {
            let qh = rd16(b, 34 + 2 * ib) as usize;
            let dl = d * (2 * ((qh >> 12) & 7) + 1) as f32;
            let delta = if qh & 0x8000 != 0 {
                -IQ1S_DELTA
            } else {
                IQ1S_DELTA
            };
            for l in 0..4 {
                let idx = b[2 + 4 * ib + l] as usize | (((qh >> (3 * l)) & 7) << 8);
                put8(&mut y[32 * ib + 8 * l..], dl, idx, delta);
            }
        }
    }
}

/// The f16 super-block scale of an IQ1_M block, from the top nibbles of its scales.
#[inline]
fn iq1m_scale(b: &[u8]) -> f32 {
    let sc = |i: usize| rd16(b, 48 + 2 * i);
    let u = (sc(0) >> 12) | ((sc(1) >> 8) & 0x00f0) | ((sc(2) >> 4) & 0x0f00) | (sc(3) & 0xf000);
    fp16_to_fp32(u)
}

pub fn dequantize_row_iq1_m(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(IQ1_M_SIZE).zip(dst.chunks_exact_mut(QK_K)) {
        let d = iq1m_scale(b);
        for ib in 0..8 {
            let sc = rd16(b, 48 + 2 * (ib / 2)) as usize;
            let dl1 = d * (2 * ((sc >> (6 * (ib % 2))) & 7) + 1) as f32;
            let dl2 = d * (2 * ((sc >> (6 * (ib % 2) + 3)) & 7) + 1) as f32;
            let qs = &b[4 * ib..4 * ib + 4];
            let qh = [b[32 + 2 * ib] as usize, b[33 + 2 * ib] as usize];
            let idx = [
                qs[0] as usize | ((qh[0] << 8) & 0x700),
                qs[1] as usize | ((qh[0] << 4) & 0x700),
                qs[2] as usize | ((qh[1] << 8) & 0x700),
                qs[3] as usize | ((qh[1] << 4) & 0x700),
            ];
            let delta = |h: usize, m: usize| {
                if h & m != 0 {
                    -IQ1S_DELTA
                } else {
                    IQ1S_DELTA
                }
            };
            let deltas = [
                delta(qh[0], 0x08),
                delta(qh[0], 0x80),
                delta(qh[1], 0x08),
                delta(qh[1], 0x80),
            ];
            for l in 0..4 {
                let dl = if l < 2 { dl1 } else { dl2 };
                put8(&mut y[32 * ib + 8 * l..], dl, idx[l], deltas[l]);
            }
        }
    }
}

/// iq1_find_best_neighbour2: the listed point whose levels, valued by `xg` at `scale`, are
/// nearest `xval` (weighted); writes its levels to `l`.
fn best_neighbour2(
    m: &GridMap,
    u: usize,
    xval: &[f32],
    weight: &[f32],
    scale: f32,
    xg: &[f32; 3],
    l: &mut [i8],
) -> usize {
    let mut best_score = f32::MAX;
    let mut best = usize::MAX;
    for &j in m.neighbours_of(u) {
        let pg = &m.grid[j as usize];
        let mut d2 = 0.0f32;
        for i in 0..8 {
            let q = xg[((pg[i] - 1) / 2) as usize];
            let diff = scale * q - xval[i];
            d2 += weight[i] * diff * diff;
        }
        if d2 < best_score {
            best_score = d2;
            best = j as usize;
        }
    }
    // only NaN distances leave none (ggml then scans the grid out of bounds and aborts)
    if best == usize::MAX {
        best = m.neighbours_of(u)[0] as usize;
    }
    for i in 0..8 {
        l[i] = (m.grid[best][i] - 1) / 2;
    }
    best
}

/// The values of `xb` sorted ascending (stable, as glibc's merge-sort qsort orders equal
/// values), as their indices.
fn sorted_indices(xb: &[f32]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..xb.len()).collect();
    idx.sort_by(|&a, &b| {
        xb[a]
            .partial_cmp(&xb[b])
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    idx
}

fn pack8(l: &[i8]) -> usize {
    (0..8).map(|i| (l[i] as usize) << (2 * i)).sum()
}

fn sigma2_of(xbl: &[f32]) -> f32 {
    let mut s = 0.0f32;
    for &v in xbl {
        s += v * v;
    }
    2.0 * s / QK_K as f32
}

fn abs_max(xb: &[f32]) -> f32 {
    let mut max = xb[0].abs();
    for &v in &xb[1..] {
        max = if max > v.abs() { max } else { v.abs() };
    }
    max
}

/// Levels 0, 1, 2 for the sorted positions below `i1`, below `i2`, and the rest.
fn split_levels(idx: &[usize], i1: usize, i2: usize, l: &mut [i8]) {
    for (j, &i) in idx.iter().enumerate() {
        l[i] = if j < i1 {
            0
        } else if j < i2 {
            1
        } else {
            2
        };
    }
}

/// Snaps each group of 8 of `l` onto the grid (`xg_of(k)` values group k); returns the
/// indices and whether all were on it already.
fn snap(
    m: &GridMap,
    xb: &[f32],
    weight: &[f32],
    scale: f32,
    xg_of: impl Fn(usize) -> &'static [f32; 3],
    l: &mut [i8],
    index: &mut [usize],
) -> bool {
    let mut all_on_grid = true;
    for k in 0..index.len() {
        let u = pack8(&l[8 * k..]);
        index[k] = if m.kmap[u] < 0 {
            all_on_grid = false;
            let (xv, w) = (&xb[8 * k..], &weight[8 * k..]);
            best_neighbour2(m, u, xv, w, scale, xg_of(k), &mut l[8 * k..8 * k + 8])
        } else {
            m.kmap[u] as usize
        };
    }
    all_on_grid
}

/// The least-squares scale of the snapped groups (used when one moved off its levels).
fn refit(
    m: &GridMap,
    xb: &[f32],
    weight: &[f32],
    xg_of: impl Fn(usize) -> &'static [f32; 3],
    index: &[usize],
) -> (f32, f32) {
    let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
    for k in 0..index.len() {
        let pg = &m.grid[index[k]];
        let xx = xg_of(k);
        for j in 0..8 {
            let w = weight[8 * k + j];
            let q = xx[((pg[j] - 1) / 2) as usize];
            sumqx += w * q * xb[8 * k + j];
            sumq2 += w * q * q;
        }
    }
    (sumqx, sumq2)
}

static X_P: [f32; 3] = [-1.0 + IQ1S_DELTA, IQ1S_DELTA, 1.0 + IQ1S_DELTA];
static X_M: [f32; 3] = [-1.0 - IQ1S_DELTA, -IQ1S_DELTA, 1.0 - IQ1S_DELTA];
static XM_P: [f32; 3] = [-1.0 + IQ1M_DELTA, IQ1M_DELTA, 1.0 + IQ1M_DELTA];
static XM_M: [f32; 3] = [-1.0 - IQ1M_DELTA, -IQ1M_DELTA, 1.0 - IQ1M_DELTA];

/// quantize_row_iq1_s_impl for one row (the importance weights are required).
pub(crate) fn quantize_row_iq1_s(src: &[f32], dst: &mut [u8], qw: &[f32]) {
    let m = iq1s_map();
    for (ibl, (xbl, y)) in src
        .chunks_exact(QK_K)
        .zip(dst.chunks_exact_mut(IQ1_S_SIZE))
        .enumerate()
    {
        y.fill(0);
        let mut scales = [0.0f32; 8];
        let mut shifts = [0i8; 8];
        let mut qh = [0u16; 8];
        let mut max_scale = 0.0f32;
        let sigma2 = sigma2_of(xbl);
        let mut weight = [0.0f32; 32];
        for ib in 0..8 {
            let xb = &xbl[32 * ib..32 * ib + 32];
            let w = &qw[QK_K * ibl + 32 * ib..];
            for i in 0..32 {
                weight[i] = w[i] * (sigma2 + xb[i] * xb[i]).sqrt();
            }
            if abs_max(xb) < GROUP_MAX_EPS_IQ1_S {
                scales[ib] = 0.0;
                shifts[ib] = 1;
                continue;
            }
            let idx = sorted_indices(xb);
            let (mut sumx, mut sumw) = ([0.0f32; 33], [0.0f32; 33]);
            for j in 0..32 {
                let i = idx[j];
                sumx[j + 1] = sumx[j] + weight[i] * xb[i];
                sumw[j + 1] = sumw[j] + weight[i];
            }
            let mut best_score = -f32::MAX;
            let mut scale = abs_max(xb);
            let (mut besti1, mut besti2, mut best_shift) = (usize::MAX, usize::MAX, 0i8);
            for i1 in 0..=32 {
                for i2 in i1..=32 {
                    for (xx, shift) in [(&X_P, 1i8), (&X_M, -1i8)] {
                        let sumqx = (sumx[i1] - sumx[0]) * xx[0]
                            + (sumx[i2] - sumx[i1]) * xx[1]
                            + (sumx[32] - sumx[i2]) * xx[2];
                        let sumq2 = (sumw[i1] - sumw[0]) * xx[0] * xx[0]
                            + (sumw[i2] - sumw[i1]) * xx[1] * xx[1]
                            + (sumw[32] - sumw[i2]) * xx[2] * xx[2];
                        if sumq2 > 0.0 && sumqx * sumqx > best_score * sumq2 {
                            scale = sumqx / sumq2;
                            best_score = scale * sumqx;
                            besti1 = i1;
                            besti2 = i2;
                            best_shift = shift;
                        }
                    }
                }
            }
            if besti1 == usize::MAX || best_shift == 0 {
                scales[ib] = 0.0;
                shifts[ib] = 1;
                continue;
            }
            let mut l = [0i8; 32];
            split_levels(&idx, besti1, besti2, &mut l);
            if scale < 0.0 {
                for v in &mut l {
                    *v = 2 - *v;
                }
                scale = -scale;
                best_shift = -best_shift;
            }
            let xx: &'static [f32; 3] = if best_shift == 1 { &X_P } else { &X_M };
            let mut index = [0usize; 4];
            if !snap(m, xb, &weight, scale, |_| xx, &mut l, &mut index) {
                let (sumqx, sumq2) = refit(m, xb, &weight, |_| xx, &index);
                if sumqx > 0.0 && sumq2 > 0.0 {
                    scale = sumqx / sumq2;
                }
            }
            let mut h = 0u16;
            for k in 0..4 {
                y[2 + 4 * ib + k] = (index[k] & 255) as u8;
                h |= ((index[k] >> 8) << (3 * k)) as u16;
            }
            qh[ib] = h;
            scales[ib] = scale;
            shifts[ib] = best_shift;
            max_scale = if max_scale > scale { max_scale } else { scale };
        }
        if max_scale != 0.0 {
            let d = max_scale / 15.0;
            y[0..2].copy_from_slice(&fp32_to_fp16(d * 1.125).to_le_bytes());
            let id = 1.0 / d;
            for ib in 0..8 {
                let mut l = nearest_int(0.5 * (id * scales[ib] - 1.0)).clamp(0, 7);
                if shifts[ib] == -1 {
                    l |= 8;
                }
                qh[ib] |= (l as u16) << 12;
            }
        }
        for ib in 0..8 {
            y[34 + 2 * ib..36 + 2 * ib].copy_from_slice(&qh[ib].to_le_bytes());
        }
    }
}

/// IQ1_M's value set of group `k` (0 or 1) of a block with shift code `shift`: bit 1 of the
/// code gives the first group's sign, bit 0 the second's.
fn iq1m_xx(shift: i8, k: usize) -> &'static [f32; 3] {
    let minus = if k == 0 { shift >= 2 } else { shift % 2 != 0 };
    if minus {
        &XM_M
    } else {
        &XM_P
    }
}

fn iq1m_weights(xb: &[f32], qw: Option<&[f32]>, sigma2: f32, weight: &mut [f32; 16]) {
    for i in 0..16 {
        weight[i] = match qw {
            Some(w) => w[i] * (sigma2 + xb[i] * xb[i]).sqrt(),
            None => xb[i] * xb[i],
        };
    }
}

/// quantize_row_iq1_m_impl for one row; without importance weights it uses x^2.
pub(crate) fn quantize_row_iq1_m(src: &[f32], dst: &mut [u8], qw: Option<&[f32]>) {
    let m = iq1s_map();
    const MASKS: [u8; 4] = [0x00, 0x80, 0x08, 0x88];
    for (ibl, (xbl, y)) in src
        .chunks_exact(QK_K)
        .zip(dst.chunks_exact_mut(IQ1_M_SIZE))
        .enumerate()
    {
        y.fill(0);
        let mut scales = [0.0f32; 16];
        let mut shifts = [0i8; 16];
        let mut max_scale = 0.0f32;
        let sigma2 = sigma2_of(xbl);
        let mut weight = [0.0f32; 16];
        for ib in 0..16 {
            let xb = &xbl[16 * ib..16 * ib + 16];
            iq1m_weights(
                xb,
                qw.map(|w| &w[QK_K * ibl + 16 * ib..]),
                sigma2,
                &mut weight,
            );
            let max = abs_max(xb);
            if max < GROUP_MAX_EPS_IQ1_M {
                scales[ib] = 0.0;
                shifts[ib] = 0;
                continue;
            }
            let idx = sorted_indices(xb);
            let mut best_score = -f32::MAX;
            let mut scale = max;
            let (mut besti1, mut besti2, mut best_k) = (usize::MAX, usize::MAX, -1i8);
            // prefix sums per half of the block, since each half has its own shift sign
            let (mut px, mut pw) = ([[0.0f32; 17]; 2], [[0.0f32; 17]; 2]);
            for j in 0..16 {
                let i = idx[j];
                let h = if i < 8 { 0 } else { 1 };
                px[h][j + 1] = px[h][j] + weight[i] * xb[i];
                px[1 - h][j + 1] = px[1 - h][j];
                pw[h][j + 1] = pw[h][j] + weight[i];
                pw[1 - h][j + 1] = pw[1 - h][j];
            }
            let txs = [px[0][16], px[1][16]];
            let tws = [pw[0][16], pw[1][16]];
            let (p2, m2) = (XM_P[2], XM_M[2]);
            let cp1 = XM_P[0] * XM_P[0] - XM_P[1] * XM_P[1];
            let cp2 = XM_P[1] * XM_P[1] - XM_P[2] * XM_P[2];
            let cm1 = XM_M[0] * XM_M[0] - XM_M[1] * XM_M[1];
            let cm2 = XM_M[1] * XM_M[1] - XM_M[2] * XM_M[2];
            for i1 in 0..=16 {
                for i2 in i1..=16 {
                    let (mut qx_p, mut qx_m, mut q2_p, mut q2_m) =
                        ([0f32; 2], [0f32; 2], [0f32; 2], [0f32; 2]);
                    for h in 0..2 {
                        let sx = px[h][i1] + px[h][i2];
                        qx_p[h] = txs[h] * p2 - sx;
                        qx_m[h] = txs[h] * m2 - sx;
                        q2_p[h] = tws[h] * p2 * p2 + pw[h][i1] * cp1 + pw[h][i2] * cp2;
                        q2_m[h] = tws[h] * m2 * m2 + pw[h][i1] * cm1 + pw[h][i2] * cm2;
                    }
                    let sumqx = [
                        qx_p[0] + qx_p[1],
                        qx_p[0] + qx_m[1],
                        qx_m[0] + qx_p[1],
                        qx_m[0] + qx_m[1],
                    ];
                    let sumq2 = [
                        q2_p[0] + q2_p[1],
                        q2_p[0] + q2_m[1],
                        q2_m[0] + q2_p[1],
                        q2_m[0] + q2_m[1],
                    ];
                    for k in 0..4 {
                        if sumq2[k] > 0.0 && sumqx[k] * sumqx[k] > best_score * sumq2[k] {
                            scale = sumqx[k] / sumq2[k];
                            best_score = scale * sumqx[k];
                            besti1 = i1;
                            besti2 = i2;
                            best_k = k as i8;
                        }
                    }
                }
            }
            if besti1 == usize::MAX || best_k < 0 {
                scales[ib] = 0.0;
                shifts[ib] = 0;
                continue;
            }
            let mut l = [0i8; 16];
            split_levels(&idx, besti1, besti2, &mut l);
            if scale < 0.0 {
                for v in &mut l {
                    *v = 2 - *v;
                }
                scale = -scale;
                best_k = 3 - best_k;
            }
            let mut index = [0usize; 2];
            let xg = |k: usize| iq1m_xx(best_k, k);
            if !snap(m, xb, &weight, scale, xg, &mut l, &mut index) {
                let (sumqx, sumq2) = refit(m, xb, &weight, xg, &index);
                if sumqx > 0.0 && sumq2 > 0.0 {
                    scale = sumqx / sumq2;
                }
            }
            y[2 * ib] = (index[0] & 255) as u8;
            y[2 * ib + 1] = (index[1] & 255) as u8;
            y[32 + ib] = ((index[0] >> 8) | ((index[1] >> 8) << 4)) as u8;
            scales[ib] = scale;
            shifts[ib] = best_k;
            max_scale = if max_scale > scale { max_scale } else { scale };
        }
        if max_scale == 0.0 {
            continue;
        }
        let mut sc = [0u16; 4];
        let mut d = max_scale / 15.0;
        let id = 1.0 / d;
        let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
        for ib in 0..16 {
            let l = nearest_int(0.5 * (id * scales[ib] - 1.0)).clamp(0, 7);
            sc[ib / 4] |= (l as u16) << (3 * (ib % 4));
            y[32 + ib] |= MASKS[shifts[ib] as usize];
            let xb = &xbl[16 * ib..16 * ib + 16];
            iq1m_weights(
                xb,
                qw.map(|w| &w[QK_K * ibl + 16 * ib..]),
                sigma2,
                &mut weight,
            );
            for k in 0..2 {
                let xx = iq1m_xx(shifts[ib], k);
                let gi = y[2 * ib + k] as usize + (((y[32 + ib] as usize) << (8 - 4 * k)) & 0x700);
                let pg = &m.grid[gi];
                for j in 0..8 {
                    let w = weight[8 * k + j];
                    let q = xx[((pg[j] - 1) / 2) as usize] * (2 * l + 1) as f32;
                    sumqx += w * q * xb[8 * k + j];
                    sumq2 += w * q * q;
                }
            }
        }
        if sumq2 > 0.0 {
            d = sumqx / sumq2;
        }
        let s = fp32_to_fp16(d * 1.1125);
        sc[0] |= (s & 0x000f) << 12;
        sc[1] |= (s & 0x00f0) << 8;
        sc[2] |= (s & 0x0f00) << 4;
        sc[3] |= s & 0xf000;
        for i in 0..4 {
            y[48 + 2 * i..50 + 2 * i].copy_from_slice(&sc[i].to_le_bytes());
        }
    }
}

pub fn quantize_row_iq1_m_ref(src: &[f32], dst: &mut [u8]) {
    quantize_row_iq1_m(src, dst, None);
}
