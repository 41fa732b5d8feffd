//! llama-gguf-new: write a model with random weights of a chosen shape, for tests and for
//! benchmarking a model shape without downloading it.

mod deepseek2;
mod dense;
mod model;
mod moe;
mod nextn;
mod vocab;
mod weights;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Arch {
    Llama,
    Qwen2,
    Qwen3,
    Gemma2,
    Gemma,
    Phi3,
    Granite,
    Olmo2,
    Starcoder2,
    Stablelm,
    CommandR,
    Cohere2,
    Glm4,
    Exaone,
    Smollm3,
    Mistral3,
    Qwen3moe,
    Qwen2moe,
    /// llama with experts (general.architecture "llama")
    Mixtral,
    Olmoe,
    Deepseek,
    /// DeepSeek-V2-Lite's layout (MLA, Q from attn_q, softmax router)
    Deepseek2,
    /// DeepSeek-V3's layout (MLA with low-rank Q, sigmoid router, selection bias)
    #[value(name = "deepseek2-v3")]
    Deepseek2V3,
}

impl Arch {
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Gemma2 => "gemma2",
            Arch::Gemma => "gemma",
            Arch::Phi3 => "phi3",
            Arch::Granite => "granite",
            Arch::Olmo2 => "olmo2",
            Arch::Starcoder2 => "starcoder2",
            Arch::Stablelm => "stablelm",
            Arch::CommandR => "command-r",
            Arch::Cohere2 => "cohere2",
            Arch::Glm4 => "glm4",
            Arch::Exaone => "exaone",
            Arch::Smollm3 => "smollm3",
            Arch::Mistral3 => "mistral3",
            Arch::Qwen3moe => "qwen3moe",
            Arch::Qwen2moe => "qwen2moe",
            Arch::Mixtral => "llama",
            Arch::Olmoe => "olmoe",
            Arch::Deepseek => "deepseek",
            Arch::Deepseek2 | Arch::Deepseek2V3 => "deepseek2",
        }
    }
}

/// The types `--type` accepts with the llama_ftype each gives `general.file_type` ("mostly X").
pub const WEIGHT_TYPES: [(&str, ggml::Type, u32); 14] = [
    ("f32", ggml::Type::F32, 0),
    ("f16", ggml::Type::F16, 1),
    ("bf16", ggml::Type::Bf16, 32),
    ("q4_0", ggml::Type::Q4_0, 2),
    ("q4_1", ggml::Type::Q4_1, 3),
    ("q5_0", ggml::Type::Q5_0, 8),
    ("q5_1", ggml::Type::Q5_1, 9),
    ("q8_0", ggml::Type::Q8_0, 7),
    ("q2_k", ggml::Type::Q2K, 10),
    ("q3_k", ggml::Type::Q3K, 12),
    ("q4_k", ggml::Type::Q4K, 15),
    ("q5_k", ggml::Type::Q5K, 17),
    ("q6_k", ggml::Type::Q6K, 18),
    ("iq4_nl", ggml::Type::Iq4Nl, 25),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WeightType {
    pub ty: ggml::Type,
    /// `general.file_type` (llama_ftype).
    pub ftype: u32,
}

fn parse_weight_type(s: &str) -> Result<WeightType, String> {
    WEIGHT_TYPES
        .iter()
        .find(|(name, _, _)| name.eq_ignore_ascii_case(s))
        .map(|&(_, ty, ftype)| WeightType { ty, ftype })
        .ok_or_else(|| {
            let names: Vec<&str> = WEIGHT_TYPES.iter().map(|t| t.0).collect();
            format!("unknown type '{s}' (one of {})", names.join(", "))
        })
}

#[derive(Parser, Debug)]
#[command(
    name = "llama-gguf-new",
    about = "Write a GGUF model with random weights of a chosen shape",
    after_help = "Presets: tiny (the reference model's shape), qwen2-0.5b, tinyllama-1.1b, llama-7b, llama3-8b.\n\
                  Flags given with --preset override its values."
)]
pub struct Args {
    /// Output file
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
    /// Start from a known shape
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,
    #[arg(long, value_enum)]
    pub arch: Option<Arch>,
    /// Number of layers (blocks)
    #[arg(long)]
    pub layers: Option<u32>,
    /// Embedding size (n_embd)
    #[arg(long)]
    pub embd: Option<u32>,
    /// Attention heads
    #[arg(long)]
    pub heads: Option<u32>,
    /// Key/value heads (grouped-query attention)
    #[arg(long)]
    pub heads_kv: Option<u32>,
    /// Feed-forward size (n_ff)
    #[arg(long)]
    pub ff: Option<u32>,
    /// Training context length
    #[arg(long)]
    pub ctx: Option<u32>,
    /// Type of the weight matrices (norms stay f32): f32, f16, bf16, q4_0, q4_1, q5_0, q5_1,
    /// q8_0, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl
    #[arg(long = "type", value_parser = parse_weight_type, default_value = "f32")]
    pub ty: WeightType,
    /// Seed of the random weights
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Copy every tokenizer.* key from this GGUF file
    #[arg(long, value_name = "FILE")]
    pub vocab: Option<PathBuf>,
    /// Vocabulary size of the built-in vocabulary (padded with unused tokens)
    #[arg(long)]
    pub vocab_size: Option<u64>,
    /// RoPE base frequency
    #[arg(long)]
    pub rope_freq_base: Option<f32>,
    /// RMS norm epsilon
    #[arg(long)]
    pub rms_eps: Option<f32>,
    /// The window of sliding-window layers (attention.sliding_window: gemma2 and cohere2,
    /// default 4096; olmo2 gets a window, as OLMo 3, only when this is given)
    #[arg(long)]
    pub swa: Option<u32>,
    /// Experts per MoE layer (qwen3moe, qwen2moe, mixtral; default 8)
    #[arg(long)]
    pub experts: Option<u32>,
    /// Experts each token uses (default 2)
    #[arg(long)]
    pub experts_used: Option<u32>,
    /// Feed-forward size of each expert (qwen3moe, qwen2moe; default --ff; mixtral uses --ff)
    #[arg(long)]
    pub ff_exp: Option<u32>,
    /// Feed-forward size of qwen2moe's shared expert (default --ff)
    #[arg(long)]
    pub ff_shexp: Option<u32>,
    /// deepseek: shared experts (expert_shared_count, default 2)
    #[arg(long)]
    pub experts_shared: Option<u32>,
    /// deepseek: leading layers with a dense feed-forward (leading_dense_block_count, default 1)
    #[arg(long)]
    pub dense_lead: Option<u32>,
    /// MoE architectures: per-expert scales of each expert stack (ffn_*_exps.scale, as NVFP4
    /// files carry them)
    #[arg(long)]
    pub expert_scales: bool,
    /// mistral3: YaRN rope scaling by this factor, with Ministral 3's keys
    /// (yarn_log_multiplier 1) and betas 16 and 2
    #[arg(long)]
    pub yarn: Option<f32>,
    /// deepseek2, glm4: this many NextN (multi-token-prediction) layers after --layers
    /// (nextn_predict_layers; block_count counts them)
    #[arg(long, value_name = "N")]
    pub nextn: Option<u32>,
    /// deepseek2: the experts' gate and up stacks as one ffn_gate_up_exps tensor
    #[arg(long)]
    pub fused_gate_up_exps: bool,
    /// deepseek2: the older un-split attention form (attn_kv_b instead of attn_k_b / attn_v_b,
    /// no key_length_mla / value_length_mla, one KV head per query head)
    #[arg(long)]
    pub mla_kv_b: bool,
    /// general.name
    #[arg(long)]
    pub name: Option<String>,
    /// No progress bar
    #[arg(long)]
    pub quiet: bool,
    /// Write the file even if it is larger than the size limit (4 GiB)
    #[arg(long)]
    pub force: bool,
}

fn main() -> ExitCode {
    // Ctrl+C or a kill must not leave the half-written model's temporary behind.
    atomic_file::install_signal_cleanup();
    // the same version line as every other tool (clap's own would print only the version)
    if std::env::args().nth(1).is_some_and(|a| a == "--version") {
        eprint!("{}", build_info::version_text());
        return ExitCode::SUCCESS;
    }
    let args = Args::parse();
    match model::run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
