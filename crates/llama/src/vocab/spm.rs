//! SentencePiece BPE (llama.cpp's `llm_tokenizer_spm_session`): start from UTF-8 characters and
//! repeatedly merge the adjacent pair whose concatenation is the highest-scoring vocabulary
//! token (leftmost on ties); leftover characters that are not tokens become byte tokens.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::unicode;
use super::{Token, TokenData, TokenMap};

struct Sym {
    start: usize,
    n: usize,
    prev: i32,
    next: i32,
}

struct Bigram {
    score: f32,
    left: i32,
    right: i32,
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl Ord for Bigram {
    // llama.cpp's comparator: higher score first, then the leftmost pair.
    fn cmp(&self, o: &Self) -> Ordering {
        match self.score.partial_cmp(&o.score) {
            Some(Ordering::Equal) | None => o.left.cmp(&self.left),
            Some(ord) => ord,
        }
    }
}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// Tokenize `text` (spaces already escaped to U+2581), appending to `out`. `byte_token` maps a
/// byte to its `<0xXX>` token. A character that is no token and has no byte tokens for all its
/// bytes (a vocabulary without `<0xXX>` tokens) becomes `unk`; llama.cpp throws there
/// (`unordered_map::at` in byte_to_token) and ends the program. Returns how many characters
/// could not be encoded at all (no byte tokens and `unk` is TOKEN_NULL): they are left out.
pub fn tokenize(
    tokens: &TokenMap,
    data: &[TokenData],
    byte_token: &dyn Fn(u8) -> Option<Token>,
    unk: Token,
    text: &[u8],
    out: &mut Vec<Token>,
) -> usize {
    let mut syms: Vec<Sym> = Vec::with_capacity(text.len());
    let mut off = 0;
    while off < text.len() {
        let n = unicode::utf8_len(text[off]).min(text.len() - off);
        let idx = syms.len() as i32;
        syms.push(Sym {
            start: off,
            n,
            prev: idx - 1,
            next: if off + n == text.len() { -1 } else { idx + 1 },
        });
        off += n;
    }
    let mut heap = BinaryHeap::new();
    let try_add = |syms: &[Sym], heap: &mut BinaryHeap<Bigram>, l: i32, r: i32| {
        if l < 0 || r < 0 {
            return;
        }
        let (a, b) = (&syms[l as usize], &syms[r as usize]);
        let piece = &text[a.start..a.start + a.n + b.n];
        if let Some(&id) = tokens.get(piece) {
            if let Some(td) = data.get(id as usize) {
                heap.push(Bigram {
                    score: td.score,
                    left: l,
                    right: r,
                    size: piece.len(),
                });
            }
        }
    };
    for i in 1..syms.len() {
        try_add(&syms, &mut heap, i as i32 - 1, i as i32);
    }
    while let Some(bg) = heap.pop() {
        let (l, r) = (bg.left as usize, bg.right as usize);
        if syms[l].n == 0 || syms[r].n == 0 || syms[l].n + syms[r].n != bg.size {
            continue;
        }
        syms[l].n += syms[r].n;
        syms[r].n = 0;
        let rn = syms[r].next;
        syms[l].next = rn;
        if rn >= 0 {
            syms[rn as usize].prev = bg.left;
        }
        let lp = syms[l].prev;
        try_add(&syms, &mut heap, lp, bg.left);
        try_add(&syms, &mut heap, bg.left, rn);
    }
    // Every merged symbol is a vocabulary token by construction, so only unmerged characters
    // can miss here; llama.cpp's reverse-merge table never holds a single character, which
    // leaves the byte fallback.
    let mut dropped = 0;
    let mut i = 0i32;
    while i >= 0 && (i as usize) < syms.len() {
        let s = &syms[i as usize];
        let piece = &text[s.start..s.start + s.n];
        match tokens.get(piece) {
            Some(&id) => out.push(id),
            None => {
                let bytes: Option<Vec<Token>> = piece.iter().map(|&b| byte_token(b)).collect();
                match bytes {
                    Some(ids) => out.extend(ids),
                    None if unk != super::TOKEN_NULL => out.push(unk),
                    None => dropped += 1,
                }
            }
        }
        i = s.next;
    }
    dropped
}
