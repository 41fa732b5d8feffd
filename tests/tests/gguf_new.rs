//! llama-gguf-new end to end: the tiny preset with the Qwen2 vocab has the reference model's
//! keys, shapes and tensor names; the built-in vocabulary, types, determinism and bad flags.

use std::process::{Command, Output};

use gguf::{GgufFile, Value};

fn gguf_new(args: &[&str]) -> Output {
    let bin = test_fixtures::bin("llama-gguf-new", "llama-gguf-new");
    Command::new(bin)
        .args(args)
        .output()
        .expect("run llama-gguf-new")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn tiny_preset_with_qwen2_vocab_has_the_reference_layout() {
    let Some(reference) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = test_fixtures::scratch_dir("gguf-new-tiny");
    let out = dir.join("tiny.gguf");
    let vocab = test_fixtures::vocab("ggml-vocab-qwen2.gguf");
    let o = gguf_new(&[
        "--preset",
        "tiny",
        "--vocab",
        vocab.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));

    let ours = GgufFile::open_metadata(&out).unwrap();
    let theirs = GgufFile::open_metadata(&reference).unwrap();
    let keys = |f: &GgufFile| {
        f.kv.iter()
            .map(|(k, v)| (k.clone(), v.value_type()))
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(&ours), keys(&theirs));
    for (k, v) in &theirs.kv {
        if k != "general.name" {
            assert_eq!(ours.get(k), Some(v), "{k}");
        }
    }
    let layout = |f: &GgufFile| {
        f.tensors
            .iter()
            .map(|t| (t.name.clone(), t.ne, t.ty, t.size))
            .collect::<Vec<_>>()
    };
    assert_eq!(layout(&ours), layout(&theirs));
    std::fs::remove_file(&out).unwrap();
}

#[test]
fn builtin_vocab_small_qwen2_f16() {
    let dir = test_fixtures::scratch_dir("gguf-new-small");
    let a = dir.join("a.gguf");
    #[rustfmt::skip]
    let shape = ["--arch", "qwen2", "--layers", "2", "--embd", "64", "--heads", "4", "--heads-kv", "2",
        "--ff", "96", "--ctx", "512", "--vocab-size", "1000", "--type", "f16"];
    let run = |out: &std::path::Path, seed: &str| {
        let mut args = shape.to_vec();
        args.extend(["--seed", seed, "-o", out.to_str().unwrap()]);
        let o = gguf_new(&args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(text(&o.stderr).starts_with("wrote "), "{}", text(&o.stderr));
    };
    run(&a, "5");
    let f = GgufFile::open(&a).unwrap();
    assert_eq!(
        f.get("general.architecture").and_then(Value::as_str),
        Some("qwen2")
    );
    assert_eq!(f.get("qwen2.block_count").and_then(Value::as_u64), Some(2));
    assert_eq!(
        f.get("qwen2.attention.head_count_kv")
            .and_then(Value::as_u64),
        Some(2)
    );
    assert_eq!(
        f.get("qwen2.rope.dimension_count").and_then(Value::as_u64),
        Some(16)
    );
    assert_eq!(f.get("general.file_type").and_then(Value::as_u64), Some(1));
    assert_eq!(
        f.get("tokenizer.ggml.model").and_then(Value::as_str),
        Some("gpt2")
    );
    assert_eq!(
        f.get("tokenizer.ggml.pre").and_then(Value::as_str),
        Some("qwen2")
    );
    let tokens = f
        .get("tokenizer.ggml.tokens")
        .and_then(Value::as_array)
        .unwrap()
        .strings()
        .unwrap();
    assert_eq!(tokens.len(), 1000);
    let bos = f
        .get("tokenizer.ggml.bos_token_id")
        .and_then(Value::as_u64)
        .unwrap() as usize;
    assert_eq!(&tokens[bos], "<|endoftext|>");
    let eot = f
        .get("tokenizer.ggml.eot_token_id")
        .and_then(Value::as_u64)
        .unwrap() as usize;
    assert_eq!(&tokens[eot], "<|im_end|>");
    assert!(
        f.get("tokenizer.ggml.merges")
            .and_then(Value::as_array)
            .unwrap()
            .len()
            > 100
    );

    assert_eq!(f.tensors.len(), 2 + 2 * 12 + 1);
    let t = |n: &str| f.tensor(n).unwrap_or_else(|| panic!("{n}"));
    assert_eq!(t("token_embd.weight").ne, [64, 1000, 1, 1]);
    assert_eq!(t("token_embd.weight").ty, ggml::Type::F16);
    assert_eq!(t("blk.1.attn_k.weight").ne, [64, 32, 1, 1]);
    assert_eq!(t("blk.1.attn_v.bias").ne, [32, 1, 1, 1]);
    assert_eq!(t("blk.1.attn_v.bias").ty, ggml::Type::F32);
    assert_eq!(t("blk.0.ffn_down.weight").ne, [96, 64, 1, 1]);
    assert_eq!(t("output_norm.weight").ty, ggml::Type::F32);
    // Norms are near 1, weights near 0 with the chosen spread.
    let norm: Vec<f32> = f
        .tensor_data(t("output_norm.weight"))
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert!(norm.iter().all(|x| (0.4..1.6).contains(x)), "{norm:?}");

    // Same seed, same bytes; another seed, other weights.
    let b = dir.join("b.gguf");
    run(&b, "5");
    assert!(std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap());
    run(&b, "6");
    let g = GgufFile::open(&b).unwrap();
    assert_eq!(g.kv, f.kv);
    assert_ne!(
        g.tensor_data(g.tensor("output.weight").unwrap()),
        f.tensor_data(t("output.weight"))
    );
}

#[test]
fn bf16_default_llama_shape() {
    let dir = test_fixtures::scratch_dir("gguf-new-bf16");
    let out = dir.join("m.gguf");
    #[rustfmt::skip]
    let o = gguf_new(&["--layers", "1", "--embd", "32", "--heads", "2", "--ff", "64", "--vocab-size", "300",
        "--type", "bf16", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let f = GgufFile::open(&out).unwrap();
    assert_eq!(
        f.get("general.architecture").and_then(Value::as_str),
        Some("llama")
    );
    assert_eq!(f.get("general.file_type").and_then(Value::as_u64), Some(32));
    // --heads 2 alone: the tiny preset's 2 KV heads still divide it.
    assert_eq!(
        f.get("llama.attention.head_count_kv")
            .and_then(Value::as_u64),
        Some(2)
    );
    assert_eq!(
        f.tensor("blk.0.attn_q.weight").unwrap().ty,
        ggml::Type::Bf16
    );
    assert!(f.tensor("blk.0.attn_q.bias").is_none());
    assert_eq!(f.tensors.len(), 2 + 9 + 1);
}

#[test]
fn quantized_weights() {
    let dir = test_fixtures::scratch_dir("gguf-new-q8");
    let out = dir.join("q.gguf");
    #[rustfmt::skip]
    let o = gguf_new(&["--layers", "1", "--embd", "64", "--heads", "2", "--ff", "96", "--vocab-size", "300",
        "--type", "q8_0", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let f = GgufFile::open(&out).unwrap();
    assert_eq!(f.get("general.file_type").and_then(Value::as_u64), Some(7));
    let q = f.tensor("blk.0.ffn_down.weight").unwrap();
    assert_eq!(
        (q.ty, q.ne, q.size),
        (ggml::Type::Q8_0, [96, 64, 1, 1], 64 * 3 * 34)
    );
    assert_eq!(
        f.tensor("blk.0.ffn_norm.weight").unwrap().ty,
        ggml::Type::F32
    );
    // The quantized values are the f32 weights of the same seed, within q8_0's error.
    let f32_out = dir.join("f.gguf");
    #[rustfmt::skip]
    let o = gguf_new(&["--layers", "1", "--embd", "64", "--heads", "2", "--ff", "96", "--vocab-size", "300",
        "-o", f32_out.to_str().unwrap()]);
    assert!(o.status.success());
    let g = GgufFile::open(&f32_out).unwrap();
    let want: Vec<f32> = g
        .tensor_data(g.tensor("blk.0.ffn_down.weight").unwrap())
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let mut got = vec![0f32; want.len()];
    ggml::quants::dequantize_row(ggml::Type::Q8_0, f.tensor_data(q), &mut got);
    let scale = want.iter().fold(0f32, |m, x| m.max(x.abs()));
    let err = want
        .iter()
        .zip(&got)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(
        err <= scale / 100.0,
        "max error {err} for values up to {scale}"
    );

    // q4_k needs rows of 256.
    let r = gguf_new(&[
        "--embd",
        "64",
        "--heads",
        "2",
        "--type",
        "q4_k",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(1));
    assert!(
        text(&r.stderr).contains("not a multiple of block size (256)"),
        "{}",
        text(&r.stderr)
    );
}

#[test]
fn bad_flags_give_one_error_line() {
    let dir = test_fixtures::scratch_dir("gguf-new-bad");
    let out = dir.join("x.gguf");
    let o = out.to_str().unwrap();
    let missing = dir.join("missing.gguf");
    let no_dir = dir.join("no/such/dir/x.gguf");
    let cases: Vec<Vec<&str>> = vec![
        vec!["--preset", "gpt-5", "-o", o],
        vec!["--embd", "100", "--heads", "3", "-o", o],
        vec!["--heads", "8", "--heads-kv", "3", "-o", o],
        vec!["--layers", "0", "-o", o],
        vec!["--vocab", missing.to_str().unwrap(), "-o", o],
        vec!["--vocab-size", "10", "-o", o],
        vec!["--vocab-size", "300", "-o", no_dir.to_str().unwrap()],
    ];
    for args in cases {
        let r = gguf_new(&args);
        let stderr = text(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
    }
    assert!(!out.exists());
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "no temporary files left"
    );
}
