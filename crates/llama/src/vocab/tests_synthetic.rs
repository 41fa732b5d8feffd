//! Small in-memory vocabularies for the tokenizers ../shared/vocab has no file for (Unigram,
//! RWKV, WordPiece edge cases), and random input through every shared vocabulary.

use std::collections::HashMap;

use gguf::{Array, Value};

use super::tests::{read_texts, shared_vocabs};
use super::{Vocab, VocabType, TOKEN_NULL};

fn strs(v: &[&str]) -> Value {
    Value::Array(Array::from_strs(v))
}

fn i32s(v: &[i32]) -> Value {
    Value::Array(Array::from(v.to_vec()))
}

fn f32s(v: &[f32]) -> Value {
    Value::Array(Array::from(v.to_vec()))
}

fn build(kv: Vec<(&str, Value)>) -> Vocab {
    let map: HashMap<String, Value> = kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    Vocab::from_meta(&|k| map.get(k)).expect("vocab")
}

#[test]
fn unigram_picks_the_best_segmentation_and_merges_unknowns() {
    let toks = ["<pad>", "</s>", "<unk>", "▁", "▁a", "b", "ab", "▁ab", "a"];
    let v = build(vec![
        ("tokenizer.ggml.model", Value::Str("t5".into())),
        ("tokenizer.ggml.tokens", strs(&toks)),
        (
            "tokenizer.ggml.scores",
            f32s(&[0.0, 0.0, 0.0, -3.0, -2.0, -2.0, -2.5, -1.0, -3.0]),
        ),
        (
            "tokenizer.ggml.token_type",
            i32s(&[3, 3, 2, 1, 1, 1, 1, 1, 1]),
        ),
        ("tokenizer.ggml.add_space_prefix", Value::Bool(true)),
    ]);
    assert_eq!(v.vocab_type(), VocabType::Ugm);
    assert_eq!(v.tokenize(b"ab", true, false), vec![7, 1]);
    // "zz" is two unknown code points: one <unk>.
    assert_eq!(v.tokenize(b"ab zz", false, false), vec![7, 3, 2]);
    // The leading space of the first piece goes (add_space_prefix), and so does EOS.
    assert_eq!(v.detokenize(&[7, 1], true, false), b"ab");
}

#[test]
fn rwkv_takes_the_longest_escaped_token() {
    let toks = ["a", "ab", "abc", "\\n", "b"];
    let v = build(vec![
        ("tokenizer.ggml.model", Value::Str("rwkv".into())),
        ("tokenizer.ggml.tokens", strs(&toks)),
    ]);
    assert_eq!(v.tokenize(b"abcab\n", false, false), vec![2, 1, 3]);
    assert_eq!(v.token_to_piece(3, 0, true), b"\n");
    // No token starts with 'z': the unknown id, which RWKV leaves unset.
    assert_eq!(v.tokenize(b"z", false, false), vec![TOKEN_NULL]);
}

#[test]
fn wordpiece_lowercases_and_splits_punctuation() {
    let toks = [
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "▁hello", "▁wor", "ld", "▁world", "▁!",
    ];
    let v = build(vec![
        ("tokenizer.ggml.model", Value::Str("bert".into())),
        ("tokenizer.ggml.tokens", strs(&toks)),
        (
            "tokenizer.ggml.token_type",
            i32s(&[3, 3, 3, 3, 1, 1, 1, 1, 1]),
        ),
        ("tokenizer.ggml.unknown_token_id", Value::U32(1)),
        ("tokenizer.ggml.bos_token_id", Value::U32(2)),
        ("tokenizer.ggml.seperator_token_id", Value::U32(3)),
        ("tokenizer.ggml.padding_token_id", Value::U32(0)),
    ]);
    assert_eq!(
        v.tokenize(b"Hello WORLD!", true, false),
        vec![2, 4, 7, 8, 3]
    );
    assert_eq!(v.tokenize(b"hello xyz", false, false), vec![4, 1]);
}

#[test]
fn plamo2_scores_segmentations_and_falls_back_to_bytes() {
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
    for (t, sc) in [
        ("a", -1.0),
        ("b", -1.0),
        ("ab", -1.5),
        ("abc", -5.0),
        ("c", -1.0),
    ] {
        toks.push(t.to_string());
        types.push(1);
        scores.push(sc);
    }
    let refs: Vec<&str> = toks.iter().map(String::as_str).collect();
    let v = build(vec![
        ("tokenizer.ggml.model", Value::Str("plamo2".into())),
        ("tokenizer.ggml.tokens", strs(&refs)),
        ("tokenizer.ggml.scores", f32s(&scores)),
        ("tokenizer.ggml.token_type", i32s(&types)),
    ]);
    let id = |t: &str| v.text_to_token(t.as_bytes()).unwrap();
    assert_eq!(v.tokenize(b"abc", false, false), vec![id("ab"), id("c")]);
    assert_eq!(v.tokenize(b"z", false, false), vec![id("<0x7A>")]);
    assert_eq!(
        v.tokenize("é".as_bytes(), false, false),
        vec![id("<0xC3>"), id("<0xA9>")]
    );
    assert_eq!(
        v.detokenize(&v.tokenize("abcé z".as_bytes(), false, false), false, false),
        "abcé z".as_bytes()
    );
}

/// A tiny deterministic generator for byte soup (valid and invalid UTF-8, specials, spaces).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
}

#[test]
fn random_input_never_panics_and_ids_are_in_range() {
    let pieces: [&[u8]; 12] = [
        b" ",
        b"\n",
        b"<s>",
        b"<|im_start|>",
        b"\xff",
        b"\xe2\x96",
        "▁".as_bytes(),
        b"'s",
        "日本".as_bytes(),
        b"123",
        b"\t",
        "é".as_bytes(),
    ];
    for (path, v) in shared_vocabs() {
        let mut rng = Lcg(7);
        let mut inputs: Vec<Vec<u8>> = Vec::new();
        for _ in 0..60 {
            let mut t = Vec::new();
            for _ in 0..(rng.next() % 40) {
                if rng.next().is_multiple_of(3) {
                    t.extend_from_slice(pieces[(rng.next() % 12) as usize]);
                } else {
                    t.push((rng.next() % 256) as u8);
                }
            }
            inputs.push(t);
        }
        if let Ok(raw) = std::fs::read(format!("{}.inp", path.display())) {
            inputs.extend(read_texts(&raw));
        }
        for t in &inputs {
            for (add, parse) in [(false, false), (true, true)] {
                let ids = v.tokenize(t, add, parse);
                assert!(
                    ids.iter()
                        .all(|&id| id >= 0 && (id as usize) < v.n_tokens()),
                    "{}: {:?} -> {:?}",
                    path.display(),
                    t,
                    ids
                );
                let _ = v.detokenize(&ids, add, parse);
            }
        }
        assert!(v.token_to_piece(-5, 0, true).is_empty());
        assert!(v.token_to_piece(v.n_tokens() as i32, 0, true).is_empty());
    }
}
