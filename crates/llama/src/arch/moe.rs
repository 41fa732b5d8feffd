//! What the mixture-of-experts architectures share at load time: the per-layer router, expert
//! and shared-expert weights (llama_layer's ffn_*_exps / ffn_*_shexp), the MoE keys each
//! architecture reads (expert_feed_forward_length, ...), the checks llama.cpp makes of the
//! expert counts, and the tensor-list pieces (the router and the three expert stacks).

use super::tensors::{layer_tensor, opt, req, MM};
use crate::error::{LlamaError, Result};
use crate::hparams::{HParams, Keys};
use crate::model_tensors::TensorCreator;
use ggml::{Op, TensorId};

/// llama.cpp's LLAMA_MAX_EXPERTS.
pub(crate) const MAX_EXPERTS: u32 = 512;

/// GGUF tensor names of the MoE weights (LLM_TENSOR_NAMES).
pub(crate) mod tn {
    pub const FFN_GATE_INP: &str = "ffn_gate_inp";
    pub const FFN_GATE_EXPS: &str = "ffn_gate_exps";
    pub const FFN_DOWN_EXPS: &str = "ffn_down_exps";
    pub const FFN_UP_EXPS: &str = "ffn_up_exps";
    /// gate and up stacks in one {n_embd, 2 n_ff_exp, n_expert} (gate rows first)
    pub const FFN_GATE_UP_EXPS: &str = "ffn_gate_up_exps";
    pub const FFN_GATE_INP_SHEXP: &str = "ffn_gate_inp_shexp";
    pub const FFN_GATE_SHEXP: &str = "ffn_gate_shexp";
    pub const FFN_DOWN_SHEXP: &str = "ffn_down_shexp";
    pub const FFN_UP_SHEXP: &str = "ffn_up_shexp";
}

/// The MoE weights of one layer; all None in a dense layer.
#[derive(Clone, Debug, Default)]
pub struct MoeLayer {
    /// the router {n_embd, n_expert}
    pub gate_inp: Option<TensorId>,
    pub gate_inp_b: Option<TensorId>,
    /// expert stacks {n_embd, n_ff_exp, n_expert} (down: {n_ff_exp, n_embd, n_expert})
    pub gate_exps: Option<TensorId>,
    pub down_exps: Option<TensorId>,
    pub up_exps: Option<TensorId>,
    /// the fused gate/up stack, in place of gate_exps and up_exps (create_tensor_gate_up_exps)
    pub gate_up_exps: Option<TensorId>,
    /// per-expert scales of the stacks ({n_expert}; llama.cpp's `.scale` tensors, NVFP4 scale2)
    pub gate_exps_s: Option<TensorId>,
    pub down_exps_s: Option<TensorId>,
    pub up_exps_s: Option<TensorId>,
    /// expert-selection bias (DeepSeek V3's e_score_correction)
    pub exp_probs_b: Option<TensorId>,
    /// the shared expert and its scalar gate (qwen2moe)
    pub gate_inp_shexp: Option<TensorId>,
    pub gate_shexp: Option<TensorId>,
    pub down_shexp: Option<TensorId>,
    pub up_shexp: Option<TensorId>,
}

/// How router logits become expert probabilities (llama_expert_gating_func_type): softmax
/// for most, sigmoid for DeepSeek V3 (deepseek2's `expert_gating_func` = 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(dead_code)]
pub enum Gating {
    Softmax,
    Sigmoid,
    /// softmax over the weights of the selected experts, not over all logits
    SoftmaxWeight,
}

/// The MoE keys of llama_hparams that are not read for every architecture.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MoeHParams {
    /// expert_feed_forward_length (0: n_ff / n_expert_used)
    pub n_ff_exp: u32,
    /// expert_shared_feed_forward_length (0: n_ff)
    pub n_ff_shexp: u32,
    /// expert_weights_scale (0: none)
    pub expert_weights_scale: f32,
    /// deepseek: expert_shared_count, leading_dense_block_count
    pub n_expert_shared: u32,
    pub n_layer_dense_lead: u32,
    /// deepseek2: expert_weights_norm (false)
    pub expert_weights_norm: bool,
    /// deepseek2: expert_gating_func (llama_expert_gating_func_type; 0: none given)
    pub expert_gating_func: u32,
}

impl Gating {
    /// llama_expert_gating_func_type's values; 4 (sqrt-softplus) and others are not here.
    pub(crate) fn from_id(id: u32) -> Option<Gating> {
        match id {
            1 => Some(Gating::Softmax),
            2 => Some(Gating::Sigmoid),
            3 => Some(Gating::SoftmaxWeight),
            _ => None,
        }
    }

    /// llama_expert_gating_func_name
    pub(crate) fn name_of(id: u32) -> &'static str {
        match id {
            1 => "softmax",
            2 => "sigmoid",
            4 => "sqrtsoftplus",
            _ => "unknown",
        }
    }
}

impl MoeHParams {
    /// expert_feed_forward_length: one number (or a per-layer array of equal values; llama.cpp
    /// sizes every layer's experts by its first entry).
    pub(crate) fn read_n_ff_exp(&mut self, k: &Keys, n_layer: usize) -> Result<()> {
        if let Some(v) = k.per_layer("expert_feed_forward_length", n_layer, false)? {
            self.n_ff_exp = v.first().copied().unwrap_or(0);
        }
        Ok(())
    }

    pub(crate) fn read_n_ff_shexp(&mut self, k: &Keys) -> Result<()> {
        if let Some(v) = k.u32_opt("expert_shared_feed_forward_length")? {
            self.n_ff_shexp = v;
        }
        Ok(())
    }
}

/// llama_model_base::load_hparams' asserts on the expert counts of a model with experts, as
/// one line naming the key (llama.cpp aborts).
pub(crate) fn check_counts(arch: &str, hp: &HParams) -> Result<()> {
    let bad = |key: &str, why: String| Err(LlamaError::BadHparams(format!("{arch}.{key} = {why}")));
    let (n, used) = (hp.n_expert, hp.n_expert_used);
    if n > MAX_EXPERTS {
        return bad("expert_count", format!("{n} exceeds {MAX_EXPERTS}"));
    }
    if used == 0 {
        return bad(
            "expert_used_count",
            format!("0 (or missing) but the model has {n} experts: none would be used"),
        );
    }
    if hp.n_expert_groups >= n {
        return bad(
            "expert_group_count",
            format!("{} must be below expert_count = {n}", hp.n_expert_groups),
        );
    }
    if hp.n_expert_groups > 1 {
        let (g, g_used) = (hp.n_expert_groups, hp.n_group_used);
        if n % g != 0 {
            return bad(
                "expert_group_count",
                format!("{g} does not divide expert_count = {n}"),
            );
        }
        if g_used == 0 || g_used >= g {
            return bad(
                "expert_group_used_count",
                format!("{g_used} must be at least 1 and below expert_group_count = {g}"),
            );
        }
        // each group is scored by its two best experts
        if n / g < 2 {
            return bad(
                "expert_group_count",
                format!("{g} leaves fewer than 2 of the {n} experts in each group"),
            );
        }
    }
    Ok(())
}

/// The checks of a MoE-only architecture's load_arch_tensors (`n_expert must be > 0 for
/// QWEN3MOE`), made before any tensor so that the line names the key.
pub(crate) fn require_experts(k: &Keys, hp: &HParams, arch: &str) -> Result<()> {
    if hp.n_expert == 0 {
        return Err(LlamaError::BadHparams(format!(
            "{} = 0 (or missing): {arch} needs experts",
            k.full("expert_count")
        )));
    }
    check_counts(arch, hp)
}

/// The experts' feed-forward size: expert_feed_forward_length, else n_ff / n_expert_used.
pub(crate) fn n_ff_exp(hp: &HParams, il: usize) -> i64 {
    match hp.moe.n_ff_exp {
        0 => (hp.n_ff(il) / hp.n_expert_used.max(1)) as i64,
        n => n as i64,
    }
}

/// The router and the three expert stacks, in llama.cpp's order (gate_inp, gate, down, up);
/// `gate_required` false makes the gate stack optional (llama: experts without a gate).
pub(crate) fn router_and_experts(
    c: &mut TensorCreator,
    l: &mut MoeLayer,
    il: usize,
    n_embd: i64,
    n_ff_exp: i64,
    n_expert: i64,
    gate_required: bool,
) -> Result<()> {
    let mmid = Op::MulMatId;
    l.gate_inp = req(c, tn::FFN_GATE_INP, "weight", il, &[n_embd, n_expert], MM)?;
    let gate = [n_embd, n_ff_exp, n_expert];
    l.gate_exps = layer_tensor(
        c,
        tn::FFN_GATE_EXPS,
        "weight",
        il,
        &gate,
        !gate_required,
        mmid,
    )?;
    l.down_exps = req(
        c,
        tn::FFN_DOWN_EXPS,
        "weight",
        il,
        &[n_ff_exp, n_embd, n_expert],
        mmid,
    )?;
    l.up_exps = req(c, tn::FFN_UP_EXPS, "weight", il, &gate, mmid)?;
    Ok(())
}

/// The shared expert of qwen2moe: its scalar gate and a gated feed-forward of `n_ff_shexp`.
pub(crate) fn shared_expert(
    c: &mut TensorCreator,
    l: &mut MoeLayer,
    il: usize,
    n_embd: i64,
    n_ff_shexp: i64,
) -> Result<()> {
    l.gate_inp_shexp = req(c, tn::FFN_GATE_INP_SHEXP, "weight", il, &[n_embd], MM)?;
    l.gate_shexp = req(
        c,
        tn::FFN_GATE_SHEXP,
        "weight",
        il,
        &[n_embd, n_ff_shexp],
        MM,
    )?;
    l.down_shexp = req(
        c,
        tn::FFN_DOWN_SHEXP,
        "weight",
        il,
        &[n_ff_shexp, n_embd],
        MM,
    )?;
    l.up_shexp = req(c, tn::FFN_UP_SHEXP, "weight", il, &[n_embd, n_ff_shexp], MM)?;
    Ok(())
}

/// llama.cpp's generic pass after load_arch_tensors: each expert stack's optional per-expert
/// `.scale` ({n_expert}, NVFP4 scale2), which build_moe_ffn multiplies into the stack's
/// products.
/// create_tensor_gate_up_exps: the fused `ffn_gate_up_exps` stack when the file has it, else
/// the gate and up stacks (required).
pub(crate) fn gate_up_exps(
    c: &mut TensorCreator,
    m: &mut MoeLayer,
    il: usize,
    [n_embd, n_ff, n_expert]: [i64; 3],
) -> Result<()> {
    let mmid = Op::MulMatId;
    let fused = [n_embd, n_ff * 2, n_expert];
    m.gate_up_exps = opt(c, tn::FFN_GATE_UP_EXPS, "weight", il, &fused, mmid)?;
    if m.gate_up_exps.is_none() {
        let stack = [n_embd, n_ff, n_expert];
        m.gate_exps = req(c, tn::FFN_GATE_EXPS, "weight", il, &stack, mmid)?;
        m.up_exps = req(c, tn::FFN_UP_EXPS, "weight", il, &stack, mmid)?;
    }
    Ok(())
}

pub(crate) fn expert_scales(
    c: &mut TensorCreator,
    layers: &mut [crate::model::Layer],
    n_expert: i64,
) -> Result<()> {
    for (il, l) in layers.iter_mut().enumerate() {
        let m = &mut l.moe;
        let scale = |c: &mut TensorCreator, base: &str, stack: Option<TensorId>| {
            if stack.is_none() {
                return Ok(None);
            }
            opt(c, base, "scale", il, &[n_expert], Op::Mul)
        };
        m.gate_exps_s = scale(c, tn::FFN_GATE_EXPS, m.gate_exps)?;
        m.down_exps_s = scale(c, tn::FFN_DOWN_EXPS, m.down_exps)?;
        m.up_exps_s = scale(c, tn::FFN_UP_EXPS, m.up_exps)?;
    }
    Ok(())
}

/// print_info's per-architecture MoE lines, after general.name.
pub(crate) fn print_info(arch: &str, hp: &HParams) {
    let p = |k: &str, v: u32| ggml::log_info!("print_info: {:<22}= {}\n", k, v);
    match arch {
        "qwen2moe" => {
            p("n_ff_exp", hp.moe.n_ff_exp);
            p("n_ff_shexp", hp.moe.n_ff_shexp);
        }
        "qwen3moe" => p("n_ff_exp", hp.moe.n_ff_exp),
        "deepseek" => {
            p("n_layer_dense_lead", hp.moe.n_layer_dense_lead);
            p("n_ff_exp", hp.moe.n_ff_exp);
            p("n_expert_shared", hp.moe.n_expert_shared);
            let scale = format!("{:.1}", hp.moe.expert_weights_scale);
            ggml::log_info!("print_info: {:<22}= {}\n", "expert_weights_scale", scale);
        }
        "deepseek2" => {
            let m = &hp.mla;
            p("n_layer_dense_lead", hp.moe.n_layer_dense_lead);
            p("n_lora_q", m.n_lora_q);
            p("n_lora_kv", m.n_lora_kv);
            p("n_embd_head_k_mla", m.n_embd_head_k_mla(hp));
            p("n_embd_head_v_mla", m.n_embd_head_v_mla(hp));
            p("n_ff_exp", hp.moe.n_ff_exp);
            p("n_expert_shared", hp.moe.n_expert_shared);
            let scale = format!("{:.1}", hp.moe.expert_weights_scale);
            ggml::log_info!("print_info: {:<22}= {}\n", "expert_weights_scale", scale);
            p("expert_weights_norm", hp.moe.expert_weights_norm as u32);
            let gating = Gating::name_of(hp.moe.expert_gating_func);
            ggml::log_info!("print_info: {:<22}= {}\n", "expert_gating_func", gating);
        }
        _ => {}
    }
}
