//! The debug-level startup lines (`-v`) against llama.cpp's completion-verbose.log: the
//! parameter-fitting pass (a no_alloc load and context) and the real load.

mod common;

use llama::{Context, ContextParams, Model, ModelParams};

fn core_lines(lines: &[String]) -> Vec<String> {
    let prefixes = [
        "llama_model_loader:",
        "load:",
        "init_tokenizer:",
        "llama_model_load:",
        "print_info:",
        "load_tensors:",
        "create_tensor:",
        "done_getting_tensors:",
        "llama_context:",
        "set_abort_callback:",
        "llama_kv_cache:",
        "sched_reserve:",
        "graph_reserve:",
        "llama_graph_n_input_tensors:",
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

/// The verbose reference split at its model loads: [fit pass, real load].
fn reference_blocks() -> Vec<Vec<String>> {
    let lines = common::reference_log("completion-verbose.log");
    let starts: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("llama_model_loader: loaded meta data"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(starts.len(), 2);
    let end = lines
        .iter()
        .position(|l| l.contains("system_info:"))
        .unwrap();
    let fit_end = lines
        .iter()
        .position(|l| l.starts_with("common_memory_breakdown_print"))
        .unwrap();
    vec![
        core_lines(&lines[starts[0]..fit_end]),
        core_lines(&lines[starts[1]..end]),
    ]
}

fn run(no_alloc: bool) -> Vec<String> {
    let path = test_fixtures::reference_model();
    llama::backend_init();
    let (out, log) = common::capture(|| {
        let m = Model::load(
            &path,
            &ModelParams {
                no_alloc,
                ..Default::default()
            },
        )
        .unwrap();
        let ctx = Context::new(
            m,
            ContextParams {
                n_ctx: 4096,
                ..Default::default()
            },
        )
        .unwrap();
        ctx.memory_breakdown()
    });
    if no_alloc {
        // what the fit pass projects: 609 = 307 + 4 + 297 MiB
        let mib =
            |f: fn(&llama::MemoryBreakdownRow) -> usize| out.iter().map(f).sum::<usize>() >> 20;
        assert_eq!(
            (mib(|r| r.model), mib(|r| r.context), mib(|r| r.compute)),
            (307, 4, 297)
        );
    }
    let dir = format!("{}/", path.parent().unwrap().display());
    core_lines(&common::text(&log, true))
        .iter()
        .map(|l| l.replace(&dir, ""))
        .collect()
}

fn assert_lines(ours: &[String], want: &[String]) {
    for (i, (a, b)) in ours.iter().zip(want).enumerate() {
        assert_eq!(a, b, "line {i} differs");
    }
    assert_eq!(ours.len(), want.len());
}

#[test]
fn debug_lines_of_the_fit_pass_and_the_load() {
    if test_fixtures::reference_model_or_skip().is_none() {
        return;
    }
    let mut want = reference_blocks();
    llama::backend_init();
    let cpu = ggml::backend::dev_by_name("CPU").unwrap();
    if cpu.extra_buffer_types().is_empty() {
        // without a CPU_REPACK buffer type no weight falls back from it
        eprintln!("note: the CPU backend has no extra buffer types; skipping the CPU_REPACK fallback line");
        for b in want.iter_mut() {
            b.retain(|l| !l.starts_with("done_getting_tensors:"));
        }
    }
    assert_lines(&run(true), &want[0]);
    assert_lines(&run(false), &want[1]);
}
