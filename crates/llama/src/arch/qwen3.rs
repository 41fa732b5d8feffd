//! The qwen3 architecture (src/models/qwen3.cpp): llama's block with NeoX rope, no biases, and
//! RMS-normed Q and K heads before rope.

use super::tensors::{self, req, MM};
use super::{tn, ArchDef, RopeType};
use crate::error::Result;
use crate::graph::{GraphBuilder, NormType};
use crate::hparams::{HParams, Keys};
use crate::model::{Layer, Model};
use crate::model_tensors::{LayerKind, TensorCreator, NOT_REQUIRED};
use ggml::TensorId;

pub(super) static ARCH: ArchDef = ArchDef {
    name: "qwen3",
    rope_type: RopeType::Neox,
    load_hparams,
    type_name,
    tensors: create_tensors,
    graph: build,
};

fn load_hparams(k: &Keys, hp: &mut HParams) -> Result<()> {
    hp.f_norm_rms_eps = k.f32_req("attention.layer_norm_rms_epsilon")?;
    super::require_full_rope(hp, "qwen3")
}

fn type_name(hp: &HParams) -> &'static str {
    match hp.n_layer {
        28 if hp.n_embd == 1024 => "0.6B",
        28 => "1.7B",
        36 if hp.n_embd == 2560 => "4B",
        36 => "8B",
        40 => "14B",
        64 => "32B",
        _ => "?B",
    }
}

fn create_tensors(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    tensors::embd_and_output(model, c)?;
    let hp = model.hparams.clone();
    let n_embd = hp.n_embd as i64;
    // the rerank head of classifier variants (n_cls_out is 0 for the text models)
    c.create(
        &tn::global(tn::CLS_OUT, "weight"),
        &[n_embd, 0],
        NOT_REQUIRED,
        LayerKind::Output,
        MM,
    )?;
    let head = hp.n_embd_head_k as i64;
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
        tensors::ffn_gate_down_up(c, &mut l, il, n_embd, hp.n_ff(il) as i64)?;
        model.layers.push(l);
    }
    Ok(())
}

fn build(model: &Model, b: &mut GraphBuilder) -> TensorId {
    build_with_ffn(model, b, |b, layer, cur, ili| {
        let w = |t: Option<TensorId>| t.expect("ffn weights are required at load");
        let cur = b.build_ffn_swiglu(
            cur,
            w(layer.ffn_up),
            None,
            w(layer.ffn_gate),
            None,
            w(layer.ffn_down),
            None,
            ili,
        );
        b.cb(cur, "ffn_out", ili);
        cur
    })
}

/// qwen3's graph with the feed-forward block `ffn` (normed input -> its output, named by it):
/// qwen3moe shares everything else.
pub(super) fn build_with_ffn(
    model: &Model,
    b: &mut GraphBuilder,
    mut ffn: impl FnMut(&mut GraphBuilder, &Layer, TensorId, i32) -> TensorId,
) -> TensorId {
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
        cur = ffn(b, layer, cur, ili);
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
