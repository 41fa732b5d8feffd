//! `llama_tokenize`: special-token partitioning, then the model's tokenizer on each text
//! fragment, with BOS/EOS/SEP added as the vocabulary asks when `add_special`.

use std::collections::HashMap;

use super::special::Fragment;
use super::ugm::UgmFlags;
use super::{spm, unicode, wpm, Engine, FxBuild, Token, Vocab, VocabType, TOKEN_NULL};

const SPACE_MARK: &str = "\u{2581}";

fn escape_whitespace(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 8);
    for &b in text {
        if b == b' ' {
            out.extend_from_slice(SPACE_MARK.as_bytes());
        } else {
            out.push(b);
        }
    }
    out
}

/// Pieces of escaped text, each starting at a U+2581 that follows another character.
fn split_at_words(t: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mark = SPACE_MARK.as_bytes();
    let mut start = 0;
    let mut i = 0;
    std::iter::from_fn(move || {
        if start >= t.len() {
            return None;
        }
        while i < t.len() {
            let at_mark = t[i..].starts_with(mark);
            if at_mark && i > start && !t[..i].ends_with(mark) {
                let w = &t[start..i];
                start = i;
                return Some(w);
            }
            i += if at_mark { mark.len() } else { 1 };
        }
        let w = &t[start..];
        start = t.len();
        Some(w)
    })
}

fn warn_double_bos(func: &str) {
    ggml::log_warn!("{}: Added a BOS token to the prompt as specified by the model but the prompt also starts with a BOS token. So now the final prompt starts with 2 BOS tokens. Are you sure this is what you want?\n", func);
}

impl Vocab {
    /// Byte fallback token of SPM/UGM vocabularies (`<0xXX>`, else the byte itself).
    pub fn byte_to_token(&self, b: u8) -> Option<Token> {
        match self.vtype {
            VocabType::Spm | VocabType::Ugm => self
                .text_to_token(format!("<0x{b:02X}>").as_bytes())
                .or_else(|| self.text_to_token(&[b])),
            VocabType::Wpm | VocabType::Bpe => self.text_to_token(&unicode::byte_to_utf8(b)),
            VocabType::Plamo2 => self.text_to_token(format!("<0x{b:02X}>").as_bytes()),
            _ => None,
        }
    }

    /// Tokenize `text`. `add_special` adds BOS/EOS/SEP as the vocabulary wants them;
    /// `parse_special` lets control tokens written in the text become those tokens.
    pub fn tokenize(&self, text: &[u8], add_special: bool, parse_special: bool) -> Vec<Token> {
        let frags = self.partition(text, parse_special);
        let mut out: Vec<Token> = Vec::new();
        let f = self.flags;
        let s = self.special;
        let push_if = |out: &mut Vec<Token>, cond: bool, id: Token| {
            if cond && id != TOKEN_NULL {
                out.push(id);
            }
        };
        match (&self.engine, self.vtype) {
            (Engine::Spm { split_words }, _) => {
                push_if(&mut out, add_special && f.add_bos, s.bos);
                let mut prev_special = true;
                let mut cache: HashMap<Vec<u8>, Vec<Token>, FxBuild> = HashMap::default();
                let byte_token = |b: u8| self.byte_to_token(b);
                let mut dropped = 0usize;
                for fr in &frags {
                    match *fr {
                        Fragment::Text(off, len) => {
                            let mut t = Vec::with_capacity(len + 1);
                            if f.add_space_prefix && prev_special {
                                t.push(b' ');
                            }
                            t.extend_from_slice(&text[off..off + len]);
                            let t = escape_whitespace(&t);
                            if *split_words {
                                for word in split_at_words(&t) {
                                    if let Some(ids) = cache.get(word) {
                                        out.extend_from_slice(ids);
                                        continue;
                                    }
                                    let start = out.len();
                                    let (map, data) = (&self.token_to_id, &self.tokens);
                                    dropped += spm::tokenize(
                                        map,
                                        data,
                                        &byte_token,
                                        s.unk,
                                        word,
                                        &mut out,
                                    );
                                    cache.insert(word.to_vec(), out[start..].to_vec());
                                }
                            } else {
                                let (map, data) = (&self.token_to_id, &self.tokens);
                                dropped +=
                                    spm::tokenize(map, data, &byte_token, s.unk, &t, &mut out);
                            }
                            prev_special = false;
                        }
                        Fragment::Token(id) => {
                            out.push(id);
                            prev_special = true;
                        }
                    }
                }
                if dropped > 0 {
                    // llama.cpp throws here; saying so beats losing text without a word
                    ggml::log_warn!(
                        "tokenize: {} character(s) are no token, have no <0xXX> byte tokens and the vocabulary has no unknown token: left out\n",
                        dropped
                    );
                }
                if add_special && f.add_bos && out.len() >= 2 && out[1] == s.bos {
                    warn_double_bos("tokenize");
                }
                push_if(&mut out, add_special && f.add_eos, s.eos);
            }
            (Engine::Bpe(bpe), _) => {
                push_if(&mut out, add_special && f.add_bos, s.bos);
                let mut cache: HashMap<Vec<u8>, Vec<Token>, FxBuild> = HashMap::default();
                for fr in &frags {
                    match *fr {
                        Fragment::Text(off, len) => {
                            let raw = &text[off..off + len];
                            let t = if f.escape_whitespaces {
                                escape_whitespace(raw)
                            } else {
                                raw.to_vec()
                            };
                            match self.model.as_str() {
                                "hybriddna" => self.tokenize_dna(bpe, &t, &mut cache, &mut out),
                                "whitespace" => {
                                    self.tokenize_whitespace(bpe, &t, &mut cache, &mut out)
                                }
                                _ => bpe.tokenize(&self.token_to_id, &t, &mut cache, &mut out),
                            }
                        }
                        Fragment::Token(id) => out.push(id),
                    }
                }
                if add_special {
                    push_if(&mut out, f.add_eos, s.eos);
                    if f.add_bos && out.len() >= 2 && out[1] == s.bos {
                        warn_double_bos("check_double_bos_eos");
                    }
                    if f.add_eos && out.len() >= 2 && out[out.len() - 2] == s.eos {
                        ggml::log_warn!("check_double_bos_eos: Added a EOS token to the prompt as specified by the model but the prompt also ends with a EOS token. So now the final prompt ends with 2 EOS tokens. Are you sure this is what you want?\n");
                    }
                }
            }
            (Engine::Wpm, _) => {
                push_if(&mut out, add_special, s.bos);
                for fr in &frags {
                    match *fr {
                        Fragment::Text(off, len) => wpm::tokenize(
                            &self.token_to_id,
                            self.max_token_len,
                            s.unk,
                            &text[off..off + len],
                            f.lowercase,
                            f.strip_accents,
                            &mut out,
                        ),
                        Fragment::Token(id) => out.push(id),
                    }
                }
                push_if(&mut out, add_special, s.sep);
            }
            (Engine::Ugm(ugm), _) => {
                push_if(&mut out, add_special && f.add_bos, s.bos);
                let uf = UgmFlags {
                    escape_whitespaces: f.escape_whitespaces,
                    treat_whitespace_as_suffix: f.treat_whitespace_as_suffix,
                    add_space_prefix: f.add_space_prefix,
                    remove_extra_whitespaces: f.remove_extra_whitespaces,
                };
                for fr in &frags {
                    match *fr {
                        Fragment::Text(off, len) => {
                            ugm.tokenize(&self.tokens, s.unk, &uf, &text[off..off + len], &mut out)
                        }
                        Fragment::Token(id) => out.push(id),
                    }
                }
                if add_special && f.add_bos && out.len() >= 2 && out[1] == s.bos {
                    warn_double_bos("tokenize");
                }
                push_if(&mut out, add_special && f.add_eos, s.eos);
            }
            (Engine::Rwkv(rwkv), _) => {
                for fr in &frags {
                    match *fr {
                        Fragment::Text(off, len) => {
                            rwkv.tokenize(s.unk, &text[off..off + len], &mut out)
                        }
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
            (Engine::Plamo2(p), _) => {
                for fr in &frags {
                    match *fr {
                        Fragment::Text(off, len) => p.tokenize(&text[off..off + len], &mut out),
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
            (Engine::Test, _) => {
                let n_vocab = self.tokens.len().max(1) as u64;
                for fr in &frags {
                    match *fr {
                        Fragment::Text(off, len) => {
                            for chunk in text[off..off + len].chunks(5) {
                                let h = chunk
                                    .iter()
                                    .fold(0u64, |h, &b| h.wrapping_mul(31).wrapping_add(b as u64));
                                out.push((h % n_vocab) as Token);
                            }
                        }
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
            (Engine::None, _) => {}
        }
        out
    }

    fn tokenize_whitespace(
        &self,
        bpe: &super::bpe::Bpe,
        text: &[u8],
        cache: &mut HashMap<Vec<u8>, Vec<Token>, FxBuild>,
        out: &mut Vec<Token>,
    ) {
        let mut seg: Vec<u8> = Vec::new();
        for cp in unicode::cpts_from_utf8(text) {
            if unicode::flags(cp).is_whitespace() {
                if !seg.is_empty() {
                    bpe.tokenize(&self.token_to_id, &seg, cache, out);
                    seg.clear();
                }
            } else {
                let c = if self.flags.lowercase {
                    unicode::to_lower(cp)
                } else {
                    cp
                };
                unicode::push_utf8(&mut seg, c);
            }
        }
        if !seg.is_empty() {
            bpe.tokenize(&self.token_to_id, &seg, cache, out);
        }
    }

    /// HybridDNA: `<dna>...</dna>` spans become fixed 6-mers, the rest plain BPE.
    fn tokenize_dna(
        &self,
        bpe: &super::bpe::Bpe,
        text: &[u8],
        cache: &mut HashMap<Vec<u8>, Vec<Token>, FxBuild>,
        out: &mut Vec<Token>,
    ) {
        const OPEN: &[u8] = b"<dna>";
        const CLOSE: &[u8] = b"</dna>";
        let ids = (
            self.text_to_token(OPEN),
            self.text_to_token(CLOSE),
            self.text_to_token(b"<oov>"),
        );
        let (Some(begin), Some(end_id), Some(oov)) = ids else {
            bpe.tokenize(&self.token_to_id, text, cache, out);
            return;
        };
        let marker = "\u{E000}".as_bytes();
        let kmer = |k: &[u8], out: &mut Vec<Token>| {
            let mut key = k.to_vec();
            key.extend_from_slice(marker);
            out.push(self.text_to_token(&key).unwrap_or(oov));
        };
        let mut pos = 0;
        while pos < text.len() {
            let Some(start) = memchr::memmem::find(&text[pos..], OPEN).map(|p| p + pos) else {
                bpe.tokenize(&self.token_to_id, &text[pos..], cache, out);
                break;
            };
            if start > pos {
                bpe.tokenize(&self.token_to_id, &text[pos..start], cache, out);
            }
            out.push(begin);
            let cs = start + OPEN.len();
            let close = memchr::memmem::find(&text[cs..], CLOSE).map(|p| p + cs);
            let ce = close.unwrap_or(text.len());
            let seq: Vec<u8> = text[cs..ce]
                .iter()
                .map(|c| c.to_ascii_uppercase())
                .collect();
            let mut i = 0;
            while i + 6 <= seq.len() {
                kmer(&seq[i..i + 6], out);
                i += 6;
            }
            if i < seq.len() {
                let mut k = seq[i..].to_vec();
                k.resize(6, b'A');
                kmer(&k, out);
            }
            let Some(close) = close else { break };
            out.push(end_id);
            pos = close + CLOSE.len();
        }
    }
}
