//! llama-perplexity: perplexity of a model over a text, and the KL divergence of its token
//! distributions against a base model's saved log-probabilities, with llama.cpp's flags,
//! arithmetic and output. main.rs parses the flags and loads the model.

pub mod kld;
pub mod logits_file;
pub mod math;
pub mod ppl;
pub mod progress;
pub mod report;
pub mod tasks;
