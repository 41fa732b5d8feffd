//! deepseek2's tensor list (load_arch_tensors of deepseek2.cpp): the decoder layers, absorbed
//! (`attn_k_b` / `attn_v_b`) or un-split (`attn_kv_b`), dense or with experts (a fused
//! `ffn_gate_up_exps` or the gate and up stacks), then the NextN layers, skipped.

use super::tn_mla;
use crate::arch::moe;
use crate::arch::nextn::Skipped;
use crate::arch::tensors::{self, opt, req, MM};
use crate::arch::tn;
use crate::error::{LlamaError, Result};
use crate::hparams::HParams;
use crate::model::{Layer, Model};
use crate::model_tensors::TensorCreator;
use ggml::Op;

/// The sizes the tensor list is written in.
struct Dims {
    n_embd: i64,
    n_vocab: i64,
    n_head: i64,
    n_expert: i64,
    k_mla: i64,
    v_mla: i64,
    rot: i64,
    q_lora: i64,
    kv_lora: i64,
    n_ff_exp: i64,
    n_ff_shexp: i64,
}

impl Dims {
    fn of(hp: &HParams) -> Dims {
        let m = &hp.mla;
        let n_ff_exp = hp.moe.n_ff_exp as i64;
        Dims {
            n_embd: hp.n_embd as i64,
            n_vocab: hp.n_vocab as i64,
            n_head: hp.n_head(0) as i64,
            n_expert: hp.n_expert as i64,
            k_mla: m.n_embd_head_k_mla(hp) as i64,
            v_mla: m.n_embd_head_v_mla(hp) as i64,
            rot: hp.n_rot as i64,
            q_lora: m.n_lora_q as i64,
            kv_lora: m.n_lora_kv as i64,
            n_ff_exp,
            n_ff_shexp: n_ff_exp * hp.moe.n_expert_shared as i64,
        }
    }
    fn nope(&self) -> i64 {
        self.k_mla - self.rot
    }
    /// attn_kv_b of the un-split form: {kv_lora_rank, n_head * (qk_nope + v_head)}
    fn kv_b(&self) -> [i64; 2] {
        [self.kv_lora, self.n_head * (self.nope() + self.v_mla)]
    }
}

pub(super) fn create_tensors(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    let hp = model.hparams.clone();
    // llama.cpp's mtp_only: a file of the NextN layers alone (a draft model), whose trunk it
    // would leave empty
    if hp.n_layer_nextn > 0 && !c.has(&tn::blk(tn::ATTN_NORM, "weight", 0)) {
        return Err(LlamaError::Unsupported(format!(
            "{} has no {}: a file of only the NextN (MTP) layers cannot run as a model",
            "deepseek2",
            tn::blk(tn::ATTN_NORM, "weight", 0)
        )));
    }
    let skipped = crate::arch::nextn::skipped_layers(c, &hp);
    tensors::embd_and_output(model, c)?;
    let d = Dims::of(&hp);
    let (n_embd, n_head) = (d.n_embd, d.n_head);
    let w =
        |c: &mut TensorCreator, base: &str, il, dims: &[i64]| req(c, base, "weight", il, dims, MM);
    for il in 0..hp.n_layer as usize {
        let mut l = Layer {
            attn_norm: tensors::norm(c, tn::ATTN_NORM, il, n_embd)?,
            ..Layer::default()
        };
        let a = &mut l.mla;
        if d.q_lora > 0 {
            a.attn_q_a_norm = tensors::norm(c, tn_mla::ATTN_Q_A_NORM, il, d.q_lora)?;
        }
        a.attn_kv_a_norm = tensors::norm(c, tn_mla::ATTN_KV_A_NORM, il, d.kv_lora)?;
        if d.q_lora > 0 {
            a.wq_a = w(c, tn_mla::ATTN_Q_A, il, &[n_embd, d.q_lora])?;
            a.wq_b = w(c, tn_mla::ATTN_Q_B, il, &[d.q_lora, n_head * d.k_mla])?;
        } else {
            l.wq = w(c, tn::ATTN_Q, il, &[n_embd, n_head * d.k_mla])?;
        }
        let a = &mut l.mla;
        a.wkv_a_mqa = w(c, tn_mla::ATTN_KV_A_MQA, il, &[n_embd, d.kv_lora + d.rot])?;
        if hp.mla.is_mla() {
            a.wk_b = w(c, tn_mla::ATTN_K_B, il, &[d.nope(), d.kv_lora, n_head])?;
            a.wv_b = w(c, tn_mla::ATTN_V_B, il, &[d.kv_lora, d.v_mla, n_head])?;
        } else {
            a.wkv_b = w(c, tn_mla::ATTN_KV_B, il, &d.kv_b())?;
        }
        l.wo = w(c, tn::ATTN_OUT, il, &[n_head * d.v_mla, n_embd])?;
        l.ffn_norm = tensors::norm(c, tn::FFN_NORM, il, n_embd)?;
        if il < hp.moe.n_layer_dense_lead as usize {
            let n_ff = hp.n_ff(il) as i64;
            l.ffn_gate = w(c, tn::FFN_GATE, il, &[n_embd, n_ff])?;
            l.ffn_down = w(c, tn::FFN_DOWN, il, &[n_ff, n_embd])?;
            l.ffn_up = w(c, tn::FFN_UP, il, &[n_embd, n_ff])?;
        } else {
            create_moe(c, &mut l, il, &d)?;
        }
        model.layers.push(l);
    }
    for s in skipped {
        skip_layer(c, &hp, &d, s)?;
    }
    moe::expert_scales(c, &mut model.layers, d.n_expert)
}

/// A NextN layer: the trunk layer's tensors and the NextN ones, checked and skipped.
fn skip_layer(c: &mut TensorCreator, hp: &HParams, d: &Dims, s: Skipped) -> Result<()> {
    let (n_embd, n_head) = (d.n_embd, d.n_head);
    let w = |c: &mut TensorCreator, base: &str, dims: &[i64]| s.t(c, base, "weight", dims, false);
    w(c, tn::ATTN_NORM, &[n_embd])?;
    if d.q_lora > 0 {
        w(c, tn_mla::ATTN_Q_A_NORM, &[d.q_lora])?;
    }
    w(c, tn_mla::ATTN_KV_A_NORM, &[d.kv_lora])?;
    if d.q_lora > 0 {
        w(c, tn_mla::ATTN_Q_A, &[n_embd, d.q_lora])?;
        w(c, tn_mla::ATTN_Q_B, &[d.q_lora, n_head * d.k_mla])?;
    } else {
        w(c, tn::ATTN_Q, &[n_embd, n_head * d.k_mla])?;
    }
    w(c, tn_mla::ATTN_KV_A_MQA, &[n_embd, d.kv_lora + d.rot])?;
    if hp.mla.is_mla() {
        w(c, tn_mla::ATTN_K_B, &[d.nope(), d.kv_lora, n_head])?;
        w(c, tn_mla::ATTN_V_B, &[d.kv_lora, d.v_mla, n_head])?;
    } else {
        w(c, tn_mla::ATTN_KV_B, &d.kv_b())?;
    }
    w(c, tn::ATTN_OUT, &[n_head * d.v_mla, n_embd])?;
    w(c, tn::FFN_NORM, &[n_embd])?;
    if s.il < hp.moe.n_layer_dense_lead as usize {
        let n_ff = hp.n_ff(s.il) as i64;
        w(c, tn::FFN_GATE, &[n_embd, n_ff])?;
        w(c, tn::FFN_DOWN, &[n_ff, n_embd])?;
        w(c, tn::FFN_UP, &[n_embd, n_ff])?;
    } else {
        w(c, moe::tn::FFN_GATE_INP, &[n_embd, d.n_expert])?;
        s.t(c, tn_mla::FFN_EXP_PROBS_B, "bias", &[d.n_expert], true)?;
        w(c, moe::tn::FFN_DOWN_EXPS, &[d.n_ff_exp, n_embd, d.n_expert])?;
        s.gate_up_exps(c, [n_embd, d.n_ff_exp, d.n_expert])?;
        w(c, moe::tn::FFN_GATE_SHEXP, &[n_embd, d.n_ff_shexp])?;
        w(c, moe::tn::FFN_DOWN_SHEXP, &[d.n_ff_shexp, n_embd])?;
        w(c, moe::tn::FFN_UP_SHEXP, &[n_embd, d.n_ff_shexp])?;
    }
    s.nextn(c, n_embd, d.n_vocab)
}

/// The router, its selection bias, the expert stacks (one fused gate/up stack or the two) and
/// the shared experts, in llama.cpp's order.
fn create_moe(c: &mut TensorCreator, l: &mut Layer, il: usize, d: &Dims) -> Result<()> {
    let (n_embd, n_ff_exp, n_expert, n_ff_shexp) = (d.n_embd, d.n_ff_exp, d.n_expert, d.n_ff_shexp);
    let m = &mut l.moe;
    let mmid = Op::MulMatId;
    m.gate_inp = req(
        c,
        moe::tn::FFN_GATE_INP,
        "weight",
        il,
        &[n_embd, n_expert],
        MM,
    )?;
    m.exp_probs_b = opt(c, tn_mla::FFN_EXP_PROBS_B, "bias", il, &[n_expert], Op::Add)?;
    m.down_exps = req(
        c,
        moe::tn::FFN_DOWN_EXPS,
        "weight",
        il,
        &[n_ff_exp, n_embd, n_expert],
        mmid,
    )?;
    moe::gate_up_exps(c, m, il, [n_embd, n_ff_exp, n_expert])?;
    let sh = |c: &mut TensorCreator, base: &str, dims: &[i64]| req(c, base, "weight", il, dims, MM);
    m.gate_shexp = sh(c, moe::tn::FFN_GATE_SHEXP, &[n_embd, n_ff_shexp])?;
    m.down_shexp = sh(c, moe::tn::FFN_DOWN_SHEXP, &[n_ff_shexp, n_embd])?;
    m.up_shexp = sh(c, moe::tn::FFN_UP_SHEXP, &[n_embd, n_ff_shexp])?;
    Ok(())
}
