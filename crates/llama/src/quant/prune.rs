//! `--prune-layers`: drop whole layers and renumber the rest (llama.cpp's remap_layer).

use std::collections::BTreeMap;

/// Renames `blk.N.` tensors as layers are pruned; names must come in the loader's order
/// (by layer), which makes the new numbers consecutive.
pub struct LayerMap {
    /// Sorted, without duplicates.
    prune: Vec<u32>,
    /// Old layer -> new layer, `None` for a pruned one.
    mapped: BTreeMap<u64, Option<u64>>,
    next_id: u64,
}

/// The layer number of `blk.N.` anywhere in the name (llama.cpp's regex `blk\.(\d+)\.`),
/// with the byte range of the digits.
fn find_layer(name: &str) -> Option<(u64, std::ops::Range<usize>)> {
    let bytes = name.as_bytes();
    let mut from = 0;
    while let Some(p) = name[from..].find("blk.") {
        let start = from + p + 4;
        let end = start
            + bytes[start..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
        if end > start && bytes.get(end) == Some(&b'.') {
            if let Ok(n) = name[start..end].parse::<u64>() {
                return Some((n, start..end));
            }
        }
        from = from + p + 1;
    }
    None
}

impl LayerMap {
    pub fn new(mut prune: Vec<u32>) -> LayerMap {
        prune.sort_unstable();
        prune.dedup();
        LayerMap {
            prune,
            mapped: BTreeMap::new(),
            next_id: 0,
        }
    }

    pub fn is_active(&self) -> bool {
        !self.prune.is_empty()
    }

    /// The tensor's new name, or `None` when its layer is pruned.
    pub fn remap(&mut self, name: &str) -> Option<String> {
        if self.prune.is_empty() {
            return Some(name.to_string());
        }
        let Some((blk, range)) = find_layer(name) else {
            return Some(name.to_string());
        };
        let new = *self.mapped.entry(blk).or_insert_with(|| {
            if self.prune.iter().any(|&p| p as u64 == blk) {
                None
            } else if blk < self.prune[0] as u64 {
                self.next_id = blk + 1;
                Some(blk)
            } else {
                self.next_id += 1;
                Some(self.next_id - 1)
            }
        });
        let new = new?;
        Some(format!(
            "{}{}{}",
            &name[..range.start],
            new,
            &name[range.end..]
        ))
    }

    /// The block count of the pruned model (llama.cpp writes its running id).
    pub fn block_count(&self) -> u64 {
        self.next_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renumbers_after_the_first_pruned_layer() {
        let mut m = LayerMap::new(vec![3, 1, 3]);
        let names = [
            "output.weight",
            "blk.0.a.weight",
            "blk.1.a.weight",
            "blk.2.a.weight",
        ];
        let got: Vec<Option<String>> = names.iter().map(|n| m.remap(n)).collect();
        assert_eq!(
            got,
            [
                Some("output.weight".into()),
                Some("blk.0.a.weight".into()),
                None,
                Some("blk.1.a.weight".into())
            ]
        );
        assert_eq!(m.remap("blk.3.b.weight"), None);
        assert_eq!(m.remap("blk.4.b.weight").as_deref(), Some("blk.2.b.weight"));
        assert_eq!(m.remap("blk.2.b.bias").as_deref(), Some("blk.1.b.bias"));
        assert_eq!(m.block_count(), 3);
        assert_eq!(find_layer("mm.blk.12.x"), Some((12, 7..9)));
        assert_eq!(find_layer("blk.x.blk.3."), Some((3, 10..11)));
        assert!(LayerMap::new(vec![]).remap("blk.1.a").is_some());
    }
}
