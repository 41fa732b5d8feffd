//! Fuzz the WordPiece tokenizer (llama.cpp's `llm_tokenizer_wpm`) through BERT-BGE's real
//! vocabulary: any bytes tokenize to ids of the vocabulary and detokenize without panic.
//! WordPiece lowercases, strips accents and drops unknown words, so there is no round trip.
#![no_main]

#[path = "common/mod.rs"]
mod common;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

fn vocabs() -> &'static common::Lazy {
    static V: OnceLock<common::Lazy> = OnceLock::new();
    V.get_or_init(|| common::Lazy::new(&["ggml-vocab-bert-bge.gguf"]))
}

fuzz_target!(|data: &[u8]| {
    let Some((mode, pick, text)) = common::split(data) else {
        return;
    };
    let (_, v) = vocabs().get(pick as usize);
    common::check(v, &mode, &text);
});
