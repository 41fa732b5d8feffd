//! RWKV "world" tokenizer: tokens are escaped byte strings; text is covered greedily by the
//! longest token found in a byte trie.

use super::trie::{Trie, ROOT};
use super::{Token, TokenData};

/// Undo the escaping of an RWKV token text (`\t`, `\n`, `\r`, `\xHH`, `\<c>`).
pub fn unescape(escaped: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(escaped.len());
    let mut escaping = false;
    let mut hex_remaining = 0u8;
    let mut hex_acc = 0u8;
    for &c in escaped {
        if hex_remaining != 0 {
            let v = if c >= b'a' {
                c.wrapping_sub(b'a').wrapping_add(10)
            } else {
                c.wrapping_sub(b'0')
            };
            hex_acc = (hex_acc << 4).wrapping_add(v);
            hex_remaining -= 1;
            if hex_remaining == 0 {
                out.push(hex_acc);
                hex_acc = 0;
            }
            continue;
        }
        if escaping {
            match c {
                b't' => out.push(b'\t'),
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b'x' => hex_remaining = 2,
                _ => out.push(c),
            }
            escaping = false;
            continue;
        }
        if c == b'\\' {
            escaping = true;
            continue;
        }
        out.push(c);
    }
    out
}

pub struct Rwkv {
    trie: Trie,
}

impl Rwkv {
    pub fn new(tokens: &[TokenData]) -> Rwkv {
        let mut trie = Trie::new();
        for (id, t) in tokens.iter().enumerate() {
            trie.insert(&unescape(t.text.as_bytes()), id as Token);
        }
        Rwkv { trie }
    }

    pub fn tokenize(&self, unk: Token, text: &[u8], out: &mut Vec<Token>) {
        let mut pos = 0usize;
        while pos < text.len() {
            let Some(mut node) = self.trie.child(ROOT, text[pos]) else {
                out.push(unk);
                pos += 1;
                continue;
            };
            let start = pos;
            let mut best: Option<(Token, usize)> = None;
            loop {
                if let Some(v) = self.trie.value(node) {
                    best = Some((v, pos + 1));
                }
                if pos + 1 >= text.len() {
                    break;
                }
                pos += 1;
                match self.trie.child(node, text[pos]) {
                    Some(n) => node = n,
                    None => break,
                }
            }
            match best {
                Some((id, end)) => {
                    out.push(id);
                    pos = end;
                }
                // llama.cpp would restart from position 0 forever here; emit the unknown token
                // for the first byte instead.
                None => {
                    out.push(unk);
                    pos = start + 1;
                }
            }
        }
    }
}
