//! How llama.cpp prints GGUF metadata, so that our tools print the same lines: the loader's KV
//! dump (`gguf_kv_to_str` and the `- kv %3d: %42s %-16s = %s` line), llama_ftype names, and
//! print_info's parameter count and file size.

use crate::value::{Value, ValueRef, ValueType};

/// Longest value the loader dump prints before cutting it to 37 bytes and "...".
pub const MAX_VALUE_LEN: usize = 40;

/// C's `%f` (std::to_string of a float or double): six decimals, `inf`/`nan` spelled as glibc.
pub fn c_float(x: f64) -> String {
    if x.is_nan() {
        if x.is_sign_negative() { "-nan" } else { "nan" }.to_string()
    } else if x.is_infinite() {
        if x < 0.0 { "-inf" } else { "inf" }.to_string()
    } else {
        format!("{x:.6}")
    }
}

/// A scalar as `gguf_data_to_str` writes it: strings raw, arrays as `???` (`kv_to_str` writes
/// a top-level array's elements).
pub fn scalar_to_str(v: ValueRef) -> String {
    match v {
        ValueRef::U8(x) => x.to_string(),
        ValueRef::I8(x) => x.to_string(),
        ValueRef::U16(x) => x.to_string(),
        ValueRef::I16(x) => x.to_string(),
        ValueRef::U32(x) => x.to_string(),
        ValueRef::I32(x) => x.to_string(),
        ValueRef::U64(x) => x.to_string(),
        ValueRef::I64(x) => x.to_string(),
        ValueRef::F32(x) => c_float(x as f64),
        ValueRef::F64(x) => c_float(x),
        ValueRef::Bool(x) => if x { "true" } else { "false" }.to_string(),
        ValueRef::Str(s) => s.to_string(),
        ValueRef::Array(_) => "???".to_string(),
    }
}

/// `gguf_kv_to_str`: strings raw; arrays as `[a, b]` with string elements quoted and their `\`
/// and `"` escaped, nested arrays as `???`. Stops once the text is longer than `limit` bytes
/// (the caller truncates anyway), so huge vocabularies cost nothing.
pub fn kv_to_str(v: &Value, limit: Option<usize>) -> String {
    let Value::Array(a) = v else {
        return scalar_to_str(v.view());
    };
    let mut s = String::from("[");
    for (j, x) in a.iter().enumerate() {
        if limit.is_some_and(|l| s.len() > l) {
            return s;
        }
        match x {
            ValueRef::Str(e) => {
                s.push('"');
                s.push_str(&e.replace('\\', "\\\\").replace('"', "\\\""));
                s.push('"');
            }
            other => s.push_str(&scalar_to_str(other)),
        }
        if j + 1 < a.len() {
            s.push_str(", ");
        }
    }
    s.push(']');
    s
}

/// The type column of the dump: `u32`, or `arr[str,151936]` for arrays.
pub fn type_label(v: &Value) -> String {
    match v {
        Value::Array(a) => {
            format!(
                "{}[{},{}]",
                ValueType::Array.name(),
                a.elem_type().name(),
                a.len()
            )
        }
        other => other.value_type().name().to_string(),
    }
}

/// The value column as raw bytes: cut to 37 bytes plus "..." when over 40 bytes (llama.cpp
/// cuts bytes, even inside a UTF-8 sequence), then newlines shown as `\n`.
pub fn value_column(v: &Value, full: bool) -> Vec<u8> {
    let s = kv_to_str(v, if full { None } else { Some(MAX_VALUE_LEN) });
    let mut bytes = s.into_bytes();
    if !full && bytes.len() > MAX_VALUE_LEN {
        bytes.truncate(MAX_VALUE_LEN - 3);
        bytes.extend_from_slice(b"...");
    }
    let mut out = Vec::with_capacity(bytes.len());
    for b in bytes {
        if b == b'\n' {
            out.extend_from_slice(b"\\n");
        } else {
            out.push(b);
        }
    }
    out
}

fn pad_left(s: &[u8], width: usize) -> Vec<u8> {
    let mut v = vec![b' '; width.saturating_sub(s.len())];
    v.extend_from_slice(s);
    v
}

fn pad_right(s: &[u8], width: usize) -> Vec<u8> {
    let mut v = s.to_vec();
    v.resize(width.max(s.len()), b' ');
    v
}

/// One line of the loader's dump without prefix and newline, as bytes:
/// `- kv %3d: %42s %-16s = %s` (printf widths count bytes).
pub fn kv_line(index: usize, key: &str, v: &Value, full: bool) -> Vec<u8> {
    let mut line = format!("- kv {index:>3}: ").into_bytes();
    line.extend(pad_left(key.as_bytes(), 42));
    line.push(b' ');
    line.extend(pad_right(type_label(v).as_bytes(), 16));
    line.extend_from_slice(b" = ");
    line.extend(value_column(v, full));
    line
}

/// `kv_line` as text, with a byte cut inside a UTF-8 sequence shown as U+FFFD.
pub fn kv_line_string(index: usize, key: &str, v: &Value) -> String {
    String::from_utf8_lossy(&kv_line(index, key, v, false)).into_owned()
}

/// llama_ftype values (`general.file_type`).
pub const FTYPE_GUESSED: u32 = 1024;

/// `llama_model_ftype_name`: "all F32", "Q4_K - Medium", "F16 (guessed)", ...
pub fn ftype_name(ftype: u32) -> String {
    let name = match ftype & !FTYPE_GUESSED {
        0 => "all F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K - Medium",
        11 => "Q3_K - Small",
        12 => "Q3_K - Medium",
        13 => "Q3_K - Large",
        14 => "Q4_K - Small",
        15 => "Q4_K - Medium",
        16 => "Q5_K - Small",
        17 => "Q5_K - Medium",
        18 => "Q6_K",
        19 => "IQ2_XXS - 2.0625 bpw",
        20 => "IQ2_XS - 2.3125 bpw",
        21 => "Q2_K - Small",
        22 => "IQ3_XS - 3.3 bpw",
        23 => "IQ3_XXS - 3.0625 bpw",
        24 => "IQ1_S - 1.5625 bpw",
        25 => "IQ4_NL - 4.5 bpw",
        26 => "IQ3_S - 3.4375 bpw",
        27 => "IQ3_S mix - 3.66 bpw",
        28 => "IQ2_S - 2.5 bpw",
        29 => "IQ2_M - 2.7 bpw",
        30 => "IQ4_XS - 4.25 bpw",
        31 => "IQ1_M - 1.75 bpw",
        32 => "BF16",
        36 => "TQ1_0 - 1.69 bpw ternary",
        37 => "TQ2_0 - 2.06 bpw ternary",
        38 => "MXFP4 MoE",
        39 => "NVFP4",
        40 => "Q1_0",
        _ => "unknown, may not work",
    };
    if ftype & FTYPE_GUESSED != 0 {
        format!("{name} (guessed)")
    } else {
        name.to_string()
    }
}

/// The file type llama.cpp's loader assumes from the most common tensor type (ties go to the
/// type that reached the count first, walking tensors in name order), marked as guessed.
pub fn guess_ftype<'a>(tensors: impl IntoIterator<Item = (&'a str, ggml::Type)>) -> u32 {
    let mut sorted: Vec<(&str, ggml::Type)> = tensors.into_iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let mut counts = std::collections::HashMap::new();
    let (mut max, mut type_max) = (0u32, ggml::Type::F32);
    for (_, ty) in sorted {
        let c = counts.entry(ty).or_insert(0u32);
        *c += 1;
        if max < *c {
            max = *c;
            type_max = ty;
        }
    }
    ftype_of_type(type_max) | FTYPE_GUESSED
}

/// The ftype a file whose most common tensor type is `ty` is taken to have (unguessed).
pub fn ftype_of_type(ty: ggml::Type) -> u32 {
    use ggml::Type as T;
    match ty {
        T::F32 => 0,
        T::F16 => 1,
        T::Bf16 => 32,
        T::Q4_0 => 2,
        T::Q4_1 => 3,
        T::Q5_0 => 8,
        T::Q5_1 => 9,
        T::Q8_0 => 7,
        T::Q2K => 10,
        T::Q3K => 12,
        T::Q4K => 15,
        T::Q5K => 17,
        T::Q6K => 18,
        T::Iq4Nl => 25,
        _ => 0,
    }
}

/// print_info's parameter count: "80.61 M", "6.74 B".
pub fn format_params(n: u64) -> String {
    let n = n as f64;
    if n >= 1e12 {
        format!("{:.2} T", n * 1e-12)
    } else if n >= 1e9 {
        format!("{:.2} B", n * 1e-9)
    } else if n >= 1e6 {
        format!("{:.2} M", n * 1e-6)
    } else {
        format!("{:.2} K", n * 1e-3)
    }
}

/// print_info's file size: "307.51 MiB (32.00 BPW)" from the tensor bytes and elements.
pub fn format_file_size(n_bytes: u64, n_elements: u64) -> String {
    let bpw = n_bytes as f64 * 8.0 / n_elements as f64;
    let bpw = if bpw.is_finite() {
        format!("{bpw:.2}")
    } else {
        c_float(bpw).replace(".000000", "")
    };
    if n_bytes < 1 << 30 {
        format!("{:.2} MiB ({bpw} BPW)", n_bytes as f64 / 1024.0 / 1024.0)
    } else {
        format!(
            "{:.2} GiB ({bpw} BPW)",
            n_bytes as f64 / 1024.0 / 1024.0 / 1024.0
        )
    }
}

/// `llama_file_version_name`.
pub fn version_name(version: u32) -> &'static str {
    match version {
        1 => "GGUF V1 (support until nov 2023)",
        2 => "GGUF V2",
        3 => "GGUF V3 (latest)",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::Array;

    fn arr(t: ValueType, v: Vec<Value>) -> Value {
        Value::Array(Array::new(t, v).unwrap())
    }

    #[test]
    fn lines_match_the_loader_dump() {
        let line = |i, k: &str, v: Value| String::from_utf8(kv_line(i, k, &v, false)).unwrap();
        assert_eq!(
            line(0, "general.architecture", "llama".into()),
            "- kv   0:                       general.architecture str              = llama"
        );
        assert_eq!(
            line(8, "llama.rope.freq_base", Value::F32(500000.0)),
            "- kv   8:                       llama.rope.freq_base f32              = 500000.000000"
        );
        assert_eq!(
            line(
                9,
                "llama.attention.layer_norm_rms_epsilon",
                Value::F32(1e-5)
            ),
            "- kv   9:     llama.attention.layer_norm_rms_epsilon f32              = 0.000010"
        );
        let toks = arr(
            ValueType::Str,
            ["!", "\"", "#", "$", "%", "&", "'", "("]
                .map(Value::from)
                .to_vec(),
        );
        assert_eq!(
            line(14, "tokenizer.ggml.tokens", toks),
            "- kv  14:                      tokenizer.ggml.tokens arr[str,8]       = [\"!\", \"\\\"\", \"#\", \"$\", \"%\", \"&\", \"'\", ..."
        );
        let tmpl = "{% for message in messages %}{% if loop.first and message %}";
        assert_eq!(
            line(20, "tokenizer.chat_template", tmpl.into()),
            "- kv  20:                    tokenizer.chat_template str              = {% for message in messages %}{% if lo..."
        );
        assert_eq!(
            line(
                1,
                "k",
                arr(ValueType::Bool, vec![Value::Bool(true), Value::Bool(false)])
            ),
            format!("- kv   1: {:>42} arr[bool,2]      = [true, false]", "k")
        );
        assert_eq!(
            line(2, "k", "a\nb".into()),
            format!("- kv   2: {:>42} str              = a\\nb", "k")
        );
        let nested = arr(ValueType::Array, vec![arr(ValueType::U8, vec![])]);
        assert!(line(3, "k", nested).ends_with("arr[arr,1]       = [???]"));
    }

    #[test]
    fn cut_inside_utf8_keeps_bytes() {
        // 36 ASCII bytes then a 2-byte character: the cut at 37 splits it.
        let s = format!("{}ĠĠĠĠ", "x".repeat(36));
        let col = value_column(&Value::Str(s), false);
        assert_eq!(col.len(), 40);
        assert_eq!(&col[36..], &[0xC4, b'.', b'.', b'.']);
    }

    #[test]
    fn print_info_formats() {
        assert_eq!(format_params(80_611_584), "80.61 M");
        assert_eq!(format_params(6_738_415_616), "6.74 B");
        assert_eq!(format_params(1_000), "1.00 K");
        assert_eq!(
            format_file_size(80_611_584 * 4, 80_611_584),
            "307.51 MiB (32.00 BPW)"
        );
        assert_eq!(format_file_size(3 << 30, 1 << 30), "3.00 GiB (24.00 BPW)");
        assert_eq!(ftype_name(0), "all F32");
        assert_eq!(ftype_name(15), "Q4_K - Medium");
        assert_eq!(ftype_name(1 | FTYPE_GUESSED), "F16 (guessed)");
        assert_eq!(ftype_name(5), "unknown, may not work");
        let g = guess_ftype([
            ("a", ggml::Type::F32),
            ("b", ggml::Type::Q4K),
            ("c", ggml::Type::Q4K),
        ]);
        assert_eq!(g, 15 | FTYPE_GUESSED);
        assert_eq!(c_float(f64::INFINITY), "inf");
    }
}
