//! The qwen2 architecture (src/models/qwen2.cpp): llama's block with Q/K/V biases and NeoX
//! rope.

use super::tensors::{self, req, MM};
use super::{tn, ArchDef, RopeType};
use crate::error::Result;
use crate::graph::{GraphBuilder, NormType};
use crate::hparams::{HParams, Keys};
use crate::model::{Layer, Model};
use crate::model_tensors::TensorCreator;
use ggml::TensorId;

pub(super) static ARCH: ArchDef = ArchDef {
    name: "qwen2",
    rope_type: RopeType::Neox,
    load_hparams,
    type_name,
    tensors: create_tensors,
    graph: build,
};

fn load_hparams(k: &Keys, hp: &mut HParams) -> Result<()> {
    hp.f_norm_rms_eps = k.f32_req("attention.layer_norm_rms_epsilon")?;
    super::require_full_rope(hp, "qwen2")
}

fn type_name(hp: &HParams) -> &'static str {
    match hp.n_layer {
        24 if hp.n_embd == 1024 => "0.5B",
        24 => "1B",
        28 if hp.n_embd == 1536 => "1.5B",
        28 => "7B",
        32 => "7B",
        36 => "3B",
        40 if hp.n_head(0) == 20 => "4B",
        40 => "13B",
        48 => "14B",
        64 => "32B",
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
        let mut l = Layer {
            attn_norm: tensors::norm(c, tn::ATTN_NORM, il, n_embd)?,
            ..Layer::default()
        };
        // qwen2 always has Q/K/V biases
        tensors::qkv(
            c,
            &mut l,
            il,
            n_embd,
            n_embd_q,
            hp.n_embd_k_gqa(il) as i64,
            hp.n_embd_v_gqa(il) as i64,
            true,
        )?;
        l.wo = req(c, tn::ATTN_OUT, "weight", il, &[n_embd_q, n_embd], MM)?;
        l.ffn_norm = tensors::norm(c, tn::FFN_NORM, il, n_embd)?;
        tensors::ffn_gate_down_up(c, &mut l, il, n_embd, hp.n_ff(il) as i64)?;
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

        let mut qkv = [cur; 3];
        let parts = [
            (layer.wq, layer.bq, "Qcur"),
            (layer.wk, layer.bk, "Kcur"),
            (layer.wv, layer.bv, "Vcur"),
        ];
        for (i, (w, bias, name)) in parts.into_iter().enumerate() {
            let w = w.expect("projection weights are required at load");
            let mut t = b.build_lora_mm(w, cur);
            if let Some(bias) = b.wo(bias) {
                t = b.g.ctx.add(t, bias);
            }
            b.cb(t, name, ili);
            qkv[i] = t;
        }
        let q =
            b.g.ctx
                .reshape_3d(qkv[0], n_embd_head, hp.n_head(il) as i64, n_tokens);
        let k =
            b.g.ctx
                .reshape_3d(qkv[1], n_embd_head, hp.n_head_kv(il) as i64, n_tokens);
        let v =
            b.g.ctx
                .reshape_3d(qkv[2], n_embd_head, hp.n_head_kv(il) as i64, n_tokens);
        let q = b.rope(q, inp_pos, None);
        let k = b.rope(k, inp_pos, None);
        b.cb(q, "Qcur", ili);
        b.cb(k, "Kcur", ili);
        b.cb(v, "Vcur", ili);
        cur = b.build_attn(
            layer.wo,
            layer.bo,
            q,
            k,
            v,
            1.0 / (n_embd_head as f32).sqrt(),
            il,
        );

        if il == n_layer - 1 {
            cur = b.g.ctx.get_rows(cur, inp_out_ids);
            inp_sa = b.g.ctx.get_rows(inp_sa, inp_out_ids);
        }
        let ffn_inp = b.g.ctx.add(cur, inp_sa);
        b.cb(ffn_inp, "ffn_inp", ili);

        cur = b.build_norm(ffn_inp, layer.ffn_norm, None, NormType::Rms, ili);
        b.cb(cur, "ffn_norm", ili);
        cur = b.build_ffn_swiglu(
            cur,
            layer.ffn_up.expect("ffn weights are required at load"),
            None,
            layer.ffn_gate.expect("ffn weights are required at load"),
            None,
            layer.ffn_down.expect("ffn weights are required at load"),
            None,
            ili,
        );
        b.cb(cur, "ffn_out", ili);
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
    if let Some(ob) = b.wo(model.output_b) {
        cur = b.g.ctx.add(cur, ob);
    }
    b.cb(cur, "result_output", -1);
    cur
}
