//! Splitting raw text around special tokens before tokenization (llama.cpp's
//! `tokenizer_st_partition`): special tokens are tried longest first; each one cuts every
//! remaining text fragment at its leftmost non-overlapping occurrences, honouring the
//! token's LSTRIP/RSTRIP attributes.

use memchr::memmem;

use super::{attr, Token, Vocab};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fragment {
    Token(Token),
    /// Byte range of the raw text.
    Text(usize, usize),
}

/// C's `isspace` in the "C" locale.
pub fn c_isspace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

impl Vocab {
    pub(crate) fn partition(&self, raw: &[u8], parse_special: bool) -> Vec<Fragment> {
        if raw.is_empty() {
            return Vec::new();
        }
        let mut frags = vec![Fragment::Text(0, raw.len())];
        for &id in &self.cache_special {
            let data = &self.tokens[id as usize];
            if !parse_special && data.attr & (attr::CONTROL | attr::UNKNOWN) != 0 {
                continue;
            }
            let needle = data.text.as_bytes();
            if needle.is_empty() || memmem::find(raw, needle).is_none() {
                continue;
            }
            let finder = memmem::Finder::new(needle);
            let mut next = Vec::with_capacity(frags.len() + 2);
            for f in frags {
                let Fragment::Text(off, len) = f else {
                    next.push(f);
                    continue;
                };
                let end = off + len;
                let mut pos = off;
                loop {
                    let Some(rel) = finder.find(&raw[pos..end]) else {
                        if pos < end {
                            next.push(Fragment::Text(pos, end - pos));
                        }
                        break;
                    };
                    let m = pos + rel;
                    if m > pos {
                        let mut left_len = m - pos;
                        if data.attr & attr::LSTRIP != 0 {
                            while left_len > 0 && c_isspace(raw[pos + left_len - 1]) {
                                left_len -= 1;
                            }
                        }
                        if left_len > 0 {
                            next.push(Fragment::Text(pos, left_len));
                        }
                    }
                    next.push(Fragment::Token(id));
                    let after = m + needle.len();
                    if after >= end {
                        break;
                    }
                    let mut right = after;
                    if data.attr & attr::RSTRIP != 0 {
                        while right < end && c_isspace(raw[right]) {
                            right += 1;
                        }
                    }
                    pos = right;
                    if pos >= end {
                        break;
                    }
                }
            }
            frags = next;
        }
        frags
    }
}
