//! The FP4 (E2M1) types: MXFP4 (32 values, one E8M0 power-of-two scale) and NVFP4 (64
//! values, four UE4M3 scales, one per 16). Both ignore an importance matrix, as ggml's
//! quantize_mxfp4 / quantize_nvfp4 do.
//!
//! Layouts (ggml-common.h): MXFP4 = e, qs[16] = 17 bytes; NVFP4 = d[4], qs[32] = 36 bytes.
//! The code values are stored doubled (kvalues_mxfp4 = 2 * E2M1), so the scales are halved.

pub const MXFP4_SIZE: usize = 17;
pub const NVFP4_SIZE: usize = 36;

/// ggml's kvalues_fp4: twice the E2M1 values, index 8 being -0.
pub const KVALUES_MXFP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// 2^k for a k that gives a normal f32.
fn exp2i(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

/// ggml_e8m0_to_fp32_half: 2^(e - 128), with the two subnormal cases.
pub fn e8m0_to_fp32_half(e: u8) -> f32 {
    if e < 2 {
        f32::from_bits(0x0020_0000 << e)
    } else {
        f32::from_bits(((e - 1) as u32) << 23)
    }
}

/// ggml_ue4m3_to_fp32: an unsigned E4M3 scale (bias 7), halved like e8m0_to_fp32_half;
/// 0 and 0x7F (NaN) read as 0.
pub fn ue4m3_to_fp32(x: u8) -> f32 {
    if x == 0 || x == 0x7f {
        return 0.0;
    }
    let exp = ((x >> 3) & 0xf) as i32;
    let man = (x & 7) as f32;
    let raw = if exp == 0 {
        man * exp2i(-9)
    } else {
        (1.0 + man / 8.0) * exp2i(exp - 7)
    };
    raw * 0.5
}

/// ggml_fp32_to_ue4m3: rounds to the nearest UE4M3 (ties up), saturating at 448.
pub fn fp32_to_ue4m3(x: f32) -> u8 {
    // NaN and non-positive values have no positive scale
    if x.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return 0;
    }
    let x = x.min(448.0);
    let bits = x.to_bits();
    let fp32_exp = ((bits >> 23) & 0xff) as i32 - 127;
    let fp32_man = ((bits >> 20) & 7) as i32;
    let mut exp = fp32_exp + 7;
    if exp <= 0 {
        // subnormal: man * 2^-9 with man = round(x * 2^9), as C's (int)(x * 512 + 0.5)
        let man = ((x * 512.0 + 0.5) as i32).min(7);
        return if man < 1 { 0 } else { man as u8 };
    }
    if exp >= 15 {
        return 0x7e;
    }
    let mut man = fp32_man + ((bits >> 19) & 1) as i32;
    if man > 7 {
        man = 0;
        exp += 1;
        if exp >= 15 {
            return 0x7e;
        }
    }
    ((exp << 3) | man) as u8
}

/// The code whose value times `e` is nearest `x` (the first on ties).
fn best_index_mxfp4(x: f32, e: f32) -> u8 {
    let mut best = 0;
    let mut best_err = (KVALUES_MXFP4[0] as f32 * e - x).abs();
    for (i, &k) in KVALUES_MXFP4.iter().enumerate().skip(1) {
        let err = (k as f32 * e - x).abs();
        if err < best_err {
            best = i;
            best_err = err;
        }
    }
    best as u8
}

/// The E8M0 exponent ggml picks: floor(log2(amax)) - 2 + 127 converted to uint8_t the way
/// the x86 build does (a 32-bit truncating conversion keeping the low byte, so tiny values
/// wrap around and an infinite amax gives 0x80000000's low byte, 0).
fn mxfp4_exponent(amax: f32) -> u8 {
    if amax <= 0.0 {
        return 0;
    }
    let v = amax.log2().floor() - 2.0 + 127.0;
    if !v.is_finite() {
        return 0;
    }
    v as i32 as u8
}

pub fn quantize_row_mxfp4_ref(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(32).zip(dst.chunks_exact_mut(MXFP4_SIZE)) {
        let mut amax = 0.0f32;
        for &v in x {
            if amax < v.abs() {
                amax = v.abs();
            }
        }
        let e = mxfp4_exponent(amax);
        let d = e8m0_to_fp32_half(e);
        y[0] = e;
        for j in 0..16 {
            y[1 + j] = best_index_mxfp4(x[j], d) | (best_index_mxfp4(x[16 + j], d) << 4);
        }
    }
}

pub fn dequantize_row_mxfp4(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(MXFP4_SIZE).zip(dst.chunks_exact_mut(32)) {
        let d = e8m0_to_fp32_half(b[0]);
        for j in 0..16 {
            y[j] = KVALUES_MXFP4[(b[1 + j] & 0xf) as usize] as f32 * d;
            y[16 + j] = KVALUES_MXFP4[(b[1 + j] >> 4) as usize] as f32 * d;
        }
    }
}

pub fn quantize_row_nvfp4_ref(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(64).zip(dst.chunks_exact_mut(NVFP4_SIZE)) {
        for s in 0..4 {
            let xb = &x[16 * s..16 * s + 16];
            let mut amax = 0.0f32;
            for &v in xb {
                if amax < v.abs() {
                    amax = v.abs();
                }
            }
            let ue = fp32_to_ue4m3(amax / 6.0);
            y[s] = ue;
            let d = ue4m3_to_fp32(ue);
            for j in 0..8 {
                y[4 + 8 * s + j] =
                    best_index_mxfp4(xb[j], d) | (best_index_mxfp4(xb[8 + j], d) << 4);
            }
        }
    }
}

pub fn dequantize_row_nvfp4(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(NVFP4_SIZE).zip(dst.chunks_exact_mut(64)) {
        for s in 0..4 {
            let d = ue4m3_to_fp32(b[s]);
            let yb = &mut y[16 * s..16 * s + 16];
            for j in 0..8 {
                let q = b[4 + 8 * s + j];
                yb[j] = KVALUES_MXFP4[(q & 0xf) as usize] as f32 * d;
                yb[8 + j] = KVALUES_MXFP4[(q >> 4) as usize] as f32 * d;
            }
        }
    }
}
