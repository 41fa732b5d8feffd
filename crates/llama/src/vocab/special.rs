//! Splitting raw text around special tokens before tokenization (llama.cpp's
//! `tokenizer_st_partition`): special tokens are tried longest first; each one cuts every
//! remaining text fragment at its leftmost non-overlapping occurrences, honouring the
//! token's LSTRIP/RSTRIP attributes.

use std::sync::OnceLock;

use aho_corasick::AhoCorasick;
use memchr::memmem;

use super::{attr, Token, Vocab};

/// One automaton over the special tokens that take part in partitioning (all of them, or only
/// the user-defined ones when special tokens are not parsed), to learn in a single pass which
/// of them occur in a text at all.
#[derive(Default)]
pub struct SpecialMatcher {
    cell: [OnceLock<Option<Built>>; 2],
}

/// The automaton and the token id of each of its patterns.
type Built = (AhoCorasick, Vec<Token>);

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
    /// The special tokens that occur somewhere in `raw` (sorted ids), or `None` when no
    /// automaton could be built (then each token is searched for on its own).
    fn special_present(&self, raw: &[u8], parse_special: bool) -> Option<Vec<Token>> {
        let built = self.special_matcher.cell[parse_special as usize].get_or_init(|| {
            let ids: Vec<Token> = self
                .cache_special
                .iter()
                .copied()
                .filter(|&id| {
                    let a = self.tokens[id as usize].attr;
                    parse_special || a & (attr::CONTROL | attr::UNKNOWN) == 0
                })
                .collect();
            let pats: Vec<&[u8]> = ids
                .iter()
                .map(|&id| self.tokens[id as usize].text.as_bytes())
                .collect();
            AhoCorasick::new(&pats).ok().map(|ac| (ac, ids))
        });
        let (ac, ids) = built.as_ref()?;
        let mut seen = vec![false; ids.len()];
        for m in ac.find_overlapping_iter(raw) {
            seen[m.pattern().as_usize()] = true;
        }
        let mut out: Vec<Token> = ids
            .iter()
            .zip(seen)
            .filter_map(|(&id, s)| s.then_some(id))
            .collect();
        out.sort_unstable();
        Some(out)
    }

    pub(crate) fn partition(&self, raw: &[u8], parse_special: bool) -> Vec<Fragment> {
        if raw.is_empty() {
            return Vec::new();
        }
        let mut frags = vec![Fragment::Text(0, raw.len())];
        let present = self.special_present(raw, parse_special);
        for &id in &self.cache_special {
            let data = &self.tokens[id as usize];
            if !parse_special && data.attr & (attr::CONTROL | attr::UNKNOWN) != 0 {
                continue;
            }
            let needle = data.text.as_bytes();
            let occurs = match &present {
                Some(p) => p.binary_search(&id).is_ok(),
                None => memmem::find(raw, needle).is_some(),
            };
            if needle.is_empty() || !occurs {
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
