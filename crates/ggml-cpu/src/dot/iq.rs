//! Portable dot products of the IQ types with Q8_K activations, following ggml's
//! ggml_vec_dot_iq*_q8_K_generic.

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

use super::scalar::{check, q8k};
use ggml::quants::iq_grids::{
    IQ1M_DELTA, IQ1S_DELTA, IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID,
    KMASK_IQ2XS, KSIGNS_IQ2XS,
};
use ggml::quants::{fp16_to_fp32 as h2f, KVALUES_IQ4NL};

pub fn iq4_xs_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 136, y, 292);
    let mut sumf = 0.0f32;
    for ibl in 0..nb {
        let bx = &x[136 * ibl..136 * ibl + 136];
        let q8 = q8k(y, ibl);
        let d4d8 = h2f(u16::from_le_bytes([bx[0], bx[1]])) * q8.d;
        for ib in 0..8 {
            let dl = d4d8 * ggml::quants::iq4_xs_scale(bx, ib) as f32;
            let qs = &bx[8 + 16 * ib..8 + 16 * ib + 16];
            let qy = &q8.qs[32 * ib..32 * ib + 32];
            let (mut s1, mut s2) = (0i32, 0i32);
            for j in 0..16 {
                s1 += qy[j] as i8 as i32 * KVALUES_IQ4NL[(qs[j] & 0xf) as usize] as i32;
                s2 += qy[16 + j] as i8 as i32 * KVALUES_IQ4NL[(qs[j] >> 4) as usize] as i32;
            }
            sumf += dl * (s1 + s2) as f32;
        }
    }
    sumf
}

/// Sum of the 8 grid magnitudes `g` (bytes of a grid entry) with signs `signs` times `q8`.
#[inline]
fn signed_dot8(g: [u8; 8], signs: u8, q8: &[u8]) -> i32 {
    let mut s = 0i32;
    for j in 0..8 {
        let v = g[j] as i32 * q8[j] as i8 as i32;
        s += if signs & KMASK_IQ2XS[j] != 0 { -v } else { v };
    }
    s
}

/// Two 4-value grid entries as the 8 bytes of one group.
#[inline]
fn join4(a: u32, b: u32) -> [u8; 8] {
    let (a, b) = (a.to_le_bytes(), b.to_le_bytes());
    [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]]
}

#[inline]
fn rd16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

#[inline]
fn rd32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

pub fn iq2_xxs_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 66, y, 292);
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[66 * i..66 * i + 66];
        let q8 = q8k(y, i);
        let d = h2f(rd16(bx, 0)) * q8.d;
        let mut bsum = 0i32;
        for ib32 in 0..8 {
            let o = 2 + 8 * ib32;
            let aux1 = rd32(bx, o + 4);
            let ls = 2 * (aux1 >> 28) as i32 + 1;
            let mut sumi = 0i32;
            for l in 0..4 {
                let g = IQ2XXS_GRID[bx[o + l] as usize].to_le_bytes();
                let signs = KSIGNS_IQ2XS[((aux1 >> (7 * l)) & 127) as usize];
                sumi += signed_dot8(g, signs, &q8.qs[32 * ib32 + 8 * l..]);
            }
            bsum = bsum.wrapping_add(sumi.wrapping_mul(ls));
        }
        sumf += d * bsum as f32;
    }
    0.125 * sumf
}

pub fn iq2_xs_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 74, y, 292);
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[74 * i..74 * i + 74];
        let q8 = q8k(y, i);
        let d = h2f(rd16(bx, 0)) * q8.d;
        let mut bsum = 0i32;
        for ib32 in 0..8 {
            let sc = bx[66 + ib32];
            let ls = [2 * (sc & 0xf) as i32 + 1, 2 * (sc >> 4) as i32 + 1];
            for half in 0..2 {
                let mut sumi = 0i32;
                for l in 2 * half..2 * half + 2 {
                    let q = rd16(bx, 2 + 2 * (4 * ib32 + l));
                    let g = IQ2XS_GRID[(q & 511) as usize].to_le_bytes();
                    let signs = KSIGNS_IQ2XS[(q >> 9) as usize];
                    sumi += signed_dot8(g, signs, &q8.qs[32 * ib32 + 8 * l..]);
                }
                bsum = bsum.wrapping_add(sumi * ls[half]);
            }
        }
        sumf += d * bsum as f32;
    }
    0.125 * sumf
}

pub fn iq2_s_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 82, y, 292);
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[82 * i..82 * i + 82];
        let q8 = q8k(y, i);
        let d = h2f(rd16(bx, 0)) * q8.d;
        let mut bsum = 0i32;
        for ib32 in 0..8 {
            let sc = bx[74 + ib32];
            let ls = [1 + 2 * (sc & 0xf) as i32, 1 + 2 * (sc >> 4) as i32];
            let qh = bx[66 + ib32] as usize;
            let mut s = [0i32; 2];
            for l in 0..4 {
                let idx = bx[2 + 4 * ib32 + l] as usize | ((qh << (8 - 2 * l)) & 0x300);
                let g = IQ2S_GRID[idx].to_le_bytes();
                let signs = bx[34 + 4 * ib32 + l];
                s[l / 2] += signed_dot8(g, signs, &q8.qs[32 * ib32 + 8 * l..]);
            }
            bsum = bsum.wrapping_add(ls[0] * s[0] + ls[1] * s[1]);
        }
        sumf += d * bsum as f32;
    }
    0.125 * sumf
}

pub fn iq3_xxs_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 98, y, 292);
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[98 * i..98 * i + 98];
        let q8 = q8k(y, i);
        let d = h2f(rd16(bx, 0)) * q8.d;
        let mut bsum = 0i32;
        for ib32 in 0..8 {
            let aux32 = rd32(bx, 66 + 4 * ib32);
            let ls = 2 * (aux32 >> 28) as i32 + 1;
            let q3 = &bx[2 + 8 * ib32..];
            let mut sumi = 0i32;
            for l in 0..4 {
                let g = join4(
                    IQ3XXS_GRID[q3[2 * l] as usize],
                    IQ3XXS_GRID[q3[2 * l + 1] as usize],
                );
                let signs = KSIGNS_IQ2XS[((aux32 >> (7 * l)) & 127) as usize];
                sumi += signed_dot8(g, signs, &q8.qs[32 * ib32 + 8 * l..]);
            }
            bsum = bsum.wrapping_add(sumi.wrapping_mul(ls));
        }
        sumf += d * bsum as f32;
    }
    0.25 * sumf
}

pub fn iq3_s_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 110, y, 292);
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[110 * i..110 * i + 110];
        let q8 = q8k(y, i);
        let d = h2f(rd16(bx, 0)) * q8.d;
        let mut bsum = 0i32;
        for ib32 in 0..8 {
            let sc = bx[106 + ib32 / 2];
            let ls = if ib32 % 2 == 0 { sc & 0xf } else { sc >> 4 };
            let ls = 2 * ls as i32 + 1;
            let qh = bx[66 + ib32] as usize;
            let qs = &bx[2 + 8 * ib32..];
            let mut sumi = 0i32;
            for l in 0..4 {
                let i1 = qs[2 * l] as usize | ((qh << (8 - 2 * l)) & 256);
                let i2 = qs[2 * l + 1] as usize | ((qh << (7 - 2 * l)) & 256);
                let g = join4(IQ3S_GRID[i1], IQ3S_GRID[i2]);
                let signs = bx[74 + 4 * ib32 + l];
                sumi += signed_dot8(g, signs, &q8.qs[32 * ib32 + 8 * l..]);
            }
            bsum = bsum.wrapping_add(sumi.wrapping_mul(ls));
        }
        sumf += d * bsum as f32;
    }
    sumf
}

/// The 8 signed grid values of IQ1S_GRID point `idx` times `q8`.
#[inline]
fn iq1_dot8(idx: usize, q8: &[u8]) -> i32 {
    let g = IQ1S_GRID[idx].to_le_bytes();
    (0..8).map(|j| q8[j] as i8 as i32 * g[j] as i8 as i32).sum()
}

pub fn iq1_s_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 50, y, 292);
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[50 * i..50 * i + 50];
        let q8 = q8k(y, i);
        let (mut sumi, mut sumi1) = (0i32, 0i32);
        for ib in 0..8 {
            let qh = rd16(bx, 34 + 2 * ib) as usize;
            let ls = 2 * ((qh >> 12) & 7) as i32 + 1;
            let delta = if qh & 0x8000 != 0 { -1 } else { 1 };
            let mut lsum = 0i32;
            for l in 0..4 {
                let idx = bx[2 + 4 * ib + l] as usize | (((qh >> (3 * l)) & 7) << 8);
                lsum += iq1_dot8(idx, &q8.qs[32 * ib + 8 * l..]);
            }
            sumi += ls * lsum;
            let bs = q8.bsums[2 * ib] as i32 + q8.bsums[2 * ib + 1] as i32;
            sumi1 += ls * delta * bs;
        }
        let d = h2f(rd16(bx, 0));
        sumf += d * q8.d * (sumi as f32 + IQ1S_DELTA * sumi1 as f32);
    }
    sumf
}

pub fn iq1_m_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 56, y, 292);
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[56 * i..56 * i + 56];
        let q8 = q8k(y, i);
        let sc = |j: usize| rd16(bx, 48 + 2 * j);
        let u =
            (sc(0) >> 12) | ((sc(1) >> 8) & 0x00f0) | ((sc(2) >> 4) & 0x0f00) | (sc(3) & 0xf000);
        let (mut sumi1, mut sumi2) = (0i32, 0i32);
        for ib in 0..8 {
            let qh = [bx[32 + 2 * ib] as usize, bx[33 + 2 * ib] as usize];
            let delta = |h: usize, m: usize| if h & m != 0 { -1 } else { 1 };
            let deltas = [
                delta(qh[0], 0x08),
                delta(qh[0], 0x80),
                delta(qh[1], 0x08),
                delta(qh[1], 0x80),
            ];
            let (mut sum1, mut sum2) = ([0i32; 2], [0i32; 2]);
            for l in 0..4 {
                let idx = bx[4 * ib + l] as usize | ((qh[l / 2] << (8 - 4 * (l % 2))) & 0x700);
                let qy = &q8.qs[32 * ib + 8 * l..];
                sum1[l / 2] += iq1_dot8(idx, qy);
                let lsum2: i32 = (0..8).map(|j| qy[j] as i8 as i32).sum();
                sum2[l / 2] += lsum2 * deltas[l];
            }
            let s = sc(ib / 2) as usize;
            let ls1 = 2 * ((s >> (6 * (ib % 2))) & 7) as i32 + 1;
            let ls2 = 2 * ((s >> (6 * (ib % 2) + 3)) & 7) as i32 + 1;
            sumi1 += sum1[0] * ls1 + sum1[1] * ls2;
            sumi2 += sum2[0] * ls1 + sum2[1] * ls2;
        }
        sumf += h2f(u) * q8.d * (sumi1 as f32 + IQ1M_DELTA * sumi2 as f32);
    }
    sumf
}
