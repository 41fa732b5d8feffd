//! An SPM vocabulary without `<0xNN>` byte tokens (../shared/vocab's llama-spm with the 256 byte
//! tokens taken out): a character that is no token cannot fall back to bytes and becomes the
//! unknown token, where llama.cpp's byte_to_token throws (`unordered_map::at`) and ends the
//! program. Nothing is ever dropped without a word.

use super::tests::shared_dir;
use super::{spm, Token, Vocab, TOKEN_NULL};

fn put_str(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(&(s.len() as u64).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
}

/// A GGUF file of KV pairs only, written byte by byte (types: 4 u32, 5 i32, 6 f32, 7 bool,
/// 8 string, 9 array).
struct Kv {
    n: u64,
    body: Vec<u8>,
}

impl Kv {
    fn key(&mut self, k: &str, ty: u32) {
        self.n += 1;
        put_str(&mut self.body, k);
        self.body.extend_from_slice(&ty.to_le_bytes());
    }
    fn str(&mut self, k: &str, v: &str) {
        self.key(k, 8);
        put_str(&mut self.body, v);
    }
    fn u32(&mut self, k: &str, v: u32) {
        self.key(k, 4);
        self.body.extend_from_slice(&v.to_le_bytes());
    }
    fn bool(&mut self, k: &str, v: bool) {
        self.key(k, 7);
        self.body.push(v as u8);
    }
    fn array_head(&mut self, k: &str, elem: u32, n: usize) {
        self.key(k, 9);
        self.body.extend_from_slice(&elem.to_le_bytes());
        self.body.extend_from_slice(&(n as u64).to_le_bytes());
    }
    fn bytes(self) -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&self.n.to_le_bytes());
        b.extend(self.body);
        b
    }
}

fn is_byte_token(text: &str) -> bool {
    text.len() == 6 && text.starts_with("<0x") && text.ends_with('>')
}

/// The llama-spm vocabulary, and the same without its byte tokens (ids above them move down
/// by 256: `<unk>` 0, `<s>` 1, `</s>` 2, then the normal tokens from 3).
fn vocabs() -> Option<(Vocab, Vocab)> {
    let path = shared_dir()?.join("vocab/ggml-vocab-llama-spm.gguf");
    let file = gguf::GgufFile::open_metadata(&path).expect("open vocab");
    let full = Vocab::from_gguf(&file).expect("load vocab");
    let get = |k: &str| file.get(k).and_then(|v| v.as_array());
    let scores = get("tokenizer.ggml.scores").and_then(|a| a.f32s()).unwrap();
    let types = get("tokenizer.ggml.token_type")
        .and_then(|a| a.i32s())
        .unwrap();
    let keep: Vec<usize> = (0..full.tokens.len())
        .filter(|&i| !is_byte_token(&full.tokens[i].text))
        .collect();
    assert_eq!(keep.len(), full.tokens.len() - 256);

    let mut kv = Kv {
        n: 0,
        body: Vec::new(),
    };
    kv.str("general.architecture", "llama");
    kv.str("tokenizer.ggml.model", "llama");
    kv.str("tokenizer.ggml.pre", "default");
    kv.array_head("tokenizer.ggml.tokens", 8, keep.len());
    for &i in &keep {
        put_str(&mut kv.body, &full.tokens[i].text);
    }
    kv.array_head("tokenizer.ggml.scores", 6, keep.len());
    for &i in &keep {
        kv.body.extend_from_slice(&scores[i].to_le_bytes());
    }
    kv.array_head("tokenizer.ggml.token_type", 5, keep.len());
    for &i in &keep {
        kv.body.extend_from_slice(&types[i].to_le_bytes());
    }
    kv.u32("tokenizer.ggml.bos_token_id", 1);
    kv.u32("tokenizer.ggml.eos_token_id", 2);
    kv.u32("tokenizer.ggml.unknown_token_id", 0);
    kv.bool("tokenizer.ggml.add_bos_token", true);
    kv.bool("tokenizer.ggml.add_eos_token", false);
    let file = gguf::GgufFile::from_bytes(kv.bytes()).expect("parse the vocab without bytes");
    let bare = Vocab::from_gguf(&file).expect("load the vocab without bytes");
    Some((full, bare))
}

fn skip_or_fail() {
    // ../shared is part of the checkout: without it nothing here can be checked
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "../shared/vocab/ggml-vocab-llama-spm.gguf is missing"
    );
    eprintln!("skipped: ../shared/vocab not found");
}

#[test]
fn characters_without_tokens_become_unk_instead_of_bytes() {
    let Some((full, bare)) = vocabs() else {
        return skip_or_fail();
    };
    let tok = |v: &Vocab, t: &str| v.tokenize(t.as_bytes(), false, false);
    // Every character is a token: the same pieces, 256 ids lower.
    assert_eq!(tok(&full, "Hello world"), [15043, 3186]);
    assert_eq!(tok(&bare, "Hello world"), [14787, 2930]);
    assert_eq!(tok(&full, "日本語"), [29871, 30325, 30346, 30968]);
    assert_eq!(tok(&bare, "日本語"), [29615, 30069, 30090, 30712]);
    // U+1F999 is no token: four byte tokens (<0xF0> <0x9F> <0xA6> <0x99>) with them, one
    // <unk> for the whole character without them.
    assert_eq!(
        tok(&full, "Hello 🦙 world"),
        [15043, 29871, 243, 162, 169, 156, 3186]
    );
    assert_eq!(tok(&bare, "Hello 🦙 world"), [14787, 29615, 0, 2930]);
    // Single bytes too: the newline is <0x0A> (13) in llama-spm, and U+0001 is <0x01> (4).
    assert_eq!(tok(&full, "a\nb"), [263, 13, 29890]);
    assert_eq!(tok(&bare, "a\nb"), [7, 0, 29634]);
    assert_eq!(tok(&full, "\u{1}x"), [29871, 4, 29916]);
    assert_eq!(tok(&bare, "\u{1}x"), [29615, 0, 29660]);
    // With BOS, as a prompt is tokenized.
    assert_eq!(bare.tokenize("🦙".as_bytes(), true, false), [1, 29615, 0]);
}

#[test]
fn without_unk_the_characters_are_counted_not_silently_lost() {
    let Some((_, bare)) = vocabs() else {
        return skip_or_fail();
    };
    let no_bytes = |_: u8| -> Option<Token> { None };
    let mut out = Vec::new();
    // "▁a🦙b": the escaped space and "a" merge to "▁a", U+1F999 has nothing to become
    let text = "\u{2581}a🦙b".as_bytes();
    let dropped = spm::tokenize(
        &bare.token_to_id,
        &bare.tokens,
        &no_bytes,
        TOKEN_NULL,
        text,
        &mut out,
    );
    assert_eq!(dropped, 1);
    assert_eq!(out, [263 - 256, 29890 - 256]);
    out.clear();
    let with_unk = spm::tokenize(
        &bare.token_to_id,
        &bare.tokens,
        &no_bytes,
        0,
        text,
        &mut out,
    );
    assert_eq!((with_unk, out), (0, vec![7, 0, 29634]));
}
