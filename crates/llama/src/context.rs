//! The inference context (llama_context): resolved parameters, the KV cache, the scheduler with
//! its reserved compute buffers, the output (logits) buffer, and the state decode keeps between
//! calls (the previous graph for reuse, output mappings, perf counters). Startup-log parts 3
//! and 4 are printed here and in `reserve`.

use crate::context_params::{ContextParams, Cparams, FlashAttnType};
use crate::error::{LlamaError, Result};
use crate::graph::{BuiltGraph, GraphBuilder, GraphParams};
use crate::hparams::RopeScaling;
use crate::kv_cache::KvCache;
use crate::kv_memory::{swa_cells, KvMemory, KvSpec};
use crate::model::Model;
use crate::perf::Perf;
use ggml::backend::{Backend, BufferTypeRef, DeviceKind, DeviceRef};
use ggml::sched::Sched;
use ggml::{RopeParams, Type};
use std::sync::Arc;

const MIB: f64 = 1024.0 * 1024.0;

/// One row of the memory breakdown: bytes by buffer type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryBreakdownRow {
    pub buft: String,
    /// the device the buffer type belongs to (None for host buffer types)
    pub device: Option<String>,
    pub is_host: bool,
    pub model: usize,
    pub context: usize,
    pub compute: usize,
}

pub struct Context {
    pub(crate) model: Arc<Model>,
    pub(crate) cparams: Cparams,
    pub(crate) kv: KvMemory,
    pub(crate) sched: Sched,
    pub(crate) backend_bufts: Vec<BufferTypeRef>,
    pub(crate) backend_devs: Vec<DeviceRef>,
    pub(crate) cpu_backend: usize,
    /// n_outputs_max x n_vocab floats
    pub(crate) logits: Vec<f32>,
    /// n_outputs x n_embd floats when the context computes embeddings
    pub(crate) embd: Vec<f32>,
    /// rows of `logits` holding the last decode's outputs
    pub(crate) n_outputs: usize,
    /// batch index -> output row (-1: no logits requested)
    pub(crate) output_ids: Vec<i32>,
    pub(crate) prev: Option<BuiltGraph>,
    pub(crate) perf: Perf,
    pub(crate) n_nodes_splits: (usize, usize),
    /// compute buffer bytes of each backend after the reservation
    pub(crate) compute_sizes: Vec<usize>,
    /// `--control-vector`: added to the layer outputs
    pub(crate) cvec: crate::cvec::ControlVector,
    /// the LoRA adapters applied, with their scales (none of them 0)
    pub(crate) loras: Vec<(Arc<crate::lora::LoraAdapter>, f32)>,
    /// the graph changed shape (a control vector was set): reserve again before decoding
    pub(crate) sched_need_reserve: bool,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Context(n_ctx = {})", self.cparams.n_ctx)
    }
}

fn resolve_cparams(model: &Model, params: &ContextParams) -> Result<Cparams> {
    let hp = &model.hparams;
    if params.n_seq_max == 0 || params.n_seq_max as usize > crate::kv_cells::MAX_SEQ {
        return Err(LlamaError::BadParams(format!(
            "n_seq_max must be <= {}",
            crate::kv_cells::MAX_SEQ
        )));
    }
    let mut n_ctx = if params.n_ctx == 0 {
        model.n_ctx_train()
    } else {
        params.n_ctx
    };
    n_ctx = n_ctx.div_ceil(256).saturating_mul(256);
    let n_ctx_seq = if params.kv_unified {
        n_ctx
    } else {
        // each sequence's share padded to 256 as well (llama.cpp's llama_context, after
        // ggml-org/llama.cpp#17046), so n_ctx can grow to a multiple of n_seq_max * 256
        let seq = (n_ctx / params.n_seq_max).div_ceil(256).saturating_mul(256);
        if seq == 0 {
            return Err(LlamaError::BadParams("n_ctx_seq == 0".into()));
        }
        if n_ctx != seq * params.n_seq_max {
            n_ctx = seq * params.n_seq_max;
            ggml::log_warn!(
                "llama_context: n_ctx is not divisible by n_seq_max - rounding down to {}\n",
                n_ctx
            );
        }
        seq
    };
    let causal_attn = hp.causal_attn;
    let n_batch = if causal_attn {
        n_ctx.min(params.n_batch)
    } else {
        params.n_batch
    };
    let n_ubatch = n_batch.min(if params.n_ubatch == 0 {
        n_batch
    } else {
        params.n_ubatch
    });
    let threads = |n: i32| {
        if n <= 0 {
            ggml_cpu::default_n_threads()
        } else {
            n as usize
        }
    };
    let rope_scaling = params
        .rope_scaling_type
        .unwrap_or(hp.rope_scaling_type_train);
    let yarn_ext_factor = if params.yarn_ext_factor >= 0.0 {
        params.yarn_ext_factor
    } else if rope_scaling == RopeScaling::Yarn {
        1.0
    } else {
        0.0
    };
    let rope_freq_scale = if rope_scaling == RopeScaling::None {
        1.0
    } else if params.rope_freq_scale == 0.0 {
        hp.rope_freq_scale_train
    } else {
        params.rope_freq_scale
    };
    let yarn_attn_factor = yarn_attn_factor(model, params, yarn_ext_factor, rope_freq_scale);
    // recurrent-state snapshots serve only the architectures with partial rollback
    // (llm_arch_supports_rs_rollback), none of which is here
    let n_rs_seq = if params.n_rs_seq > 0 {
        ggml::log_debug!(
            "llama_context: n_rs_seq={} requested but model does not support recurrent partial rollback; clamping to 0\n",
            params.n_rs_seq
        );
        0
    } else {
        params.n_rs_seq
    };
    Ok(Cparams {
        n_ctx,
        n_ctx_seq,
        n_rs_seq,
        n_batch,
        n_ubatch,
        n_seq_max: params.n_seq_max,
        n_outputs_max: if params.n_outputs_max == 0 {
            n_batch
        } else {
            params.n_outputs_max
        },
        n_threads: threads(params.n_threads),
        n_threads_batch: threads(params.n_threads_batch),
        flash_attn: params.flash_attn_type != FlashAttnType::Disabled,
        auto_fa: params.flash_attn_type == FlashAttnType::Auto,
        auto_fhc: true,
        causal_attn,
        offload_kqv: params.offload_kqv,
        op_offload: params.op_offload,
        embeddings: params.embeddings,
        kv_unified: params.kv_unified,
        rope_freq_base: if params.rope_freq_base == 0.0 {
            hp.rope_freq_base_train
        } else {
            params.rope_freq_base
        },
        // never scale if the scaling type is none
        rope_freq_scale,
        rope_scaling_type: rope_scaling,
        n_ctx_orig_yarn: if params.yarn_orig_ctx != 0 {
            params.yarn_orig_ctx
        } else {
            hp.n_ctx_orig_yarn
        },
        yarn_ext_factor,
        yarn_attn_factor,
        yarn_beta_fast: if params.yarn_beta_fast >= 0.0 {
            params.yarn_beta_fast
        } else {
            hp.yarn_beta_fast
        },
        yarn_beta_slow: if params.yarn_beta_slow >= 0.0 {
            params.yarn_beta_slow
        } else {
            hp.yarn_beta_slow
        },
        no_perf: params.no_perf,
        warmup: false,
        graph_reuse_disable: params.graph_reuse_disable,
    })
}

/// The rope attention factor of the context (llama_context's constructor): with YaRN
/// extrapolation, get_mscale of the scaling factor (DeepSeek's mscale / mscale_all_dim ratio
/// when the file has `rope.scaling.yarn_log_multiplier`) with the factor the rope kernel
/// applies itself cancelled; then the model's `rope.scaling.attn_factor`, whatever was set.
fn yarn_attn_factor(
    model: &Model,
    params: &ContextParams,
    ext_factor: f32,
    freq_scale: f32,
) -> f32 {
    let hp = &model.hparams;
    let mut f = if params.yarn_attn_factor >= 0.0 {
        params.yarn_attn_factor
    } else {
        1.0
    };
    if ext_factor != 0.0 {
        let get_mscale = |scale: f32, mscale: f32| {
            if scale <= 1.0 {
                1.0
            } else {
                0.1 * mscale * scale.ln() + 1.0
            }
        };
        let factor = 1.0 / freq_scale;
        if hp.rope_yarn_log_mul != 0.0 {
            let mscale_all_dims = hp.rope_yarn_log_mul;
            // DeepSeek V2's config gives both as one value (llama.cpp assumes mscale 1 else)
            let deepseek2 = model.arch.is_some_and(|a| a.name() == "deepseek2");
            let mscale = if deepseek2 && mscale_all_dims != 1.0 {
                mscale_all_dims
            } else {
                1.0
            };
            f = get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dims);
            ggml::log_warn!(
                "llama_context: setting new yarn_attn_factor = {:.4} (mscale == {:.1}, mscale_all_dim = {:.1})\n",
                f,
                mscale,
                mscale_all_dims
            );
        } else {
            f = get_mscale(factor, 1.0);
        }
        f *= 1.0 / (1.0 + 0.1 * factor.ln());
    }
    f * hp.rope_attn_factor
}

/// The text of a context error as llama.cpp words it (without our "invalid context
/// parameters: " heading).
fn cause(e: &LlamaError) -> String {
    match e {
        LlamaError::BadParams(m) => m.clone(),
        e => e.to_string(),
    }
}

/// llama_init_from_model's checks before it constructs the context; each failure is logged
/// as its own `llama_init_from_model: ...` line, as llama.cpp does.
fn precheck(model: &Model, params: &mut ContextParams) -> Result<()> {
    let hp = &model.hparams;
    let fail = |m: String| {
        ggml::log_error!("llama_init_from_model: {}\n", m);
        Err(LlamaError::BadParams(m))
    };
    if model.tok_embd.is_none() {
        return fail("the model was loaded with vocab_only".into());
    }
    if params.n_batch == 0 && params.n_ubatch == 0 {
        return fail("n_batch and n_ubatch cannot both be zero".into());
    }
    if params.n_ctx == 0 && model.n_ctx_train() == 0 {
        return fail("n_ctx and model->hparams.n_ctx_train cannot both be zero".into());
    }
    if params.type_v.is_quantized() {
        match params.flash_attn_type {
            FlashAttnType::Disabled => {
                return fail("quantized V cache requires flash_attn to be enabled".into());
            }
            FlashAttnType::Auto => {
                ggml::log_info!(
                    "llama_init_from_model: enabling flash_attn since it is required for quantized V cache\n"
                );
                params.flash_attn_type = FlashAttnType::Enabled;
            }
            FlashAttnType::Enabled => {}
        }
    }
    let tensor_split = model
        .placement
        .devices
        .iter()
        .any(|d| ggml::meta::as_meta_buft(&d.buffer_type()).is_some());
    if tensor_split {
        // the meta device splits attention by heads only through FLASH_ATTN_EXT
        if params.flash_attn_type == FlashAttnType::Auto {
            ggml::log_info!(
                "llama_init_from_model: enabling flash_attn since it is required for SPLIT_MODE_TENSOR\n"
            );
            params.flash_attn_type = FlashAttnType::Enabled;
        }
        if params.flash_attn_type != FlashAttnType::Enabled {
            return fail("SPLIT_MODE_TENSOR requires flash_attn to be enabled".into());
        }
    }
    KvCache::check_types(
        params.type_k,
        params.type_v,
        hp.n_embd_head_k,
        hp.n_embd_head_v,
    )
    .or_else(|e| fail(cause(&e)))
}

impl Context {
    /// llama_init_from_model: prints startup-log parts 3 and 4. A failure is logged with its
    /// cause (`llama_init_from_model: failed to initialize the context: <cause>` once the
    /// construction has begun) and returned.
    pub fn new(model: Arc<Model>, mut params: ContextParams) -> Result<Context> {
        precheck(&model, &mut params)?;
        Context::construct(model, params).inspect_err(|e| {
            ggml::log_error!(
                "llama_init_from_model: failed to initialize the context: {}\n",
                cause(e)
            );
        })
    }

    fn construct(model: Arc<Model>, mut params: ContextParams) -> Result<Context> {
        let hp = model.hparams.clone();
        ggml::log_info!("llama_context: constructing llama_context\n");
        let mut cparams = resolve_cparams(&model, &params)?;
        if cparams.graph_reuse_disable {
            ggml::log_warn!("llama_context: graph reuse disabled\n");
        }
        let info = |k: &str, v: String| ggml::log_info!("llama_context: {:<22}= {}\n", k, v);
        info("n_seq_max", cparams.n_seq_max.to_string());
        info("n_ctx", cparams.n_ctx.to_string());
        info("n_ctx_seq", cparams.n_ctx_seq.to_string());
        info("n_batch", cparams.n_batch.to_string());
        info("n_ubatch", cparams.n_ubatch.to_string());
        info("causal_attn", (cparams.causal_attn as i32).to_string());
        info("flash_attn", params.flash_attn_type.name().to_string());
        info("kv_unified", cparams.kv_unified.to_string());
        info("freq_base", format!("{:.1}", cparams.rope_freq_base));
        info("freq_scale", crate::cfmt::g(cparams.rope_freq_scale as f64));
        info("n_rs_seq", cparams.n_rs_seq.to_string());
        info("n_outputs_max", cparams.n_outputs_max.to_string());
        info("n_outputs_max_per_seq", "1".to_string());
        if cparams.n_ctx_seq < model.n_ctx_train() {
            ggml::log_info!(
                "llama_context: n_ctx_seq ({}) < n_ctx_train ({}) -- the full capacity of the model will not be utilized\n",
                cparams.n_ctx_seq,
                model.n_ctx_train()
            );
        } else if cparams.n_ctx_seq > model.n_ctx_train() {
            ggml::log_warn!(
                "llama_context: n_ctx_seq ({}) > n_ctx_train ({}) -- possible training context overflow\n",
                cparams.n_ctx_seq,
                model.n_ctx_train()
            );
        }

        // backends: the model's GPUs in order, then the CPU
        let cpu_dev = model
            .placement
            .cpu
            .clone()
            .ok_or_else(|| LlamaError::NoDevice("the model has no CPU device".into()))?;
        let mut devs: Vec<DeviceRef> = model
            .devices()
            .iter()
            .filter(|d| {
                matches!(
                    d.kind(),
                    DeviceKind::Gpu | DeviceKind::IGpu | DeviceKind::Accel
                )
            })
            .cloned()
            .collect();
        devs.push(cpu_dev.clone());
        let mut backends: Vec<Box<dyn Backend>> = Vec::new();
        for d in &devs {
            let b = d.clone().init_backend().map_err(|e| {
                LlamaError::NoDevice(format!("failed to initialize {} backend: {e}", d.name()))
            })?;
            backends.push(b);
        }
        // every thread a decode will use exists from here on, or the context is not made
        if let Some(cpu) = backends.last_mut() {
            let n = cparams.n_threads.max(cparams.n_threads_batch);
            cpu.reserve_threads(n).map_err(LlamaError::Threads)?;
        }
        // the callback itself is handed to the scheduler (and so every backend) once it exists
        ggml::log_debug!("set_abort_callback: call\n");

        // the output buffer, first sized for one output per sequence
        let n_vocab = hp.n_vocab as usize;
        let n_out0 = cparams.n_seq_max as usize;
        let out_size = n_vocab * n_out0
            + if cparams.embeddings {
                hp.n_embd as usize * n_out0
            } else {
                0
            };
        let logits = vec![0.0f32; n_vocab * n_out0];
        // as llama.cpp: the host buffer of the output layer's device (pinned memory for the
        // logits' transfer), else the CPU's
        let output_buft_name = model
            .dev_output()
            .and_then(|d| d.host_buffer_type())
            .unwrap_or_else(|| cpu_dev.buffer_type())
            .name()
            .to_string();
        ggml::log_info!(
            "llama_context: {:>10}  output buffer size = {:8.2} MiB\n",
            output_buft_name,
            (out_size * 4) as f64 / MIB
        );

        let v_trans = !cparams.flash_attn;
        let kv_spec = KvSpec {
            type_k: params.type_k,
            type_v: params.type_v,
            v_trans,
            offload: cparams.offload_kqv,
            kv_size: cparams.n_ctx,
            n_seq_max: cparams.n_seq_max,
            n_ubatch: cparams.n_ubatch,
            swa_full: params.swa_full,
            unified: cparams.kv_unified,
            cpu: &cpu_dev,
        };
        let (swa_per_stream, n_stream) = swa_cells(&kv_spec, hp.n_swa);
        let swa_cells = swa_per_stream * n_stream;
        let kv_bytes: usize = (0..hp.n_layer as usize)
            .map(|il| {
                let cells = if hp.is_swa(il) {
                    swa_cells
                } else {
                    cparams.n_ctx
                } as usize;
                params.type_k.row_size(hp.n_embd_k_gqa(il) as i64) * cells
                    + params.type_v.row_size(hp.n_embd_v_gqa(il) as i64) * cells
            })
            .sum();
        let (free, _) = cpu_dev.memory();
        if free > 0 && kv_bytes > free {
            return Err(LlamaError::Alloc {
                what: "kv cache".into(),
                buft: cpu_dev.buffer_type().name().to_string(),
                size: kv_bytes,
                why: format!(
                    "n_ctx = {} needs more than the {} MiB of free memory",
                    cparams.n_ctx,
                    free >> 20
                ),
            });
        }
        let kv = KvMemory::new(&model, &kv_spec)?;

        ggml::log_debug!("llama_context: enumerating backends\n");
        // the CPU computes in the first GPU's pinned host memory where it has one (llama.cpp:
        // faster transfers of the intermediate state)
        let gpu_host_buft = devs
            .iter()
            .find(|d| d.kind() != DeviceKind::Cpu)
            .and_then(|d| d.host_buffer_type());
        let backend_bufts: Vec<BufferTypeRef> = devs
            .iter()
            .map(|d| match (&gpu_host_buft, d.kind()) {
                (Some(h), DeviceKind::Cpu) => h.clone(),
                _ => d.buffer_type(),
            })
            .collect();
        ggml::log_debug!("llama_context: backend_ptrs.size() = {}\n", backends.len());
        let n_tokens = cparams.n_ctx.min(cparams.n_ubatch) as usize;
        let max_nodes = graph_max_nodes(&model, n_tokens);
        let cpu_backend = backends.len() - 1;
        ggml::log_info!("sched_reserve: reserving ...\n");
        let sched = Sched::new(
            backends,
            Some(backend_bufts.clone()),
            max_nodes,
            false,
            cparams.op_offload,
        )
        .map_err(|e| LlamaError::Compute(e.to_string()))?;
        cparams.warmup = false;

        let mut ctx = Context {
            perf: Perf::new(model.t_start(), model.t_load_us()),
            model,
            cparams,
            kv,
            sched,
            backend_bufts,
            backend_devs: devs,
            cpu_backend,
            logits,
            embd: Vec::new(),
            n_outputs: 0,
            output_ids: Vec::new(),
            prev: None,
            n_nodes_splits: (0, 0),
            compute_sizes: Vec::new(),
            cvec: Default::default(),
            loras: Vec::new(),
            sched_need_reserve: false,
        };
        ctx.sched_reserve(max_nodes)?;
        if let Some(cb) = params.cb_eval.take() {
            ctx.sched.set_eval_callback(Some(cb));
        }
        ctx.sched.set_abort_callback(params.abort_callback.clone());
        ctx.adjust_n_ctx_train_for_yarn();
        Ok(ctx)
    }

    /// llama_init_from_model: a YaRN scale other than the model's own moves the model's
    /// training context to the one that scale stretches the original context to.
    fn adjust_n_ctx_train_for_yarn(&self) {
        let c = &self.cparams;
        let hp = &self.model.hparams;
        if c.rope_scaling_type != crate::hparams::RopeScaling::Yarn
            || c.rope_freq_scale == hp.rope_freq_scale_train
        {
            return;
        }
        const F: &str = "llama_init_from_model";
        ggml::log_info!(
            "{F}: custom YaRN scaling detected, re-adjusting n_ctx_train({})...\n",
            self.model.n_ctx_train()
        );
        // as C converts the float quotient to uint32_t: truncated
        let n = (c.n_ctx_orig_yarn as f32 / c.rope_freq_scale) as u32;
        self.model
            .n_ctx_train_adjusted
            .store(n, std::sync::atomic::Ordering::Relaxed);
        ggml::log_info!("{F}: n_ctx_train adjusted to {n}\n");
    }

    /// The graph parameters of a ubatch shape.
    pub(crate) fn graph_params(
        &self,
        n_tokens: usize,
        n_outputs: usize,
        n_kv: usize,
        n_kv_swa: usize,
    ) -> GraphParams {
        let hp = &self.model.hparams;
        let c = &self.cparams;
        GraphParams {
            n_tokens,
            n_outputs,
            n_kv,
            n_kv_swa,
            flash_attn: c.flash_attn,
            causal: c.causal_attn,
            n_ctx_seq: c.n_ctx_seq,
            rope: RopeParams {
                n_dims: hp.n_rot as i32,
                mode: hp.rope_type as i32,
                n_ctx_orig: c.n_ctx_orig_yarn as i32,
                freq_base: c.rope_freq_base,
                freq_scale: c.rope_freq_scale,
                ext_factor: c.yarn_ext_factor,
                attn_factor: c.yarn_attn_factor,
                beta_fast: c.yarn_beta_fast,
                beta_slow: c.yarn_beta_slow,
                sections: [0; 4],
                n_offs: 0,
            },
            warmup: c.warmup,
        }
    }

    pub(crate) fn build_graph(&self, p: GraphParams) -> BuiltGraph {
        let mut b = GraphBuilder::new(&self.model, &self.kv, p);
        b.cvec = Some(&self.cvec);
        b.loras = &self.loras;
        let arch = self
            .model
            .arch
            .expect("contexts are created for models with tensors");
        let logits = arch.build_graph(&self.model, &mut b);
        b.finish(logits)
    }

    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }
    pub fn n_ctx(&self) -> u32 {
        self.cparams.n_ctx
    }
    pub fn n_ctx_seq(&self) -> u32 {
        self.cparams.n_ctx_seq
    }
    pub fn n_batch(&self) -> u32 {
        self.cparams.n_batch
    }
    pub fn n_ubatch(&self) -> u32 {
        self.cparams.n_ubatch
    }
    pub fn n_seq_max(&self) -> u32 {
        self.cparams.n_seq_max
    }
    pub fn n_threads(&self) -> usize {
        self.cparams.n_threads
    }
    pub fn n_threads_batch(&self) -> usize {
        self.cparams.n_threads_batch
    }
    pub fn flash_attn(&self) -> bool {
        self.cparams.flash_attn
    }
    pub fn type_k(&self) -> Type {
        self.kv.type_k()
    }
    pub fn type_v(&self) -> Type {
        self.kv.type_v()
    }
    pub fn set_n_threads(&mut self, n_threads: i32, n_threads_batch: i32) {
        let t = |n: i32| {
            if n <= 0 {
                ggml_cpu::default_n_threads()
            } else {
                n as usize
            }
        };
        self.cparams.n_threads = t(n_threads);
        self.cparams.n_threads_batch = t(n_threads_batch);
    }
    /// llama_set_warmup: the next decodes are warmup runs (all experts of MoE models).
    pub fn set_warmup(&mut self, warmup: bool) {
        self.cparams.warmup = warmup;
    }
    /// llama_set_abort_callback: checked after every graph node, between scheduler splits and
    /// between the ubatches of a batch; decode returns 2 when it stops one.
    pub fn set_abort_callback(&mut self, cb: Option<crate::context_params::AbortCallback>) {
        self.sched.set_abort_callback(cb);
    }
    /// (nodes, splits) of the reserved graph, as "graph: nodes = N, splits = M" prints.
    pub fn graph_nodes_splits(&self) -> (usize, usize) {
        self.n_nodes_splits
    }

    /// Bytes by buffer type: the weights, the KV cache and the compute buffers.
    pub fn memory_breakdown(&self) -> Vec<MemoryBreakdownRow> {
        let mut rows: Vec<MemoryBreakdownRow> = Vec::new();
        let mut row = |name: &str, f: &dyn Fn(&mut MemoryBreakdownRow)| {
            let i = match rows.iter().position(|r| r.buft == name) {
                Some(i) => i,
                None => {
                    let dev = self
                        .backend_devs
                        .iter()
                        .find(|d| d.kind() != DeviceKind::Cpu && d.buffer_type().name() == name)
                        .map(|d| d.name().to_string());
                    // (CPU_REPACK is CPU memory but not host memory: a row of its own)
                    let host_buft = self
                        .backend_devs
                        .iter()
                        .flat_map(|d| {
                            let mut l = vec![d.buffer_type()];
                            l.extend(d.host_buffer_type());
                            l.extend(d.extra_buffer_types());
                            l
                        })
                        .find(|b| b.name() == name)
                        .is_none_or(|b| b.is_host());
                    rows.push(MemoryBreakdownRow {
                        buft: name.to_string(),
                        is_host: dev.is_none() && host_buft,
                        device: dev,
                        model: 0,
                        context: 0,
                        compute: 0,
                    });
                    rows.len() - 1
                }
            };
            f(&mut rows[i]);
        };
        for (name, size) in self.model.buffer_sizes() {
            row(&name, &|r| r.model += size);
        }
        for (name, size) in self.kv.buffer_sizes() {
            row(&name, &|r| r.context += size);
        }
        for (i, buft) in self.backend_bufts.iter().enumerate() {
            let size = self.compute_sizes.get(i).copied().unwrap_or(0);
            if size > 0 {
                row(buft.name(), &|r| r.compute += size);
            }
        }
        rows
    }
}

/// graph_max_nodes: room for the graph plus the scheduler's copies.
pub(crate) fn graph_max_nodes(model: &Model, _n_tokens: usize) -> usize {
    let loras = model.lora_nodes.load(std::sync::atomic::Ordering::Relaxed);
    (model.ctx.len() * 8).max(1024) + loras
}
