//! The qwen3moe architecture (src/models/qwen3moe.cpp): qwen3's attention block (NeoX rope,
//! RMS-normed Q and K heads) with a mixture-of-experts feed-forward: softmax router, top-k
//! experts, weights normalised to sum 1, SwiGLU experts.

use super::moe::{self, Gating};
use super::tensors::{self, req, MM};
use super::{tn, ArchDef, RopeType};
use crate::error::Result;
use crate::graph::{GatedAct, GraphBuilder, MoeParams, NormType};
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
    let n_layer = hp.n_layer as usize;
    hp.moe.read_n_ff_exp(k, n_layer)?;
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
    moe::refuse_unsupported(c, hp.n_layer as usize, n_expert)
}

fn build(model: &Model, b: &mut GraphBuilder) -> TensorId {
    let hp = &model.hparams;
    let n_embd_head = hp.n_embd_head_v as i64;
    let n_layer = hp.n_layer as usize;
    let tok_embd = model.tok_embd.expect("loaded models have token embeddings");
    let moe_p = MoeParams {
        act: GatedAct::Silu,
        norm_w: true,
        w_scale: hp.moe.expert_weights_scale,
        gating: Gating::Softmax,
    };

    let mut inp_l = b.build_inp_embd(tok_embd);
    let inp_pos = b.build_inp_pos();
    b.build_attn_inp_kv();
    let inp_out_ids = b.build_inp_out_ids();

    for il in 0..n_layer {
        let layer = &model.layers[il];
        let ili = il as i32;
        let mut inp_sa = inp_l;
        let mut cur = b.build_norm(inp_l, layer.attn_norm, None, NormType::Rms, ili);
        b.cb(cur, "attn_norm", ili);
        let [q, k, v] = b.build_qkv(
            layer,
            cur,
            n_embd_head,
            hp.n_head(il) as i64,
            hp.n_head_kv(il) as i64,
            ili,
        );
        let q = b.build_norm(q, layer.attn_q_norm, None, NormType::Rms, ili);
        b.cb(q, "Qcur_normed", ili);
        let q = b.rope(q, inp_pos, None);
        let k = b.build_norm(k, layer.attn_k_norm, None, NormType::Rms, ili);
        b.cb(k, "Kcur_normed", ili);
        let k = b.rope(k, inp_pos, None);
        b.cb(q, "Qcur", ili);
        b.cb(k, "Kcur", ili);
        b.cb(v, "Vcur", ili);
        let scale = 1.0 / (n_embd_head as f32).sqrt();
        cur = b.build_attn(layer.wo, layer.bo, q, k, v, scale, il);

        if il == n_layer - 1 {
            cur = b.g.ctx.get_rows(cur, inp_out_ids);
            inp_sa = b.g.ctx.get_rows(inp_sa, inp_out_ids);
        }
        let ffn_inp = b.g.ctx.add(cur, inp_sa);
        b.cb(ffn_inp, "ffn_inp", ili);
        cur = b.build_norm(ffn_inp, layer.ffn_norm, None, NormType::Rms, ili);
        b.cb(cur, "ffn_norm", ili);
        cur = b.build_moe_ffn(cur, &layer.moe, moe_p, ili);
        b.cb(cur, "ffn_moe_out", ili);
        cur = b.g.ctx.add(cur, ffn_inp);
        cur = b.build_cvec(cur, il);
        b.cb(cur, "l_out", ili);
        inp_l = cur;
    }

    let mut cur = b.build_norm(inp_l, model.output_norm, None, NormType::Rms, -1);
    b.cb(cur, "result_norm", -1);
    b.t_embd = Some(cur);
    let output = model.output.expect("loaded models have an output matrix");
    cur = b.build_lora_mm(output, cur);
    b.cb(cur, "result_output", -1);
    cur
}
