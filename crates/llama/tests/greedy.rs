//! Greedy generation on the reference model reproduces llama-completion's text
//! (`-p "Hello my name is" -n 24 --temp 0 -c 256`), and decode's batch handling: outputs for
//! requested positions only, several sequences in one batch, sequence operations.

mod common;

use llama::{Batch, Context, ContextParams};

/// "Hello my name is" in the Qwen2 vocabulary.
const PROMPT: [i32; 4] = [9707, 847, 829, 374];

fn argmax(l: &[f32]) -> i32 {
    let mut best = 0;
    for (i, &v) in l.iter().enumerate() {
        if v > l[best] {
            best = i;
        }
    }
    best as i32
}

fn expected_continuation(log: &str) -> String {
    let lines = common::reference_log(log);
    let l = lines
        .iter()
        .find(|l| l.starts_with("Hello my name is"))
        .unwrap();
    l["Hello my name is".len()..].to_string()
}

fn new_ctx(n_ctx: u32, n_seq_max: u32) -> Context {
    let loaded = common::model().unwrap();
    let p = ContextParams {
        n_ctx,
        n_seq_max,
        n_threads: 2,
        n_threads_batch: 2,
        ..Default::default()
    };
    common::capture(|| Context::new(loaded.model.clone(), p))
        .0
        .unwrap()
}

#[test]
fn greedy_continuation_matches_llama_cpp() {
    if common::model().is_none() {
        return;
    }
    let vocab = common::model().unwrap().model.vocab();
    // the Qwen2 tokenizer adds no BOS
    assert_eq!(vocab.tokenize(b"Hello my name is", true, true), PROMPT);
    let mut ctx = new_ctx(256, 1);
    assert_eq!(ctx.decode(&Batch::get_one(&PROMPT)), 0);
    let mut out = Vec::new();
    for _ in 0..24 {
        let logits = ctx.get_logits_ith(-1).unwrap();
        assert!(logits.iter().all(|v| v.is_finite()));
        let t = argmax(logits);
        out.extend_from_slice(&vocab.token_to_piece(t, 0, false));
        assert_eq!(ctx.decode(&Batch::get_one(&[t])), 0);
    }
    assert_eq!(
        String::from_utf8_lossy(&out),
        expected_continuation("greedy-f32.log")
    );
    let perf = ctx.perf();
    assert_eq!((perf.n_p_eval, perf.n_eval), (4, 24));
    // the first single-token step builds its graph, the next 23 reuse it
    assert_eq!(perf.n_reused, 23);
}

#[test]
fn batched_sequences_match_one_by_one() {
    if common::model().is_none() {
        return;
    }
    // the reference: the prompt alone
    let mut solo = new_ctx(256, 1);
    assert_eq!(solo.decode(&Batch::get_one(&PROMPT)), 0);
    let want = solo.get_logits_ith(-1).unwrap().to_vec();

    // two sequences with the same prompt in one batch, outputs only at their last tokens
    let mut ctx = new_ctx(512, 2);
    let mut b = Batch::new();
    for s in 0..2 {
        for (i, &t) in PROMPT.iter().enumerate() {
            b.add(t, i as i32, &[s], i == PROMPT.len() - 1);
        }
    }
    assert_eq!(ctx.decode(&b), 0);
    assert_eq!(ctx.n_outputs(), 2);
    assert!(
        ctx.get_logits_ith(0).is_none(),
        "no logits were requested for token 0"
    );
    for i in [3, 7] {
        let got = ctx.get_logits_ith(i).unwrap();
        let diff = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(diff < 1e-3, "sequence of token {i}: max diff {diff}");
        assert_eq!(argmax(got), argmax(&want));
    }
    assert_eq!(ctx.memory_seq_pos_max(0), 3);
    assert_eq!(ctx.memory_seq_pos_max(1), 3);

    // remove sequence 1, keep going on sequence 0 with positions filled in
    assert!(ctx.memory_seq_rm(1, -1, -1));
    assert_eq!(ctx.memory_seq_pos_max(1), -1);
    let next = argmax(&want);
    assert_eq!(ctx.decode(&Batch::get_one(&[next])), 0);
    assert_eq!(ctx.memory_seq_pos_max(0), 4);

    // copy 0 to 1 and continue 1 from there
    ctx.memory_seq_cp(0, 1, -1, -1);
    assert_eq!(ctx.memory_seq_pos_max(1), 4);
    let mut b = Batch::new();
    b.add(next, 5, &[1], true);
    assert_eq!(ctx.decode(&b), 0);
    ctx.memory_seq_keep(1);
    assert_eq!(ctx.memory_seq_pos_max(0), -1);
    assert_eq!(ctx.memory_seq_pos_max(1), 5);
}

#[test]
fn invalid_batches_and_full_cache() {
    if common::model().is_none() {
        return;
    }
    let mut ctx = new_ctx(256, 1);
    let (rc, _) = common::capture(|| ctx.decode(&Batch::new()));
    assert_eq!(rc, -1, "empty batch");
    let (rc, _) = common::capture(|| ctx.decode(&Batch::get_one(&[200_000])));
    assert_eq!(rc, -1, "token out of vocabulary");
    let mut b = Batch::new();
    b.add(1, 0, &[3], true);
    let (rc, _) = common::capture(|| ctx.decode(&b));
    assert_eq!(rc, -1, "sequence id beyond n_seq_max");
    // 256 cells: a 300-token batch cannot fit
    let (rc, _) = common::capture(|| ctx.decode(&Batch::get_one(&[11; 300])));
    assert_eq!(rc, 1, "no KV slot");
    assert_eq!(
        ctx.memory_seq_pos_max(0),
        -1,
        "a failed batch leaves the cache as it was"
    );
}

#[test]
fn shifted_sequence_continues_like_a_fresh_one() {
    if common::model().is_none() {
        return;
    }
    // rope makes attention depend on relative positions only: a prompt moved 10 positions
    // forward (its cached keys re-roped) must continue as the unmoved one does
    let mut fresh = new_ctx(256, 1);
    assert_eq!(fresh.decode(&Batch::get_one(&PROMPT)), 0);
    let next = argmax(fresh.get_logits_ith(-1).unwrap());
    assert_eq!(fresh.decode(&Batch::get_one(&[next])), 0);
    let want = fresh.get_logits_ith(-1).unwrap().to_vec();

    let mut ctx = new_ctx(256, 1);
    assert_eq!(ctx.decode(&Batch::get_one(&PROMPT)), 0);
    ctx.memory_seq_add(0, 0, -1, 10);
    assert_eq!(ctx.memory_seq_pos_min(0), 10);
    assert_eq!(ctx.memory_seq_pos_max(0), 13);
    assert_eq!(ctx.decode(&Batch::get_one(&[next])), 0);
    assert_eq!(ctx.memory_seq_pos_max(0), 14);
    let got = ctx.get_logits_ith(-1).unwrap();
    let diff = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(diff < 2e-2, "max diff {diff}");
}

/// The F16 model (make-tiny-model.py --f16 writes the same tensor data as llama-quantize's F16
/// file) continues as llama.cpp's greedy-f16.log. Ignored by default: generating the model
/// takes about a minute the first time (`cargo test -p llama --test greedy -- --ignored`).
#[test]
#[ignore]
fn greedy_continuation_matches_llama_cpp_f16() {
    let Some(path) =
        test_fixtures::generated_model_or_skip("tiny-random-qwen2vocab-f16-py.gguf", &["--f16"])
    else {
        return;
    };
    llama::backend_init();
    let (m, _) = common::capture(|| llama::Model::load(&path, &llama::ModelParams::default()));
    let m = m.unwrap();
    assert_eq!(m.ftype_name(), "F16");
    let p = ContextParams {
        n_ctx: 256,
        n_threads: 2,
        n_threads_batch: 2,
        ..Default::default()
    };
    let mut ctx = common::capture(|| Context::new(m.clone(), p)).0.unwrap();
    assert_eq!(ctx.decode(&Batch::get_one(&PROMPT)), 0);
    let mut out = Vec::new();
    for _ in 0..24 {
        let t = argmax(ctx.get_logits_ith(-1).unwrap());
        out.extend_from_slice(&m.vocab().token_to_piece(t, 0, false));
        assert_eq!(ctx.decode(&Batch::get_one(&[t])), 0);
    }
    assert_eq!(
        String::from_utf8_lossy(&out),
        expected_continuation("greedy-f16.log")
    );
}

#[test]
fn ubatch_splitting_and_all_logits() {
    if common::model().is_none() {
        return;
    }
    let mut solo = new_ctx(256, 1);
    let mut b = Batch::new();
    for (i, &t) in PROMPT.iter().enumerate() {
        b.add(t, i as i32, &[0], true);
    }
    assert_eq!(solo.decode(&b), 0);
    assert_eq!(solo.get_logits().len(), 4 * 151936);
    let want: Vec<Vec<f32>> = (0..4)
        .map(|i| solo.get_logits_ith(i).unwrap().to_vec())
        .collect();

    // the same batch in ubatches of 3 and 1 tokens
    let loaded = common::model().unwrap();
    let p = ContextParams {
        n_ctx: 256,
        n_ubatch: 3,
        n_threads: 2,
        n_threads_batch: 2,
        ..Default::default()
    };
    let mut ctx = common::capture(|| Context::new(loaded.model.clone(), p))
        .0
        .unwrap();
    assert_eq!(ctx.n_ubatch(), 3);
    assert_eq!(ctx.decode(&b), 0);
    for (i, w) in want.iter().enumerate() {
        let got = ctx.get_logits_ith(i as i32).unwrap();
        let diff = got
            .iter()
            .zip(w)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(diff < 1e-3, "token {i}: max diff {diff}");
    }
    assert_eq!(ctx.get_logits_ith(-1), ctx.get_logits_ith(3));
    assert!(ctx.get_logits_ith(4).is_none());
    assert!(ctx.get_logits_ith(-5).is_none());
}

#[test]
fn perf_and_memory_breakdown() {
    if common::model().is_none() {
        return;
    }
    let loaded = common::model().unwrap();
    let p = ContextParams {
        n_ctx: 4096,
        no_perf: false,
        n_threads: 2,
        n_threads_batch: 2,
        ..Default::default()
    };
    let mut ctx = common::capture(|| Context::new(loaded.model.clone(), p))
        .0
        .unwrap();
    let rows = ctx.memory_breakdown();
    let mib = |f: fn(&llama::MemoryBreakdownRow) -> usize| {
        rows.iter().map(f).sum::<usize>() as f64 / 1048576.0
    };
    assert_eq!(format!("{:.2}", mib(|r| r.model)), "307.51");
    assert_eq!(format!("{:.2}", mib(|r| r.context)), "4.00");
    assert_eq!(format!("{:.2}", mib(|r| r.compute)), "297.75");
    assert!(rows.iter().all(|r| r.is_host && r.device.is_none()));
    assert_eq!(ctx.graph_nodes_splits(), (130, 1));

    assert_eq!(ctx.decode(&Batch::get_one(&PROMPT)), 0);
    for t in [13, 14, 15] {
        assert_eq!(ctx.decode(&Batch::get_one(&[t])), 0);
    }
    let d = ctx.perf();
    assert_eq!((d.n_p_eval, d.n_eval, d.n_reused), (4, 3, 2));
    assert!(d.t_p_eval_ms > 0.0 && d.t_eval_ms > 0.0 && d.t_load_ms > 0.0);
    let (_, log) = common::capture(|| ctx.perf_print());
    let lines = common::text(&log, false);
    assert_eq!(lines.len(), 5);
    assert!(lines[1].starts_with("llama_perf_context_print: prompt eval time = "));
    assert!(lines[1].contains(" ms /     4 tokens ("), "{}", lines[1]);
    assert!(lines[2].contains(" ms /     3 runs   ("), "{}", lines[2]);
    assert!(lines[3].contains(" ms /     7 tokens"), "{}", lines[3]);
    assert_eq!(
        lines[4],
        "llama_perf_context_print:    graphs reused =          2"
    );
    ctx.perf_reset();
    assert_eq!(ctx.perf().n_reused, 0);
}

#[test]
fn embeddings_are_the_hidden_states_behind_the_logits() {
    if common::model().is_none() {
        return;
    }
    let loaded = common::model().unwrap();
    let p = ContextParams {
        n_ctx: 256,
        embeddings: true,
        n_threads: 2,
        n_threads_batch: 2,
        ..Default::default()
    };
    let mut ctx = common::capture(|| Context::new(loaded.model.clone(), p))
        .0
        .unwrap();
    assert_eq!(ctx.decode(&Batch::get_one(&PROMPT)), 0);
    // with embeddings every token is an output
    assert_eq!(ctx.n_outputs(), 4);
    assert_eq!(ctx.get_embeddings().len(), 4 * 256);
    let e = ctx.get_embeddings_ith(-1).unwrap().to_vec();
    let logits = ctx.get_logits_ith(-1).unwrap();
    // logits = output.weight x embeddings, for a few vocabulary rows
    let w = loaded.model.weights();
    let out = &w[w.find("output.weight").unwrap()];
    for row in [0usize, 26300, 151935] {
        let mut bytes = vec![0u8; 256 * 4];
        ggml::backend::get_tensor(out, &mut bytes, row * 256 * 4).unwrap();
        let dot: f32 = bytes
            .chunks_exact(4)
            .zip(&e)
            .map(|(c, x)| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) * x)
            .sum();
        assert!(
            (dot - logits[row]).abs() < 1e-3,
            "row {row}: {dot} vs {}",
            logits[row]
        );
    }
}
