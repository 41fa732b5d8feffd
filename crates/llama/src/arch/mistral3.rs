//! The mistral3 architecture, text part (src/models/mistral3.cpp): llama's block with optional
//! attention-output and FFN biases, longrope or rope_freqs factors, and the attention
//! temperature tuning of llama 4 (queries scaled by position, attention.temperature_scale).

use super::llama_like::{self, Opts};
use super::{tensors, ArchDef, RopeType};
use crate::error::{LlamaError, Result};
use crate::graph::GraphBuilder;
use crate::hparams::{HParams, Keys};
use crate::model::Model;
use crate::model_tensors::TensorCreator;
use ggml::TensorId;

pub(super) static ARCH: ArchDef = ArchDef {
    name: "mistral3",
    rope_type: RopeType::Norm,
    load_hparams,
    type_name,
    tensors: create_tensors,
    graph: build,
};

fn load_hparams(k: &Keys, hp: &mut HParams) -> Result<()> {
    hp.f_norm_rms_eps = k.f32_req("attention.layer_norm_rms_epsilon")?;
    hp.f_attn_temp_scale = k.f32_opt("attention.temperature_scale")?.unwrap_or(0.0);
    hp.f_attn_temp_offset = 0.0;
    if hp.f_attn_temp_scale != 0.0 {
        hp.n_attn_temp_floor_scale = hp.n_ctx_orig_yarn;
        if hp.n_attn_temp_floor_scale == 0 {
            return Err(LlamaError::BadHparams(
                "invalid n_ctx_orig_yarn for attention temperature scaling".into(),
            ));
        }
    }
    if let Some(b) = k.f32_opt("rope.scaling.yarn_beta_fast")? {
        hp.yarn_beta_fast = b;
    }
    if let Some(b) = k.f32_opt("rope.scaling.yarn_beta_slow")? {
        hp.yarn_beta_slow = b;
    }
    if let Some(m) = k.f32_opt("rope.scaling.yarn_log_multiplier")? {
        hp.rope_yarn_log_mul = m;
    }
    tensors::dense_only(hp, "mistral3")?;
    super::require_full_rope(hp, "mistral3")
}

fn type_name(hp: &HParams) -> &'static str {
    match hp.n_layer {
        26 => "3B",
        34 => "8B",
        40 => "14B",
        _ => "?B",
    }
}

fn create_tensors(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    llama_like::create_tensors(model, c, true, tensors::rope_factors_by_scaling, true)
}

fn build(model: &Model, b: &mut GraphBuilder) -> TensorId {
    let hp = &model.hparams;
    let o = Opts {
        use_rope: |_, _| true,
        embd_scale: 0.0,
        residual_scale: 0.0,
        logit_div: 0.0,
        attn_temp: hp.f_attn_temp_scale != 0.0,
    };
    llama_like::build(model, b, &o)
}
