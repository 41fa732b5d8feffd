//! The five output formats of llama-bench. Each printer turns the header, one result and the
//! footer into text; the caller writes it out and flushes after every result, so a long run shows
//! its rows as they finish.

use crate::cfmt::{fmt_g, pad};
use crate::params::{CmdParams, OutputFormat};
use crate::record::{field_type, FieldType, TestRecord, FIELDS};

pub trait Printer {
    fn header(&mut self, _params: &CmdParams, _backend: &str) -> String {
        String::new()
    }
    fn test(&mut self, t: &TestRecord) -> String;
    fn footer(&mut self) -> String {
        String::new()
    }
}

pub fn create(
    format: OutputFormat,
    build_commit: &str,
    build_number: i64,
) -> Option<Box<dyn Printer>> {
    match format {
        OutputFormat::None => None,
        OutputFormat::Csv => Some(Box::new(Csv)),
        OutputFormat::Json => Some(Box::new(Json { first: true })),
        OutputFormat::Jsonl => Some(Box::new(Jsonl)),
        OutputFormat::Md => Some(Box::new(Markdown {
            fields: vec![],
            build_commit: build_commit.to_string(),
            build_number,
        })),
        OutputFormat::Sql => Some(Box::new(Sql)),
    }
}

fn field_names() -> Vec<&'static str> {
    FIELDS.iter().map(|(n, _)| *n).collect()
}

pub struct Csv;

fn escape_csv(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

impl Printer for Csv {
    fn header(&mut self, _params: &CmdParams, _backend: &str) -> String {
        format!("{}\n", field_names().join(","))
    }
    fn test(&mut self, t: &TestRecord) -> String {
        let v: Vec<String> = t.values().iter().map(|s| escape_csv(s)).collect();
        format!("{}\n", v.join(","))
    }
}

fn escape_json(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out += "\\\"",
            '\\' => out += "\\\\",
            c if (c as u32) <= 0x1f => out += &format!("\\u{:04x}", c as u32),
            c => out.push(c),
        }
    }
    out
}

fn json_value(field: &str, value: &str) -> String {
    match field_type(field) {
        FieldType::String => format!("\"{}\"", escape_json(value)),
        FieldType::Bool => (if value == "0" { "false" } else { "true" }).to_string(),
        FieldType::Int | FieldType::Float => value.to_string(),
    }
}

fn samples_ns(t: &TestRecord) -> String {
    t.samples_ns
        .iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `std::ostream << double`: six significant digits.
fn samples_ts(t: &TestRecord) -> String {
    t.get_ts()
        .iter()
        .map(|x| fmt_g(*x, 6))
        .collect::<Vec<_>>()
        .join(", ")
}

pub struct Json {
    first: bool,
}

impl Printer for Json {
    fn header(&mut self, _params: &CmdParams, _backend: &str) -> String {
        "[\n".into()
    }
    fn test(&mut self, t: &TestRecord) -> String {
        let mut s = String::new();
        if !self.first {
            s += ",\n";
        }
        self.first = false;
        s += "  {\n";
        for ((name, _), value) in FIELDS.iter().zip(t.values()) {
            s += &format!("    \"{}\": {},\n", name, json_value(name, &value));
        }
        s += &format!("    \"samples_ns\": [ {} ],\n", samples_ns(t));
        s += &format!("    \"samples_ts\": [ {} ]\n", samples_ts(t));
        s += "  }";
        s
    }
    fn footer(&mut self) -> String {
        "\n]\n".into()
    }
}

pub struct Jsonl;

impl Printer for Jsonl {
    fn test(&mut self, t: &TestRecord) -> String {
        let mut s = String::from("{");
        for ((name, _), value) in FIELDS.iter().zip(t.values()) {
            s += &format!("\"{}\": {}, ", name, json_value(name, &value));
        }
        s += &format!("\"samples_ns\": [ {} ],", samples_ns(t));
        s += &format!("\"samples_ts\": [ {} ]", samples_ts(t));
        s += "}\n";
        s
    }
}

pub struct Sql;

fn sql_type(field: &str) -> &'static str {
    match field_type(field) {
        FieldType::String => "TEXT",
        FieldType::Bool | FieldType::Int => "INTEGER",
        FieldType::Float => "REAL",
    }
}

impl Printer for Sql {
    fn header(&mut self, _params: &CmdParams, _backend: &str) -> String {
        let mut s = String::from("CREATE TABLE IF NOT EXISTS llama_bench (\n");
        let names = field_names();
        for (i, name) in names.iter().enumerate() {
            let comma = if i + 1 < names.len() { "," } else { "" };
            s += &format!("  {} {}{}\n", name, sql_type(name), comma);
        }
        s += ");\n\n";
        s
    }
    fn test(&mut self, t: &TestRecord) -> String {
        // llama.cpp pastes values between quotes unescaped; doubling the quotes keeps a value
        // with an apostrophe (a path, a CPU name) loadable without changing any other value
        let values: Vec<String> = t
            .values()
            .iter()
            .map(|v| format!("'{}'", v.replace('\'', "''")))
            .collect();
        format!(
            "INSERT INTO llama_bench ({}) VALUES ({});\n",
            field_names().join(", "),
            values.join(", ")
        )
    }
}

pub struct Markdown {
    fields: Vec<&'static str>,
    build_commit: String,
    build_number: i64,
}

fn md_width(field: &str) -> i32 {
    match field {
        "model" => -30,
        "t/s" => 20,
        "size" | "params" => 10,
        "n_gpu_layers" => 3,
        "n_threads" | "n_batch" => 7,
        "n_ubatch" => 8,
        "type_k" | "type_v" | "split_mode" => 6,
        "load_mode" => 10,
        "flash_attn" => 3,
        "devices" => -12,
        "test" => 15,
        "no_op_offload" | "no_host" => 4,
        "repack" => 3,
        _ => {
            let w = (field.len() as i32).max(10);
            if field_type(field) == FieldType::String {
                -w
            } else {
                w
            }
        }
    }
}

fn md_name(field: &str) -> &str {
    match field {
        "n_gpu_layers" => "ngl",
        "split_mode" => "sm",
        "n_threads" => "threads",
        "no_kv_offload" => "nkvo",
        "flash_attn" => "fa",
        "load_mode" => "lm",
        "embeddings" => "embd",
        "no_op_offload" => "nopo",
        "no_host" => "noh",
        "repack" => "rpk",
        "devices" => "dev",
        "tensor_split" => "ts",
        "tensor_buft_overrides" => "ot",
        "fit_target" => "fitt",
        "fit_min_ctx" => "fitc",
        f => f,
    }
}

/// The optional columns: a parameter gets one when it has several values or differs from its
/// default (llama-bench's rule).
fn md_fields(p: &CmdParams, backend: &str) -> Vec<&'static str> {
    let d = CmdParams::defaults();
    let is_cpu = ["CPU", "BLAS", "ZenDNN"]
        .iter()
        .any(|b| backend.contains(b));
    let mut f = vec!["model", "size", "params", "backend"];
    if !is_cpu {
        f.push("n_gpu_layers");
    }
    macro_rules! opt {
        ($field:ident, $name:expr) => {
            if p.$field.len() > 1 || p.$field != d.$field {
                f.push($name);
            }
        };
    }
    opt!(n_cpu_moe, "n_cpu_moe");
    if p.n_threads.len() > 1 || p.n_threads != d.n_threads || is_cpu {
        f.push("n_threads");
    }
    opt!(cpu_mask, "cpu_mask");
    opt!(cpu_strict, "cpu_strict");
    opt!(poll, "poll");
    opt!(n_batch, "n_batch");
    opt!(n_ubatch, "n_ubatch");
    opt!(type_k, "type_k");
    opt!(type_v, "type_v");
    opt!(main_gpu, "main_gpu");
    opt!(split_mode, "split_mode");
    opt!(no_kv_offload, "no_kv_offload");
    opt!(flash_attn, "flash_attn");
    opt!(devices, "devices");
    opt!(tensor_split, "tensor_split");
    opt!(tensor_buft_overrides, "tensor_buft_overrides");
    opt!(load_mode, "load_mode");
    opt!(lazy_mode, "lazy_mode");
    opt!(embeddings, "embeddings");
    opt!(no_op_offload, "no_op_offload");
    opt!(no_host, "no_host");
    opt!(repack, "repack");
    opt!(fit_target, "fit_target");
    opt!(fit_min_ctx, "fit_min_ctx");
    f.push("test");
    f.push("t/s");
    f
}

/// `%.2f MiB` below 1 GiB, else `%.2f GiB`.
pub fn size_str(bytes: u64) -> String {
    if bytes < 1024 * 1024 * 1024 {
        format!("{:.2} MiB", bytes as f64 / 1024.0 / 1024.0)
    } else {
        format!("{:.2} GiB", bytes as f64 / 1024.0 / 1024.0 / 1024.0)
    }
}

/// `%.2f M` below a billion, else `%.2f B`.
pub fn params_str(n: u64) -> String {
    if n < 1_000_000_000 {
        format!("{:.2} M", n as f64 / 1e6)
    } else {
        format!("{:.2} B", n as f64 / 1e9)
    }
}

impl Printer for Markdown {
    fn header(&mut self, params: &CmdParams, backend: &str) -> String {
        self.fields = md_fields(params, backend);
        let mut s = String::from("|");
        for f in &self.fields {
            s += &format!(" {} |", pad(md_name(f), md_width(f)));
        }
        s += "\n|";
        for f in &self.fields {
            let w = md_width(f);
            s += &format!(
                " {}{} |",
                "-".repeat(w.unsigned_abs() as usize - 1),
                if w > 0 { ":" } else { "-" }
            );
        }
        s += "\n";
        s
    }

    fn test(&mut self, t: &TestRecord) -> String {
        let mut s = String::from("|");
        for f in &self.fields {
            let value = match *f {
                "model" => t.model_type.clone(),
                "size" => size_str(t.model_size),
                "params" => params_str(t.model_n_params),
                "backend" => t.machine.backends.clone(),
                "test" => t.test_name(),
                "t/s" => format!("{:.2} ± {:.2}", t.avg_ts(), t.stdev_ts()),
                other => t.value(other).unwrap_or_default(),
            };
            // the ± takes two bytes of a byte-counted width
            let width = md_width(f) + i32::from(*f == "t/s");
            s += &format!(" {} |", pad(&value, width));
        }
        s += "\n";
        s
    }

    fn footer(&mut self) -> String {
        format!("\nbuild: {} ({})\n", self.build_commit, self.build_number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::sample;

    fn render(format: OutputFormat, params: &CmdParams, tests: &[TestRecord]) -> String {
        let mut p = create(format, "abc1234", 42).unwrap();
        let mut s = p.header(params, "CPU");
        for t in tests {
            s += &p.test(t);
        }
        s += &p.footer();
        s
    }

    fn two() -> Vec<TestRecord> {
        let a = sample();
        let mut b = sample();
        b.n_prompt = 0;
        b.n_gen = 128;
        b.samples_ns = vec![1_000_000_000, 1_100_000_000];
        b.model_filename = "it's \"quoted\".gguf".into();
        vec![a, b]
    }

    #[test]
    fn markdown_table() {
        let mut params = CmdParams::defaults();
        params.n_threads = vec![1, 2];
        let out = render(OutputFormat::Md, &params, &two()[..1]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "| model                          |       size |     params | backend    | threads |            test |                  t/s |"
        );
        assert_eq!(
            lines[1],
            "| ------------------------------ | ---------: | ---------: | ---------- | ------: | --------------: | -------------------: |"
        );
        let t = &two()[0];
        let ts = format!("{:.2} ± {:.2}", t.avg_ts(), t.stdev_ts());
        assert_eq!(
            lines[2],
            format!(
                "| llama ?B all F32               | 307.51 MiB |    80.61 M | CPU        |       2 |           pp512 | {} |",
                pad(&ts, 21)
            )
        );
        assert_eq!(lines[3], "");
        assert_eq!(lines[4], "build: abc1234 (42)");
        // every row is as wide on screen as the header
        assert_eq!(lines[0].chars().count(), lines[2].chars().count());
    }

    #[test]
    fn markdown_optional_columns() {
        let mut p = CmdParams::defaults();
        p.n_ubatch = vec![128];
        p.flash_attn = vec![
            crate::params::FlashAttn::Enabled,
            crate::params::FlashAttn::Disabled,
        ];
        let f = md_fields(&p, "CPU");
        assert_eq!(
            f,
            vec![
                "model",
                "size",
                "params",
                "backend",
                "n_threads",
                "n_ubatch",
                "flash_attn",
                "test",
                "t/s"
            ]
        );
        let g = md_fields(&CmdParams::defaults(), "CUDA");
        assert_eq!(
            g,
            vec![
                "model",
                "size",
                "params",
                "backend",
                "n_gpu_layers",
                "test",
                "t/s"
            ]
        );
    }

    #[test]
    fn sizes() {
        assert_eq!(size_str(322_443_264), "307.51 MiB");
        assert_eq!(size_str(2_201_170_000), "2.05 GiB");
        assert_eq!(params_str(80_609_024), "80.61 M");
        assert_eq!(params_str(1_100_048_384), "1.10 B");
    }

    #[test]
    fn csv_quotes_every_value() {
        let out = render(OutputFormat::Csv, &CmdParams::defaults(), &two());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("build_commit,build_number,cpu_info,"));
        assert!(lines[0].ends_with("avg_ns,stddev_ns,avg_ts,stddev_ts"));
        assert!(lines[1].starts_with("\"abc1234\",\"42\",\"AMD EPYC \"\"Zen\"\" 4\","));
        assert!(lines[2].contains("\"it's \"\"quoted\"\".gguf\""));
    }

    #[test]
    fn json_parses() {
        let out = render(OutputFormat::Json, &CmdParams::defaults(), &two());
        let v: serde_json::Value = serde_json::from_str(&out).expect("valid json");
        let arr = v.as_array().unwrap();
        assert_eq!(arr.len(), 2);
        let o = arr[1].as_object().unwrap();
        assert_eq!(o.len(), FIELDS.len() + 2);
        assert_eq!(o["model_filename"], "it's \"quoted\".gguf");
        assert_eq!(o["cpu_strict"], false);
        assert_eq!(o["repack"], true);
        assert_eq!(o["n_gen"], 128);
        assert_eq!(o["flash_attn"], -1);
        assert_eq!(o["samples_ns"][1], 1_100_000_000u64);
        assert!((o["samples_ts"][0].as_f64().unwrap() - 128.0).abs() < 1e-9);
        assert!((o["avg_ts"].as_f64().unwrap() - (128.0 + 128.0 / 1.1) / 2.0).abs() < 1e-5);
        let keys: Vec<&String> = o.keys().collect();
        assert!(!keys.is_empty());
        assert!(out.starts_with("[\n  {\n    \"build_commit\": \"abc1234\",\n"));
        assert!(out.ends_with("  }\n]\n"));
    }

    #[test]
    fn jsonl_parses_line_by_line() {
        let out = render(OutputFormat::Jsonl, &CmdParams::defaults(), &two());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2);
        for l in lines {
            let v: serde_json::Value = serde_json::from_str(l).expect("valid json line");
            assert_eq!(v["build_number"], 42);
        }
    }

    #[test]
    fn json_escapes_control_characters() {
        assert_eq!(escape_json("a\"b\\c\n"), "a\\\"b\\\\c\\u000a");
    }

    #[test]
    fn sql_text() {
        let out = render(OutputFormat::Sql, &CmdParams::defaults(), &two());
        assert!(out.starts_with("CREATE TABLE IF NOT EXISTS llama_bench (\n  build_commit TEXT,\n  build_number INTEGER,\n"));
        assert!(out.contains("  avg_ts REAL,\n  stddev_ts REAL\n);\n\n"));
        assert_eq!(
            out.matches("INSERT INTO llama_bench (build_commit, build_number,")
                .count(),
            2
        );
    }

    /// The sql output must load into sqlite3 (the command-line shell, when installed).
    #[test]
    fn sql_loads_into_sqlite3() {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let out = render(OutputFormat::Sql, &CmdParams::defaults(), &two());
        let Some(sqlite3) = test_fixtures::sqlite3_or_skip() else {
            return;
        };
        let mut child = Command::new(sqlite3)
            .arg(":memory:")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run sqlite3");
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(out.as_bytes()).unwrap();
        stdin.write_all(b"SELECT count(*), sum(n_gen), (SELECT model_filename FROM llama_bench WHERE n_gen = 128) FROM llama_bench;\n").unwrap();
        drop(stdin);
        let o = child.wait_with_output().unwrap();
        assert!(
            o.status.success() && o.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            "2|128|it's \"quoted\".gguf"
        );
    }
}
