//! The deepseek2 architecture (DeepSeek-V2, V2-Lite, V3; src/models/deepseek2.cpp): multi-head
//! latent attention (MLA) in its absorbed form, where the cache holds one compressed latent
//! plus the rotated part per token (MQA of one KV head) and `attn_k_b` / `attn_v_b` decompress
//! queries and outputs per head; Q straight from `attn_q` (V2-Lite) or through the low-rank
//! `attn_q_a` / `attn_q_a_norm` / `attn_q_b` (the full models). The feed-forward is
//! deepseek's: dense leading layers, then experts (softmax or sigmoid router, optional
//! selection bias `exp_probs_b`, optional weight normalisation and scale) plus shared experts.
//! Files in the older un-split form (`attn_kv_b`) run deepseek2.cpp's non-MLA branch
//! (`deepseek2/unsplit.rs`); the tensor list (`deepseek2/tensors.rs`) takes fused gate/up expert
//! stacks and skips NextN layers.

mod tensors;
mod unsplit;

use super::moe::{self, Gating};
use super::{ArchDef, RopeType};
use crate::error::{LlamaError, Result};
use crate::graph::{GatedAct, GraphBuilder, MoeParams, NormType};
use crate::hparams::{HParams, Keys};
use crate::model::{Layer, Model};
use ggml::TensorId;

pub(super) static ARCH: ArchDef = ArchDef {
    name: "deepseek2",
    rope_type: RopeType::Norm,
    load_hparams,
    type_name,
    tensors: tensors::create_tensors,
    graph: build,
};

/// GGUF tensor names of MLA (LLM_TENSOR_NAMES).
pub(crate) mod tn_mla {
    pub const ATTN_Q_A_NORM: &str = "attn_q_a_norm";
    pub const ATTN_KV_A_NORM: &str = "attn_kv_a_norm";
    pub const ATTN_Q_A: &str = "attn_q_a";
    pub const ATTN_Q_B: &str = "attn_q_b";
    pub const ATTN_KV_A_MQA: &str = "attn_kv_a_mqa";
    pub const ATTN_KV_B: &str = "attn_kv_b";
    pub const ATTN_K_B: &str = "attn_k_b";
    pub const ATTN_V_B: &str = "attn_v_b";
    pub const FFN_EXP_PROBS_B: &str = "exp_probs_b";
}

/// The MLA keys of llama_hparams.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MlaHParams {
    /// attention.q_lora_rank (0: Q from attn_q)
    pub n_lora_q: u32,
    /// attention.kv_lora_rank (0: not an MLA model)
    pub n_lora_kv: u32,
    /// attention.key_length_mla / value_length_mla: the decompressed head sizes (0: none)
    pub n_embd_head_k_mla_impl: u32,
    pub n_embd_head_v_mla_impl: u32,
}

impl MlaHParams {
    /// llama_hparams::is_mla: the file stores the absorbed (split k_b / v_b) form.
    pub fn is_mla(&self) -> bool {
        self.n_embd_head_k_mla_impl != 0 && self.n_embd_head_v_mla_impl != 0
    }
    pub fn n_embd_head_k_mla(&self, hp: &HParams) -> u32 {
        if self.is_mla() {
            self.n_embd_head_k_mla_impl
        } else {
            hp.n_embd_head_k
        }
    }
    pub fn n_embd_head_v_mla(&self, hp: &HParams) -> u32 {
        if self.is_mla() {
            self.n_embd_head_v_mla_impl
        } else {
            hp.n_embd_head_v
        }
    }
}

/// The MLA weights of one layer.
#[derive(Clone, Debug, Default)]
pub struct MlaLayer {
    pub wq_a: Option<TensorId>,
    pub wq_b: Option<TensorId>,
    pub attn_q_a_norm: Option<TensorId>,
    pub attn_kv_a_norm: Option<TensorId>,
    /// {n_embd, kv_lora_rank + n_rot}: the latent and the shared rotated key part
    pub wkv_a_mqa: Option<TensorId>,
    /// {qk_nope, kv_lora_rank, n_head}: absorbs the key decompression into Q
    pub wk_b: Option<TensorId>,
    /// {kv_lora_rank, v_head, n_head}: decompresses the attention output
    pub wv_b: Option<TensorId>,
    /// the older un-split form, {kv_lora_rank, n_head * (qk_nope + v_head)}: decompresses the
    /// latent into each head's key part and value
    pub wkv_b: Option<TensorId>,
}

fn load_hparams(k: &Keys, hp: &mut HParams) -> Result<()> {
    let n_layer = hp.n_layer;
    // lite variants (DeepSeek-V2-Lite, GigaChat3-10B-A1.8B, Kanana-2-30B-A3B) have no q_lora_rank
    let is_lite = n_layer == 27 || n_layer == 26 || (n_layer == 48 && hp.n_vocab == 128256);
    hp.f_norm_rms_eps = k.f32_req("attention.layer_norm_rms_epsilon")?;
    hp.moe.n_layer_dense_lead = k.u32_opt("leading_dense_block_count")?.unwrap_or(0);
    let m = &mut hp.mla;
    if !is_lite {
        m.n_lora_q = k.u32_req("attention.q_lora_rank")?;
    }
    m.n_lora_kv = k.u32_req("attention.kv_lora_rank")?;
    m.n_embd_head_k_mla_impl = k.u32_opt("attention.key_length_mla")?.unwrap_or(0);
    m.n_embd_head_v_mla_impl = k.u32_opt("attention.value_length_mla")?.unwrap_or(0);
    let ff_exp = k
        .per_layer(
            "expert_feed_forward_length",
            hp.n_layer_all() as usize,
            true,
        )?
        .unwrap_or_default();
    hp.moe.n_ff_exp = ff_exp.first().copied().unwrap_or(0);
    hp.moe.n_expert_shared = k.u32_req("expert_shared_count")?;
    if let Some(s) = k.f32_opt("expert_weights_scale")? {
        hp.moe.expert_weights_scale = s;
    }
    hp.moe.expert_weights_norm = k.bool_opt("expert_weights_norm")?.unwrap_or(false);
    hp.moe.expert_gating_func = k.u32_opt("expert_gating_func")?.unwrap_or(0);
    if hp.moe.expert_gating_func == 0 {
        // DeepSeek V2 / V2.5 files have no gating key (GLM 4.7 Lite's shape: sigmoid)
        let glm_lite = (n_layer == 47 || n_layer == 48) && hp.n_vocab == 154880;
        hp.moe.expert_gating_func = if glm_lite { 2 } else { 1 };
    }
    if Gating::from_id(hp.moe.expert_gating_func).is_none() {
        return Err(LlamaError::Unsupported(format!(
            "{} = {} ({}): only softmax (1), sigmoid (2) and softmax over the chosen weights (3) are supported",
            k.full("expert_gating_func"),
            hp.moe.expert_gating_func,
            Gating::name_of(hp.moe.expert_gating_func)
        )));
    }
    // the convert script stores 0.1 * mscale_all_dim; llama.cpp cancels that factor here
    if let Some(m) = k.f32_opt("rope.scaling.yarn_log_multiplier")? {
        hp.rope_yarn_log_mul = m / 0.1;
    }
    // temperature tuning (Mistral Large 3)
    hp.f_attn_temp_scale = k.f32_opt("attention.temperature_scale")?.unwrap_or(0.0);
    if let Some(n) = k.u32_opt("attention.temperature_length")? {
        hp.n_attn_temp_floor_scale = n;
    }
    hp.f_attn_temp_offset = 0.0;
    if hp.f_attn_temp_scale != 0.0 && hp.n_attn_temp_floor_scale == 0 {
        return Err(LlamaError::BadHparams(format!(
            "{} is needed (> 0) with attention.temperature_scale",
            k.full("attention.temperature_length")
        )));
    }
    check_shapes(k, hp)?;
    if hp.moe.n_layer_dense_lead < hp.n_layer {
        moe::require_experts(k, hp, "deepseek2")?;
        if hp.moe.n_ff_exp == 0 {
            return Err(LlamaError::BadHparams(format!(
                "{} = 0: the experts need a size",
                k.full("expert_feed_forward_length")
            )));
        }
    }
    Ok(())
}

/// The head sizes the absorbed graph relies on, as one line naming the key (llama.cpp asserts
/// or builds a graph of mismatched shapes).
fn check_shapes(k: &Keys, hp: &HParams) -> Result<()> {
    let m = &hp.mla;
    if (m.n_embd_head_k_mla_impl == 0) != (m.n_embd_head_v_mla_impl == 0) {
        return Err(LlamaError::BadHparams(format!(
            "{} and {} must be given together",
            k.full("attention.key_length_mla"),
            k.full("attention.value_length_mla")
        )));
    }
    if !m.is_mla() {
        return unsplit::check_unsplit_shapes(k, hp);
    }
    let (k_mla, rot, lora) = (m.n_embd_head_k_mla_impl, hp.n_rot, m.n_lora_kv);
    if k_mla <= rot {
        return Err(LlamaError::BadHparams(format!(
            "{} = {k_mla} must exceed rope.dimension_count = {rot} (the unrotated part is empty)",
            k.full("attention.key_length_mla")
        )));
    }
    if lora == 0 || hp.n_embd_head_k != lora + rot || hp.n_embd_head_v != lora {
        return Err(LlamaError::BadHparams(format!(
            "{} = {} and {} = {} must be kv_lora_rank + rope.dimension_count = {} and kv_lora_rank = {lora}",
            k.full("attention.key_length"),
            hp.n_embd_head_k,
            k.full("attention.value_length"),
            hp.n_embd_head_v,
            lora + rot
        )));
    }
    for il in 0..hp.n_layer as usize {
        if hp.n_head_kv(il) != 1 || hp.n_head(il) != hp.n_head(0) {
            return Err(LlamaError::BadHparams(format!(
                "{}: MLA caches one latent per token (1 KV head) and every layer has n_head = {}",
                k.full("attention.head_count_kv"),
                hp.n_head(0)
            )));
        }
    }
    Ok(())
}

fn type_name(hp: &HParams) -> &'static str {
    match hp.n_layer {
        27 => "16B",
        47 => "30B.A3B",
        60 => "236B",
        61 => "671B",
        _ => "?B",
    }
}

/// deepseek2.cpp's kq_scale: the context's attention factor has YaRN's adjustment cancelled,
/// then the square of DeepSeek's mscale (with `rope.scaling.yarn_log_multiplier`) scales the
/// scores, over the decompressed head size.
fn kq_scale(hp: &HParams, attn_factor: f32, freq_scale: f32) -> f32 {
    let attn_factor_org = attn_factor * (1.0 + 0.1 * (1.0 / freq_scale).ln());
    let mscale = attn_factor_org * (1.0 + 0.1 * hp.rope_yarn_log_mul * (1.0 / freq_scale).ln());
    1.0 * mscale * mscale / (hp.mla.n_embd_head_k_mla(hp) as f32).sqrt()
}

fn build(model: &Model, b: &mut GraphBuilder) -> TensorId {
    let hp = &model.hparams;
    let tok_embd = model.tok_embd.expect("loaded models have token embeddings");
    let gating = Gating::from_id(hp.moe.expert_gating_func).expect("checked at load");
    let moe_p = MoeParams {
        act: GatedAct::Silu,
        norm_w: hp.moe.expert_weights_norm,
        w_scale: hp.moe.expert_weights_scale,
        gating,
    };
    let kq_scale = kq_scale(hp, b.p.rope.attn_factor, b.p.rope.freq_scale);

    let inp_l = b.build_inp_embd(tok_embd);
    let attn_scale = (hp.f_attn_temp_scale != 0.0).then(|| b.build_inp_attn_scale());
    let inp_pos = b.build_inp_pos();
    if hp.mla.is_mla() {
        b.build_attn_inp_k();
    } else {
        b.build_attn_inp_kv();
    }
    let inp_out_ids = b.build_inp_out_ids();

    let attn = |b: &mut GraphBuilder, layer: &Layer, cur: TensorId, il: usize| {
        build_mla(b, layer, cur, inp_pos, attn_scale, kq_scale, il)
    };
    let ffn = |b: &mut GraphBuilder, layer: &Layer, cur: TensorId, il: usize| {
        super::deepseek::build_ffn(b, layer, cur, moe_p, il)
    };
    let cur = b.build_prenorm_layers(inp_l, inp_out_ids, attn, ffn);

    let mut cur = b.build_norm(cur, model.output_norm, None, NormType::Rms, -1);
    b.cb(cur, "h_nextn", -1);
    b.cb(cur, "result_norm", -1);
    b.t_embd = Some(cur);
    // a plain product, as deepseek2.cpp's lm_head
    let output = b.w(model.output.expect("loaded models have an output matrix"));
    cur = b.g.ctx.mul_mat(output, cur);
    b.cb(cur, "result_output", -1);
    cur
}

/// The absorbed latent attention of one layer over its normed input `cur`.
fn build_mla(
    b: &mut GraphBuilder,
    layer: &Layer,
    cur: TensorId,
    inp_pos: TensorId,
    attn_scale: Option<TensorId>,
    kq_scale: f32,
    il: usize,
) -> TensorId {
    let hp = &b.model.hparams;
    let n_tokens = b.p.n_tokens as i64;
    let n_head = hp.n_head(0) as i64;
    let k_mla = hp.mla.n_embd_head_k_mla(hp) as i64;
    let rot = hp.n_rot as i64;
    let nope = k_mla - rot;
    let kv_lora = hp.mla.n_lora_kv as i64;
    let need = |t: Option<TensorId>| t.expect("required at load");
    let a = &layer.mla;
    let ili = il as i32;
    // plain products, as deepseek2.cpp writes them (no LoRA on the attention weights)
    let mut q = match layer.wq {
        None => {
            let wq_a = b.w(need(a.wq_a));
            let mut q = b.g.ctx.mul_mat(wq_a, cur);
            b.cb(q, "q", ili);
            q = b.build_norm(q, a.attn_q_a_norm, None, NormType::Rms, ili);
            b.cb(q, "q", ili);
            let wq_b = b.w(need(a.wq_b));
            q = b.g.ctx.mul_mat(wq_b, q);
            q
        }
        Some(wq) => {
            let wq = b.w(wq);
            b.g.ctx.mul_mat(wq, cur)
        }
    };
    b.cb(q, "q", ili);
    q = b.g.ctx.reshape_3d(q, k_mla, n_head, n_tokens);
    b.cb(q, "q", ili);

    let wkv_a = b.w(need(a.wkv_a_mqa));
    let kv_cmpr_pe = b.g.ctx.mul_mat(wkv_a, cur);
    b.cb(kv_cmpr_pe, "kv_cmpr_pe", ili);
    let ty = b.g.ctx[kv_cmpr_pe].ty;
    let row = ty.row_size(kv_lora + rot);
    let mut kv_cmpr = b.g.ctx.view_2d(kv_cmpr_pe, kv_lora, n_tokens, row, 0);
    b.cb(kv_cmpr, "kv_cmpr", ili);
    let off = ty.row_size(kv_lora);
    let mut k_pe = b.g.ctx.view_3d(kv_cmpr_pe, rot, 1, n_tokens, row, row, off);
    b.cb(k_pe, "k_pe", ili);
    k_pe = b.rope(k_pe, inp_pos, None);
    b.cb(k_pe, "k_pe", ili);
    kv_cmpr = b.build_norm(kv_cmpr, a.attn_kv_a_norm, None, NormType::Rms, ili);
    b.cb(kv_cmpr, "kv_cmpr", ili);

    if !hp.mla.is_mla() {
        let p = unsplit::Unsplit {
            nope,
            n_head,
            n_tokens,
        };
        return unsplit::build_unsplit(
            b, layer, q, k_pe, kv_cmpr, inp_pos, attn_scale, kq_scale, il, p,
        );
    }
    let (qty, qnb) = (b.g.ctx[q].ty, b.g.ctx[q].nb);
    let mut q_nope =
        b.g.ctx
            .view_3d(q, nope, n_head, n_tokens, qnb[1], qnb[2], 0);
    b.cb(q_nope, "q_nope", ili);
    let q_pe =
        b.g.ctx
            .view_3d(q, rot, n_head, n_tokens, qnb[1], qnb[2], qty.row_size(nope));
    b.cb(q_pe, "q_pe", ili);
    let q_pe = b.rope(q_pe, inp_pos, None);
    b.cb(q_pe, "q_pe", ili);
    q_nope = b.g.ctx.permute(q_nope, 0, 2, 1, 3);
    b.cb(q_nope, "q_nope_perm", ili);
    let wk_b = b.w(need(a.wk_b));
    let mut q_absorbed = b.g.ctx.mul_mat(wk_b, q_nope);
    b.cb(q_absorbed, "q_nope_absorbed", ili);
    q_absorbed = b.g.ctx.permute(q_absorbed, 0, 2, 1, 3);
    b.cb(q_absorbed, "q_nope_absorbed_perm", ili);
    // the rotated part last: build_rope_shift rotates the tail of each cached row
    let mut q_cur = b.g.ctx.concat(q_absorbed, q_pe, 0);
    b.cb(q_cur, "Qcur", ili);
    kv_cmpr = b.g.ctx.reshape_3d(kv_cmpr, kv_lora, 1, n_tokens);
    b.cb(kv_cmpr, "kv_cmpr_reshape", ili);
    let k_cur = b.g.ctx.concat(kv_cmpr, k_pe, 0);
    b.cb(k_cur, "Kcur", ili);
    let v_cur = kv_cmpr;
    b.cb(v_cur, "Vcur", ili);
    if let Some(s) = attn_scale {
        q_cur = b.g.ctx.mul(q_cur, s);
        b.cb(q_cur, "Qcur_attn_temp_scaled", ili);
    }
    b.build_attn_mla(layer.wo, q_cur, k_cur, v_cur, need(a.wv_b), kq_scale, il)
}
