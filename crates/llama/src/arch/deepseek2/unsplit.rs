//! The older un-split form of deepseek2 files (one `attn_kv_b` per layer, no
//! `key_length_mla` / `value_length_mla`): deepseek2.cpp's non-MLA branch.

use crate::error::{LlamaError, Result};
use crate::graph::GraphBuilder;
use crate::hparams::{HParams, Keys};
use crate::model::Layer;
use ggml::TensorId;

/// The older un-split form: full heads of key_length (unrotated part, then the rotated one)
/// and value_length, one KV head per query head.
pub(super) fn check_unsplit_shapes(k: &Keys, hp: &HParams) -> Result<()> {
    let (head_k, rot) = (hp.n_embd_head_k, hp.n_rot);
    if head_k <= rot {
        return Err(LlamaError::BadHparams(format!(
            "{} = {head_k} must exceed rope.dimension_count = {rot} (the unrotated part is empty)",
            k.full("attention.key_length")
        )));
    }
    if hp.mla.n_lora_kv == 0 {
        return Err(LlamaError::BadHparams(format!(
            "{} must be positive",
            k.full("attention.kv_lora_rank")
        )));
    }
    for il in 0..hp.n_layer as usize {
        if hp.n_head_kv(il) != hp.n_head(il) || hp.n_head(il) != hp.n_head(0) {
            return Err(LlamaError::BadHparams(format!(
                "{}: the un-split attn_kv_b form decompresses one key and value per head (n_head_kv = n_head = {} in every layer)",
                k.full("attention.head_count_kv"),
                hp.n_head(0)
            )));
        }
    }
    Ok(())
}

/// The sizes the un-split attention views by.
pub(super) struct Unsplit {
    pub nope: i64,
    pub n_head: i64,
    pub n_tokens: i64,
}

/// deepseek2.cpp's non-MLA branch, for the older files with one `attn_kv_b`: the latent is
/// decompressed into each head's key part and value, the shared rotated key part repeated
/// for every head, and Q roped over its tail only (ggml_rope_set_offset); attention is then
/// plain multi-head over a K/V cache of full heads.
#[allow(clippy::too_many_arguments)]
pub(super) fn build_unsplit(
    b: &mut GraphBuilder,
    layer: &Layer,
    q: TensorId,
    k_pe: TensorId,
    kv_cmpr: TensorId,
    inp_pos: TensorId,
    attn_scale: Option<TensorId>,
    kq_scale: f32,
    il: usize,
    Unsplit {
        nope,
        n_head,
        n_tokens,
    }: Unsplit,
) -> TensorId {
    let hp = &b.model.hparams;
    let ili = il as i32;
    let (rot, v_head) = (hp.n_rot as i64, hp.mla.n_embd_head_v_mla(hp) as i64);
    let wkv_b = b.w(layer.mla.wkv_b.expect("required at load"));
    let kv = b.g.ctx.mul_mat(wkv_b, kv_cmpr);
    b.cb(kv, "kv", ili);
    let ty = b.g.ctx[kv].ty;
    let row = ty.row_size(nope + v_head);
    let k_nope =
        b.g.ctx
            .view_3d(kv, nope, n_head, n_tokens, row, row * n_head as usize, 0);
    b.cb(k_nope, "k_nope_view", ili);
    let off = ty.row_size(nope);
    let mut v_cur = b.g.ctx.view_3d(
        kv,
        v_head,
        n_head,
        n_tokens,
        row,
        row * n_head as usize,
        off,
    );
    b.cb(v_cur, "Vcur_view", ili);
    v_cur = b.g.ctx.cont(v_cur);
    b.cb(v_cur, "Vcur_cont", ili);
    let mut q_cur = b.rope(q, inp_pos, None);
    q_cur = b.g.ctx.rope_set_offset(q_cur, nope as i32);
    b.cb(q_cur, "Qcur", ili);
    let k_pe_all = b.g.ctx.repeat_4d(k_pe, [rot, n_head, n_tokens, 1]);
    let k_cur = b.g.ctx.concat(k_nope, k_pe_all, 0);
    b.cb(k_cur, "Kcur", ili);
    if let Some(s) = attn_scale {
        q_cur = b.g.ctx.mul(q_cur, s);
        b.cb(q_cur, "Qcur_attn_temp_scaled", ili);
    }
    b.build_attn(layer.wo, None, q_cur, k_cur, v_cur, kq_scale, il)
}
