//! gguf
