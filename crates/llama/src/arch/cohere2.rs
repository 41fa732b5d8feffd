//! The cohere2 architecture (src/models/cohere2.cpp): command-r's parallel block with
//! sliding-window attention on three layers of four (the file's pattern), rope on those layers
//! only, and logit_scale and the window required.

use super::command_r;
use super::{ArchDef, RopeType};
use crate::error::Result;
use crate::graph::GraphBuilder;
use crate::hparams::{HParams, Keys, SwaType};
use crate::model::Model;
use crate::model_tensors::TensorCreator;
use ggml::TensorId;

pub(super) static ARCH: ArchDef = ArchDef {
    name: "cohere2",
    rope_type: RopeType::Norm,
    load_hparams,
    type_name,
    tensors: create_tensors,
    graph: build,
};

fn load_hparams(k: &Keys, hp: &mut HParams) -> Result<()> {
    hp.swa_type = SwaType::Standard;
    hp.load_swa_pattern(k, 4, false)?;
    hp.rope_freq_base_train_swa = k
        .f32_opt("rope.freq_base_swa")?
        .unwrap_or(hp.rope_freq_base_train);
    hp.rope_freq_scale_train_swa = hp.rope_freq_scale_train;
    hp.n_swa = k.u32_req("attention.sliding_window")?;
    hp.f_logit_scale = k.f32_req("logit_scale")?;
    hp.f_norm_eps = k.f32_req("attention.layer_norm_epsilon")?;
    hp.f_norm_rms_eps = 0.0;
    Ok(())
}

fn type_name(hp: &HParams) -> &'static str {
    match hp.n_layer {
        32 => "8B",
        _ => "?B",
    }
}

fn create_tensors(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    command_r::create(model, c, false)
}

fn build(model: &Model, b: &mut GraphBuilder) -> TensorId {
    command_r::build_parallel(model, b, true)
}
