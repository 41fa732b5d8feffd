//! The olmo2 architecture (src/models/olmo2.cpp, also OLMo 3): no pre-norms; RMS norms of the
//! whole Q and K rows before the heads are split, NeoX rope, norms after attention and after
//! the SwiGLU feed-forward. With a sliding window in the file (OLMo 3) three layers of four
//! slide, and those rope without the context's frequency scaling.

use super::tensors::{self, req, OutputHead, MM};
use super::{tn, ArchDef, RopeType};
use crate::error::Result;
use crate::graph::{FfnAct, FfnGate, GraphBuilder, NormType};
use crate::hparams::{HParams, Keys, SwaType};
use crate::model::{Layer, Model};
use crate::model_tensors::TensorCreator;
use ggml::TensorId;

pub(super) static ARCH: ArchDef = ArchDef {
    name: "olmo2",
    rope_type: RopeType::Neox,
    load_hparams,
    type_name,
    tensors: create_tensors,
    graph: build,
};

fn load_hparams(k: &Keys, hp: &mut HParams) -> Result<()> {
    hp.f_norm_rms_eps = k.f32_req("attention.layer_norm_rms_epsilon")?;
    match k.u32_opt("attention.sliding_window")? {
        Some(n) if n > 0 => {
            hp.n_swa = n;
            hp.swa_type = SwaType::Standard;
            hp.load_swa_pattern(k, 4, false)?;
            hp.rope_freq_base_train_swa = k
                .f32_opt("rope.freq_base_swa")?
                .unwrap_or(hp.rope_freq_base_train);
            hp.rope_freq_scale_train_swa = 1.0;
        }
        _ => hp.swa_type = SwaType::None,
    }
    super::require_full_rope(hp, "olmo2")
}

fn type_name(hp: &HParams) -> &'static str {
    match hp.n_layer {
        16 => "1B",
        32 => "7B",
        40 => "13B",
        64 => "32B",
        _ => "?B",
    }
}

fn create_tensors(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    let hp = model.hparams.clone();
    let n_embd = hp.n_embd as i64;
    tensors::token_embd(model, c)?;
    model.output_norm = tensors::output_norm(c, n_embd)?;
    tensors::output_head(model, c, OutputHead::Own)?;
    let n_embd_head = n_embd / hp.n_head(0) as i64;
    for il in 0..hp.n_layer as usize {
        let n_ff = hp.n_ff(il) as i64;
        let mut l = Layer::default();
        let n_gqa = hp.n_embd_k_gqa(il) as i64;
        tensors::qkv(c, &mut l, il, n_embd, n_embd, n_gqa, n_gqa, false)?;
        l.wo = req(c, tn::ATTN_OUT, "weight", il, &[n_embd, n_embd], MM)?;
        l.attn_q_norm = tensors::norm(c, tn::ATTN_Q_NORM, il, n_embd)?;
        let n_k = hp.n_head_kv(il) as i64 * n_embd_head;
        l.attn_k_norm = tensors::norm(c, tn::ATTN_K_NORM, il, n_k)?;
        l.attn_post_norm = tensors::norm(c, tn::ATTN_POST_NORM, il, n_embd)?;
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
    let n_embd_head = hp.n_embd_head_v as i64;
    let n_layer = hp.n_layer as usize;
    let n_tokens = b.p.n_tokens as i64;
    let tok_embd = model.tok_embd.expect("loaded models have token embeddings");
    let iswa = hp.swa_type == SwaType::Standard;

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
        let mut inp_sa = inp_l;
        let (n_head, n_head_kv) = (hp.n_head(il) as i64, hp.n_head_kv(il) as i64);
        let [q, k, v] = b.build_qkv_2d(layer, inp_l, n_embd_head, n_head, n_head_kv, ili);
        b.cb(q, "Qcur", ili);
        b.cb(k, "Kcur", ili);
        b.cb(v, "Vcur", ili);
        let q = b.build_norm(q, layer.attn_q_norm, None, NormType::Rms, ili);
        b.cb(q, "Qcur_normed", ili);
        let k = b.build_norm(k, layer.attn_k_norm, None, NormType::Rms, ili);
        b.cb(k, "Kcur_normed", ili);
        let q = b.g.ctx.reshape_3d(q, n_embd_head, n_head, n_tokens);
        let k = b.g.ctx.reshape_3d(k, n_embd_head, n_head_kv, n_tokens);
        let v = b.g.ctx.reshape_3d(v, n_embd_head, n_head_kv, n_tokens);
        let mut rp = b.p.rope;
        if hp.is_swa(il) {
            // plain rope on the sliding-window layers: no YaRN scaling
            rp.freq_scale = 1.0;
            rp.ext_factor = 0.0;
            rp.attn_factor = 1.0;
        }
        let q = b.g.ctx.rope_ext(q, inp_pos, None, rp);
        let k = b.g.ctx.rope_ext(k, inp_pos, None, rp);
        b.cb(q, "Qcur", ili);
        b.cb(k, "Kcur", ili);
        b.cb(v, "Vcur", ili);
        let scale = 1.0 / (n_embd_head as f32).sqrt();
        let mut cur = b.build_attn(layer.wo, None, q, k, v, scale, il);
        if il == n_layer - 1 {
            cur = b.g.ctx.get_rows(cur, inp_out_ids);
            inp_sa = b.g.ctx.get_rows(inp_sa, inp_out_ids);
        }
        cur = b.build_norm(cur, layer.attn_post_norm, None, NormType::Rms, ili);
        b.cb(cur, "attn_post_norm", ili);
        let ffn_inp = b.g.ctx.add(cur, inp_sa);
        b.cb(ffn_inp, "ffn_inp", ili);
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
        cur = b.build_norm(cur, layer.ffn_post_norm, None, NormType::Rms, -1);
        b.cb(cur, "ffn_post_norm", -1);
        cur = b.g.ctx.add(cur, ffn_inp);
        b.cb(cur, "ffn_out", ili);
        cur = b.build_cvec(cur, il);
        b.cb(cur, "l_out", ili);
        inp_l = cur;
    }

    let cur = b.build_output_head(inp_l, NormType::Rms);
    b.cb(cur, "result_output", -1);
    cur
}
