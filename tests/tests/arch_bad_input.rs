//! Broken files of the newer architectures: a missing or misshapen per-architecture tensor and
//! impossible expert counts stop llama-completion with one line naming the tensor or key and
//! exit status 1, never a panic; a sliding window longer than the context is what llama.cpp
//! makes of it, a window cache of the context's size; a split model loads from its first shard.

use gguf::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use test_fixtures::gguf_edit::{self, assert_fails_with, complete, Tensors};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn gguf_new(out: &Path, arch: &str, extra: &[&str]) {
    let bin = test_fixtures::bin("llama-gguf-new", "llama-gguf-new");
    #[rustfmt::skip]
    let o = Command::new(bin)
        .args(["--arch", arch, "--layers", "2", "--embd", "64", "--heads", "4", "--heads-kv", "2",
            "--ff", "128", "--ctx", "512", "--vocab-size", "300", "--seed", "3", "--quiet", "-o"])
        .arg(out)
        .args(extra)
        .output()
        .expect("run llama-gguf-new");
    assert!(o.status.success(), "llama-gguf-new: {}", text(&o.stderr));
}

/// A model of `arch` with its metadata and tensors edited by `edit`.
fn edited(
    dir: &Path,
    arch: &str,
    edit: impl FnOnce(&mut Vec<(String, Value)>, &mut Tensors),
) -> PathBuf {
    let src = dir.join(format!("{arch}.gguf"));
    gguf_new(&src, arch, &[]);
    let out = dir.join(format!("{arch}-edited.gguf"));
    gguf_edit::rewrite(&src, &out, edit);
    out
}

#[test]
fn a_missing_post_norm_is_named() {
    let dir = test_fixtures::scratch_dir("arch-bad-missing");
    let m = edited(&dir, "gemma2", |_, t| {
        t.retain(|t| t.0 != "blk.1.post_ffw_norm.weight")
    });
    assert_fails_with(
        &complete(&m, &[]),
        "missing tensor 'blk.1.post_ffw_norm.weight'",
    );
}

#[test]
fn a_misshapen_qk_norm_is_named() {
    let dir = test_fixtures::scratch_dir("arch-bad-shape");
    let m = edited(&dir, "qwen3", |_, t| {
        let n = t
            .iter_mut()
            .find(|t| t.0 == "blk.0.attn_k_norm.weight")
            .unwrap();
        n.2 = vec![8];
        n.3.truncate(8 * 4);
    });
    assert_fails_with(
        &complete(&m, &[]),
        "tensor 'blk.0.attn_k_norm.weight' has wrong shape; expected    16, got ",
    );
}

#[test]
fn more_experts_used_than_there_are_is_named() {
    let dir = test_fixtures::scratch_dir("arch-bad-experts");
    let m = edited(&dir, "qwen3", |kv, _| {
        kv.push(("qwen3.expert_count".into(), Value::U32(0)));
        kv.push(("qwen3.expert_used_count".into(), Value::U32(2)));
    });
    assert_fails_with(
        &complete(&m, &[]),
        "qwen3.expert_used_count = 2 exceeds qwen3.expert_count = 0",
    );
}

#[test]
fn a_window_longer_than_the_context_gets_a_context_sized_cache() {
    let dir = test_fixtures::scratch_dir("arch-bad-window");
    let m = dir.join("gemma2-wide.gguf");
    gguf_new(&m, "gemma2", &["--swa", "100000"]);
    let o = complete(&m, &["-c", "256", "-lv", "4"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let sizes: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("llama_kv_cache_iswa: creating"))
        .map(|l| l.rsplit("size = ").next().unwrap_or(""))
        .collect();
    assert_eq!(sizes, ["256 cells", "256 cells"], "{err}");
}

/// A split qwen3 (two shards by llama-gguf-split) gives the unsplit file's greedy text.
#[test]
fn a_split_model_gives_the_unsplit_text() {
    let dir = test_fixtures::scratch_dir("arch-split");
    let m = dir.join("qwen3.gguf");
    gguf_new(&m, "qwen3", &[]);
    let split = test_fixtures::bin("llama-gguf-split", "llama-gguf-split");
    let prefix = dir.join("qwen3-split");
    let o = Command::new(split)
        .args(["--split", "--split-max-tensors", "16"])
        .arg(&m)
        .arg(&prefix)
        .output()
        .expect("run llama-gguf-split");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let first = dir.join("qwen3-split-00001-of-00002.gguf");
    assert!(dir.join("qwen3-split-00002-of-00002.gguf").is_file());
    let greedy = ["-n", "8", "--temp", "0"];
    let (whole, parts) = (complete(&m, &greedy), complete(&first, &greedy));
    assert!(parts.status.success(), "{}", text(&parts.stderr));
    assert_eq!(text(&parts.stdout), text(&whole.stdout));
}

/// Renames a phi3 model away from "phi3" (see arch_models.rs: llama.cpp's vocabulary needs
/// tokens the built-in one lacks for a model of that name).
fn rename(kv: &mut [(String, Value)]) {
    for (k, v) in kv.iter_mut() {
        if k == "general.name" {
            *v = Value::from("random-model");
        }
    }
}

/// The newer dense architectures' own tensors and keys: a missing or misshapen one is named.
#[test]
fn dense_architectures_name_their_broken_tensor_or_key() {
    type Edit = fn(&mut Vec<(String, Value)>, &mut Tensors);
    let cases: [(&str, Edit, &str); 8] = [
        (
            "starcoder2",
            |_, t| t.retain(|t| t.0 != "blk.1.ffn_up.bias"),
            "missing tensor 'blk.1.ffn_up.bias'",
        ),
        (
            "stablelm",
            |_, t| t.retain(|t| t.0 != "output_norm.bias"),
            "missing tensor 'output_norm.bias'",
        ),
        (
            "olmo2",
            |_, t| t.retain(|t| t.0 != "blk.0.attn_k_norm.weight"),
            "missing tensor 'blk.0.attn_k_norm.weight'",
        ),
        (
            "phi3",
            |kv, t| {
                rename(kv);
                let n = t.iter_mut().find(|t| t.0 == "blk.0.ffn_up.weight").unwrap();
                // a gated model's ffn_up is n_ff wide; phi3's holds gate and up (2 n_ff)
                n.2 = vec![64, 128];
                n.3.truncate(64 * 128 * 4);
            },
            "tensor 'blk.0.ffn_up.weight' has wrong shape; expected    64,   256, got    64,   128",
        ),
        (
            "phi3",
            |kv, t| {
                rename(kv);
                t.retain(|t| t.0 != "blk.1.attn_qkv.weight");
            },
            "neither blk.1.attn_qkv.weight nor all of attn_q, attn_k, attn_v",
        ),
        (
            "cohere2",
            |kv, _| kv.retain(|(k, _)| k != "cohere2.attention.sliding_window"),
            "cohere2.attention.sliding_window",
        ),
        (
            "glm4",
            |kv, _| {
                let v = Value::Array(gguf::Array::from(vec![8i32, 8, 0, 0]));
                kv.push(("glm4.rope.dimension_sections".into(), v));
            },
            "glm4.rope.dimension_sections: multimodal rope (M-RoPE) is not supported",
        ),
        (
            "mistral3",
            |kv, _| {
                for (k, v) in kv.iter_mut() {
                    if k == "mistral3.rope.scaling.original_context_length" {
                        *v = Value::U32(0);
                    }
                }
            },
            "invalid n_ctx_orig_yarn for attention temperature scaling",
        ),
    ];
    for (i, (arch, edit, cause)) in cases.into_iter().enumerate() {
        let dir = test_fixtures::scratch_dir(&format!("arch-bad-dense-{i}"));
        let m = edited(&dir, arch, edit);
        assert_fails_with(&complete(&m, &[]), cause);
    }
}
