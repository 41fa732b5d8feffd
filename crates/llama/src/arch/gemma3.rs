//! The gemma3 text architecture (src/models/gemma3.cpp): embeddings scaled by sqrt(n_embd),
//! RMS-normed Q and K heads, norms after attention and after the GeGLU feed-forward, and
//! sliding-window attention on five layers of six (their rope base 10000) with a dense cache
//! for the others; the output tied to the embedding when the file has none.

use super::tensors::{self, req, MM};
use super::{tn, ArchDef, RopeType};
use crate::error::Result;
use crate::graph::{GatedAct, GraphBuilder, NormType};
use crate::hparams::{HParams, Keys, SwaType};
use crate::model::{Layer, Model};
use crate::model_tensors::{LayerKind, TensorCreator, NOT_REQUIRED};
use ggml::TensorId;

pub(super) static ARCH: ArchDef = ArchDef {
    name: "gemma3",
    rope_type: RopeType::Neox,
    load_hparams,
    type_name,
    tensors: create_tensors,
    graph: build,
};

/// Every sixth layer is dense unless the file says otherwise.
const SWA_PERIOD: u32 = 6;

fn load_hparams(k: &Keys, hp: &mut HParams) -> Result<()> {
    let n_swa = k.u32_opt("attention.sliding_window")?;
    match n_swa {
        Some(n) if n > 0 => {
            hp.n_swa = n;
            hp.swa_type = SwaType::Standard;
            hp.load_swa_pattern(k, SWA_PERIOD, false)?;
            if let Some(base) = k.f32_opt("rope.freq_base_swa")? {
                hp.rope_freq_base_train_swa = base;
            }
        }
        _ => {
            hp.n_swa = n_swa.unwrap_or(0);
            hp.swa_type = SwaType::None;
        }
    }
    hp.f_final_logit_softcapping = k.f32_opt("final_logit_softcapping")?.unwrap_or(0.0);
    hp.f_norm_rms_eps = k.f32_req("attention.layer_norm_rms_epsilon")?;
    // gemma_pytorch's query_pre_attn_scalar: n_embd / n_head for 27B, the head size otherwise
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
        18 => "270M",
        26 => "1B",
        32 => "8B",
        34 => "4B",
        48 => "12B",
        62 => "27B",
        _ => "?B",
    }
}

fn create_tensors(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    tensors::embd_and_output(model, c)?;
    let hp = model.hparams.clone();
    let n_embd = hp.n_embd as i64;
    // embeddinggemma's dense projections; text models have none, and their feature sizes are
    // 0 here, so a file that has them fails the shape check by name
    for (base, dims) in [
        (tn::DENSE_2_OUT, [n_embd, 0]),
        (tn::DENSE_3_OUT, [0, n_embd]),
    ] {
        let name = tn::global(base, "weight");
        c.create(&name, &dims, NOT_REQUIRED, LayerKind::Output, MM)?;
    }
    let head_k = hp.n_embd_head_k as i64;
    for il in 0..hp.n_layer as usize {
        let n_embd_q = head_k * hp.n_head(il) as i64;
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
        l.attn_post_norm = tensors::norm(c, tn::ATTN_POST_NORM, il, n_embd)?;
        l.attn_k_norm = tensors::norm(c, tn::ATTN_K_NORM, il, head_k)?;
        l.attn_q_norm = tensors::norm(c, tn::ATTN_Q_NORM, il, head_k)?;
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
    let iswa = hp.swa_type == SwaType::Standard;
    let tok_embd = model.tok_embd.expect("loaded models have token embeddings");

    let mut inp_l = b.build_inp_embd(tok_embd);
    inp_l = b.scale_embd(inp_l, hp.f_embedding_scale);
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
        let q = rope(b, q, inp_pos, il, iswa);
        let k = b.build_norm(k, layer.attn_k_norm, None, NormType::Rms, ili);
        b.cb(k, "Kcur_normed", ili);
        let k = rope(b, k, inp_pos, il, iswa);
        b.cb(q, "Qcur", ili);
        b.cb(k, "Kcur", ili);
        b.cb(v, "Vcur", ili);
        cur = attn_ffn_block(b, layer, [q, k, v], inp_l, inp_out_ids, il, n_layer, ili);
        inp_l = cur;
    }

    output(model, b, inp_l)
}

/// Rope with the layer's frequencies under iSWA, the context's otherwise.
fn rope(b: &mut GraphBuilder, x: TensorId, pos: TensorId, il: usize, iswa: bool) -> TensorId {
    if iswa {
        b.rope_layer(x, pos, il)
    } else {
        b.rope(x, pos, None)
    }
}

/// The rest of a Gemma 2/3 layer once q, k and v are roped: attention with the query scaled
/// beforehand, the post-attention norm and residual, the GELU FFN and its post-norm, the
/// residual and the control vector; returns the layer output (`l_out`). `ffn_post_norm_il` is
/// the layer index the post-FFN norm's name carries (gemma2's graph names it without one).
#[allow(clippy::too_many_arguments)]
pub(super) fn attn_ffn_block(
    b: &mut GraphBuilder,
    layer: &Layer,
    [q, k, v]: [TensorId; 3],
    mut inp_l: TensorId,
    inp_out_ids: TensorId,
    il: usize,
    n_layer: usize,
    ffn_post_norm_il: i32,
) -> TensorId {
    let ili = il as i32;
    let q = b.g.ctx.scale(q, b.model.hparams.f_attention_scale);
    let mut cur = b.build_attn(layer.wo, None, q, k, v, 1.0, il);
    if il == n_layer - 1 {
        cur = b.g.ctx.get_rows(cur, inp_out_ids);
        inp_l = b.g.ctx.get_rows(inp_l, inp_out_ids);
    }
    cur = b.build_norm(cur, layer.attn_post_norm, None, NormType::Rms, ili);
    b.cb(cur, "attn_post_norm", ili);
    let sa_out = b.g.ctx.add(cur, inp_l);
    b.cb(sa_out, "sa_out", ili);
    cur = b.build_norm(sa_out, layer.ffn_norm, None, NormType::Rms, ili);
    b.cb(cur, "ffn_norm", ili);
    let w = |t: Option<TensorId>| (t.expect("ffn weights are required at load"), None);
    cur = b.build_ffn_gated(
        cur,
        [w(layer.ffn_up), w(layer.ffn_gate), w(layer.ffn_down)],
        GatedAct::Gelu,
        ili,
    );
    b.cb(cur, "ffn_out", ili);
    cur = b.build_norm(cur, layer.ffn_post_norm, None, NormType::Rms, -1);
    b.cb(cur, "ffn_post_norm", ffn_post_norm_il);
    cur = b.g.ctx.add(cur, sa_out);
    cur = b.build_cvec(cur, il);
    b.cb(cur, "l_out", ili);
    cur
}

/// The final norm, the output matrix and the logit soft-cap of Gemma 2/3.
pub(super) fn output(model: &Model, b: &mut GraphBuilder, inp_l: TensorId) -> TensorId {
    let mut cur = b.build_norm(inp_l, model.output_norm, None, NormType::Rms, -1);
    b.cb(cur, "result_norm", -1);
    b.t_embd = Some(cur);
    let output = model.output.expect("loaded models have an output matrix");
    cur = b.build_lora_mm(output, cur);
    cur = b.logit_softcap(cur);
    b.cb(cur, "result_output", -1);
    cur
}
