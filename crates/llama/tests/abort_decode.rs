//! The abort callback in decode: it stops a batch between its ubatches (keeping the ubatches
//! already computed in the KV cache) or inside a ubatch's graph (forgetting that ubatch), and
//! decode returns 2 as llama_decode does; the cache then continues as if the rest had never
//! been sent.

mod common;

use gguf::{GgufWriter, Value};
use llama::{AbortCallback, Batch, Context, ContextParams, Model, ModelParams};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

const N_UBATCH: usize = 16;

/// A 2-layer llama with the 32000-token SPM vocabulary and pseudo-random weights.
fn model() -> Arc<Model> {
    static MODEL: OnceLock<Arc<Model>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            llama::backend_init();
            let path = write_model();
            common::capture(|| Model::load(&path, &ModelParams::default()))
                .0
                .expect("load the test model")
        })
        .clone()
}

fn write_model() -> PathBuf {
    let (n_embd, n_ff, n_kv) = (32u64, 64u64, 16u64);
    let dir = test_fixtures::cache_dir().join("llama-abort");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("abort-{}.gguf", std::process::id()));
    let vocab =
        gguf::GgufFile::open_metadata(test_fixtures::vocab("ggml-vocab-llama-spm.gguf")).unwrap();
    let n_vocab = vocab
        .get("tokenizer.ggml.tokens")
        .and_then(|v| v.as_array())
        .map(|a| a.len() as u64)
        .unwrap();
    let mut w = GgufWriter::new();
    let kv: [(&str, Value); 10] = [
        ("general.architecture", Value::Str("llama".into())),
        ("general.name", Value::Str("abort".into())),
        ("llama.context_length", Value::U32(256)),
        ("llama.embedding_length", Value::U32(n_embd as u32)),
        ("llama.block_count", Value::U32(2)),
        ("llama.feed_forward_length", Value::U32(n_ff as u32)),
        ("llama.attention.head_count", Value::U32(2)),
        ("llama.attention.head_count_kv", Value::U32(1)),
        ("llama.rope.freq_base", Value::F32(10000.0)),
        ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-6)),
    ];
    for (k, v) in kv {
        w.add_kv(k, v).unwrap();
    }
    w.add_kv("general.file_type", Value::U32(0)).unwrap();
    for (k, v) in &vocab.kv {
        if k.starts_with("tokenizer.") {
            w.add_kv(k.clone(), v.clone()).unwrap();
        }
    }
    let mut list: Vec<(String, Vec<u64>)> = vec![
        ("token_embd.weight".into(), vec![n_embd, n_vocab]),
        ("output_norm.weight".into(), vec![n_embd]),
        ("output.weight".into(), vec![n_embd, n_vocab]),
    ];
    for il in 0..2 {
        let b = |n: &str| format!("blk.{il}.{n}");
        list.push((b("attn_norm.weight"), vec![n_embd]));
        list.push((b("attn_q.weight"), vec![n_embd, n_embd]));
        list.push((b("attn_k.weight"), vec![n_embd, n_kv]));
        list.push((b("attn_v.weight"), vec![n_embd, n_kv]));
        list.push((b("attn_output.weight"), vec![n_embd, n_embd]));
        list.push((b("ffn_norm.weight"), vec![n_embd]));
        list.push((b("ffn_gate.weight"), vec![n_embd, n_ff]));
        list.push((b("ffn_down.weight"), vec![n_ff, n_embd]));
        list.push((b("ffn_up.weight"), vec![n_embd, n_ff]));
    }
    for (n, s) in &list {
        w.add_tensor(n.clone(), ggml::Type::F32, s).unwrap();
    }
    let mut f = w.create(&path).unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for (n, s) in &list {
        let norm = n.contains("norm");
        let bytes: Vec<u8> = (0..s.iter().product::<u64>())
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

fn context(abort: Option<AbortCallback>) -> Context {
    let p = ContextParams {
        n_ctx: 256,
        n_batch: 64,
        n_ubatch: N_UBATCH as u32,
        n_threads: 2,
        n_threads_batch: 2,
        abort_callback: abort,
        ..Default::default()
    };
    // loaded first: the load captures its log too, and captures do not nest
    let m = model();
    common::capture(|| Context::new(m, p)).0.unwrap()
}

fn tokens(n: usize) -> Vec<i32> {
    (0..n as i32).map(|i| 100 + 37 * i).collect()
}

/// An abort callback that counts its calls and answers true from call `stop_at` on (never
/// with 0).
fn counting(stop_at: usize) -> (AbortCallback, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let cb: AbortCallback = Arc::new(move || {
        let n = c.fetch_add(1, Ordering::SeqCst) + 1;
        stop_at != 0 && n >= stop_at
    });
    (cb, calls)
}

/// How many times one ubatch of N_UBATCH tokens asks the callback (before it and after each
/// graph node and split), from an empty cache.
fn checks_per_ubatch() -> usize {
    let (cb, calls) = counting(0);
    let mut ctx = context(Some(cb));
    assert_eq!(ctx.decode(&Batch::get_one(&tokens(N_UBATCH))), 0);
    calls.load(Ordering::SeqCst)
}

fn lines(log: &[(ggml::log::LogLevel, String)]) -> String {
    common::text(log, false).join("\n")
}

#[test]
fn an_abort_between_ubatches_keeps_the_ones_computed() {
    let per_ubatch = checks_per_ubatch();
    assert!(
        per_ubatch > 2,
        "checked before the ubatch and after its nodes"
    );
    let all = tokens(2 * N_UBATCH);

    // the first check after the first ubatch is the one before the second
    let (cb, calls) = counting(per_ubatch + 1);
    let mut ctx = context(Some(cb));
    let (rc, log) = common::capture(|| ctx.decode(&Batch::get_one(&all)));
    assert_eq!(rc, 2);
    assert_eq!(calls.load(Ordering::SeqCst), per_ubatch + 1);
    assert_eq!(ctx.memory_seq_pos_max(0), N_UBATCH as i32 - 1);
    let log = lines(&log);
    assert_eq!(
        log,
        format!("decode: removing memory module entries for seq_id = 0, pos = [{N_UBATCH}, +inf)"),
        "no graph of the second ubatch ran"
    );
    // an aborted batch has no outputs
    let (none, log) = common::capture(|| ctx.get_logits_ith(-1).is_none());
    assert!(none);
    assert_eq!(
        lines(&log),
        "get_logits_ith: invalid logits id -1, reason: negative index out of range [0, 0)"
    );

    // the rest of the batch continues the cache: the same logits as the whole batch at once
    ctx.set_abort_callback(None);
    assert_eq!(ctx.decode(&Batch::get_one(&all[N_UBATCH..])), 0);
    assert_eq!(ctx.memory_seq_pos_max(0), 2 * N_UBATCH as i32 - 1);
    let resumed = ctx.get_logits_ith(-1).unwrap().to_vec();
    let mut whole = context(None);
    assert_eq!(whole.decode(&Batch::get_one(&all)), 0);
    assert_eq!(whole.get_logits_ith(-1).unwrap(), &resumed[..]);
}

#[test]
fn an_abort_inside_a_ubatch_forgets_that_ubatch_only() {
    let per_ubatch = checks_per_ubatch();
    // the second ubatch passes its own check, computes one node and stops
    let (cb, calls) = counting(per_ubatch + 2);
    let mut ctx = context(Some(cb));
    let all = tokens(3 * N_UBATCH);
    let (rc, log) = common::capture(|| ctx.decode(&Batch::get_one(&all)));
    assert_eq!(rc, 2);
    assert_eq!(calls.load(Ordering::SeqCst), per_ubatch + 2);
    assert_eq!(ctx.memory_seq_pos_max(0), N_UBATCH as i32 - 1);
    assert_eq!(
        lines(&log),
        [
            "graph_compute: ggml_backend_sched_graph_compute_async failed with error 1".to_string(),
            "process_ubatch: failed to compute graph, compute status: 1".to_string(),
            format!(
                "decode: removing memory module entries for seq_id = 0, pos = [{N_UBATCH}, +inf)"
            ),
        ]
        .join("\n")
    );
}

#[test]
fn an_abort_already_raised_stops_before_any_compute() {
    let (cb, calls) = counting(1);
    let mut ctx = context(Some(cb));
    let (rc, log) = common::capture(|| ctx.decode(&Batch::get_one(&tokens(40))));
    assert_eq!(rc, 2);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(ctx.memory_seq_pos_max(0), -1);
    assert_eq!(
        lines(&log),
        "decode: removing memory module entries for seq_id = 0, pos = [0, +inf)"
    );
    // a later decode without the abort starts from an empty cache
    ctx.set_abort_callback(None);
    assert_eq!(ctx.decode(&Batch::get_one(&tokens(3))), 0);
    assert_eq!(ctx.memory_seq_pos_max(0), 2);
}
