//! llama
