//! The block that exaone, smollm3, mistral3 and granite share with llama (their
//! src/models/*.cpp differ from llama.cpp's llama graph only in the options here): RMS pre-norms,
//! rope with the layer's frequency factors (skipped on some layers), attention with an optional
//! output bias, a SwiGLU feed-forward with optional biases.

use super::tensors::{self, opt, req, MM};
use super::tn;
use crate::error::Result;
use crate::graph::{FfnAct, FfnGate, GraphBuilder, NormType};
use crate::model::{Layer, Model};
use crate::model_tensors::TensorCreator;
use ggml::{Op, TensorId};

/// What one architecture changes in the shared block.
pub(super) struct Opts {
    /// whether layer `il` rotates Q and K
    pub use_rope: fn(&Model, usize) -> bool,
    /// multiplies the embeddings (granite's embedding_scale; 0: none)
    pub embd_scale: f32,
    /// multiplies the attention and FFN outputs before each residual add (0: none)
    pub residual_scale: f32,
    /// divides the logits (granite's logit_scale; 0: none)
    pub logit_div: f32,
    /// scales the queries by position (attention temperature tuning, mistral3)
    pub attn_temp: bool,
}

/// The per-layer tensors in llama.cpp's order: attention, `wo_b` (optional) when `wo_bias`,
/// ffn_norm, the rope factors `rope` creates, gate/down/up and, when `ffn_bias`, their optional
/// biases.
pub(super) fn create_tensors(
    model: &mut Model,
    c: &mut TensorCreator,
    wo_bias: bool,
    rope: fn(&mut TensorCreator, &mut Layer, usize, &crate::hparams::HParams) -> Result<()>,
    ffn_bias: bool,
) -> Result<()> {
    let hp = model.hparams.clone();
    tensors::token_embd(model, c)?;
    let n_embd = hp.n_embd as i64;
    model.output_norm = tensors::output_norm(c, n_embd)?;
    tensors::output_head(model, c, tensors::OutputHead::TiedIfMissing)?;
    let head = hp.n_embd_head_k as i64;
    for il in 0..hp.n_layer as usize {
        let n_embd_q = head * hp.n_head(il) as i64;
        let n_ff = hp.n_ff(il) as i64;
        let mut l = Layer {
            attn_norm: tensors::norm(c, tn::ATTN_NORM, il, n_embd)?,
            ..Layer::default()
        };
        let (nk, nv) = (hp.n_embd_k_gqa(il) as i64, hp.n_embd_v_gqa(il) as i64);
        tensors::qkv(c, &mut l, il, n_embd, n_embd_q, nk, nv, false)?;
        l.wo = req(c, tn::ATTN_OUT, "weight", il, &[n_embd_q, n_embd], MM)?;
        if wo_bias {
            l.bo = opt(c, tn::ATTN_OUT, "bias", il, &[n_embd], Op::Add)?;
        }
        l.ffn_norm = tensors::norm(c, tn::FFN_NORM, il, n_embd)?;
        rope(c, &mut l, il, &hp)?;
        tensors::ffn_gate_down_up(c, &mut l, il, n_embd, n_ff)?;
        if ffn_bias {
            l.ffn_gate_b = opt(c, tn::FFN_GATE, "bias", il, &[n_ff], Op::Add)?;
            l.ffn_down_b = opt(c, tn::FFN_DOWN, "bias", il, &[n_embd], Op::Add)?;
            l.ffn_up_b = opt(c, tn::FFN_UP, "bias", il, &[n_ff], Op::Add)?;
        }
        model.layers.push(l);
    }
    Ok(())
}

/// No rope factors (smollm3).
pub(super) fn no_rope_factors(
    _: &mut TensorCreator,
    _: &mut Layer,
    _: usize,
    _: &crate::hparams::HParams,
) -> Result<()> {
    Ok(())
}

/// rope_freqs only (exaone).
pub(super) fn rope_freqs(
    c: &mut TensorCreator,
    l: &mut Layer,
    il: usize,
    hp: &crate::hparams::HParams,
) -> Result<()> {
    l.rope_freqs = tensors::rope_factor(c, tn::ROPE_FREQS, il, hp.n_rot)?;
    Ok(())
}

pub(super) fn build(model: &Model, b: &mut GraphBuilder, o: &Opts) -> TensorId {
    let hp = &model.hparams;
    let n_embd_head = hp.n_embd_head_v as i64;
    let n_layer = hp.n_layer as usize;
    let tok_embd = model.tok_embd.expect("loaded models have token embeddings");

    let mut inp_l = b.build_inp_embd(tok_embd);
    if o.embd_scale != 0.0 {
        inp_l = b.g.ctx.scale(inp_l, o.embd_scale);
        b.cb(inp_l, "embd", -1);
        b.g.build_forward_expand(inp_l);
    }
    let any_rope = (0..n_layer).any(|il| (o.use_rope)(model, il));
    let inp_pos = if any_rope {
        Some(b.build_inp_pos())
    } else {
        None
    };
    let inp_attn_scale = if o.attn_temp {
        Some(b.build_inp_attn_scale())
    } else {
        None
    };
    b.build_attn_inp_kv();
    let kq_scale = if hp.f_attention_scale == 0.0 {
        1.0 / (n_embd_head as f32).sqrt()
    } else {
        hp.f_attention_scale
    };
    let inp_out_ids = b.build_inp_out_ids();

    for il in 0..n_layer {
        let layer = &model.layers[il];
        let ili = il as i32;
        let mut inp_sa = inp_l;
        let mut cur = b.build_norm(inp_l, layer.attn_norm, None, NormType::Rms, ili);
        b.cb(cur, "attn_norm", ili);
        let (n_head, n_head_kv) = (hp.n_head(il) as i64, hp.n_head_kv(il) as i64);
        let [mut q, mut k, v] = b.build_qkv(layer, cur, n_embd_head, n_head, n_head_kv, ili);
        if let (true, Some(pos)) = ((o.use_rope)(model, il), inp_pos) {
            let factors = b.rope_factors(il);
            q = b.rope(q, pos, factors);
            k = b.rope(k, pos, factors);
        }
        b.cb(q, "Qcur", ili);
        b.cb(k, "Kcur", ili);
        b.cb(v, "Vcur", ili);
        if let Some(s) = inp_attn_scale {
            q = b.g.ctx.mul(q, s);
            b.cb(q, "Qcur_attn_temp_scaled", ili);
        }
        cur = b.build_attn(layer.wo, layer.bo, q, k, v, kq_scale, il);
        b.cb(cur, "attn_out", ili);
        if il == n_layer - 1 {
            cur = b.g.ctx.get_rows(cur, inp_out_ids);
            inp_sa = b.g.ctx.get_rows(inp_sa, inp_out_ids);
        }
        if o.residual_scale != 0.0 {
            cur = b.g.ctx.scale(cur, o.residual_scale);
        }
        let ffn_inp = b.g.ctx.add(cur, inp_sa);
        b.cb(ffn_inp, "ffn_inp", ili);
        cur = b.build_norm(ffn_inp, layer.ffn_norm, None, NormType::Rms, ili);
        b.cb(cur, "ffn_norm", ili);
        let w = |t: Option<TensorId>| t.expect("ffn weights are required at load");
        let up = (w(layer.ffn_up), layer.ffn_up_b);
        let gate = (w(layer.ffn_gate), layer.ffn_gate_b);
        let down = (w(layer.ffn_down), layer.ffn_down_b);
        cur = b.build_ffn(cur, up, Some(gate), down, FfnAct::Silu, FfnGate::Par, ili);
        b.cb(cur, "ffn_out", ili);
        if o.residual_scale != 0.0 {
            cur = b.g.ctx.scale(cur, o.residual_scale);
        }
        cur = b.g.ctx.add(cur, ffn_inp);
        b.cb(cur, "ffn_out", ili);
        cur = b.build_cvec(cur, il);
        b.cb(cur, "l_out", ili);
        inp_l = cur;
    }

    let mut cur = b.build_output_head(inp_l, NormType::Rms);
    if o.logit_div != 0.0 {
        cur = b.g.ctx.scale(cur, 1.0 / o.logit_div);
    }
    b.cb(cur, "result_output", -1);
    cur
}
