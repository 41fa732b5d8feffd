//! The mixture-of-experts shapes (qwen3moe, qwen2moe, Mixtral, olmoe, deepseek): the expert counts and sizes,
//! their GGUF keys and the per-layer router, expert stacks and shared expert, named and shaped
//! as convert_hf_to_gguf.py writes them.

use gguf::Value;

use crate::model::{Shape, Spec};
use crate::weights::Init;
use crate::Arch;

/// The expert settings; unused by dense architectures.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeShape {
    pub experts: u32,
    pub experts_used: u32,
    /// the experts' feed-forward size (qwen*moe: expert_feed_forward_length; Mixtral, olmoe:
    /// --ff)
    pub ff_exp: Option<u32>,
    /// qwen2moe's shared expert (expert_shared_feed_forward_length; default --ff)
    pub ff_shexp: Option<u32>,
    /// deepseek's shared experts (expert_shared_count) and dense leading layers
    pub shared: u32,
    pub dense_lead: u32,
    /// per-expert `.scale` tensors of the stacks (--expert-scales)
    pub scales: bool,
}

impl Default for MoeShape {
    fn default() -> MoeShape {
        MoeShape {
            experts: 8,
            experts_used: 2,
            ff_exp: None,
            ff_shexp: None,
            shared: 2,
            dense_lead: 1,
            scales: false,
        }
    }
}

impl Arch {
    pub fn is_moe(self) -> bool {
        matches!(
            self,
            Arch::Qwen3moe
                | Arch::Qwen2moe
                | Arch::Mixtral
                | Arch::Olmoe
                | Arch::Deepseek
                | Arch::Deepseek2
                | Arch::Deepseek2V3
        )
    }
}

impl Arch {
    /// deepseek's layout: dense leading layers, shared experts
    fn has_dense_lead(self) -> bool {
        matches!(self, Arch::Deepseek | Arch::Deepseek2 | Arch::Deepseek2V3)
    }
}

fn ff_exp(s: &Shape) -> u32 {
    match s.arch {
        Arch::Mixtral | Arch::Olmoe => s.ff,
        _ => s.moe.ff_exp.unwrap_or(s.ff),
    }
}

fn ff_shexp(s: &Shape) -> u32 {
    s.moe.ff_shexp.unwrap_or(s.ff)
}

/// The expert flags a shape must satisfy (one line each, as the other flags).
pub fn check(s: &Shape) -> Result<(), String> {
    if !s.arch.is_moe() {
        if s.moe.scales {
            return Err("--expert-scales applies to the MoE architectures".into());
        }
        return Ok(());
    }
    let m = &s.moe;
    if m.experts == 0 || m.experts_used == 0 {
        return Err("--experts and --experts-used must be at least 1".into());
    }
    if m.experts_used > m.experts {
        return Err(format!(
            "--experts-used {} exceeds --experts {}",
            m.experts_used, m.experts
        ));
    }
    if s.arch == Arch::Olmoe && s.heads_kv != s.heads {
        return Err("olmoe's K norm spans n_embd: --heads-kv must equal --heads".into());
    }
    if s.arch.has_dense_lead() && (m.shared == 0 || m.dense_lead >= s.layers) {
        return Err("deepseek needs --experts-shared >= 1 and --dense-lead below --layers".into());
    }
    if m.ff_exp == Some(0) || m.ff_shexp == Some(0) {
        return Err("--ff-exp and --ff-shexp must be at least 1".into());
    }
    Ok(())
}

/// The keys of the expert block.
pub fn kv(s: &Shape) -> Vec<(String, Value)> {
    if !s.arch.is_moe() {
        return Vec::new();
    }
    let a = s.arch.name();
    let mut kv = vec![
        (format!("{a}.expert_count"), Value::U32(s.moe.experts)),
        (
            format!("{a}.expert_used_count"),
            Value::U32(s.moe.experts_used),
        ),
    ];
    if !matches!(s.arch, Arch::Mixtral | Arch::Olmoe) {
        kv.push((
            format!("{a}.expert_feed_forward_length"),
            Value::U32(ff_exp(s)),
        ));
    }
    if s.arch == Arch::Qwen2moe {
        kv.push((
            format!("{a}.expert_shared_feed_forward_length"),
            Value::U32(ff_shexp(s)),
        ));
    }
    if s.arch.has_dense_lead() {
        // not 1, so that the graph's weight scaling (ffn_moe_weights_scaled) runs, but for
        // V2-Lite's layout, whose real files scale by 1
        let scale = match s.arch {
            Arch::Deepseek => 1.5,
            Arch::Deepseek2V3 => 2.5,
            _ => 1.0,
        };
        kv.extend([
            (
                format!("{a}.leading_dense_block_count"),
                Value::U32(s.moe.dense_lead),
            ),
            (format!("{a}.expert_shared_count"), Value::U32(s.moe.shared)),
            (format!("{a}.expert_weights_scale"), Value::F32(scale)),
        ]);
    }
    kv
}

/// One layer's feed-forward after ffn_norm: the router (kept F32, as llama-quantize keeps it),
/// the gate/up/down stacks {n_embd, n_ff_exp, n_expert}, and qwen2moe's shared expert.
pub fn ffn_tensors(s: &Shape, il: u32, wtype: ggml::Type) -> Vec<Spec> {
    let (e, ff, n) = (s.embd as u64, ff_exp(s) as u64, s.moe.experts as u64);
    let std = |fan_in: u64| Init::Normal((fan_in as f32).powf(-0.5));
    let p = |name: &str| format!("blk.{il}.{name}");
    let t = |name: &str, shape: Vec<u64>, ty, init| Spec {
        name: p(name),
        shape,
        ty,
        init,
    };
    if s.arch.has_dense_lead() && il < s.moe.dense_lead {
        let ff = s.ff as u64;
        return vec![
            t("ffn_gate.weight", vec![e, ff], wtype, std(e)),
            t("ffn_up.weight", vec![e, ff], wtype, std(e)),
            t("ffn_down.weight", vec![ff, e], wtype, std(ff)),
        ];
    }
    let mut out = vec![t(
        "ffn_gate_inp.weight",
        vec![e, n],
        ggml::Type::F32,
        std(e),
    )];
    if s.fused_gate_up {
        // gate rows first, then up, as the converters concatenate them
        out.push(t(
            "ffn_gate_up_exps.weight",
            vec![e, 2 * ff, n],
            wtype,
            std(e),
        ));
    } else {
        out.push(t("ffn_gate_exps.weight", vec![e, ff, n], wtype, std(e)));
        out.push(t("ffn_up_exps.weight", vec![e, ff, n], wtype, std(e)));
    }
    out.push(t("ffn_down_exps.weight", vec![ff, e, n], wtype, std(ff)));
    if s.moe.scales {
        // about 1, so that a wrong expert's scale shows in the output
        for stack in ["ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"] {
            out.push(t(
                &format!("{stack}.scale"),
                vec![n],
                ggml::Type::F32,
                Init::Norm,
            ));
        }
    }
    if s.arch == Arch::Deepseek2V3 {
        // DeepSeek V3's e_score_correction_bias, kept F32 as the converter writes it
        out.push(t(
            "exp_probs_b.bias",
            vec![n],
            ggml::Type::F32,
            Init::Normal(0.1),
        ));
    }
    if s.arch.has_dense_lead() {
        let sh = ff * s.moe.shared as u64;
        out.extend([
            t("ffn_gate_shexp.weight", vec![e, sh], wtype, std(e)),
            t("ffn_up_shexp.weight", vec![e, sh], wtype, std(e)),
            t("ffn_down_shexp.weight", vec![sh, e], wtype, std(sh)),
        ]);
    }
    if s.arch == Arch::Qwen2moe {
        let sh = ff_shexp(s) as u64;
        out.extend([
            t(
                "ffn_gate_inp_shexp.weight",
                vec![e],
                ggml::Type::F32,
                std(e),
            ),
            t("ffn_gate_shexp.weight", vec![e, sh], wtype, std(e)),
            t("ffn_up_shexp.weight", vec![e, sh], wtype, std(e)),
            t("ffn_down_shexp.weight", vec![sh, e], wtype, std(sh)),
        ]);
    }
    out
}
