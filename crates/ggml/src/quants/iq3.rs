//! IQ3_XXS (3.06 bpw) and IQ3_S (3.44 bpw): groups of 4 magnitudes from a 256- or 512-point
//! grid, with signs, and a 4-bit scale per 32 values (ggml's quantize_row_iq3_xxs_impl and
//! quantize_row_iq3_s_impl).
//!
//! Layouts (ggml-common.h): IQ3_XXS = d (f16), qs[64] grid indices, then 8 u32 of 4 x 7 sign
//! bits and a scale = 98 bytes; IQ3_S = d, qs[64], qh[8] (index bit 8), signs[32],
//! scales[4] = 110 bytes.

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

use super::fp::{fp16_to_fp32, fp32_to_fp16};
use super::iq_grids::{
    iq3s_map, iq3xxs_map, GridMap, IQ3S_GRID, IQ3XXS_GRID, KMASK_IQ2XS, KSIGNS_IQ2XS,
};
use super::search::nearest_int;

pub const IQ3_XXS_SIZE: usize = 98;
pub const IQ3_S_SIZE: usize = 110;
const QK_K: usize = 256;
const GROUP_MAX_EPS_IQ3_XXS: f32 = 1e-8;
const K_MAX_Q: i32 = 8;

#[inline]
fn sign(signs: u8, j: usize) -> f32 {
    if signs & KMASK_IQ2XS[j] != 0 {
        -1.0
    } else {
        1.0
    }
}

pub fn dequantize_row_iq3_xxs(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src
        .chunks_exact(IQ3_XXS_SIZE)
        .zip(dst.chunks_exact_mut(QK_K))
    {
        let d = fp16_to_fp32(u16::from_le_bytes([b[0], b[1]]));
        let qs = &b[2..66];
        for ib32 in 0..8 {
            let o = 66 + 4 * ib32;
            let aux32 = u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
            let db = d * (0.5 + (aux32 >> 28) as f32) * 0.5;
            for l in 0..4 {
                let signs = KSIGNS_IQ2XS[((aux32 >> (7 * l)) & 127) as usize];
                let g1 = IQ3XXS_GRID[qs[8 * ib32 + 2 * l] as usize].to_le_bytes();
                let g2 = IQ3XXS_GRID[qs[8 * ib32 + 2 * l + 1] as usize].to_le_bytes();
                let yo = &mut y[32 * ib32 + 8 * l..32 * ib32 + 8 * l + 8];
                for j in 0..4 {
                    yo[j] = db * g1[j] as f32 * sign(signs, j);
                    yo[j + 4] = db * g2[j] as f32 * sign(signs, j + 4);
                }
            }
        }
    }
}

pub fn dequantize_row_iq3_s(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(IQ3_S_SIZE).zip(dst.chunks_exact_mut(QK_K)) {
        let d = fp16_to_fp32(u16::from_le_bytes([b[0], b[1]]));
        let (qs, qh, signs, scales) = (&b[2..66], &b[66..74], &b[74..106], &b[106..110]);
        let mut o = 0;
        for ib32 in (0..8).step_by(2) {
            let db = [
                d * (1 + 2 * (scales[ib32 / 2] & 0xf) as i32) as f32,
                d * (1 + 2 * (scales[ib32 / 2] >> 4) as i32) as f32,
            ];
            for half in 0..2 {
                let ib = ib32 + half;
                let h = qh[ib] as usize;
                for l in 0..4 {
                    let i1 = qs[8 * ib + 2 * l] as usize | ((h << (8 - 2 * l)) & 256);
                    let i2 = qs[8 * ib + 2 * l + 1] as usize | ((h << (7 - 2 * l)) & 256);
                    let (g1, g2) = (IQ3S_GRID[i1].to_le_bytes(), IQ3S_GRID[i2].to_le_bytes());
                    let s = signs[4 * ib + l];
                    for j in 0..4 {
                        y[o + j] = db[half] * g1[j] as f32 * sign(s, j);
                        y[o + j + 4] = db[half] * g2[j] as f32 * sign(s, j + 4);
                    }
                    o += 8;
                }
            }
        }
    }
}

/// The imatrix-or-x^2 weights of a 32-value block and their square roots.
fn block_weights(
    xb: &[f32],
    qw: Option<&[f32]>,
    sigma2: f32,
    weight: &mut [f32; 32],
    waux: &mut [f32; 32],
) {
    for i in 0..32 {
        weight[i] = match qw {
            Some(q) => q[i] * (sigma2 + xb[i] * xb[i]).sqrt(),
            None => xb[i] * xb[i],
        };
        waux[i] = weight[i].sqrt();
    }
}

/// Packed levels of group `k` (4 values) of `l`.
#[inline]
fn pack4(l: &[i8]) -> usize {
    (0..4).map(|i| (l[i] as usize) << (3 * i)).sum()
}

/// Levels of 4 values at inverse scale `id`: nearest odd level, clamped to 0..7.
#[inline]
fn levels4(id: f32, xval: &[f32], l: &mut [i8]) {
    for i in 0..4 {
        let v = nearest_int(0.5 * (id * xval[i] - 1.0));
        l[i] = v.clamp(0, K_MAX_Q - 1) as i8;
    }
}

fn sums(weight: &[f32; 32], xval: &[f32; 32], l: &[i8; 32]) -> (f32, f32) {
    let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
    for i in 0..32 {
        let w = weight[i];
        let q = (2 * l[i] as i32 + 1) as f32;
        sumqx += w * xval[i] * q;
        sumq2 += w * q * q;
    }
    (sumqx, sumq2)
}

/// The scale search shared by IQ3_XXS and IQ3_S for one 32-value block of magnitudes:
/// tries the inverse scales (15 + 0.2 is) / max, snapping each group of 4 onto the grid,
/// then re-fits the groups that were off the grid. Returns the scale; `l` gets the levels.
/// How IQ3_XXS and IQ3_S differ in the search: the range of `is`, whether groups start out
/// counted as on the grid, and whether the re-fit redoes every group.
struct Variant {
    is_range: i32,
    initially_on_grid: bool,
    refit_all: bool,
}

const XXS: Variant = Variant {
    is_range: 15,
    initially_on_grid: true,
    refit_all: false,
};
const S: Variant = Variant {
    is_range: 9,
    initially_on_grid: false,
    refit_all: true,
};

/// One block's magnitudes, weights and the weights' square roots, and its largest magnitude.
struct BlockIn<'a> {
    xval: &'a [f32; 32],
    weight: &'a [f32; 32],
    waux: &'a [f32; 32],
    max: f32,
}

fn search_block(m: &GridMap, b: &BlockIn, v: &Variant, l: &mut [i8; 32]) -> f32 {
    let (xval, weight, waux, max) = (b.xval, b.weight, b.waux, b.max);
    let (is_range, initially_on_grid, refit_all) = (v.is_range, v.initially_on_grid, v.refit_all);
    let mut best = 0.0f32;
    let mut scale = max / (2 * K_MAX_Q - 1) as f32;
    let mut is_on_grid = [initially_on_grid; 8];
    let mut laux = [0i8; 32];
    let mut on_aux = [true; 8];
    for is in -is_range..=is_range {
        let id = ((2 * K_MAX_Q - 1) as f32 + is as f32 * 0.2) / max;
        let this_scale = 1.0 / id;
        for k in 0..8 {
            levels4(id, &xval[4 * k..], &mut laux[4 * k..4 * k + 4]);
            let u = pack4(&laux[4 * k..]);
            on_aux[k] = true;
            if m.kmap[u] < 0 {
                on_aux[k] = false;
                m.best_neighbour(
                    u,
                    &xval[4 * k..],
                    &waux[4 * k..],
                    this_scale,
                    &mut laux[4 * k..4 * k + 4],
                );
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
    let n_not_ongrid = is_on_grid.iter().filter(|&&g| !g).count();
    if n_not_ongrid > 0 && scale > 0.0 {
        let id = 1.0 / scale;
        for k in 0..8 {
            // IQ3_S redoes every group here (its `continue` is commented out in ggml)
            if is_on_grid[k] && !refit_all {
                continue;
            }
            let mut lk = [0i8; 4];
            levels4(id, &xval[4 * k..], &mut lk);
            let u = pack4(&lk);
            let gi = if m.kmap[u] < 0 {
                m.best_neighbour(
                    u,
                    &xval[4 * k..],
                    &waux[4 * k..],
                    scale,
                    &mut l[4 * k..4 * k + 4],
                )
            } else {
                m.kmap[u] as usize
            };
            for i in 0..4 {
                l[4 * k + i] = (m.grid[gi][i] - 1) / 2;
            }
        }
        let (sumqx, sumq2) = sums(weight, xval, l);
        if sumq2 > 0.0 {
            scale = sumqx / sumq2;
        }
    }
    scale
}

/// The grid index of group `k` of `l`, which the search left on the grid.
fn grid_index(m: &GridMap, l: &[i8; 32], k: usize) -> usize {
    // every level vector the search returns is a grid point (ggml aborts otherwise)
    m.kmap[pack4(&l[4 * k..])].max(0) as usize
}

/// Magnitudes and the sign bits of each 8 values; with `even`, the least important value
/// of a group with an odd number of negatives keeps its sign (IQ3_XXS stores 7 bits).
fn magnitudes(xb: &[f32], weight: &[f32; 32], even: bool, xval: &mut [f32; 32]) -> [u8; 4] {
    let mut block_signs = [0u8; 4];
    for k in 0..4 {
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
        block_signs[k] = if even { s & 127 } else { s };
    }
    block_signs
}

fn max_of(xval: &[f32; 32]) -> f32 {
    let mut max = xval[0];
    for &v in &xval[1..] {
        max = if max > v { max } else { v };
    }
    max
}

fn sigma2_of(xbl: &[f32]) -> f32 {
    let mut sumx2 = 0.0f32;
    for &v in xbl {
        sumx2 += v * v;
    }
    2.0 * sumx2 / QK_K as f32
}

/// quantize_row_iq3_xxs_impl(256, ...) for one row.
pub(crate) fn quantize_row_iq3_xxs(src: &[f32], dst: &mut [u8], qw: Option<&[f32]>) {
    let m = iq3xxs_map();
    for (ibl, (xbl, y)) in src
        .chunks_exact(QK_K)
        .zip(dst.chunks_exact_mut(IQ3_XXS_SIZE))
        .enumerate()
    {
        y.fill(0);
        let sigma2 = sigma2_of(xbl);
        let mut scales = [0.0f32; 8];
        let mut max_scale = 0.0f32;
        let mut q3 = [0u8; 96];
        let mut sas = [0u32; 8];
        let (mut weight, mut waux, mut xval) = ([0f32; 32], [0f32; 32], [0f32; 32]);
        for ib in 0..8 {
            let xb = &xbl[32 * ib..32 * ib + 32];
            let w = qw.map(|q| &q[QK_K * ibl + 32 * ib..]);
            block_weights(xb, w, sigma2, &mut weight, &mut waux);
            let block_signs = magnitudes(xb, &weight, true, &mut xval);
            let max = max_of(&xval);
            let mut l = [0i8; 32];
            if max < GROUP_MAX_EPS_IQ3_XXS {
                scales[ib] = 0.0;
                continue;
            }
            let mut scale = search_block(
                m,
                &BlockIn {
                    xval: &xval,
                    weight: &weight,
                    waux: &waux,
                    max,
                },
                &XXS,
                &mut l,
            );
            let mut block_signs = block_signs;
            if scale < 0.0 {
                scale = -scale;
                for s in &mut block_signs {
                    *s = !*s & 127;
                }
            }
            for k in 0..8 {
                q3[8 * ib + k] = grid_index(m, &l, k) as u8;
            }
            sas[ib] = block_signs[0] as u32
                | (block_signs[1] as u32) << 7
                | (block_signs[2] as u32) << 14
                | (block_signs[3] as u32) << 21;
            scales[ib] = scale;
            max_scale = if max_scale > scale { max_scale } else { scale };
        }
        if max_scale == 0.0 {
            continue;
        }
        let d = max_scale / 31.0;
        y[0..2].copy_from_slice(&fp32_to_fp16(d * 1.0125).to_le_bytes());
        let id = 1.0 / d;
        for ib in 0..8 {
            let l = nearest_int(0.5 * (id * scales[ib] - 1.0)).clamp(0, 15);
            sas[ib] |= (l as u32) << 28;
        }
        y[2..66].copy_from_slice(&q3[..64]);
        for ib in 0..8 {
            y[66 + 4 * ib..70 + 4 * ib].copy_from_slice(&sas[ib].to_le_bytes());
        }
    }
}

pub fn quantize_row_iq3_xxs_ref(src: &[f32], dst: &mut [u8]) {
    quantize_row_iq3_xxs(src, dst, None);
}

/// quantize_row_iq3_s_impl(32, ...) for one row.
pub(crate) fn quantize_row_iq3_s(src: &[f32], dst: &mut [u8], qw: Option<&[f32]>) {
    let m = iq3s_map();
    for (ibl, (xbl, y)) in src
        .chunks_exact(QK_K)
        .zip(dst.chunks_exact_mut(IQ3_S_SIZE))
        .enumerate()
    {
        y.fill(0);
        let sigma2 = sigma2_of(xbl);
        let mut scales = [0.0f32; 8];
        let mut max_scale = 0.0f32;
        // ggml advances its qs and signs pointers only past blocks it quantized (an all-zero
        // block is skipped without moving them), so the offsets are counted separately
        let (mut qs_off, mut signs_off) = (2usize, 74usize);
        let (mut weight, mut waux, mut xval) = ([0f32; 32], [0f32; 32], [0f32; 32]);
        for ib in 0..8 {
            let xb = &xbl[32 * ib..32 * ib + 32];
            let w = qw.map(|q| &q[QK_K * ibl + 32 * ib..]);
            block_weights(xb, w, sigma2, &mut weight, &mut waux);
            let mut block_signs = magnitudes(xb, &weight, false, &mut xval);
            let max = max_of(&xval);
            let mut l = [0i8; 32];
            if max == 0.0 {
                scales[ib] = 0.0;
                continue;
            }
            let mut scale = search_block(
                m,
                &BlockIn {
                    xval: &xval,
                    weight: &weight,
                    waux: &waux,
                    max,
                },
                &S,
                &mut l,
            );
            if scale < 0.0 {
                scale = -scale;
                for s in &mut block_signs {
                    *s = !*s;
                }
            }
            for k in 0..8 {
                let gi = grid_index(m, &l, k);
                y[qs_off + k] = (gi & 255) as u8;
                y[66 + (ib * 8 + k) / 8] |= ((gi >> 8) << ((ib * 8 + k) % 8)) as u8;
            }
            qs_off += 8;
            y[signs_off..signs_off + 4].copy_from_slice(&block_signs);
            signs_off += 4;
            scales[ib] = scale;
            max_scale = if max_scale > scale { max_scale } else { scale };
        }
        if max_scale == 0.0 {
            continue;
        }
        let d = max_scale / 31.0;
        y[0..2].copy_from_slice(&fp32_to_fp16(d * 1.033).to_le_bytes());
        let id = 1.0 / d;
        for ib in (0..8).step_by(2) {
            let l1 = nearest_int(0.5 * (id * scales[ib] - 1.0)).clamp(0, 15);
            let l2 = nearest_int(0.5 * (id * scales[ib + 1] - 1.0)).clamp(0, 15);
            y[106 + ib / 2] = (l1 | (l2 << 4)) as u8;
        }
    }
}

pub fn quantize_row_iq3_s_ref(src: &[f32], dst: &mut [u8]) {
    quantize_row_iq3_s(src, dst, None);
}
