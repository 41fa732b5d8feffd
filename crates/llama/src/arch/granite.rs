//! The granite architecture (src/models/granite.cpp): llama's block with the embeddings scaled
//! (embedding_scale), each attention and FFN output scaled before its residual add
//! (residual_scale), the logits divided by logit_scale, and rope only when
//! rope.scaling.finetuned (default true) says so.

use super::llama_like::{self, Opts};
use super::{tensors, ArchDef, RopeType};
use crate::error::Result;
use crate::graph::GraphBuilder;
use crate::hparams::{HParams, Keys};
use crate::model::Model;
use crate::model_tensors::TensorCreator;
use ggml::TensorId;

pub(super) static ARCH: ArchDef = ArchDef {
    name: "granite",
    rope_type: RopeType::Norm,
    load_hparams,
    type_name,
    tensors: create_tensors,
    graph: build,
};

fn load_hparams(k: &Keys, hp: &mut HParams) -> Result<()> {
    hp.f_norm_rms_eps = k.f32_req("attention.layer_norm_rms_epsilon")?;
    hp.f_logit_scale = k.f32_req("logit_scale")?;
    hp.f_residual_scale = k.f32_opt("residual_scale")?.unwrap_or(0.0);
    hp.f_embedding_scale = k.f32_opt("embedding_scale")?.unwrap_or(0.0);
    // rope_finetuned switches rope on (granite's rope_pattern), so it defaults to true
    hp.rope_finetuned = k.bool_opt("rope.scaling.finetuned")?.unwrap_or(true);
    tensors::dense_only(hp, "granite")?;
    super::require_full_rope(hp, "granite")
}

fn type_name(hp: &HParams) -> &'static str {
    match (hp.n_layer, hp.n_embd) {
        (32, _) => "3B",
        (40, 2048) => "2B",
        (40, 2560) => "3B",
        (40, 4096) => "8B",
        (64, _) => "30B",
        _ => "?B",
    }
}

fn create_tensors(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    llama_like::create_tensors(model, c, true, tensors::rope_factors_by_scaling, true)
}

fn build(model: &Model, b: &mut GraphBuilder) -> TensorId {
    let hp = &model.hparams;
    let o = Opts {
        use_rope: |m, _| m.hparams.rope_finetuned,
        embd_scale: hp.f_embedding_scale,
        residual_scale: hp.f_residual_scale,
        attn_temp: false,
        logit_div: hp.f_logit_scale,
    };
    llama_like::build(model, b, &o)
}
