//! IQ2_XXS (2.06 bpw), IQ2_XS (2.31 bpw) and IQ2_S (2.56 bpw): groups of 8 magnitudes from
//! a 256-, 512- or 1024-point grid (levels 1, 3, 5 per coordinate), with signs and 4-bit
//! scales (ggml's quantize_row_iq2_xxs_impl, _iq2_xs_impl and _iq2_s_impl). IQ2_XXS and
//! IQ2_XS cannot be made without an importance matrix.
//!
//! Layouts (ggml-common.h): IQ2_XXS = d (f16), 8 x (u32 of 4 grid indices, u32 of 4 x 7 sign
//! bits and a scale) = 66 bytes; IQ2_XS = d, qs u16[32] (9-bit index, 7 sign bits),
//! scales[8] = 74 bytes; IQ2_S = d, qs[32] index bytes, signs[32], qh[8], scales[8] = 82.

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

use super::fp::{fp16_to_fp32, fp32_to_fp16};
use super::iq_grids::{
    iq2s_map, iq2xs_map, iq2xxs_map, GridMap, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, KMASK_IQ2XS,
    KSIGNS_IQ2XS,
};
use super::search::{make_qp_quants, nearest_int, GROUP_MAX_EPS};

pub const IQ2_XXS_SIZE: usize = 66;
pub const IQ2_XS_SIZE: usize = 74;
pub const IQ2_S_SIZE: usize = 82;
const QK_K: usize = 256;
const K_MAX_Q: i32 = 3;
const GROUP_MAX_EPS_IQ2_S: f32 = 1e-8;

#[inline]
fn rd16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

/// Eight values of grid point `g` times `db`, with the signs of `signs`.
#[inline]
fn put8(y: &mut [f32], db: f32, g: u64, signs: u8) {
    let g = g.to_le_bytes();
    for j in 0..8 {
        let s = if signs & KMASK_IQ2XS[j] != 0 {
            -1.0
        } else {
            1.0
        };
        y[j] = db * g[j] as f32 * s;
    }
}

pub fn dequantize_row_iq2_xxs(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src
        .chunks_exact(IQ2_XXS_SIZE)
        .zip(dst.chunks_exact_mut(QK_K))
    {
        let d = fp16_to_fp32(rd16(b, 0));
        for ib32 in 0..8 {
            let o = 2 + 8 * ib32;
            let aux0 = &b[o..o + 4];
            let aux1 = u32::from_le_bytes([b[o + 4], b[o + 5], b[o + 6], b[o + 7]]);
            let db = d * (0.5 + (aux1 >> 28) as f32) * 0.25;
            for l in 0..4 {
                let signs = KSIGNS_IQ2XS[((aux1 >> (7 * l)) & 127) as usize];
                let yo = 32 * ib32 + 8 * l;
                put8(&mut y[yo..yo + 8], db, IQ2XXS_GRID[aux0[l] as usize], signs);
            }
        }
    }
}

pub fn dequantize_row_iq2_xs(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src
        .chunks_exact(IQ2_XS_SIZE)
        .zip(dst.chunks_exact_mut(QK_K))
    {
        let d = fp16_to_fp32(rd16(b, 0));
        for ib32 in 0..8 {
            let sc = b[66 + ib32];
            let db = [
                d * (0.5 + (sc & 0xf) as f32) * 0.25,
                d * (0.5 + (sc >> 4) as f32) * 0.25,
            ];
            for l in 0..4 {
                let q = rd16(b, 2 + 2 * (4 * ib32 + l));
                let signs = KSIGNS_IQ2XS[(q >> 9) as usize];
                let yo = 32 * ib32 + 8 * l;
                let g = IQ2XS_GRID[(q & 511) as usize];
                put8(&mut y[yo..yo + 8], db[l / 2], g, signs);
            }
        }
    }
}

pub fn dequantize_row_iq2_s(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(IQ2_S_SIZE).zip(dst.chunks_exact_mut(QK_K)) {
        let d = fp16_to_fp32(rd16(b, 0));
        let (qs, signs, qh, scales) = (&b[2..34], &b[34..66], &b[66..74], &b[74..82]);
        for ib32 in 0..8 {
            let db = [
                d * (0.5 + (scales[ib32] & 0xf) as f32) * 0.25,
                d * (0.5 + (scales[ib32] >> 4) as f32) * 0.25,
            ];
            for l in 0..4 {
                let idx = qs[4 * ib32 + l] as usize | ((qh[ib32] as usize) << (8 - 2 * l) & 0x300);
                let yo = 32 * ib32 + 8 * l;
                put8(
                    &mut y[yo..yo + 8],
                    db[l / 2],
                    IQ2S_GRID[idx],
                    signs[4 * ib32 + l],
                );
            }
        }
    }
}

/// Packed levels of 8 values.
#[inline]
fn pack8(l: &[i8]) -> usize {
    (0..8).map(|i| (l[i] as usize) << (2 * i)).sum()
}

#[inline]
fn levels8(id: f32, xval: &[f32], l: &mut [i8]) {
    for i in 0..8 {
        let v = nearest_int(0.5 * (id * xval[i] - 1.0));
        l[i] = v.clamp(0, K_MAX_Q - 1) as i8;
    }
}

fn sums(weight: &[f32], xval: &[f32], l: &[i8]) -> (f32, f32) {
    let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
    for i in 0..l.len() {
        let w = weight[i];
        let q = (2 * l[i] as i32 + 1) as f32;
        sumqx += w * xval[i] * q;
        sumq2 += w * q * q;
    }
    (sumqx, sumq2)
}

/// Magnitudes of `xb` and the sign bits of each 8; with `even`, the least important value of
/// a group with an odd number of negatives keeps its sign and only 7 bits are kept.
fn magnitudes(xb: &[f32], weight: &[f32], even: bool, xval: &mut [f32], signs: &mut [u8]) {
    for k in 0..signs.len() {
        let mut nflip = 0;
        let mut s = 0u8;
        for i in 0..8 {
            if xb[8 * k + i] >= 0.0 {
                xval[8 * k + i] = xb[8 * k + i];
            } else {
                xval[8 * k + i] = -xb[8 * k + i];
                nflip += 1;
                s |= 1 << i;
            }
        }
        if even && nflip % 2 == 1 {
            let mut imin = 0;
            let mut min = weight[8 * k] * xb[8 * k] * xb[8 * k];
            for i in 1..8 {
                let ax = weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
                if ax < min {
                    min = ax;
                    imin = i;
                }
            }
            xval[8 * k + imin] = -xval[8 * k + imin];
            s ^= 1 << imin;
        }
        signs[k] = if even { s & 127 } else { s };
    }
}

fn max_of(xval: &[f32]) -> f32 {
    let mut max = xval[0];
    for &v in &xval[1..] {
        max = if max > v { max } else { v };
    }
    max
}

fn sumx2(xbl: &[f32]) -> f32 {
    let mut s = 0.0f32;
    for &v in xbl {
        s += v * v;
    }
    s
}

fn grid_index(m: &GridMap, l: &[i8]) -> usize {
    // the search only returns grid points (ggml aborts otherwise)
    m.kmap[pack8(l)].max(0) as usize
}

/// The search of IQ2_XS and IQ2_S for 16 values (two groups of 8): inverse scales
/// (5 + 0.1 is) / max for is in -9..=9, then a re-fit of the groups left off the grid.
fn search16(
    m: &GridMap,
    xval: &[f32; 16],
    weight: &[f32; 16],
    waux: &[f32; 16],
    max: f32,
    l: &mut [i8; 16],
) -> f32 {
    let mut best = 0.0f32;
    let mut scale = max / (2 * K_MAX_Q - 1) as f32;
    let mut is_on_grid = [true; 2];
    let mut laux = [0i8; 16];
    let mut on_aux = [true; 2];
    for is in -9..=9 {
        let id = ((2 * K_MAX_Q - 1) as f32 + is as f32 * 0.1) / max;
        let this_scale = 1.0 / id;
        for k in 0..2 {
            levels8(id, &xval[8 * k..], &mut laux[8 * k..8 * k + 8]);
            let u = pack8(&laux[8 * k..]);
            on_aux[k] = true;
            if m.kmap[u] < 0 {
                on_aux[k] = false;
                let (xv, wa) = (&xval[8 * k..], &waux[8 * k..]);
                m.best_neighbour(u, xv, wa, this_scale, &mut laux[8 * k..8 * k + 8]);
            }
        }
        let (sumqx, sumq2) = sums(weight, xval, &laux);
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            *l = laux;
            is_on_grid = on_aux;
        }
    }
    if is_on_grid.contains(&false) && scale > 0.0 {
        let id = 1.0 / scale;
        for k in 0..2 {
            if is_on_grid[k] {
                continue;
            }
            levels8(id, &xval[8 * k..], &mut l[8 * k..8 * k + 8]);
            let u = pack8(&l[8 * k..]);
            if m.kmap[u] < 0 {
                let (xv, wa) = (&xval[8 * k..], &waux[8 * k..]);
                m.best_neighbour(u, xv, wa, scale, &mut l[8 * k..8 * k + 8]);
            }
        }
        let (sumqx, sumq2) = sums(weight, xval, l);
        if sumq2 > 0.0 {
            scale = sumqx / sumq2;
        }
    }
    scale
}

/// quantize_row_iq2_xxs_impl for one row (the importance weights are required).
pub(crate) fn quantize_row_iq2_xxs(src: &[f32], dst: &mut [u8], qw: &[f32]) {
    let m = iq2xxs_map();
    for (ibl, (xbl, y)) in src
        .chunks_exact(QK_K)
        .zip(dst.chunks_exact_mut(IQ2_XXS_SIZE))
        .enumerate()
    {
        y.fill(0);
        let mut q2 = [0u32; 16];
        let mut scales = [0.0f32; 8];
        let mut max_scale = 0.0f32;
        let sigma2 = sumx2(xbl) / QK_K as f32;
        let (mut weight, mut waux, mut xval) = ([0f32; 32], [0f32; 32], [0f32; 32]);
        let mut block_signs = [0u8; 4];
        for ib in 0..8 {
            let xb = &xbl[32 * ib..32 * ib + 32];
            let w = &qw[QK_K * ibl + 32 * ib..];
            for i in 0..32 {
                weight[i] = w[i] * (sigma2 + xb[i] * xb[i]).sqrt();
                waux[i] = weight[i].sqrt();
            }
            magnitudes(xb, &weight, true, &mut xval, &mut block_signs);
            let max = max_of(&xval);
            if max < GROUP_MAX_EPS {
                scales[ib] = 0.0;
                continue;
            }
            let mut lu = [0u8; 32];
            let mut scale = make_qp_quants(K_MAX_Q + 1, &xval, &mut lu, &weight);
            let mut l = lu.map(|v| v as i8);
            let eff_max = scale * K_MAX_Q as f32;
            if eff_max <= 0.0 {
                scales[ib] = 0.0;
                continue;
            }
            let mut best = 0.0f32;
            let mut laux = [0i8; 32];
            for is in -6..=6 {
                let id = ((2 * K_MAX_Q - 1) as f32 + is as f32 * 0.1) / eff_max;
                let this_scale = 1.0 / id;
                for k in 0..4 {
                    levels8(id, &xval[8 * k..], &mut laux[8 * k..8 * k + 8]);
                    let u = pack8(&laux[8 * k..]);
                    if m.kmap[u] < 0 {
                        let (xv, wa) = (&xval[8 * k..], &waux[8 * k..]);
                        m.best_neighbour(u, xv, wa, this_scale, &mut laux[8 * k..8 * k + 8]);
                    }
                }
                let (sumqx, sumq2) = sums(&weight, &xval, &laux);
                if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                    scale = sumqx / sumq2;
                    best = scale * sumqx;
                    l = laux;
                }
            }
            if scale > 0.0 {
                let id = 1.0 / scale;
                for k in 0..4 {
                    let mut lk = [0i8; 8];
                    levels8(id, &xval[8 * k..], &mut lk);
                    let u = pack8(&lk);
                    let gi = if m.kmap[u] < 0 {
                        let (xv, wa) = (&xval[8 * k..], &waux[8 * k..]);
                        m.best_neighbour(u, xv, wa, scale, &mut l[8 * k..8 * k + 8])
                    } else {
                        m.kmap[u] as usize
                    };
                    for i in 0..8 {
                        l[8 * k + i] = (m.grid[gi][i] - 1) / 2;
                    }
                }
                let (sumqx, sumq2) = sums(&weight, &xval, &l);
                if sumq2 > 0.0 {
                    scale = sumqx / sumq2;
                }
            }
            if scale < 0.0 {
                scale = -scale;
                for s in &mut block_signs {
                    *s = !*s & 127;
                }
            }
            for k in 0..4 {
                let gi = grid_index(m, &l[8 * k..]);
                q2[2 * ib] |= (gi as u32) << (8 * k);
                q2[2 * ib + 1] |= (block_signs[k] as u32) << (7 * k);
            }
            scales[ib] = scale;
            max_scale = if max_scale > scale { max_scale } else { scale };
        }
        if max_scale == 0.0 {
            continue;
        }
        let d = max_scale / 31.0;
        y[0..2].copy_from_slice(&fp32_to_fp16(d).to_le_bytes());
        let id = 1.0 / d;
        for ib in 0..8 {
            let l = nearest_int(0.5 * (id * scales[ib] - 1.0)).clamp(0, 15);
            q2[2 * ib + 1] |= (l as u32) << 28;
        }
        for (j, v) in q2.iter().enumerate() {
            y[2 + 4 * j..6 + 4 * j].copy_from_slice(&v.to_le_bytes());
        }
    }
}

/// The 4-bit scales of 16 blocks of 16, two per byte, as IQ2_XS and IQ2_S store them.
fn pack_scales(scales: &[f32; 16], id: f32, out: &mut [u8]) {
    for ib in 0..16 {
        let l = nearest_int(0.5 * (id * scales[ib] - 1.0)).clamp(0, 15) as u8;
        if ib % 2 == 0 {
            out[ib / 2] = l;
        } else {
            out[ib / 2] |= l << 4;
        }
    }
}

/// quantize_row_iq2_xs_impl for one row (the importance weights are required).
pub(crate) fn quantize_row_iq2_xs(src: &[f32], dst: &mut [u8], qw: &[f32]) {
    let m = iq2xs_map();
    for (ibl, (xbl, y)) in src
        .chunks_exact(QK_K)
        .zip(dst.chunks_exact_mut(IQ2_XS_SIZE))
        .enumerate()
    {
        y.fill(0);
        let mut q2 = [0u16; 32];
        let mut scales = [0.0f32; 16];
        let mut max_scale = 0.0f32;
        let sigma2 = sumx2(xbl) / QK_K as f32;
        let (mut weight, mut waux, mut xval) = ([0f32; 16], [0f32; 16], [0f32; 16]);
        let mut block_signs = [0u8; 2];
        for ib in 0..16 {
            let xb = &xbl[16 * ib..16 * ib + 16];
            let w = &qw[QK_K * ibl + 16 * ib..];
            for i in 0..16 {
                weight[i] = w[i] * (sigma2 + xb[i] * xb[i]).sqrt();
                waux[i] = weight[i].sqrt();
            }
            magnitudes(xb, &weight, true, &mut xval, &mut block_signs);
            let max = max_of(&xval);
            let mut l = [0i8; 16];
            if max < GROUP_MAX_EPS {
                scales[ib] = 0.0;
                continue;
            }
            let mut scale = search16(m, &xval, &weight, &waux, max, &mut l);
            if scale < 0.0 {
                scale = -scale;
                for s in &mut block_signs {
                    *s = !*s & 127;
                }
            }
            for k in 0..2 {
                let gi = grid_index(m, &l[8 * k..]);
                q2[2 * ib + k] = gi as u16 | (block_signs[k] as u16) << 9;
            }
            scales[ib] = scale;
            max_scale = if max_scale > scale { max_scale } else { scale };
        }
        if max_scale == 0.0 {
            continue;
        }
        let d = max_scale / 31.0;
        y[0..2].copy_from_slice(&fp32_to_fp16(d).to_le_bytes());
        pack_scales(&scales, 1.0 / d, &mut y[66..74]);
        for (j, v) in q2.iter().enumerate() {
            y[2 + 2 * j..4 + 2 * j].copy_from_slice(&v.to_le_bytes());
        }
    }
}

/// quantize_row_iq2_s_impl for one row; without importance weights it uses
/// sigma2 / 4 + x^2.
pub(crate) fn quantize_row_iq2_s(src: &[f32], dst: &mut [u8], qw: Option<&[f32]>) {
    let m = iq2s_map();
    for (ibl, (xbl, y)) in src
        .chunks_exact(QK_K)
        .zip(dst.chunks_exact_mut(IQ2_S_SIZE))
        .enumerate()
    {
        y.fill(0);
        let mut scales = [0.0f32; 16];
        let mut max_scale = 0.0f32;
        let sigma2 = 2.0 * sumx2(xbl) / QK_K as f32;
        let (mut weight, mut waux, mut xval) = ([0f32; 16], [0f32; 16], [0f32; 16]);
        let mut block_signs = [0u8; 2];
        for ib in 0..16 {
            let xb = &xbl[16 * ib..16 * ib + 16];
            for i in 0..16 {
                weight[i] = match qw {
                    Some(w) => w[QK_K * ibl + 16 * ib + i] * (sigma2 + xb[i] * xb[i]).sqrt(),
                    None => 0.25 * sigma2 + xb[i] * xb[i],
                };
                waux[i] = weight[i].sqrt();
            }
            magnitudes(xb, &weight, false, &mut xval, &mut block_signs);
            let max = max_of(&xval);
            let mut l = [0i8; 16];
            if max < GROUP_MAX_EPS_IQ2_S {
                scales[ib] = 0.0;
                continue;
            }
            let mut scale = search16(m, &xval, &weight, &waux, max, &mut l);
            if scale < 0.0 {
                scale = -scale;
                for s in &mut block_signs {
                    *s = !*s;
                }
            }
            for k in 0..2 {
                let gi = grid_index(m, &l[8 * k..]);
                let i8 = 2 * ib + k;
                y[2 + i8] = (gi & 255) as u8;
                y[66 + i8 / 4] |= ((gi >> 8) << (2 * (i8 % 4))) as u8;
                y[34 + i8] = block_signs[k];
            }
            scales[ib] = scale;
            max_scale = if max_scale > scale { max_scale } else { scale };
        }
        if max_scale == 0.0 {
            continue;
        }
        let d = max_scale / 31.0;
        y[0..2].copy_from_slice(&fp32_to_fp16(d * 0.9875).to_le_bytes());
        pack_scales(&scales, 1.0 / d, &mut y[74..82]);
    }
}

pub fn quantize_row_iq2_s_ref(src: &[f32], dst: &mut [u8]) {
    quantize_row_iq2_s(src, dst, None);
}
