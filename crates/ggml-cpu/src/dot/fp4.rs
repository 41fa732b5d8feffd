//! Portable dot products of MXFP4 and NVFP4 with Q8_0 activations, following ggml's
//! ggml_vec_dot_mxfp4_q8_0_generic / ggml_vec_dot_nvfp4_q8_0_generic. An NVFP4 block of 64
//! spans two Q8_0 blocks, one scale per 16 values.

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

use super::scalar::check;
use ggml::quants::{e8m0_to_fp32_half, fp16_to_fp32 as h2f, ue4m3_to_fp32, KVALUES_MXFP4};

#[inline]
fn q8_d(b: &[u8]) -> f32 {
    h2f(u16::from_le_bytes([b[0], b[1]]))
}

pub fn mxfp4_q8_0(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 32, x, 17, y, 34);
    let mut sumf = 0.0f32;
    for ib in 0..nb {
        let (bx, by) = (&x[17 * ib..17 * ib + 17], &y[34 * ib..34 * ib + 34]);
        let d = q8_d(by) * e8m0_to_fp32_half(bx[0]);
        let (mut s1, mut s2) = (0i32, 0i32);
        for j in 0..16 {
            s1 += by[2 + j] as i8 as i32 * KVALUES_MXFP4[(bx[1 + j] & 0xf) as usize] as i32;
            s2 += by[18 + j] as i8 as i32 * KVALUES_MXFP4[(bx[1 + j] >> 4) as usize] as i32;
        }
        sumf += d * (s1 + s2) as f32;
    }
    sumf
}

pub fn nvfp4_q8_0(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 64, x, 36, y, 68);
    let mut sumf = 0.0f32;
    for ib in 0..nb {
        let bx = &x[36 * ib..36 * ib + 36];
        for s in 0..4 {
            let d = ue4m3_to_fp32(bx[s]);
            let by = &y[34 * (2 * ib + s / 2)..34 * (2 * ib + s / 2) + 34];
            let off = 2 + (s % 2) * 16;
            let dy = q8_d(by);
            let (mut lo, mut hi) = (0i32, 0i32);
            for j in 0..8 {
                let q = bx[4 + 8 * s + j];
                lo += by[off + j] as i8 as i32 * KVALUES_MXFP4[(q & 0xf) as usize] as i32;
                hi += by[off + 8 + j] as i8 as i32 * KVALUES_MXFP4[(q >> 4) as usize] as i32;
            }
            sumf += dy * d * (lo + hi) as f32;
        }
    }
    sumf
}
