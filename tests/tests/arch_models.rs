//! Architectures beyond llama on random-weight models that our llama-gguf-new writes (the
//! commands of tests/fixtures/archs/README.md): llama.cpp's greedy text, graph size and
//! perplexity for each, F32 and Q8_0.

use std::path::PathBuf;
use std::process::Command;
use test_fixtures::llama_logs::{self, graph_line};
use test_fixtures::text;

/// Each model: its fixture name, architecture and the llama-gguf-new flags it adds to the
/// common ones. `--swa 32` gives a 32-token window to the architectures with one (olmo2 gets
/// one only with it: OLMo 3); a phi3 named "phi3" makes llama.cpp's vocabulary look up tokens,
/// "</s>" and "<unk>", that the built-in vocabulary does not have. smollm3 gets four layers,
/// for its rope-less fourth one, command-r-64 64 for its head norms; mistral3-yarn has
/// Ministral 3's YaRN keys (factor 4, betas 16 and 2); glm4-nextn one NextN layer after the two
/// (loaded, skipped: deepseek2_models.rs checks its startup lines).
const MODELS: [(&str, &str, &[&str]); 18] = [
    ("qwen3", "qwen3", &[]),
    ("gemma2", "gemma2", &["--swa", "32"]),
    ("gemma", "gemma", &[]),
    ("phi3", "phi3", &["--name", "random-model"]),
    ("granite", "granite", &[]),
    ("olmo2", "olmo2", &[]),
    ("olmo2-swa", "olmo2", &["--swa", "32"]),
    ("starcoder2", "starcoder2", &[]),
    ("stablelm", "stablelm", &[]),
    ("command-r", "command-r", &[]),
    ("command-r-64", "command-r", &[]),
    ("cohere2", "cohere2", &["--swa", "32"]),
    ("glm4", "glm4", &[]),
    ("glm4-nextn", "glm4", &["--nextn", "1"]),
    ("exaone", "exaone", &[]),
    ("smollm3", "smollm3", &[]),
    ("mistral3", "mistral3", &[]),
    ("mistral3-yarn", "mistral3", &["--yarn", "4"]),
];
const TYPES: [(&str, f64); 2] = [("f32", 1e-4), ("q8_0", 1e-3)];

fn fixture(name: &str) -> Vec<u8> {
    llama_logs::fixture("archs", name)
}

/// The model the fixtures were recorded on, written again by llama-gguf-new; `user` keeps the
/// file of each test apart (the tests of this binary run at once in one process).
fn model((label, arch, extra): (&str, &str, &[&str]), ty: &str, user: &str) -> PathBuf {
    let layers = match label {
        "smollm3" => "4",
        "command-r-64" => "64",
        _ => "2",
    };
    let dir = test_fixtures::cache_dir().join("archs");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("{label}-{ty}-{user}-{}.gguf", std::process::id()));
    let bin = test_fixtures::bin("llama-gguf-new", "llama-gguf-new");
    #[rustfmt::skip]
    let o = Command::new(bin)
        .args(["--arch", arch, "--layers", layers, "--embd", "128", "--heads", "4", "--heads-kv", "2",
            "--ff", "256", "--ctx", "512", "--vocab-size", "1000", "--type", ty, "--seed", "7",
            "--quiet", "-o", out.to_str().unwrap()])
        .args(extra)
        .output()
        .expect("run llama-gguf-new");
    assert!(o.status.success(), "llama-gguf-new: {}", text(&o.stderr));
    out
}

#[test]
fn greedy_text_and_graph_match_llama_cpp() {
    let bin = test_fixtures::bin("llama-completion", "llama-completion");
    for spec in MODELS {
        let label = spec.0;
        for (ty, _) in TYPES {
            let m = model(spec, ty, "greedy");
            #[rustfmt::skip]
            let o = Command::new(&bin)
                .args(["-m", m.to_str().unwrap(), "-p", "Once upon a time", "-n", "16", "--temp", "0",
                    "-no-cnv", "-c", "256", "-t", "2", "-lv", "4"])
                .env_remove("LLAMA_ARG_MODEL")
                .output()
                .expect("run llama-completion");
            assert!(o.status.success(), "{label} {ty}: {}", text(&o.stderr));
            // llama.cpp writes a token's stray UTF-8 byte as is, our tool as U+FFFD
            let want = text(&fixture(&format!("{label}-{ty}.greedy.txt")));
            assert_eq!(text(&o.stdout), want, "{label} {ty}");
            let want_log = text(&fixture(&format!("{label}-{ty}.greedy.log")));
            assert_eq!(
                graph_line(&text(&o.stderr)),
                graph_line(&want_log),
                "{label} {ty}"
            );
            // the context's YaRN attention factor, where llama.cpp sets one
            let yarn = |log: &str| -> Vec<String> {
                log.lines()
                    .filter_map(|l| l.split_once("setting new yarn_attn_factor"))
                    .map(|(_, r)| r.to_string())
                    .collect()
            };
            assert_eq!(yarn(&text(&o.stderr)), yarn(&want_log), "{label} {ty}");
            let _ = std::fs::remove_file(m);
        }
    }
}

#[test]
fn perplexity_matches_llama_cpp() {
    for spec in MODELS {
        let label = spec.0;
        for (ty, rel) in TYPES {
            let m = model(spec, ty, "ppl");
            let all = llama_logs::perplexity_run(&m, &format!("{label} {ty}"));
            let want_log = text(&fixture(&format!("{label}-{ty}.perplexity.log")));
            let what = format!("{label} {ty}");
            llama_logs::assert_ppl_close(&all, &want_log, rel, None, &what);
            let _ = std::fs::remove_file(m);
        }
    }
}
