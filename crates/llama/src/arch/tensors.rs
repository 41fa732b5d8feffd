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

/// create_tensor_qkv with separate matrices: a fused attn_qkv is refused (no graph splits it
/// here), then Q, K, V and their biases (`biases`: required or optional).
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
    let wqkv = opt(
        c,
        tn::ATTN_QKV,
        "weight",
        il,
        &[n_embd, n_embd_q + n_embd_k + n_embd_v],
        MM,
    )?;
    if wqkv.is_some() {
        return Err(LlamaError::Unsupported(format!(
            "tensor blk.{il}.attn_qkv.weight: fused Q/K/V weights are not supported"
        )));
    }
    l.wq = req(c, tn::ATTN_Q, "weight", il, &[n_embd, n_embd_q], MM)?;
    l.wk = req(c, tn::ATTN_K, "weight", il, &[n_embd, n_embd_k], MM)?;
    l.wv = req(c, tn::ATTN_V, "weight", il, &[n_embd, n_embd_v], MM)?;
    let b = |c: &mut TensorCreator, base, n| {
        layer_tensor(c, base, "bias", il, &[n], !biases_required, Op::Add)
    };
    l.bq = b(c, tn::ATTN_Q, n_embd_q)?;
    l.bk = b(c, tn::ATTN_K, n_embd_k)?;
    l.bv = b(c, tn::ATTN_V, n_embd_v)?;
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
