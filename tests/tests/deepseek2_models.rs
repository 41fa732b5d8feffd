//! deepseek2 (multi-head latent attention, YaRN, dense first layer, experts with shared
//! experts) on random-weight models that our llama-gguf-new writes in two layouts
//! (tests/fixtures/deepseek2/README.md): DeepSeek-V2-Lite's (`deepseek2`: Q from attn_q,
//! softmax router) and DeepSeek-V3's (`deepseek2-v3`: low-rank Q, sigmoid router with the
//! selection bias, normalised and scaled weights). Each against llama.cpp: greedy text, graph
//! size, the MoE/MLA startup lines, the KV cache line (K only), perplexity for F32 and Q8_0,
//! and the eval-callback nodes; and broken MLA metadata stopping llama-completion with one
//! line naming the key, exit status 1.

use gguf::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use test_fixtures::gguf_edit::{self, assert_fails_with, complete};
use test_fixtures::llama_logs::{self, evalcb_nodes, line_of, lines_of};
use test_fixtures::text;

const ARCHS: [&str; 2] = ["deepseek2", "deepseek2-v3"];
const TYPES: [(&str, f64); 2] = [("f32", 1e-4), ("q8_0", 1e-3)];

fn fixture(name: &str) -> Vec<u8> {
    llama_logs::fixture("deepseek2", name)
}

/// The layout variants (scripts/record-deepseek2-variants.sh): their fixture name, the
/// llama-gguf-new architecture and flags. `deepseek2-kvb` is the older un-split form (one
/// `attn_kv_b`, a KV head per query head), `-nextn` has one NextN layer after the two, `-fused`
/// one `ffn_gate_up_exps` stack per MoE layer.
const VARIANTS: [(&str, &str, &[&str]); 3] = [
    ("deepseek2-kvb", "deepseek2", &["--mla-kv-b"]),
    ("deepseek2-v3-nextn", "deepseek2-v3", &["--nextn", "1"]),
    (
        "deepseek2-v3-fused",
        "deepseek2-v3",
        &["--fused-gate-up-exps"],
    ),
];

fn gguf_new(out: &Path, arch: &str, ty: &str, extra: &[&str]) {
    let bin = test_fixtures::bin("llama-gguf-new", "llama-gguf-new");
    let heads_kv = if extra.contains(&"--mla-kv-b") {
        "4"
    } else {
        "1"
    };
    #[rustfmt::skip]
    let o = Command::new(bin)
        .args(["--arch", arch, "--layers", "2", "--embd", "128", "--heads", "4", "--heads-kv", heads_kv,
            "--ff", "256", "--ctx", "512", "--vocab-size", "1000", "--experts", "8",
            "--experts-used", "2", "--ff-exp", "64", "--type", ty, "--seed", "7", "--quiet"])
        .args(extra)
        .arg("-o")
        .arg(out)
        .output()
        .expect("run llama-gguf-new");
    assert!(o.status.success(), "llama-gguf-new: {}", text(&o.stderr));
}

/// The model the fixtures were recorded on, written again; `user` keeps the file of each test
/// apart (the tests of this binary run at once in one process).
fn model(arch: &str, ty: &str, user: &str) -> PathBuf {
    variant_model((arch, arch, &[]), ty, user)
}

fn variant_model((label, arch, extra): (&str, &str, &[&str]), ty: &str, user: &str) -> PathBuf {
    let dir = test_fixtures::cache_dir().join("deepseek2");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("{label}-{ty}-{user}-{}.gguf", std::process::id()));
    gguf_new(&out, arch, ty, extra);
    out
}

/// The print_info lines of the expert and latent-attention settings, and the context's YaRN
/// attention-factor line.
fn info_lines(log: &str) -> Vec<String> {
    let mut out: Vec<String> = log
        .lines()
        .filter_map(|l| l.split_once("print_info: "))
        .map(|(_, rest)| rest.to_string())
        .filter(|r| {
            [
                "n_expert",
                "n_group",
                "n_ff",
                "n_layer_dense_lead",
                "n_lora",
                "n_embd_head",
                "n_embd_k_gqa",
                "n_embd_v_gqa",
                "n_rot",
                "expert_weights",
                "expert_gating",
                "rope scaling",
                "freq_scale_train",
                "n_ctx_orig_yarn",
                "rope_yarn_log_mul",
            ]
            .iter()
            .any(|p| r.starts_with(p))
        })
        .collect();
    out.extend(
        log.lines()
            .filter(|l| l.contains("setting new yarn_attn_factor"))
            .map(|l| line_of(l, "setting new")),
    );
    out
}

#[test]
fn greedy_text_graph_and_startup_lines_match_llama_cpp() {
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
            let want = text(&fixture(&format!("{arch}-{ty}.greedy.txt")));
            assert_eq!(text(&o.stdout), want, "{arch} {ty}");
            let (log, want_log) = (
                text(&o.stderr),
                text(&fixture(&format!("{arch}-{ty}.greedy.log"))),
            );
            for what in [
                "graph: nodes",
                "llama_kv_cache: size",
                "attn_rot_v",
                "n_rs_seq",
                "CPU compute buffer size",
            ] {
                assert_eq!(line_of(&log, what), line_of(&want_log, what), "{arch} {ty}");
            }
            let info = info_lines(&want_log);
            assert!(info.iter().any(|l| l.starts_with("n_lora_kv")), "{info:?}");
            assert!(
                info.iter().any(|l| l.contains("yarn_attn_factor")),
                "{info:?}"
            );
            assert_eq!(info_lines(&log), info, "{arch} {ty}");
            let _ = std::fs::remove_file(m);
        }
    }
}

/// Without flash attention the heads are decompressed after softmax(KQ)·V (kqv_mla): the same
/// text and graph size as llama.cpp's.
#[test]
fn greedy_text_without_flash_attention_matches_llama_cpp() {
    let bin = test_fixtures::bin("llama-completion", "llama-completion");
    for arch in ARCHS {
        let m = model(arch, "f32", "nofa");
        #[rustfmt::skip]
        let o = Command::new(&bin)
            .args(["-m", m.to_str().unwrap(), "-p", "Once upon a time", "-n", "16", "--temp", "0",
                "-no-cnv", "-c", "256", "-t", "2", "-lv", "4", "-fa", "off"])
            .env_remove("LLAMA_ARG_MODEL")
            .output()
            .expect("run llama-completion");
        assert!(o.status.success(), "{arch}: {}", text(&o.stderr));
        let want = text(&fixture(&format!("{arch}-f32.nofa.greedy.txt")));
        assert_eq!(text(&o.stdout), want, "{arch}");
        let want_log = text(&fixture(&format!("{arch}-f32.nofa.greedy.log")));
        let log = text(&o.stderr);
        for what in ["graph: nodes", "CPU compute buffer size"] {
            assert_eq!(line_of(&log, what), line_of(&want_log, what), "{arch}");
        }
        let _ = std::fs::remove_file(m);
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

/// The nodes of the latent attention and the experts, in llama.cpp's order with its names,
/// ops and shapes, and their values (the sums printed) equal to llama.cpp's within 1e-4.
#[test]
fn eval_callback_nodes_match_llama_cpp() {
    for arch in ARCHS {
        let mut names = vec!["q_nope_absorbed-0", "ffn_moe_topk-1", "fattn_mla-1"];
        if arch == "deepseek2-v3" {
            names.extend([
                "ffn_moe_probs_biased-1",
                "ffn_moe_group_topk-1",
                "ffn_moe_probs_masked-1",
            ]);
        }
        assert_evalcb_matches((arch, arch, &[]), &names);
    }
    // the un-split attention (kv decompressed, V made contiguous, Q roped over its tail) and
    // the fused stack's product with its two views
    let un_split = ["kv-0", "k_nope_view-0", "Vcur_cont-0", "Qcur-0", "Kcur-0"];
    assert_evalcb_matches(VARIANTS[0], &un_split);
    assert_evalcb_matches(VARIANTS[2], &["ffn_moe_gate_up-1", "ffn_moe_swiglu-1"]);
}

/// llama-eval-callback on a model of `spec`: llama.cpp's nodes (which include `names`) with
/// their names, ops and shapes, in its order, their sums within 1e-4.
fn assert_evalcb_matches(spec: (&str, &str, &[&str]), names: &[&str]) {
    let label = spec.0;
    let bin = test_fixtures::bin("llama-eval-callback", "llama-eval-callback");
    let m = variant_model(spec, "f32", "evalcb");
    #[rustfmt::skip]
    let o = Command::new(&bin)
        .args(["-m", m.to_str().unwrap(), "-p", "hi there", "-n", "1", "--seed", "1", "-c", "256",
            "-t", "2"])
        .env_remove("LLAMA_ARG_MODEL")
        .output()
        .expect("run llama-eval-callback");
    let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{label}: {all}");
    let got = evalcb_nodes(&all);
    let want = evalcb_nodes(&text(&fixture(&format!("{label}-f32.eval-callback.log"))));
    for name in names {
        assert!(
            want.iter().any(|n| n.0.starts_with(name)),
            "{label}: {name}"
        );
    }
    assert_eq!(got.len(), want.len(), "{label}: {all}");
    for ((gh, gs), (wh, ws)) in got.iter().zip(&want) {
        assert_eq!(gh, wh, "{label}");
        // the masked groups' fill sums to -inf in both
        assert!(
            gs == ws || (gs - ws).abs() <= 1e-4 * ws.abs().max(1.0),
            "{label} {wh}: sum {gs} vs {ws}"
        );
    }
    let _ = std::fs::remove_file(m);
}

/// The K-only cache in a session file: llama.cpp's session of the V3-layout model loads here
/// and gives its text, and the session our tool writes has its size and prompt, the cache rows
/// within f16 rounding (the file holds no V section, as llama.cpp skips the missing V).
#[test]
fn sessions_hold_the_latent_cache_as_llama_cpp_s() {
    let m = model("deepseek2-v3", "f32", "session");
    let dir = test_fixtures::scratch_dir("deepseek2-session");
    let theirs = dir.join("llamacpp.session");
    std::fs::copy(
        test_fixtures::simd_fixture(&llama_logs::fixture_path(
            "deepseek2",
            "deepseek2-v3-f32.hello.session",
        )),
        &theirs,
    )
    .unwrap();
    let bin = test_fixtures::bin("llama-completion", "llama-completion");
    let run = |session: &Path, extra: &[&str]| -> (String, String) {
        #[rustfmt::skip]
        let o = Command::new(&bin)
            .args(["-m", m.to_str().unwrap(), "-p", "Hello my name is", "-n", "8", "--temp", "0",
                "-no-cnv", "-c", "256", "-t", "2", "--prompt-cache", session.to_str().unwrap()])
            .args(extra)
            .env_remove("LLAMA_ARG_MODEL")
            .output()
            .expect("run llama-completion");
        assert!(o.status.success(), "{}", text(&o.stderr));
        (text(&o.stdout), text(&o.stderr))
    };
    let want = text(&fixture("deepseek2-v3-f32.hello.txt"));
    let (out, err) = run(&theirs, &["--prompt-cache-ro"]);
    assert!(
        err.contains("session file has exact match for prompt!"),
        "{err}"
    );
    assert_eq!(out, want);
    let ours = dir.join("ours.session");
    let _ = std::fs::remove_file(&ours);
    let (out, _) = run(&ours, &[]);
    assert_eq!(out, want);
    let (a, b) = (
        std::fs::read(&ours).unwrap(),
        fixture("deepseek2-v3-f32.hello.session"),
    );
    assert_eq!(a.len(), b.len());
    let f16 = |x: &[u8]| ggml::quants::fp16_to_fp32(u16::from_le_bytes([x[0], x[1]]));
    let differ = a.chunks(2).zip(b.chunks(2)).filter(|(x, y)| x != y).count();
    // whole f16 values (the cache rows) may round apart; the header and counts may not
    for (x, y) in a.chunks(2).zip(b.chunks(2)).filter(|(x, y)| x != y) {
        let (x, y) = (f16(x), f16(y));
        assert!((x - y).abs() <= 2e-3 * y.abs().max(1.0), "{x} vs {y}");
    }
    assert!(
        differ * 50 < a.len(),
        "{differ} of {} pairs differ",
        a.len() / 2
    );
    let _ = std::fs::remove_file(m);
}

/// A deepseek2 model (f32) with its metadata edited by `edit`.
fn edited(dir: &Path, edit: impl FnOnce(&mut Vec<(String, Value)>)) -> PathBuf {
    let src = dir.join("deepseek2.gguf");
    gguf_new(&src, "deepseek2", "f32", &[]);
    let out = dir.join("deepseek2-edited.gguf");
    gguf_edit::rewrite(&src, &out, |kv, _| edit(kv));
    out
}

#[test]
fn broken_latent_attention_keys_are_named() {
    let dir = test_fixtures::scratch_dir("deepseek2-bad");
    let m = edited(&dir, |kv| {
        kv.retain(|e| e.0 != "deepseek2.attention.kv_lora_rank")
    });
    assert_fails_with(&complete(&m, &[]), "deepseek2.attention.kv_lora_rank");
    // one MLA head size without the other
    let m = edited(&dir, |kv| {
        kv.retain(|e| e.0 != "deepseek2.attention.key_length_mla")
    });
    assert_fails_with(&complete(&m, &[]), "deepseek2.attention.key_length_mla");
    let m = edited(&dir, |kv| {
        let e = kv
            .iter_mut()
            .find(|e| e.0 == "deepseek2.attention.key_length")
            .unwrap();
        e.1 = Value::U32(96);
    });
    assert_fails_with(&complete(&m, &[]), "deepseek2.attention.key_length = 96");
    let m = edited(&dir, |kv| {
        let e = kv
            .iter_mut()
            .find(|e| e.0 == "deepseek2.expert_gating_func")
            .map(|e| e.1 = Value::U32(4));
        if e.is_none() {
            kv.push(("deepseek2.expert_gating_func".into(), Value::U32(4)));
        }
    });
    assert_fails_with(&complete(&m, &[]), "deepseek2.expert_gating_func = 4");
    // more NextN layers than layers (llama.cpp asserts)
    let m = edited(&dir, |kv| {
        kv.push(("deepseek2.nextn_predict_layers".into(), Value::U32(3)));
    });
    assert_fails_with(
        &complete(&m, &[]),
        "deepseek2.nextn_predict_layers = 3 exceeds deepseek2.block_count = 2",
    );
}

fn complete_args(m: &Path, args: &[&str]) -> Output {
    let bin = test_fixtures::bin("llama-completion", "llama-completion");
    Command::new(bin)
        .arg("-m")
        .arg(m)
        .args(args)
        .env_remove("LLAMA_ARG_MODEL")
        .output()
        .expect("run llama-completion")
}

const GREEDY: [&str; 12] = [
    "-p",
    "Once upon a time",
    "-n",
    "16",
    "--temp",
    "0",
    "-no-cnv",
    "-c",
    "256",
    "-t",
    "2",
    "-lv",
];

/// The older un-split form, NextN layers and the fused gate/up stacks, F32 and Q8_0: llama.cpp's
/// greedy text, graph size, KV cache and compute buffer, and perplexity; the un-split form also
/// without flash attention (its V cache is then transposed).
#[test]
fn layout_variants_match_llama_cpp() {
    for spec in VARIANTS {
        let label = spec.0;
        for (ty, rel) in TYPES {
            let m = variant_model(spec, ty, "variants");
            let runs: &[(&str, &[&str])] = if label == "deepseek2-kvb" && ty == "f32" {
                &[("", &[]), (".nofa", &["-fa", "off"])]
            } else {
                &[("", &[])]
            };
            for (suffix, extra) in runs {
                let args: Vec<&str> = GREEDY.iter().chain(&["4"]).chain(*extra).copied().collect();
                let o = complete_args(&m, &args);
                let what = format!("{label} {ty}{suffix}");
                assert!(o.status.success(), "{what}: {}", text(&o.stderr));
                let want = text(&fixture(&format!("{label}-{ty}{suffix}.greedy.txt")));
                assert_eq!(text(&o.stdout), want, "{what}");
                let (log, want_log) = (
                    text(&o.stderr),
                    text(&fixture(&format!("{label}-{ty}{suffix}.greedy.log"))),
                );
                for line in [
                    "graph: nodes",
                    "llama_kv_cache: size",
                    "CPU compute buffer size",
                ] {
                    assert_eq!(line_of(&log, line), line_of(&want_log, line), "{what}");
                }
            }
            let all = llama_logs::perplexity_run(&m, &format!("{label} {ty}"));
            let want_log = text(&fixture(&format!("{label}-{ty}.perplexity.log")));
            let what = format!("{label} {ty}");
            llama_logs::assert_ppl_close(&all, &want_log, rel, Some(4), &what);
            let _ = std::fs::remove_file(m);
        }
    }
}

/// NextN layers are counted in n_layer_all only, each of their tensors is reported unused, and
/// neither the KV cache nor the graph holds them: llama.cpp's lines for deepseek2 and glm4.
#[test]
fn nextn_layers_are_skipped_as_llama_cpp_skips_them() {
    let glm4 = test_fixtures::cache_dir()
        .join("deepseek2")
        .join(format!("glm4-nextn-{}.gguf", std::process::id()));
    let bin = test_fixtures::bin("llama-gguf-new", "llama-gguf-new");
    #[rustfmt::skip]
    let o = Command::new(bin)
        .args(["--arch", "glm4", "--layers", "2", "--embd", "128", "--heads", "4", "--heads-kv", "2",
            "--ff", "256", "--ctx", "512", "--vocab-size", "1000", "--type", "f32", "--seed", "7",
            "--nextn", "1", "--quiet", "-o", glm4.to_str().unwrap()])
        .output()
        .expect("run llama-gguf-new");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let ds = variant_model(VARIANTS[1], "f32", "nextn");
    let glm4_fixture =
        test_fixtures::repo_root().join("tests/fixtures/archs/glm4-nextn-f32.greedy.log");
    let cases = [
        (
            ds.clone(),
            text(&fixture("deepseek2-v3-nextn-f32.greedy.log")),
        ),
        (glm4.clone(), text(&std::fs::read(glm4_fixture).unwrap())),
    ];
    for (m, want_log) in cases {
        let args: Vec<&str> = GREEDY.iter().chain(&["4"]).copied().collect();
        let o = complete_args(&m, &args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let log = text(&o.stderr);
        let unused = lines_of(&want_log, "model has unused tensor");
        assert!(
            unused.iter().any(|l| l.contains("nextn.eh_proj")),
            "{unused:?}"
        );
        assert_eq!(lines_of(&log, "model has unused tensor"), unused);
        for what in [
            "n_layer    ",
            "n_layer_all",
            "llama_kv_cache: size",
            "llama_kv_cache: layer",
            "graph: nodes",
        ] {
            assert_eq!(lines_of(&log, what), lines_of(&want_log, what), "{what}");
        }
        let _ = std::fs::remove_file(m);
    }
}

/// 400 tokens through a 256-token context (llama.cpp's smallest) with context shift on: the
/// cache is shifted twice, the cached rows' rotated part rotated by the shift (the tail of each
/// latent row, or of each full key of the un-split form), and the text is llama.cpp's.
#[test]
fn context_shift_of_the_latent_cache_gives_llama_cpp_s_text() {
    for spec in [("deepseek2-v3", "deepseek2-v3", &[][..]), VARIANTS[0]] {
        let m = variant_model(spec, "f32", "shift");
        #[rustfmt::skip]
        let o = complete_args(&m, &["-p", "Once upon a time", "-n", "400", "--temp", "0", "-no-cnv",
            "-c", "256", "-t", "2", "-v", "--context-shift", "--ignore-eos"]);
        assert!(o.status.success(), "{}: {}", spec.0, text(&o.stderr));
        let want = text(&fixture(&format!("{}-f32.shift.txt", spec.0)));
        let want_shifts: Vec<String> = text(&fixture(&format!("{}-f32.shift.log", spec.0)))
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(want_shifts.len(), 2, "{want_shifts:?}");
        let log = text(&o.stderr);
        let shifts = lines_of(&log, "context full, swapping");
        assert_eq!(shifts, want_shifts, "{}", spec.0);
        // llama.cpp prints each piece with %s, so a piece of one NUL byte (a random model
        // samples one here) prints nothing; this tool writes the byte
        let got = text(&o.stdout).replace('\0', "");
        assert_eq!(got, want, "{}", spec.0);
        let _ = std::fs::remove_file(m);
    }
}

/// llama-quantize on the three layouts (q8_0, q4_k_m) writes llama.cpp's bytes: the NextN
/// tensors are quantized as any other (llama.cpp quantizes with load_mtp on), `attn_kv_b` and
/// the fused stack get llama.cpp's types.
#[test]
fn quantized_layout_variants_are_llama_cpp_s_bytes() {
    use sha2::{Digest, Sha256};
    let want = text(&fixture("quantize.sha256"));
    let bin = test_fixtures::bin("llama-quantize", "llama-quantize");
    let dir = test_fixtures::scratch_dir("deepseek2-quantize");
    let mut n = 0;
    for spec in VARIANTS {
        let m = variant_model(spec, "f32", "quantize");
        for q in ["q8_0", "q4_k_m"] {
            let name = format!("{}-{q}.gguf", spec.0);
            let out = dir.join(&name);
            let o = Command::new(&bin)
                .arg(&m)
                .arg(&out)
                .arg(q)
                .output()
                .expect("run llama-quantize");
            assert!(o.status.success(), "{name}: {}", text(&o.stderr));
            let hash: String = Sha256::digest(std::fs::read(&out).unwrap())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert!(want.contains(&format!("{hash}  {name}")), "{name}: {hash}");
            n += 1;
            let _ = std::fs::remove_file(out);
        }
        let _ = std::fs::remove_file(m);
    }
    assert_eq!(want.lines().count(), n);
}
