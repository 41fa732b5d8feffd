//! `llama_token_to_piece` and `llama_detokenize`: the text of tokens, with the SentencePiece
//! space marker and GPT-2 byte encoding undone, byte tokens as raw bytes, control tokens only
//! when asked for, and BPE's clean-up of spaces before punctuation.

use super::{attr, rwkv, unicode, Token, Vocab, VocabType};

/// Value of the two hex digits after `<0x` in a byte token's text (strtol's leniency: the
/// digits that parse, 0 if none).
fn byte_of(text: &str) -> u8 {
    let b = text.as_bytes();
    let hex = b.get(3..b.len().min(5)).unwrap_or(&[]);
    let mut v: u32 = 0;
    for &c in hex {
        match (c as char).to_digit(16) {
            Some(d) => v = v * 16 + d,
            None => break,
        }
    }
    v as u8
}

fn unescape_spaces(text: &str) -> Vec<u8> {
    text.replace('\u{2581}', " ").into_bytes()
}

/// GPT-2 byte decoding; code points outside the byte map become `[UNK_BYTE_0x..<text>]`.
fn decode_text(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for cp in unicode::cpts_from_utf8(text.as_bytes()) {
        match unicode::cpt_to_byte(cp) {
            Some(b) => out.push(b),
            None => {
                out.extend_from_slice(b"[UNK_BYTE_0x");
                for c in unicode::cpt_to_utf8(cp) {
                    out.extend_from_slice(format!("{c:02x}").as_bytes());
                }
                out.extend_from_slice(text.as_bytes());
                out.push(b']');
            }
        }
    }
    out
}

impl Vocab {
    pub(crate) fn token_to_piece_uncached(&self, token: Token, special: bool) -> Vec<u8> {
        let Some(td) = self.token(token) else {
            return Vec::new();
        };
        let a = td.attr;
        let special_attr = attr::UNKNOWN | attr::CONTROL;
        if !special && a & special_attr != 0 {
            return Vec::new();
        }
        let text = td.text.as_str();
        match self.vtype {
            VocabType::Wpm | VocabType::Spm | VocabType::Ugm | VocabType::Bpe => {
                if a & (special_attr | attr::USER_DEFINED) != 0 {
                    return text.as_bytes().to_vec();
                }
                if a & attr::NORMAL != 0 {
                    if self.vtype != VocabType::Bpe || self.flags.escape_whitespaces {
                        return unescape_spaces(text);
                    }
                    return decode_text(text);
                }
                if a & attr::BYTE != 0 && self.vtype != VocabType::Wpm {
                    return vec![byte_of(text)];
                }
                Vec::new()
            }
            VocabType::Rwkv => rwkv::unescape(text.as_bytes()),
            VocabType::Test => format!("{token:x}").into_bytes(),
            VocabType::Plamo2 => {
                let b = text.as_bytes();
                if a & attr::BYTE != 0 && b.len() == 6 && b.starts_with(b"<0x") && b[5] == b'>' {
                    if let Ok(v) = u8::from_str_radix(&text[3..5], 16) {
                        return vec![v];
                    }
                }
                b.to_vec()
            }
            VocabType::None => Vec::new(),
        }
    }

    /// The text of one token; `lstrip` leading spaces are dropped, and control/unknown tokens
    /// are empty unless `special`.
    pub fn token_to_piece(&self, token: Token, lstrip: usize, special: bool) -> Vec<u8> {
        let Some(td) = self.token(token) else {
            return Vec::new();
        };
        if !special && td.attr & (attr::UNKNOWN | attr::CONTROL) != 0 {
            return Vec::new();
        }
        let piece = match self.piece_cache.get(token as usize) {
            Some(p) => std::borrow::Cow::Borrowed(p.as_slice()),
            None => std::borrow::Cow::Owned(self.token_to_piece_uncached(token, special)),
        };
        // llama.cpp strips through its piece cache, so for every tokenizer type.
        let mut p: &[u8] = &piece;
        let mut i = 0;
        while i < lstrip && p.first() == Some(&b' ') {
            p = &p[1..];
            i += 1;
        }
        p.to_vec()
    }

    /// Text of a token sequence (`llama_detokenize`): `remove_special` drops the BOS/EOS the
    /// vocabulary adds, `unparse_special` renders control tokens.
    pub fn detokenize(
        &self,
        tokens: &[Token],
        remove_special: bool,
        unparse_special: bool,
    ) -> Vec<u8> {
        if self.vtype == VocabType::None {
            return Vec::new();
        }
        let mut toks = tokens;
        let mut remove_space = self.flags.add_space_prefix;
        if remove_special && self.flags.add_bos && toks.first() == Some(&self.special.bos) {
            remove_space = false;
            toks = &toks[1..];
        }
        if remove_special && self.flags.add_eos && toks.last() == Some(&self.special.eos) {
            toks = &toks[..toks.len() - 1];
        }
        let mut text: Vec<u8> = Vec::new();
        for &t in toks {
            text.extend_from_slice(&self.token_to_piece(t, remove_space as usize, unparse_special));
            remove_space = false;
        }
        if self.flags.clean_spaces {
            clean_spaces(&mut text);
        }
        text
    }
}

/// BPE's clean-up passes, in place exactly as llama.cpp runs them (each pass reads what the
/// previous iterations wrote).
fn clean_spaces(text: &mut Vec<u8>) {
    let total1 = text.len();
    let mut total = usize::from(total1 > 0);
    for i in 1..total1 {
        let x = text[i];
        if text[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            total -= 1;
        }
        text[total] = x;
        total += 1;
    }

    let total2 = total;
    total = usize::from(total2 > 0);
    let mut i = 1;
    while i < total2 {
        let x = text[i];
        if x == b'\'' && i + 1 < total2 && text[i - 1] == b' ' && text[i + 1] == b' ' {
            total -= 1;
            i += 1;
            text[i] = 0;
        }
        text[total] = x;
        total += 1;
        i += 1;
    }

    let total3 = total;
    total = usize::from(total3 > 0);
    for i in 1..total3 {
        let x = text[i];
        if text[i - 1] == b' ' && x == b'\'' && i + 1 < total3 {
            let x1 = text[i + 1];
            if x1 == b's' || x1 == b'm' {
                total -= 1;
            } else if x1 != b't' && x1 != b'd' && i + 2 < total3 {
                let x2 = text[i + 2];
                if x2 == b'e' && (x1 == b'r' || x1 == b'v') {
                    total -= 1;
                }
            }
        }
        text[total] = x;
        total += 1;
    }
    text.truncate(total);
}

#[cfg(test)]
pub(crate) fn clean_spaces_for_test(text: &mut Vec<u8>) {
    clean_spaces(text);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean(s: &str) -> String {
        let mut v = s.as_bytes().to_vec();
        clean_spaces(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn clean_spaces_matches_llama_cpp() {
        assert_eq!(clean("Hello , world !"), "Hello, world!");
        assert_eq!(clean("a ' b"), "a'b");
        assert_eq!(
            clean("it 's I 'm we 're they 've I 'll he 'd don 't"),
            "it's I'm we're they've I 'll he 'd don 't"
        );
        assert_eq!(clean(""), "");
        assert_eq!(clean(" ."), ".");
    }
}
