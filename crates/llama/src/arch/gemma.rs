//! The gemma architecture (src/models/gemma.cpp): embeddings scaled by sqrt(n_embd), NeoX rope,
//! the query scaled before attention, a GeGLU feed-forward, and the output tied to the
//! embedding.

use super::tensors::{self, req, OutputHead, MM};
use super::{tn, ArchDef, RopeType};
use crate::error::Result;
use crate::graph::{FfnAct, FfnGate, GraphBuilder, NormType};
use crate::hparams::{HParams, Keys};
use crate::model::{Layer, Model};
use crate::model_tensors::TensorCreator;
use ggml::TensorId;

pub(super) static ARCH: ArchDef = ArchDef {
    name: "gemma",
    rope_type: RopeType::Neox,
    load_hparams,
    type_name,
    tensors: create_tensors,
    graph: build,
};

fn load_hparams(k: &Keys, hp: &mut HParams) -> Result<()> {
    hp.f_norm_rms_eps = k.f32_req("attention.layer_norm_rms_epsilon")?;
    Ok(())
}

fn type_name(hp: &HParams) -> &'static str {
    match hp.n_layer {
        18 => "2B",
        28 => "7B",
        _ => "?B",
    }
}

fn create_tensors(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    let hp = model.hparams.clone();
    let n_embd = hp.n_embd as i64;
    tensors::token_embd(model, c)?;
    model.output_norm = tensors::output_norm(c, n_embd)?;
    tensors::output_head(model, c, OutputHead::Tied)?;
    let head = hp.n_embd_head_k as i64;
    for il in 0..hp.n_layer as usize {
        let n_embd_q = head * hp.n_head(il) as i64;
        let mut l = Layer {
            attn_norm: tensors::norm(c, tn::ATTN_NORM, il, n_embd)?,
            ..Layer::default()
        };
        let (nk, nv) = (hp.n_embd_k_gqa(il) as i64, hp.n_embd_v_gqa(il) as i64);
        tensors::qkv(c, &mut l, il, n_embd, n_embd_q, nk, nv, false)?;
        l.wo = req(c, tn::ATTN_OUT, "weight", il, &[n_embd_q, n_embd], MM)?;
        l.ffn_norm = tensors::norm(c, tn::FFN_NORM, il, n_embd)?;
        let n_ff = hp.n_ff(il) as i64;
        l.ffn_gate = req(c, tn::FFN_GATE, "weight", il, &[n_embd, n_ff], MM)?;
        l.ffn_up = req(c, tn::FFN_UP, "weight", il, &[n_embd, n_ff], MM)?;
        l.ffn_down = req(c, tn::FFN_DOWN, "weight", il, &[n_ff, n_embd], MM)?;
        model.layers.push(l);
    }
    Ok(())
}

fn build(model: &Model, b: &mut GraphBuilder) -> TensorId {
    let hp = &model.hparams;
    let n_embd_head = hp.n_embd_head_v as i64;
    let n_layer = hp.n_layer as usize;
    let tok_embd = model.tok_embd.expect("loaded models have token embeddings");

    let mut inp_l = b.build_inp_embd(tok_embd);
    inp_l = b.scale_embd(inp_l, (hp.n_embd as f32).sqrt());
    let inp_pos = b.build_inp_pos();
    b.build_attn_inp_kv();
    let inp_out_ids = b.build_inp_out_ids();

    for il in 0..n_layer {
        let layer = &model.layers[il];
        let ili = il as i32;
        let mut cur = b.build_norm(inp_l, layer.attn_norm, None, NormType::Rms, ili);
        b.cb(cur, "attn_norm", ili);
        let (n_head, n_head_kv) = (hp.n_head(il) as i64, hp.n_head_kv(il) as i64);
        let [q, k, v] = b.build_qkv(layer, cur, n_embd_head, n_head, n_head_kv, ili);
        let q = b.rope(q, inp_pos, None);
        let k = b.rope(k, inp_pos, None);
        b.cb(q, "Qcur", ili);
        b.cb(k, "Kcur", ili);
        b.cb(v, "Vcur", ili);
        let q = b.g.ctx.scale(q, 1.0 / (n_embd_head as f32).sqrt());
        b.cb(q, "Qcur_scaled", ili);
        cur = b.build_attn(layer.wo, None, q, k, v, 1.0, il);
        if il == n_layer - 1 {
            cur = b.g.ctx.get_rows(cur, inp_out_ids);
            inp_l = b.g.ctx.get_rows(inp_l, inp_out_ids);
        }
        let sa_out = b.g.ctx.add(cur, inp_l);
        b.cb(sa_out, "sa_out", ili);
        cur = b.build_norm(sa_out, layer.ffn_norm, None, NormType::Rms, ili);
        b.cb(cur, "ffn_norm", ili);
        let w = |t: Option<TensorId>| (t.expect("ffn weights are required at load"), None);
        let (up, gate, down) = (w(layer.ffn_up), w(layer.ffn_gate), w(layer.ffn_down));
        cur = b.build_ffn(cur, up, Some(gate), down, FfnAct::Gelu, FfnGate::Par, ili);
        b.cb(cur, "ffn_out", ili);
        cur = b.g.ctx.add(cur, sa_out);
        cur = b.build_cvec(cur, il);
        b.cb(cur, "l_out", ili);
        inp_l = cur;
    }

    let cur = b.build_output_head(inp_l, NormType::Rms);
    b.cb(cur, "result_output", -1);
    cur
}
