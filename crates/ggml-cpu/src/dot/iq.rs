//! Portable dot products of the IQ types with Q8_K activations, following ggml's
//! ggml_vec_dot_iq*_q8_K_generic.

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

use super::scalar::{check, q8k};
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
