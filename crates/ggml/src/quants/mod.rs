//! Block layouts and reference quantizers, bit-exact with ggml.
