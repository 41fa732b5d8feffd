//! Fuzz the Unigram tokenizer (llama.cpp's `llm_tokenizer_ugm`): through nomic-bert-moe's real
//! vocabulary (its precompiled charsmap normalises) and through a small synthetic one without
//! a charsmap, where unknown runs and ties are frequent. Any bytes tokenize to ids of the
//! vocabulary and detokenize without panic; normalisation rules out a round trip.
#![no_main]

#[path = "common/mod.rs"]
mod common;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use llama::vocab::Vocab;

fn synthetic() -> &'static Vocab {
    static V: OnceLock<Vocab> = OnceLock::new();
    V.get_or_init(|| {
        let mut toks: Vec<String> = ["<pad>", "</s>", "<unk>", "<mask>", "\u{2581}"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut types = vec![3, 3, 2, 4, 1];
        let mut scores = vec![0.0f32, 0.0, 0.0, 0.0, -3.0];
        for (i, w) in common::WORDS.iter().enumerate() {
            for t in [w.to_string(), format!("\u{2581}{w}")] {
                if !toks.contains(&t) {
                    toks.push(t);
                    types.push(1);
                    scores.push(-1.0 - (i % 7) as f32 * 0.5);
                }
            }
        }
        common::MiniGguf::default()
            .str("tokenizer.ggml.model", "t5")
            .strs("tokenizer.ggml.tokens", &toks)
            .f32s("tokenizer.ggml.scores", &scores)
            .i32s("tokenizer.ggml.token_type", &types)
            .bool("tokenizer.ggml.add_space_prefix", true)
            .bool("tokenizer.ggml.remove_extra_whitespaces", true)
            .vocab()
    })
}

fn real() -> &'static Vocab {
    static V: OnceLock<Vocab> = OnceLock::new();
    V.get_or_init(|| common::load_file("ggml-vocab-nomic-bert-moe.gguf"))
}

fuzz_target!(|data: &[u8]| {
    let Some((mode, pick, text)) = common::split(data) else {
        return;
    };
    let v = if pick & 1 == 0 { real() } else { synthetic() };
    common::check(v, &mode, &text);
});
