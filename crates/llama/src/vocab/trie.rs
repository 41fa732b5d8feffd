//! A byte trie with llama.cpp's `naive_trie` semantics (a later insert of the same key replaces
//! the value; the "longest prefix" is the deepest matching path, valued or not).

use std::collections::HashMap;

use super::{FxBuild, Token};

#[derive(Default)]
pub struct Trie {
    edges: HashMap<(u32, u8), u32, FxBuild>,
    values: Vec<Option<Token>>,
}

pub const ROOT: u32 = 0;

impl Trie {
    pub fn new() -> Trie {
        Trie {
            edges: HashMap::default(),
            values: vec![None],
        }
    }

    pub fn insert(&mut self, key: &[u8], value: Token) {
        let mut node = ROOT;
        for &b in key {
            let next_id = self.values.len() as u32;
            let child = *self.edges.entry((node, b)).or_insert(next_id);
            if child == next_id {
                self.values.push(None);
            }
            node = child;
        }
        self.values[node as usize] = Some(value);
    }

    #[inline]
    pub fn child(&self, node: u32, b: u8) -> Option<u32> {
        self.edges.get(&(node, b)).copied()
    }

    #[inline]
    pub fn value(&self, node: u32) -> Option<Token> {
        self.values.get(node as usize).copied().flatten()
    }

    /// Length of the longest prefix of `key` that is a path in the trie.
    pub fn longest_path(&self, key: &[u8]) -> usize {
        let mut node = ROOT;
        for (i, &b) in key.iter().enumerate() {
            match self.child(node, b) {
                Some(c) => node = c,
                None => return i,
            }
        }
        key.len()
    }
}
