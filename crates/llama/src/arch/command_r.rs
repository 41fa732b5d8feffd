//! The command-r architecture (src/models/command-r.cpp) and the parallel block cohere2 shares:
//! one LayerNorm (no bias) feeds both attention and the SwiGLU feed-forward, whose outputs are
//! added to the layer input together; the output is tied to the embedding and the logits are
//! multiplied by logit_scale. Files of 64 layers or more have LayerNorms of the Q and K heads.

use super::tensors::{self, req, OutputHead, MM};
use super::{tn, ArchDef, RopeType};
use crate::error::Result;
use crate::graph::{FfnAct, FfnGate, GraphBuilder, NormType};
use crate::hparams::{HParams, Keys};
use crate::model::{Layer, Model};
use crate::model_tensors::TensorCreator;
use ggml::{Op, TensorId};

pub(super) static ARCH: ArchDef = ArchDef {
    name: "command-r",
    rope_type: RopeType::Norm,
    load_hparams,
    type_name,
    tensors: create_tensors,
    graph: build,
};

fn load_hparams(k: &Keys, hp: &mut HParams) -> Result<()> {
    if let Some(s) = k.f32_opt("logit_scale")? {
        hp.f_logit_scale = s;
    }
    hp.f_norm_eps = k.f32_req("attention.layer_norm_epsilon")?;
    // a LayerNorm model: llama.cpp never reads the RMS epsilon (print_info shows 0)
    hp.f_norm_rms_eps = 0.0;
    Ok(())
}

fn type_name(hp: &HParams) -> &'static str {
    match hp.n_layer {
        40 => "35B",
        _ => "?B",
    }
}

/// The tensors of command-r and cohere2: `head_norms` adds the Q/K head norms.
pub(super) fn create(model: &mut Model, c: &mut TensorCreator, head_norms: bool) -> Result<()> {
    let hp = model.hparams.clone();
    let n_embd = hp.n_embd as i64;
    tensors::token_embd(model, c)?;
    model.output_norm = tensors::output_norm(c, n_embd)?;
    tensors::output_head(model, c, OutputHead::Tied)?;
    let head = hp.n_embd_head_k as i64;
    for il in 0..hp.n_layer as usize {
        let mut l = Layer {
            attn_norm: tensors::norm(c, tn::ATTN_NORM, il, n_embd)?,
            ..Layer::default()
        };
        if head_norms {
            let (n_head, n_head_kv) = (hp.n_head(il) as i64, hp.n_head_kv(il) as i64);
            l.attn_q_norm = req(c, tn::ATTN_Q_NORM, "weight", il, &[head, n_head], Op::Mul)?;
            l.attn_k_norm = req(
                c,
                tn::ATTN_K_NORM,
                "weight",
                il,
                &[head, n_head_kv],
                Op::Mul,
            )?;
        }
        let n_gqa = hp.n_embd_k_gqa(il) as i64;
        tensors::qkv(c, &mut l, il, n_embd, n_embd, n_gqa, n_gqa, false)?;
        l.wo = req(c, tn::ATTN_OUT, "weight", il, &[n_embd, n_embd], MM)?;
        tensors::ffn_gate_down_up(c, &mut l, il, n_embd, hp.n_ff(il) as i64)?;
        model.layers.push(l);
    }
    Ok(())
}

fn create_tensors(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    let head_norms = model.hparams.n_layer >= 64;
    create(model, c, head_norms)
}

fn build(model: &Model, b: &mut GraphBuilder) -> TensorId {
    build_parallel(model, b, false)
}

/// The command-r graph; with `iswa` cohere2's: both caches, rope on the sliding-window layers
/// only.
pub(super) fn build_parallel(model: &Model, b: &mut GraphBuilder, iswa: bool) -> TensorId {
    let hp = &model.hparams;
    let n_embd_head = hp.n_embd_head_v as i64;
    let n_layer = hp.n_layer as usize;
    let tok_embd = model.tok_embd.expect("loaded models have token embeddings");

    let mut inp_l = b.build_inp_embd(tok_embd);
    let inp_pos = b.build_inp_pos();
    if iswa {
        b.build_attn_inp_kv_iswa();
    } else {
        b.build_attn_inp_kv();
    }
    let inp_out_ids = b.build_inp_out_ids();

    for il in 0..n_layer {
        let layer = &model.layers[il];
        let ili = il as i32;
        let mut cur = b.build_norm(inp_l, layer.attn_norm, None, NormType::Layer, ili);
        b.cb(cur, "attn_norm", ili);
        let mut ffn_inp = cur;
        let factors = if iswa { b.rope_factors(il) } else { None };
        let (n_head, n_head_kv) = (hp.n_head(il) as i64, hp.n_head_kv(il) as i64);
        let [mut q, mut k, v] = b.build_qkv(layer, cur, n_embd_head, n_head, n_head_kv, ili);
        let rope = !iswa || hp.is_swa(il);
        if layer.attn_q_norm.is_some() {
            q = b.build_norm(q, layer.attn_q_norm, None, NormType::Layer, ili);
            b.cb(q, "Qcur", ili);
        }
        if rope {
            q = b.rope(q, inp_pos, factors);
        }
        if layer.attn_k_norm.is_some() {
            k = b.build_norm(k, layer.attn_k_norm, None, NormType::Layer, ili);
            b.cb(k, "Kcur", ili);
        }
        if rope {
            k = b.rope(k, inp_pos, factors);
        }
        b.cb(q, "Qcur", ili);
        b.cb(k, "Kcur", ili);
        b.cb(v, "Vcur", ili);
        let scale = 1.0 / (n_embd_head as f32).sqrt();
        cur = b.build_attn(layer.wo, layer.bo, q, k, v, scale, il);
        if il == n_layer - 1 {
            cur = b.g.ctx.get_rows(cur, inp_out_ids);
            inp_l = b.g.ctx.get_rows(inp_l, inp_out_ids);
            ffn_inp = b.g.ctx.get_rows(ffn_inp, inp_out_ids);
        }
        let attn_out = cur;
        let w = |t: Option<TensorId>| (t.expect("ffn weights are required at load"), None);
        let (up, gate, down) = (w(layer.ffn_up), w(layer.ffn_gate), w(layer.ffn_down));
        cur = b.build_ffn(
            ffn_inp,
            up,
            Some(gate),
            down,
            FfnAct::Silu,
            FfnGate::Par,
            ili,
        );
        b.cb(cur, "ffn_out", ili);
        cur = b.g.ctx.add(cur, inp_l);
        cur = b.g.ctx.add(cur, attn_out);
        cur = b.build_cvec(cur, il);
        b.cb(cur, "l_out", ili);
        inp_l = cur;
    }

    let mut cur = b.build_output_head(inp_l, NormType::Layer);
    if hp.f_logit_scale != 0.0 {
        cur = b.g.ctx.scale(cur, hp.f_logit_scale);
    }
    b.cb(cur, "result_output", -1);
    cur
}
