//! The startup log of model loading and context creation against llama.cpp's (-lv 4) logs of
//! the reference model: every line libllama's core prints, figures included.

mod common;

use llama::{Context, ContextParams, FlashAttnType};

/// Lines printed by the model loader, the vocabulary, print_info, load_tensors and context
/// creation (timings dropped).
fn core_lines(lines: &[String]) -> Vec<String> {
    let prefixes = [
        "llama_model_loader:",
        "load:",
        "init_tokenizer:",
        "llama_model_load:",
        "print_info:",
        "load_tensors:",
        "llama_context:",
        "llama_kv_cache:",
        "sched_reserve:",
        "resolve_fused_ops:",
        ".",
    ];
    lines
        .iter()
        .filter(|l| prefixes.iter().any(|p| l.starts_with(p)))
        .filter(|l| !l.contains("reserve took"))
        .cloned()
        .collect()
}

/// The reference log's lines from the real (second) model load on, up to the first decode.
fn reference(name: &str) -> Vec<String> {
    let lines = common::reference_log(name);
    // the fit pass loads the model a first time without allocation: skip to the real load
    let start = lines
        .iter()
        .rposition(|l| l.starts_with("llama_model_loader: loaded meta data"))
        .unwrap();
    let end = lines
        .iter()
        .position(|l| l.contains("system_info:"))
        .unwrap();
    core_lines(&lines[start..end])
}

fn context_log(params: ContextParams) -> Vec<String> {
    let loaded = common::model().expect("model");
    let (ctx, log) = common::capture(|| Context::new(loaded.model.clone(), params));
    ctx.expect("context");
    core_lines(&common::text(&log, false))
}

fn assert_lines(ours: &[String], want: &[String]) {
    for (i, (a, b)) in ours.iter().zip(want).enumerate() {
        assert_eq!(a, b, "line {i} differs");
    }
    assert_eq!(
        ours.len(),
        want.len(),
        "ours:\n{}\nwant:\n{}",
        ours.join("\n"),
        want.join("\n")
    );
}

#[test]
fn model_load_log_matches_llama_cpp() {
    let Some(loaded) = common::model() else {
        return;
    };
    let want = reference("completion-lv4.log");
    let ctx_start = want
        .iter()
        .position(|l| l.starts_with("llama_context:"))
        .unwrap();
    // the reference ran in the models' folder
    let path = test_fixtures::reference_model();
    let dir = format!("{}/", path.parent().unwrap().display());
    let ours: Vec<String> = core_lines(&common::text(&loaded.log, false))
        .iter()
        .map(|l| l.replace(&dir, ""))
        .collect();
    assert_lines(&ours, &want[..ctx_start]);
    assert_eq!(loaded.model.desc(), "llama ?B all F32");
    assert_eq!(loaded.model.n_params(), 80_611_584);
    assert_eq!(
        loaded.model.buffer_sizes(),
        vec![("CPU_Mapped".to_string(), 322_446_336)]
    );
}

fn check_context(log: &str, params: ContextParams) {
    if common::model().is_none() {
        return;
    }
    let want = reference(log);
    let ctx_start = want
        .iter()
        .position(|l| l.starts_with("llama_context:"))
        .unwrap();
    assert_lines(&context_log(params), &want[ctx_start..]);
}

#[test]
fn context_log_default_flash_attn_auto() {
    check_context(
        "completion-lv4.log",
        ContextParams {
            n_ctx: 4096,
            ..Default::default()
        },
    );
}

#[test]
fn context_log_flash_attn_off() {
    let p = ContextParams {
        n_ctx: 4096,
        flash_attn_type: FlashAttnType::Disabled,
        ..Default::default()
    };
    check_context("completion-fa-off.log", p);
}

#[test]
fn context_log_ubatch_128_and_32() {
    check_context(
        "completion-ub128.log",
        ContextParams {
            n_ctx: 4096,
            n_ubatch: 128,
            ..Default::default()
        },
    );
    check_context(
        "completion-ub32.log",
        ContextParams {
            n_ctx: 4096,
            n_ubatch: 32,
            ..Default::default()
        },
    );
}

#[test]
fn context_log_kv_q8_0() {
    let p = ContextParams {
        n_ctx: 4096,
        type_k: ggml::Type::Q8_0,
        type_v: ggml::Type::Q8_0,
        ..Default::default()
    };
    check_context("completion-kv-q8_0.log", p);
}
