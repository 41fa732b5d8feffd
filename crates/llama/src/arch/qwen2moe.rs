//! The qwen2moe architecture (src/models/qwen2moe.cpp): qwen2's attention block (NeoX rope,
//! optional Q/K/V biases) with a mixture-of-experts feed-forward (softmax router, top-k,
//! weights not normalised) plus a shared expert whose output a per-token sigmoid gate scales.

use super::moe::{self, Gating};
use super::tensors::{self, req, MM};
use super::{tn, ArchDef, RopeType};
use crate::error::Result;
use crate::graph::{GatedAct, GraphBuilder, MoeParams};
use crate::hparams::{HParams, Keys};
use crate::model::{Layer, Model};
use crate::model_tensors::{LayerKind, TensorCreator};
use ggml::{Op, TensorId};

pub(super) static ARCH: ArchDef = ArchDef {
    name: "qwen2moe",
    rope_type: RopeType::Neox,
    load_hparams,
    type_name,
    tensors: create_tensors,
    graph: build,
};

fn load_hparams(k: &Keys, hp: &mut HParams) -> Result<()> {
    hp.moe.read_n_ff_exp(k, hp.n_layer_all() as usize)?;
    hp.moe.read_n_ff_shexp(k)?;
    hp.f_norm_rms_eps = k.f32_req("attention.layer_norm_rms_epsilon")?;
    moe::require_experts(k, hp, "qwen2moe")?;
    super::require_full_rope(hp, "qwen2moe")
}

fn type_name(hp: &HParams) -> &'static str {
    match hp.n_layer {
        24 => "A2.7B",
        28 => "57B.A14B",
        _ => "?B",
    }
}

fn create_tensors(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    let hp = model.hparams.clone();
    let n_embd = hp.n_embd as i64;
    let n_vocab = hp.n_vocab as i64;
    let n_expert = hp.n_expert as i64;
    // qwen2moe's output head is its own matrix, never tied to the embedding
    let tok = tn::global(tn::TOKEN_EMBD, "weight");
    model.tok_embd = Some(c.require(&tok, &[n_embd, n_vocab], LayerKind::Input, Op::GetRows)?);
    model.output_norm = tensors::output_norm(c, n_embd)?;
    let out = tn::global(tn::OUTPUT, "weight");
    model.output = Some(c.require(&out, &[n_embd, n_vocab], LayerKind::Output, MM)?);
    for il in 0..hp.n_layer as usize {
        let mut l = Layer {
            attn_norm: tensors::norm(c, tn::ATTN_NORM, il, n_embd)?,
            ..Layer::default()
        };
        let n_kv = hp.n_embd_k_gqa(il) as i64;
        tensors::qkv(c, &mut l, il, n_embd, n_embd, n_kv, n_kv, false)?;
        l.wo = req(c, tn::ATTN_OUT, "weight", il, &[n_embd, n_embd], MM)?;
        l.ffn_norm = tensors::norm(c, tn::FFN_NORM, il, n_embd)?;
        let n_ff_exp = moe::n_ff_exp(&hp, il);
        moe::router_and_experts(c, &mut l.moe, il, n_embd, n_ff_exp, n_expert, true)?;
        let n_ff_shexp = match hp.moe.n_ff_shexp {
            0 => hp.n_ff(il) as i64,
            n => n as i64,
        };
        moe::shared_expert(c, &mut l.moe, il, n_embd, n_ff_shexp)?;
        model.layers.push(l);
    }
    moe::expert_scales(c, &mut model.layers, n_expert)
}

fn build(model: &Model, b: &mut GraphBuilder) -> TensorId {
    let hp = &model.hparams;
    let n_embd_head = hp.n_embd_head_v as i64;
    let tok_embd = model.tok_embd.expect("loaded models have token embeddings");
    let moe_p = MoeParams {
        act: GatedAct::Silu,
        norm_w: false,
        w_scale: hp.moe.expert_weights_scale,
        gating: Gating::Softmax,
    };

    let inp_l = b.build_inp_embd(tok_embd);
    let inp_pos = b.build_inp_pos();
    b.build_attn_inp_kv();
    let inp_out_ids = b.build_inp_out_ids();

    let attn = |b: &mut GraphBuilder, layer: &Layer, cur: TensorId, il: usize| {
        let ili = il as i32;
        let (n_head, n_head_kv) = (hp.n_head(il) as i64, hp.n_head_kv(il) as i64);
        let [q, k, v] = b.build_qkv(layer, cur, n_embd_head, n_head, n_head_kv, ili);
        let q = b.rope(q, inp_pos, None);
        let k = b.rope(k, inp_pos, None);
        b.cb(q, "Qcur", ili);
        b.cb(k, "Kcur", ili);
        b.cb(v, "Vcur", ili);
        let scale = 1.0 / (n_embd_head as f32).sqrt();
        b.build_attn(layer.wo, layer.bo, q, k, v, scale, il)
    };
    let ffn = |b: &mut GraphBuilder, layer: &Layer, cur: TensorId, il: usize| {
        let ili = il as i32;
        let moe_out = b.build_moe_ffn(cur, &layer.moe, moe_p, ili);
        b.cb(moe_out, "ffn_moe_out", ili);
        let shexp = b.build_shared_expert_gated(cur, &layer.moe, ili);
        let out = b.g.ctx.add(moe_out, shexp);
        b.cb(out, "ffn_out", ili);
        out
    };
    let cur = b.build_prenorm_layers(inp_l, inp_out_ids, attn, ffn);
    b.build_rms_output_head(cur)
}
