//! Fuzz the SentencePiece-BPE tokenizer (llama.cpp's `llm_tokenizer_spm`) through real
//! vocabularies: any bytes tokenize to ids of the vocabulary and detokenize without panic;
//! plain UTF-8 text without U+2581 comes back unchanged (byte fallback covers every byte).
#![no_main]

#[path = "common/mod.rs"]
mod common;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

fn vocabs() -> &'static common::Lazy {
    static V: OnceLock<common::Lazy> = OnceLock::new();
    V.get_or_init(|| {
        common::Lazy::new(&[
            "ggml-vocab-llama-spm.gguf",
            "ggml-vocab-phi-3.gguf",
            "ggml-vocab-baichuan.gguf",
        ])
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((mode, pick, text)) = common::split(data) else {
        return;
    };
    let (_, v) = vocabs().get(pick as usize);
    let (ids, _) = common::check(v, &mode, &text);
    if !mode.raw
        && !mode.add_special
        && !mode.parse_special
        && !common::contains(&text, "\u{2581}".as_bytes())
    {
        common::assert_round_trip(v, &text, &ids);
    }
});
