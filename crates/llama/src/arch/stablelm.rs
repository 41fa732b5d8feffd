//! The stablelm architecture (src/models/stablelm.cpp): LayerNorm with biases, partial NeoX
//! rope (rope.dimension_count of each head), optional LayerNorms of the Q and K heads, and a
//! parallel residual (the FFN reads the attention's input norm) when a layer has no ffn_norm.

use super::tensors::{self, opt, req, OutputHead, MM};
use super::{tn, ArchDef, RopeType};
use crate::error::Result;
use crate::graph::{FfnAct, FfnGate, GraphBuilder, NormType};
use crate::hparams::{HParams, Keys};
use crate::model::{Layer, Model};
use crate::model_tensors::TensorCreator;
use ggml::{Op, TensorId};

pub(super) static ARCH: ArchDef = ArchDef {
    name: "stablelm",
    rope_type: RopeType::Neox,
    load_hparams,
    type_name,
    tensors: create_tensors,
    graph: build,
};

fn load_hparams(k: &Keys, hp: &mut HParams) -> Result<()> {
    hp.f_norm_eps = k.f32_req("attention.layer_norm_epsilon")?;
    // a LayerNorm model: llama.cpp never reads the RMS epsilon (print_info shows 0)
    hp.f_norm_rms_eps = 0.0;
    Ok(())
}

fn type_name(hp: &HParams) -> &'static str {
    match hp.n_layer {
        24 => "1B",
        32 => "3B",
        40 => "12B",
        _ => "?B",
    }
}

fn create_tensors(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    let hp = model.hparams.clone();
    let n_embd = hp.n_embd as i64;
    tensors::token_embd(model, c)?;
    model.output_norm_b = tensors::output_norm_b(c, n_embd)?;
    model.output_norm = tensors::output_norm(c, n_embd)?;
    tensors::output_head(model, c, OutputHead::Own)?;
    let head = hp.n_embd_head_k as i64;
    for il in 0..hp.n_layer as usize {
        let n_ff = hp.n_ff(il) as i64;
        let mut l = Layer {
            attn_norm: tensors::norm(c, tn::ATTN_NORM, il, n_embd)?,
            attn_norm_b: req(c, tn::ATTN_NORM, "bias", il, &[n_embd], Op::Add)?,
            ..Layer::default()
        };
        let n_gqa = hp.n_embd_k_gqa(il) as i64;
        tensors::qkv(c, &mut l, il, n_embd, n_embd, n_gqa, n_gqa, false)?;
        l.wo = req(c, tn::ATTN_OUT, "weight", il, &[n_embd, n_embd], MM)?;
        let (n_head, n_head_kv) = (hp.n_head(il) as i64, hp.n_head_kv(il) as i64);
        l.attn_q_norm = opt(c, tn::ATTN_Q_NORM, "weight", il, &[head, n_head], Op::Mul)?;
        l.attn_k_norm = opt(
            c,
            tn::ATTN_K_NORM,
            "weight",
            il,
            &[head, n_head_kv],
            Op::Mul,
        )?;
        l.ffn_norm = opt(c, tn::FFN_NORM, "weight", il, &[n_embd], Op::Mul)?;
        l.ffn_norm_b = opt(c, tn::FFN_NORM, "bias", il, &[n_embd], Op::Add)?;
        tensors::ffn_gate_down_up(c, &mut l, il, n_embd, n_ff)?;
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
    let inp_pos = b.build_inp_pos();
    b.build_attn_inp_kv();
    let inp_out_ids = b.build_inp_out_ids();

    for il in 0..n_layer {
        let layer = &model.layers[il];
        let ili = il as i32;
        let (norm, norm_b) = (layer.attn_norm, layer.attn_norm_b);
        let mut cur = b.build_norm(inp_l, norm, norm_b, NormType::Layer, ili);
        b.cb(cur, "attn_norm", ili);
        let mut inp_sa = cur;
        let (n_head, n_head_kv) = (hp.n_head(il) as i64, hp.n_head_kv(il) as i64);
        let [mut q, mut k, v] = b.build_qkv(layer, cur, n_embd_head, n_head, n_head_kv, ili);
        if layer.attn_q_norm.is_some() {
            q = b.build_norm(q, layer.attn_q_norm, None, NormType::Layer, ili);
            b.cb(q, "Qcur", ili);
        }
        if layer.attn_k_norm.is_some() {
            k = b.build_norm(k, layer.attn_k_norm, None, NormType::Layer, ili);
            b.cb(k, "Kcur", ili);
        }
        let q = b.rope(q, inp_pos, None);
        let k = b.rope(k, inp_pos, None);
        b.cb(q, "Qcur", ili);
        b.cb(k, "Kcur", ili);
        b.cb(v, "Vcur", ili);
        let scale = 1.0 / (n_embd_head as f32).sqrt();
        cur = b.build_attn(layer.wo, None, q, k, v, scale, il);
        if il == n_layer - 1 {
            cur = b.g.ctx.get_rows(cur, inp_out_ids);
            inp_l = b.g.ctx.get_rows(inp_l, inp_out_ids);
            inp_sa = b.g.ctx.get_rows(inp_sa, inp_out_ids);
        }
        let ffn_inp = b.g.ctx.add(cur, inp_l);
        b.cb(ffn_inp, "ffn_inp", ili);
        cur = if layer.ffn_norm.is_some() {
            let (norm, norm_b) = (layer.ffn_norm, layer.ffn_norm_b);
            let t = b.build_norm(ffn_inp, norm, norm_b, NormType::Layer, ili);
            b.cb(t, "ffn_norm", ili);
            t
        } else {
            // parallel residual
            inp_sa
        };
        let w = |t: Option<TensorId>| (t.expect("ffn weights are required at load"), None);
        let (up, gate, down) = (w(layer.ffn_up), w(layer.ffn_gate), w(layer.ffn_down));
        cur = b.build_ffn(cur, up, Some(gate), down, FfnAct::Silu, FfnGate::Par, ili);
        b.cb(cur, "ffn_out", ili);
        cur = b.g.ctx.add(cur, ffn_inp);
        cur = b.build_cvec(cur, il);
        b.cb(cur, "l_out", ili);
        inp_l = cur;
    }

    let cur = b.build_output_head(inp_l, NormType::Layer);
    b.cb(cur, "result_output", -1);
    cur
}
