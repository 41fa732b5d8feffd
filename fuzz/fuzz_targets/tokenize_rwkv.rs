//! Fuzz the RWKV "world" tokenizer (greedy longest match over unescaped token bytes) with a
//! synthetic vocabulary holding every single byte, as the real ones do: any bytes tokenize to
//! ids of the vocabulary, and, since RWKV neither adds nor normalises anything, detokenizing
//! gives back exactly the input bytes.
#![no_main]

#[path = "common/mod.rs"]
mod common;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use llama::vocab::Vocab;

fn escape(bytes: &[u8]) -> String {
    let mut s = String::new();
    for &b in bytes {
        match b {
            b'\t' => s.push_str("\\t"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s
}

fn vocab() -> &'static Vocab {
    static V: OnceLock<Vocab> = OnceLock::new();
    V.get_or_init(|| {
        let mut toks: Vec<String> = (0..=255u8).map(|b| escape(&[b])).collect();
        for w in common::WORDS {
            let t = escape(w.as_bytes());
            if !toks.contains(&t) {
                toks.push(t);
            }
        }
        toks.push("\\xe6\\x97".to_string()); // a token that is half a code point
        common::MiniGguf::default()
            .str("tokenizer.ggml.model", "rwkv")
            .strs("tokenizer.ggml.tokens", &toks)
            .vocab()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((mode, _, text)) = common::split(data) else {
        return;
    };
    let v = vocab();
    let (ids, _) = common::check(v, &mode, &text);
    common::assert_round_trip(v, &text, &ids);
});
