//! The glm4 architecture (src/models/glm4.cpp), dense GLM-4-0414: normal rope over part of each
//! head, norms after attention and after the fused-SwiGLU feed-forward (one up matrix of twice
//! the width). Multimodal rope sections are refused; NextN prediction layers are loaded as
//! llama.cpp loads them, skipped (`arch/nextn.rs`).

use super::nextn::Skipped;
use super::tensors::{self, req, OutputHead, MM};
use super::{tn, ArchDef, RopeType};
use crate::error::{LlamaError, Result};
use crate::graph::{FfnAct, FfnGate, GraphBuilder, NormType};
use crate::hparams::{HParams, Keys};
use crate::model::{Layer, Model};
use crate::model_tensors::TensorCreator;
use ggml::TensorId;

pub(super) static ARCH: ArchDef = ArchDef {
    name: "glm4",
    rope_type: RopeType::Norm,
    load_hparams,
    type_name,
    tensors: create_tensors,
    graph: build,
};

fn load_hparams(k: &Keys, hp: &mut HParams) -> Result<()> {
    hp.f_norm_rms_eps = k.f32_req("attention.layer_norm_rms_epsilon")?;
    let sections = k.per_layer("rope.dimension_sections", 4, false)?;
    if sections.is_some_and(|s| s.iter().any(|&x| x != 0)) {
        return Err(LlamaError::Unsupported(format!(
            "{}: multimodal rope (M-RoPE) is not supported",
            k.full("rope.dimension_sections")
        )));
    }
    Ok(())
}

fn type_name(hp: &HParams) -> &'static str {
    match hp.n_layer {
        17 => "1B",
        40 => "9B",
        61 => "32B",
        _ => "?B",
    }
}

fn create_tensors(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    let hp = model.hparams.clone();
    let n_embd = hp.n_embd as i64;
    tensors::token_embd(model, c)?;
    model.output_norm = tensors::output_norm(c, n_embd)?;
    tensors::output_head(model, c, OutputHead::TiedIfMissing)?;
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
        l.attn_post_norm = tensors::norm(c, tn::ATTN_POST_NORM, il, n_embd)?;
        l.ffn_norm = tensors::norm(c, tn::FFN_NORM, il, n_embd)?;
        l.ffn_down = req(c, tn::FFN_DOWN, "weight", il, &[n_ff, n_embd], MM)?;
        l.ffn_up = req(c, tn::FFN_UP, "weight", il, &[n_embd, 2 * n_ff], MM)?;
        l.ffn_post_norm = tensors::norm(c, tn::FFN_POST_NORM, il, n_embd)?;
        model.layers.push(l);
    }
    // the NextN layers: every tensor skipped (required, but for create_tensor_qkv's and the
    // optional NextN ones), as glm4.cpp flags them; no trunk_only probe here
    for il in hp.n_layer as usize..hp.n_layer_all() as usize {
        let s = Skipped {
            il,
            all_optional: false,
        };
        let n_embd_q = head * hp.n_head(il) as i64;
        let n_ff = hp.n_ff(il) as i64;
        let w =
            |c: &mut TensorCreator, base: &str, dims: &[i64]| s.t(c, base, "weight", dims, false);
        w(c, tn::ATTN_NORM, &[n_embd])?;
        let (nk, nv) = (hp.n_embd_k_gqa(il) as i64, hp.n_embd_v_gqa(il) as i64);
        s.qkv(c, [n_embd, n_embd_q, nk, nv])?;
        w(c, tn::ATTN_OUT, &[n_embd_q, n_embd])?;
        w(c, tn::ATTN_POST_NORM, &[n_embd])?;
        w(c, tn::FFN_NORM, &[n_embd])?;
        w(c, tn::FFN_DOWN, &[n_ff, n_embd])?;
        w(c, tn::FFN_UP, &[n_embd, 2 * n_ff])?;
        w(c, tn::FFN_POST_NORM, &[n_embd])?;
        s.nextn(c, n_embd, hp.n_vocab as i64)?;
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
        let mut inp_sa = inp_l;
        let mut cur = b.build_norm(inp_l, layer.attn_norm, None, NormType::Rms, ili);
        b.cb(cur, "attn_norm", ili);
        let (n_head, n_head_kv) = (hp.n_head(il) as i64, hp.n_head_kv(il) as i64);
        let [q, k, v] = b.build_qkv(layer, cur, n_embd_head, n_head, n_head_kv, ili);
        let q = b.rope(q, inp_pos, None);
        let k = b.rope(k, inp_pos, None);
        b.cb(q, "Qcur", ili);
        b.cb(k, "Kcur", ili);
        b.cb(v, "Vcur", ili);
        let scale = 1.0 / (n_embd_head as f32).sqrt();
        cur = b.build_attn(layer.wo, None, q, k, v, scale, il);
        if il == n_layer - 1 {
            cur = b.g.ctx.get_rows(cur, inp_out_ids);
            inp_sa = b.g.ctx.get_rows(inp_sa, inp_out_ids);
        }
        cur = b.build_norm(cur, layer.attn_post_norm, None, NormType::Rms, ili);
        b.cb(cur, "post_attn_norm", ili);
        let ffn_inp = b.g.ctx.add(cur, inp_sa);
        b.cb(ffn_inp, "ffn_inp", ili);
        cur = b.build_norm(ffn_inp, layer.ffn_norm, None, NormType::Rms, ili);
        b.cb(cur, "ffn_norm", ili);
        let w = |t: Option<TensorId>| (t.expect("ffn weights are required at load"), None);
        let (up, down) = (w(layer.ffn_up), w(layer.ffn_down));
        cur = b.build_ffn(cur, up, None, down, FfnAct::Swiglu, FfnGate::Seq, ili);
        b.cb(cur, "ffn_out", ili);
        cur = b.build_norm(cur, layer.ffn_post_norm, None, NormType::Rms, ili);
        b.cb(cur, "post_mlp_norm", ili);
        cur = b.g.ctx.add(cur, ffn_inp);
        cur = b.build_cvec(cur, il);
        b.cb(cur, "l_out", ili);
        inp_l = cur;
    }

    let cur = b.build_output_head(inp_l, NormType::Rms);
    b.cb(cur, "result_output", -1);
    cur
}
