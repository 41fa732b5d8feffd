//! Portable dot products of the ternary types with Q8_K activations, following ggml's
//! ggml_vec_dot_tq1_0_q8_K_generic / ggml_vec_dot_tq2_0_q8_K_generic: one integer sum per
//! 256-value block, scaled by d(x) * d(y).

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

use super::scalar::{check, q8k};
use ggml::quants::{fp16_to_fp32 as h2f, unpack_trit};

pub fn tq1_0_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 54, y, 292);
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[54 * i..54 * i + 54];
        let q8 = q8k(y, i);
        let qy = |k: usize| q8.qs[k] as i8 as i32;
        let mut sum = 0i32;
        // trit l of byte m of the first 32 bytes multiplies y[l * 32 + m], and so on
        for l in 0..5 {
            for m in 0..32 {
                sum += unpack_trit(bx[m], l) * qy(l * 32 + m);
            }
        }
        for l in 0..5 {
            for m in 0..16 {
                sum += unpack_trit(bx[32 + m], l) * qy(160 + l * 16 + m);
            }
        }
        for l in 0..4 {
            for j in 0..4 {
                sum += unpack_trit(bx[48 + j], l) * qy(240 + l * 4 + j);
            }
        }
        let d = h2f(u16::from_le_bytes([bx[52], bx[53]]));
        sumf += sum as f32 * (d * q8.d);
    }
    sumf
}

pub fn tq2_0_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 66, y, 292);
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[66 * i..66 * i + 66];
        let q8 = q8k(y, i);
        let mut sumi = 0i32;
        for j in (0..64).step_by(32) {
            for l in 0..4 {
                for k in 0..32 {
                    let q = ((bx[j + k] >> (2 * l)) & 3) as i32 - 1;
                    sumi += q8.qs[4 * j + 32 * l + k] as i8 as i32 * q;
                }
            }
        }
        let d = q8.d * h2f(u16::from_le_bytes([bx[64], bx[65]]));
        sumf += sumi as f32 * d;
    }
    sumf
}
