//! Model architectures: names as GGUF spells them, their rope layout, the tensors each one
//! loads (`tensors`) and one graph builder per architecture (`llama`, `qwen2`).

mod llama;
mod qwen2;

use crate::graph::GraphBuilder;
use crate::model::Model;
use ggml::TensorId;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    Llama,
    Qwen2,
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
        match name {
            "llama" => Some(Arch::Llama),
            "qwen2" => Some(Arch::Qwen2),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
        }
    }

    /// Builds the decoder graph of this architecture into `b`; returns the logits tensor.
    pub(crate) fn build_graph(self, model: &Model, b: &mut GraphBuilder) -> TensorId {
        match self {
            Arch::Llama => llama::build(model, b),
            Arch::Qwen2 => qwen2::build(model, b),
        }
    }

    pub fn rope_type(self) -> RopeType {
        match self {
            Arch::Llama => RopeType::Norm,
            Arch::Qwen2 => RopeType::Neox,
        }
    }
}

/// GGUF tensor names (LLM_TENSOR_NAMES); `blk` ones take the layer index.
pub mod tn {
    pub const TOKEN_EMBD: &str = "token_embd";
    pub const OUTPUT_NORM: &str = "output_norm";
    pub const OUTPUT: &str = "output";
    pub const ROPE_FREQS: &str = "rope_freqs";
    pub const ATTN_NORM: &str = "attn_norm";
    pub const ATTN_QKV: &str = "attn_qkv";
    pub const ATTN_Q: &str = "attn_q";
    pub const ATTN_K: &str = "attn_k";
    pub const ATTN_V: &str = "attn_v";
    pub const ATTN_OUT: &str = "attn_output";
    pub const FFN_NORM: &str = "ffn_norm";
    pub const FFN_GATE: &str = "ffn_gate";
    pub const FFN_DOWN: &str = "ffn_down";
    pub const FFN_UP: &str = "ffn_up";

    pub fn global(base: &str, suffix: &str) -> String {
        format!("{base}.{suffix}")
    }

    pub fn blk(base: &str, suffix: &str, il: usize) -> String {
        format!("blk.{il}.{base}.{suffix}")
    }
}

/// Model size classes (llm_type) as print_info and llama_model_desc name them.
pub fn type_name(
    arch: Arch,
    n_layer: u32,
    n_embd: u32,
    n_head: u32,
    n_head_kv: u32,
    n_vocab: u32,
) -> &'static str {
    match arch {
        Arch::Llama => match n_layer {
            16 | 22 => "1B",
            26 | 28 => "3B",
            30 => "256M",
            32 if n_vocab == 49152 => "3B",
            32 if n_vocab < 40000 => "7B",
            32 => "8B",
            36 => "8B",
            40 => "13B",
            48 => "34B",
            60 => "30B",
            80 if n_head == n_head_kv => "65B",
            80 => "70B",
            _ => "?B",
        },
        Arch::Qwen2 => match n_layer {
            24 if n_embd == 1024 => "0.5B",
            24 => "1B",
            28 if n_embd == 1536 => "1.5B",
            28 => "7B",
            32 => "7B",
            36 => "3B",
            40 if n_head == 20 => "4B",
            40 => "13B",
            48 => "14B",
            64 => "32B",
            80 => "70B",
            _ => "?B",
        },
    }
}
