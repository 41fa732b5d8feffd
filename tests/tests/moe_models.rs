//! Mixture-of-experts architectures (qwen3moe, qwen2moe, llama with experts as Mixtral, olmoe,
//! deepseek) on
//! random-weight models that our llama-gguf-new writes (the commands of
//! tests/fixtures/moe/README.md): llama.cpp's greedy text, graph size, MoE startup lines and
//! perplexity for each, F32 and Q8_0; and broken expert metadata or tensors stopping
//! llama-completion with one line naming the key or tensor, exit status 1.

use gguf::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use test_fixtures::gguf_edit::{self, assert_fails_with, complete, set_u32, Tensors};
use test_fixtures::llama_logs::{self, evalcb_nodes, graph_line, ppl_chunks as chunks};
use test_fixtures::text;

/// `--arch` of llama-gguf-new (mixtral writes general.architecture "llama").
const ARCHS: [&str; 5] = ["qwen3moe", "qwen2moe", "mixtral", "olmoe", "deepseek"];
const TYPES: [(&str, f64); 2] = [("f32", 1e-4), ("q8_0", 1e-3)];

fn fixture(name: &str) -> Vec<u8> {
    llama_logs::fixture("moe", name)
}

fn gguf_new(out: &Path, arch: &str, ty: &str) {
    gguf_new_with(out, arch, ty, &[]);
}

fn gguf_new_with(out: &Path, arch: &str, ty: &str, extra: &[&str]) {
    let bin = test_fixtures::bin("llama-gguf-new", "llama-gguf-new");
    // olmoe's K norm spans n_embd (no grouped heads) and its experts take --ff
    let (heads_kv, ff) = if arch == "olmoe" {
        ("4", "64")
    } else {
        ("2", "256")
    };
    #[rustfmt::skip]
    let o = Command::new(bin)
        .args(["--arch", arch, "--layers", "2", "--embd", "128", "--heads", "4", "--heads-kv", heads_kv,
            "--ff", ff, "--ctx", "512", "--vocab-size", "1000", "--experts", "8",
            "--experts-used", "2", "--ff-exp", "64", "--ff-shexp", "128", "--type", ty,
            "--seed", "7", "--quiet", "-o"])
        .arg(out)
        .args(extra)
        .output()
        .expect("run llama-gguf-new");
    assert!(o.status.success(), "llama-gguf-new: {}", text(&o.stderr));
}

/// The model the fixtures were recorded on, written again; `user` keeps the file of each test
/// apart (the tests of this binary run at once in one process).
fn model(arch: &str, ty: &str, user: &str) -> PathBuf {
    let dir = test_fixtures::cache_dir().join("moe");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("{arch}-{ty}-{user}-{}.gguf", std::process::id()));
    gguf_new(&out, arch, ty);
    out
}

/// The print_info lines about experts, feed-forward sizes and dense leading layers, without
/// timestamps.
fn moe_info(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| l.split_once("print_info: "))
        .map(|(_, rest)| rest.to_string())
        .filter(|r| {
            [
                "n_expert",
                "n_group",
                "n_ff",
                "n_layer_dense_lead",
                "expert_weights_scale",
            ]
            .iter()
            .any(|p| r.starts_with(p))
        })
        .collect()
}

#[test]
fn greedy_text_graph_and_expert_lines_match_llama_cpp() {
    let bin = test_fixtures::bin("llama-completion", "llama-completion");
    for arch in ARCHS {
        for (ty, _) in TYPES {
            let m = model(arch, ty, "greedy");
            #[rustfmt::skip]
            let o = Command::new(&bin)
                .args(["-m", m.to_str().unwrap(), "-p", "Once upon a time", "-n", "16", "--temp", "0",
                    "-no-cnv", "-c", "256", "-t", "2", "-lv", "4"])
                .env_remove("LLAMA_ARG_MODEL")
                .output()
                .expect("run llama-completion");
            assert!(o.status.success(), "{arch} {ty}: {}", text(&o.stderr));
            // llama.cpp writes a token's stray UTF-8 byte as is, our tool as U+FFFD
            let want = text(&fixture(&format!("{arch}-{ty}.greedy.txt")));
            assert_eq!(text(&o.stdout), want, "{arch} {ty}");
            let (log, want_log) = (
                text(&o.stderr),
                text(&fixture(&format!("{arch}-{ty}.greedy.log"))),
            );
            assert_eq!(graph_line(&log), graph_line(&want_log), "{arch} {ty}");
            let info = moe_info(&want_log);
            assert!(info.iter().any(|l| l.contains("= 8")), "{info:?}");
            assert_eq!(moe_info(&log), info, "{arch} {ty}");
            let _ = std::fs::remove_file(m);
        }
    }
}

#[test]
fn perplexity_matches_llama_cpp() {
    for arch in ARCHS {
        for (ty, rel) in TYPES {
            let m = model(arch, ty, "ppl");
            let all = llama_logs::perplexity_run(&m, &format!("{arch} {ty}"));
            let want_log = text(&fixture(&format!("{arch}-{ty}.perplexity.log")));
            let what = format!("{arch} {ty}");
            llama_logs::assert_ppl_close(&all, &want_log, rel, Some(4), &what);
            let _ = std::fs::remove_file(m);
        }
    }
}

/// The nodes of build_moe_ffn and around it, in llama.cpp's order with its names, ops and
/// shapes, and their values (the sums printed) equal to llama.cpp's within 1e-4.
#[test]
fn eval_callback_nodes_match_llama_cpp() {
    let bin = test_fixtures::bin("llama-eval-callback", "llama-eval-callback");
    for arch in ARCHS {
        let m = model(arch, "f32", "evalcb");
        #[rustfmt::skip]
        let o = Command::new(&bin)
            .args(["-m", m.to_str().unwrap(), "-p", "hi there", "-n", "1", "--seed", "1", "-c", "256",
                "-t", "2"])
            .env_remove("LLAMA_ARG_MODEL")
            .output()
            .expect("run llama-eval-callback");
        let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
        assert!(o.status.success(), "{arch}: {all}");
        let got = evalcb_nodes(&all);
        let want = evalcb_nodes(&text(&fixture(&format!("{arch}-f32.eval-callback.log"))));
        assert!(
            want.iter().any(|n| n.0.starts_with("ffn_moe_topk-1")),
            "{arch}"
        );
        assert_eq!(got.len(), want.len(), "{arch}: {all}");
        for ((gh, gs), (wh, ws)) in got.iter().zip(&want) {
            assert_eq!(gh, wh, "{arch}");
            assert!(
                (gs - ws).abs() <= 1e-4 * ws.abs().max(1.0),
                "{arch} {wh}: sum {gs} vs {ws}"
            );
        }
        let _ = std::fs::remove_file(m);
    }
}

/// Per-expert scales of the stacks (`ffn_*_exps.scale`, llama-gguf-new --expert-scales on
/// qwen3moe): each expert's product times its scale, picked by the same ids (the scale nodes
/// named ffn_moe_{up,gate,down}_scaled); greedy text, graph size, perplexity and the
/// eval-callback nodes equal llama.cpp's.
#[test]
fn per_expert_scales_match_llama_cpp() {
    let dir = test_fixtures::cache_dir().join("moe");
    std::fs::create_dir_all(&dir).unwrap();
    let m = dir.join(format!("qwen3moe-scaled-{}.gguf", std::process::id()));
    gguf_new_with(&m, "qwen3moe", "f32", &["--expert-scales"]);
    let run = |tool: &str, args: &[&str]| -> (String, String) {
        let bin = test_fixtures::bin(tool, tool);
        let o = Command::new(bin)
            .args(["-m", m.to_str().unwrap()])
            .args(args)
            .env_remove("LLAMA_ARG_MODEL")
            .output()
            .expect("run the tool");
        assert!(o.status.success(), "{tool}: {}", text(&o.stderr));
        (text(&o.stdout), text(&o.stderr))
    };
    #[rustfmt::skip]
    let (out, log) = run("llama-completion", &["-p", "Once upon a time", "-n", "16", "--temp", "0",
        "-no-cnv", "-c", "256", "-t", "2", "-lv", "4"]);
    assert_eq!(out, text(&fixture("qwen3moe-scaled-f32.greedy.txt")));
    let want_log = text(&fixture("qwen3moe-scaled-f32.greedy.log"));
    assert_eq!(graph_line(&log), graph_line(&want_log));
    let gpl = test_fixtures::shared_dir().join("reference/text/gpl-3.txt");
    #[rustfmt::skip]
    let (o, e) = run("llama-perplexity", &["-f", gpl.to_str().unwrap(), "-c", "128", "--chunks", "4",
        "-t", "2"]);
    let all = format!("{o}{e}");
    let want = text(&fixture("qwen3moe-scaled-f32.perplexity.log"));
    assert_eq!(chunks(&all).len(), 4, "{all}");
    for (g, w) in chunks(&all).iter().zip(&chunks(&want)) {
        assert!((g - w).abs() <= 1e-4 * w.abs(), "{g} vs {w}");
    }
    #[rustfmt::skip]
    let (o, e) = run("llama-eval-callback", &["-p", "hi there", "-n", "1", "--seed", "1", "-c", "256",
        "-t", "2"]);
    let got = evalcb_nodes(&format!("{o}{e}"));
    let want = evalcb_nodes(&text(&fixture("qwen3moe-scaled-f32.eval-callback.log")));
    assert!(want
        .iter()
        .any(|n| n.0.starts_with("ffn_moe_down_scaled-1")));
    assert_eq!(got.len(), want.len());
    for ((gh, gs), (wh, ws)) in got.iter().zip(&want) {
        assert_eq!(gh, wh);
        assert!(
            (gs - ws).abs() <= 1e-4 * ws.abs().max(1.0),
            "{wh}: {gs} vs {ws}"
        );
    }
    let _ = std::fs::remove_file(m);
}

/// `-cmoe` and `-ncmoe 1` on the CPU alone: llama.cpp's once-per-process warning about CPU
/// overrides with mmap, its buffer lines, and the text of the model without the flags.
#[test]
fn cpu_moe_flags_log_and_text_as_llama_cpp() {
    let bin = test_fixtures::bin("llama-completion", "llama-completion");
    let m = model("qwen3moe", "q8_0", "cmoe");
    for (flags, name) in [(&["-cmoe"][..], "cmoe"), (&["-ncmoe", "1"][..], "ncmoe1")] {
        #[rustfmt::skip]
        let o = Command::new(&bin)
            .args(["-m", m.to_str().unwrap(), "-p", "Once upon a time", "-n", "16", "--temp", "0",
                "-no-cnv", "-c", "256", "-t", "2", "-lv", "4"])
            .args(flags)
            .env_remove("LLAMA_ARG_MODEL")
            .output()
            .expect("run llama-completion");
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        let want = text(&fixture(&format!("qwen3moe-q8_0.{name}.greedy.txt")));
        assert_eq!(text(&o.stdout), want, "{name}");
        let lines = |log: &str| -> Vec<String> {
            log.lines()
                .filter(|l| {
                    l.contains("model buffer size") || l.contains("tensor overrides to CPU")
                })
                .map(|l| l.split_once(' ').map_or(l, |(_, r)| r).to_string())
                .collect()
        };
        let want_log = text(&fixture(&format!("qwen3moe-q8_0.{name}.greedy.log")));
        assert_eq!(lines(&want_log).len(), 2, "{name}");
        assert_eq!(lines(&text(&o.stderr)), lines(&want_log), "{name}");
    }
    let _ = std::fs::remove_file(m);
}

/// A model of `arch` (f32) with its metadata and tensors edited by `edit`.
fn edited(
    dir: &Path,
    arch: &str,
    edit: impl FnOnce(&mut Vec<(String, Value)>, &mut Tensors),
) -> PathBuf {
    let src = dir.join(format!("{arch}.gguf"));
    gguf_new(&src, arch, "f32");
    let out = dir.join(format!("{arch}-edited.gguf"));
    gguf_edit::rewrite(&src, &out, edit);
    out
}

#[test]
fn an_expert_count_of_zero_with_expert_tensors_is_named() {
    let dir = test_fixtures::scratch_dir("moe-bad-zero");
    let m = edited(&dir, "qwen3moe", |kv, _| {
        set_u32(kv, "qwen3moe.expert_count", 0);
        set_u32(kv, "qwen3moe.expert_used_count", 0);
    });
    assert_fails_with(&complete(&m, &[]), "qwen3moe.expert_count = 0");
    // llama decides dense or experts by the count: experts without one are refused by name
    let m = edited(&dir, "mixtral", |kv, _| {
        kv.retain(|e| e.0 != "llama.expert_count" && e.0 != "llama.expert_used_count")
    });
    assert_fails_with(
        &complete(&m, &[]),
        "llama.expert_count = 0 (or missing) but the model has expert tensors (blk.0.ffn_gate_inp.weight)",
    );
}

#[test]
fn more_experts_used_than_there_are_is_named() {
    let dir = test_fixtures::scratch_dir("moe-bad-used");
    for arch in ["qwen2moe", "mixtral"] {
        let a = if arch == "mixtral" { "llama" } else { arch };
        let m = edited(&dir, arch, |kv, _| {
            set_u32(kv, &format!("{a}.expert_used_count"), 9)
        });
        assert_fails_with(
            &complete(&m, &[]),
            &format!("{a}.expert_used_count = 9 exceeds {a}.expert_count = 8"),
        );
    }
}

#[test]
fn grouped_heads_in_olmoe_are_named() {
    let dir = test_fixtures::scratch_dir("moe-bad-olmoe-gqa");
    let m = edited(&dir, "olmoe", |kv, _| {
        set_u32(kv, "olmoe.attention.head_count_kv", 2)
    });
    assert_fails_with(
        &complete(&m, &[]),
        "olmoe.attention.head_count_kv = 2 must equal the head count 4",
    );
}

#[test]
fn no_expert_used_is_named() {
    let dir = test_fixtures::scratch_dir("moe-bad-none-used");
    let m = edited(&dir, "qwen3moe", |kv, _| {
        set_u32(kv, "qwen3moe.expert_used_count", 0)
    });
    assert_fails_with(&complete(&m, &[]), "qwen3moe.expert_used_count = 0");
}

#[test]
fn a_missing_or_misshapen_expert_stack_is_named() {
    let dir = test_fixtures::scratch_dir("moe-bad-tensor");
    let m = edited(&dir, "qwen2moe", |_, t| {
        t.retain(|t| t.0 != "blk.1.ffn_down_exps.weight")
    });
    assert_fails_with(
        &complete(&m, &[]),
        "missing tensor 'blk.1.ffn_down_exps.weight'",
    );
    // 7 experts in the stack of a model of 8
    let m = edited(&dir, "qwen3moe", |_, t| {
        let e = t
            .iter_mut()
            .find(|t| t.0 == "blk.0.ffn_up_exps.weight")
            .unwrap();
        e.2[2] = 7;
        e.3.truncate(128 * 64 * 7 * 4);
    });
    assert_fails_with(
        &complete(&m, &[]),
        "tensor 'blk.0.ffn_up_exps.weight' has wrong shape; expected   128,    64,     8, got   128,    64,     7,     1",
    );
}
