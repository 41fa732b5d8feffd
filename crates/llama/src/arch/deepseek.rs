//! The deepseek architecture (DeepSeek-MoE, src/models/deepseek.cpp): llama's attention, dense
//! feed-forwards in the first `leading_dense_block_count` layers, then a mixture of experts
//! (softmax router, weights not normalised but scaled by `expert_weights_scale`) plus
//! `expert_shared_count` always-on experts fused into one SwiGLU feed-forward.

use super::moe::{self, Gating};
use super::tensors::{self, req, MM};
use super::{tn, ArchDef, RopeType};
use crate::error::{LlamaError, Result};
use crate::graph::{GatedAct, GraphBuilder, MoeParams};
use crate::hparams::{HParams, Keys};
use crate::model::{Layer, Model};
use crate::model_tensors::TensorCreator;
use ggml::TensorId;

pub(super) static ARCH: ArchDef = ArchDef {
    name: "deepseek",
    rope_type: RopeType::Norm,
    load_hparams,
    type_name,
    tensors: create_tensors,
    graph: build,
};

fn load_hparams(k: &Keys, hp: &mut HParams) -> Result<()> {
    hp.f_norm_rms_eps = k.f32_req("attention.layer_norm_rms_epsilon")?;
    let n_layer = hp.n_layer_all() as usize;
    hp.moe.n_layer_dense_lead = k.u32_opt("leading_dense_block_count")?.unwrap_or(0);
    let ff_exp = k
        .per_layer("expert_feed_forward_length", n_layer, true)?
        .unwrap_or_default();
    hp.moe.n_ff_exp = ff_exp.first().copied().unwrap_or(0);
    hp.moe.n_expert_shared = k.u32_req("expert_shared_count")?;
    if let Some(s) = k.f32_opt("expert_weights_scale")? {
        hp.moe.expert_weights_scale = s;
    }
    if hp.moe.n_layer_dense_lead < hp.n_layer {
        moe::require_experts(k, hp, "deepseek")?;
    }
    if hp.moe.n_ff_exp == 0 {
        return Err(LlamaError::BadHparams(format!(
            "{} = 0: the experts need a size",
            k.full("expert_feed_forward_length")
        )));
    }
    super::require_full_rope(hp, "deepseek")
}

fn type_name(hp: &HParams) -> &'static str {
    match hp.moe.n_ff_exp {
        1408 => "16B",
        1792 => "20B",
        _ => "?B",
    }
}

fn create_tensors(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    tensors::embd_and_output(model, c)?;
    let hp = model.hparams.clone();
    let n_embd = hp.n_embd as i64;
    let n_expert = hp.n_expert as i64;
    let n_ff_exp = hp.moe.n_ff_exp as i64;
    let n_ff_shexp = n_ff_exp * hp.moe.n_expert_shared as i64;
    for il in 0..hp.n_layer as usize {
        let mut l = Layer {
            attn_norm: tensors::norm(c, tn::ATTN_NORM, il, n_embd)?,
            ..Layer::default()
        };
        let n_kv = hp.n_embd_k_gqa(il) as i64;
        tensors::qkv(c, &mut l, il, n_embd, n_embd, n_kv, n_kv, false)?;
        l.wo = req(c, tn::ATTN_OUT, "weight", il, &[n_embd, n_embd], MM)?;
        l.ffn_norm = tensors::norm(c, tn::FFN_NORM, il, n_embd)?;
        if il < hp.moe.n_layer_dense_lead as usize {
            tensors::ffn_gate_down_up(c, &mut l, il, n_embd, hp.n_ff(il) as i64)?;
        } else {
            moe::router_and_experts(c, &mut l.moe, il, n_embd, n_ff_exp, n_expert, true)?;
            let m = &mut l.moe;
            m.gate_shexp = req(
                c,
                moe::tn::FFN_GATE_SHEXP,
                "weight",
                il,
                &[n_embd, n_ff_shexp],
                MM,
            )?;
            m.down_shexp = req(
                c,
                moe::tn::FFN_DOWN_SHEXP,
                "weight",
                il,
                &[n_ff_shexp, n_embd],
                MM,
            )?;
            m.up_shexp = req(
                c,
                moe::tn::FFN_UP_SHEXP,
                "weight",
                il,
                &[n_embd, n_ff_shexp],
                MM,
            )?;
        }
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
    let kq_scale = if hp.f_attention_scale == 0.0 {
        1.0 / (n_embd_head as f32).sqrt()
    } else {
        hp.f_attention_scale
    };
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
        b.build_attn(layer.wo, layer.bo, q, k, v, kq_scale, il)
    };
    let ffn = |b: &mut GraphBuilder, layer: &Layer, cur: TensorId, il: usize| {
        build_ffn(b, layer, cur, moe_p, il)
    };
    let cur = b.build_prenorm_layers(inp_l, inp_out_ids, attn, ffn);
    b.build_rms_output_head(cur)
}

/// deepseek's feed-forward (deepseek2's too): a dense SwiGLU in the leading layers, else the
/// experts plus the shared experts as one SwiGLU.
pub(super) fn build_ffn(
    b: &mut GraphBuilder,
    layer: &Layer,
    cur: TensorId,
    moe_p: MoeParams,
    il: usize,
) -> TensorId {
    let ili = il as i32;
    let w = |t: Option<TensorId>| t.expect("ffn weights are required at load");
    if layer.moe.gate_inp.is_none() {
        let (up, gate, down) = (w(layer.ffn_up), w(layer.ffn_gate), w(layer.ffn_down));
        let out = b.build_ffn_swiglu(cur, up, None, gate, None, down, None, ili);
        b.cb(out, "ffn_out", ili);
        return out;
    }
    let moe_out = b.build_moe_ffn(cur, &layer.moe, moe_p, ili);
    b.cb(moe_out, "ffn_moe_out", ili);
    let m = &layer.moe;
    let (up, gate, down) = (w(m.up_shexp), w(m.gate_shexp), w(m.down_shexp));
    let shexp = b.build_ffn_swiglu(cur, up, None, gate, None, down, None, ili);
    b.cb(shexp, "ffn_shexp", ili);
    let out = b.g.ctx.add(moe_out, shexp);
    b.cb(out, "ffn_out", ili);
    out
}
