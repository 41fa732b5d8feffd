//! Fuzz the byte-level BPE tokenizer (llama.cpp's `llm_tokenizer_bpe`) with every
//! pre-tokenizer that has a real vocabulary here: any bytes tokenize to ids of the vocabulary
//! and detokenize without panic; plain UTF-8 text comes back unchanged (byte-level BPE loses
//! nothing) where the vocabulary does not clean spaces.
#![no_main]

#[path = "common/mod.rs"]
mod common;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

fn vocabs() -> &'static common::Lazy {
    static V: OnceLock<common::Lazy> = OnceLock::new();
    V.get_or_init(|| {
        common::Lazy::new(&[
            "ggml-vocab-llama-bpe.gguf",
            "ggml-vocab-qwen2.gguf",
            "ggml-vocab-gpt-2.gguf",
            "ggml-vocab-command-r.gguf",
            "ggml-vocab-deepseek-coder.gguf",
            "ggml-vocab-deepseek-llm.gguf",
            "ggml-vocab-falcon.gguf",
            "ggml-vocab-mpt.gguf",
            "ggml-vocab-qwen35.gguf",
            "ggml-vocab-refact.gguf",
            "ggml-vocab-starcoder.gguf",
            "ggml-vocab-gemma-4.gguf",
            "ggml-vocab-aquila.gguf",
            "ggml-vocab-gpt-neox.gguf",
        ])
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((mode, pick, text)) = common::split(data) else {
        return;
    };
    let (_, v) = vocabs().get(pick as usize);
    let (ids, _) = common::check(v, &mode, &text);
    if !mode.raw && !mode.add_special && !mode.parse_special && !v.flags().clean_spaces {
        common::assert_round_trip(v, &text, &ids);
    }
});
