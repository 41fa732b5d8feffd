//! Hyperparameters read from the GGUF metadata (`<arch>.*` keys), with libllama's defaults and
//! the derived values print_info shows.

use crate::arch::{Arch, RopeType};
use crate::error::{LlamaError, Result};
use crate::vocab::Meta;
use gguf::{GgufFile, Value};

pub const MAX_LAYERS: usize = 512;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeScaling {
    None,
    Linear,
    Yarn,
    LongRope,
}

impl RopeScaling {
    pub fn name(self) -> &'static str {
        match self {
            RopeScaling::None => "none",
            RopeScaling::Linear => "linear",
            RopeScaling::Yarn => "yarn",
            RopeScaling::LongRope => "longrope",
        }
    }
    fn from_name(s: &str) -> Option<RopeScaling> {
        match s {
            "none" => Some(RopeScaling::None),
            "linear" => Some(RopeScaling::Linear),
            "yarn" => Some(RopeScaling::Yarn),
            "longrope" => Some(RopeScaling::LongRope),
            _ => None,
        }
    }
}

/// How sliding-window layers mask the cells outside their window (llama_swa_type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwaType {
    None = 0,
    Standard = 1,
    Chunked = 2,
    Symmetric = 3,
}

/// llama_hparams::is_masked_swa: whether a token at p1 must not see the cell at p0.
pub fn is_masked_swa(n_swa: u32, swa_type: SwaType, p0: i32, p1: i32) -> bool {
    assert_valid_window(n_swa, swa_type);
    match swa_type {
        SwaType::None => false,
        SwaType::Standard => p1 - p0 >= n_swa as i32,
        SwaType::Chunked => p0 < (p1 / n_swa as i32) * n_swa as i32,
        SwaType::Symmetric => {
            let half = n_swa as i32 / 2;
            let d = p0 - p1;
            d < -half || d > half
        }
    }
}

/// A window of 0 with a window type is rejected when the hyperparameters load.
fn assert_valid_window(n_swa: u32, swa_type: SwaType) {
    debug_assert!(swa_type == SwaType::None || n_swa > 0);
}

#[derive(Clone, Debug)]
pub struct HParams {
    pub n_ctx_train: u32,
    pub n_embd: u32,
    /// the decoder layers the graph runs (llama_hparams::n_layer(): block_count less the
    /// trailing multi-token-prediction layers)
    pub n_layer: u32,
    /// nextn_predict_layers: the trailing NextN/MTP layers of block_count, loaded (skipped)
    /// but neither run nor cached
    pub n_layer_nextn: u32,
    pub n_vocab: u32,
    pub n_rot: u32,
    pub n_embd_head_k: u32,
    pub n_embd_head_v: u32,
    pub n_head_arr: Vec<u32>,
    pub n_head_kv_arr: Vec<u32>,
    pub n_ff_arr: Vec<u32>,
    pub n_expert: u32,
    pub n_expert_used: u32,
    pub n_expert_groups: u32,
    pub n_group_used: u32,
    /// llama_non_causal_type (0: none)
    pub non_causal_type: i32,
    pub f_norm_eps: f32,
    pub f_norm_rms_eps: f32,
    pub f_clamp_kqv: f32,
    pub f_max_alibi_bias: f32,
    pub f_logit_scale: f32,
    pub f_attention_scale: f32,
    pub f_attn_value_scale: f32,
    pub causal_attn: bool,
    pub use_kq_norm: bool,
    pub pooling_type: i32,
    pub rope_type: RopeType,
    pub rope_scaling_type_train: RopeScaling,
    pub rope_freq_base_train: f32,
    pub rope_freq_scale_train: f32,
    /// multiplies the context's rope attention factor (rope.scaling.attn_factor: Phi-3 128k)
    pub rope_attn_factor: f32,
    pub n_ctx_orig_yarn: u32,
    pub rope_yarn_log_mul: f32,
    /// YaRN's ramp (the context's defaults unless set; mistral3 reads them from the file)
    pub yarn_beta_fast: f32,
    pub yarn_beta_slow: f32,
    pub rope_finetuned: bool,
    /// the window of sliding-window layers (0: none)
    pub n_swa: u32,
    pub swa_type: SwaType,
    /// per layer: whether it is a sliding-window layer
    pub swa_layers: Vec<bool>,
    pub rope_freq_base_train_swa: f32,
    pub rope_freq_scale_train_swa: f32,
    pub n_embd_head_k_swa: u32,
    pub n_embd_head_v_swa: u32,
    pub n_rot_swa: u32,
    /// tanh soft-capping of the attention scores (attn_soft_cap) and of the logits
    pub attn_soft_cap: bool,
    pub f_attn_logit_softcapping: f32,
    pub f_final_logit_softcapping: f32,
    /// multiplies the token embeddings (gemma: sqrt(n_embd)); 0 = none
    pub f_embedding_scale: f32,
    /// scales each block's attention and FFN outputs before their residual adds (granite)
    pub f_residual_scale: f32,
    /// attention temperature tuning (llama 4 scaling, mistral3): Q of the token at pos is
    /// multiplied by log(floor((pos + offset) / floor_scale) + 1) * scale + 1; scale 0 = none
    pub f_attn_temp_scale: f32,
    pub n_attn_temp_floor_scale: u32,
    pub f_attn_temp_offset: f32,
    /// what the mixture-of-experts block of each architecture reads on top of n_expert*
    pub moe: crate::arch::moe::MoeHParams,
    /// multi-head latent attention (deepseek2)
    pub mla: crate::arch::deepseek2::MlaHParams,
}

/// Typed access to `<arch>.<key>` values.
pub(crate) struct Keys<'a> {
    pub meta: Meta<'a>,
    pub arch: &'a str,
}

impl Keys<'_> {
    pub fn full(&self, key: &str) -> String {
        format!("{}.{}", self.arch, key)
    }
    fn get(&self, key: &str) -> Option<&Value> {
        (self.meta)(&self.full(key))
    }
    fn bad(&self, key: &str, why: &str) -> LlamaError {
        LlamaError::BadKey {
            key: self.full(key),
            why: why.into(),
        }
    }
    pub fn u32_opt(&self, key: &str) -> Result<Option<u32>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if n <= u32::MAX as u64 => Ok(Some(n as u32)),
                _ => Err(self.bad(key, "expected an unsigned integer")),
            },
        }
    }
    pub fn u32_req(&self, key: &str) -> Result<u32> {
        self.u32_opt(key)?
            .ok_or_else(|| LlamaError::MissingKey(self.full(key)))
    }
    pub fn f32_req(&self, key: &str) -> Result<f32> {
        self.f32_opt(key)?
            .ok_or_else(|| LlamaError::MissingKey(self.full(key)))
    }
    /// A per-layer flag array (bools, or integers read as non-zero), None when absent.
    pub fn bool_arr_opt(&self, key: &str, n_layer: usize) -> Result<Option<Vec<bool>>> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let Some(arr) = v.as_array() else {
            return Ok(None);
        };
        let vals: Vec<bool> = match (arr.as_slice::<bool>(), arr.i32s()) {
            (Some(b), _) => b.to_vec(),
            (None, Some(ints)) => ints.into_iter().map(|x| x != 0).collect(),
            _ => return Err(self.bad(key, "expected an array of bools or integers")),
        };
        if vals.len() != n_layer {
            return Err(self.bad(
                key,
                &format!("array length {} != n_layer {}", vals.len(), n_layer),
            ));
        }
        Ok(Some(vals))
    }
    pub fn f32_opt(&self, key: &str) -> Result<Option<f32>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_f32()
                .map(Some)
                .ok_or_else(|| self.bad(key, "expected a float")),
        }
    }
    pub fn bool_opt(&self, key: &str) -> Result<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| self.bad(key, "expected a bool")),
        }
    }
    pub fn str_opt(&self, key: &str) -> Result<Option<String>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(|s| Some(s.to_string()))
                .ok_or_else(|| self.bad(key, "expected a string")),
        }
    }
    /// A per-layer value stored either as one number or as an array of n_layer numbers
    /// (get_key_or_arr).
    pub fn per_layer(&self, key: &str, n_layer: usize, required: bool) -> Result<Option<Vec<u32>>> {
        let Some(v) = self.get(key) else {
            return if required {
                Err(LlamaError::MissingKey(self.full(key)))
            } else {
                Ok(None)
            };
        };
        if let Some(arr) = v.as_array() {
            let vals = arr
                .i32s()
                .ok_or_else(|| self.bad(key, "expected an array of integers"))?;
            if vals.len() != n_layer || vals.iter().any(|&x| x < 0) {
                return Err(self.bad(
                    key,
                    &format!("array length {} != n_layer {}", vals.len(), n_layer),
                ));
            }
            return Ok(Some(vals.into_iter().map(|x| x as u32).collect()));
        }
        match v.as_u64() {
            Some(n) if n <= u32::MAX as u64 => Ok(Some(vec![n as u32; n_layer])),
            _ => Err(self.bad(key, "expected an unsigned integer or an array")),
        }
    }
}

impl HParams {
    /// Reads the hyperparameters through `meta` (the file's values, or the loader's view with
    /// the metadata overrides).
    pub(crate) fn load(meta: Meta, arch: Arch) -> Result<HParams> {
        let k = Keys {
            meta,
            arch: arch.name(),
        };
        let n_ctx_train = k.u32_req("context_length")?;
        let n_embd = k.u32_req("embedding_length")?;
        let n_layer_all = k.u32_req("block_count")?;
        if n_layer_all as usize > MAX_LAYERS {
            return Err(LlamaError::BadHparams(format!(
                "n_layer = {n_layer_all} exceeds {MAX_LAYERS}"
            )));
        }
        // every architecture reads it (llama_model_base::load_hparams); those without NextN
        // layers in their tensor list then miss the trailing layers' tensors, as llama.cpp
        let n_layer_nextn = k.u32_opt("nextn_predict_layers")?.unwrap_or(0);
        if n_layer_nextn > n_layer_all {
            return Err(LlamaError::BadHparams(format!(
                "{} = {n_layer_nextn} exceeds {} = {n_layer_all}",
                k.full("nextn_predict_layers"),
                k.full("block_count")
            )));
        }
        let n_layer = n_layer_all - n_layer_nextn;
        let n_expert = k.u32_opt("expert_count")?.unwrap_or(0);
        let n_expert_used = k.u32_opt("expert_used_count")?.unwrap_or(0);
        // llama.cpp asserts this (GGML_ASSERT); here it is one line naming the keys
        if n_expert_used > n_expert {
            return Err(LlamaError::BadHparams(format!(
                "{} = {n_expert_used} exceeds {} = {n_expert}",
                k.full("expert_used_count"),
                k.full("expert_count")
            )));
        }

        let nl = n_layer_all as usize;
        let n_ff_arr = k
            .per_layer("feed_forward_length", nl, false)?
            .unwrap_or_else(|| vec![0; nl]);
        let n_head_arr = k
            .per_layer("attention.head_count", nl, true)?
            .unwrap_or_default();
        let n_head_kv_arr = k
            .per_layer("attention.head_count_kv", nl, false)?
            .unwrap_or_else(|| n_head_arr.clone());
        let n_head0 = n_head_arr.first().copied().unwrap_or(0);
        if n_embd == 0 || n_head0 == 0 {
            return Err(LlamaError::BadHparams(
                "n_embd and n_head must be positive".into(),
            ));
        }
        let default_head = n_embd / n_head0;
        let n_embd_head_k = k.u32_opt("attention.key_length")?.unwrap_or(default_head);
        let n_embd_head_v = k.u32_opt("attention.value_length")?.unwrap_or(default_head);
        let n_rot = k.u32_opt("rope.dimension_count")?.unwrap_or(n_embd_head_k);
        if n_rot > n_embd_head_k {
            return Err(LlamaError::BadHparams(format!(
                "invalid n_rot: {n_rot}, expected <= {n_embd_head_k}"
            )));
        }
        let rope_freq_base_train = k.f32_opt("rope.freq_base")?.unwrap_or(10000.0);
        let rope_scaling_type_train = match k.str_opt("rope.scaling.type")? {
            None => RopeScaling::Linear,
            Some(s) => RopeScaling::from_name(&s)
                .ok_or_else(|| k.bad("rope.scaling.type", "unknown scaling type"))?,
        };
        // the scale factor is stored as its inverse (factor), or as scale_linear in old files
        let mut ropescale = k.f32_opt("rope.scaling.factor")?.unwrap_or(0.0);
        if ropescale == 0.0 {
            ropescale = k.f32_opt("rope.scale_linear")?.unwrap_or(0.0);
        }
        let rope_freq_scale_train = if ropescale == 0.0 {
            1.0
        } else {
            1.0 / ropescale
        };
        let n_ctx_orig_yarn = k
            .u32_opt("rope.scaling.original_context_length")?
            .unwrap_or(n_ctx_train);
        let rope_finetuned = k.bool_opt("rope.scaling.finetuned")?.unwrap_or(false);
        // read by the architectures that use it (llama.cpp's load_arch_hparams of mistral3,
        // deepseek2): for the others it stays 0, whatever the file says
        let rope_yarn_log_mul = 0.0;
        // required or not per architecture: its load_hparams checks
        let f_norm_rms_eps = k
            .f32_opt("attention.layer_norm_rms_epsilon")?
            .unwrap_or(0.0);
        let n_vocab = match k.u32_opt("vocab_size")? {
            Some(n) => n,
            None => meta("tokenizer.ggml.tokens")
                .and_then(|v| v.as_array())
                .map(|a| a.len() as u32)
                .unwrap_or(0),
        };
        // shapes the graphs divide by: reject what would build an impossible graph
        for il in 0..nl {
            let (h, kv) = (n_head_arr[il], n_head_kv_arr[il]);
            if h == 0 || kv == 0 || h % kv != 0 {
                return Err(LlamaError::BadHparams(format!(
                    "layer {il}: n_head = {h} must be a positive multiple of n_head_kv = {kv}"
                )));
            }
            // a mixture-of-experts model may size only its experts
            if n_ff_arr[il] == 0 && n_expert == 0 {
                return Err(LlamaError::BadHparams(format!(
                    "layer {il}: n_ff must be positive"
                )));
            }
        }
        if n_embd_head_k == 0 || n_embd_head_v == 0 || n_rot % 2 != 0 {
            return Err(LlamaError::BadHparams(format!(
                "invalid head sizes: n_embd_head_k = {n_embd_head_k}, n_embd_head_v = {n_embd_head_v}, n_rot = {n_rot}"
            )));
        }
        let n_embd_head_k_swa = k
            .u32_opt("attention.key_length_swa")?
            .unwrap_or(n_embd_head_k);
        let n_embd_head_v_swa = k
            .u32_opt("attention.value_length_swa")?
            .unwrap_or(n_embd_head_v);
        let n_rot_swa = k.u32_opt("rope.dimension_count_swa")?.unwrap_or(n_rot);
        let mut hp = HParams {
            n_ctx_train,
            n_embd,
            n_layer,
            n_layer_nextn,
            n_vocab,
            n_rot,
            n_embd_head_k,
            n_embd_head_v,
            n_head_arr,
            n_head_kv_arr,
            n_ff_arr,
            n_expert,
            n_expert_used,
            n_expert_groups: k.u32_opt("expert_group_count")?.unwrap_or(0),
            n_group_used: k.u32_opt("expert_group_used_count")?.unwrap_or(0),
            non_causal_type: 0,
            f_norm_eps: k.f32_opt("attention.layer_norm_epsilon")?.unwrap_or(0.0),
            f_norm_rms_eps,
            f_clamp_kqv: k.f32_opt("attention.clamp_kqv")?.unwrap_or(0.0),
            f_max_alibi_bias: k.f32_opt("attention.max_alibi_bias")?.unwrap_or(0.0),
            f_logit_scale: k.f32_opt("logit_scale")?.unwrap_or(0.0),
            f_attention_scale: k.f32_opt("attention.scale")?.unwrap_or(0.0),
            f_attn_value_scale: 0.0,
            causal_attn: k.bool_opt("attention.causal")?.unwrap_or(true),
            use_kq_norm: false,
            pooling_type: k.u32_opt("pooling_type")?.map_or(-1, |v| v as i32),
            rope_type: arch.rope_type(),
            rope_scaling_type_train,
            rope_freq_base_train,
            rope_freq_scale_train,
            rope_attn_factor: k.f32_opt("rope.scaling.attn_factor")?.unwrap_or(1.0),
            n_ctx_orig_yarn,
            rope_yarn_log_mul,
            yarn_beta_fast: 32.0,
            yarn_beta_slow: 1.0,
            rope_finetuned,
            n_swa: 0,
            swa_type: SwaType::None,
            swa_layers: vec![false; nl],
            rope_freq_base_train_swa: 10000.0,
            rope_freq_scale_train_swa: 1.0,
            n_embd_head_k_swa,
            n_embd_head_v_swa,
            n_rot_swa,
            attn_soft_cap: false,
            f_attn_logit_softcapping: 0.0,
            f_final_logit_softcapping: 0.0,
            f_embedding_scale: 0.0,
            f_residual_scale: 0.0,
            f_attn_temp_scale: 0.0,
            n_attn_temp_floor_scale: 0,
            f_attn_temp_offset: 0.0,
            moe: Default::default(),
            mla: Default::default(),
        };
        arch.load_hparams(&k, &mut hp)?;
        hp.check_swa()?;
        Ok(hp)
    }

    /// Sliding-window settings the graphs and caches can use: a positive window, and head
    /// sizes of sliding-window layers equal to the others (one K/V row size per cache).
    fn check_swa(&self) -> Result<()> {
        if self.swa_type == SwaType::None {
            return Ok(());
        }
        if self.n_swa == 0 {
            return Err(LlamaError::BadKey {
                key: "attention.sliding_window".into(),
                why: "a sliding-window model needs a window > 0".into(),
            });
        }
        if self.n_embd_head_k_swa != self.n_embd_head_k
            || self.n_embd_head_v_swa != self.n_embd_head_v
            || self.n_rot_swa != self.n_rot
        {
            return Err(LlamaError::Unsupported(format!(
                "sliding-window layers with other head sizes ({}/{}/{} vs {}/{}/{}) are not supported",
                self.n_embd_head_k_swa,
                self.n_embd_head_v_swa,
                self.n_rot_swa,
                self.n_embd_head_k,
                self.n_embd_head_v,
                self.n_rot
            )));
        }
        Ok(())
    }

    /// set_swa_pattern: every n_pattern-th layer is dense (the last of each group, or the first
    /// with dense_first); 0 makes every layer sliding-window.
    pub(crate) fn set_swa_pattern(&mut self, n_pattern: u32, dense_first: bool) {
        let n_layer = self.n_layer;
        for (il, swa) in self.swa_layers.iter_mut().enumerate() {
            let il = il as u32;
            // the NextN layers are never sliding-window
            *swa = il < n_layer
                && (n_pattern == 0
                    || if dense_first {
                        !il.is_multiple_of(n_pattern)
                    } else {
                        il % n_pattern < n_pattern - 1
                    });
        }
    }

    /// load_swa_pattern: the per-layer array of the file, else its period, else `n_pattern`.
    pub(crate) fn load_swa_pattern(
        &mut self,
        k: &Keys,
        n_pattern: u32,
        dense_first: bool,
    ) -> Result<()> {
        let key = "attention.sliding_window_pattern";
        if let Some(arr) = k.bool_arr_opt(key, self.n_layer_all() as usize)? {
            self.swa_layers = arr;
            return Ok(());
        }
        let n = k.u32_opt(key)?.unwrap_or(n_pattern);
        self.set_swa_pattern(n, dense_first);
        Ok(())
    }

    pub fn is_swa(&self, il: usize) -> bool {
        self.swa_layers.get(il).copied().unwrap_or(false)
    }
    pub fn is_swa_any(&self) -> bool {
        self.swa_layers.iter().any(|&s| s)
    }

    /// The hyperparameters of a vocab-only load of an architecture this crate has no graph for:
    /// only the vocabulary size is known.
    pub(crate) fn vocab_only(gguf: &GgufFile) -> HParams {
        let n_vocab = gguf
            .get("tokenizer.ggml.tokens")
            .and_then(|v| v.as_array())
            .map_or(0, |a| a.len() as u32);
        HParams {
            n_ctx_train: 0,
            n_embd: 0,
            n_layer: 0,
            n_layer_nextn: 0,
            n_vocab,
            n_rot: 0,
            n_embd_head_k: 0,
            n_embd_head_v: 0,
            n_head_arr: Vec::new(),
            n_head_kv_arr: Vec::new(),
            n_ff_arr: Vec::new(),
            n_expert: 0,
            n_expert_used: 0,
            n_expert_groups: 0,
            n_group_used: 0,
            non_causal_type: 0,
            f_norm_eps: 0.0,
            f_norm_rms_eps: 0.0,
            f_clamp_kqv: 0.0,
            f_max_alibi_bias: 0.0,
            f_logit_scale: 0.0,
            f_attention_scale: 0.0,
            f_attn_value_scale: 0.0,
            causal_attn: true,
            use_kq_norm: false,
            pooling_type: -1,
            rope_type: RopeType::None,
            rope_scaling_type_train: RopeScaling::Linear,
            rope_freq_base_train: 10000.0,
            rope_freq_scale_train: 1.0,
            rope_attn_factor: 1.0,
            n_ctx_orig_yarn: 0,
            rope_yarn_log_mul: 0.0,
            yarn_beta_fast: 32.0,
            yarn_beta_slow: 1.0,
            rope_finetuned: false,
            n_swa: 0,
            swa_type: SwaType::None,
            swa_layers: Vec::new(),
            rope_freq_base_train_swa: 10000.0,
            rope_freq_scale_train_swa: 1.0,
            n_embd_head_k_swa: 0,
            n_embd_head_v_swa: 0,
            n_rot_swa: 0,
            attn_soft_cap: false,
            f_attn_logit_softcapping: 0.0,
            f_final_logit_softcapping: 0.0,
            f_embedding_scale: 0.0,
            f_residual_scale: 0.0,
            f_attn_temp_scale: 0.0,
            n_attn_temp_floor_scale: 0,
            f_attn_temp_offset: 0.0,
            moe: Default::default(),
            mla: Default::default(),
        }
    }

    pub fn n_head(&self, il: usize) -> u32 {
        self.n_head_arr.get(il).copied().unwrap_or(0)
    }
    pub fn n_head_kv(&self, il: usize) -> u32 {
        self.n_head_kv_arr.get(il).copied().unwrap_or(0)
    }
    pub fn n_ff(&self, il: usize) -> u32 {
        self.n_ff_arr.get(il).copied().unwrap_or(0)
    }
    pub fn n_gqa(&self, il: usize) -> u32 {
        self.n_head(il).checked_div(self.n_head_kv(il)).unwrap_or(0)
    }
    pub fn n_embd_k_gqa(&self, il: usize) -> u32 {
        self.n_embd_head_k * self.n_head_kv(il)
    }
    pub fn n_embd_v_gqa(&self, il: usize) -> u32 {
        self.n_embd_head_v * self.n_head_kv(il)
    }
    pub fn n_embd_k_gqa_max(&self) -> u32 {
        (0..self.n_layer as usize)
            .map(|il| self.n_embd_k_gqa(il))
            .max()
            .unwrap_or(0)
    }
    pub fn n_embd_v_gqa_max(&self) -> u32 {
        (0..self.n_layer as usize)
            .map(|il| self.n_embd_v_gqa(il))
            .max()
            .unwrap_or(0)
    }
    /// block_count: the decoder layers and the NextN layers after them.
    pub fn n_layer_all(&self) -> u32 {
        self.n_layer + self.n_layer_nextn
    }
    /// Per-layer values print as one number when uniform, else as a list (print_f, over
    /// every layer of the file).
    pub(crate) fn fmt_per_layer(&self, f: impl Fn(usize) -> u32) -> String {
        let vals: Vec<u32> = (0..self.n_layer_all() as usize).map(f).collect();
        match vals.first() {
            Some(&first) if vals.iter().all(|&v| v == first) => first.to_string(),
            None => String::new(),
            _ => format!(
                "[{}]",
                vals.iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}
