//! Unigram (T5; llama.cpp's `llm_tokenizer_ugm`): normalise with SentencePiece's precompiled
//! character map (an XOR-compressed double array of replacements), then pick the tokenization
//! of highest total score by Viterbi over code point positions.

use super::trie::{Trie, ROOT};
use super::{attr, Token, TokenData};

pub struct Ugm {
    charsmap: Vec<u8>,
    xcda_len: usize,
    repl_off: usize,
    token_matcher: Trie,
    user_defined: Trie,
    unknown_score: f64,
}

/// Settings of the vocabulary the normaliser follows.
pub struct UgmFlags {
    pub escape_whitespaces: bool,
    pub treat_whitespace_as_suffix: bool,
    pub add_space_prefix: bool,
    pub remove_extra_whitespaces: bool,
}

impl Ugm {
    /// `charsmap` must have passed the loader's size check (blob size + 4 < length) or be empty.
    pub fn new(tokens: &[TokenData], charsmap: Vec<u8>) -> Ugm {
        let (xcda_len, repl_off) = if charsmap.len() >= 4 {
            let blob =
                u32::from_le_bytes([charsmap[0], charsmap[1], charsmap[2], charsmap[3]]) as usize;
            (blob / 4, 4 + blob)
        } else {
            (0, 0)
        };
        let mut token_matcher = Trie::new();
        let mut user_defined = Trie::new();
        let mut min_score = f32::MAX;
        for (id, t) in tokens.iter().enumerate() {
            if t.attr & attr::NORMAL != 0 {
                min_score = min_score.min(t.score);
            }
            if t.attr & (attr::NORMAL | attr::USER_DEFINED | attr::UNUSED) != 0 {
                token_matcher.insert(t.text.as_bytes(), id as Token);
            }
            if t.attr & attr::USER_DEFINED != 0 {
                user_defined.insert(t.text.as_bytes(), 0);
            }
        }
        Ugm {
            charsmap,
            xcda_len,
            repl_off,
            token_matcher,
            user_defined,
            unknown_score: (min_score - 10.0) as f64,
        }
    }

    fn node(&self, i: usize) -> Option<u32> {
        if i >= self.xcda_len {
            return None;
        }
        let o = 4 + i * 4;
        let b = self.charsmap.get(o..o + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The normalised replacement for the start of `input`: (replacement, bytes consumed).
    fn normalize_prefix<'a>(&'a self, input: &'a [u8]) -> (&'a [u8], usize) {
        if input.is_empty() {
            return (&input[..0], 0);
        }
        let ud = self.user_defined.longest_path(input);
        if ud > 0 {
            return (&input[..ud], ud);
        }
        let mut longest_len = 0;
        let mut longest_off = 0usize;
        if self.xcda_len > 0 {
            let base = |n: u32| (n >> 10) << ((n & (1 << 9)) >> 6);
            if let Some(root) = self.node(0) {
                let mut idx = base(root) as usize;
                for (k, &c) in input.iter().enumerate() {
                    if c == 0 {
                        break;
                    }
                    idx ^= c as usize;
                    let Some(n) = self.node(idx) else { break };
                    if n & ((1u32 << 31) | 0xff) != c as u32 {
                        break;
                    }
                    let is_leaf = (n >> 8) & 1 == 1;
                    idx ^= base(n) as usize;
                    if is_leaf {
                        let Some(v) = self.node(idx) else { break };
                        longest_len = k + 1;
                        longest_off = (v & ((1u32 << 31) - 1)) as usize;
                    }
                }
            }
        }
        if longest_len > 0 {
            let repl = &self.charsmap[self.repl_off.min(self.charsmap.len())..];
            if longest_off < repl.len() {
                let rest = &repl[longest_off..];
                if let Some(end) = rest.iter().position(|&b| b == 0) {
                    return (&rest[..end], longest_len);
                }
            }
            // llama.cpp throws on a corrupt map; treat the prefix as unmapped instead.
        }
        let mut off = 0;
        match super::unicode::decode_at(input, &mut off) {
            Some(_) => (&input[..off], off),
            None => ("\u{FFFD}".as_bytes(), 1),
        }
    }

    fn normalize(&self, input: &[u8], f: &UgmFlags) -> Vec<u8> {
        let mut out = Vec::with_capacity(input.len() * 3);
        let space: &[u8] = if f.escape_whitespaces {
            "\u{2581}".as_bytes()
        } else {
            b" "
        };
        let prepend = !f.treat_whitespace_as_suffix && f.add_space_prefix;
        let append = f.treat_whitespace_as_suffix && f.add_space_prefix;
        let merge = f.remove_extra_whitespaces;
        let mut space_prepended = false;
        let mut non_ws = false;
        let mut off = 0;
        while off < input.len() {
            let (norm, consumed) = self.normalize_prefix(&input[off..]);
            for &c in norm {
                if c != b' ' {
                    if !non_ws {
                        non_ws = true;
                        if (prepend && !space_prepended) || merge {
                            out.extend_from_slice(space);
                            space_prepended = true;
                        }
                    }
                    out.push(c);
                } else {
                    non_ws = false;
                    if !merge {
                        out.extend_from_slice(space);
                    }
                }
            }
            off += consumed.max(1);
        }
        if append {
            out.extend_from_slice(space);
        }
        out
    }

    pub fn tokenize(
        &self,
        tokens: &[TokenData],
        unk: Token,
        flags: &UgmFlags,
        text: &[u8],
        out: &mut Vec<Token>,
    ) {
        let norm = self.normalize(text, flags);
        let n = norm.len();
        if n == 0 {
            return;
        }
        #[derive(Clone, Copy)]
        struct Best {
            id: Token,
            from: usize,
            score: f64,
        }
        let mut best = vec![
            Best {
                id: unk,
                from: 0,
                score: -f64::MAX,
            };
            n + 1
        ];
        best[0].score = 0.0;
        let mut off = 0;
        while off < n {
            let cp_len = super::unicode::utf8_len(norm[off]).min(n - off);
            let cur = best[off];
            let mut single_found = false;
            let mut node = self.token_matcher.child(ROOT, norm[off]);
            let mut p = off + 1;
            while let Some(nd) = node {
                if let Some(id) = self.token_matcher.value(nd) {
                    if p - off == cp_len {
                        single_found = true;
                    }
                    let td = &tokens[id as usize];
                    let s = if td.attr & attr::USER_DEFINED != 0 {
                        0.0
                    } else {
                        td.score as f64
                    };
                    let challenger = cur.score + s;
                    if challenger > best[p].score {
                        best[p] = Best {
                            id,
                            from: off,
                            score: challenger,
                        };
                    }
                }
                if p >= n {
                    break;
                }
                node = self.token_matcher.child(nd, norm[p]);
                p += 1;
            }
            if !single_found {
                let challenger = cur.score + self.unknown_score;
                let p = off + cp_len;
                if challenger > best[p].score {
                    best[p] = Best {
                        id: unk,
                        from: off,
                        score: challenger,
                    };
                }
            }
            off += cp_len;
        }
        let start = out.len();
        let mut prev_unknown = false;
        let mut t = best[n];
        loop {
            let is_unknown = t.id == unk;
            if !(prev_unknown && is_unknown) {
                out.push(t.id);
            }
            if t.from == 0 {
                break;
            }
            prev_unknown = is_unknown;
            t = best[t.from];
        }
        out[start..].reverse();
    }
}
