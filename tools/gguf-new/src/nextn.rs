//! NextN / multi-token-prediction layers (`--nextn N`, deepseek2 and glm4): N more layers after
//! `--layers`, each a full decoder layer plus `nextn.eh_proj` {2 n_embd, n_embd}, `nextn.enorm`,
//! `nextn.hnorm`, `nextn.shared_head_head` and `nextn.shared_head_norm`, as GLM-4.5 and
//! DeepSeek-V3 files carry them; `block_count` counts them and `nextn_predict_layers` says how
//! many there are. (llama.cpp loads them only for an MTP draft; its main model skips them.)

use gguf::Value;

use crate::model::{Shape, Spec};
use crate::weights::Init;
use crate::Arch;

/// The architectures whose loaders know NextN layers.
pub fn check(s: &Shape) -> Result<(), String> {
    if s.nextn > 0 && !matches!(s.arch, Arch::Deepseek2 | Arch::Deepseek2V3 | Arch::Glm4) {
        return Err("--nextn applies to deepseek2, deepseek2-v3 and glm4".into());
    }
    Ok(())
}

/// nextn_predict_layers, when there are any.
pub fn kv(s: &Shape) -> Vec<(String, Value)> {
    if s.nextn == 0 {
        return Vec::new();
    }
    let key = format!("{}.nextn_predict_layers", s.arch.name());
    vec![(key, Value::U32(s.nextn))]
}

/// The NextN tensors of layer `il` (none for the decoder layers).
pub fn tensors(s: &Shape, il: u32, n_vocab: u64, wtype: ggml::Type) -> Vec<Spec> {
    if il < s.layers {
        return Vec::new();
    }
    let e = s.embd as u64;
    let t = |name: &str, shape: Vec<u64>, ty, init| Spec {
        name: format!("blk.{il}.nextn.{name}"),
        shape,
        ty,
        init,
    };
    let f32 = ggml::Type::F32;
    let std = |fan_in: u64| Init::Normal((fan_in as f32).powf(-0.5));
    vec![
        t("eh_proj.weight", vec![2 * e, e], wtype, std(2 * e)),
        t("enorm.weight", vec![e], f32, Init::Norm),
        t("hnorm.weight", vec![e], f32, Init::Norm),
        t("shared_head_head.weight", vec![e, n_vocab], wtype, std(e)),
        t("shared_head_norm.weight", vec![e], f32, Init::Norm),
    ]
}
