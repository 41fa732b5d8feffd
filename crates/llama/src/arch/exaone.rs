//! The exaone architecture (src/models/exaone.cpp): llama's block with NeoX rope.

use super::llama_like::{self, Opts};
use super::{ArchDef, RopeType};
use crate::error::Result;
use crate::graph::GraphBuilder;
use crate::hparams::{HParams, Keys};
use crate::model::Model;
use crate::model_tensors::TensorCreator;
use ggml::TensorId;

pub(super) static ARCH: ArchDef = ArchDef {
    name: "exaone",
    rope_type: RopeType::Neox,
    load_hparams,
    type_name,
    tensors: create_tensors,
    graph: build,
};

fn load_hparams(k: &Keys, hp: &mut HParams) -> Result<()> {
    hp.f_norm_rms_eps = k.f32_req("attention.layer_norm_rms_epsilon")?;
    super::require_full_rope(hp, "exaone")
}

fn type_name(hp: &HParams) -> &'static str {
    match hp.n_layer {
        32 => "8B",
        _ => "?B",
    }
}

fn create_tensors(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    llama_like::create_tensors(model, c, false, llama_like::rope_freqs, false)
}

fn build(model: &Model, b: &mut GraphBuilder) -> TensorId {
    let o = Opts {
        use_rope: |_, _| true,
        embd_scale: 0.0,
        residual_scale: 0.0,
        attn_temp: false,
        logit_div: 0.0,
    };
    llama_like::build(model, b, &o)
}
