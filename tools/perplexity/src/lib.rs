//! llama-perplexity: perplexity of a model over a text, and the KL divergence of its token
//! distributions against a base model's saved log-probabilities, with llama.cpp's flags,
//! arithmetic and output. The binary (main.rs) drives libllama; these modules need no model.

pub mod logits_file;
pub mod math;
pub mod report;
