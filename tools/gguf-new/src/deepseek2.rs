//! deepseek2's shapes: multi-head latent attention in the split form convert_hf_to_gguf.py
//! writes today (attn_kv_a_mqa, attn_kv_a_norm, attn_k_b, attn_v_b; one KV head of the latent
//! plus its rotated part; with --mla-kv-b the older un-split attn_kv_b and one KV head per
//! query head), YaRN rope scaling, a dense first layer, then experts with shared
//! experts. Two variants: `deepseek2` is DeepSeek-V2-Lite's layout (Q straight from attn_q,
//! softmax router, weights neither normalised nor scaled), `deepseek2-v3` DeepSeek-V3's
//! (low-rank Q through attn_q_a / attn_q_a_norm / attn_q_b, sigmoid router with the selection
//! bias exp_probs_b, normalised and scaled weights).

use gguf::Value;

use crate::model::{Shape, Spec};
use crate::weights::Init;
use crate::Arch;

/// The MLA sizes, from the head size `--embd / --heads`.
struct Mla {
    rope: u64,
    nope: u64,
    v_head: u64,
    kv_lora: u64,
    /// 0: no low-rank Q
    q_lora: u64,
}

fn mla(s: &Shape) -> Mla {
    let head = (s.embd / s.heads) as u64;
    Mla {
        rope: head / 2,
        nope: head,
        v_head: head,
        kv_lora: 2 * head,
        q_lora: if s.arch == Arch::Deepseek2V3 {
            3 * head
        } else {
            0
        },
    }
}

pub fn is_deepseek2(arch: Arch) -> bool {
    matches!(arch, Arch::Deepseek2 | Arch::Deepseek2V3)
}

/// The flags these shapes need: an even head size for the rotated half, one KV head.
pub fn check(s: &Shape) -> Result<(), String> {
    if !is_deepseek2(s.arch) {
        if s.fused_gate_up || s.kv_b {
            return Err("--fused-gate-up-exps and --mla-kv-b apply to deepseek2".into());
        }
        return Ok(());
    }
    if s.fused_gate_up && s.moe.scales {
        return Err(
            "--expert-scales scales separate gate and up stacks: not with --fused-gate-up-exps"
                .into(),
        );
    }
    let head = s.embd / s.heads;
    if head < 2 || !head.is_multiple_of(4) {
        return Err(
            "deepseek2 needs --embd / --heads a multiple of 4 (its rotated part is half a head)"
                .into(),
        );
    }
    let e = s.moe.experts;
    if s.arch == Arch::Deepseek2V3 && (!e.is_multiple_of(4) || e < 8) {
        return Err("deepseek2-v3 selects from 4 expert groups: --experts must be a multiple of 4, at least 8".into());
    }
    // the un-split form caches full keys and values per head, as the older converter wrote
    if s.kv_b && s.heads_kv != s.heads {
        return Err("deepseek2 with --mla-kv-b has one KV head per query head: --heads-kv must equal --heads".into());
    }
    if !s.kv_b && s.heads_kv != 1 {
        return Err("deepseek2 caches one latent per token: --heads-kv must be 1".into());
    }
    Ok(())
}

/// The attention and rope keys (on top of the common and MoE ones).
pub fn kv(s: &Shape) -> Vec<(String, Value)> {
    if !is_deepseek2(s.arch) {
        return Vec::new();
    }
    let a = s.arch.name();
    let m = mla(s);
    let v3 = s.arch == Arch::Deepseek2V3;
    let u = |k: &str, v: u64| (format!("{a}.{k}"), Value::U32(v as u32));
    let f = |k: &str, v: f32| (format!("{a}.{k}"), Value::F32(v));
    let mut kv = vec![u("rope.dimension_count", m.rope)];
    if s.kv_b {
        // the older form: the decompressed head sizes, no MLA keys
        kv.extend([
            u("attention.key_length", m.nope + m.rope),
            u("attention.value_length", m.v_head),
        ]);
    } else {
        kv.extend([
            u("attention.key_length", m.kv_lora + m.rope),
            u("attention.value_length", m.kv_lora),
            u("attention.key_length_mla", m.nope + m.rope),
            u("attention.value_length_mla", m.v_head),
        ]);
    }
    kv.extend([
        u("attention.q_lora_rank", m.q_lora),
        u("attention.kv_lora_rank", m.kv_lora),
        (format!("{a}.rope.scaling.type"), "yarn".into()),
        // V2-Lite: factor 40, mscale_all_dim 0.707; V3: factor 40, mscale_all_dim 1; the
        // converter stores 0.1 * mscale_all_dim. Small factors keep the test contexts scaled.
        f("rope.scaling.factor", if v3 { 2.0 } else { 4.0 }),
        u("rope.scaling.original_context_length", (s.ctx / 4) as u64),
        f(
            "rope.scaling.yarn_log_multiplier",
            if v3 { 0.1 } else { 0.0707 },
        ),
    ]);
    if v3 {
        kv.extend([
            (format!("{a}.expert_weights_norm"), Value::Bool(true)),
            u("expert_gating_func", 2),
            // group-limited selection: 4 groups of the 8 experts, the best 2 kept
            u("expert_group_count", 4),
            u("expert_group_used_count", 2),
        ]);
    }
    kv
}

/// The MLA projections of one layer, after attn_norm.
pub fn attn_tensors(s: &Shape, il: u32, wtype: ggml::Type) -> Vec<Spec> {
    let m = mla(s);
    let (e, h) = (s.embd as u64, s.heads as u64);
    let std = |fan_in: u64| Init::Normal((fan_in as f32).powf(-0.5));
    let t = |name: &str, shape: Vec<u64>, ty, init| Spec {
        name: format!("blk.{il}.{name}"),
        shape,
        ty,
        init,
    };
    let f32 = ggml::Type::F32;
    let k_mla = m.nope + m.rope;
    let mut out = Vec::new();
    if m.q_lora > 0 {
        out.extend([
            t("attn_q_a.weight", vec![e, m.q_lora], wtype, std(e)),
            t("attn_q_a_norm.weight", vec![m.q_lora], f32, Init::Norm),
            t(
                "attn_q_b.weight",
                vec![m.q_lora, h * k_mla],
                wtype,
                std(m.q_lora),
            ),
        ]);
    } else {
        out.push(t("attn_q.weight", vec![e, h * k_mla], wtype, std(e)));
    }
    out.extend([
        t(
            "attn_kv_a_mqa.weight",
            vec![e, m.kv_lora + m.rope],
            wtype,
            std(e),
        ),
        t("attn_kv_a_norm.weight", vec![m.kv_lora], f32, Init::Norm),
    ]);
    if s.kv_b {
        out.push(t(
            "attn_kv_b.weight",
            vec![m.kv_lora, h * (m.nope + m.v_head)],
            wtype,
            std(m.kv_lora),
        ));
    } else {
        out.extend([
            t(
                "attn_k_b.weight",
                vec![m.nope, m.kv_lora, h],
                wtype,
                std(m.nope),
            ),
            t(
                "attn_v_b.weight",
                vec![m.kv_lora, m.v_head, h],
                wtype,
                std(m.kv_lora),
            ),
        ]);
    }
    out.extend([t(
        "attn_output.weight",
        vec![h * m.v_head, e],
        wtype,
        std(h * m.v_head),
    )]);
    out
}
