//! The text `common_debug_cb_eval` prints for one graph node (common/debug.cpp): a header line
//! naming the node, its op and the shapes of its first two sources, then a summary of its values
//! (the first and last three items of every dimension) and their sum.

use ggml::Type;

/// `ne0, ne1, ne2, ne3`.
pub fn ne_string(ne: &[i64; 4]) -> String {
    ne.iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A node's source as printed: `name{ne}`, cut at 127 bytes as the 128-byte buffer of
/// llama.cpp's snprintf does.
fn src_string(src: Option<(&str, &[i64; 4])>) -> String {
    let Some((name, ne)) = src else {
        return String::new();
    };
    let mut s = format!("{}{{{}}}", name, ne_string(ne));
    if s.len() > 127 {
        let mut end = 127;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// printf `%*s`: pads by bytes, as C does.
fn pad_left(s: &str, width: usize) -> String {
    if s.len() >= width {
        s.to_string()
    } else {
        format!("{}{}", " ".repeat(width - s.len()), s)
    }
}

/// `common_debug_cb_eval: <name> = (<type>) <OP>(<src0>{ne}, <src1>{ne}}) = {ne}` with the
/// literal stray `}` of llama.cpp's format string.
pub fn header_line(
    name: &str,
    ty: &str,
    op_desc: &str,
    src0: Option<(&str, &[i64; 4])>,
    src1: Option<(&str, &[i64; 4])>,
    ne: &[i64; 4],
) -> String {
    format!(
        "common_debug_cb_eval: {} = ({}) {}({}, {}}}) = {{{}}}\n",
        pad_left(name, 24),
        ty,
        pad_left(op_desc, 10),
        src_string(src0),
        src_string(src1),
        ne_string(ne)
    )
}

/// Types whose values can be summarised (llama.cpp aborts on any other non-quantized type).
pub fn is_printable(ty: Type) -> bool {
    matches!(
        ty,
        Type::F32 | Type::F16 | Type::Bf16 | Type::I64 | Type::I32 | Type::I16 | Type::I8
    )
}

#[derive(Debug, PartialEq, Eq)]
pub enum PrintError {
    UnsupportedType(Type),
    OutOfBounds,
}

impl std::fmt::Display for PrintError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrintError::UnsupportedType(t) => write!(f, "cannot print values of type {t}"),
            PrintError::OutOfBounds => f.write_str("tensor strides address bytes outside its data"),
        }
    }
}

/// One element as f32 (`common_ggml_get_float_value`).
fn get_float(data: &[u8], ty: Type, off: usize) -> Result<f32, PrintError> {
    let b = |n: usize| data.get(off..off + n).ok_or(PrintError::OutOfBounds);
    Ok(match ty {
        Type::F32 => f32::from_le_bytes(b(4)?.try_into().unwrap_or_default()),
        Type::F16 => {
            ggml::quants::fp16_to_fp32(u16::from_le_bytes(b(2)?.try_into().unwrap_or_default()))
        }
        Type::Bf16 => {
            ggml::quants::bf16_to_fp32(u16::from_le_bytes(b(2)?.try_into().unwrap_or_default()))
        }
        Type::I64 => i64::from_le_bytes(b(8)?.try_into().unwrap_or_default()) as f32,
        Type::I32 => i32::from_le_bytes(b(4)?.try_into().unwrap_or_default()) as f32,
        Type::I16 => i16::from_le_bytes(b(2)?.try_into().unwrap_or_default()) as f32,
        Type::I8 => b(1)?[0] as i8 as f32,
        other => return Err(PrintError::UnsupportedType(other)),
    })
}

/// printf `%<w>.<p>f` of a float promoted to double, with C's spelling of NaN and infinity.
pub fn c_float(v: f32, width: usize, prec: usize) -> String {
    let s = if v.is_nan() {
        if v.is_sign_negative() { "-nan" } else { "nan" }.to_string()
    } else if v.is_infinite() {
        if v < 0.0 { "-inf" } else { "inf" }.to_string()
    } else {
        format!("{:.*}", prec, v as f64)
    };
    pad_left(&s, width)
}

/// The value summary of a tensor whose bytes are `data` (starting at the tensor's first byte)
/// laid out by `nb`, showing `n` items at each end of every dimension.
pub fn values_block(
    data: &[u8],
    ty: Type,
    ne: &[i64; 4],
    nb: &[usize; 4],
    n: i64,
) -> Result<String, PrintError> {
    if !is_printable(ty) {
        return Err(PrintError::UnsupportedType(ty));
    }
    let at = |i0: i64, i1: i64, i2: i64, i3: i64| {
        let off =
            i3 as usize * nb[3] + i2 as usize * nb[2] + i1 as usize * nb[1] + i0 as usize * nb[0];
        get_float(data, ty, off)
    };
    // the sum runs over every element, in index order, in a float as llama.cpp's does
    let mut sum = 0.0f32;
    for i3 in 0..ne[3] {
        for i2 in 0..ne[2] {
            for i1 in 0..ne[1] {
                for i0 in 0..ne[0] {
                    sum += at(i0, i1, i2, i3)?;
                }
            }
        }
    }
    let mut s = String::new();
    for i3 in 0..ne[3] {
        s += "    [\n";
        let mut i2 = 0;
        while i2 < ne[2] {
            if i2 == n && ne[2] > 2 * n {
                s += "        ..., \n";
                i2 = ne[2] - n;
            }
            s += "        [\n";
            let mut i1 = 0;
            while i1 < ne[1] {
                if i1 == n && ne[1] > 2 * n {
                    s += "            ..., \n";
                    i1 = ne[1] - n;
                }
                s += "            [";
                let mut i0 = 0;
                while i0 < ne[0] {
                    if i0 == n && ne[0] > 2 * n {
                        s += "   ..., ";
                        i0 = ne[0] - n;
                    }
                    s += &c_float(at(i0, i1, i2, i3)?, 12, 4);
                    if i0 < ne[0] - 1 {
                        s += ", ";
                    }
                    i0 += 1;
                }
                s += "  ],\n";
                i1 += 1;
            }
            s += "        ],\n";
            i2 += 1;
        }
        s += "    ]\n";
        s += &format!("    sum = {}\n", c_float(sum, 0, 6));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn strides(ty: Type, ne: &[i64; 4]) -> [usize; 4] {
        ggml::tensor::contiguous_strides(ty, ne)
    }

    #[test]
    fn header_lines_match_the_reference_log() {
        assert_eq!(
            header_line(
                "embd",
                "f32",
                "GET_ROWS",
                Some(("token_embd.weight", &[256, 151936, 1, 1])),
                Some(("inp_tokens", &[1, 1, 1, 1])),
                &[256, 1, 1, 1]
            ),
            "common_debug_cb_eval:                     embd = (f32)   GET_ROWS(token_embd.weight{256, 151936, 1, 1}, inp_tokens{1, 1, 1, 1}}) = {256, 1, 1, 1}\n"
        );
        assert_eq!(
            header_line("norm-0", "f32", "RMS_NORM", Some(("embd", &[256, 1, 1, 1])), None, &[256, 1, 1, 1]),
            "common_debug_cb_eval:                   norm-0 = (f32)   RMS_NORM(embd{256, 1, 1, 1}, }) = {256, 1, 1, 1}\n"
        );
        // names longer than 24 and ops longer than 10 push the columns
        assert_eq!(
            header_line(
                "node_21",
                "f32",
                "FLASH_ATTN_EXT",
                Some(("Qcur-0 (view) (permuted)", &[32, 1, 8, 1])),
                Some(("cache_k_l0 (view) (permuted)", &[32, 256, 2, 1])),
                &[32, 8, 1, 1]
            ),
            "common_debug_cb_eval:                  node_21 = (f32) FLASH_ATTN_EXT(Qcur-0 (view) (permuted){32, 1, 8, 1}, cache_k_l0 (view) (permuted){32, 256, 2, 1}}) = {32, 8, 1, 1}\n"
        );
        assert_eq!(
            header_line(
                "cache_k_l0 (view) (permuted)",
                "f16",
                "PERMUTE",
                Some(("cache_k_l0 (view)", &[32, 2, 256, 1])),
                None,
                &[32, 256, 2, 1]
            ),
            "common_debug_cb_eval: cache_k_l0 (view) (permuted) = (f16)    PERMUTE(cache_k_l0 (view){32, 2, 256, 1}, }) = {32, 256, 2, 1}\n"
        );
    }

    #[test]
    fn one_row_with_ellipsis() {
        let v: Vec<f32> = (0..256).map(|i| i as f32 * 0.5 - 3.0).collect();
        let ne = [256, 1, 1, 1];
        let out =
            values_block(&f32_bytes(&v), Type::F32, &ne, &strides(Type::F32, &ne), 3).unwrap();
        let sum: f32 = v.iter().sum();
        assert_eq!(
            out,
            format!(
                "    [\n        [\n            [     -3.0000,      -2.5000,      -2.0000,    ...,     123.5000,     124.0000,     124.5000  ],\n        ],\n    ]\n    sum = {:.6}\n",
                sum
            )
        );
    }

    #[test]
    fn rows_and_planes_elide_the_middle() {
        // the shape of a permuted K cache view: {32, 256, 2, 1}
        let ne = [4, 8, 7, 1];
        let v: Vec<f32> = (0..4 * 8 * 7).map(|i| i as f32).collect();
        let out =
            values_block(&f32_bytes(&v), Type::F32, &ne, &strides(Type::F32, &ne), 3).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "    [");
        assert_eq!(lines[1], "        [");
        assert_eq!(
            lines[2],
            "            [      0.0000,       1.0000,       2.0000,       3.0000  ],"
        );
        assert_eq!(lines[5], "            ..., ");
        assert_eq!(
            lines[6],
            "            [     20.0000,      21.0000,      22.0000,      23.0000  ],"
        );
        // three planes, "...", the last three planes
        assert_eq!(lines.iter().filter(|l| **l == "        ..., ").count(), 1);
        assert_eq!(
            lines.iter().filter(|l| **l == "            ..., ").count(),
            6
        );
        assert_eq!(lines.iter().filter(|l| **l == "        [").count(), 6);
        assert!(out.ends_with(&format!(
            "    ]\n    sum = {:.6}\n",
            (0..224).sum::<i32>() as f32
        )));
    }

    #[test]
    fn strided_views_read_through_nb() {
        // a transposed 2x3 view of a 3x2 matrix
        let v = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let ne = [2, 3, 1, 1];
        let nb = [12, 4, 24, 24];
        let out = values_block(&f32_bytes(&v), Type::F32, &ne, &nb, 3).unwrap();
        assert!(out.contains(
            "[      1.0000,       4.0000  ],\n            [      2.0000,       5.0000  ],"
        ));
    }

    #[test]
    fn f16_i32_and_unsupported() {
        let h: Vec<u8> = [1.5f32, -0.25]
            .iter()
            .flat_map(|x| ggml::quants::fp32_to_fp16(*x).to_le_bytes())
            .collect();
        let ne = [2, 1, 1, 1];
        let out = values_block(&h, Type::F16, &ne, &strides(Type::F16, &ne), 3).unwrap();
        assert!(out.contains("[      1.5000,      -0.2500  ],"));
        assert!(out.contains("sum = 1.250000"));
        let i: Vec<u8> = [7i32, -2].iter().flat_map(|x| x.to_le_bytes()).collect();
        let out = values_block(&i, Type::I32, &ne, &strides(Type::I32, &ne), 3).unwrap();
        assert!(out.contains("sum = 5.000000"));
        assert_eq!(
            values_block(&[], Type::Q8_0, &[32, 1, 1, 1], &[34, 34, 34, 34], 3),
            Err(PrintError::UnsupportedType(Type::Q8_0))
        );
        assert_eq!(
            values_block(&[0; 4], Type::F32, &ne, &strides(Type::F32, &ne), 3),
            Err(PrintError::OutOfBounds)
        );
    }

    #[test]
    fn c_spellings() {
        assert_eq!(c_float(f32::NAN, 12, 4), "         nan");
        assert_eq!(c_float(f32::NEG_INFINITY, 0, 6), "-inf");
        assert_eq!(c_float(18.896832, 0, 6), "18.896832");
    }
}
