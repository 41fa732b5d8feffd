//! Batches (llama_batch) and their validation and splitting (llama_batch_allocr): missing
//! positions continue each sequence from the memory, a missing sequence is 0, missing output
//! flags mean "the last token only"; the validated batch is cut into ubatches of n_ubatch.

use crate::kv_cells::MAX_SEQ;

/// The tokens of one decode call. Empty `pos`, `seq_id` or `logits` are filled in as
/// llama_batch_allocr does for a null array.
#[derive(Clone, Debug, Default)]
pub struct Batch {
    pub token: Vec<i32>,
    pub pos: Vec<i32>,
    pub seq_id: Vec<Vec<i32>>,
    pub logits: Vec<bool>,
}

impl Batch {
    pub fn new() -> Batch {
        Batch::default()
    }
    /// llama_batch_get_one: one sequence, positions after the memory's, logits for the last token.
    pub fn get_one(tokens: &[i32]) -> Batch {
        Batch {
            token: tokens.to_vec(),
            ..Batch::default()
        }
    }
    /// common_batch_add
    pub fn add(&mut self, token: i32, pos: i32, seq_ids: &[i32], logits: bool) {
        self.token.push(token);
        self.pos.push(pos);
        self.seq_id.push(seq_ids.to_vec());
        self.logits.push(logits);
    }
    pub fn clear(&mut self) {
        self.token.clear();
        self.pos.clear();
        self.seq_id.clear();
        self.logits.clear();
    }
    pub fn n_tokens(&self) -> usize {
        self.token.len()
    }
    pub fn is_empty(&self) -> bool {
        self.token.is_empty()
    }
}

/// A validated batch with every array filled in.
#[derive(Clone, Debug, Default)]
pub struct FullBatch {
    pub token: Vec<i32>,
    pub pos: Vec<i32>,
    pub seq_id: Vec<Vec<i32>>,
    pub output: Vec<bool>,
    pub n_outputs: usize,
}

/// A micro-batch: the tokens one graph computes.
#[derive(Clone, Debug, Default)]
pub struct Ubatch {
    pub token: Vec<i32>,
    pub pos: Vec<i32>,
    pub seq_id: Vec<Vec<i32>>,
    pub output: Vec<bool>,
    /// index of each token in the batch
    pub idx: Vec<usize>,
}

impl Ubatch {
    pub fn n_tokens(&self) -> usize {
        self.token.len()
    }
    pub fn n_outputs(&self) -> usize {
        self.output.iter().filter(|&&o| o).count()
    }
}

/// llama_batch_allocr::init. `seq_pos_max(s)` is the memory's last position of sequence s.
pub fn validate(
    batch: &Batch,
    n_vocab: u32,
    n_seq_max: u32,
    output_all: bool,
    seq_pos_max: impl Fn(i32) -> i32,
) -> Result<FullBatch, String> {
    let n = batch.token.len();
    if n == 0 {
        return Err("n_tokens == 0".into());
    }
    for (what, len) in [
        ("pos", batch.pos.len()),
        ("seq_id", batch.seq_id.len()),
        ("logits", batch.logits.len()),
    ] {
        if len != 0 && len != n {
            return Err(format!("batch.{what} has {len} entries for {n} tokens"));
        }
    }
    for (i, &t) in batch.token.iter().enumerate() {
        if t < 0 || t as u32 >= n_vocab {
            return Err(format!("invalid token[{i}] = {t}"));
        }
    }
    let seq_id: Vec<Vec<i32>> = if batch.seq_id.is_empty() {
        vec![vec![0]; n]
    } else {
        batch.seq_id.clone()
    };
    for (i, ids) in seq_id.iter().enumerate() {
        if ids.is_empty() {
            return Err(format!("token {i} has no sequence id"));
        }
        for (s, &id) in ids.iter().enumerate() {
            if id < 0 || id as u32 >= n_seq_max || id as usize >= MAX_SEQ {
                return Err(format!("invalid seq_id[{i}][{s}] = {id} > {n_seq_max}"));
            }
        }
    }
    let pos: Vec<i32> = if batch.pos.is_empty() {
        // each sequence continues after its last position in memory
        let mut next: Vec<i32> = vec![-1; MAX_SEQ];
        let mut pos = Vec::with_capacity(n);
        for ids in &seq_id {
            let s = ids[0] as usize;
            if next[s] < 0 {
                next[s] = seq_pos_max(ids[0]) + 1;
            }
            pos.push(next[s]);
            for &id in ids {
                next[id as usize] = next[s] + 1;
            }
        }
        pos
    } else {
        batch.pos.clone()
    };
    if let Some((i, p)) = pos.iter().enumerate().find(|(_, &p)| p < 0) {
        return Err(format!("invalid pos[{i}] = {p}"));
    }
    let output: Vec<bool> = if output_all {
        vec![true; n]
    } else if batch.logits.is_empty() {
        (0..n).map(|i| i == n - 1).collect()
    } else {
        batch.logits.clone()
    };

    // positions of each sequence must continue the memory and be contiguous
    let mut min_p = vec![i32::MAX; MAX_SEQ];
    let mut max_p = vec![i32::MIN; MAX_SEQ];
    let mut count = vec![0usize; MAX_SEQ];
    for (i, ids) in seq_id.iter().enumerate() {
        for &s in ids {
            let s = s as usize;
            min_p[s] = min_p[s].min(pos[i]);
            max_p[s] = max_p[s].max(pos[i]);
            count[s] += 1;
        }
    }
    for s in 0..MAX_SEQ {
        if count[s] == 0 {
            continue;
        }
        let p0 = seq_pos_max(s as i32);
        if p0 >= 0 && min_p[s] != p0 + 1 {
            return Err(format!(
                "the tokens of sequence {s} in the input batch have inconsistent sequence positions:\n \
                 - the last position stored in the memory module of the context (i.e. the KV cache) for sequence {s} is X = {p0}\n \
                 - the tokens for sequence {s} in the input batch have a starting position of Y = {}\n \
                 it is required that the sequence positions remain consecutive: Y = X + 1",
                min_p[s]
            ));
        }
        if (max_p[s] - min_p[s] + 1) as usize > count[s] {
            return Err(format!("sequence {s} positions are not continuous"));
        }
    }
    let n_outputs = output.iter().filter(|&&o| o).count();
    Ok(FullBatch {
        token: batch.token.clone(),
        pos,
        seq_id,
        output,
        n_outputs,
    })
}

/// split_simple: consecutive tokens, n_ubatch at a time.
pub fn split_simple(b: &FullBatch, n_ubatch: usize) -> Vec<Ubatch> {
    let n = b.token.len();
    let mut out = Vec::new();
    let mut start = 0;
    while start < n {
        let end = (start + n_ubatch.max(1)).min(n);
        out.push(Ubatch {
            token: b.token[start..end].to_vec(),
            pos: b.pos[start..end].to_vec(),
            seq_id: b.seq_id[start..end].to_vec(),
            output: b.output[start..end].to_vec(),
            idx: (start..end).collect(),
        });
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_one_continues_the_sequence() {
        let b = validate(&Batch::get_one(&[1, 2, 3]), 10, 1, false, |_| 4).unwrap();
        assert_eq!(b.pos, vec![5, 6, 7]);
        assert_eq!(b.output, vec![false, false, true]);
        assert_eq!(b.n_outputs, 1);
    }

    #[test]
    fn bad_batches_are_rejected() {
        assert!(validate(&Batch::get_one(&[]), 10, 1, false, |_| -1).is_err());
        assert!(validate(&Batch::get_one(&[10]), 10, 1, false, |_| -1).is_err());
        let mut b = Batch::new();
        b.add(1, 0, &[1], true);
        assert!(validate(&b, 10, 1, false, |_| -1).is_err());
        let mut b = Batch::new();
        b.add(1, 3, &[0], true);
        assert!(
            validate(&b, 10, 1, false, |_| 0).is_err(),
            "Y must be X + 1"
        );
        let mut b = Batch::new();
        b.add(1, 0, &[0], false);
        b.add(1, 2, &[0], true);
        assert!(
            validate(&b, 10, 1, false, |_| -1).is_err(),
            "gap in positions"
        );
    }

    #[test]
    fn split_keeps_order() {
        let b = validate(&Batch::get_one(&[1, 2, 3, 4, 5]), 10, 1, false, |_| -1).unwrap();
        let u = split_simple(&b, 2);
        assert_eq!(u.len(), 3);
        assert_eq!(u[2].token, vec![5]);
        assert_eq!(u[2].idx, vec![4]);
        assert!(u[2].output[0]);
    }
}
