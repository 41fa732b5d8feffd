//! fp16 and bf16 conversions, bit-identical with ggml's portable C routines
//! (`ggml_compute_fp32_to_fp16`, `ggml_compute_fp32_to_bf16`), so files we write match its bytes.

/// fp32 -> IEEE half, round to nearest even; NaN becomes the quiet NaN 0x7E00 with the sign kept.
#[inline]
pub fn fp32_to_fp16(f: f32) -> u16 {
    // The float multiplications do the rounding: scaling into the half range and adding a bias
    // makes the FPU round the mantissa exactly where the half mantissa ends.
    let scale_to_inf = f32::from_bits(0x7780_0000);
    let scale_to_zero = f32::from_bits(0x0880_0000);
    let mut base = (f.abs() * scale_to_inf) * scale_to_zero;

    let w = f.to_bits();
    let shl1_w = w.wrapping_add(w);
    let sign = w & 0x8000_0000;
    let mut bias = shl1_w & 0xFF00_0000;
    if bias < 0x7100_0000 {
        bias = 0x7100_0000;
    }
    base += f32::from_bits((bias >> 1) + 0x0780_0000);
    let bits = base.to_bits();
    let exp_bits = (bits >> 13) & 0x0000_7C00;
    let mantissa_bits = bits & 0x0000_0FFF;
    let nonsign = exp_bits + mantissa_bits;
    ((sign >> 16)
        | if shl1_w > 0xFF00_0000 {
            0x7E00
        } else {
            nonsign
        }) as u16
}

/// IEEE half -> fp32 (exact).
#[inline]
pub fn fp16_to_fp32(h: u16) -> f32 {
    let w = (h as u32) << 16;
    let sign = w & 0x8000_0000;
    let two_w = w.wrapping_add(w);

    let exp_offset = 0xE0u32 << 23;
    let exp_scale = f32::from_bits(0x0780_0000);
    let normalized_value = f32::from_bits((two_w >> 4) + exp_offset) * exp_scale;

    let magic_mask = 126u32 << 23;
    let magic_bias = 0.5f32;
    let denormalized_value = f32::from_bits((two_w >> 17) | magic_mask) - magic_bias;

    let denormalized_cutoff = 1u32 << 27;
    let result = sign
        | if two_w < denormalized_cutoff {
            denormalized_value.to_bits()
        } else {
            normalized_value.to_bits()
        };
    f32::from_bits(result)
}

/// fp32 -> bf16, round to nearest even; NaN is forced quiet as ggml does.
#[inline]
pub fn fp32_to_bf16(f: f32) -> u16 {
    let i = f.to_bits();
    if (i & 0x7fff_ffff) > 0x7f80_0000 {
        return ((i >> 16) | 64) as u16;
    }
    (i.wrapping_add(0x7fff + ((i >> 16) & 1)) >> 16) as u16
}

#[inline]
pub fn bf16_to_fp32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

pub fn fp32_to_fp16_row(src: &[f32], dst: &mut [u16]) {
    assert_eq!(src.len(), dst.len(), "fp32_to_fp16_row: length mismatch");
    for (d, s) in dst.iter_mut().zip(src) {
        *d = fp32_to_fp16(*s);
    }
}

pub fn fp16_to_fp32_row(src: &[u16], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len(), "fp16_to_fp32_row: length mismatch");
    for (d, s) in dst.iter_mut().zip(src) {
        *d = fp16_to_fp32(*s);
    }
}

pub fn fp32_to_bf16_row(src: &[f32], dst: &mut [u16]) {
    assert_eq!(src.len(), dst.len(), "fp32_to_bf16_row: length mismatch");
    for (d, s) in dst.iter_mut().zip(src) {
        *d = fp32_to_bf16(*s);
    }
}

pub fn bf16_to_fp32_row(src: &[u16], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len(), "bf16_to_fp32_row: length mismatch");
    for (d, s) in dst.iter_mut().zip(src) {
        *d = bf16_to_fp32(*s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fp16_round_trip_every_half() {
        for h in 0..=u16::MAX {
            let f = fp16_to_fp32(h);
            if f.is_nan() {
                assert_eq!(fp32_to_fp16(f) & 0x7E00, 0x7E00);
            } else {
                assert_eq!(fp32_to_fp16(f), h, "half {h:#06x}");
            }
        }
    }

    #[test]
    fn fp16_rounds_to_nearest_even() {
        // 1 + 2^-11 lies exactly between 1.0 and the next half: ties go to the even mantissa.
        assert_eq!(fp32_to_fp16(1.0 + f32::powi(2.0, -11)), 0x3C00);
        assert_eq!(fp32_to_fp16(1.0 + 3.0 * f32::powi(2.0, -11)), 0x3C02);
        assert_eq!(fp32_to_fp16(65520.0), 0x7C00); // rounds to +inf
        assert_eq!(fp32_to_fp16(-0.0), 0x8000);
        assert_eq!(fp32_to_fp16(f32::NAN), 0x7E00);
        assert_eq!(fp32_to_fp16(5.960_464_5e-8), 0x0001); // smallest subnormal
        assert_eq!(fp32_to_fp16(2.0e-8), 0x0000);
    }

    #[test]
    fn fp16_midpoints_go_to_even() {
        for h in 0u16..0x7BFF {
            let lo = fp16_to_fp32(h);
            let hi = fp16_to_fp32(h + 1);
            let mid = (lo + hi) / 2.0;
            let even = if h % 2 == 0 { h } else { h + 1 };
            assert_eq!(fp32_to_fp16(mid), even, "mid of {h:#06x}");
            assert_eq!(fp32_to_fp16(f32::from_bits(mid.to_bits() - 1)), h);
            assert_eq!(fp32_to_fp16(f32::from_bits(mid.to_bits() + 1)), h + 1);
            assert_eq!(fp32_to_fp16(-mid), even | 0x8000);
        }
    }

    #[test]
    fn bf16_rounding_and_nan() {
        assert_eq!(fp32_to_bf16(1.0), 0x3F80);
        // 1 + 2^-8 is a tie between 0x3F80 and 0x3F81: even wins.
        assert_eq!(fp32_to_bf16(f32::from_bits(0x3F80_8000)), 0x3F80);
        assert_eq!(fp32_to_bf16(f32::from_bits(0x3F81_8000)), 0x3F82);
        assert_eq!(fp32_to_bf16(f32::from_bits(0x3F80_8001)), 0x3F81);
        // A signalling NaN whose payload sits only in the low bits stays NaN.
        assert_eq!(fp32_to_bf16(f32::from_bits(0x7F80_0001)), 0x7FC0);
        assert_eq!(bf16_to_fp32(0x3F80), 1.0);
    }
}
