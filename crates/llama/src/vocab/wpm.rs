//! WordPiece (BERT; llama.cpp's `llm_tokenizer_wpm_session`): normalise and split into words,
//! then cover each word (with a U+2581 phantom space in front) greedily by the longest tokens.

use super::unicode;
use super::{Token, TokenMap};

fn is_chinese_char(cp: u32) -> bool {
    // 0x2B920 rather than 0x2B820 follows HF's Rust code, as llama.cpp does.
    matches!(cp,
        0x04E00..=0x09FFF
        | 0x03400..=0x04DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B920..=0x2CEAF
        | 0x0F900..=0x0FAFF
        | 0x2F800..=0x2FA1F)
}

/// BERT's basic tokenisation: drop controls, optionally lowercase and strip accents, split on
/// whitespace and around punctuation, ASCII symbols and CJK characters.
pub fn preprocess(text: &[u8], lowercase: bool, strip_accents: bool) -> Vec<Vec<u8>> {
    let mut cpts = unicode::cpts_from_utf8(text);
    if strip_accents {
        for c in cpts.iter_mut() {
            *c = unicode::nfd_first(*c);
        }
    }
    let mut words: Vec<Vec<u8>> = vec![Vec::new()];
    for cp in cpts {
        let f = unicode::flags(cp);
        if f.is_whitespace() {
            if !words.last().is_some_and(|w| w.is_empty()) {
                words.push(Vec::new());
            }
            continue;
        }
        if cp == 0 || cp == 0xFFFD || f.is_control() {
            continue;
        }
        if strip_accents && f.is_accent_mark() {
            continue;
        }
        let s = unicode::cpt_to_utf8(if lowercase { unicode::to_lower(cp) } else { cp });
        if f.is_punctuation() || (cp < 0x7F && f.is_symbol()) || is_chinese_char(cp) {
            if !words.last().is_some_and(|w| w.is_empty()) {
                words.push(Vec::new());
            }
            if let Some(last) = words.last_mut() {
                *last = s;
            }
            words.push(Vec::new());
        } else if let Some(last) = words.last_mut() {
            last.extend_from_slice(&s);
        }
    }
    if words.last().is_some_and(|w| w.is_empty()) {
        words.pop();
    }
    words
}

pub fn tokenize(
    tokens: &TokenMap,
    max_token_len: usize,
    unk: Token,
    text: &[u8],
    lowercase: bool,
    strip_accents: bool,
    out: &mut Vec<Token>,
) {
    for word in preprocess(text, lowercase, strip_accents) {
        if word.is_empty() {
            continue;
        }
        let mut w = "\u{2581}".as_bytes().to_vec();
        w.extend_from_slice(&word);
        let n = w.len();
        let current = out.len();
        let mut i = 0;
        while i < n {
            let mut matched = false;
            let mut j = n.min(i + max_token_len + 1);
            while j > i {
                if let Some(&id) = tokens.get(&w[i..j]) {
                    out.push(id);
                    matched = true;
                    i = j - 1;
                    break;
                }
                j -= 1;
            }
            if !matched {
                out.truncate(current);
                break;
            }
            i += 1;
        }
        if out.len() == current {
            out.push(unk);
        }
    }
}
