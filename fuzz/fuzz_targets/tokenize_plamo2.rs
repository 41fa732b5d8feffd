//! Fuzz PLaMo-2's tokenizer (a best-score dynamic program over token suffixes, with byte
//! tokens for what no token covers) with a synthetic vocabulary: any bytes tokenize to ids of
//! the vocabulary and detokenize without panic; plain UTF-8 text comes back unchanged.
#![no_main]

#[path = "common/mod.rs"]
mod common;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use llama::vocab::Vocab;

fn vocab() -> &'static Vocab {
    static V: OnceLock<Vocab> = OnceLock::new();
    V.get_or_init(|| {
        let mut toks: Vec<String> = [
            "<|plamo:unk|>",
            "<|plamo:bos|>",
            "<|plamo:eos|>",
            "<|plamo:pad|>",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut types = vec![3, 3, 3, 3];
        let mut scores = vec![0.0f32; 4];
        for b in 0..256 {
            toks.push(format!("<0x{b:02X}>"));
            types.push(6);
            scores.push(0.0);
        }
        for (i, w) in common::WORDS.iter().enumerate() {
            toks.push(w.to_string());
            types.push(1);
            scores.push(-1.0 - (i % 5) as f32 * 0.75);
        }
        common::MiniGguf::default()
            .str("tokenizer.ggml.model", "plamo2")
            .strs("tokenizer.ggml.tokens", &toks)
            .f32s("tokenizer.ggml.scores", &scores)
            .i32s("tokenizer.ggml.token_type", &types)
            .vocab()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((mode, _, text)) = common::split(data) else {
        return;
    };
    let v = vocab();
    let (ids, _) = common::check(v, &mode, &text);
    if !mode.raw && !mode.add_special && !mode.parse_special {
        common::assert_round_trip(v, &text, &ids);
    }
});
