//! The Vulkan backend end to end on lavapipe (a CPU-type device, so GGML_VK_VISIBLE_DEVICES=0
//! names it): the device listing, -ngl placement with its startup-log lines, and greedy text
//! equal to the CPU's on the reference model at f32 and quantized. Without a Vulkan device the
//! tests skip (printing so), and fail under CI=true.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(name: &str, args: &[&str], vulkan: bool) -> Output {
    test_fixtures::vulkan::run(name, args, vulkan.then_some("0"))
}

fn vulkan_or_skip() -> bool {
    test_fixtures::vulkan::vulkan0_or_skip()
}

fn text(b: &[u8]) -> String {
    test_fixtures::text(b)
}

const PROMPT: &str = "The capital of France is";

/// Greedy generation of 24 tokens; returns (stdout, stderr) after checking success.
fn greedy(model: &Path, extra: &[&str], vulkan: bool) -> (String, String) {
    let m = model.to_str().unwrap();
    let mut args = vec![
        "-m", m, "-p", PROMPT, "-n", "24", "--temp", "0", "--seed", "1", "-no-cnv", "-lv", "4",
    ];
    args.extend_from_slice(extra);
    let o = run("llama-completion", &args, vulkan);
    assert!(
        o.status.success(),
        "{extra:?} (vulkan {vulkan}) failed:\n{}",
        text(&o.stderr)
    );
    (text(&o.stdout), text(&o.stderr))
}

#[test]
fn list_devices_shows_vulkan0_with_its_memory() {
    if !vulkan_or_skip() {
        return;
    }
    let o = run("llama-list-devices", &[], true);
    let out = text(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("Vulkan0: "))
        .expect("a Vulkan0 line");
    // "  Vulkan0: <name> (<total> MiB, <free> MiB free)"
    assert!(line.ends_with(" MiB free)"), "{line}");
    assert!(line.contains(" MiB, "), "{line}");
    // hidden without the variable: lavapipe is a CPU-type device
    let o = run("llama-list-devices", &[], false);
    assert!(!text(&o.stdout).contains("Vulkan0"), "{}", text(&o.stdout));
}

/// The expected "offloaded N/M layers" of -ngl `ngl` on an `n_layer` model (the output layer
/// counted, as llama.cpp).
fn offloaded(ngl: i32, n_layer: i32) -> String {
    format!(
        "offloaded {}/{} layers to GPU",
        ngl.min(n_layer + 1),
        n_layer + 1
    )
}

#[test]
fn reference_model_f32_gives_the_cpu_text_at_every_ngl_and_nkvo() {
    if !vulkan_or_skip() {
        return;
    }
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let (cpu, _) = greedy(&model, &[], false);
    assert!(cpu.len() > PROMPT.len(), "{cpu}");
    for ngl in [0, 1, 3, 5, 99] {
        let n = ngl.to_string();
        let (out, err) = greedy(&model, &["-ngl", &n], true);
        assert_eq!(out, cpu, "-ngl {ngl}: text differs from the CPU's\n{err}");
        assert!(err.contains(&offloaded(ngl, 4)), "-ngl {ngl}:\n{err}");
        assert!(
            err.contains("Vulkan_Host compute buffer size"),
            "-ngl {ngl}:\n{err}"
        );
        if ngl > 0 {
            for l in ["Vulkan0 model buffer size", "Vulkan0 compute buffer size"] {
                assert!(err.contains(l), "-ngl {ngl}: no '{l}'\n{err}");
            }
        }
        // -ngl 1 offloads only the output layer, which has no KV cache
        assert_eq!(
            err.contains("Vulkan0 KV buffer size"),
            ngl >= 2,
            "-ngl {ngl}:\n{err}"
        );
        if ngl >= 5 {
            assert!(err.contains("Vulkan_Host  output buffer size"), "{err}");
        }
    }
    let (out, err) = greedy(&model, &["-ngl", "99", "-nkvo"], true);
    assert_eq!(out, cpu, "-nkvo: text differs from the CPU's\n{err}");
    assert!(!err.contains("Vulkan0 KV buffer size"), "-nkvo:\n{err}");
    assert!(err.contains("CPU KV buffer size"), "-nkvo:\n{err}");
}

fn quantized(model: &Path, ty: &str) -> PathBuf {
    let dir = test_fixtures::cache_dir().join("vulkan-cli");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("ref-{ty}-{}.gguf", std::process::id()));
    let o = run(
        "llama-quantize",
        &[model.to_str().unwrap(), out.to_str().unwrap(), ty],
        false,
    );
    assert!(o.status.success(), "quantize {ty}: {}", text(&o.stderr));
    out
}

/// Greedy generation of `n` tokens.
fn greedy_n(model: &Path, n: &str, extra: &[&str], vulkan: bool) -> (String, String) {
    let m = model.to_str().unwrap();
    let mut args = vec![
        "-m", m, "-p", PROMPT, "-n", n, "--temp", "0", "--seed", "1", "-no-cnv", "-lv", "4",
    ];
    args.extend_from_slice(extra);
    let o = run("llama-completion", &args, vulkan);
    assert!(
        o.status.success(),
        "{extra:?} (vulkan {vulkan}) failed:\n{}",
        text(&o.stderr)
    );
    (text(&o.stdout), text(&o.stderr))
}

// The quantized products follow the CPU backend's float order (the exact integer sum of each
// block, the float steps of the CPU kernel for that type and batch size), and on lavapipe the
// shaders that keep it round through doubles where the driver's fma is a multiply and an add,
// with RMS_NORM, ROPE (glibc's sinf/cosf), SWIGLU (ggml_v_silu), FLASH_ATTN_EXT (glibc's
// expf) and, without flash attention, the F16 KQ/KQV products and SOFT_MAX in the CPU's steps
// too, in the AVX2 or AVX-512 form the host's CPU backend takes (docs/vulkan.md): so the greedy
// text of Q8_0, Q4_0 and Q4_K_M files is the CPU's for 24 tokens at every placement, with flash
// attention on (the CPU's default) and off (what -nkvo picks, compared with the CPU at -fa off).
// The CPU run to compare with keeps its weights in a plain buffer (-nr): with a Vulkan device
// present the CPU layers' weights go to Vulkan_Host (with mmap: the mapped file), not
// CPU_REPACK, as in llama.cpp, so the repacked kernels' orders (Q4_0's q4_0_8x8, Q4_K's
// q4_K_8x8) are not taken at any -ngl.
#[test]
fn reference_model_quantized_gives_the_cpu_text_at_every_ngl() {
    if !vulkan_or_skip() {
        return;
    }
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    for ty in ["Q8_0", "Q4_0", "Q4_K_M"] {
        let q = quantized(&model, ty);
        let (cpu, _) = greedy_n(&q, "24", &["-nr"], false);
        let (cpu_fa_off, _) = greedy_n(&q, "24", &["-nr", "-fa", "off"], false);
        for (extra, want) in [
            (&["-ngl", "0"][..], &cpu),
            (&["-ngl", "1"], &cpu),
            (&["-ngl", "3"], &cpu),
            (&["-ngl", "5"], &cpu),
            (&["-ngl", "99"], &cpu),
            (&["-ngl", "99", "-nkvo", "-fa", "on"], &cpu),
            (&["-ngl", "99", "-nkvo"], &cpu_fa_off),
            (&["-ngl", "3", "-fa", "off"], &cpu_fa_off),
        ] {
            let (vk, err) = greedy_n(&q, "24", extra, true);
            assert_eq!(
                &vk, want,
                "{ty} {extra:?}: text differs from the CPU's\n{err}"
            );
            if extra[1] == "99" {
                assert!(err.contains(&offloaded(99, 4)), "{ty}:\n{err}");
                assert!(err.contains("Vulkan0 model buffer size"), "{ty}:\n{err}");
            }
            // llama.cpp's make_cpu_buft_list puts the first device's host buffer type ahead
            // of the CPU's extra ones, and with mmap a weight bound for a host buffer type
            // stays in the mapped file (CPU_Mapped)
            assert!(!err.contains("CPU_REPACK"), "{ty} {extra:?}:\n{err}");
            if extra[1] == "0" {
                assert!(
                    err.contains("CPU_Mapped model buffer size"),
                    "{ty} {extra:?}:\n{err}"
                );
            }
        }
        let _ = std::fs::remove_file(&q);
    }
}

/// The split headers of the last GGML_SCHED_DEBUG print: (backend, number of inputs).
fn last_splits(err: &str) -> Vec<(String, usize)> {
    let mut all: Vec<Vec<(String, usize)>> = Vec::new();
    let mut cur: Vec<(String, usize)> = Vec::new();
    for piece in err.split("## SPLIT #").skip(1) {
        // "<i>: <backend> # <n> inputs..."
        let (idx, rest) = piece.split_once(": ").unwrap_or(("", ""));
        let backend = rest.split(" # ").next().unwrap_or("").to_string();
        let n: usize = rest
            .split(" # ")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(usize::MAX);
        if idx == "0" && !cur.is_empty() {
            all.push(std::mem::take(&mut cur));
        }
        cur.push((backend, n));
    }
    all.push(cur);
    all.pop().unwrap_or_default()
}

#[test]
fn sched_debug_shows_cpu_and_vulkan_splits_at_ngl_2() {
    if !vulkan_or_skip() {
        return;
    }
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let m = model.to_str().unwrap();
    let mut c = Command::new(test_fixtures::bin("llama-completion", "llama-completion"));
    c.args([
        "-m", m, "-p", PROMPT, "-n", "1", "--temp", "0", "-no-cnv", "-v", "-ngl", "2",
    ])
    .env_remove("LLAMA_ARG_MODEL")
    .env("GGML_VK_VISIBLE_DEVICES", "0")
    .env("GGML_SCHED_DEBUG", "2");
    let o = c.output().expect("run llama-completion");
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let splits = last_splits(&err);
    // -ngl 2 on 4 layers: i_gpu_start = 4 + 1 - 2 = 3, so layers 0..2 are on the CPU, layer 3
    // and the output layer on Vulkan0, except the output matrix: it is the tied 148 MiB token
    // embedding, past lavapipe's 128 MiB storage-buffer range, so it stays on the CPU. The
    // one-token graph is then three splits: the CPU (embedding, layers 0-2; no inputs), Vulkan0
    // (layer 3 and the output norm; it copies in the two halves of layer 2's residual add,
    // which pass 2 expanded onto Vulkan0, and the graph inputs it reads), the CPU again (the
    // output matrix product; one input, the normed hidden state).
    let names: Vec<&str> = splits.iter().map(|(b, _)| b.as_str()).collect();
    assert_eq!(names, ["CPU", "Vulkan0", "CPU"], "{splits:?}");
    let n_inputs: Vec<usize> = splits.iter().map(|(_, n)| *n).collect();
    assert_eq!(n_inputs, [0, 7, 1], "{splits:?}");
    let last = err.rsplit("## SPLIT #1: Vulkan0").next().unwrap_or("");
    let header = last.split("node #").next().unwrap_or("");
    for input in [
        "[ffn_out-2 ",
        "[ffn_inp-2 ",
        "[inp_pos ",
        "[attn_inp_k_idxs ",
        "[attn_inp_v_idxs ",
        "[attn_inp_kq_mask ",
        "[out_ids ",
    ] {
        assert!(header.contains(input), "no input {input} in: {header}");
    }
    assert!(err.contains("## SPLIT #2: CPU # 1 inputs"), "{err}");
    // the one-token graph's split count in the startup log agrees
    assert!(err.contains(" / 3, input objects"), "{err}");
}

/// The value after `label` on its stdout line (a trailing % dropped).
fn field(stdout: &str, label: &str) -> f64 {
    let l = stdout
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no '{label}' in {stdout}"));
    l[label.len()..]
        .trim_start_matches([' ', ':'])
        .split_whitespace()
        .next()
        .and_then(|v| v.trim_end_matches('%').parse().ok())
        .unwrap_or_else(|| panic!("bad '{label}' line: {l}"))
}

fn final_ppl(stderr: &str) -> f64 {
    let line = stderr
        .lines()
        .find(|l| l.contains("Final estimate: PPL = "))
        .unwrap_or_else(|| panic!("no final estimate in {stderr}"));
    line.split("Final estimate: PPL = ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn perplexity_and_kl_divergence_at_ngl_99_match_the_cpu() {
    if !vulkan_or_skip() {
        return;
    }
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let m = model.to_str().unwrap();
    let text_file = test_fixtures::shared_dir().join("reference/text/gpl-3.txt");
    let f = text_file.to_str().unwrap();
    let dir = test_fixtures::cache_dir().join("vulkan-cli");
    std::fs::create_dir_all(&dir).unwrap();
    let base = dir.join(format!("kld-base-{}.bin", std::process::id()));
    let b = base.to_str().unwrap();
    let common = ["-m", m, "-f", f, "-c", "128", "-b", "128", "--chunks", "4"];

    let mut args = common.to_vec();
    args.extend(["--kl-divergence-base", b]);
    let o = run("llama-perplexity", &args, false);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let ppl_cpu = final_ppl(&text(&o.stderr));

    let mut args = common.to_vec();
    args.extend(["-ngl", "99", "-lv", "4"]);
    let o = run("llama-perplexity", &args, true);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains(&offloaded(99, 4)), "{err}");
    let ppl_vk = final_ppl(&err);
    assert!(
        (ppl_vk - ppl_cpu).abs() <= 1e-3 * ppl_cpu,
        "PPL on Vulkan {ppl_vk} vs CPU {ppl_cpu}"
    );

    let args = [
        "-m",
        m,
        "-c",
        "128",
        "-b",
        "128",
        "-ngl",
        "99",
        "--kl-divergence-base",
        b,
        "--kl-divergence",
    ];
    let o = run("llama-perplexity", &args, true);
    let _ = std::fs::remove_file(&base);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let kld = field(&out, "Mean    KLD:");
    let same_top = field(&out, "Same top p:");
    assert!(kld < 1e-4, "mean KLD {kld}\n{out}");
    assert!(same_top >= 99.0, "same top token {same_top}%\n{out}");
}

#[test]
fn eval_callback_graph_draws_the_cpu_and_vulkan_splits() {
    if !vulkan_or_skip() {
        return;
    }
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = test_fixtures::cache_dir().join("vulkan-cli");
    std::fs::create_dir_all(&dir).unwrap();
    let dot = dir.join(format!("graph-{}.dot", std::process::id()));
    let args = [
        "-m",
        model.to_str().unwrap(),
        "-p",
        PROMPT,
        "-n",
        "1",
        "-ngl",
        "2",
        "--graph",
        dot.to_str().unwrap(),
    ];
    let o = run("llama-eval-callback", &args, true);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let d = std::fs::read_to_string(&dot).expect("the graph file");
    let _ = std::fs::remove_file(&dot);
    // layers 0-2 on the CPU (whose compute buffer is Vulkan_Host memory), then layer 3 on
    // Vulkan0, then the output product on the CPU
    let labels: Vec<&str> = d
        .lines()
        .filter_map(|l| l.trim().strip_prefix("label=\"split "))
        .map(|l| l.split(": ").nth(1).unwrap_or("").trim_end_matches("\";"))
        .collect();
    assert_eq!(labels, ["CPU", "Vulkan0", "CPU"], "{d}");
}

#[test]
fn override_tensor_and_dev_place_weights_on_vulkan0() {
    if !vulkan_or_skip() {
        return;
    }
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let (cpu, _) = greedy_n(&model, "8", &[], false);
    // -ot puts layer 3's weights on Vulkan0 with no layer offloaded
    let (out, err) = greedy_n(
        &model,
        "8",
        &["-ngl", "0", "-ot", "blk\\.3\\..*=Vulkan0"],
        true,
    );
    assert_eq!(out, cpu, "{err}");
    assert!(err.contains("offloaded 0/5 layers to GPU"), "{err}");
    assert!(err.contains("Vulkan0 model buffer size"), "{err}");
    // -dev Vulkan0 names the device; -dev none keeps everything on the CPU
    let (out, err) = greedy_n(&model, "8", &["-dev", "Vulkan0", "-ngl", "99"], true);
    assert_eq!(out, cpu, "{err}");
    assert!(err.contains("using device Vulkan0"), "{err}");
    let (out, err) = greedy_n(&model, "8", &["-dev", "none", "-ngl", "99"], true);
    assert_eq!(out, cpu, "{err}");
    assert!(!err.contains("Vulkan0 model buffer size"), "{err}");
}
