//! llama-gguf-inspect end to end: the reference model against llama.cpp's loader log, --json,
//! --key, the shared vocab files, and one clear error line for every kind of broken file.

use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Output};

fn inspect(args: &[&str]) -> Output {
    let bin = test_fixtures::bin("llama-gguf-inspect", "llama-gguf-inspect");
    Command::new(bin)
        .args(args)
        .output()
        .expect("run llama-gguf-inspect")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn reference_model_matches_llama_cpp() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let out = inspect(&[model.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("\ntensors:      39\n"), "{stdout}");
    assert!(stdout.contains("\nkv pairs:     21\n"), "{stdout}");
    assert!(stdout.contains("print_info: file type   = all F32\n"));
    assert!(stdout.contains("print_info: file size   = 307.51 MiB (32.00 BPW) \n"));
    assert!(stdout.contains("print_info: model params          = 80.61 M\n"));
    assert!(stdout.contains("| blk.3.ffn_down.weight "), "tensor table");

    // The KV and type-count lines equal the loader's, byte for byte.
    let ours: Vec<&[u8]> = out
        .stdout
        .split(|&b| b == b'\n')
        .filter(|l| l.starts_with(b"llama_model_loader: - "))
        .collect();
    let log = std::fs::read(test_fixtures::shared_dir().join("reference/logs/completion-lv4.log"))
        .unwrap();
    let theirs: Vec<&[u8]> = log
        .split(|&b| b == b'\n')
        .filter(|l| l.starts_with(b"I llama_model_loader: - "))
        .map(|l| &l[2..])
        .collect();
    assert_eq!(theirs.len(), 22);
    assert_eq!(ours, theirs);
}

#[test]
fn json_dump_parses_and_holds_the_counts() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let m = model.to_str().unwrap();
    let out = inspect(&["--json", m]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(v["kv_count"], 21);
    assert_eq!(v["tensor_count"], 39);
    assert_eq!(v["metadata"].as_array().unwrap().len(), 21);
    assert_eq!(v["tensors"].as_array().unwrap().len(), 39);
    assert_eq!(v["n_params"], 80_611_584u64);
    assert_eq!(v["size_str"], "307.51 MiB (32.00 BPW)");
    assert_eq!(v["file_type"], "all F32");
    assert_eq!(v["type_counts"]["f32"], 39);
    let tokens = &v["metadata"][14];
    assert_eq!(tokens["key"], "tokenizer.ggml.tokens");
    assert_eq!(tokens["len"], 151936);
    assert_eq!(tokens["truncated"], true);
    assert_eq!(v["metadata"][9]["value"], 1e-5);
    assert_eq!(v["tensors"][0]["shape"], serde_json::json!([256, 151936]));

    let out = inspect(&["--json", "--full-arrays", "--no-tensors", m]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert!(v.get("tensors").is_none());
    let tokens = v["metadata"][14]["value"].as_array().unwrap();
    assert_eq!(tokens.len(), 151936);
    assert_eq!(tokens[151643], "<|endoftext|>");
}

#[test]
fn key_prints_one_value() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let m = model.to_str().unwrap();
    let get = |k: &str| text(&inspect(&["--key", k, m]).stdout);
    assert_eq!(get("general.architecture"), "llama\n");
    assert_eq!(get("llama.block_count"), "4\n");
    assert_eq!(get("llama.attention.layer_norm_rms_epsilon"), "0.00001\n");
    assert_eq!(get("tokenizer.ggml.tokens").lines().count(), 151936);
    let out = inspect(&["--key", "no.such.key", m]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).starts_with("error: key 'no.such.key' not found"));
}

#[test]
fn shared_vocab_files_inspect() {
    let dir = test_fixtures::shared_dir().join("vocab");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "gguf") {
            n += 1;
            let out = inspect(&[p.to_str().unwrap()]);
            assert!(
                out.status.success(),
                "{}: {}",
                p.display(),
                text(&out.stderr)
            );
            assert!(text(&out.stdout).contains("tensors:      0\n"));
            let out = inspect(&["--json", p.to_str().unwrap()]);
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert!(v["kv_count"].as_u64().unwrap() >= 16);
        }
    }
    assert_eq!(n, 5);
}

/// A small valid file: one KV pair and one f32 tensor [8].
fn valid_file() -> Vec<u8> {
    let mut w = gguf::GgufWriter::new();
    w.add_kv("general.name", "x").unwrap();
    w.add_tensor("t", ggml::Type::F32, &[8]).unwrap();
    w.to_bytes(&[&[0u8; 32]]).unwrap()
}

fn patched(at: usize, bytes: &[u8]) -> Vec<u8> {
    let mut f = valid_file();
    f[at..at + bytes.len()].copy_from_slice(bytes);
    f
}

#[test]
fn every_broken_file_gives_its_own_error_and_exit_1() {
    let dir = test_fixtures::scratch_dir("gguf-inspect-broken");
    let valid = valid_file();
    // Offsets in the valid file: header 24, key 8+12, type 4, value 8+1 = 57, then the tensor
    // info: name 8+1, n_dims 4, ne 8, type 4, offset 8.
    let (ty_at, ne_at, tty_at, off_at) = (44usize, 70usize, 78usize, 82usize);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", vec![]),
        ("truncated", valid[..80].to_vec()),
        ("magic", patched(0, b"GGML")),
        ("version1", patched(4, &1u32.to_le_bytes())),
        ("version4", patched(4, &4u32.to_le_bytes())),
        ("tensor-count", patched(8, &u64::MAX.to_le_bytes())),
        ("kv-count", patched(16, &(1u64 << 50).to_le_bytes())),
        ("string-length", patched(24, &(1u64 << 40).to_le_bytes())),
        ("value-type", patched(ty_at, &99u32.to_le_bytes())),
        ("dims", patched(ne_at - 4, &7u32.to_le_bytes())),
        ("negative-dim", patched(ne_at, &u64::MAX.to_le_bytes())),
        ("tensor-type", patched(tty_at, &5u32.to_le_bytes())),
        ("misaligned", patched(off_at, &4u64.to_le_bytes())),
        ("out-of-file", patched(off_at, &(1u64 << 20).to_le_bytes())),
    ];
    let mut messages = HashSet::new();
    for (name, bytes) in &cases {
        let path = dir.join(format!("{name}.gguf"));
        std::fs::write(&path, bytes).unwrap();
        let out = inspect(&[path.to_str().unwrap()]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(out.stdout.is_empty(), "{name}");
        assert_eq!(stderr.lines().count(), 1, "{name}: one line, got {stderr}");
        assert!(stderr.starts_with("error: "), "{name}: {stderr}");
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        // The message without the numbers identifies the class.
        let class: String = stderr.chars().filter(|c| !c.is_ascii_digit()).collect();
        assert!(
            messages.insert(class),
            "{name} repeats another case's message: {stderr}"
        );
    }
    let out = inspect(&[dir.join("missing.gguf").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).starts_with("error: failed to open GGUF file"));
    let out = inspect(&[Path::new("/").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
}
