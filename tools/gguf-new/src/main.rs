//! llama-gguf-new: write a model with random weights of a chosen shape, for tests and for
//! benchmarking a model shape without downloading it.

mod model;
mod vocab;
mod weights;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Arch {
    Llama,
    Qwen2,
}

impl Arch {
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WeightType {
    F32,
    F16,
    Bf16,
}

impl WeightType {
    pub fn ggml(self) -> ggml::Type {
        match self {
            WeightType::F32 => ggml::Type::F32,
            WeightType::F16 => ggml::Type::F16,
            WeightType::Bf16 => ggml::Type::Bf16,
        }
    }

    /// `general.file_type` (llama_ftype).
    pub fn ftype(self) -> u32 {
        match self {
            WeightType::F32 => 0,
            WeightType::F16 => 1,
            WeightType::Bf16 => 32,
        }
    }
}

#[derive(Parser, Debug)]
#[command(
    name = "llama-gguf-new",
    version,
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
    /// Type of the weight matrices (norms stay f32)
    #[arg(long = "type", value_enum, default_value = "f32")]
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
    /// general.name
    #[arg(long)]
    pub name: Option<String>,
    /// No progress bar
    #[arg(long)]
    pub quiet: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match model::run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
