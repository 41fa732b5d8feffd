//! `--json`: the header, every KV pair with its type and value, the tensors and the totals.

use std::path::Path;

use gguf::{display, GgufFile, Value, ValueRef};
use serde_json::{json, Map, Value as Json};

/// Elements of an array shown without --full-arrays.
const ARRAY_PREVIEW: usize = 16;

fn float(x: f64, shortest: String) -> Json {
    // Shortest decimal of the stored precision (1e-5 for an f32, not 9.99999974e-6); JSON has
    // no NaN or infinity, so those become strings.
    if x.is_finite() {
        shortest
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(Json::Null, Json::Number)
    } else {
        Json::String(display::c_float(x))
    }
}

fn value(v: ValueRef, full: bool) -> Json {
    match v {
        ValueRef::U8(x) => json!(x),
        ValueRef::I8(x) => json!(x),
        ValueRef::U16(x) => json!(x),
        ValueRef::I16(x) => json!(x),
        ValueRef::U32(x) => json!(x),
        ValueRef::I32(x) => json!(x),
        ValueRef::U64(x) => json!(x),
        ValueRef::I64(x) => json!(x),
        ValueRef::F32(x) => float(x as f64, x.to_string()),
        ValueRef::F64(x) => float(x, x.to_string()),
        ValueRef::Bool(x) => json!(x),
        ValueRef::Str(s) => json!(s),
        ValueRef::Array(a) => {
            let n = if full {
                a.len()
            } else {
                a.len().min(ARRAY_PREVIEW)
            };
            Json::Array(a.iter().take(n).map(|x| value(x, full)).collect())
        }
    }
}

pub fn dump(file: &GgufFile, path: &Path, full: bool, with_tensors: bool) -> Json {
    let t = crate::report::totals(file);
    let metadata: Vec<Json> = file
        .kv
        .iter()
        .enumerate()
        .map(|(i, (k, v))| {
            let mut m = Map::new();
            m.insert("index".into(), json!(i));
            m.insert("key".into(), json!(k));
            m.insert("type".into(), json!(v.value_type().name()));
            if let Value::Array(a) = v {
                m.insert("elem_type".into(), json!(a.elem_type().name()));
                m.insert("len".into(), json!(a.len()));
                m.insert("truncated".into(), json!(!full && a.len() > ARRAY_PREVIEW));
            }
            m.insert("value".into(), value(v.view(), full));
            Json::Object(m)
        })
        .collect();
    let mut root = Map::new();
    root.insert("file".into(), json!(path.display().to_string()));
    root.insert("version".into(), json!(file.version));
    root.insert("tensor_count".into(), json!(file.tensors.len()));
    root.insert("kv_count".into(), json!(file.kv.len()));
    root.insert("alignment".into(), json!(file.alignment));
    root.insert("data_offset".into(), json!(file.data_offset));
    root.insert("file_size".into(), json!(file.file_size));
    root.insert("file_type".into(), json!(display::ftype_name(t.ftype)));
    root.insert("n_params".into(), json!(t.n_elements));
    root.insert(
        "n_params_str".into(),
        json!(display::format_params(t.n_elements)),
    );
    root.insert("n_bytes".into(), json!(t.n_bytes));
    if t.n_elements > 0 {
        root.insert(
            "size_str".into(),
            json!(display::format_file_size(t.n_bytes, t.n_elements)),
        );
    }
    let per_type: Map<String, Json> = t
        .per_type
        .iter()
        .map(|(ty, n)| (ty.name().to_string(), json!(n)))
        .collect();
    root.insert("type_counts".into(), Json::Object(per_type));
    root.insert("metadata".into(), Json::Array(metadata));
    if with_tensors {
        let tensors: Vec<Json> = file
            .tensors
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "type": t.ty.name(),
                    "shape": t.shape(),
                    "n_elements": t.n_elements(),
                    "bytes": t.size,
                    "offset": t.offset,
                })
            })
            .collect();
        root.insert("tensors".into(), Json::Array(tensors));
    }
    Json::Object(root)
}
