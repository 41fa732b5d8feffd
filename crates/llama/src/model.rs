//! The model (llama_model): hyperparameters, the weights in their backend buffers, the layer to
//! device placement, and the descriptive queries (desc, size, n_params, metadata).

use crate::arch::Arch;
use crate::error::{LlamaError, Result};
use crate::hparams::HParams;
use crate::loader::{LoadMode, ModelLoader};
use crate::model_tensors::{Placement, TensorCreator};
use crate::vocab::Vocab;
use ggml::backend::{Buffer, DeviceRef};
use ggml::{Context, TensorId};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SplitMode {
    None,
    #[default]
    Layer,
    Row,
    /// one meta device over the selected GPUs: every layer split across all of them
    Tensor,
}

impl std::str::FromStr for SplitMode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<SplitMode, String> {
        match s {
            "none" => Ok(SplitMode::None),
            "layer" => Ok(SplitMode::Layer),
            "row" => Ok(SplitMode::Row),
            "tensor" => Ok(SplitMode::Tensor),
            _ => Err(format!(
                "unknown split mode '{s}' (expected none, layer, row or tensor)"
            )),
        }
    }
}

/// Called with the fraction of tensor data loaded; returning false cancels the load.
pub type ProgressCallback = Box<dyn FnMut(f32) -> bool + Send>;

/// llama_model_params
pub struct ModelParams {
    /// -1: as many as fit (all, with only the CPU), -2: all
    pub n_gpu_layers: i32,
    pub split_mode: SplitMode,
    pub main_gpu: i32,
    pub tensor_split: Vec<f32>,
    pub load_mode: LoadMode,
    /// (regex on the tensor name, buffer type name), first match wins
    pub tensor_buft_overrides: Vec<(String, String)>,
    pub use_extra_bufts: bool,
    /// device names to use; None = every registered device
    pub devices: Option<Vec<String>>,
    pub vocab_only: bool,
    pub check_tensors: bool,
    /// create the tensors and size the buffers without allocating or reading them
    pub no_alloc: bool,
    /// None prints llama.cpp's progress dots
    pub progress_callback: Option<ProgressCallback>,
    /// `--override-kv`: metadata the typed getters read instead of the file's
    pub kv_overrides: Vec<crate::kv_override::KvOverride>,
}

impl Default for ModelParams {
    fn default() -> Self {
        ModelParams {
            n_gpu_layers: -1,
            split_mode: SplitMode::Layer,
            main_gpu: 0,
            tensor_split: Vec::new(),
            load_mode: LoadMode::Auto,
            tensor_buft_overrides: Vec::new(),
            use_extra_bufts: true,
            devices: None,
            vocab_only: false,
            check_tensors: false,
            no_alloc: false,
            progress_callback: None,
            kv_overrides: Vec::new(),
        }
    }
}

/// The weights of one transformer block; optional ones are None when the file lacks them.
#[derive(Clone, Debug, Default)]
pub struct Layer {
    pub attn_norm: Option<TensorId>,
    pub wq: Option<TensorId>,
    pub wk: Option<TensorId>,
    pub wv: Option<TensorId>,
    pub wo: Option<TensorId>,
    pub bq: Option<TensorId>,
    pub bk: Option<TensorId>,
    pub bv: Option<TensorId>,
    pub bo: Option<TensorId>,
    pub ffn_norm: Option<TensorId>,
    pub ffn_gate: Option<TensorId>,
    pub ffn_down: Option<TensorId>,
    pub ffn_up: Option<TensorId>,
    pub ffn_gate_b: Option<TensorId>,
    pub ffn_down_b: Option<TensorId>,
    pub ffn_up_b: Option<TensorId>,
    pub rope_freqs: Option<TensorId>,
    /// per-head RMS norms of Q and K (qk-norm)
    pub attn_q_norm: Option<TensorId>,
    pub attn_k_norm: Option<TensorId>,
    /// norms of the attention and feed-forward outputs before their residual adds
    pub attn_post_norm: Option<TensorId>,
    pub ffn_post_norm: Option<TensorId>,
    /// fused Q/K/V projection and its bias (create_tensor_qkv's attn_qkv)
    pub wqkv: Option<TensorId>,
    pub wqkv_b: Option<TensorId>,
    /// LayerNorm biases
    pub attn_norm_b: Option<TensorId>,
    pub ffn_norm_b: Option<TensorId>,
    /// longrope frequency factors, chosen by the context length (get_rope_factors)
    pub rope_long: Option<TensorId>,
    pub rope_short: Option<TensorId>,
    /// the router, experts and shared expert of a mixture-of-experts block
    pub moe: crate::arch::moe::MoeLayer,
    /// multi-head latent attention (deepseek2)
    pub mla: crate::arch::deepseek2::MlaLayer,
}

pub struct Model {
    /// None only for vocab-only loads of architectures without a graph here
    pub(crate) arch: Option<Arch>,
    pub(crate) arch_name: String,
    pub(crate) vocab: Vocab,
    pub(crate) vocab_only: bool,
    pub(crate) hparams: HParams,
    pub(crate) name: String,
    pub(crate) type_name: &'static str,
    pub(crate) ftype: u32,
    pub(crate) n_elements: u64,
    pub(crate) n_bytes: u64,
    pub(crate) meta: Vec<(String, String)>,
    /// the weights; graphs import them as leaves
    pub(crate) ctx: Context,
    pub(crate) tok_embd: Option<TensorId>,
    pub(crate) output_norm: Option<TensorId>,
    pub(crate) output_norm_b: Option<TensorId>,
    pub(crate) output: Option<TensorId>,
    pub(crate) output_b: Option<TensorId>,
    pub(crate) layers: Vec<Layer>,
    pub(crate) locked: crate::load_data::LockedMemory,
    pub(crate) buffers: Vec<Arc<Buffer>>,
    /// buffer sizes by buffer type name, also in no_alloc mode where no buffer exists
    pub(crate) buffer_sizes: Vec<(String, usize)>,
    pub(crate) placement: Placement,
    pub(crate) n_gpu_layers: i32,
    pub(crate) t_start: Instant,
    pub(crate) t_load_us: u64,
    pub(crate) load_mode: LoadMode,
    pub(crate) no_alloc: bool,
    /// keeps the memory maps alive for CPU_Mapped buffers (one per file of a split model)
    pub(crate) _files: Vec<Arc<gguf::GgufFile>>,
    /// graph nodes the loaded LoRA adapters add at most (llama.cpp counts model.loras)
    pub(crate) lora_nodes: std::sync::atomic::AtomicUsize,
    /// n_ctx_train as llama_init_from_model re-adjusts it for a custom YaRN scale (0: not)
    pub(crate) n_ctx_train_adjusted: std::sync::atomic::AtomicU32,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Model({} {})", self.arch_name, self.name)
    }
}

/// Where a load failed, for llama.cpp's prefix of the cause.
#[derive(Clone, Copy)]
enum Stage {
    Loader,
    Arch,
    Hparams,
    Vocabulary,
    Tensors,
}

/// The `llama_model_load: error loading model: ...` line (after gguf's own line for a file that
/// cannot be read, as ggml logs it before llama.cpp's loader gives up).
fn log_load_error(stage: Stage, e: &LlamaError) {
    let prefix = match stage {
        Stage::Arch => "error loading model architecture: ",
        Stage::Hparams => "error loading model hyperparameters: ",
        Stage::Vocabulary => "error loading model vocabulary: ",
        Stage::Loader | Stage::Tensors => "",
    };
    match e {
        LlamaError::Gguf { path, source } => {
            // ggml names the function that failed: opening the file, or parsing it
            let func = match **source {
                gguf::GgufError::Invalid { .. } => "gguf_init_from_file_impl",
                _ => "gguf_init_from_file",
            };
            ggml::log_error!("{}: {}\n", func, source);
            ggml::log_error!(
                "llama_model_load: error loading model: llama_model_loader: failed to load model from {}\n",
                path.display()
            );
        }
        LlamaError::Vocab(why) => {
            ggml::log_error!("llama_model_load: error loading model: {prefix}{why}\n")
        }
        _ => ggml::log_error!("llama_model_load: error loading model: {prefix}{e}\n"),
    }
}

impl Model {
    /// llama_model_load_from_file: prints startup-log parts 1 and 2.
    pub fn load(path: &Path, params: &ModelParams) -> Result<Arc<Model>> {
        let mut params_owned = ModelParams {
            progress_callback: None,
            tensor_split: params.tensor_split.clone(),
            tensor_buft_overrides: params.tensor_buft_overrides.clone(),
            devices: params.devices.clone(),
            kv_overrides: params.kv_overrides.clone(),
            ..*params
        };
        Model::load_with(path, &mut params_owned)
    }

    /// As `load`, with a progress callback taken from the params. A failure is logged as
    /// llama.cpp logs it (`llama_model_load: error loading model: <cause>`, then
    /// `llama_model_load_from_file_impl: failed to load model`) and returned with its cause.
    pub fn load_with(path: &Path, params: &mut ModelParams) -> Result<Arc<Model>> {
        Model::load_impl(path, params).map_err(|(stage, e)| {
            log_load_error(stage, &e);
            ggml::log_error!("llama_model_load_from_file_impl: failed to load model\n");
            e
        })
    }

    fn load_impl(
        path: &Path,
        params: &mut ModelParams,
    ) -> std::result::Result<Arc<Model>, (Stage, LlamaError)> {
        let t_start = Instant::now();
        let mode = if params.no_alloc || params.vocab_only {
            LoadMode::None
        } else {
            params.load_mode.resolve()
        };
        let ml = ModelLoader::open_with(path, mode, &params.kv_overrides)
            .map_err(|e| (Stage::Loader, e))?;
        ml.print_info();
        let chosen = if params.vocab_only {
            None
        } else {
            let chosen =
                crate::model_tensors::placement_devices(params).map_err(|e| (Stage::Tensors, e))?;
            crate::model_tensors::log_devices(params, &chosen);
            Some(chosen)
        };
        let arch_name = ml.arch_name().map_err(|e| (Stage::Arch, e))?;
        let arch = Arch::from_name(&arch_name);
        if arch.is_none() && !params.vocab_only {
            return Err((Stage::Arch, LlamaError::UnknownArch(arch_name)));
        }
        let view = ml.view();
        let meta = |k: &str| view.get(k);
        // load_hparams reads the name first
        let name = meta("general.name")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string();
        let hparams = match arch {
            Some(a) => HParams::load(&meta, a).map_err(|e| (Stage::Hparams, e))?,
            None => HParams::vocab_only(&ml.gguf),
        };
        if let (Some(a), false) = (arch, params.vocab_only) {
            // the same notes as llama-quantize's check of what it writes (model_check)
            for w in crate::model_check::ignored_keys(&ml.gguf, a) {
                ggml::log_warn!("llama_model_load: warning: {}\n", w);
            }
        }
        let vocab = Vocab::from_meta(&meta)
            .map_err(|e| (Stage::Vocabulary, LlamaError::Vocab(e.to_string())))?;
        let type_name = match arch {
            Some(a) => a.type_name(&hparams),
            None => "?B",
        };

        let mut model = Model {
            arch,
            arch_name,
            vocab,
            vocab_only: params.vocab_only,
            hparams,
            name,
            type_name,
            ftype: ml.ftype,
            n_elements: ml.n_elements,
            n_bytes: ml.n_bytes,
            meta: ml.meta_strings(),
            ctx: Context::new(),
            tok_embd: None,
            output_norm: None,
            output: None,
            output_b: None,
            output_norm_b: None,
            layers: Vec::new(),
            locked: Default::default(),
            buffers: Vec::new(),
            buffer_sizes: Vec::new(),
            placement: Placement::default(),
            n_gpu_layers: params.n_gpu_layers,
            t_start,
            t_load_us: 0,
            load_mode: mode,
            no_alloc: params.no_alloc,
            _files: ml.shards.iter().map(|s| s.gguf.clone()).collect(),
            lora_nodes: Default::default(),
            n_ctx_train_adjusted: Default::default(),
        };
        model.print_info(params.no_alloc);
        let Some(chosen) = chosen else {
            ggml::log_info!("llama_model_load: vocab only - skipping tensors\n");
            return Ok(Arc::new(model));
        };
        ggml::log_info!(
            "load_tensors: loading model tensors, this can take a while... (load_mode = {})\n",
            mode.name()
        );
        let hparams = model.hparams.clone();
        let tensors = |model: &mut Model| -> Result<()> {
            let mut creator = TensorCreator::new(&ml, &hparams, params, chosen)?;
            crate::model_tensors::create_decoder_tensors(model, &mut creator)?;
            creator.finish(model, params)
        };
        tensors(&mut model).map_err(|e| (Stage::Tensors, e))?;
        model.t_load_us = t_start.elapsed().as_micros() as u64;
        Ok(Arc::new(model))
    }

    pub fn hparams(&self) -> &HParams {
        &self.hparams
    }
    /// The architecture (None for a vocab-only load of one this crate has no graph for).
    pub fn arch(&self) -> Option<Arch> {
        self.arch
    }
    pub fn arch_name(&self) -> &str {
        &self.arch_name
    }
    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }
    pub fn vocab_only(&self) -> bool {
        self.vocab_only
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn ftype_name(&self) -> String {
        crate::ftype::name(self.ftype)
    }
    /// llama_model_desc: "llama ?B all F32"
    pub fn desc(&self) -> String {
        format!(
            "{} {} {}",
            self.arch_name,
            self.type_name,
            self.ftype_name()
        )
    }
    /// Bytes of tensor data.
    pub fn size(&self) -> u64 {
        self.n_bytes
    }
    pub fn n_params(&self) -> u64 {
        self.n_elements
    }
    /// The training context, or what a context's custom YaRN scale adjusted it to.
    pub fn n_ctx_train(&self) -> u32 {
        match self
            .n_ctx_train_adjusted
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            0 => self.hparams.n_ctx_train,
            n => n,
        }
    }
    pub fn n_embd(&self) -> u32 {
        self.hparams.n_embd
    }
    pub fn n_layer(&self) -> u32 {
        self.hparams.n_layer
    }
    pub fn n_head(&self) -> u32 {
        self.hparams.n_head(0)
    }
    pub fn n_vocab(&self) -> u32 {
        self.hparams.n_vocab
    }
    pub fn n_gpu_layers(&self) -> i32 {
        self.n_gpu_layers
    }
    /// Loaded with no_alloc: shapes and sizes only, no tensor data (for fitting parameters).
    pub fn no_alloc(&self) -> bool {
        self.no_alloc
    }
    pub fn load_mode(&self) -> LoadMode {
        self.load_mode
    }
    /// Microseconds spent in Model::load.
    pub fn t_load_us(&self) -> u64 {
        self.t_load_us
    }
    pub fn t_start(&self) -> Instant {
        self.t_start
    }
    /// (buffer type name, bytes) of each weight buffer, for the memory breakdown.
    pub fn buffer_sizes(&self) -> Vec<(String, usize)> {
        self.buffer_sizes.clone()
    }
    pub fn meta_get(&self, key: &str) -> Option<String> {
        self.meta
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    }
    pub fn meta(&self) -> &[(String, String)] {
        &self.meta
    }
    /// The weights arena (read-only), e.g. to look a weight up by name.
    pub fn weights(&self) -> &Context {
        &self.ctx
    }
    pub fn layers(&self) -> &[Layer] {
        &self.layers
    }
    /// The device a layer's weights live on (il == n_layer is the output layer).
    pub fn dev_layer(&self, il: usize) -> Option<&DeviceRef> {
        self.placement.dev_layer.get(il)
    }
    pub fn dev_output(&self) -> Option<&DeviceRef> {
        self.placement.dev_output.as_ref()
    }
    /// Devices in use, in registry order (GPUs first, CPU last).
    pub fn devices(&self) -> &[DeviceRef] {
        &self.placement.devices
    }
    pub(crate) fn rope_freqs(&self, il: usize) -> Option<TensorId> {
        self.layers.get(il).and_then(|l| l.rope_freqs)
    }
    /// get_rope_factors: the layer's rope_freqs, else the longrope factors for contexts past
    /// the original one, else the short ones.
    pub(crate) fn rope_factors(&self, il: usize, n_ctx_seq: u32) -> Option<TensorId> {
        let l = self.layers.get(il)?;
        if l.rope_freqs.is_some() {
            return l.rope_freqs;
        }
        if n_ctx_seq > self.hparams.n_ctx_orig_yarn {
            return l.rope_long;
        }
        l.rope_short
    }
}
