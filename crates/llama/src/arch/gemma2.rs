//! The gemma2 architecture (src/models/gemma2.cpp): gemma's scaled embeddings and GeGLU with
//! norms after attention and feed-forward, sliding-window attention on every other layer
//! (window 4096 unless the file says), tanh soft-capping of the attention scores and of the
//! logits, and the output always tied to the embedding.

use super::tensors::{self, req, MM};
use super::{gemma3, tn, ArchDef, RopeType};
use crate::error::Result;
use crate::graph::{GraphBuilder, NormType};
use crate::hparams::{HParams, Keys, SwaType};
use crate::model::{Layer, Model};
use crate::model_tensors::{LayerKind, TensorCreator, DUPLICATED};
use ggml::TensorId;

pub(super) static ARCH: ArchDef = ArchDef {
    name: "gemma2",
    rope_type: RopeType::Neox,
    load_hparams,
    type_name,
    tensors: create_tensors,
    graph: build,
};

fn load_hparams(k: &Keys, hp: &mut HParams) -> Result<()> {
    hp.swa_type = SwaType::Standard;
    hp.n_swa = 4096;
    hp.load_swa_pattern(k, 2, false)?;
    hp.attn_soft_cap = true;
    hp.rope_freq_base_train_swa = k
        .f32_opt("rope.freq_base_swa")?
        .unwrap_or(hp.rope_freq_base_train);
    hp.rope_freq_scale_train_swa = hp.rope_freq_scale_train;
    if let Some(n) = k.u32_opt("attention.sliding_window")? {
        hp.n_swa = n;
    }
    hp.f_norm_rms_eps = k.f32_req("attention.layer_norm_rms_epsilon")?;
    hp.f_attn_logit_softcapping = k.f32_opt("attn_logit_softcapping")?.unwrap_or(50.0);
    hp.f_final_logit_softcapping = k.f32_opt("final_logit_softcapping")?.unwrap_or(30.0);
    hp.f_attention_scale = if type_name(hp) == "27B" {
        1.0 / ((hp.n_embd / hp.n_head(0)) as f32).sqrt()
    } else {
        1.0 / (hp.n_embd_head_k as f32).sqrt()
    };
    hp.f_embedding_scale = (hp.n_embd as f32).sqrt();
    Ok(())
}

fn type_name(hp: &HParams) -> &'static str {
    match hp.n_layer {
        26 => "2B",
        42 => "9B",
        46 => "27B",
        _ => "?B",
    }
}

fn create_tensors(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    let hp = model.hparams.clone();
    let n_embd = hp.n_embd as i64;
    let n_vocab = hp.n_vocab as i64;
    let tok = tn::global(tn::TOKEN_EMBD, "weight");
    model.tok_embd = Some(c.require(
        &tok,
        &[n_embd, n_vocab],
        LayerKind::Input,
        ggml::Op::GetRows,
    )?);
    model.output_norm = tensors::output_norm(c, n_embd)?;
    model.output = c.create(&tok, &[n_embd, n_vocab], DUPLICATED, LayerKind::Output, MM)?;
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
        l.attn_post_norm = tensors::norm(c, tn::ATTN_POST_NORM, il, n_embd)?;
        l.ffn_norm = tensors::norm(c, tn::FFN_NORM, il, n_embd)?;
        let n_ff = hp.n_ff(il) as i64;
        l.ffn_gate = req(c, tn::FFN_GATE, "weight", il, &[n_embd, n_ff], MM)?;
        l.ffn_up = req(c, tn::FFN_UP, "weight", il, &[n_embd, n_ff], MM)?;
        l.ffn_down = req(c, tn::FFN_DOWN, "weight", il, &[n_ff, n_embd], MM)?;
        l.ffn_post_norm = tensors::norm(c, tn::FFN_POST_NORM, il, n_embd)?;
        model.layers.push(l);
    }
    Ok(())
}

fn build(model: &Model, b: &mut GraphBuilder) -> TensorId {
    let hp = &model.hparams;
    let n_embd_head = hp.n_embd_head_k as i64;
    let n_layer = hp.n_layer as usize;
    let tok_embd = model.tok_embd.expect("loaded models have token embeddings");

    let mut inp_l = b.build_inp_embd(tok_embd);
    inp_l = b.scale_embd(inp_l, hp.f_embedding_scale);
    let inp_pos = b.build_inp_pos();
    b.build_attn_inp_kv_iswa();
    let inp_out_ids = b.build_inp_out_ids();

    for il in 0..n_layer {
        let layer = &model.layers[il];
        let ili = il as i32;
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
        let q = b.rope_layer(q, inp_pos, il);
        let k = b.rope_layer(k, inp_pos, il);
        b.cb(q, "Qcur", ili);
        b.cb(k, "Kcur", ili);
        b.cb(v, "Vcur", ili);
        cur = gemma3::attn_ffn_block(b, layer, [q, k, v], inp_l, inp_out_ids, il, n_layer, -1);
        inp_l = cur;
    }

    gemma3::output(model, b, inp_l)
}
