//! The cells of the KV cache (llama_kv_cells): for each slot its position (-1 when empty), the
//! sequences that use it and a pending position shift.

pub const MAX_SEQ: usize = 256;

#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct SeqSet([u64; MAX_SEQ / 64]);

impl SeqSet {
    pub fn has(&self, s: i32) -> bool {
        (0..MAX_SEQ as i32).contains(&s) && self.0[s as usize / 64] >> (s as usize % 64) & 1 == 1
    }
    pub fn set(&mut self, s: i32) {
        if (0..MAX_SEQ as i32).contains(&s) {
            self.0[s as usize / 64] |= 1 << (s as usize % 64);
        }
    }
    pub fn reset(&mut self, s: i32) {
        if (0..MAX_SEQ as i32).contains(&s) {
            self.0[s as usize / 64] &= !(1 << (s as usize % 64));
        }
    }
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }
    /// The sequence of a cell that only one sequence uses.
    pub fn single(&self) -> Option<i32> {
        let n: u32 = self.0.iter().map(|w| w.count_ones()).sum();
        if n != 1 {
            return None;
        }
        let (word, bits) = self.0.iter().enumerate().find(|(_, &w)| w != 0)?;
        Some((word * 64 + bits.trailing_zeros() as usize) as i32)
    }
}

#[derive(Clone, Debug)]
pub struct KvCells {
    pos: Vec<i32>,
    seq: Vec<SeqSet>,
    shift: Vec<i32>,
    used: usize,
    has_shift: bool,
}

impl KvCells {
    pub fn new(n: usize) -> KvCells {
        KvCells {
            pos: vec![-1; n],
            seq: vec![SeqSet::default(); n],
            shift: vec![0; n],
            used: 0,
            has_shift: false,
        }
    }
    pub fn size(&self) -> usize {
        self.pos.len()
    }
    pub fn used(&self) -> usize {
        self.used
    }
    pub fn is_empty(&self, i: usize) -> bool {
        self.pos[i] == -1
    }
    pub fn pos(&self, i: usize) -> i32 {
        self.pos[i]
    }
    pub fn seqs(&self, i: usize) -> &SeqSet {
        &self.seq[i]
    }
    pub fn has_shift(&self) -> bool {
        self.has_shift
    }
    pub fn shift(&self, i: usize) -> i32 {
        self.shift[i]
    }
    pub fn reset_shift(&mut self) {
        self.has_shift = false;
        self.shift.iter_mut().for_each(|s| *s = 0);
    }
    /// One past the highest occupied cell.
    pub fn used_max_p1(&self) -> usize {
        self.pos.iter().rposition(|&p| p != -1).map_or(0, |i| i + 1)
    }
    pub fn clear(&mut self) {
        self.pos.iter_mut().for_each(|p| *p = -1);
        self.seq.iter_mut().for_each(|s| *s = SeqSet::default());
        self.used = 0;
        self.reset_shift();
    }
    pub fn rm(&mut self, i: usize) {
        if self.pos[i] != -1 {
            self.pos[i] = -1;
            self.seq[i] = SeqSet::default();
            self.used -= 1;
        }
    }
    pub fn set(&mut self, i: usize, pos: i32, seqs: &[i32]) {
        if self.pos[i] == -1 {
            self.used += 1;
        }
        self.pos[i] = pos;
        self.seq[i] = SeqSet::default();
        for &s in seqs {
            self.seq[i].set(s);
        }
    }
    /// Removes `s` from the cell; true when the cell became empty.
    pub fn seq_rm(&mut self, i: usize, s: i32) -> bool {
        self.seq[i].reset(s);
        if self.seq[i].is_empty() && self.pos[i] != -1 {
            self.pos[i] = -1;
            self.used -= 1;
            return true;
        }
        false
    }
    pub fn seq_add(&mut self, i: usize, s: i32) {
        self.seq[i].set(s);
    }
    /// Moves the cell's position by d; a position below 0 empties it (true).
    pub fn pos_add(&mut self, i: usize, d: i32) -> bool {
        self.pos[i] += d;
        self.shift[i] += d;
        self.has_shift = true;
        if self.pos[i] < 0 {
            self.pos[i] = -1;
            self.seq[i] = SeqSet::default();
            self.used -= 1;
            return true;
        }
        false
    }
    pub fn pos_div(&mut self, i: usize, d: i32) {
        let p_old = self.pos[i];
        self.pos[i] /= d;
        self.shift[i] += self.pos[i] - p_old;
        self.has_shift = true;
    }
    pub fn seq_pos_max(&self, s: i32) -> i32 {
        (0..self.size())
            .filter(|&i| self.seq[i].has(s))
            .map(|i| self.pos[i])
            .max()
            .unwrap_or(-1)
    }
    pub fn seq_pos_min(&self, s: i32) -> i32 {
        (0..self.size())
            .filter(|&i| self.seq[i].has(s))
            .map(|i| self.pos[i])
            .min()
            .unwrap_or(-1)
    }
}
