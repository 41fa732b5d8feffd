//! The llama architecture (src/models/llama.cpp): pre-norm decoder blocks with rope,
//! grouped-query attention and a SwiGLU feed-forward; optional biases, rope factors.

use super::tensors::{self, opt, req, MM};
use super::{tn, ArchDef, RopeType};
use crate::error::{LlamaError, Result};
use crate::graph::{GatedAct, GraphBuilder, MoeParams, NormType};
use crate::hparams::{HParams, Keys};
use crate::model::{Layer, Model};
use crate::model_tensors::{LayerKind, TensorCreator, DUPLICATED, NOT_REQUIRED};
use ggml::{Op, RopeParams, TensorId};

pub(super) static ARCH: ArchDef = ArchDef {
    name: "llama",
    rope_type: RopeType::Norm,
    load_hparams,
    type_name,
    tensors: create_tensors,
    graph: build,
};

fn load_hparams(k: &Keys, hp: &mut HParams) -> Result<()> {
    hp.f_norm_rms_eps = k.f32_req("attention.layer_norm_rms_epsilon")?;
    super::require_full_rope(hp, "llama")
}

fn type_name(hp: &HParams) -> &'static str {
    if hp.n_expert == 8 {
        return match hp.n_layer {
            32 => "8x7B",
            56 => "8x22B",
            _ => "?B",
        };
    }
    match hp.n_layer {
        16 | 22 => "1B",
        26 | 28 => "3B",
        30 => "256M",
        32 if hp.n_vocab == 49152 => "3B",
        32 if hp.n_vocab < 40000 => "7B",
        32 => "8B",
        36 => "8B",
        40 => "13B",
        48 => "34B",
        60 => "30B",
        80 if hp.n_head(0) == hp.n_head_kv(0) => "65B",
        80 => "70B",
        _ => "?B",
    }
}

fn create_tensors(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    tensors::embd_and_output(model, c)?;
    let hp = model.hparams.clone();
    let n_embd = hp.n_embd as i64;
    let n_embd_head_k = hp.n_embd_head_k as i64;
    for il in 0..hp.n_layer as usize {
        let n_embd_q = n_embd_head_k * hp.n_head(il) as i64;
        let n_ff = hp.n_ff(il) as i64;
        let mut l = Layer {
            attn_norm: tensors::norm(c, tn::ATTN_NORM, il, n_embd)?,
            ..Layer::default()
        };
        tensors::qkv(
            c,
            &mut l,
            il,
            n_embd,
            n_embd_q,
            hp.n_embd_k_gqa(il) as i64,
            hp.n_embd_v_gqa(il) as i64,
            false,
        )?;
        l.wo = req(c, tn::ATTN_OUT, "weight", il, &[n_embd_q, n_embd], MM)?;
        l.bo = opt(c, tn::ATTN_OUT, "bias", il, &[n_embd], Op::Add)?;
        l.ffn_norm = tensors::norm(c, tn::FFN_NORM, il, n_embd)?;
        let flags = NOT_REQUIRED | if il != 0 { DUPLICATED } else { 0 };
        l.rope_freqs = c.create(
            &tn::global(tn::ROPE_FREQS, "weight"),
            &[hp.n_rot as i64 / 2],
            flags,
            LayerKind::Repeating(il),
            Op::Rope(RopeParams::default()),
        )?;
        if has_experts(c, &hp, il)? {
            let n_expert = hp.n_expert as i64;
            super::moe::router_and_experts(c, &mut l.moe, il, n_embd, n_ff, n_expert, false)?;
            model.layers.push(l);
            continue;
        }
        tensors::ffn_gate_down_up(c, &mut l, il, n_embd, n_ff)?;
        l.ffn_gate_b = opt(c, tn::FFN_GATE, "bias", il, &[n_ff], Op::Add)?;
        l.ffn_down_b = opt(c, tn::FFN_DOWN, "bias", il, &[n_embd], Op::Add)?;
        l.ffn_up_b = opt(c, tn::FFN_UP, "bias", il, &[n_ff], Op::Add)?;
        model.layers.push(l);
    }
    // per-tensor scales of scaled low-precision formats; the graph does not apply them yet
    for il in 0..hp.n_layer as usize {
        for suffix in ["scale", "input_scale"] {
            for base in [
                tn::ATTN_Q,
                tn::ATTN_K,
                tn::ATTN_V,
                tn::ATTN_OUT,
                tn::FFN_GATE,
                tn::FFN_DOWN,
                tn::FFN_UP,
            ] {
                if opt(c, base, suffix, il, &[1], Op::Mul)?.is_some() {
                    return Err(LlamaError::Unsupported(format!(
                        "tensor blk.{il}.{base}.{suffix}: scaled weights are not supported"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// llama's feed-forward is the experts' when expert_count > 0 (Mixtral). A file with an
/// expert count but no router keeps loading as dense (model_check::ignored_keys warns); a
/// router without an expert count is refused by the key's name.
fn has_experts(c: &TensorCreator, hp: &HParams, il: usize) -> Result<bool> {
    let router = tn::blk(super::moe::tn::FFN_GATE_INP, "weight", il);
    let has_router = c.has(&router);
    if hp.n_expert == 0 {
        if has_router {
            return Err(LlamaError::BadHparams(format!(
                "llama.expert_count = 0 (or missing) but the model has expert tensors ({router})"
            )));
        }
        return Ok(false);
    }
    if has_router {
        super::moe::check_counts("llama", hp)?;
    }
    Ok(has_router)
}

fn build(model: &Model, b: &mut GraphBuilder) -> TensorId {
    let hp = &model.hparams;
    let n_embd_head = hp.n_embd_head_v as i64;
    let n_layer = hp.n_layer as usize;
    let tok_embd = model.tok_embd.expect("loaded models have token embeddings");

    let mut inp_l = b.build_inp_embd(tok_embd);
    let inp_pos = b.build_inp_pos();
    b.build_attn_inp_kv();
    let kq_scale = if hp.f_attention_scale == 0.0 {
        1.0 / (n_embd_head as f32).sqrt()
    } else {
        hp.f_attention_scale
    };
    let inp_out_ids = b.build_inp_out_ids();
    let moe_p = MoeParams {
        act: GatedAct::Silu,
        norm_w: true,
        w_scale: hp.moe.expert_weights_scale,
        gating: super::moe::Gating::Softmax,
    };

    for il in 0..n_layer {
        let layer = &model.layers[il];
        let ili = il as i32;
        let mut inp_sa = inp_l;
        let mut cur = b.build_norm(inp_l, layer.attn_norm, None, NormType::Rms, ili);
        b.cb(cur, "attn_norm", ili);

        let rope_factors = b.wo(model.rope_freqs(il));
        let [q, k, v] = b.build_qkv(
            layer,
            cur,
            n_embd_head,
            hp.n_head(il) as i64,
            hp.n_head_kv(il) as i64,
            ili,
        );
        let q = b.rope(q, inp_pos, rope_factors);
        let k = b.rope(k, inp_pos, rope_factors);
        b.cb(q, "Qcur", ili);
        b.cb(k, "Kcur", ili);
        b.cb(v, "Vcur", ili);
        cur = b.build_attn(layer.wo, layer.bo, q, k, v, kq_scale, il);
        b.cb(cur, "attn_out", ili);

        if il == n_layer - 1 {
            cur = b.g.ctx.get_rows(cur, inp_out_ids);
            inp_sa = b.g.ctx.get_rows(inp_sa, inp_out_ids);
        }
        let ffn_inp = b.g.ctx.add(cur, inp_sa);
        b.cb(ffn_inp, "ffn_inp", ili);

        cur = b.build_norm(ffn_inp, layer.ffn_norm, None, NormType::Rms, ili);
        b.cb(cur, "ffn_norm", ili);
        if layer.moe.gate_inp.is_some() {
            cur = b.build_moe_ffn(cur, &layer.moe, moe_p, ili);
            b.cb(cur, "ffn_moe_out", ili);
            cur = b.g.ctx.add(cur, ffn_inp);
            b.cb(cur, "ffn_out", ili);
            cur = b.build_cvec(cur, il);
            b.cb(cur, "l_out", ili);
            inp_l = cur;
            continue;
        }
        let (up, gate, down) = (layer.ffn_up, layer.ffn_gate, layer.ffn_down);
        cur = b.build_ffn_swiglu(
            cur,
            up.expect("ffn weights are required at load"),
            layer.ffn_up_b,
            gate.expect("ffn weights are required at load"),
            layer.ffn_gate_b,
            down.expect("ffn weights are required at load"),
            layer.ffn_down_b,
            ili,
        );
        b.cb(cur, "ffn_out", ili);
        cur = b.g.ctx.add(cur, ffn_inp);
        b.cb(cur, "ffn_out", ili);
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
