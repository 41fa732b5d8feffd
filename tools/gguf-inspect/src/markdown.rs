//! `--markdown`: the report gguf-py's gguf_dump.py writes with `--markdown`, character for
//! character (its key-value table with the three `GGUF.*` header fields first, the tensor
//! groups, the data-offset table and one table per group with bits per weight).

use std::path::Path;

use gguf::{Array, GgufFile, TensorInfo, ValueRef, ValueType};

/// GGUFValueType's names.
fn type_name(t: ValueType) -> &'static str {
    match t {
        ValueType::U8 => "UINT8",
        ValueType::I8 => "INT8",
        ValueType::U16 => "UINT16",
        ValueType::I16 => "INT16",
        ValueType::U32 => "UINT32",
        ValueType::I32 => "INT32",
        ValueType::F32 => "FLOAT32",
        ValueType::Bool => "BOOL",
        ValueType::Str => "STRING",
        ValueType::Array => "ARRAY",
        ValueType::U64 => "UINT64",
        ValueType::I64 => "INT64",
        ValueType::F64 => "FLOAT64",
    }
}

/// numpy's shortest float text in scientific form: `1e-05`, `1.000001e+06`.
fn sci(shortest_e: String) -> String {
    let (mant, exp) = shortest_e.split_once('e').unwrap_or((&shortest_e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mant}e{sign}{:02}", exp.unsigned_abs())
}

/// `str()` of a numpy float scalar: positional (with at least `.0`) when `1e-4 <= |x| < max`
/// (`max` is 1e6 for float32, 1e16 for float64) or zero, scientific otherwise.
fn np_float(x: f64, positional: String, shortest_e: String, max: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    let a = x.abs();
    if a == 0.0 || (1e-4..max).contains(&a) {
        if positional.contains('.') {
            positional
        } else {
            positional + ".0"
        }
    } else {
        sci(shortest_e)
    }
}

/// `str()` of the numpy scalar gguf-py reads for a value.
fn scalar(v: ValueRef) -> String {
    match v {
        ValueRef::U8(x) => x.to_string(),
        ValueRef::I8(x) => x.to_string(),
        ValueRef::U16(x) => x.to_string(),
        ValueRef::I16(x) => x.to_string(),
        ValueRef::U32(x) => x.to_string(),
        ValueRef::I32(x) => x.to_string(),
        ValueRef::U64(x) => x.to_string(),
        ValueRef::I64(x) => x.to_string(),
        ValueRef::F32(x) => np_float(x as f64, format!("{x}"), format!("{x:e}"), 1e6),
        ValueRef::F64(x) => np_float(x, format!("{x}"), format!("{x:e}"), 1e16),
        ValueRef::Bool(b) => if b { "True" } else { "False" }.into(),
        ValueRef::Str(s) => s.to_string(),
        ValueRef::Array(_) => String::new(),
    }
}

/// escape_markdown_inline_code: backticks one longer than the longest run inside.
fn inline_code(s: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in s.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let marker = "`".repeat(longest + 1);
    if s.starts_with('`') || s.ends_with('`') {
        format!("{marker} {s} {marker}")
    } else {
        format!("{marker}{s}{marker}")
    }
}

/// A string cut to its first and last `limit / 2` characters when longer than `limit`.
fn cut_string(s: &str, limit: usize) -> String {
    let n = s.chars().count();
    if n <= limit {
        return inline_code(s);
    }
    let head: String = s.chars().take(limit / 2).collect();
    let tail: String = s.chars().skip(n - limit / 2).collect();
    format!("{}...{}", inline_code(&head), inline_code(&tail))
}

fn array_value(a: &Array) -> String {
    let n = a.len();
    let mut shown = Vec::new();
    match a.elem_type() {
        ValueType::Str => {
            for i in 0..n.min(5) {
                if let Some(ValueRef::Str(s)) = a.get(i) {
                    shown.push(cut_string(s, 30));
                }
            }
        }
        // gguf_dump shows no elements of an array of arrays
        ValueType::Array => {}
        _ => {
            for i in 0..n.min(7) {
                if let Some(v) = a.get(i) {
                    shown.push(scalar(v));
                }
            }
        }
    }
    let more = if n > shown.len() { ", ..." } else { "" };
    format!("[ {}{more} ]", shown.join(", ").trim())
}

#[derive(Clone, Copy)]
enum Align {
    Left,
    Right,
}

/// markdown_table_with_alignment_support: each column as wide as its widest cell plus two.
fn table(header: &[(&str, Align)], rows: &[Vec<String>]) -> String {
    let len = |s: &str| s.chars().count();
    let widths: Vec<usize> = header
        .iter()
        .enumerate()
        .map(|(i, (h, _))| {
            let data = rows.iter().map(|r| len(&r[i])).max().unwrap_or(0) + 2;
            data.max(len(h) + 2)
        })
        .collect();
    let cell = |s: &str, w: usize, a: Align| {
        let pad = " ".repeat((w - 1).saturating_sub(len(s)));
        match a {
            Align::Right => format!("{pad}{s} "),
            Align::Left => format!(" {s}{pad}"),
        }
    };
    let mut out = String::new();
    let mut line = |cells: Vec<String>| {
        out.push('|');
        out.push_str(&cells.join("|"));
        out.push_str("|\n");
    };
    line(
        header
            .iter()
            .zip(&widths)
            .map(|((h, a), &w)| cell(h, w, *a))
            .collect(),
    );
    line(
        header
            .iter()
            .zip(&widths)
            .map(|((_, a), &w)| match a {
                Align::Right => "-".repeat(w - 1) + ":",
                Align::Left => ":".to_string() + &"-".repeat(w - 1),
            })
            .collect(),
    );
    for r in rows {
        line(
            r.iter()
                .zip(header.iter().zip(&widths))
                .map(|(s, ((_, a), &w))| cell(s, w, *a))
                .collect(),
        );
    }
    out
}

/// element_count_rounded_notation: `~81M` (Python's round: halves to even).
fn rounded(count: u64) -> String {
    let c = count as f64;
    let (scaled, suffix) = if c > 1e15 {
        (c * 1e-15, "Q")
    } else if c > 1e12 {
        (c * 1e-12, "T")
    } else if c > 1e9 {
        (c * 1e-9, "B")
    } else if c > 1e6 {
        (c * 1e-6, "M")
    } else if c > 1e3 {
        (c * 1e-3, "K")
    } else {
        return count.to_string();
    };
    format!("~{}{suffix}", scaled.round_ties_even() as u64)
}

/// Python's str.title(): a cased character after a cased one is lowered, others raised.
fn title(s: &str) -> String {
    let mut out = String::new();
    let mut prev_cased = false;
    for c in s.chars() {
        let cased = c.is_lowercase() || c.is_uppercase();
        if cased && prev_cased {
            out.extend(c.to_lowercase());
        } else if cased {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
        prev_cased = cased;
    }
    out
}

/// translate_tensor_name: the standard abbreviations spelt out, every word title-cased.
fn translate(name: &str) -> String {
    let expand = |w: &str| -> Option<&'static str> {
        Some(match w {
            "token_embd" => "Token embedding",
            "pos_embd" => "Position embedding",
            "output_norm" => "Output normalization",
            "output" => "Output",
            "attn_norm" | "attn_norm_2" => "Attention normalization",
            "attn_qkv" => "Attention query-key-value",
            "attn_q" => "Attention query",
            "attn_k" => "Attention key",
            "attn_v" => "Attention value",
            "attn_output" => "Attention output",
            "ffn_norm" => "Feed-forward network normalization",
            "ffn_up" => "Feed-forward network \"up\"",
            "ffn_gate" => "Feed-forward network \"gate\"",
            "ffn_down" => "Feed-forward network \"down\"",
            "ffn_gate_inp" => {
                "Expert-routing layer for the Feed-forward network in Mixture of Expert models"
            }
            "ffn_gate_exp" => {
                "Feed-forward network \"gate\" layer per expert in Mixture of Expert models"
            }
            "ffn_down_exp" => {
                "Feed-forward network \"down\" layer per expert in Mixture of Expert models"
            }
            "ffn_up_exp" => {
                "Feed-forward network \"up\" layer per expert in Mixture of Expert models"
            }
            "ssm_in" => "State space model input projections",
            "ssm_conv1d" => "State space model rolling/shift",
            "ssm_x" => "State space model selective parametrization",
            "ssm_a" => "State space model state compression",
            "ssm_d" => "State space model skip connection",
            "ssm_dt" => "State space model time step",
            "ssm_out" => "State space model output projection",
            "blk" => "Block",
            "enc" => "Encoder",
            "dec" => "Decoder",
            _ => return None,
        })
    };
    name.split('.')
        .map(|w| match expand(&w.trim().to_lowercase()) {
            Some(e) => title(e),
            None => title(w),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The group gguf_dump files a tensor under: `base`, `blk.N`, `enc`/`dec` or `enc.blk.N`.
fn group_of(name: &str) -> String {
    let c: Vec<&str> = name.split('.').collect();
    match c.as_slice() {
        ["blk", n, ..] => format!("blk.{n}"),
        [ed @ ("enc" | "dec"), "blk", n, ..] => format!("{ed}.blk.{n}"),
        [ed @ ("enc" | "dec"), ..] => ed.to_string(),
        _ => "base".into(),
    }
}

fn n_elements(t: &TensorInfo) -> u64 {
    t.ne.iter().product()
}

/// The shape as gguf-py holds it (ggml order, `n_dims` entries) padded with 1s to four.
fn dims(t: &TensorInfo) -> Vec<u64> {
    let n = (t.n_dims as usize).min(4);
    let mut d: Vec<u64> = t.ne[..n].to_vec();
    d.resize(4, 1);
    d
}

fn kv_table(file: &GgufFile) -> (usize, String) {
    use Align::{Left, Right};
    let header: [(String, ValueRef, ValueType); 3] = [
        (
            "GGUF.version".into(),
            ValueRef::U32(file.version),
            ValueType::U32,
        ),
        (
            "GGUF.tensor_count".into(),
            ValueRef::U64(file.tensors.len() as u64),
            ValueType::U64,
        ),
        (
            "GGUF.kv_count".into(),
            ValueRef::U64(file.kv.len() as u64),
            ValueType::U64,
        ),
    ];
    let fields = header.into_iter().chain(
        file.kv
            .iter()
            .map(|(k, v)| (k.clone(), v.view(), v.value_type())),
    );
    let mut rows = Vec::new();
    for (n, (key, v, ty)) in fields.enumerate() {
        let (pretty, count, value) = match v {
            ValueRef::Array(a) => (
                format!("[{}]", type_name(a.elem_type())),
                a.len(),
                array_value(a),
            ),
            ValueRef::Str(s) => (type_name(ty).to_string(), 1, cut_string(s, 60)),
            other => (type_name(ty).to_string(), 1, scalar(other)),
        };
        rows.push(vec![
            (n + 1).to_string(),
            pretty,
            count.to_string(),
            key,
            value,
        ]);
    }
    let t = table(
        &[
            ("POS", Right),
            ("TYPE", Left),
            ("Count", Right),
            ("Key", Left),
            ("Value", Left),
        ],
        &rows,
    );
    (rows.len(), t)
}

/// The tensor sections; returns (text, bytes, elements) for the closing total.
fn tensor_sections(file: &GgufFile) -> (String, u64, u64) {
    use Align::{Left, Right};
    let mut order: Vec<String> = Vec::new();
    let mut groups: Vec<Vec<(usize, &TensorInfo)>> = Vec::new();
    for (i, t) in file.tensors.iter().enumerate() {
        let g = group_of(&t.name);
        match order.iter().position(|o| *o == g) {
            Some(p) => groups[p].push((i, t)),
            None => {
                order.push(g);
                groups.push(vec![(i, t)]);
            }
        }
    }
    let total: u64 = file.tensors.iter().map(n_elements).sum();
    let mut md = format!(
        "## Tensors Overview {} Elements\n\nTotal number of elements in all tensors: {total} Elements\n\n",
        rounded(total)
    );
    for (name, ts) in order.iter().zip(&groups) {
        let ge: u64 = ts.iter().map(|(_, t)| n_elements(t)).sum();
        md += &format!(
            "- [{} Tensor Group - {} Elements](#{})\n",
            translate(name),
            rounded(ge),
            name.replace('.', "_")
        );
    }
    md += "\n### Tensor Data Offset\n\nThis table contains the offset and data segment relative to start of file\n\n";
    let hex = |v: u64| format!("{:>16}", format!("{v:#x}"));
    let rows: Vec<Vec<String>> = file
        .tensors
        .iter()
        .enumerate()
        .map(|(i, t)| {
            vec![
                i.to_string(),
                t.name.clone(),
                hex(file.data_offset + t.offset),
                hex(t.size),
            ]
        })
        .collect();
    md += &table(
        &[
            ("T_ID", Right),
            ("Tensor Layer Name", Left),
            ("Data Offset (B)", Right),
            ("Data Size (B)", Right),
        ],
        &rows,
    );
    md += "\n";

    let (mut all_bytes, mut all_elements) = (0u64, 0u64);
    for (name, ts) in order.iter().zip(&groups) {
        let ge: u64 = ts.iter().map(|(_, t)| n_elements(t)).sum();
        let pct = ge as f64 / total as f64 * 100.0;
        md += &format!(
            "### <a name=\"{}\">{} Tensor Group : {} Elements</a>\n\n",
            name.replace('.', "_"),
            translate(name),
            rounded(ge)
        );
        let est_w = ts
            .iter()
            .map(|(_, t)| rounded(n_elements(t)).len())
            .fold(1, usize::max);
        let count_w = ts
            .iter()
            .map(|(_, t)| n_elements(t).to_string().len())
            .fold(1, usize::max);
        let mut dim_w = [1usize; 4];
        for (_, t) in ts {
            for (i, d) in dims(t).iter().enumerate() {
                dim_w[i] = dim_w[i].max(d.to_string().len());
            }
        }
        let (mut gb, mut gn) = (0u64, 0u64);
        let mut rows = Vec::new();
        for (i, t) in ts {
            let ne = n_elements(t);
            let human = translate(&t.name.replace(".weight", ".(W)").replace(".bias", ".(B)"));
            let shape = dims(t)
                .iter()
                .enumerate()
                .map(|(i, d)| format!("{:>w$}", d, w = dim_w[i]))
                .collect::<Vec<_>>()
                .join(" x ");
            let est = format!("({:>w$})", rounded(ne), w = est_w);
            let bpw = if ne > 0 {
                format!("{:.4}", (t.size * 8) as f64 / ne as f64)
            } else {
                "nan".into()
            };
            rows.push(vec![
                i.to_string(),
                t.name.clone(),
                human,
                format!("{est} {ne:>count_w$}"),
                shape,
                t.ty.name().to_uppercase(),
                bpw,
            ]);
            gb += t.size;
            gn += ne;
        }
        md += &table(
            &[
                ("T_ID", Right),
                ("Tensor Layer Name", Left),
                ("Human Friendly Tensor Layer Name", Left),
                ("Elements", Left),
                ("Shape", Left),
                ("Type", Left),
                ("BPW", Right),
            ],
            &rows,
        );
        md += &format!(
            "\n- Total elements in {name}: ({:>4}) {ge}\n- Percentage of total elements: {pct:.2}%\n",
            rounded(ge)
        );
        if gn > 0 {
            md += &format!(
                "- Bits per Weight (BPW) for {name}: {:.4} bits\n",
                (gb * 8) as f64 / gn as f64
            );
        } else {
            md += &format!("- Bits per Weight (BPW) for {name}: undefined (no elements)\n");
        }
        md += "\n\n";
        all_bytes += gb;
        all_elements += gn;
    }
    (md, all_bytes, all_elements)
}

/// The whole `--markdown` report, `path` as given on the command line.
pub fn dump(file: &GgufFile, path: &Path, tensors: bool) -> String {
    let shown = path.display().to_string();
    let (n_fields, kv) = kv_table(file);
    let mut md = format!(
        "# {shown} - GGUF Internal File Dump\n\n- Endian: LITTLE endian\n\n## Key Value Metadata Store\n\nThere are {n_fields} key-value pairs in this file\n\n"
    );
    md += &kv;
    md += "\n";
    let (mut bytes, mut elements) = (0, 0);
    if tensors {
        let (t, b, e) = tensor_sections(file);
        md += &t;
        bytes = b;
        elements = e;
    }
    let base = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    if elements > 0 {
        md += &format!(
            "Total BPW for {base}: {:.4} bits",
            (bytes * 8) as f64 / elements as f64
        );
    } else {
        md += &format!("Total BPW for {base}: undefined (no elements)");
    }
    md.push('\n');
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_numpy_prints_them() {
        let f = |x: f32| scalar(ValueRef::F32(x));
        assert_eq!(f(1e-5), "1e-05");
        assert_eq!(f(500000.0), "500000.0");
        assert_eq!(f(1e6), "1e+06");
        assert_eq!(f(1000001.0), "1.000001e+06");
        assert_eq!(f(0.0001), "1e-04");
        assert_eq!(f(-0.0), "-0.0");
        assert_eq!(scalar(ValueRef::F64(123456789.0)), "123456789.0");
        assert_eq!(scalar(ValueRef::Bool(true)), "True");
    }

    #[test]
    fn names_and_counts_as_gguf_dump() {
        assert_eq!(rounded(2500), "~2K");
        assert_eq!(rounded(3500), "~4K");
        assert_eq!(rounded(999), "999");
        assert_eq!(
            translate("blk.0.ffn_up.(W)"),
            "Block 0 Feed-Forward Network \"Up\" (W)"
        );
        assert_eq!(translate("blk.1.attn_q_norm"), "Block 1 Attn_Q_Norm");
        assert_eq!(inline_code("a`b"), "``a`b``");
        assert_eq!(inline_code("`x"), "`` `x ``");
    }
}
