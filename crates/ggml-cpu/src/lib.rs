//! ggml-cpu
pub mod dot;
