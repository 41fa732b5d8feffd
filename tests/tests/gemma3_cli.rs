//! gemma3 end to end on the real Gemma 3 270M Q4_K_M (scripts/fetch-test-models --gemma3)
//! against what llama.cpp printed for it (tests/fixtures/gemma3, commands in its README): the
//! startup-log figures of both KV caches (iSWA), the compute buffer and the graph, the greedy
//! continuations, and the perplexity.

use std::path::{Path, PathBuf};
use std::process::Command;

const PROMPTS: [(&str, &str); 3] = [
    ("The capital of France is", "The_capital_"),
    ("Once upon a time", "Once_upon_a_"),
    ("def fibonacci(n):", "def_fibonacc"),
];

/// The model, or None after test_fixtures::skip (a failure under CI=true).
fn model() -> Option<PathBuf> {
    let p = test_fixtures::cache_dir().join("gemma-3-270m-q4_k_m.gguf");
    if p.is_file() {
        return Some(p);
    }
    test_fixtures::skip(&format!(
        "{} is missing (run scripts/fetch-test-models --gemma3)",
        p.display()
    ));
    None
}

fn fixture(name: &str) -> String {
    let p = test_fixtures::repo_root()
        .join("tests/fixtures/gemma3")
        .join(name);
    // llama.cpp's output on this CPU's SIMD class (avx512/ on AVX-512 CPUs, see the README)
    let p = test_fixtures::simd_fixture(&p);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// llama-completion's greedy continuation (stdout) and its log (stderr).
fn complete(model: &Path, prompt: &str, extra: &[&str]) -> (String, String) {
    let bin = test_fixtures::bin("llama-completion", "llama-completion");
    let m = model.to_str().unwrap();
    let mut args = vec![
        "-m", m, "-p", prompt, "-n", "32", "--temp", "0", "-no-cnv", "-c", "512", "-t", "2",
    ];
    args.extend_from_slice(extra);
    let o = Command::new(bin)
        .args(&args)
        .env_remove("LLAMA_ARG_MODEL")
        .output()
        .expect("run llama-completion");
    assert!(o.status.success(), "{args:?}:\n{}", text(&o.stderr));
    (text(&o.stdout), text(&o.stderr))
}

/// The lines of a log that carry the figures the test compares, timestamps removed.
fn figure_lines(log: &str) -> Vec<String> {
    let keep = [
        "llama_kv_cache_iswa:",
        "llama_kv_cache:",
        "compute buffer size",
        "graph: nodes",
        "output buffer size",
        "print_info: n_swa",
        "print_info: is_swa_any",
        "print_info: n_rot",
        "print_info: freq_base_swa",
        "print_info: f_attn_scale",
        "print_info: model type",
    ];
    log.lines()
        .filter(|l| keep.iter().any(|k| l.contains(k)))
        .map(|l| match l.find(" I ") {
            Some(i) => l[i + 3..].to_string(),
            None => l.to_string(),
        })
        .collect()
}

#[test]
fn startup_figures_of_both_kv_caches_match_llama_cpp() {
    let Some(m) = model() else { return };
    let (_, log) = complete(&m, PROMPTS[0].0, &["-lv", "4"]);
    let want = figure_lines(&fixture("completion-lv4.log"));
    assert!(
        want.iter().any(|l| l.contains("creating     SWA KV cache")),
        "fixture lacks the iSWA lines"
    );
    assert_eq!(figure_lines(&log), want);
}

#[test]
fn greedy_text_matches_llama_cpp_without_flash_attention() {
    let Some(m) = model() else { return };
    for (prompt, tag) in PROMPTS {
        let (out, _) = complete(&m, prompt, &["-fa", "off"]);
        assert_eq!(
            out,
            fixture(&format!("greedy-fa-off-{tag}.txt")),
            "prompt {prompt:?}"
        );
    }
}

/// Flash attention is the default here, as in llama.cpp.
#[test]
fn greedy_text_with_flash_attention_matches_llama_cpp() {
    let Some(m) = model() else { return };
    for (prompt, tag) in PROMPTS {
        let (out, _) = complete(&m, prompt, &[]);
        assert_eq!(
            out,
            fixture(&format!("greedy-{tag}.txt")),
            "prompt {prompt:?}"
        );
    }
}

/// The swa cache follows llama_kv_cache_iswa's size rule: with a 256-token ubatch it holds
/// pad(512 + 256, 256) = 768 cells of a 1024-cell context; --swa-full makes it 1024.
#[test]
fn swa_cache_size_follows_the_window_and_swa_full() {
    let Some(m) = model() else { return };
    let sizes = |extra: &[&str]| {
        let mut args = vec!["-c", "1024", "-ub", "256", "-n", "1", "-lv", "4"];
        args.extend_from_slice(extra);
        let (_, log) = complete(&m, "Hi", &args);
        log.lines()
            .filter(|l| l.contains("llama_kv_cache_iswa: creating"))
            .map(|l| l.rsplit("size = ").next().unwrap_or("").to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(sizes(&[]), ["1024 cells", "768 cells"]);
    assert_eq!(sizes(&["--swa-full"]), ["1024 cells", "1024 cells"]);
}

fn final_ppl(s: &str) -> f64 {
    let line = s
        .lines()
        .find(|l| l.contains("Final estimate: PPL = "))
        .unwrap_or_else(|| panic!("no final estimate in:\n{s}"));
    let v = line.split("PPL = ").nth(1).unwrap();
    v.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn perplexity_is_llama_cpp_s_within_a_twentieth_of_a_percent() {
    let Some(m) = model() else { return };
    let bin = test_fixtures::bin("llama-perplexity", "llama-perplexity");
    let text_file = test_fixtures::shared_dir().join("reference/text/gpl-3.txt");
    let o = Command::new(bin)
        .args(["-m", m.to_str().unwrap(), "-f", text_file.to_str().unwrap()])
        .args(["-c", "512", "--chunks", "4", "-t", "2"])
        .output()
        .expect("run llama-perplexity");
    let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{all}");
    let want = final_ppl(&fixture("perplexity-c512-chunks4.log"));
    let got = final_ppl(&all);
    assert!(
        (got - want).abs() <= 5e-4 * want,
        "PPL {got} vs llama.cpp's {want}"
    );
}
