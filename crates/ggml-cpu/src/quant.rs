//! The per-type conversion and dot-product functions the kernels use: the dot module's traits
//! for matmuls, ggml's quantizers for rows written by CPY and SET_ROWS.

use ggml::Type;

#[derive(Clone, Copy)]
pub(crate) struct MmTraits {
    pub vec_dot_type: Type,
    pub from_float: fn(&[f32], &mut [u8]),
    pub vec_dot: fn(usize, &[u8], &[u8]) -> f32,
}

pub(crate) fn mm_traits(ty: Type) -> Option<MmTraits> {
    if !crate::dot::has_traits(ty) {
        return None;
    }
    let t = crate::dot::cpu_traits(ty);
    Some(MmTraits {
        vec_dot_type: t.vec_dot_type,
        from_float: t.from_float,
        vec_dot: t.vec_dot,
    })
}

/// Whether rows of `ty` can be turned into f32.
pub(crate) fn can_dequantize(ty: Type) -> bool {
    ggml::quants::is_supported(ty)
}

/// Whether f32 rows can be written as `ty`. ggml's CPU backend has no from_float for the
/// grid types IQ1_*, IQ2_* and IQ3_* (their quantizers need ggml_quantize_init, some an
/// importance matrix), so CPY and SET_ROWS do not support them.
pub(crate) fn can_quantize(ty: Type) -> bool {
    ggml::quants::is_supported(ty)
        && !matches!(
            ty,
            Type::Iq2Xxs
                | Type::Iq2Xs
                | Type::Iq2S
                | Type::Iq3Xxs
                | Type::Iq3S
                | Type::Iq1S
                | Type::Iq1M
        )
}

/// Converts one row of blocks to f32.
pub(crate) fn dequantize_row(ty: Type, src: &[u8], dst: &mut [f32]) {
    ggml::quants::dequantize_row(ty, src, dst)
}

/// Converts one f32 row to `ty` (the CPU backend's from_float, as used by CPY and SET_ROWS).
pub(crate) fn quantize_row(ty: Type, src: &[f32], dst: &mut [u8]) {
    match ty {
        // ggml's CPU from_float for these is its SIMD quantizer, which rounds differently
        // from the reference one
        Type::Q8_0 => crate::dot::quantize_row_q8_0(src, dst),
        Type::Q8_1 => crate::dot::quantize_row_q8_1(src, dst),
        _ => ggml::quants::quantize_row_ref(ty, src, dst),
    }
}
