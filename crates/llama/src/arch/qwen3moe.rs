//! The qwen3moe architecture (src/models/qwen3moe.cpp): qwen3's attention block (NeoX rope,
//! RMS-normed Q and K heads) with a mixture-of-experts feed-forward: softmax router, top-k
//! experts, weights normalised to sum 1, SwiGLU experts.

use super::moe::{self, Gating};
use super::tensors::{self, req, MM};
use super::{tn, ArchDef, RopeType};
use crate::error::Result;
use crate::graph::{GatedAct, GraphBuilder, MoeParams};
use crate::hparams::{HParams, Keys};
use crate::model::{Layer, Model};
use crate::model_tensors::TensorCreator;
use ggml::TensorId;

pub(super) static ARCH: ArchDef = ArchDef {
    name: "qwen3moe",
    rope_type: RopeType::Neox,
    load_hparams,
    type_name,
    tensors: create_tensors,
    graph: build,
};

fn load_hparams(k: &Keys, hp: &mut HParams) -> Result<()> {
    hp.moe.read_n_ff_exp(k, hp.n_layer_all() as usize)?;
    hp.f_norm_rms_eps = k.f32_req("attention.layer_norm_rms_epsilon")?;
    moe::require_experts(k, hp, "qwen3moe")?;
    super::require_full_rope(hp, "qwen3moe")
}

fn type_name(hp: &HParams) -> &'static str {
    match hp.n_layer {
        48 => "30B.A3B",
        94 => "235B.A22B",
        _ => "?B",
    }
}

fn create_tensors(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    tensors::embd_and_output(model, c)?;
    let hp = model.hparams.clone();
    let n_embd = hp.n_embd as i64;
    let head = hp.n_embd_head_k as i64;
    let n_expert = hp.n_expert as i64;
    for il in 0..hp.n_layer as usize {
        let n_embd_q = head * hp.n_head(il) as i64;
        let mut l = Layer {
            attn_norm: tensors::norm(c, tn::ATTN_NORM, il, n_embd)?,
            ..Layer::default()
        };
        let n_kv = hp.n_embd_k_gqa(il) as i64;
        tensors::qkv(c, &mut l, il, n_embd, n_embd_q, n_kv, n_kv, false)?;
        l.wo = req(c, tn::ATTN_OUT, "weight", il, &[n_embd_q, n_embd], MM)?;
        l.attn_k_norm = tensors::norm(c, tn::ATTN_K_NORM, il, head)?;
        l.attn_q_norm = tensors::norm(c, tn::ATTN_Q_NORM, il, head)?;
        l.ffn_norm = tensors::norm(c, tn::FFN_NORM, il, n_embd)?;
        let n_ff_exp = moe::n_ff_exp(&hp, il);
        moe::router_and_experts(c, &mut l.moe, il, n_embd, n_ff_exp, n_expert, true)?;
        model.layers.push(l);
    }
    moe::expert_scales(c, &mut model.layers, n_expert)
}

fn build(model: &Model, b: &mut GraphBuilder) -> TensorId {
    let hp = &model.hparams;
    let moe_p = MoeParams {
        act: GatedAct::Silu,
        norm_w: true,
        w_scale: hp.moe.expert_weights_scale,
        gating: Gating::Softmax,
    };
    super::qwen3::build_with_ffn(model, b, |b, layer, cur, ili| {
        let cur = b.build_moe_ffn(cur, &layer.moe, moe_p, ili);
        b.cb(cur, "ffn_moe_out", ili);
        cur
    })
}
