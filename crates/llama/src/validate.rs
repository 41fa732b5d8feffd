//! check_tensors (ggml_validate_row_data): no NaN or infinity in float tensors or in the block
//! scales of quantized ones.

use ggml::Type;

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

/// What is wrong with a value: "nan" or "inf".
fn bad_kind(is_nan: bool) -> &'static str {
    if is_nan {
        "nan"
    } else {
        "inf"
    }
}

fn f16_bad(b: &[u8]) -> Option<bool> {
    let v = half::f16::from_le_bytes([b[0], b[1]]);
    (!v.is_finite()).then(|| v.is_nan())
}

/// The first non-finite value in `data` (whole rows of `ty`): whether it is a NaN, and its
/// index as ggml_validate_row_data counts it (the element for float types, the block for
/// quantized ones).
fn first_bad(ty: Type, data: &[u8]) -> Option<(bool, usize)> {
    let f32_bad = |c: &[u8]| {
        let v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        (!v.is_finite()).then(|| v.is_nan())
    };
    let find = |size: usize, bad: &dyn Fn(&[u8]) -> Option<bool>| {
        data.chunks_exact(size)
            .enumerate()
            .find_map(|(i, c)| bad(c).map(|nan| (nan, i)))
    };
    match ty {
        Type::F32 => find(4, &f32_bad),
        Type::F16 => find(2, &f16_bad),
        Type::Bf16 => find(2, &|c| {
            let v = half::bf16::from_le_bytes([c[0], c[1]]);
            (!v.is_finite()).then(|| v.is_nan())
        }),
        Type::Q8K => find(ty.type_size(), &|b| f32_bad(&b[..4])),
        _ => match scale_offsets(ty) {
            Some(offs) => find(ty.type_size(), &|b| {
                offs.iter().find_map(|&o| f16_bad(&b[o..o + 2]))
            }),
            None => None,
        },
    }
}

/// Where `data` (whole rows of `ty`, `row_len` elements a row) holds its first NaN or
/// infinity, in ggml's words plus the row: "found nan value at block 5 (row 0)".
pub(crate) fn find_invalid(ty: Type, data: &[u8], row_len: u64) -> Option<String> {
    let (nan, i) = first_bad(ty, data)?;
    let per_row = (row_len / ty.block_size().max(1) as u64).max(1);
    Some(format!(
        "found {} value at block {i} (row {})",
        bad_kind(nan),
        i as u64 / per_row
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row_data_ok(ty: Type, data: &[u8]) -> bool {
        first_bad(ty, data).is_none()
    }

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

    #[test]
    fn says_where_the_first_bad_value_is() {
        let mut v = [1.0f32; 12];
        v[7] = f32::NAN;
        v[9] = f32::INFINITY;
        let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(
            find_invalid(Type::F32, &b, 4).as_deref(),
            Some("found nan value at block 7 (row 1)")
        );
        // two Q8_0 rows of one block each: the second block's scale is infinite
        let mut q = vec![0u8; 68];
        q[34..36].copy_from_slice(&half::f16::INFINITY.to_le_bytes());
        assert_eq!(
            find_invalid(Type::Q8_0, &q, 32).as_deref(),
            Some("found inf value at block 1 (row 1)")
        );
        assert_eq!(find_invalid(Type::F32, &[0u8; 8], 2), None);
    }
}
