//! The vocabulary and tokenizers of a model, token for token as llama.cpp's `llama_vocab`:
//! SentencePiece ("llama"), byte-level BPE ("gpt2", with every pre-tokenizer type, plus the
//! "whitespace" and "hybriddna" variants), WordPiece ("bert"), Unigram ("t5"), RWKV ("rwkv"),
//! PLaMo-2 ("plamo2") and llama.cpp's "test" model.
//!
//! [`Vocab::from_gguf`] reads the `tokenizer.*` keys (and logs llama.cpp's `load:` lines);
//! [`Vocab::tokenize`], [`Vocab::token_to_piece`] and [`Vocab::detokenize`] follow
//! `llama_tokenize`, `llama_token_to_piece` and `llama_detokenize`; [`Vocab::print_info`] logs
//! the vocabulary lines of `print_info`.

mod bpe;
mod detect;
mod detok;
pub mod hashorder;
mod info;
mod load;
mod plamo2;
pub mod pretok;
pub mod pretype;
pub mod regex;
mod rwkv;
mod special;
mod spm;
mod tokenize;
mod trie;
mod ugm;
pub mod unicode;
mod wpm;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_spm_bytes;
#[cfg(test)]
mod tests_synthetic;

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

pub use load::{Meta, VocabError};
pub use pretype::PreType;

pub type Token = i32;
pub const TOKEN_NULL: Token = -1;

/// Token attributes (`llama_token_attr`).
pub mod attr {
    pub const UNDEFINED: u32 = 0;
    pub const UNKNOWN: u32 = 1 << 0;
    pub const UNUSED: u32 = 1 << 1;
    pub const NORMAL: u32 = 1 << 2;
    pub const CONTROL: u32 = 1 << 3;
    pub const USER_DEFINED: u32 = 1 << 4;
    pub const BYTE: u32 = 1 << 5;
    pub const NORMALIZED: u32 = 1 << 6;
    pub const LSTRIP: u32 = 1 << 7;
    pub const RSTRIP: u32 = 1 << 8;
    pub const SINGLE_WORD: u32 = 1 << 9;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VocabType {
    None,
    Spm,
    Bpe,
    Wpm,
    Ugm,
    Rwkv,
    Plamo2,
    Test,
}

impl VocabType {
    /// `llama_vocab_type` value.
    pub fn id(self) -> i32 {
        match self {
            VocabType::None => 0,
            VocabType::Spm => 1,
            VocabType::Bpe => 2,
            VocabType::Wpm => 3,
            VocabType::Ugm => 4,
            VocabType::Rwkv => 5,
            VocabType::Plamo2 => 6,
            VocabType::Test => 7,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            VocabType::None => "no vocab",
            VocabType::Spm => "SPM",
            VocabType::Bpe => "BPE",
            VocabType::Wpm => "WPM",
            VocabType::Ugm => "UGM",
            VocabType::Rwkv => "RWKV",
            VocabType::Plamo2 => "PLaMo2",
            VocabType::Test => "TEST",
        }
    }
}

#[derive(Clone, Debug)]
pub struct TokenData {
    pub text: String,
    pub score: f32,
    pub attr: u32,
}

/// FxHash: the vocabulary maps are hashed millions of times per megabyte of text.
#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const FX_K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.hash = (self.hash.rotate_left(5) ^ w).wrapping_mul(FX_K);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        // The multiply leaves the low bits (the bucket index) depending only on low input
        // bits; rotating brings the well-mixed high bits down.
        self.hash.rotate_left(26)
    }
}

pub type FxBuild = BuildHasherDefault<FxHasher>;
pub type TokenMap = HashMap<Box<[u8]>, Token, FxBuild>;

enum Engine {
    None,
    /// `split_words`: no token has U+2581 right after another character, so no merge can
    /// cross the start of a word and words can be tokenized (and cached) one by one.
    Spm {
        split_words: bool,
    },
    Bpe(Box<bpe::Bpe>),
    Wpm,
    Ugm(Box<ugm::Ugm>),
    Rwkv(Box<rwkv::Rwkv>),
    Plamo2(Box<plamo2::Plamo2>),
    Test,
}

/// Special token ids (`TOKEN_NULL` when absent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpecialTokens {
    pub bos: Token,
    pub eos: Token,
    pub eot: Token,
    pub eom: Token,
    pub unk: Token,
    pub sep: Token,
    pub pad: Token,
    pub mask: Token,
    pub linefeed: Token,
    pub fim_pre: Token,
    pub fim_suf: Token,
    pub fim_mid: Token,
    pub fim_pad: Token,
    pub fim_rep: Token,
    pub fim_sep: Token,
}

/// Tokenizer flags read from the model or implied by its tokenizer type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VocabFlags {
    pub add_space_prefix: bool,
    pub add_bos: bool,
    pub add_eos: bool,
    pub add_sep: bool,
    pub ignore_merges: bool,
    pub clean_spaces: bool,
    pub remove_extra_whitespaces: bool,
    pub escape_whitespaces: bool,
    pub treat_whitespace_as_suffix: bool,
    pub lowercase: bool,
    pub strip_accents: bool,
}

pub struct Vocab {
    model: String,
    pre: String,
    vtype: VocabType,
    pre_type: PreType,
    n_token_types: u32,
    max_token_len: usize,
    tokens: Vec<TokenData>,
    token_to_id: TokenMap,
    special: SpecialTokens,
    flags: VocabFlags,
    n_merges: usize,
    cache_special: Vec<Token>,
    piece_cache: Vec<Vec<u8>>,
    eog: BTreeSet<Token>,
    suppress: Vec<Token>,
    engine: Engine,
    special_matcher: special::SpecialMatcher,
}

// A model shares its vocabulary between threads.
const _: fn() = || {
    fn check<T: Send + Sync>() {}
    check::<Vocab>();
};

impl Vocab {
    /// `tokenizer.ggml.model` as stored.
    pub fn tokenizer_model(&self) -> &str {
        &self.model
    }
    /// `tokenizer.ggml.pre` as stored (or as implied).
    pub fn tokenizer_pre(&self) -> &str {
        &self.pre
    }
    pub fn vocab_type(&self) -> VocabType {
        self.vtype
    }
    pub fn pre_type(&self) -> PreType {
        self.pre_type
    }
    pub fn n_tokens(&self) -> usize {
        self.tokens.len()
    }
    pub fn n_token_types(&self) -> u32 {
        self.n_token_types
    }
    pub fn n_merges(&self) -> usize {
        self.n_merges
    }
    pub fn max_token_len(&self) -> usize {
        self.max_token_len
    }
    pub fn special(&self) -> &SpecialTokens {
        &self.special
    }
    pub fn flags(&self) -> &VocabFlags {
        &self.flags
    }
    pub fn bos(&self) -> Token {
        self.special.bos
    }
    pub fn eos(&self) -> Token {
        self.special.eos
    }
    pub fn eot(&self) -> Token {
        self.special.eot
    }
    pub fn add_bos(&self) -> bool {
        self.flags.add_bos
    }
    pub fn add_eos(&self) -> bool {
        self.flags.add_eos
    }
    pub fn add_sep(&self) -> bool {
        self.flags.add_sep
    }
    /// The end-of-generation tokens, ascending.
    pub fn eog_tokens(&self) -> &BTreeSet<Token> {
        &self.eog
    }
    pub fn is_eog(&self, id: Token) -> bool {
        id != TOKEN_NULL && self.eog.contains(&id)
    }
    pub fn suppress_tokens(&self) -> &[Token] {
        &self.suppress
    }
    /// Special tokens (control, user-defined, unknown), longest text first.
    pub fn special_tokens_cache(&self) -> &[Token] {
        &self.cache_special
    }
    pub fn token(&self, id: Token) -> Option<&TokenData> {
        usize::try_from(id).ok().and_then(|i| self.tokens.get(i))
    }
    pub fn token_text(&self, id: Token) -> Option<&str> {
        self.token(id).map(|t| t.text.as_str())
    }
    pub fn token_attr(&self, id: Token) -> u32 {
        self.token(id).map_or(attr::UNDEFINED, |t| t.attr)
    }
    pub fn is_control(&self, id: Token) -> bool {
        self.token_attr(id) & attr::CONTROL != 0
    }
    pub fn text_to_token(&self, text: &[u8]) -> Option<Token> {
        self.token_to_id.get(text).copied()
    }
}
