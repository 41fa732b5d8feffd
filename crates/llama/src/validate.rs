//! check_tensors (ggml_validate_row_data): no NaN or infinity in float tensors or in the block
//! scales of quantized ones.

use ggml::Type;

fn f16_ok(b: &[u8]) -> bool {
    half::f16::from_le_bytes([b[0], b[1]]).is_finite()
}

/// Byte offsets of the f16 scales inside one block of a quantized type.
fn scale_offsets(ty: Type) -> Option<&'static [usize]> {
    Some(match ty {
        Type::Q4_0 | Type::Q5_0 | Type::Q8_0 | Type::Iq4Nl => &[0],
        Type::Q4_1 | Type::Q5_1 | Type::Q4K | Type::Q5K => &[0, 2],
        Type::Q2K => &[80, 82],
        Type::Q3K => &[108],
        Type::Q6K => &[208],
        _ => return None,
    })
}

/// Whether `data` (whole rows of `ty`) holds only finite values.
pub fn row_data_ok(ty: Type, data: &[u8]) -> bool {
    match ty {
        Type::F32 => data
            .chunks_exact(4)
            .all(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]).is_finite()),
        Type::F16 => data.chunks_exact(2).all(f16_ok),
        Type::Bf16 => data
            .chunks_exact(2)
            .all(|c| half::bf16::from_le_bytes([c[0], c[1]]).is_finite()),
        Type::Q8K => data
            .chunks_exact(ty.type_size())
            .all(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]).is_finite()),
        _ => match scale_offsets(ty) {
            Some(offs) => data
                .chunks_exact(ty.type_size())
                .all(|b| offs.iter().all(|&o| f16_ok(&b[o..o + 2]))),
            None => true,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nan_and_inf() {
        let ok: Vec<u8> = [1.0f32, -2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert!(row_data_ok(Type::F32, &ok));
        let bad: Vec<u8> = [1.0f32, f32::NAN]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert!(!row_data_ok(Type::F32, &bad));
        let mut q = vec![0u8; 34];
        q[..2].copy_from_slice(&half::f16::INFINITY.to_le_bytes());
        assert!(!row_data_ok(Type::Q8_0, &q));
        q[..2].copy_from_slice(&half::f16::ONE.to_le_bytes());
        assert!(row_data_ok(Type::Q8_0, &q));
    }
}
