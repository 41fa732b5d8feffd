//! Context parameters (llama_context_params) and their defaults.

use ggml::{Context as GgmlContext, TensorId, Type};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FlashAttnType {
    #[default]
    Auto,
    Enabled,
    Disabled,
}

impl FlashAttnType {
    /// llama_flash_attn_type_name
    pub fn name(self) -> &'static str {
        match self {
            FlashAttnType::Auto => "auto",
            FlashAttnType::Enabled => "enabled",
            FlashAttnType::Disabled => "disabled",
        }
    }
}

impl std::str::FromStr for FlashAttnType {
    type Err = String;
    /// The `-fa` values: on, off, auto (and their long spellings).
    fn from_str(s: &str) -> Result<FlashAttnType, String> {
        match s {
            "on" | "enabled" | "1" | "true" => Ok(FlashAttnType::Enabled),
            "off" | "disabled" | "0" | "false" => Ok(FlashAttnType::Disabled),
            "auto" | "-1" => Ok(FlashAttnType::Auto),
            _ => Err(format!(
                "unknown value for --flash-attn: '{s}' (expected on, off or auto)"
            )),
        }
    }
}

/// ggml_backend_sched_eval_callback: ask = true "do you want this node's data?"; ask = false
/// the data is ready (read it with ggml::backend::get_tensor); returning false stops.
pub type EvalCallback = Box<dyn FnMut(&GgmlContext, TensorId, bool) -> bool + Send>;

/// Checked after every graph node, after each scheduler split and before each ubatch; returning
/// true stops the decode, which returns 2 (the ubatches already computed stay in the KV cache).
pub type AbortCallback = std::sync::Arc<dyn Fn() -> bool + Send + Sync>;

pub struct ContextParams {
    /// 0: the model's training context
    pub n_ctx: u32,
    pub n_batch: u32,
    pub n_ubatch: u32,
    pub n_seq_max: u32,
    /// recurrent-state snapshots per sequence for rollback (0: none); only architectures
    /// with partial rollback keep it, and none of those is here
    pub n_rs_seq: u32,
    /// 0: n_batch
    pub n_outputs_max: u32,
    pub n_threads: i32,
    pub n_threads_batch: i32,
    pub flash_attn_type: FlashAttnType,
    pub type_k: Type,
    pub type_v: Type,
    pub offload_kqv: bool,
    pub op_offload: bool,
    pub embeddings: bool,
    pub kv_unified: bool,
    /// a sliding-window cache as large as the dense one (--swa-full)
    pub swa_full: bool,
    /// 0: from the model
    pub rope_freq_base: f32,
    /// 0: from the model
    pub rope_freq_scale: f32,
    /// `--rope-scaling`; None: the model's (rope_scaling_type_train)
    pub rope_scaling_type: Option<crate::hparams::RopeScaling>,
    /// < 0: from the model's scaling type
    pub yarn_ext_factor: f32,
    /// < 0: 1
    pub yarn_attn_factor: f32,
    pub yarn_beta_fast: f32,
    pub yarn_beta_slow: f32,
    pub yarn_orig_ctx: u32,
    pub no_perf: bool,
    /// disable reusing the previous graph when the next ubatch has the same shape
    pub graph_reuse_disable: bool,
    pub cb_eval: Option<EvalCallback>,
    pub abort_callback: Option<AbortCallback>,
}

impl Default for ContextParams {
    fn default() -> Self {
        ContextParams {
            n_ctx: 512,
            n_batch: 2048,
            n_ubatch: 512,
            n_seq_max: 1,
            n_rs_seq: 0,
            n_outputs_max: 0,
            n_threads: 4,
            n_threads_batch: 4,
            flash_attn_type: FlashAttnType::Auto,
            type_k: Type::F16,
            type_v: Type::F16,
            offload_kqv: true,
            op_offload: true,
            embeddings: false,
            kv_unified: false,
            swa_full: false,
            rope_freq_base: 0.0,
            rope_freq_scale: 0.0,
            rope_scaling_type: None,
            yarn_ext_factor: -1.0,
            yarn_attn_factor: -1.0,
            yarn_beta_fast: -1.0,
            yarn_beta_slow: -1.0,
            yarn_orig_ctx: 0,
            no_perf: true,
            graph_reuse_disable: false,
            cb_eval: None,
            abort_callback: None,
        }
    }
}

/// The resolved parameters a context runs with (llama_cparams).
#[derive(Clone, Debug)]
pub(crate) struct Cparams {
    pub n_ctx: u32,
    pub n_ctx_seq: u32,
    pub n_batch: u32,
    pub n_ubatch: u32,
    pub n_seq_max: u32,
    pub n_rs_seq: u32,
    pub n_outputs_max: u32,
    pub n_threads: usize,
    pub n_threads_batch: usize,
    pub flash_attn: bool,
    pub auto_fa: bool,
    /// the fused DeepSeek V4 HC probes are still to run (once, at the first reservation)
    pub auto_fhc: bool,
    pub causal_attn: bool,
    pub offload_kqv: bool,
    pub op_offload: bool,
    pub embeddings: bool,
    pub kv_unified: bool,
    pub rope_freq_base: f32,
    pub rope_freq_scale: f32,
    pub n_ctx_orig_yarn: u32,
    /// `--rope-scaling` or the model's scaling type
    pub rope_scaling_type: crate::hparams::RopeScaling,
    pub yarn_ext_factor: f32,
    pub yarn_attn_factor: f32,
    pub yarn_beta_fast: f32,
    pub yarn_beta_slow: f32,
    pub no_perf: bool,
    pub warmup: bool,
    pub graph_reuse_disable: bool,
}
