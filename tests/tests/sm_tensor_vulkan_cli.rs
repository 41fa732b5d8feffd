//! `-sm tensor` over two real devices: lavapipe named twice (GGML_VK_VISIBLE_DEVICES=0,0 gives
//! Vulkan0 and Vulkan1, two logical devices, as in llama.cpp). The meta device over them gives
//! the single device's greedy text on the reference model and on a MoE model, perplexity within
//! 0.01%, and llama.cpp's startup lines for it. Without a Vulkan device the tests skip (printing
//! so), and fail under CI=true.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(name: &str, args: &[&str], devices: &str) -> Output {
    test_fixtures::vulkan::run(name, args, Some(devices))
}

fn text(b: &[u8]) -> String {
    test_fixtures::text(b)
}

/// True when two lavapipe devices appear; otherwise skips (failing in CI).
fn two_devices_or_skip() -> bool {
    test_fixtures::vulkan::devices_or_skip("0,0", &["Vulkan0", "Vulkan1"])
}

/// Greedy text of 24 tokens and the log.
fn greedy(model: &Path, extra: &[&str], devices: &str) -> (String, String) {
    let m = model.to_str().unwrap();
    let mut args = vec![
        "-m",
        m,
        "-p",
        "The capital of France is",
        "-n",
        "24",
        "--temp",
        "0",
        "--seed",
        "1",
        "-no-cnv",
        "-lv",
        "4",
        "-ngl",
        "99",
        "-fa",
        "on",
    ];
    args.extend_from_slice(extra);
    let o = run("llama-completion", &args, devices);
    assert!(
        o.status.success(),
        "{extra:?} on {devices}:\n{}",
        text(&o.stderr)
    );
    (text(&o.stdout), text(&o.stderr))
}

fn moe_model() -> PathBuf {
    let dir = test_fixtures::scratch_dir("sm-tensor-vulkan");
    let path = dir.join("qwen3moe.gguf");
    let o = Command::new(test_fixtures::bin("llama-gguf-new", "llama-gguf-new"))
        .args([
            "--arch", "qwen3moe", "--layers", "2", "--embd", "128", "--heads", "4",
        ])
        .args([
            "--heads-kv",
            "2",
            "--ff",
            "256",
            "--ctx",
            "512",
            "--vocab-size",
            "1000",
        ])
        .args([
            "--experts",
            "8",
            "--experts-used",
            "2",
            "--ff-exp",
            "64",
            "--seed",
            "7",
        ])
        .args(["--quiet", "-o"])
        .arg(&path)
        .output()
        .expect("run llama-gguf-new");
    assert!(o.status.success(), "llama-gguf-new: {}", text(&o.stderr));
    path
}

#[test]
fn reference_model_over_two_vulkan_devices_gives_the_single_device_text_and_log() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    if !two_devices_or_skip() {
        return;
    }
    let (want, _) = greedy(&model, &[], "0");
    let (got, log) = greedy(&model, &["-sm", "tensor"], "0,0");
    assert_eq!(got, want, "greedy text over the meta device");
    // llama.cpp's lines (its build prints the meta device's name as "Meta()"; see docs/meta.md)
    for line in [
        "common_fit_params: failed to fit params to free device memory: llama_params_fit is not implemented for SPLIT_MODE_TENSOR, abort",
        "llama_prepare_model_devices: skipping CPU (",
        "llama_prepare_model_devices: creating a Meta device for tensor parallelism from 2 devices:",
        "llama_prepare_model_devices: - device 0: Vulkan0 (",
        "llama_prepare_model_devices: - device 1: Vulkan1 (",
        "llama_prepare_model_devices: using device Meta(Vulkan0,Vulkan1) (",
        "load_tensors: Meta(Vulkan0,Vulkan1) model buffer size =     5.38 MiB",
        "load_tensors:      Vulkan0 model buffer size =     5.38 MiB",
        "load_tensors:      Vulkan1 model buffer size =     5.38 MiB",
        "llama_context: Vulkan_Host  output buffer size =     0.58 MiB",
        "llama_kv_cache: Meta(Vulkan0,Vulkan1) KV buffer size =     2.00 MiB",
        "sched_reserve: Meta(Vulkan0,Vulkan1) compute buffer size =     9.64 MiB",
        "sched_reserve: Vulkan_Host compute buffer size =   297.75 MiB",
        "sched_reserve: graph: nodes = 130, splits = 3, input objects = 4, input tensors = 6",
    ] {
        assert!(
            log.lines().any(|l| l.contains(line)),
            "no line with {line:?} in:\n{log}"
        );
    }
}

#[test]
fn moe_model_over_two_vulkan_devices_gives_the_single_device_text() {
    if !two_devices_or_skip() {
        return;
    }
    let model = moe_model();
    let (want, _) = greedy(&model, &[], "0");
    let (got, _) = greedy(&model, &["-sm", "tensor"], "0,0");
    assert_eq!(got, want, "greedy text over the meta device");
}

fn final_ppl(stderr: &str) -> f64 {
    let l = stderr
        .lines()
        .find(|l| l.contains("Final estimate: PPL = "))
        .unwrap_or_else(|| panic!("no final estimate in:\n{stderr}"));
    let v = l.split("PPL = ").nth(1).unwrap();
    v.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn perplexity_over_two_vulkan_devices_is_within_a_hundredth_of_a_percent() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    if !two_devices_or_skip() {
        return;
    }
    let text_file = test_fixtures::shared_dir().join("reference/text/gpl-3.txt");
    let m = model.to_str().unwrap();
    let f = text_file.to_str().unwrap();
    let ppl = |extra: &[&str], devices: &str| {
        let mut args = vec![
            "-m", m, "-f", f, "-c", "128", "--chunks", "2", "-ngl", "99", "-fa", "on",
        ];
        args.extend_from_slice(extra);
        let o = run("llama-perplexity", &args, devices);
        assert!(o.status.success(), "{}", text(&o.stderr));
        final_ppl(&text(&o.stderr))
    };
    let one = ppl(&[], "0");
    let two = ppl(&["-sm", "tensor"], "0,0");
    // the reduce adds the devices' partial sums in another order than one dot product
    assert!(
        ((two - one) / one).abs() < 1e-4,
        "perplexity {two} over two devices vs {one} on one"
    );
}
