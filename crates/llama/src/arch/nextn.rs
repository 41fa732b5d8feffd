//! The NextN / multi-token-prediction layers (`nextn_predict_layers`): the last layers of
//! `block_count`, with `nextn.eh_proj`, `nextn.enorm`, `nextn.hnorm` and optional
//! `nextn.embed_tokens` / `nextn.shared_head_*`. llama.cpp loads them only for an MTP draft
//! context (`load_mtp`, off unless speculative MTP is asked for); otherwise every one of their
//! tensors is created with TENSOR_SKIP: checked, counted, warned about as unused, and neither
//! loaded, run nor given a KV cache. Nothing here runs an MTP draft, so they are always
//! skipped.

use super::tensors::MM;
use super::tn;
use crate::error::Result;
use crate::hparams::HParams;
use crate::model_tensors::{LayerKind, TensorCreator, NOT_REQUIRED, SKIP};

/// GGUF tensor names of the NextN layers (LLM_TENSOR_NEXTN_*).
pub(crate) mod tn_nextn {
    pub const EH_PROJ: &str = "nextn.eh_proj";
    pub const ENORM: &str = "nextn.enorm";
    pub const HNORM: &str = "nextn.hnorm";
    pub const EMBED_TOKENS: &str = "nextn.embed_tokens";
    pub const SHARED_HEAD_HEAD: &str = "nextn.shared_head_head";
    pub const SHARED_HEAD_NORM: &str = "nextn.shared_head_norm";
}

/// One skipped layer: its tensors are required (unless `all_optional`, or optional
/// themselves) and never loaded.
#[derive(Clone, Copy)]
pub(crate) struct Skipped {
    pub il: usize,
    /// llama.cpp's trunk_only: the file has no `blk.{n_layer}.nextn.eh_proj`, so the NextN
    /// layers' tensors are all TENSOR_NOT_REQUIRED
    pub all_optional: bool,
}

impl Skipped {
    /// create_tensor(name, dims, flags | TENSOR_SKIP).
    pub fn t(
        self,
        c: &mut TensorCreator,
        base: &str,
        suffix: &str,
        dims: &[i64],
        optional: bool,
    ) -> Result<()> {
        let name = tn::blk(base, suffix, self.il);
        let req = if optional || self.all_optional {
            NOT_REQUIRED
        } else {
            0
        };
        c.create(&name, dims, SKIP | req, LayerKind::Repeating(self.il), MM)?;
        Ok(())
    }

    /// create_tensor_qkv with TENSOR_SKIP: fused or separate, weights and biases all optional.
    pub fn qkv(self, c: &mut TensorCreator, [n_embd, q, k, v]: [i64; 4]) -> Result<()> {
        let n_qkv = q + k + v;
        self.t(c, tn::ATTN_QKV, "weight", &[n_embd, n_qkv], true)?;
        self.t(c, tn::ATTN_QKV, "bias", &[n_qkv], true)?;
        for (base, n) in [(tn::ATTN_Q, q), (tn::ATTN_K, k), (tn::ATTN_V, v)] {
            self.t(c, base, "weight", &[n_embd, n], true)?;
        }
        for (base, n) in [(tn::ATTN_Q, q), (tn::ATTN_K, k), (tn::ATTN_V, v)] {
            self.t(c, base, "bias", &[n], true)?;
        }
        Ok(())
    }

    /// create_tensor_gate_up_exps with TENSOR_SKIP: the fused stack or the two, all optional.
    pub fn gate_up_exps(
        self,
        c: &mut TensorCreator,
        [n_embd, n_ff, n_expert]: [i64; 3],
    ) -> Result<()> {
        use super::moe::tn as tn_moe;
        let fused = [n_embd, n_ff * 2, n_expert];
        self.t(c, tn_moe::FFN_GATE_UP_EXPS, "weight", &fused, true)?;
        let stack = [n_embd, n_ff, n_expert];
        self.t(c, tn_moe::FFN_GATE_EXPS, "weight", &stack, true)?;
        self.t(c, tn_moe::FFN_UP_EXPS, "weight", &stack, true)
    }

    /// The NextN tensors proper, after the layer's own.
    pub fn nextn(self, c: &mut TensorCreator, n_embd: i64, n_vocab: i64) -> Result<()> {
        self.t(c, tn_nextn::EH_PROJ, "weight", &[2 * n_embd, n_embd], false)?;
        self.t(c, tn_nextn::ENORM, "weight", &[n_embd], false)?;
        self.t(c, tn_nextn::HNORM, "weight", &[n_embd], false)?;
        self.t(
            c,
            tn_nextn::EMBED_TOKENS,
            "weight",
            &[n_embd, n_vocab],
            true,
        )?;
        self.t(
            c,
            tn_nextn::SHARED_HEAD_HEAD,
            "weight",
            &[n_embd, n_vocab],
            true,
        )?;
        self.t(c, tn_nextn::SHARED_HEAD_NORM, "weight", &[n_embd], true)
    }
}

/// The NextN layers of `hp` (il from n_layer to n_layer_all), as deepseek2's loader flags
/// them: all optional when the file lacks the first one's `eh_proj` (trunk_only).
pub(crate) fn skipped_layers(c: &TensorCreator, hp: &HParams) -> Vec<Skipped> {
    if hp.n_layer_nextn == 0 {
        return Vec::new();
    }
    let probe = tn::blk(tn_nextn::EH_PROJ, "weight", hp.n_layer as usize);
    let all_optional = !c.has(&probe);
    (hp.n_layer as usize..hp.n_layer_all() as usize)
        .map(|il| Skipped { il, all_optional })
        .collect()
}
