//! The iteration order of llama.cpp's `std::unordered_map<std::string, llama_token>` built by
//! inserting the vocabulary in id order, as libstdc++ lays it out. llama.cpp detects EOT/FIM
//! tokens and prints its "control-looking token" warnings while walking that map, so the first
//! match in this order decides e.g. whether Qwen2's EOT is `<|im_end|>` or `<|endoftext|>`.
//!
//! libstdc++: `std::hash<std::string>` is `_Hash_bytes(data, len, 0xc70f6907)` (a 64-bit
//! MurmurHash2 variant); a node is inserted at the front of its bucket, or at the front of the
//! whole list when its bucket is empty; the table grows to the bucket counts below (prime
//! rehash policy, max load factor 1) when the element count would exceed the bucket count.

const SEED: u64 = 0xc70f_6907;
const MUL: u64 = (0xc6a4_a793u64 << 32) + 0x5bd1_e995;

#[inline]
fn shift_mix(v: u64) -> u64 {
    v ^ (v >> 47)
}

/// libstdc++'s `std::hash<std::string>` on a 64-bit target.
pub fn std_hash(bytes: &[u8]) -> u64 {
    let len = bytes.len();
    let aligned = len & !7;
    let mut hash = SEED ^ (len as u64).wrapping_mul(MUL);
    for chunk in bytes[..aligned].chunks_exact(8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        let data = shift_mix(u64::from_le_bytes(w).wrapping_mul(MUL)).wrapping_mul(MUL);
        hash ^= data;
        hash = hash.wrapping_mul(MUL);
    }
    if len & 7 != 0 {
        let mut data = 0u64;
        for &b in bytes[aligned..].iter().rev() {
            data = (data << 8) | b as u64;
        }
        hash ^= data;
        hash = hash.wrapping_mul(MUL);
    }
    hash = shift_mix(hash).wrapping_mul(MUL);
    shift_mix(hash)
}

/// Bucket counts a default-constructed map passes through as elements are added one by one
/// (measured from libstdc++): it grows to the next one when the count would exceed the current.
const BUCKETS: [usize; 19] = [
    13, 29, 59, 127, 257, 541, 1109, 2357, 5087, 10273, 20753, 42043, 85229, 172933, 351061,
    712697, 1447153, 2938679, 5967347,
];

const NONE: usize = usize::MAX;
const BEFORE_BEGIN: usize = usize::MAX - 1;

struct List {
    next: Vec<usize>,
    head: usize,
    hashes: Vec<u64>,
}

impl List {
    fn next_of(&self, n: usize) -> usize {
        if n == BEFORE_BEGIN {
            self.head
        } else {
            self.next[n]
        }
    }
    fn set_next(&mut self, n: usize, v: usize) {
        if n == BEFORE_BEGIN {
            self.head = v;
        } else {
            self.next[n] = v;
        }
    }
}

/// Indices of `keys` (distinct, inserted in order) in the order a libstdc++ unordered_map
/// iterates them.
pub fn iteration_order(keys: &[&[u8]]) -> Vec<usize> {
    let n = keys.len();
    let mut list = List {
        next: vec![NONE; n],
        head: NONE,
        hashes: keys.iter().map(|k| std_hash(k)).collect(),
    };
    let mut buckets: Vec<usize> = vec![NONE; 1];
    let mut next_resize = 0usize;
    let mut grow = BUCKETS.iter();
    for node in 0..n {
        if node + 1 > next_resize {
            if let Some(&nb) = grow.next() {
                buckets = rehash(&mut list, nb);
                next_resize = nb;
            } else {
                next_resize = usize::MAX;
            }
        }
        let nb = buckets.len();
        let bkt = (list.hashes[node] % nb as u64) as usize;
        if buckets[bkt] != NONE {
            let prev = buckets[bkt];
            list.next[node] = list.next_of(prev);
            list.set_next(prev, node);
        } else {
            list.next[node] = list.head;
            list.head = node;
            let nx = list.next[node];
            if nx != NONE {
                buckets[(list.hashes[nx] % nb as u64) as usize] = node;
            }
            buckets[bkt] = BEFORE_BEGIN;
        }
    }
    let mut order = Vec::with_capacity(n);
    let mut p = list.head;
    while p != NONE {
        order.push(p);
        p = list.next[p];
    }
    order
}

fn rehash(list: &mut List, nb: usize) -> Vec<usize> {
    let mut buckets = vec![NONE; nb];
    let mut p = list.head;
    list.head = NONE;
    let mut bbegin_bkt = 0;
    while p != NONE {
        let next = list.next[p];
        let bkt = (list.hashes[p] % nb as u64) as usize;
        if buckets[bkt] == NONE {
            list.next[p] = list.head;
            list.head = p;
            buckets[bkt] = BEFORE_BEGIN;
            if list.next[p] != NONE {
                buckets[bbegin_bkt] = p;
            }
            bbegin_bkt = bkt;
        } else {
            let prev = buckets[bkt];
            list.next[p] = list.next_of(prev);
            list.set_next(prev, p);
        }
        p = next;
    }
    buckets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_matches_libstdcxx() {
        assert_eq!(std_hash(b"hello"), 2762169579135187400);
        assert_eq!(std_hash(b""), 6142509188972423790);
        assert_eq!(std_hash(b"abcdefghij"), 18042067762304121004);
    }

    #[test]
    fn order_is_a_permutation() {
        let keys: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
        let mut order = iteration_order(&refs);
        assert_eq!(order.len(), 1000);
        order.sort();
        assert!(order.iter().enumerate().all(|(i, &v)| i == v));
    }
}
