//! Byte-level BPE (llama.cpp's `llm_tokenizer_bpe_session`): pre-tokenize into words, then in
//! each word repeatedly merge the adjacent pair of lowest merge rank (leftmost on ties).
//!
//! Pieces are interned so that a pair lookup is one hash of two integers instead of two string
//! concatenations; the merge order, the tie-break and the outdated-pair check are llama.cpp's.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use super::pretok::{self, PreTokenizer};
use super::pretype::PreType;
use super::unicode;
use super::{FxBuild, Token, TokenMap, TOKEN_NULL};

const NO_PIECE: u32 = u32::MAX;

pub struct Bpe {
    pub pre: PreTokenizer,
    pub pre_type: PreType,
    pub byte_encode: bool,
    pub ignore_merges: bool,
    /// Pieces are token ids; strings of the merge list that are not tokens get ids from
    /// `n_tokens` on.
    n_tokens: u32,
    extra: HashMap<Box<[u8]>, u32, FxBuild>,
    /// (left piece, right piece) -> (rank, merged piece)
    merges: HashMap<(u32, u32), (u32, u32), FxBuild>,
    pub n_merges: usize,
}

impl Bpe {
    pub fn new(
        tokens: &TokenMap,
        n_tokens: usize,
        pre: PreTokenizer,
        pre_type: PreType,
        byte_encode: bool,
        ignore_merges: bool,
        merges: &[&str],
    ) -> Bpe {
        let n_tokens = n_tokens as u32;
        let mut extra: HashMap<Box<[u8]>, u32, FxBuild> = HashMap::default();
        let mut intern = |s: &[u8]| -> u32 {
            if let Some(&id) = tokens.get(s) {
                return id as u32;
            }
            if let Some(&id) = extra.get(s) {
                return id;
            }
            let n = n_tokens + extra.len() as u32;
            extra.insert(s.into(), n);
            n
        };
        let mut table: HashMap<(u32, u32), (u32, u32), FxBuild> = HashMap::default();
        table.reserve(merges.len());
        let mut joined = Vec::new();
        for (rank, m) in merges.iter().enumerate() {
            let b = m.as_bytes();
            // llama.cpp splits at the first space after the first byte; without one, the pair
            // is ("", "").
            let (first, second) = match b.iter().skip(1).position(|&c| c == b' ') {
                Some(p) => (&b[..p + 1], &b[p + 2..]),
                None => (&b[..0], &b[..0]),
            };
            let l = intern(first);
            let r = intern(second);
            joined.clear();
            joined.extend_from_slice(first);
            joined.extend_from_slice(second);
            let j = intern(&joined);
            table.entry((l, r)).or_insert((rank as u32, j));
        }
        Bpe {
            pre,
            pre_type,
            byte_encode,
            ignore_merges,
            n_tokens,
            n_merges: table.len(),
            extra,
            merges: table,
        }
    }

    fn piece(&self, tokens: &TokenMap, s: &[u8]) -> u32 {
        if let Some(&id) = tokens.get(s) {
            return id as u32;
        }
        self.extra.get(s).copied().unwrap_or(NO_PIECE)
    }

    /// Tokenize one fragment of raw text, appending to `out`.
    pub fn tokenize(
        &self,
        tokens: &TokenMap,
        text: &[u8],
        cache: &mut HashMap<Vec<u8>, Vec<Token>, FxBuild>,
        out: &mut Vec<Token>,
    ) {
        for word in pretok::words(&self.pre, text, self.byte_encode) {
            if let Some(ids) = cache.get(&word) {
                out.extend_from_slice(ids);
                continue;
            }
            let start = out.len();
            self.tokenize_word(tokens, &word, out);
            cache.insert(word, out[start..].to_vec());
        }
    }

    fn tokenize_word(&self, tokens: &TokenMap, word: &[u8], out: &mut Vec<Token>) {
        let whole = |w: &[u8]| tokens.get(w).copied();
        if self.ignore_merges {
            if let Some(id) = whole(word) {
                out.push(id);
                return;
            }
        }
        if self.pre_type == PreType::Gemma4 && word.iter().all(|&c| c == b'\n') {
            if let Some(id) = whole(word) {
                out.push(id);
                return;
            }
        }
        let mut syms: Vec<Sym> = Vec::with_capacity(word.len());
        let mut off = 0;
        while off < word.len() {
            let n = unicode::utf8_len(word[off]).min(word.len() - off);
            let idx = syms.len() as i32;
            syms.push(Sym {
                start: off,
                n,
                prev: idx - 1,
                next: if off + n == word.len() { -1 } else { idx + 1 },
                piece: self.piece(tokens, &word[off..off + n]),
            });
            off += n;
        }
        let mut heap = BinaryHeap::new();
        for i in 1..syms.len() {
            self.push_pair(&syms, i as i32 - 1, i as i32, &mut heap);
        }
        while let Some(p) = heap.pop() {
            let (l, r) = (p.left as usize, p.right as usize);
            if syms[l].n == 0 || syms[r].n == 0 || syms[l].piece != p.lp || syms[r].piece != p.rp {
                continue;
            }
            syms[l].n += syms[r].n;
            syms[l].piece = p.merged;
            syms[r].n = 0;
            let rn = syms[r].next;
            syms[l].next = rn;
            if rn >= 0 {
                syms[rn as usize].prev = p.left;
            }
            let lp = syms[l].prev;
            self.push_pair(&syms, lp, p.left, &mut heap);
            self.push_pair(&syms, p.left, rn, &mut heap);
        }
        let mut i = 0i32;
        while i >= 0 && (i as usize) < syms.len() {
            let s = &syms[i as usize];
            if s.n > 0 {
                let text = &word[s.start..s.start + s.n];
                if s.piece < self.n_tokens {
                    out.push(s.piece as Token);
                } else {
                    self.byte_fallback(tokens, text, out);
                }
            }
            i = s.next;
        }
    }

    fn byte_fallback(&self, tokens: &TokenMap, text: &[u8], out: &mut Vec<Token>) {
        for &b in text {
            let id = if self.byte_encode {
                tokens.get(&[b][..]).copied()
            } else {
                tokens.get(format!("<0x{b:02X}>").as_bytes()).copied()
            };
            if let Some(id) = id.filter(|&id| id != TOKEN_NULL) {
                out.push(id);
            }
        }
    }

    fn push_pair(&self, syms: &[Sym], left: i32, right: i32, heap: &mut BinaryHeap<Pair>) {
        if left < 0 || right < 0 {
            return;
        }
        let (lp, rp) = (syms[left as usize].piece, syms[right as usize].piece);
        if lp == NO_PIECE || rp == NO_PIECE {
            return;
        }
        if let Some(&(rank, merged)) = self.merges.get(&(lp, rp)) {
            heap.push(Pair {
                rank,
                left,
                right,
                lp,
                rp,
                merged,
            });
        }
    }
}

struct Sym {
    start: usize,
    n: usize,
    prev: i32,
    next: i32,
    piece: u32,
}

#[derive(PartialEq, Eq)]
struct Pair {
    rank: u32,
    left: i32,
    right: i32,
    lp: u32,
    rp: u32,
    merged: u32,
}

impl Ord for Pair {
    // BinaryHeap pops the greatest: lowest rank first, then leftmost.
    fn cmp(&self, o: &Self) -> Ordering {
        o.rank.cmp(&self.rank).then(o.left.cmp(&self.left))
    }
}

impl PartialOrd for Pair {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
