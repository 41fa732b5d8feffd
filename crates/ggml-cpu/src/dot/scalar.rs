//! Portable dot products, one per weight type, following ggml's `ggml_vec_dot_*_generic`:
//! the same partner type and the same integer sums per block. They are the reference every
//! SIMD kernel is tested against, and the fallback on CPUs without one.

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

use ggml::quants::{bf16_to_fp32, fp16_to_fp32 as h2f, KVALUES_IQ4NL};

#[inline]
fn rd16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

#[inline]
fn rdf32(b: &[u8], o: usize) -> f32 {
    f32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// Asserts that `x` and `y` hold `n` elements of their block types.
#[inline]
pub(crate) fn check(n: usize, qk: usize, x: &[u8], xs: usize, y: &[u8], ys: usize) -> usize {
    assert_eq!(
        n % qk,
        0,
        "vec_dot: {n} is not a multiple of the block size {qk}"
    );
    let nb = n / qk;
    assert!(
        x.len() >= nb * xs && y.len() >= nb * ys,
        "vec_dot: operands shorter than {n} elements"
    );
    nb
}

pub fn f32_f32(n: usize, x: &[u8], y: &[u8]) -> f32 {
    check(n, 1, x, 4, y, 4);
    // ggml's scalar path accumulates in double (ggml_float).
    let mut sum = 0.0f64;
    for i in 0..n {
        sum += (rdf32(x, 4 * i) * rdf32(y, 4 * i)) as f64;
    }
    sum as f32
}

pub fn f16_f16(n: usize, x: &[u8], y: &[u8]) -> f32 {
    check(n, 1, x, 2, y, 2);
    let mut sum = 0.0f64;
    for i in 0..n {
        sum += (h2f(rd16(x, 2 * i)) * h2f(rd16(y, 2 * i))) as f64;
    }
    sum as f32
}

pub fn bf16_bf16(n: usize, x: &[u8], y: &[u8]) -> f32 {
    check(n, 1, x, 2, y, 2);
    let mut sum = 0.0f64;
    for i in 0..n {
        sum += (bf16_to_fp32(rd16(x, 2 * i)) * bf16_to_fp32(rd16(y, 2 * i))) as f64;
    }
    sum as f32
}

pub fn q4_0_q8_0(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 32, x, 18, y, 34);
    let mut sumf = 0.0f32;
    for ib in 0..nb {
        let (bx, by) = (&x[18 * ib..18 * ib + 18], &y[34 * ib..34 * ib + 34]);
        let (mut s0, mut s1) = (0i32, 0i32);
        for j in 0..16 {
            let v0 = (bx[2 + j] & 0x0F) as i32 - 8;
            let v1 = (bx[2 + j] >> 4) as i32 - 8;
            s0 += v0 * by[2 + j] as i8 as i32;
            s1 += v1 * by[2 + 16 + j] as i8 as i32;
        }
        sumf += (s0 + s1) as f32 * h2f(rd16(bx, 0)) * h2f(rd16(by, 0));
    }
    sumf
}

pub fn q4_1_q8_1(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 32, x, 20, y, 36);
    let mut sumf = 0.0f32;
    for ib in 0..nb {
        let (bx, by) = (&x[20 * ib..20 * ib + 20], &y[36 * ib..36 * ib + 36]);
        let (mut s0, mut s1) = (0i32, 0i32);
        for j in 0..16 {
            s0 += (bx[4 + j] & 0x0F) as i32 * by[4 + j] as i8 as i32;
            s1 += (bx[4 + j] >> 4) as i32 * by[4 + 16 + j] as i8 as i32;
        }
        let (dx, mx, dy, sy) = (
            h2f(rd16(bx, 0)),
            h2f(rd16(bx, 2)),
            h2f(rd16(by, 0)),
            h2f(rd16(by, 2)),
        );
        sumf += (dx * dy) * (s0 + s1) as f32 + mx * sy;
    }
    sumf
}

pub fn q5_0_q8_0(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 32, x, 22, y, 34);
    let mut sumf = 0.0f32;
    for ib in 0..nb {
        let (bx, by) = (&x[22 * ib..22 * ib + 22], &y[34 * ib..34 * ib + 34]);
        let qh = u32::from_le_bytes([bx[2], bx[3], bx[4], bx[5]]);
        let (mut s0, mut s1) = (0i32, 0i32);
        for j in 0..16 {
            let xh0 = (((qh >> j) & 1) << 4) as u8;
            let xh1 = (((qh >> (j + 16)) & 1) << 4) as u8;
            let x0 = ((bx[6 + j] & 0x0F) | xh0) as i32 - 16;
            let x1 = ((bx[6 + j] >> 4) | xh1) as i32 - 16;
            s0 += x0 * by[2 + j] as i8 as i32;
            s1 += x1 * by[2 + 16 + j] as i8 as i32;
        }
        sumf += (h2f(rd16(bx, 0)) * h2f(rd16(by, 0))) * (s0 + s1) as f32;
    }
    sumf
}

pub fn q5_1_q8_1(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 32, x, 24, y, 36);
    let mut sumf = 0.0f32;
    for ib in 0..nb {
        let (bx, by) = (&x[24 * ib..24 * ib + 24], &y[36 * ib..36 * ib + 36]);
        let qh = u32::from_le_bytes([bx[4], bx[5], bx[6], bx[7]]);
        let (mut s0, mut s1) = (0i32, 0i32);
        for j in 0..16 {
            let xh0 = (((qh >> j) & 1) << 4) as u8;
            let xh1 = (((qh >> (j + 16)) & 1) << 4) as u8;
            s0 += ((bx[8 + j] & 0x0F) | xh0) as i32 * by[4 + j] as i8 as i32;
            s1 += ((bx[8 + j] >> 4) | xh1) as i32 * by[4 + 16 + j] as i8 as i32;
        }
        let (dx, mx, dy, sy) = (
            h2f(rd16(bx, 0)),
            h2f(rd16(bx, 2)),
            h2f(rd16(by, 0)),
            h2f(rd16(by, 2)),
        );
        sumf += (dx * dy) * (s0 + s1) as f32 + mx * sy;
    }
    sumf
}

pub fn q8_0_q8_0(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 32, x, 34, y, 34);
    let mut sumf = 0.0f32;
    for ib in 0..nb {
        let (bx, by) = (&x[34 * ib..34 * ib + 34], &y[34 * ib..34 * ib + 34]);
        let mut sumi = 0i32;
        for j in 0..32 {
            sumi += bx[2 + j] as i8 as i32 * by[2 + j] as i8 as i32;
        }
        sumf += sumi as f32 * (h2f(rd16(bx, 0)) * h2f(rd16(by, 0)));
    }
    sumf
}

pub fn iq4_nl_q8_0(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 32, x, 18, y, 34);
    let mut sumf = 0.0f32;
    for ib in 0..nb {
        let (bx, by) = (&x[18 * ib..18 * ib + 18], &y[34 * ib..34 * ib + 34]);
        let d = h2f(rd16(by, 0)) * h2f(rd16(bx, 0));
        let (mut s1, mut s2) = (0i32, 0i32);
        for j in 0..16 {
            s1 += by[2 + j] as i8 as i32 * KVALUES_IQ4NL[(bx[2 + j] & 0xf) as usize] as i32;
            s2 += by[2 + 16 + j] as i8 as i32 * KVALUES_IQ4NL[(bx[2 + j] >> 4) as usize] as i32;
        }
        sumf += d * (s1 + s2) as f32;
    }
    sumf
}

/// One Q8_K block: its scale, quants and per-16 sums.
pub(crate) struct Q8K<'a> {
    pub d: f32,
    pub qs: &'a [u8],
    pub bsums: [i16; 16],
}

#[inline]
pub(crate) fn q8k(y: &[u8], i: usize) -> Q8K<'_> {
    let b = &y[292 * i..292 * i + 292];
    let mut bsums = [0i16; 16];
    for (j, s) in bsums.iter_mut().enumerate() {
        *s = rd16(b, 260 + 2 * j) as i16;
    }
    Q8K {
        d: rdf32(b, 0),
        qs: &b[4..260],
        bsums,
    }
}

pub fn q2_k_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 84, y, 292);
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[84 * i..84 * i + 84];
        let by = q8k(y, i);
        let sc = &bx[0..16];
        let mut summs = 0i32;
        for j in 0..16 {
            summs += by.bsums[j] as i32 * (sc[j] >> 4) as i32;
        }
        let dall = by.d * h2f(rd16(bx, 80));
        let dmin = by.d * h2f(rd16(bx, 82));
        let mut isum = 0i32;
        let mut is = 0;
        let mut q8 = 0;
        for k in 0..2 {
            let q2 = &bx[16 + 32 * k..16 + 32 * k + 32];
            for shift in [0, 2, 4, 6] {
                for half in 0..2 {
                    let d = (sc[is] & 0xF) as i32;
                    is += 1;
                    let mut isuml = 0i32;
                    for l in 0..16 {
                        isuml += by.qs[q8 + 16 * half + l] as i8 as i32
                            * ((q2[16 * half + l] >> shift) & 3) as i32;
                    }
                    isum += d * isuml;
                }
                q8 += 32;
            }
        }
        sumf += dall * isum as f32 - dmin * summs as f32;
    }
    sumf
}

pub fn q3_k_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 110, y, 292);
    let mut sums = [0f32; 8];
    for i in 0..nb {
        let bx = &x[110 * i..110 * i + 110];
        let by = q8k(y, i);
        let (hm, q3) = (&bx[0..32], &bx[32..96]);
        let mut scales = [0u8; 12];
        scales.copy_from_slice(&bx[96..108]);
        let mut a = [0i8; 256];
        let mut m = 1u8;
        for g in 0..2 {
            for shift in [0, 2, 4, 6] {
                let base = 128 * g + 16 * shift;
                for l in 0..32 {
                    let v = ((q3[32 * g + l] >> shift) & 3) as i8;
                    a[base + l] = v - if hm[l] & m != 0 { 0 } else { 4 };
                }
                m <<= 1;
            }
        }
        let mut aux32 = [0i32; 8];
        for j in 0..16 {
            let sc = q3k_scale(&scales, j) as i32;
            for l in 0..16 {
                let p = 16 * j + l;
                aux32[l % 8] += sc * (by.qs[p] as i8 as i32 * a[p] as i32);
            }
        }
        let d = h2f(rd16(bx, 108)) * by.d;
        for l in 0..8 {
            sums[l] += d * aux32[l] as f32;
        }
    }
    sums.iter().sum()
}

#[inline]
fn q3k_scale(scales: &[u8; 12], j: usize) -> i8 {
    let sc = if j < 8 {
        scales[j] & 0xF
    } else {
        scales[j - 8] >> 4
    } as i8;
    (sc | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) as i8).wrapping_sub(32)
}

/// Scales and mins of a Q4_K/Q5_K block (ggml's utmp unpacking).
#[inline]
pub(crate) fn k4_scales_mins(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 12];
    sc.copy_from_slice(&s[..12]);
    let mut scales = [0u8; 8];
    let mut mins = [0u8; 8];
    for j in 0..8 {
        let (a, b) = ggml::quants::get_scale_min_k4(j, &sc);
        scales[j] = a;
        mins[j] = b;
    }
    (scales, mins)
}

fn k45_dot(n: usize, x: &[u8], y: &[u8], bs: usize, five: bool) -> f32 {
    let nb = check(n, 256, x, bs, y, 292);
    let mut sums = [0f32; 8];
    let mut sumf = 0.0f32;
    for i in 0..nb {
        let bx = &x[bs * i..bs * (i + 1)];
        let by = q8k(y, i);
        let (scales, mins) = k4_scales_mins(&bx[4..16]);
        let (qh, q4) = if five {
            (&bx[16..48], &bx[48..176])
        } else {
            (&bx[0..0], &bx[16..144])
        };
        let mut a = [0i8; 256];
        for g in 0..4 {
            for l in 0..32 {
                let mut lo = (q4[32 * g + l] & 0xF) as i8;
                let mut hi = (q4[32 * g + l] >> 4) as i8;
                if five {
                    lo += if qh[l] & (1 << (2 * g)) != 0 { 16 } else { 0 };
                    hi += if qh[l] & (2 << (2 * g)) != 0 { 16 } else { 0 };
                }
                a[64 * g + l] = lo;
                a[64 * g + 32 + l] = hi;
            }
        }
        let mut sumi = 0i32;
        for j in 0..16 {
            sumi += by.bsums[j] as i32 * mins[j / 2] as i32;
        }
        let mut aux32 = [0i32; 8];
        for j in 0..8 {
            let scale = scales[j] as i32;
            for l in 0..32 {
                let p = 32 * j + l;
                aux32[l % 8] += scale * (by.qs[p] as i8 as i32 * a[p] as i32);
            }
        }
        let d = h2f(rd16(bx, 0)) * by.d;
        for l in 0..8 {
            sums[l] += d * aux32[l] as f32;
        }
        let dmin = h2f(rd16(bx, 2)) * by.d;
        sumf -= dmin * sumi as f32;
    }
    for s in sums {
        sumf += s;
    }
    sumf
}

pub fn q4_k_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    k45_dot(n, x, y, 144, false)
}

pub fn q5_k_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    k45_dot(n, x, y, 176, true)
}

pub fn q6_k_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 210, y, 292);
    let mut sums = [0f32; 8];
    for i in 0..nb {
        let bx = &x[210 * i..210 * i + 210];
        let by = q8k(y, i);
        let mut a = [0i8; 256];
        for g in 0..2 {
            let ql = &bx[64 * g..64 * g + 64];
            let qh = &bx[128 + 32 * g..128 + 32 * g + 32];
            for l in 0..32 {
                a[128 * g + l] = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i8 - 32;
                a[128 * g + l + 32] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
                a[128 * g + l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
                a[128 * g + l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
            }
        }
        let mut aux32 = [0i32; 8];
        for j in 0..16 {
            let scale = bx[192 + j] as i8 as i32;
            for l in 0..16 {
                let p = 16 * j + l;
                aux32[l % 8] += scale * (by.qs[p] as i8 as i32 * a[p] as i32);
            }
        }
        let d = h2f(rd16(bx, 208)) * by.d;
        for l in 0..8 {
            sums[l] += d * aux32[l] as f32;
        }
    }
    sums.iter().sum()
}
