//! Broken models for the bad-input tests: a GGUF file rewritten with its metadata and tensors
//! edited, and llama-completion's refusal of it (one cause line, exit status 1, no panic).

use gguf::{GgufFile, GgufWriter, Value};
use std::path::Path;
use std::process::{Command, Output};

/// One tensor of a file being rewritten: name, type, shape, data.
pub type Tensors = Vec<(String, ggml::Type, Vec<u64>, Vec<u8>)>;

/// `src` written to `out` with `edit` applied to its key/value pairs and tensors.
pub fn rewrite(src: &Path, out: &Path, edit: impl FnOnce(&mut Vec<(String, Value)>, &mut Tensors)) {
    let f = GgufFile::open(src).expect("open the model");
    let mut kv = f.kv.clone();
    let mut tensors: Tensors = f
        .tensors
        .iter()
        .map(|t| {
            (
                t.name.clone(),
                t.ty,
                t.shape().to_vec(),
                f.tensor_data(t).to_vec(),
            )
        })
        .collect();
    edit(&mut kv, &mut tensors);
    let mut w = GgufWriter::new();
    for (k, v) in kv {
        w.add_kv(k, v).unwrap();
    }
    for (name, ty, shape, _) in &tensors {
        w.add_tensor(name.clone(), *ty, shape).unwrap();
    }
    let data: Vec<&[u8]> = tensors.iter().map(|t| t.3.as_slice()).collect();
    std::fs::write(out, w.to_bytes(&data).unwrap()).unwrap();
}

/// Sets the u32 value of a key the file has.
pub fn set_u32(kv: &mut [(String, Value)], key: &str, v: u32) {
    let e = kv
        .iter_mut()
        .find(|e| e.0 == key)
        .expect("the key is written");
    e.1 = Value::U32(v);
}

/// A short llama-completion run on `model` ("hi", 2 tokens) with `extra` arguments.
pub fn complete(model: &Path, extra: &[&str]) -> Output {
    Command::new(crate::bin("llama-completion", "llama-completion"))
        .arg("-m")
        .arg(model)
        .args(["-p", "hi", "-n", "2", "-no-cnv", "-t", "2"])
        .args(extra)
        .env_remove("LLAMA_ARG_MODEL")
        .output()
        .expect("run llama-completion")
}

/// Exit 1, no panic, and one cause line of the loader carrying `cause` (printed once by the
/// parameter fit's load and once by the real one, as llama.cpp does).
pub fn assert_fails_with(o: &Output, cause: &str) {
    let err = crate::text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("error loading model"))
        .map(|l| l.split_once(" E ").map_or(l, |(_, rest)| rest))
        .collect();
    assert!(!lines.is_empty(), "{err}");
    assert!(lines.iter().all(|l| *l == lines[0]), "{err}");
    assert!(lines[0].contains(cause), "want {cause:?} in {:?}", lines[0]);
}
