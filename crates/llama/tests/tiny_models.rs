//! Small generated models: bad input gives a LlamaError (never a panic), the load modes and
//! tensor overrides give the same weights, and the qwen2 graph runs.

mod common;

use gguf::{GgufWriter, Value};
use llama::{Batch, Context, ContextParams, LlamaError, LoadMode, Model, ModelParams};
use std::path::{Path, PathBuf};

const N_EMBD: u64 = 16;
const N_FF: u64 = 32;
const N_HEAD: u32 = 2;
const N_HEAD_KV: u32 = 1;

struct Spec {
    arch: &'static str,
    n_embd: u64,
    n_head_kv: u32,
    /// tensor name -> shape override (None drops the tensor)
    edits: Vec<(&'static str, Option<Vec<u64>>)>,
    extra: Vec<(&'static str, Vec<u64>)>,
}

fn tensors(arch: &str, n_vocab: u64, n_embd: u64) -> Vec<(String, Vec<u64>)> {
    // one KV head (the specs that change it fail before tensors are read)
    let kv = n_embd / N_HEAD as u64 * N_HEAD_KV as u64;
    let mut t = vec![
        ("token_embd.weight".to_string(), vec![n_embd, n_vocab]),
        ("output_norm.weight".to_string(), vec![n_embd]),
        ("output.weight".to_string(), vec![n_embd, n_vocab]),
    ];
    for il in 0..2 {
        let b = |n: &str| format!("blk.{il}.{n}");
        t.push((b("attn_norm.weight"), vec![n_embd]));
        t.push((b("attn_q.weight"), vec![n_embd, n_embd]));
        t.push((b("attn_k.weight"), vec![n_embd, kv]));
        t.push((b("attn_v.weight"), vec![n_embd, kv]));
        if arch == "qwen2" {
            t.push((b("attn_q.bias"), vec![n_embd]));
            t.push((b("attn_k.bias"), vec![kv]));
            t.push((b("attn_v.bias"), vec![kv]));
        }
        t.push((b("attn_output.weight"), vec![n_embd, n_embd]));
        t.push((b("ffn_norm.weight"), vec![n_embd]));
        t.push((b("ffn_gate.weight"), vec![n_embd, N_FF]));
        t.push((b("ffn_down.weight"), vec![N_FF, n_embd]));
        t.push((b("ffn_up.weight"), vec![n_embd, N_FF]));
    }
    t
}

/// Writes a 2-layer model with the (32000-token) llama SPM tokenizer and deterministic pseudo-random weights.
fn write_model(name: &str, spec: &Spec) -> PathBuf {
    let dir = test_fixtures::cache_dir().join("llama-tiny");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let vocab =
        gguf::GgufFile::open_metadata(test_fixtures::vocab("ggml-vocab-llama-spm.gguf")).unwrap();
    let n_vocab = vocab
        .get("tokenizer.ggml.tokens")
        .unwrap()
        .as_array()
        .unwrap()
        .len() as u64;
    let mut w = GgufWriter::new();
    let a = spec.arch;
    w.add_kv("general.architecture", Value::Str(a.into()))
        .unwrap();
    w.add_kv("general.name", Value::Str(name.into())).unwrap();
    w.add_kv(format!("{a}.context_length"), Value::U32(256))
        .unwrap();
    w.add_kv(
        format!("{a}.embedding_length"),
        Value::U32(spec.n_embd as u32),
    )
    .unwrap();
    w.add_kv(format!("{a}.block_count"), Value::U32(2)).unwrap();
    w.add_kv(format!("{a}.feed_forward_length"), Value::U32(N_FF as u32))
        .unwrap();
    w.add_kv(format!("{a}.attention.head_count"), Value::U32(N_HEAD))
        .unwrap();
    w.add_kv(
        format!("{a}.attention.head_count_kv"),
        Value::U32(spec.n_head_kv),
    )
    .unwrap();
    w.add_kv(format!("{a}.rope.freq_base"), Value::F32(10000.0))
        .unwrap();
    w.add_kv(
        format!("{a}.attention.layer_norm_rms_epsilon"),
        Value::F32(1e-6),
    )
    .unwrap();
    w.add_kv("general.file_type", Value::U32(0)).unwrap();
    for (k, v) in &vocab.kv {
        if k.starts_with("tokenizer.") {
            w.add_kv(k.clone(), v.clone()).unwrap();
        }
    }
    let mut list = tensors(a, n_vocab, spec.n_embd);
    for (n, shape) in &spec.edits {
        let i = list.iter().position(|(m, _)| m == n).unwrap();
        match shape {
            Some(s) => list[i].1 = s.clone(),
            None => {
                list.remove(i);
            }
        }
    }
    list.extend(spec.extra.iter().map(|(n, s)| (n.to_string(), s.clone())));
    for (n, s) in &list {
        w.add_tensor(n.clone(), ggml::Type::F32, s).unwrap();
    }
    let mut f = w.create(&path).unwrap();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for (n, s) in &list {
        let count: u64 = s.iter().product();
        let norm = n.contains("norm");
        let bytes: Vec<u8> = (0..count)
            .flat_map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let r = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                (if norm { 1.0 + 0.1 * r } else { r }).to_le_bytes()
            })
            .collect();
        f.write_tensor(&bytes).unwrap();
    }
    f.finish().unwrap();
    path
}

fn good(arch: &'static str) -> Spec {
    Spec {
        arch,
        n_embd: N_EMBD,
        n_head_kv: N_HEAD_KV,
        edits: vec![],
        extra: vec![],
    }
}

fn load(path: &Path, params: &ModelParams) -> Result<std::sync::Arc<Model>, LlamaError> {
    llama::backend_init();
    common::capture(|| Model::load(path, params)).0
}

fn logits(model: &std::sync::Arc<Model>) -> Vec<f32> {
    let p = ContextParams {
        n_ctx: 256,
        n_threads: 2,
        n_threads_batch: 2,
        ..Default::default()
    };
    let (ctx, _) = common::capture(|| Context::new(model.clone(), p));
    let mut ctx = ctx.unwrap();
    assert_eq!(ctx.decode(&Batch::get_one(&[9707, 847, 829, 374])), 0);
    ctx.get_logits_ith(-1).unwrap().to_vec()
}

#[test]
fn bad_files_are_errors() {
    let missing = load(
        Path::new("/nonexistent/model.gguf"),
        &ModelParams::default(),
    );
    assert!(
        matches!(missing, Err(LlamaError::Gguf { .. })),
        "{missing:?}"
    );

    let dir = test_fixtures::scratch_dir("llama-bad-files");
    let garbage = dir.join("garbage.gguf");
    std::fs::write(&garbage, b"GGUF\x03\x00\x00\x00 this is not a model").unwrap();
    assert!(matches!(
        load(&garbage, &ModelParams::default()),
        Err(LlamaError::Gguf { .. })
    ));

    // a truncated model: the tensor data is cut off
    let full = std::fs::read(write_model("good-llama.gguf", &good("llama"))).unwrap();
    let cut = dir.join("truncated.gguf");
    std::fs::write(&cut, &full[..full.len() / 2]).unwrap();
    for mode in [LoadMode::Mmap, LoadMode::None] {
        let p = ModelParams {
            load_mode: mode,
            ..Default::default()
        };
        assert!(load(&cut, &p).is_err(), "truncated file loads with {mode}");
    }
}

#[test]
fn bad_models_are_errors() {
    let foo = write_model("arch-foo.gguf", &good("foo"));
    assert!(
        matches!(load(&foo, &ModelParams::default()), Err(LlamaError::UnknownArch(a)) if a == "foo")
    );

    let spec = Spec {
        arch: "llama",
        n_embd: N_EMBD,
        n_head_kv: N_HEAD_KV,
        edits: vec![("blk.1.ffn_up.weight", None)],
        extra: vec![],
    };
    let m = write_model("missing-tensor.gguf", &spec);
    assert!(
        matches!(load(&m, &ModelParams::default()), Err(LlamaError::MissingTensor(n)) if n == "blk.1.ffn_up.weight")
    );

    let spec = Spec {
        arch: "llama",
        n_embd: N_EMBD,
        n_head_kv: N_HEAD_KV,
        edits: vec![("blk.0.ffn_up.weight", Some(vec![N_EMBD, N_FF + 32]))],
        extra: vec![],
    };
    let m = write_model("wrong-shape.gguf", &spec);
    let e = load(&m, &ModelParams::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "check_tensor_dims: tensor 'blk.0.ffn_up.weight' has wrong shape; expected    16,    32, got    16,    64,     1,     1"
    );

    let spec = Spec {
        arch: "llama",
        n_embd: N_EMBD,
        n_head_kv: N_HEAD_KV,
        edits: vec![],
        extra: vec![("blk.0.unknown.weight", vec![4])],
    };
    let m = write_model("extra-tensor.gguf", &spec);
    assert!(matches!(
        load(&m, &ModelParams::default()),
        Err(LlamaError::TensorCount { .. })
    ));

    // qwen2 requires its Q/K/V biases
    let spec = Spec {
        arch: "qwen2",
        n_embd: N_EMBD,
        n_head_kv: N_HEAD_KV,
        edits: vec![("blk.0.attn_k.bias", None)],
        extra: vec![],
    };
    let m = write_model("qwen2-no-bias.gguf", &spec);
    assert!(matches!(
        load(&m, &ModelParams::default()),
        Err(LlamaError::MissingTensor(_))
    ));
}

#[test]
fn load_modes_give_the_same_model() {
    let path = write_model("modes-llama.gguf", &good("llama"));
    let base = load(&path, &ModelParams::default()).unwrap();
    assert_eq!(base.buffer_sizes()[0].0, "CPU_Mapped");
    let want = logits(&base);
    assert!(want.iter().all(|v| v.is_finite()));
    for mode in [
        LoadMode::None,
        LoadMode::Mlock,
        LoadMode::MmapMlock,
        LoadMode::Dio,
    ] {
        let m = load(
            &path,
            &ModelParams {
                load_mode: mode,
                ..Default::default()
            },
        )
        .unwrap();
        let name = if mode.uses_mmap() {
            "CPU_Mapped"
        } else {
            "CPU"
        };
        assert_eq!(m.buffer_sizes()[0].0, name, "{mode}");
        assert_eq!(logits(&m), want, "{mode}");
    }
}

#[test]
fn tensor_overrides_and_layer_counts() {
    let path = write_model("ot-llama.gguf", &good("llama"));
    let p = ModelParams {
        tensor_buft_overrides: vec![("ffn_.*".into(), "CPU".into())],
        ..Default::default()
    };
    let m = load(&path, &p).unwrap();
    let names: Vec<String> = m.buffer_sizes().into_iter().map(|b| b.0).collect();
    assert_eq!(names, vec!["CPU_Mapped".to_string()]);

    let p = ModelParams {
        tensor_buft_overrides: vec![("ffn_.*".into(), "NOPE".into())],
        ..Default::default()
    };
    assert!(matches!(
        load(&path, &p),
        Err(LlamaError::UnknownBufferType(_))
    ));
    let p = ModelParams {
        tensor_buft_overrides: vec![("(".into(), "CPU".into())],
        ..Default::default()
    };
    assert!(matches!(
        load(&path, &p),
        Err(LlamaError::BadOverride { .. })
    ));

    // more GPU layers than exist: with only the CPU every layer stays there
    let (m, log) = common::capture(|| {
        Model::load(
            &path,
            &ModelParams {
                n_gpu_layers: 999,
                ..Default::default()
            },
        )
    });
    let m = m.unwrap();
    assert_eq!(m.dev_layer(0).unwrap().name(), "CPU");
    let lines = common::text(&log, true);
    assert!(
        lines.contains(&"load_tensors: layer   2 assigned to device CPU, is_swa = 0".to_string())
    );
}

#[test]
fn context_errors() {
    let path = write_model("ctx-llama.gguf", &good("llama"));
    let m = load(&path, &ModelParams::default()).unwrap();
    let p = ContextParams {
        n_ctx: u32::MAX / 2,
        ..Default::default()
    };
    let r = common::capture(|| Context::new(m.clone(), p)).0;
    assert!(
        matches!(r, Err(LlamaError::Alloc { .. })),
        "n_ctx too large for memory: {r:?}"
    );
    let p = ContextParams {
        type_v: ggml::Type::Q8_0,
        flash_attn_type: llama::FlashAttnType::Disabled,
        ..Default::default()
    };
    assert!(common::capture(|| Context::new(m.clone(), p)).0.is_err());
    let p = ContextParams {
        n_batch: 0,
        n_ubatch: 0,
        ..Default::default()
    };
    assert!(common::capture(|| Context::new(m.clone(), p)).0.is_err());
}

#[test]
fn qwen2_runs_and_differs_from_llama() {
    let q = load(
        &write_model("qwen2.gguf", &good("qwen2")),
        &ModelParams::default(),
    )
    .unwrap();
    assert_eq!(q.arch_name(), "qwen2");
    assert_eq!(q.hparams().rope_type as i32, 2);
    let lq = logits(&q);
    assert!(lq.iter().all(|v| v.is_finite()));
    let l = load(
        &write_model("good-llama.gguf", &good("llama")),
        &ModelParams::default(),
    )
    .unwrap();
    assert_ne!(lq, logits(&l));
}

#[test]
fn vocab_only_loads_any_architecture() {
    llama::backend_init();
    for f in ["ggml-vocab-gpt-2.gguf", "ggml-vocab-qwen2.gguf"] {
        let p = ModelParams {
            vocab_only: true,
            ..Default::default()
        };
        let (m, log) = common::capture(|| Model::load(&test_fixtures::vocab(f), &p));
        let m = m.unwrap();
        assert!(m.vocab_only());
        assert!(m.vocab().n_tokens() > 0);
        let lines = common::text(&log, false);
        assert!(
            lines.contains(&"print_info: vocab_only            = 1".to_string()),
            "{f}"
        );
        assert!(
            lines.contains(&"llama_model_load: vocab only - skipping tensors".to_string()),
            "{f}"
        );
        assert!(
            common::capture(|| Context::new(m.clone(), ContextParams::default()))
                .0
                .is_err()
        );
    }
}

#[test]
fn check_tensors_finds_nan() {
    let good_path = write_model("nan-src.gguf", &good("llama"));
    let f = gguf::GgufFile::open_metadata(&good_path).unwrap();
    let t = f.tensor("blk.1.ffn_norm.weight").unwrap();
    let at = (f.data_offset + t.offset + 8) as usize;
    let mut bytes = std::fs::read(&good_path).unwrap();
    bytes[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
    let path = test_fixtures::scratch_dir("llama-nan").join("nan.gguf");
    std::fs::write(&path, bytes).unwrap();
    for mode in [LoadMode::Mmap, LoadMode::None] {
        let p = ModelParams {
            load_mode: mode,
            check_tensors: true,
            ..Default::default()
        };
        let e = load(&path, &p).unwrap_err();
        assert_eq!(
            e.to_string(),
            "tensor 'blk.1.ffn_norm.weight' has invalid data: found nan value at block 2 (row 0)",
            "{mode}"
        );
        let p = ModelParams {
            load_mode: mode,
            ..Default::default()
        };
        assert!(load(&path, &p).is_ok(), "{mode} without checks");
    }
}

#[test]
fn kv_cache_types_agree() {
    // heads of 32 so that every quantized cache type's block fits
    let spec = Spec {
        n_embd: 64,
        ..good("llama")
    };
    let m = load(
        &write_model("kv-types.gguf", &spec),
        &ModelParams::default(),
    )
    .unwrap();
    let run = |tk: ggml::Type, tv: ggml::Type, fa: llama::FlashAttnType| {
        let p = ContextParams {
            n_ctx: 256,
            type_k: tk,
            type_v: tv,
            flash_attn_type: fa,
            n_threads: 2,
            n_threads_batch: 2,
            ..Default::default()
        };
        let (ctx, _) = common::capture(|| Context::new(m.clone(), p));
        let mut ctx = ctx.unwrap();
        assert_eq!(
            ctx.decode(&Batch::get_one(&[9707, 847, 829, 374])),
            0,
            "{tk} {tv} {fa:?}"
        );
        assert_eq!(ctx.decode(&Batch::get_one(&[13])), 0, "{tk} {tv} {fa:?}");
        ctx.get_logits_ith(-1).unwrap().to_vec()
    };
    use ggml::Type::*;
    use llama::FlashAttnType::*;
    // random weights amplify rounding: the tolerances (logits span about +-10) only separate a
    // working cache type from a broken one
    let want = run(F32, F32, Disabled);
    for (tk, tv, fa, tol) in [
        (F16, F16, Disabled, 2e-2),
        (F16, F16, Enabled, 2e-2),
        (F32, F32, Enabled, 2e-2),
        (Bf16, Bf16, Enabled, 0.3),
        (Q8_0, F16, Disabled, 0.5),
        (Q8_0, Q8_0, Enabled, 0.5),
        (Q4_0, Q4_0, Enabled, 5.0),
        (Q4_1, Q4_1, Enabled, 5.0),
        (Q5_0, Q5_0, Enabled, 5.0),
        (Q5_1, Q5_1, Enabled, 5.0),
        (Iq4Nl, Iq4Nl, Enabled, 5.0),
    ] {
        let got = run(tk, tv, fa);
        let diff = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(got.iter().all(|v| v.is_finite()));
        assert!(diff < tol, "K {tk} V {tv} {fa:?}: max diff {diff}");
    }
}

#[test]
fn impossible_hyperparameters_are_errors() {
    // 2 query heads cannot share 3 KV heads
    let spec = Spec {
        n_head_kv: 3,
        ..good("llama")
    };
    let m = write_model("bad-heads.gguf", &spec);
    assert!(matches!(
        load(&m, &ModelParams::default()),
        Err(LlamaError::BadHparams(_))
    ));
}

#[test]
fn aborted_decode_returns_2_and_forgets_the_batch() {
    let m = load(
        &write_model("abort-llama.gguf", &good("llama")),
        &ModelParams::default(),
    )
    .unwrap();
    let p = ContextParams {
        n_ctx: 256,
        abort_callback: Some(std::sync::Arc::new(|| true)),
        ..Default::default()
    };
    let mut ctx = common::capture(|| Context::new(m.clone(), p)).0.unwrap();
    let (rc, _) = common::capture(|| ctx.decode(&Batch::get_one(&[1, 2, 3])));
    assert_eq!(rc, 2);
    assert_eq!(ctx.memory_seq_pos_max(0), -1);
    ctx.set_abort_callback(None);
    assert_eq!(ctx.decode(&Batch::get_one(&[1, 2, 3])), 0);
    assert_eq!(ctx.memory_seq_pos_max(0), 2);
}
