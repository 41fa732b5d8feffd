//! The smollm3 architecture (src/models/smollm3.cpp): llama's block where every fourth layer
//! (n_no_rope_layer_step) attends without rope.

use super::llama_like::{self, Opts};
use super::{ArchDef, RopeType};
use crate::error::Result;
use crate::graph::GraphBuilder;
use crate::hparams::{HParams, Keys};
use crate::model::Model;
use crate::model_tensors::TensorCreator;
use ggml::TensorId;

pub(super) static ARCH: ArchDef = ArchDef {
    name: "smollm3",
    rope_type: RopeType::Norm,
    load_hparams,
    type_name,
    tensors: create_tensors,
    graph: build,
};

/// llama.cpp's n_no_rope_layer_step for smollm3 (not a GGUF key).
const NO_ROPE_LAYER_STEP: usize = 4;

fn load_hparams(k: &Keys, hp: &mut HParams) -> Result<()> {
    hp.f_norm_rms_eps = k.f32_req("attention.layer_norm_rms_epsilon")?;
    super::require_full_rope(hp, "smollm3")
}

fn type_name(hp: &HParams) -> &'static str {
    match hp.n_layer {
        36 => "3B",
        _ => "?B",
    }
}

fn create_tensors(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    llama_like::create_tensors(model, c, false, llama_like::no_rope_factors, false)
}

fn build(model: &Model, b: &mut GraphBuilder) -> TensorId {
    let o = Opts {
        use_rope: |_, il| !(il + 1).is_multiple_of(NO_ROPE_LAYER_STEP),
        embd_scale: 0.0,
        residual_scale: 0.0,
        attn_temp: false,
        logit_div: 0.0,
    };
    llama_like::build(model, b, &o)
}
