//! The text report, and `--key` output.

use std::path::Path;

use comfy_table::{presets, CellAlignment, Table};
use gguf::display::{self, kv_line};
use gguf::{GgufFile, Value, ValueRef};

/// Totals over the tensors, as llama.cpp's loader counts them.
pub struct Totals {
    pub n_elements: u64,
    pub n_bytes: u64,
    /// (type, count) in ggml type id order.
    pub per_type: Vec<(ggml::Type, u32)>,
    pub ftype: u32,
}

pub fn totals(file: &GgufFile) -> Totals {
    let n_elements = file.tensors.iter().map(|t| t.n_elements()).sum();
    let n_bytes = file.tensors.iter().map(|t| t.size).sum();
    let mut per_type: Vec<(ggml::Type, u32)> = Vec::new();
    for t in &file.tensors {
        match per_type.iter_mut().find(|(ty, _)| *ty == t.ty) {
            Some((_, n)) => *n += 1,
            None => per_type.push((t.ty, 1)),
        }
    }
    per_type.sort_by_key(|(ty, _)| ty.id());
    let guessed = display::guess_ftype(file.tensors.iter().map(|t| (t.name.as_str(), t.ty)));
    let ftype = file
        .get("general.file_type")
        .and_then(Value::as_u64)
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(guessed);
    Totals {
        n_elements,
        n_bytes,
        per_type,
        ftype,
    }
}

fn push_line(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
    out.push(b'\n');
}

pub fn text(file: &GgufFile, path: &Path, full: bool, with_tensors: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let t = totals(file);
    let version = display::version_name(file.version);
    push_line(&mut out, &format!("file:         {}", path.display()));
    push_line(
        &mut out,
        &format!("version:      {} ({version})", file.version),
    );
    push_line(&mut out, &format!("tensors:      {}", file.tensors.len()));
    push_line(&mut out, &format!("kv pairs:     {}", file.kv.len()));
    push_line(&mut out, &format!("alignment:    {}", file.alignment));
    push_line(&mut out, &format!("data offset:  {}", file.data_offset));
    push_line(&mut out, &format!("file size:    {} bytes", file.file_size));
    out.push(b'\n');

    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    push_line(
        &mut out,
        &format!(
            "llama_model_loader: loaded meta data with {} key-value pairs and {} tensors from {} (version {version})",
            file.kv.len(),
            file.tensors.len(),
            name
        ),
    );
    for (i, (key, value)) in file.kv.iter().enumerate() {
        out.extend_from_slice(b"llama_model_loader: ");
        out.extend(kv_line(i, key, value, full));
        out.push(b'\n');
    }
    for (ty, n) in &t.per_type {
        push_line(
            &mut out,
            &format!(
                "llama_model_loader: - type {:>4}: {n:>4} tensors",
                ty.name()
            ),
        );
    }

    if with_tensors && !file.tensors.is_empty() {
        out.push(b'\n');
        push_line(&mut out, &tensor_table(file).to_string());
    }

    out.push(b'\n');
    push_line(&mut out, &format!("print_info: file format = {version}"));
    push_line(
        &mut out,
        &format!("print_info: file type   = {}", display::ftype_name(t.ftype)),
    );
    if t.n_elements > 0 {
        push_line(
            &mut out,
            &format!(
                "print_info: file size   = {} ",
                display::format_file_size(t.n_bytes, t.n_elements)
            ),
        );
    }
    push_line(
        &mut out,
        &format!(
            "print_info: model params          = {}",
            display::format_params(t.n_elements)
        ),
    );
    out
}

fn tensor_table(file: &GgufFile) -> Table {
    let mut table = Table::new();
    table.load_preset(presets::ASCII_MARKDOWN);
    table.set_header(vec!["#", "name", "type", "shape", "bytes", "offset"]);
    for (i, t) in file.tensors.iter().enumerate() {
        let shape: Vec<String> = t.shape().iter().map(u64::to_string).collect();
        table.add_row(vec![
            i.to_string(),
            t.name.clone(),
            t.ty.name().to_string(),
            format!("[{}]", shape.join(", ")),
            t.size.to_string(),
            t.offset.to_string(),
        ]);
    }
    for col in [0, 4, 5] {
        if let Some(c) = table.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
}

/// `--key`: a value alone; arrays one element a line, floats in their shortest exact form.
pub fn key_value(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    push_value(v.view(), &mut out);
    out
}

/// Nested arrays are flattened, one element a line.
fn push_value(v: ValueRef, out: &mut Vec<u8>) {
    let s = match v {
        ValueRef::Array(a) => {
            for x in a {
                push_value(x, out);
            }
            return;
        }
        ValueRef::F32(x) => x.to_string(),
        ValueRef::F64(x) => x.to_string(),
        other => display::scalar_to_str(other),
    };
    push_line(out, &s);
}
