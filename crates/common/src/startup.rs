//! What the common-parser tools do and print around the model (common.cpp / sampling.cpp /
//! fit.cpp): `common_init_from_params` (load, EOG biases, context, threadpool line, warmup),
//! the system_info line, `common_perf_print` and the memory breakdown table.

use std::path::Path;
use std::sync::Arc;

use llama::sampling::{PerfSamplerData, TokenText};
use llama::{Context, ContextParams, FlashAttnType, Model, ModelParams};

use crate::args::{FlashAttn, Params, SplitMode};

mod fit;
pub mod threads;

/// `COM_*` messages: "cmn  " and the first 12 characters of the function, right-aligned.
fn cmn(func: &str) -> String {
    let f: String = func.chars().take(12).collect();
    format!("cmn  {f:>12}: ")
}

/// `common_model_params_to_llama`.
pub fn model_params(p: &Params) -> Result<ModelParams, String> {
    Ok(ModelParams {
        n_gpu_layers: p.n_gpu_layers,
        split_mode: match p.split_mode {
            SplitMode::None => llama::SplitMode::None,
            SplitMode::Layer => llama::SplitMode::Layer,
            SplitMode::Row => llama::SplitMode::Row,
            SplitMode::Tensor => llama::SplitMode::Tensor,
        },
        main_gpu: p.main_gpu,
        tensor_split: p.tensor_split.clone(),
        load_mode: p.load_mode.parse()?,
        tensor_buft_overrides: p.tensor_buft_overrides.clone(),
        use_extra_bufts: !p.no_extra_bufts,
        devices: p.devices.clone(),
        check_tensors: p.check_tensors,
        kv_overrides: p.kv_overrides.clone(),
        ..ModelParams::default()
    })
}

/// `common_context_params_to_llama`.
pub fn context_params(p: &Params) -> ContextParams {
    ContextParams {
        n_ctx: p.n_ctx.max(0) as u32,
        n_batch: p.n_batch.max(0) as u32,
        n_ubatch: p.n_ubatch.max(0) as u32,
        n_seq_max: p.n_parallel.max(1) as u32,
        n_threads: p.n_threads,
        n_threads_batch: if p.n_threads_batch == -1 {
            p.n_threads
        } else {
            p.n_threads_batch
        },
        flash_attn_type: match p.flash_attn {
            FlashAttn::Auto => FlashAttnType::Auto,
            FlashAttn::Enabled => FlashAttnType::Enabled,
            FlashAttn::Disabled => FlashAttnType::Disabled,
        },
        type_k: p.cache_type_k,
        type_v: p.cache_type_v,
        offload_kqv: !p.no_kv_offload,
        op_offload: !p.no_op_offload,
        kv_unified: p.kv_unified,
        swa_full: p.swa_full,
        rope_freq_base: p.rope_freq_base,
        rope_freq_scale: p.rope_freq_scale,
        rope_scaling_type: match p.rope_scaling {
            crate::args::RopeScaling::Unspecified => None,
            crate::args::RopeScaling::None => Some(llama::hparams::RopeScaling::None),
            crate::args::RopeScaling::Linear => Some(llama::hparams::RopeScaling::Linear),
            crate::args::RopeScaling::Yarn => Some(llama::hparams::RopeScaling::Yarn),
        },
        yarn_ext_factor: p.yarn_ext_factor,
        yarn_attn_factor: p.yarn_attn_factor,
        yarn_beta_fast: p.yarn_beta_fast,
        yarn_beta_slow: p.yarn_beta_slow,
        yarn_orig_ctx: p.yarn_orig_ctx.max(0) as u32,
        no_perf: p.no_perf,
        ..ContextParams::default()
    }
}

/// `common_token_to_piece` as text (invalid UTF-8 replaced).
pub fn token_to_piece(vocab: &llama::vocab::Vocab, id: i32, special: bool) -> String {
    String::from_utf8_lossy(&vocab.token_to_piece(id, 0, special)).into_owned()
}

/// The vocabulary as the samplers see it (DRY breakers, EOG).
pub struct VocabText<'a>(pub &'a llama::vocab::Vocab);

impl TokenText for VocabText<'_> {
    fn n_tokens(&self) -> usize {
        self.0.n_tokens()
    }
    fn token_text(&self, id: i32) -> Vec<u8> {
        self.0.detokenize(&[id], false, true)
    }
    fn tokenize(&self, text: &[u8]) -> Vec<i32> {
        self.0.tokenize(text, false, false)
    }
    fn is_eog(&self, id: i32) -> bool {
        self.0.is_eog(id)
    }
}

/// What `init_from_params` made.
pub struct Loaded {
    pub model: Arc<Model>,
    pub ctx: Context,
}

/// Why `init_from_params` gave up (its message was already logged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitError {
    Model,
    Context,
}

/// `common_init_from_params`: load the model, record the EOG logit biases (applied with
/// `--ignore-eos`), create the context, announce the threadpool, and warm up (decode BOS+EOS
/// once, then clear the memory and the timings).
pub fn init_from_params(p: &mut Params) -> Result<Loaded, InitError> {
    init_from_params_with(p, None)
}

/// `init_from_params` with `cb_eval` installed on the context, as llama.cpp's tools do by
/// setting `params.cb_eval` before `common_init_from_params` (llama-eval-callback).
pub fn init_from_params_with(
    p: &mut Params,
    cb_eval: Option<llama::EvalCallback>,
) -> Result<Loaded, InitError> {
    threads::numa_note(&p.numa);
    let fail_model = |p: &Params| {
        crate::log_err!(
            "{}failed to load model '{}'\n",
            cmn("common_init_from_params"),
            p.model
        );
        InitError::Model
    };
    let mut mparams = match model_params(p) {
        Ok(m) => m,
        Err(e) => {
            crate::log_err!("{}{}\n", cmn("common_init_from_params"), e);
            return Err(fail_model(p));
        }
    };
    let mut cparams = context_params(p);
    if p.fit_params {
        let f = cmn("common_init_result");
        crate::log_trc!("{f}fitting params to device memory ...\n");
        crate::log_trc!("{f}(for bugs during this step try to reproduce them with -fit off, or provide --verbose logs if the bug only occurs with -fit on)\n");
        fit::fit_params(p, &mut mparams, &mut cparams);
    }
    cparams.cb_eval = cb_eval;
    let model = match Model::load(Path::new(&p.model), &mparams) {
        Ok(m) => m,
        Err(_) => return Err(fail_model(p)),
    };
    // load the LoRA adapters before the context, as common_init_result does, so that the
    // context's graph size counts them; they apply after the control vector
    let mut loras = Vec::new();
    for (path, scale) in &p.lora_adapters {
        match llama::lora::LoraAdapter::load(&model, path) {
            Ok(a) => loras.push((a, *scale)),
            Err(_) => {
                crate::log_err!(
                    "{}failed to load lora adapter '{}'\n",
                    cmn("common_init_result"),
                    path
                );
                crate::log_err!(
                    "{}failed to create context with model '{}'\n",
                    cmn("common_init_from_params"),
                    p.model
                );
                return Err(InitError::Context);
            }
        }
    }
    let vocab_ref = model.vocab();

    if p.sampling.ignore_eos && vocab_ref.eos() == llama::vocab::TOKEN_NULL {
        crate::log_wrn!(
            "{}vocab does not have an EOS token, ignoring --ignore-eos\n",
            cmn("common_init_from_params")
        );
        p.sampling.ignore_eos = false;
    }
    p.sampling.logit_bias_eog.clear();
    for id in 0..vocab_ref.n_tokens() as i32 {
        if vocab_ref.is_eog(id) {
            crate::log_trc!(
                "{}added {} logit bias = {}\n",
                cmn("common_init_from_params"),
                token_to_piece(vocab_ref, id, true),
                "-inf"
            );
            p.sampling.logit_bias_eog.push((id, f32::NEG_INFINITY));
        }
    }
    if p.sampling.ignore_eos {
        let eog = p.sampling.logit_bias_eog.clone();
        p.sampling.logit_bias.extend(eog);
    }

    // the CPU backend the context makes takes its threadpools' settings from here
    threads::configure(p);
    let mut ctx = match Context::new(model.clone(), cparams) {
        Ok(c) => c,
        Err(_) => {
            crate::log_err!(
                "{}failed to create context with model '{}'\n",
                cmn("common_init_from_params"),
                p.model
            );
            return Err(InitError::Context);
        }
    };
    threads::set_process_priority(p.priority);
    crate::log_inf!(
        "{}llama threadpool init, n_threads = {}\n",
        cmn("init"),
        p.n_threads
    );

    if p.ctx_shift && !ctx.memory_can_shift() {
        crate::log_wrn!(
            "{}KV cache shifting is not supported for this context, disabling KV cache shifting\n",
            cmn("common_init_from_params")
        );
        p.ctx_shift = false;
    }

    if !p.control_vectors.is_empty() {
        let n_layer = model.hparams().n_layer as i32;
        let (mut start, mut end) = p.control_vector_layer_range;
        if start <= 0 {
            start = 1;
        }
        if end <= 0 {
            end = n_layer;
        }
        let files: Vec<_> = p
            .control_vectors
            .iter()
            .map(|(path, strength)| llama::cvec::ControlVectorFile {
                path: path.clone(),
                strength: *strength,
            })
            .collect();
        // llama.cpp goes on without the vector after these errors; a run the user asked to
        // steer stops here instead
        let Some((n_embd, data)) = llama::cvec::load_control_vectors(&files) else {
            return Err(InitError::Context);
        };
        if ctx
            .set_adapter_cvec(Some(&data), n_embd, start, end)
            .is_err()
        {
            return Err(InitError::Context);
        }
    }

    ctx.set_adapters_lora(&loras);

    if p.warmup {
        crate::log_trc!(
            "{}warming up the model with an empty run - please wait ... (--no-warmup to disable)\n",
            cmn("common_init_from_params")
        );
        let vocab = model.vocab();
        let mut tmp = Vec::new();
        if vocab.bos() != llama::vocab::TOKEN_NULL {
            tmp.push(vocab.bos());
        }
        if vocab.eos() != llama::vocab::TOKEN_NULL {
            tmp.push(vocab.eos());
        }
        if tmp.is_empty() {
            tmp.push(0);
        }
        tmp.truncate(p.n_batch.max(1) as usize);
        ctx.set_warmup(true);
        let _ = ctx.decode(&llama::Batch::get_one(&tmp));
        ctx.set_warmup(false);
        ctx.memory_clear(true);
        ctx.perf_reset();
    }
    Ok(Loaded { model, ctx })
}

/// `common_params_get_system_info`.
pub fn system_info(p: &Params) -> String {
    let mut s = format!("system_info: n_threads = {}", p.n_threads);
    if p.n_threads_batch != -1 {
        s.push_str(&format!(" (n_threads_batch = {})", p.n_threads_batch));
    }
    s.push_str(&format!(
        " / {} | {}",
        crate::args::util::hardware_concurrency(),
        llama::print_system_info()
    ));
    s
}

/// The timings `common_perf_print` needs from the sampler side: the chain's own counters and
/// the wall time spent in sampling calls (which includes building the candidates).
pub struct SamplerTimes {
    pub chain: PerfSamplerData,
    pub t_sampling_ms: f64,
}

/// `common_perf_print`: sampler and context timings (INFO), then the memory breakdown (trace).
pub fn perf_print(ctx: &Context, smpl: Option<&SamplerTimes>) {
    const F: &str = "common_perf_print";
    let t_sampling_ms = smpl.map(|s| s.t_sampling_ms).unwrap_or(0.0);
    if let Some(s) = smpl {
        crate::log_inf!("{F}:    sampling time = {:10.2} ms\n", s.t_sampling_ms);
        crate::log_inf!(
            "{F}:    samplers time = {:10.2} ms / {:5} tokens\n",
            s.chain.t_sample_ms,
            s.chain.n_sample
        );
    }
    let d = ctx.perf();
    let t_end_ms = ctx.model().t_start().elapsed().as_secs_f64() * 1e3;
    let t_total_ms = t_end_ms - d.t_start_ms;
    let t_unacc_ms = t_total_ms - (t_sampling_ms + d.t_p_eval_ms + d.t_eval_ms);
    let t_unacc_pc = 100.0 * t_unacc_ms / t_total_ms;
    crate::log_inf!("{F}:        load time = {:10.2} ms\n", d.t_load_ms);
    crate::log_inf!(
        "{F}: prompt eval time = {:10.2} ms / {:5} tokens ({:>8} ms per token, {:>8} tokens per second)\n",
        d.t_p_eval_ms,
        d.n_p_eval,
        cfmt2(d.t_p_eval_ms / d.n_p_eval as f64),
        cfmt2(1e3 / d.t_p_eval_ms * d.n_p_eval as f64)
    );
    crate::log_inf!(
        "{F}:        eval time = {:10.2} ms / {:5} runs   ({:>8} ms per token, {:>8} tokens per second)\n",
        d.t_eval_ms,
        d.n_eval,
        cfmt2(d.t_eval_ms / d.n_eval as f64),
        cfmt2(1e3 / d.t_eval_ms * d.n_eval as f64)
    );
    crate::log_inf!(
        "{F}:       total time = {:10.2} ms / {:5} tokens\n",
        t_total_ms,
        d.n_p_eval + d.n_eval
    );
    crate::log_inf!(
        "{F}: unaccounted time = {:10.2} ms / {:>5} %      (total - sampling - prompt eval - eval) / (total)\n",
        t_unacc_ms,
        cfmt1(t_unacc_pc)
    );
    crate::log_inf!("{F}:    graphs reused = {:10}\n", d.n_reused);
    memory_breakdown_print(ctx);
}

/// printf's "%.2f" for values that may be inf or nan (0/0 when nothing was evaluated).
fn cfmt2(v: f64) -> String {
    cfmt(v, 2)
}

fn cfmt1(v: f64) -> String {
    cfmt(v, 1)
}

fn cfmt(v: f64, prec: usize) -> String {
    if v.is_nan() {
        if v.is_sign_negative() { "-nan" } else { "nan" }.to_string()
    } else if v.is_infinite() {
        if v < 0.0 { "-inf" } else { "inf" }.to_string()
    } else {
        format!("{v:.prec$}")
    }
}

/// printf's "%g": 6 significant digits, trailing zeros dropped, exponent form outside
/// [1e-4, 1e6).
pub fn fmt_g(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return cfmt(v, 0).replace(".", "");
    }
    let exp = v.abs().log10().floor() as i32;
    let trim = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if !(-4..6).contains(&exp) {
        let s = format!("{:.5e}", v);
        let (mant, e) = s.split_once('e').unwrap_or((&s, "0"));
        let e: i32 = e.parse().unwrap_or(0);
        format!(
            "{}e{}{:02}",
            trim(mant.to_string()),
            if e < 0 { '-' } else { '+' },
            e.abs()
        )
    } else {
        let prec = (5 - exp).max(0) as usize;
        trim(format!("{v:.prec$}"))
    }
}

/// One line of the memory breakdown table, before padding.
struct Row {
    device: bool,
    cells: [String; 8],
}

/// `common_memory_breakdown_print` (trace level): a row per device used, one for host
/// buffers, then one per remaining buffer type; columns padded to the widest cell.
pub fn memory_breakdown_print(ctx: &Context) {
    const MIB: u64 = 1024 * 1024;
    let breakdown = ctx.memory_breakdown();
    let mut rows = vec![Row {
        device: false,
        cells: [
            "memory breakdown [MiB]",
            "total",
            "free",
            "self",
            "model",
            "context",
            "compute",
            "unaccounted",
        ]
        .map(String::from),
    }];
    // the same figures for --log-jsonl consumers, as llama.cpp's LOG_JSON rows
    let mut json_rows: Vec<String> = Vec::new();
    let js = crate::log::json_string;
    let mut host = (0u64, 0u64, 0u64);
    let mut devices: Vec<(String, (u64, u64, u64))> = Vec::new();
    let mut others: Vec<(String, (u64, u64, u64))> = Vec::new();
    for r in &breakdown {
        let add = |acc: &mut (u64, u64, u64)| {
            acc.0 += r.model as u64;
            acc.1 += r.context as u64;
            acc.2 += r.compute as u64;
        };
        if r.is_host {
            add(&mut host);
        } else if let Some(dev) = &r.device {
            match devices.iter_mut().find(|(n, _)| n == dev) {
                Some((_, acc)) => add(acc),
                None => {
                    let mut acc = (0, 0, 0);
                    add(&mut acc);
                    devices.push((dev.clone(), acc));
                }
            }
        } else {
            let mut acc = (0, 0, 0);
            add(&mut acc);
            others.push((r.buft.clone(), acc));
        }
    }
    for (name, (model, context, compute)) in &devices {
        // the model's own devices first: a meta device is in no registry
        let dev = ctx
            .model()
            .devices()
            .iter()
            .find(|d| d.name() == name)
            .cloned()
            .or_else(|| ggml::backend::dev_by_name(name));
        let (desc, free, total) = match dev {
            Some(d) => {
                let (free, total) = d.memory();
                (strip_vendor(d.description()), free as u64, total as u64)
            }
            None => (String::new(), 0, 0),
        };
        let selfb = model + context + compute;
        let unaccounted = total as i64 - free as i64 - selfb as i64;
        json_rows.push(format!(
            "{{\"kind\":\"device\",\"name\":{},\"description\":{},\"total\":{},\"free\":{},\"self\":{},\"model\":{},\"context\":{},\"compute\":{},\"unaccounted\":{}}}",
            js(name),
            js(&desc),
            total / MIB,
            free / MIB,
            selfb / MIB,
            model / MIB,
            context / MIB,
            compute / MIB,
            unaccounted / MIB as i64
        ));
        rows.push(Row {
            device: true,
            cells: [
                format!("  - {name} ({desc})"),
                (total / MIB).to_string(),
                (free / MIB).to_string(),
                (selfb / MIB).to_string(),
                (model / MIB).to_string(),
                (context / MIB).to_string(),
                (compute / MIB).to_string(),
                (unaccounted / MIB as i64).to_string(),
            ],
        });
    }
    let other_row = |name: String, (model, context, compute): (u64, u64, u64)| Row {
        device: false,
        cells: [
            name,
            String::new(),
            String::new(),
            ((model + context + compute) / MIB).to_string(),
            (model / MIB).to_string(),
            (context / MIB).to_string(),
            (compute / MIB).to_string(),
            String::new(),
        ],
    };
    let json_other = |kind: &str, name: &str, (model, context, compute): (u64, u64, u64)| {
        format!(
            "{{\"kind\":\"{kind}\",\"name\":{},\"self\":{},\"model\":{},\"context\":{},\"compute\":{}}}",
            js(name),
            (model + context + compute) / MIB,
            model / MIB,
            context / MIB,
            compute / MIB
        )
    };
    rows.push(other_row("  - Host".to_string(), host));
    json_rows.push(json_other("host", "Host", host));
    for (name, acc) in others {
        json_rows.push(json_other("buffer_type", &name, acc));
        rows.push(other_row(format!("  - {name}"), acc));
    }
    for j in 0..8 {
        let w = rows.iter().map(|r| r.cells[j].len()).max().unwrap_or(0);
        for r in rows.iter_mut() {
            r.cells[j] = if j == 0 {
                format!("{:<w$}", r.cells[j])
            } else {
                format!("{:>w$}", r.cells[j])
            };
        }
    }
    const F: &str = "common_memory_breakdown_print";
    for (i, r) in rows.iter().enumerate() {
        let c = &r.cells;
        let line = if i == 0 {
            format!(
                "{F}: | {} | {}   {}    {}   {}   {}   {}    {} |\n",
                c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]
            )
        } else if r.device {
            format!(
                "{F}: | {} | {} = {} + ({} = {} + {} + {}) + {} |\n",
                c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]
            )
        } else {
            format!(
                "{F}: | {} | {}   {}    {} = {} + {} + {}    {} |\n",
                c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]
            )
        };
        crate::log_trc!("{line}");
    }
    crate::log::log_json(
        "fit_memory_breakdown",
        &format!("{{\"unit\":\"MiB\",\"rows\":[{}]}}", json_rows.join(",")),
    );
}

fn strip_vendor(desc: &str) -> String {
    let mut d = desc.to_string();
    for prefix in [
        "NVIDIA ",
        "GeForce ",
        "Tesla ",
        "AMD ",
        "Radeon ",
        "Instinct ",
    ] {
        if let Some(rest) = d.strip_prefix(prefix) {
            d = rest.to_string();
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmn_prefix_is_right_aligned_and_cut_at_12() {
        assert_eq!(cmn("common_init_from_params"), "cmn  common_init_: ");
        assert_eq!(cmn("init"), "cmn          init: ");
    }

    #[test]
    fn c_float_format_handles_non_finite() {
        assert_eq!(cfmt2(1.0 / 0.0), "inf");
        assert_eq!(cfmt2(0.0 / 0.0_f64.abs()), "nan");
        assert_eq!(cfmt1(2.04), "2.0");
    }

    #[test]
    fn g_format() {
        assert_eq!(fmt_g(10000.0), "10000");
        assert_eq!(fmt_g(0.5), "0.5");
        assert_eq!(fmt_g(1e6), "1e+06");
        assert_eq!(fmt_g(0.25), "0.25");
        assert_eq!(fmt_g(1.0 / 3.0), "0.333333");
        assert_eq!(fmt_g(0.0), "0");
    }

    #[test]
    fn vendor_prefixes_are_stripped_in_order() {
        assert_eq!(strip_vendor("NVIDIA GeForce RTX 5090"), "RTX 5090");
        assert_eq!(strip_vendor("NVIDIA H200"), "H200");
        assert_eq!(strip_vendor("Apple M5"), "Apple M5");
    }
}
