//! Runs the benchmark grid against libllama: the cartesian product of the parameter lists, a
//! model reloaded only when its parameters change, a warmup, then timed repetitions of prompt
//! processing (random tokens in batches of n_batch) and generation (one token at a time).

use llama::{Batch, Context, ContextParams, Model, ModelParams};
use llama_bench::params::{
    BuftOverride, CmdParams, Devices, FlashAttn, LazyMode, LoadMode, SplitMode,
};
use llama_bench::record::{rfc3339_utc, Machine, TestRecord};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// One point of the grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    pub model: String,
    pub n_prompt: i32,
    pub n_gen: i32,
    pub n_depth: i32,
    pub n_batch: i32,
    pub n_ubatch: i32,
    pub type_k: ggml::Type,
    pub type_v: ggml::Type,
    pub n_threads: i32,
    pub cpu_mask: String,
    pub cpu_strict: bool,
    pub poll: i32,
    pub n_gpu_layers: i32,
    pub n_cpu_moe: i32,
    pub split_mode: SplitMode,
    pub load_mode: LoadMode,
    pub lazy_mode: LazyMode,
    pub main_gpu: i32,
    pub no_kv_offload: bool,
    pub flash_attn: FlashAttn,
    pub devices: Devices,
    pub tensor_split: Vec<f32>,
    pub tensor_buft_overrides: Vec<BuftOverride>,
    pub embeddings: bool,
    pub no_op_offload: bool,
    pub no_host: bool,
    pub repack: bool,
    pub fit_target: u64,
    pub fit_min_ctx: u32,
}

impl Instance {
    /// Whether the loaded model can be kept for `other`.
    fn same_model(&self, o: &Instance) -> bool {
        self.model == o.model
            && self.n_gpu_layers == o.n_gpu_layers
            && self.n_cpu_moe == o.n_cpu_moe
            && self.split_mode == o.split_mode
            && self.main_gpu == o.main_gpu
            && self.tensor_split == o.tensor_split
            && self.load_mode == o.load_mode
            && self.lazy_mode == o.lazy_mode
            && self.devices == o.devices
            && self.no_host == o.no_host
            && self.repack == o.repack
            && self.tensor_buft_overrides == o.tensor_buft_overrides
    }

    fn model_params(&self) -> Result<ModelParams, String> {
        let mut m = ModelParams {
            n_gpu_layers: self.n_gpu_layers,
            split_mode: match self.split_mode {
                SplitMode::None => llama::SplitMode::None,
                SplitMode::Layer => llama::SplitMode::Layer,
                SplitMode::Row => llama::SplitMode::Row,
                SplitMode::Tensor => llama::SplitMode::Tensor,
            },
            main_gpu: self.main_gpu,
            tensor_split: self.tensor_split.clone(),
            load_mode: self.load_mode,
            use_extra_bufts: self.repack,
            devices: match &self.devices {
                Devices::Auto => None,
                Devices::None => Some(vec![]),
                Devices::Named(n) => Some(n.clone()),
            },
            ..ModelParams::default()
        };
        m.tensor_buft_overrides = self
            .tensor_buft_overrides
            .iter()
            .map(|o| (o.pattern.clone(), o.buft.clone()))
            .collect();
        // -ncmoe: the expert tensors of the first N layers stay on the CPU
        for i in 0..self.n_cpu_moe {
            m.tensor_buft_overrides.push((
                format!("blk\\.{i}\\.ffn_(up|down|gate)_(ch|)exps"),
                "CPU".to_string(),
            ));
        }
        Ok(m)
    }

    fn context_params(&self) -> ContextParams {
        ContextParams {
            n_ctx: (self.n_prompt + self.n_gen + self.n_depth) as u32,
            n_batch: self.n_batch as u32,
            n_ubatch: self.n_ubatch as u32,
            type_k: self.type_k,
            type_v: self.type_v,
            offload_kqv: !self.no_kv_offload,
            flash_attn_type: match self.flash_attn {
                FlashAttn::Auto => llama::FlashAttnType::Auto,
                FlashAttn::Enabled => llama::FlashAttnType::Enabled,
                FlashAttn::Disabled => llama::FlashAttnType::Disabled,
            },
            embeddings: self.embeddings,
            op_offload: !self.no_op_offload,
            n_threads: self.n_threads,
            n_threads_batch: self.n_threads,
            ..ContextParams::default()
        }
    }
}

/// The grid in llama-bench's order (model outermost ... poll innermost; inside, all prompt
/// tests, then generation tests, then pp+tg tests).
pub fn instances(p: &CmdParams) -> Vec<Instance> {
    let mut out = Vec::new();
    for m in &p.model {
        for &fpt in &p.fit_target {
            for &fpc in &p.fit_min_ctx {
                for &nl in &p.n_gpu_layers {
                    for &ncmoe in &p.n_cpu_moe {
                        for &sm in &p.split_mode {
                            for &lm in &p.load_mode {
                                for &lzm in &p.lazy_mode {
                                    for &mg in &p.main_gpu {
                                        for devs in &p.devices {
                                            for ts in &p.tensor_split {
                                                for ot in &p.tensor_buft_overrides {
                                                    for &noh in &p.no_host {
                                                        for &rpk in &p.repack {
                                                            for &embd in &p.embeddings {
                                                                for &nopo in &p.no_op_offload {
                                                                    let base = Instance {
                                                                        model: m.clone(),
                                                                        n_prompt: 0,
                                                                        n_gen: 0,
                                                                        n_depth: 0,
                                                                        n_batch: 0,
                                                                        n_ubatch: 0,
                                                                        type_k: ggml::Type::F16,
                                                                        type_v: ggml::Type::F16,
                                                                        n_threads: 0,
                                                                        cpu_mask: String::new(),
                                                                        cpu_strict: false,
                                                                        poll: 0,
                                                                        n_gpu_layers: nl,
                                                                        n_cpu_moe: ncmoe,
                                                                        split_mode: sm,
                                                                        load_mode: lm,
                                                                        lazy_mode: lzm,
                                                                        main_gpu: mg,
                                                                        no_kv_offload: false,
                                                                        flash_attn: FlashAttn::Auto,
                                                                        devices: devs.clone(),
                                                                        tensor_split: ts.clone(),
                                                                        tensor_buft_overrides: ot
                                                                            .clone(),
                                                                        embeddings: embd,
                                                                        no_op_offload: nopo,
                                                                        no_host: noh,
                                                                        repack: rpk,
                                                                        fit_target: fpt,
                                                                        fit_min_ctx: fpc,
                                                                    };
                                                                    context_grid(p, base, &mut out);
                                                                }
                                                            }
                                                        }
                                                    }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// The inner loops: context parameters, then the tests.
fn context_grid(p: &CmdParams, base: Instance, out: &mut Vec<Instance>) {
    for &nb in &p.n_batch {
        for &nub in &p.n_ubatch {
            for &tk in &p.type_k {
                for &tv in &p.type_v {
                    for &nkvo in &p.no_kv_offload {
                        for &fa in &p.flash_attn {
                            for &nt in &p.n_threads {
                                for cm in &p.cpu_mask {
                                    for &cs in &p.cpu_strict {
                                        for &nd in &p.n_depth {
                                            for &pl in &p.poll {
                                                let inst = Instance {
                                                    n_depth: nd,
                                                    n_batch: nb,
                                                    n_ubatch: nub,
                                                    type_k: tk,
                                                    type_v: tv,
                                                    n_threads: nt,
                                                    cpu_mask: cm.clone(),
                                                    cpu_strict: cs,
                                                    poll: pl,
                                                    no_kv_offload: nkvo,
                                                    flash_attn: fa,
                                                    ..base.clone()
                                                };
                                                for &n in &p.n_prompt {
                                                    if n != 0 {
                                                        out.push(Instance {
                                                            n_prompt: n,
                                                            ..inst.clone()
                                                        });
                                                    }
                                                }
                                                for &n in &p.n_gen {
                                                    if n != 0 {
                                                        out.push(Instance {
                                                            n_gen: n,
                                                            ..inst.clone()
                                                        });
                                                    }
                                                }
                                                for &(pp, tg) in &p.n_pg {
                                                    if pp != 0 || tg != 0 {
                                                        out.push(Instance {
                                                            n_prompt: pp,
                                                            n_gen: tg,
                                                            ..inst.clone()
                                                        });
                                                    }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The machine description every result carries.
pub fn machine() -> Machine {
    use ggml::backend::DeviceKind;
    let devs = ggml::backend::devices();
    let join = |kinds: &[DeviceKind]| {
        devs.iter()
            .filter(|d| kinds.contains(&d.kind()))
            .map(|d| d.description().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let backends: Vec<String> = ggml::backend::regs()
        .iter()
        .map(|r| r.name().to_string())
        .filter(|n| n != "CPU" && !n.starts_with("RPC"))
        .collect();
    Machine {
        build_commit: build_info::commit().to_string(),
        build_number: build_info::build_number() as i64,
        cpu_info: join(&[DeviceKind::Cpu, DeviceKind::Accel]),
        gpu_info: join(&[DeviceKind::Gpu, DeviceKind::IGpu]),
        backends: if backends.is_empty() {
            "CPU".to_string()
        } else {
            backends.join(",")
        },
    }
}

/// A small generator for the random tokens of the timed runs (their values do not matter).
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: usize) -> i32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n.max(1) as u64) as i32
    }
}

fn test_prompt(
    ctx: &mut Context,
    rng: &mut Rng,
    n_prompt: i32,
    n_batch: i32,
    n_threads: i32,
) -> Result<(), String> {
    if n_batch < 1 {
        return Err(format!(
            "test_prompt: the batch size must be positive, got {n_batch}"
        ));
    }
    ctx.set_n_threads(n_threads, n_threads);
    let model = ctx.model().clone();
    let vocab = model.vocab();
    let n_vocab = vocab.n_tokens();
    let mut n_processed = 0;
    let mut tokens = Vec::with_capacity(n_batch as usize);
    while n_processed < n_prompt {
        let n = (n_prompt - n_processed).min(n_batch);
        tokens.clear();
        tokens.push(if n_processed == 0 && vocab.add_bos() {
            vocab.bos()
        } else {
            rng.next(n_vocab)
        });
        for _ in 1..n {
            tokens.push(rng.next(n_vocab));
        }
        let res = ctx.decode(&Batch::get_one(&tokens));
        if res != 0 {
            return Err(format!(
                "test_prompt: failed to decode prompt batch, res = {res}"
            ));
        }
        n_processed += n;
    }
    Ok(())
}

fn test_gen(ctx: &mut Context, rng: &mut Rng, n_gen: i32, n_threads: i32) -> Result<(), String> {
    ctx.set_n_threads(n_threads, n_threads);
    let model = ctx.model().clone();
    let vocab = model.vocab();
    let n_vocab = vocab.n_tokens();
    let mut token = if vocab.add_bos() {
        vocab.bos()
    } else {
        rng.next(n_vocab)
    };
    for _ in 0..n_gen {
        let res = ctx.decode(&Batch::get_one(&[token]));
        if res != 0 {
            return Err(format!(
                "test_gen: failed to decode generation batch, res = {res}"
            ));
        }
        token = rng.next(n_vocab);
    }
    Ok(())
}

/// What the caller does with each finished result and with progress lines.
pub trait Sink {
    fn result(&mut self, t: &TestRecord);
}

/// Runs every instance; returns the results and the number of benchmarks that failed.
/// Errors that llama-bench treats as fatal are returned as `Err` (exit status 1).
pub fn run(p: &CmdParams, sink: &mut dyn Sink) -> Result<(Vec<TestRecord>, usize), String> {
    let machine = machine();
    let insts = instances(p);
    let count = insts.len();
    let mut model: Option<Arc<Model>> = None;
    let mut prev: Option<&Instance> = None;
    let mut failed = 0;
    let mut results = Vec::new();
    let mut rng = Rng(1);
    let progress = |msg: String| {
        if p.progress {
            eprintln!("llama-bench: benchmark {msg}");
        }
    };
    for (idx, inst) in insts.iter().enumerate() {
        let n = idx + 1;
        progress(format!("{n}/{count}: starting"));
        if inst.fit_target != 0 || inst.fit_min_ctx != 0 {
            eprintln!(
                "llama_bench: error: failed to fit params for model '{}': fitting to device memory is not supported by this build",
                inst.model
            );
            failed += 1;
            continue;
        }
        let reuse = matches!((&model, prev), (Some(_), Some(pi)) if pi.same_model(inst));
        if !reuse {
            model = None;
            let mparams = match inst.model_params() {
                Ok(m) => m,
                Err(e) => {
                    eprintln!(
                        "llama_bench: error: failed to load model '{}': {e}",
                        inst.model
                    );
                    failed += 1;
                    prev = None;
                    continue;
                }
            };
            match Model::load(std::path::Path::new(&inst.model), &mparams) {
                Ok(m) => model = Some(m),
                Err(e) => {
                    // libllama's own log of the cause is silenced unless -v: say it here
                    eprintln!(
                        "llama_bench: error: failed to load model '{}': {e}",
                        inst.model
                    );
                    failed += 1;
                    prev = None;
                    continue;
                }
            }
            prev = Some(inst);
        }
        let Some(m) = model.clone() else { continue };
        // the instance's threadpool (llama-bench attaches one for both roles)
        let mut tpp = ggml_cpu::placement::ThreadpoolParams::default();
        if let Err(e) = ggml_cpu::placement::parse_cpu_mask(&inst.cpu_mask, &mut tpp.cpumask) {
            return Err(format!(
                "llama_bench: failed to parse cpu-mask: {} ({e})",
                inst.cpu_mask
            ));
        }
        tpp.strict_cpu = inst.cpu_strict;
        tpp.poll = inst.poll.max(0) as u32;
        tpp.prio = p.prio;
        ggml_cpu::placement::set_threadpool_params(tpp.clone(), tpp);
        let mut ctx = match Context::new(m.clone(), inst.context_params()) {
            Ok(c) => c,
            Err(e) => {
                eprintln!(
                    "llama_bench: error: failed to create context with model '{}': {e}",
                    inst.model
                );
                model = None;
                prev = None;
                failed += 1;
                continue;
            }
        };
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut t = TestRecord {
            machine: machine.clone(),
            model_filename: inst.model.clone(),
            model_type: m.desc(),
            model_size: m.size(),
            model_n_params: m.n_params(),
            n_batch: inst.n_batch,
            n_ubatch: inst.n_ubatch,
            n_threads: inst.n_threads,
            cpu_mask: inst.cpu_mask.clone(),
            cpu_strict: inst.cpu_strict,
            poll: inst.poll,
            type_k: inst.type_k,
            type_v: inst.type_v,
            n_gpu_layers: inst.n_gpu_layers,
            n_cpu_moe: inst.n_cpu_moe,
            split_mode: inst.split_mode,
            main_gpu: inst.main_gpu,
            no_kv_offload: inst.no_kv_offload,
            flash_attn: inst.flash_attn,
            devices: inst.devices.clone(),
            tensor_split: inst.tensor_split.clone(),
            tensor_buft_overrides: inst.tensor_buft_overrides.clone(),
            load_mode: inst.load_mode,
            lazy_mode: inst.lazy_mode,
            embeddings: inst.embeddings,
            no_op_offload: inst.no_op_offload,
            no_host: inst.no_host,
            repack: inst.repack,
            fit_target: inst.fit_target,
            fit_min_ctx: inst.fit_min_ctx,
            n_prompt: inst.n_prompt,
            n_gen: inst.n_gen,
            n_depth: inst.n_depth,
            test_time: rfc3339_utc(secs),
            samples_ns: vec![],
        };
        ctx.memory_clear(false);
        if p.delay > 0 {
            std::thread::sleep(std::time::Duration::from_secs(p.delay as u64));
        }
        let fatal =
            |what: &str, e: String| format!("{e}\nllama_bench: error: failed to run {what}");
        if !p.no_warmup {
            if t.n_prompt > 0 {
                progress(format!("{n}/{count}: warmup prompt run"));
                test_prompt(&mut ctx, &mut rng, t.n_prompt, t.n_batch, t.n_threads)
                    .map_err(|e| fatal("prompt warmup", e))?;
            }
            if t.n_gen > 0 {
                progress(format!("{n}/{count}: warmup generation run"));
                test_gen(&mut ctx, &mut rng, 1, t.n_threads).map_err(|e| fatal("gen warmup", e))?;
            }
        }
        // the depth fill is done once; later repetitions cut the cache back to it
        let mut depth_cached = false;
        for i in 0..p.reps {
            if t.n_depth > 0 && depth_cached {
                ctx.memory_seq_rm(0, t.n_depth, -1);
                progress(format!(
                    "{n}/{count}: depth run {}/{} (cached)",
                    i + 1,
                    p.reps
                ));
            } else {
                ctx.memory_clear(false);
                if t.n_depth > 0 {
                    progress(format!("{n}/{count}: depth run {}/{}", i + 1, p.reps));
                    test_prompt(&mut ctx, &mut rng, t.n_depth, t.n_batch, t.n_threads)
                        .map_err(|e| fatal("depth", e))?;
                    depth_cached = true;
                }
            }
            let t_start = Instant::now();
            if t.n_prompt > 0 {
                progress(format!("{n}/{count}: prompt run {}/{}", i + 1, p.reps));
                test_prompt(&mut ctx, &mut rng, t.n_prompt, t.n_batch, t.n_threads)
                    .map_err(|e| fatal("prompt", e))?;
            }
            if t.n_gen > 0 {
                progress(format!("{n}/{count}: generation run {}/{}", i + 1, p.reps));
                test_gen(&mut ctx, &mut rng, t.n_gen, t.n_threads).map_err(|e| fatal("gen", e))?;
            }
            t.samples_ns.push(t_start.elapsed().as_nanos() as u64);
        }
        sink.result(&t);
        ctx.perf_print();
        results.push(t);
    }
    Ok((results, failed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_order_and_test_kinds() {
        let mut p = CmdParams::defaults();
        p.model = vec!["a".into(), "b".into()];
        p.n_threads = vec![1, 2];
        p.n_prompt = vec![512, 0];
        p.n_gen = vec![128];
        p.n_pg = vec![(8, 4)];
        let g = instances(&p);
        assert_eq!(g.len(), 2 * 2 * 3);
        let kinds: Vec<(String, i32, i32, i32)> = g
            .iter()
            .map(|i| (i.model.clone(), i.n_threads, i.n_prompt, i.n_gen))
            .collect();
        assert_eq!(kinds[0], ("a".to_string(), 1, 512, 0));
        assert_eq!(kinds[1], ("a".to_string(), 1, 0, 128));
        assert_eq!(kinds[2], ("a".to_string(), 1, 8, 4));
        assert_eq!(kinds[3], ("a".to_string(), 2, 512, 0));
        assert_eq!(kinds[6].0, "b");
        assert!(g[0].same_model(&g[5]));
        assert!(!g[0].same_model(&g[6]));
    }

    #[test]
    fn context_size_and_overrides() {
        let mut p = CmdParams::defaults();
        p.n_depth = vec![64];
        p.n_cpu_moe = vec![2];
        let g = instances(&p);
        assert_eq!(g[0].context_params().n_ctx, 512 + 64);
        assert_eq!(g[1].context_params().n_ctx, 128 + 64);
        let m = g[0].model_params().unwrap();
        assert_eq!(m.tensor_buft_overrides.len(), 2);
        assert_eq!(
            m.tensor_buft_overrides[1].0,
            "blk\\.1\\.ffn_(up|down|gate)_(ch|)exps"
        );
        assert!(m.devices.is_none());
    }
}
