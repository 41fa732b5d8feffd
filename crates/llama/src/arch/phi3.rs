//! The phi3 architecture (src/models/phi3.cpp): a fused Q/K/V projection (or separate ones),
//! NeoX rope with longrope's long/short factors, the query scaled before attention, and a
//! fused-SwiGLU feed-forward (one up matrix of twice the width, gate half first). The file's
//! sliding window is ignored, as llama.cpp ignores it.

use super::tensors::{self, req, OutputHead, MM};
use super::{tn, ArchDef, RopeType};
use crate::error::Result;
use crate::graph::{FfnAct, FfnGate, GraphBuilder, NormType};
use crate::hparams::{HParams, Keys, SwaType};
use crate::model::{Layer, Model};
use crate::model_tensors::TensorCreator;
use ggml::TensorId;

pub(super) static ARCH: ArchDef = ArchDef {
    name: "phi3",
    rope_type: RopeType::Neox,
    load_hparams,
    type_name,
    tensors: create_tensors,
    graph: build,
};

fn load_hparams(k: &Keys, hp: &mut HParams) -> Result<()> {
    hp.f_norm_rms_eps = k.f32_req("attention.layer_norm_rms_epsilon")?;
    if k.u32_opt("attention.sliding_window")?
        .is_some_and(|n| n > 0)
    {
        ggml::log_warn!(
            "load_arch_hparams: Phi SWA is currently disabled - results might be suboptimal for some models (see https://github.com/ggml-org/llama.cpp/pull/13676)\n"
        );
        hp.swa_type = SwaType::None;
        hp.n_swa = 0;
        hp.set_swa_pattern(1, false);
    }
    Ok(())
}

fn type_name(hp: &HParams) -> &'static str {
    match hp.n_layer {
        24 => "1B",
        32 => "3B",
        40 => "14B",
        _ => "?B",
    }
}

fn create_tensors(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    let hp = model.hparams.clone();
    let n_embd = hp.n_embd as i64;
    tensors::token_embd(model, c)?;
    model.output_norm = tensors::output_norm(c, n_embd)?;
    tensors::output_head(model, c, OutputHead::TiedIfMissing)?;
    for il in 0..hp.n_layer as usize {
        let n_ff = hp.n_ff(il) as i64;
        let mut l = Layer {
            attn_norm: tensors::norm(c, tn::ATTN_NORM, il, n_embd)?,
            ..Layer::default()
        };
        let n_gqa = hp.n_embd_k_gqa(il) as i64;
        tensors::qkv_flags(c, &mut l, il, [n_embd, n_embd, n_gqa, n_gqa], false, true)?;
        l.wo = req(c, tn::ATTN_OUT, "weight", il, &[n_embd, n_embd], MM)?;
        l.ffn_norm = tensors::norm(c, tn::FFN_NORM, il, n_embd)?;
        l.ffn_down = req(c, tn::FFN_DOWN, "weight", il, &[n_ff, n_embd], MM)?;
        l.ffn_up = req(c, tn::FFN_UP, "weight", il, &[n_embd, 2 * n_ff], MM)?;
        l.rope_long = tensors::rope_factor(c, tn::ROPE_FACTORS_LONG, il, hp.n_rot)?;
        l.rope_short = tensors::rope_factor(c, tn::ROPE_FACTORS_SHORT, il, hp.n_rot)?;
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
        let mut residual = inp_l;
        let factors = b.rope_factors(il);
        let (norm, norm_b) = (layer.attn_norm, layer.attn_norm_b);
        let cur = b.build_norm(inp_l, norm, norm_b, NormType::Rms, ili);
        b.cb(cur, "attn_norm", ili);
        let (n_head, n_head_kv) = (hp.n_head(il) as i64, hp.n_head_kv(il) as i64);
        let [q, k, v] = b.build_qkv(layer, cur, n_embd_head, n_head, n_head_kv, ili);
        let q = b.rope(q, inp_pos, factors);
        let k = b.rope(k, inp_pos, factors);
        b.cb(q, "Qcur", ili);
        b.cb(k, "Kcur", ili);
        b.cb(v, "Vcur", ili);
        let q = b.g.ctx.scale(q, 1.0 / (n_embd_head as f32).sqrt());
        b.cb(q, "Qcur", ili);
        let mut cur = b.build_attn(layer.wo, layer.bo, q, k, v, 1.0, il);
        if il == n_layer - 1 {
            cur = b.g.ctx.get_rows(cur, inp_out_ids);
            residual = b.g.ctx.get_rows(residual, inp_out_ids);
        }
        cur = b.g.ctx.add(cur, residual);
        residual = cur;
        let (norm, norm_b) = (layer.ffn_norm, layer.ffn_norm_b);
        cur = b.build_norm(cur, norm, norm_b, NormType::Rms, ili);
        b.cb(cur, "ffn_norm", ili);
        let w = |t: Option<TensorId>| (t.expect("ffn weights are required at load"), None);
        let (up, down) = (w(layer.ffn_up), w(layer.ffn_down));
        cur = b.build_ffn(cur, up, None, down, FfnAct::Swiglu, FfnGate::Seq, ili);
        b.cb(cur, "ffn_out", ili);
        cur = b.g.ctx.add(residual, cur);
        cur = b.build_cvec(cur, il);
        b.cb(cur, "l_out", ili);
        inp_l = cur;
    }

    let mut cur = b.build_output_head(inp_l, NormType::Rms);
    if let Some(ob) = b.wo(model.output_b) {
        b.cb(cur, "result_output_no_bias", -1);
        cur = b.g.ctx.add(cur, ob);
    }
    b.cb(cur, "result_output", -1);
    cur
}
