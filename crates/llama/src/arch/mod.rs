//! Model architectures. Each one lives in its own file and describes itself in one `ArchDef`:
//! its GGUF name, rope layout, the hyperparameter keys it reads on top of the common ones
//! (`load_hparams`, llama.cpp's load_arch_hparams), its size classes, its tensor list
//! (`tensors`, load_arch_tensors) and its graph. `ARCHS` registers them; adding an architecture
//! that reuses the shared pieces (`graph/`, `tensors`) is one file and one line there.

mod cohere2;
mod command_r;
mod deepseek;
pub(crate) mod deepseek2;
mod exaone;
mod gemma;
mod gemma2;
mod gemma3;
mod glm4;
mod granite;
mod llama;
mod llama_like;
mod mistral3;
pub(crate) mod moe;
mod nextn;
mod olmo2;
mod olmoe;
mod phi3;
mod qwen2;
mod qwen2moe;
mod qwen3;
mod qwen3moe;
mod smollm3;
mod stablelm;
mod starcoder2;
pub(crate) mod tensors;

use crate::error::{LlamaError, Result};
use crate::graph::GraphBuilder;
use crate::hparams::{HParams, Keys};
use crate::model::Model;
use crate::model_tensors::TensorCreator;
use ggml::TensorId;

/// What the loader and the context need of one architecture.
pub(crate) struct ArchDef {
    pub name: &'static str,
    pub rope_type: RopeType,
    /// the architecture's own keys and checks, after the common ones are read
    pub load_hparams: fn(&Keys, &mut HParams) -> Result<()>,
    /// llm_type as print_info and llama_model_desc name it
    pub type_name: fn(&HParams) -> &'static str,
    /// the weights, in llama.cpp's creation order
    pub tensors: fn(&mut Model, &mut TensorCreator) -> Result<()>,
    /// the decoder graph of one ubatch; returns the logits
    pub graph: fn(&Model, &mut GraphBuilder) -> TensorId,
}

/// The registry: one line per architecture.
static ARCHS: &[&ArchDef] = &[
    &llama::ARCH,
    &qwen2::ARCH,
    &qwen3::ARCH,
    &gemma2::ARCH,
    &gemma3::ARCH,
    &gemma::ARCH,
    &granite::ARCH,
    &exaone::ARCH,
    &smollm3::ARCH,
    &mistral3::ARCH,
    &phi3::ARCH,
    &starcoder2::ARCH,
    &stablelm::ARCH,
    &olmo2::ARCH,
    &command_r::ARCH,
    &cohere2::ARCH,
    &glm4::ARCH,
    &qwen3moe::ARCH,
    &qwen2moe::ARCH,
    &olmoe::ARCH,
    &deepseek::ARCH,
    &deepseek2::ARCH,
];

/// An architecture of the registry.
#[derive(Clone, Copy)]
pub struct Arch(&'static ArchDef);

impl PartialEq for Arch {
    fn eq(&self, other: &Arch) -> bool {
        self.0.name == other.0.name
    }
}
impl Eq for Arch {}
impl std::hash::Hash for Arch {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.name.hash(h)
    }
}
impl std::fmt::Debug for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name)
    }
}

/// ggml rope modes as libllama names them (llama_rope_type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeType {
    None = -1,
    Norm = 0,
    Neox = 2,
}

impl Arch {
    pub fn from_name(name: &str) -> Option<Arch> {
        ARCHS.iter().find(|a| a.name == name).map(|a| Arch(a))
    }

    /// The names of every registered architecture, in registry order.
    pub fn names() -> Vec<&'static str> {
        ARCHS.iter().map(|a| a.name).collect()
    }

    pub fn name(self) -> &'static str {
        self.0.name
    }

    pub fn rope_type(self) -> RopeType {
        self.0.rope_type
    }

    pub(crate) fn load_hparams(self, k: &Keys, hp: &mut HParams) -> Result<()> {
        (self.0.load_hparams)(k, hp)
    }

    pub fn type_name(self, hp: &HParams) -> &'static str {
        (self.0.type_name)(hp)
    }

    pub(crate) fn create_tensors(self, model: &mut Model, c: &mut TensorCreator) -> Result<()> {
        (self.0.tensors)(model, c)
    }

    /// Builds the decoder graph of this architecture into `b`; returns the logits tensor.
    pub(crate) fn build_graph(self, model: &Model, b: &mut GraphBuilder) -> TensorId {
        (self.0.graph)(model, b)
    }
}

/// The check llama.cpp makes for llama (and we for the graphs that rotate whole heads): rope
/// over the full head, and K and V heads of one size.
pub(crate) fn require_full_rope(hp: &HParams, arch: &str) -> Result<()> {
    if hp.n_rot != hp.n_embd_head_k || hp.n_embd_head_k != hp.n_embd_head_v {
        return Err(LlamaError::BadHparams(format!(
            "{arch} needs n_rot = n_embd_head_k = n_embd_head_v, got {}, {}, {}",
            hp.n_rot, hp.n_embd_head_k, hp.n_embd_head_v
        )));
    }
    Ok(())
}

/// GGUF tensor names (LLM_TENSOR_NAMES); `blk` ones take the layer index.
pub mod tn {
    pub const TOKEN_EMBD: &str = "token_embd";
    pub const OUTPUT_NORM: &str = "output_norm";
    pub const OUTPUT: &str = "output";
    pub const ROPE_FREQS: &str = "rope_freqs";
    pub const ROPE_FACTORS_LONG: &str = "rope_factors_long";
    pub const ROPE_FACTORS_SHORT: &str = "rope_factors_short";
    pub const ATTN_NORM: &str = "attn_norm";
    pub const ATTN_QKV: &str = "attn_qkv";
    pub const ATTN_Q: &str = "attn_q";
    pub const ATTN_K: &str = "attn_k";
    pub const ATTN_V: &str = "attn_v";
    pub const ATTN_OUT: &str = "attn_output";
    pub const ATTN_Q_NORM: &str = "attn_q_norm";
    pub const ATTN_K_NORM: &str = "attn_k_norm";
    pub const ATTN_POST_NORM: &str = "post_attention_norm";
    pub const FFN_NORM: &str = "ffn_norm";
    pub const FFN_POST_NORM: &str = "post_ffw_norm";
    pub const FFN_GATE: &str = "ffn_gate";
    pub const FFN_DOWN: &str = "ffn_down";
    pub const FFN_UP: &str = "ffn_up";
    pub const DENSE_2_OUT: &str = "dense_2";
    pub const CLS_OUT: &str = "cls.output";
    pub const DENSE_3_OUT: &str = "dense_3";

    pub fn global(base: &str, suffix: &str) -> String {
        format!("{base}.{suffix}")
    }

    pub fn blk(base: &str, suffix: &str, il: usize) -> String {
        format!("blk.{il}.{base}.{suffix}")
    }
}
