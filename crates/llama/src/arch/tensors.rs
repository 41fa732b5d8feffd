//! Tensor-list pieces the architectures share (llama.cpp's create_tensor helpers): the token
//! embedding with the output head (tied to it when the file has no `output`), the Q/K/V/O
//! projections, and the dense feed-forward.

use super::tn;
use crate::error::{LlamaError, Result};
use crate::model::{Layer, Model};
use crate::model_tensors::{LayerKind, TensorCreator, DUPLICATED, NOT_REQUIRED};
use ggml::{Op, TensorId};

pub(crate) const MM: Op = Op::MulMat {
    prec: ggml::Prec::Default,
};

/// A per-layer weight of shape `dims`, required or `optional`.
pub(crate) fn layer_tensor(
    c: &mut TensorCreator,
    base: &str,
    suffix: &str,
    il: usize,
    dims: &[i64],
    optional: bool,
    op: Op,
) -> Result<Option<TensorId>> {
    let name = tn::blk(base, suffix, il);
    let kind = LayerKind::Repeating(il);
    if optional {
        c.create(&name, dims, NOT_REQUIRED, kind, op)
    } else {
        c.require(&name, dims, kind, op).map(Some)
    }
}

/// A required per-layer weight.
pub(crate) fn req(
    c: &mut TensorCreator,
    base: &str,
    suffix: &str,
    il: usize,
    dims: &[i64],
    op: Op,
) -> Result<Option<TensorId>> {
    layer_tensor(c, base, suffix, il, dims, false, op)
}

/// An optional per-layer weight.
pub(crate) fn opt(
    c: &mut TensorCreator,
    base: &str,
    suffix: &str,
    il: usize,
    dims: &[i64],
    op: Op,
) -> Result<Option<TensorId>> {
    layer_tensor(c, base, suffix, il, dims, true, op)
}

/// output_norm.weight ({n_embd}).
pub(crate) fn output_norm(c: &mut TensorCreator, n_embd: i64) -> Result<Option<TensorId>> {
    let name = tn::global(tn::OUTPUT_NORM, "weight");
    c.require(&name, &[n_embd], LayerKind::Output, Op::Mul)
        .map(Some)
}

/// token_embd, output_norm and output; a file without `output` ties it to the embedding.
pub(crate) fn embd_and_output(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    let n_embd = model.hparams.n_embd as i64;
    let n_vocab = model.hparams.n_vocab as i64;
    let tok = tn::global(tn::TOKEN_EMBD, "weight");
    model.tok_embd = Some(c.require(&tok, &[n_embd, n_vocab], LayerKind::Input, Op::GetRows)?);
    model.output_norm = Some(c.require(
        &tn::global(tn::OUTPUT_NORM, "weight"),
        &[n_embd],
        LayerKind::Output,
        Op::Mul,
    )?);
    model.output = c.create(
        &tn::global(tn::OUTPUT, "weight"),
        &[n_embd, n_vocab],
        NOT_REQUIRED,
        LayerKind::Output,
        MM,
    )?;
    if model.output.is_none() {
        model.output = c.create(&tok, &[n_embd, n_vocab], DUPLICATED, LayerKind::Output, MM)?;
    }
    Ok(())
}

/// create_tensor_qkv: a fused attn_qkv (with its bias, or else the separate biases), or Q, K, V
/// and their biases (`biases_required`: required or optional).
#[allow(clippy::too_many_arguments)]
pub(crate) fn qkv(
    c: &mut TensorCreator,
    l: &mut Layer,
    il: usize,
    n_embd: i64,
    n_embd_q: i64,
    n_embd_k: i64,
    n_embd_v: i64,
    biases_required: bool,
) -> Result<()> {
    qkv_flags(
        c,
        l,
        il,
        [n_embd, n_embd_q, n_embd_k, n_embd_v],
        biases_required,
        false,
    )
}

/// create_tensor_qkv with its flags: `weights_optional` makes the separate Q/K/V matrices
/// optional (TENSOR_NOT_REQUIRED, phi3).
pub(crate) fn qkv_flags(
    c: &mut TensorCreator,
    l: &mut Layer,
    il: usize,
    [n_embd, n_embd_q, n_embd_k, n_embd_v]: [i64; 4],
    biases_required: bool,
    weights_optional: bool,
) -> Result<()> {
    let n_qkv = n_embd_q + n_embd_k + n_embd_v;
    l.wqkv = opt(c, tn::ATTN_QKV, "weight", il, &[n_embd, n_qkv], MM)?;
    let b = |c: &mut TensorCreator, base, n, optional| {
        layer_tensor(c, base, "bias", il, &[n], optional, Op::Add)
    };
    if l.wqkv.is_some() {
        l.wqkv_b = b(c, tn::ATTN_QKV, n_qkv, true)?;
        if l.wqkv_b.is_none() {
            l.bq = b(c, tn::ATTN_Q, n_embd_q, true)?;
            l.bk = b(c, tn::ATTN_K, n_embd_k, true)?;
            l.bv = b(c, tn::ATTN_V, n_embd_v, true)?;
        }
        return Ok(());
    }
    let w = |c: &mut TensorCreator, base, n| {
        layer_tensor(c, base, "weight", il, &[n_embd, n], weights_optional, MM)
    };
    l.wq = w(c, tn::ATTN_Q, n_embd_q)?;
    l.wk = w(c, tn::ATTN_K, n_embd_k)?;
    l.wv = w(c, tn::ATTN_V, n_embd_v)?;
    if l.wq.is_none() || l.wk.is_none() || l.wv.is_none() {
        return Err(LlamaError::Unsupported(format!(
            "layer {il}: neither blk.{il}.attn_qkv.weight nor all of attn_q, attn_k, attn_v"
        )));
    }
    l.bq = b(c, tn::ATTN_Q, n_embd_q, !biases_required)?;
    l.bk = b(c, tn::ATTN_K, n_embd_k, !biases_required)?;
    l.bv = b(c, tn::ATTN_V, n_embd_v, !biases_required)?;
    Ok(())
}

/// The gate, down and up matrices of a gated feed-forward, in llama.cpp's order.
pub(crate) fn ffn_gate_down_up(
    c: &mut TensorCreator,
    l: &mut Layer,
    il: usize,
    n_embd: i64,
    n_ff: i64,
) -> Result<()> {
    l.ffn_gate = req(c, tn::FFN_GATE, "weight", il, &[n_embd, n_ff], MM)?;
    l.ffn_down = req(c, tn::FFN_DOWN, "weight", il, &[n_ff, n_embd], MM)?;
    l.ffn_up = req(c, tn::FFN_UP, "weight", il, &[n_embd, n_ff], MM)?;
    Ok(())
}

/// A norm weight of one layer ({n}).
pub(crate) fn norm(
    c: &mut TensorCreator,
    base: &str,
    il: usize,
    n: i64,
) -> Result<Option<TensorId>> {
    req(c, base, "weight", il, &[n], Op::Mul)
}

/// How an architecture's output head relates to the token embedding.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutputHead {
    /// `output` when the file has it, else the embedding
    TiedIfMissing,
    /// `output` required
    Own,
    /// always the embedding (TENSOR_DUPLICATED)
    Tied,
}

/// token_embd.weight ({n_embd, n_vocab}).
pub(crate) fn token_embd(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    let (n_embd, n_vocab) = (model.hparams.n_embd as i64, model.hparams.n_vocab as i64);
    let tok = tn::global(tn::TOKEN_EMBD, "weight");
    model.tok_embd = Some(c.require(&tok, &[n_embd, n_vocab], LayerKind::Input, Op::GetRows)?);
    Ok(())
}

/// output_norm.bias ({n_embd}), required (the LayerNorm architectures).
pub(crate) fn output_norm_b(c: &mut TensorCreator, n_embd: i64) -> Result<Option<TensorId>> {
    let name = tn::global(tn::OUTPUT_NORM, "bias");
    c.require(&name, &[n_embd], LayerKind::Output, Op::Add)
        .map(Some)
}

/// The output matrix as `head` says.
pub(crate) fn output_head(
    model: &mut Model,
    c: &mut TensorCreator,
    head: OutputHead,
) -> Result<()> {
    let (n_embd, n_vocab) = (model.hparams.n_embd as i64, model.hparams.n_vocab as i64);
    let out = tn::global(tn::OUTPUT, "weight");
    let tok = tn::global(tn::TOKEN_EMBD, "weight");
    model.output = match head {
        OutputHead::Own => Some(c.require(&out, &[n_embd, n_vocab], LayerKind::Output, MM)?),
        OutputHead::TiedIfMissing => c.create(
            &out,
            &[n_embd, n_vocab],
            NOT_REQUIRED,
            LayerKind::Output,
            MM,
        )?,
        OutputHead::Tied => None,
    };
    if model.output.is_none() {
        model.output = c.create(&tok, &[n_embd, n_vocab], DUPLICATED, LayerKind::Output, MM)?;
    }
    Ok(())
}

/// A global rope factor tensor ({n_rot/2}) of layer `il`: optional, and a duplicate of layer
/// 0's after it.
pub(crate) fn rope_factor(
    c: &mut TensorCreator,
    base: &str,
    il: usize,
    n_rot: u32,
) -> Result<Option<TensorId>> {
    let flags = NOT_REQUIRED | if il != 0 { DUPLICATED } else { 0 };
    c.create(
        &tn::global(base, "weight"),
        &[n_rot as i64 / 2],
        flags,
        LayerKind::Repeating(il),
        Op::Rope(ggml::RopeParams::default()),
    )
}

/// The rope factors of granite and mistral3: longrope's long and short factors under longrope
/// scaling, rope_freqs otherwise.
pub(crate) fn rope_factors_by_scaling(
    c: &mut TensorCreator,
    l: &mut Layer,
    il: usize,
    hp: &crate::hparams::HParams,
) -> Result<()> {
    if hp.rope_scaling_type_train == crate::hparams::RopeScaling::LongRope {
        l.rope_long = rope_factor(c, tn::ROPE_FACTORS_LONG, il, hp.n_rot)?;
        l.rope_short = rope_factor(c, tn::ROPE_FACTORS_SHORT, il, hp.n_rot)?;
    } else {
        l.rope_freqs = rope_factor(c, tn::ROPE_FREQS, il, hp.n_rot)?;
    }
    Ok(())
}

/// The refusal of an expert count for an architecture whose MoE variant has no graph here.
pub(crate) fn dense_only(hp: &crate::hparams::HParams, arch: &str) -> Result<()> {
    if hp.n_expert > 0 {
        return Err(LlamaError::Unsupported(format!(
            "{arch} with experts ({arch}.expert_count = {}) is not supported",
            hp.n_expert
        )));
    }
    Ok(())
}
