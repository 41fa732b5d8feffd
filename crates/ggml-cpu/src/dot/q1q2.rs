//! Portable dot products of Q1_0 (128 signs) and Q2_0 (64 codes -1..2) with Q8_0
//! activations, following ggml's ggml_vec_dot_q1_0_q8_0_generic / _q2_0_q8_0_generic: an
//! integer sum per Q8_0 block, scaled by its d and summed in f32 before the weight's d.

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

use super::scalar::check;
use ggml::quants::fp16_to_fp32 as h2f;

#[inline]
fn d_at(b: &[u8], o: usize) -> f32 {
    h2f(u16::from_le_bytes([b[o], b[o + 1]]))
}

pub fn q1_0_q8_0(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 128, x, 18, y, 136);
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[18 * i..18 * i + 18];
        let mut sumi = 0.0f32;
        for k in 0..4 {
            let yb = &y[34 * (4 * i + k)..34 * (4 * i + k) + 34];
            let mut s = 0i32;
            for j in 0..32 {
                let q = yb[2 + j] as i8 as i32;
                let bit = (bx[2 + 4 * k + j / 8] >> (j % 8)) & 1;
                s += if bit != 0 { q } else { -q };
            }
            sumi += d_at(yb, 0) * s as f32;
        }
        sumf += d_at(bx, 0) * sumi;
    }
    sumf
}

/// Q2_0 block i of x against its two Q8_0 blocks: each integer sum with that block's d, in
/// ggml's generic order, the products rounded (`fused` false) or fused into the sums.
fn q2_0_block(bx: &[u8], y: &[u8], i: usize, fused: bool) -> f32 {
    let mut sumi = 0.0f32;
    for k in 0..2 {
        let yb = &y[34 * (2 * i + k)..34 * (2 * i + k) + 34];
        let mut s = 0i32;
        for j in 0..32 {
            let q = ((bx[2 + 8 * k + j / 4] >> ((j % 4) * 2)) & 3) as i32 - 1;
            s += q * yb[2 + j] as i8 as i32;
        }
        sumi = if fused {
            d_at(yb, 0).mul_add(s as f32, sumi)
        } else {
            sumi + d_at(yb, 0) * s as f32
        };
    }
    sumi
}

pub fn q2_0_q8_0(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 64, x, 18, y, 68);
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[18 * i..18 * i + 18];
        sumf += d_at(bx, 0) * q2_0_block(bx, y, i, false);
    }
    sumf
}

/// ggml's generic Q2_0 kernel as GCC compiles it with FMA when it does not avoid FMA chains
/// (its x86 builds have no Q2_0 kernel of their own; an Intel -march=native tuning fuses
/// `sumi += d1 * sumi_block` and `sumf += d0 * sumi`, a Zen tuning does not). For
/// ggml's AVX-512 build on such a CPU.
#[cfg(target_arch = "x86_64")]
pub fn q2_0_q8_0_fused(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 64, x, 18, y, 68);
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[18 * i..18 * i + 18];
        sumf = d_at(bx, 0).mul_add(q2_0_block(bx, y, i, true), sumf);
    }
    sumf
}
