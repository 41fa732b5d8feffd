//! Expert weights kept in CPU memory while the rest of the model is on a GPU (a fake one: host
//! memory, the CPU's kernels): the buffer overrides that `-cmoe` / `-ncmoe N` push (common's
//! llm_ffn_exps_cpu_override, `\.ffn_(up|down|gate|gate_up)_(ch|)exps` to CPU) put exactly the
//! expert stacks in the CPU buffer; a prompt long enough for the GPU to take the MUL_MAT_ID ops
//! (offload_op: 32 tokens) makes the scheduler copy only the experts the router picked, and the
//! logits are the CPU-only model's, bit for bit.

mod common;

use ggml::backend::DeviceRef;
use ggml_fake_device::{fake_gpus, Counters, FakeReg, TestDevice};
use llama::{Batch, Context, ContextParams, LoadMode, Model, ModelParams};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The regex of common's llm_ffn_exps_cpu_override (LLM_FFN_EXPS_REGEX).
const EXPS: &str = "\\.ffn_(up|down|gate|gate_up)_(ch|)exps";

fn fake_gpu() -> Arc<TestDevice> {
    static GPU: OnceLock<Arc<TestDevice>> = OnceLock::new();
    GPU.get_or_init(|| {
        llama::backend_init();
        let inner: ggml_fake_device::InnerBackendFn = Arc::new(|| Ok(ggml_cpu::init_backend()));
        let gpu = fake_gpus("GPU", 1, inner).remove(0);
        let devs = vec![gpu.clone() as DeviceRef];
        ggml::backend::register(Arc::new(FakeReg::new("FAKE", devs, false)));
        gpu
    })
    .clone()
}

/// qwen3moe, 2 layers, 64 experts of which a token uses 2: a 32-token prompt leaves some
/// experts unpicked, so a copy of only the used ones is smaller than the stack.
fn moe_model() -> PathBuf {
    static MADE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _once = MADE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = test_fixtures::cache_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("moe-placement-qwen3moe-64x2.gguf");
    if !path.is_file() {
        let tmp = dir.join(format!("moe-placement.{}.tmp", std::process::id()));
        #[rustfmt::skip]
        let st = std::process::Command::new(test_fixtures::bin("llama-gguf-new", "llama-gguf-new"))
            .arg("-o")
            .arg(&tmp)
            .args(["--arch", "qwen3moe", "--layers", "2", "--embd", "64", "--heads", "2",
                "--heads-kv", "1", "--ff", "128", "--ff-exp", "32", "--experts", "64",
                "--experts-used", "2", "--vocab-size", "512", "--ctx", "256", "--quiet"])
            .status()
            .expect("run llama-gguf-new");
        assert!(st.success(), "llama-gguf-new failed");
        std::fs::rename(&tmp, &path).unwrap();
    }
    path
}

fn load(path: &Path, devices: &[&str], overrides: &[String]) -> (Arc<Model>, Vec<String>) {
    let p = ModelParams {
        n_gpu_layers: -1,
        // a CPU buffer of the tensors' own sizes (a mapped one spans the file between them)
        load_mode: LoadMode::None,
        devices: Some(devices.iter().map(|s| s.to_string()).collect()),
        tensor_buft_overrides: overrides
            .iter()
            .map(|o| (o.clone(), "CPU".to_string()))
            .collect(),
        ..Default::default()
    };
    let (m, log) = common::capture(|| Model::load(path, &p));
    (m.expect("model loads"), common::text(&log, false))
}

fn logits(model: Arc<Model>, prompt: &[i32]) -> Vec<Vec<f32>> {
    let p = ContextParams {
        n_ctx: 256,
        n_threads: 1,
        n_threads_batch: 1,
        ..Default::default()
    };
    let mut ctx = common::capture(|| Context::new(model, p))
        .0
        .expect("context");
    let mut b = Batch::new();
    for (i, &t) in prompt.iter().enumerate() {
        b.add(t, i as i32, &[0], true);
    }
    assert_eq!(ctx.decode(&b), 0);
    (0..prompt.len())
        .map(|i| ctx.get_logits_ith(i as i32).unwrap().to_vec())
        .collect()
}

/// The MiB of a "load_tensors: <buft> model buffer size" line.
fn buffer_mib(log: &[String], buft: &str) -> Option<f64> {
    log.iter()
        .filter(|l| l.contains("model buffer size"))
        .find(|l| {
            l.split("model buffer size")
                .next()
                .unwrap()
                .trim_end()
                .ends_with(buft)
        })
        .and_then(|l| l.split("= ").nth(1))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// The bytes of the file's tensors whose names satisfy `pick`.
fn bytes_of(path: &Path, pick: impl Fn(&str) -> bool) -> u64 {
    let f = gguf::GgufFile::open(path).expect("open the model");
    f.tensors
        .iter()
        .filter(|t| pick(&t.name))
        .map(|t| f.tensor_data(t).len() as u64)
        .sum()
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1024.0 / 1024.0
}

/// The log's two decimals hold `bytes` (one expert stack of a layer here is 0.5 MiB).
fn assert_mib(logged: f64, bytes: u64, log: &[String]) {
    assert!(
        (logged - mib(bytes)).abs() <= 0.0051,
        "{logged} MiB logged, {} MiB wanted: {log:#?}",
        mib(bytes)
    );
}

#[test]
fn cpu_moe_keeps_the_experts_in_cpu_memory_and_copies_only_the_used_ones() {
    let gpu = fake_gpu();
    let path = moe_model();
    let prompt: Vec<i32> = (0..32).map(|i| (i * 53 + 11) % 512).collect();
    let want = logits(load(&path, &["CPU"], &[]).0, &prompt);

    let (model, log) = load(&path, &["GPU0"], &[EXPS.to_string()]);
    let experts = bytes_of(&path, |n| n.contains("_exps."));
    // the input layer (token_embd) is the CPU's in any case
    let cpu = experts + bytes_of(&path, |n| n == "token_embd.weight");
    let on_cpu = buffer_mib(&log, "CPU").expect("a CPU model buffer line");
    assert_mib(on_cpu, cpu, &log);
    let on_gpu = buffer_mib(&log, "GPU0").expect("a GPU0 model buffer line");
    assert_mib(on_gpu, bytes_of(&path, |_| true) - cpu, &log);

    let counters: Arc<Counters> = gpu.counters();
    let before = Counters::get(&counters.set_async_bytes);
    let got = logits(model, &prompt);
    let copied = Counters::get(&counters.set_async_bytes) - before;
    // every expert matrix product of the prompt ran on the GPU with a copy of the picked
    // experts of its stack: some bytes, but less than the stacks
    eprintln!("copied {copied} bytes of experts to the GPU; the stacks hold {experts}");
    assert!(copied > 0, "no expert was copied to the GPU");
    assert!(
        (copied as u64) < experts,
        "{copied} bytes copied, the whole stacks are {experts}"
    );
    assert_eq!(got, want, "logits with the experts on the CPU");
}

#[test]
fn n_cpu_moe_keeps_the_first_layers_experts_in_cpu_memory() {
    fake_gpu();
    let path = moe_model();
    // -ncmoe 1: llm_ffn_block_regex(0, LLM_FFN_EXPS_REGEX)
    let (_, log) = load(&path, &["GPU0"], &[format!("blk\\.0{EXPS}")]);
    let cpu = bytes_of(&path, |n| {
        n == "token_embd.weight" || (n.starts_with("blk.0.") && n.contains("_exps."))
    });
    let on_cpu = buffer_mib(&log, "CPU").expect("a CPU model buffer line");
    assert_mib(on_cpu, cpu, &log);
}
