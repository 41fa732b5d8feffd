//! The statistics llama-imatrix gathers (`IMatrixCollector`): for every weight matrix, the sum
//! over the tokens of the squared activation of each input column, and the number of tokens,
//! per expert for MUL_MAT_ID. Sums are f32 accumulated row after row in the graph's order, as
//! imatrix.cpp does, so the same activations give the same bits.

use std::collections::BTreeMap;

use crate::save::{self, SaveError};

/// One weight's statistics (`Stats`): `values` holds `n_mat` runs of one sum per column,
/// `counts` the rows each matrix saw (one count for a dense tensor).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    pub values: Vec<f32>,
    pub counts: Vec<i64>,
}

/// What the collector needs from the command line.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// `-o`.
    pub out_file: String,
    /// `--output-format`: > 0 legacy .dat, < 0 GGUF, 0 GGUF (with a warning for another suffix).
    pub imat_dat: i8,
    /// `--output-frequency`, > 0.
    pub n_out_freq: i32,
    /// `--save-frequency`, 0 for none.
    pub n_save_freq: i32,
    /// `--process-output`: collect `output.weight` too.
    pub process_output: bool,
    /// `-f`: the dataset name stored in the file.
    pub prompt_file: String,
    /// Tokens per chunk: the context's size over its sequences.
    pub chunk_size: i32,
}

/// A tensor's view of a computed graph node's operand: its shape, strides and bytes.
#[derive(Clone, Copy, Debug)]
pub struct Operand<'a> {
    pub ne: [i64; 4],
    pub nb: [usize; 4],
    pub data: &'a [u8],
}

impl Operand<'_> {
    /// The `n` floats from byte `offset`.
    fn row(&self, offset: usize, n: usize) -> Option<&[u8]> {
        self.data.get(offset..offset.checked_add(n * 4)?)
    }

    fn i32_at(&self, offset: usize) -> Option<i32> {
        let b = self.data.get(offset..offset + 4)?;
        Some(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn nrows(&self) -> i64 {
        self.ne[1] * self.ne[2] * self.ne[3]
    }
}

/// The collector: the statistics by weight name, the chunk counter and the datasets of the
/// files combined into it.
#[derive(Debug, Default)]
pub struct Collector {
    pub settings: Settings,
    pub stats: BTreeMap<String, Stats>,
    pub datasets: Vec<String>,
    pub last_chunk: i32,
    /// The first save that failed: collection goes on (as llama.cpp's unchecked ofstream
    /// does), the tool reports it at the end.
    pub save_error: Option<SaveError>,
    /// The first collection error (an inconsistent size, a non-finite sum): the callback stops
    /// asking for nodes and the chunk loop reports it after the decode.
    pub error: Option<String>,
}

/// `filter_tensor_name`: `CUDA0#blk.0.attn_k.weight#0` is `blk.0.attn_k.weight`.
pub fn filter_tensor_name(name: &str) -> &str {
    match name.split_once('#') {
        Some((_, rest)) => rest.split_once('#').map_or(rest, |(w, _)| w),
        None => name,
    }
}

/// `acc[j] += x[j] * x[j]`, a multiply then an add in f32 (imatrix.cpp is built without FMA
/// contraction), for the little-endian floats of `xs`.
fn accumulate(acc: &mut [f32], xs: &[u8]) {
    for (a, b) in acc.iter_mut().zip(xs.chunks_exact(4)) {
        let x = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        *a += x * x;
    }
}

fn all_finite(v: &[f32]) -> bool {
    v.iter().all(|x| x.is_finite())
}

fn malformed(wname: &str, what: &str) -> String {
    format!("collect_imatrix: {what} in the activations of {wname}")
}

impl Collector {
    pub fn new(settings: Settings) -> Collector {
        Collector {
            settings,
            ..Collector::default()
        }
    }

    /// The `ask` answer: whether this node's operands are wanted.
    pub fn wants(&self, is_mul_mat_id: bool, wname: &str, src1_ne1: i64, src1_f32: bool) -> bool {
        if is_mul_mat_id {
            return true;
        }
        // llama.cpp ignores small batches (< 16 tokens)
        if src1_ne1 < 16 || !src1_f32 {
            return false;
        }
        wname.starts_with("blk.") || (self.settings.process_output && wname == "output.weight")
    }

    /// Called when a chunk boundary is crossed: saves at the output and save frequencies.
    fn chunk_reached(&mut self, n_chunk: i32) {
        if n_chunk <= self.last_chunk {
            return;
        }
        let chunk_step = n_chunk - self.last_chunk;
        self.last_chunk = n_chunk;
        let out_freq = self.settings.n_out_freq.max(1);
        if (self.last_chunk % out_freq) / chunk_step == 0 {
            self.save(-1);
        }
        let save_freq = self.settings.n_save_freq;
        if save_freq > 0 && (self.last_chunk % save_freq) / chunk_step == 0 {
            self.save(self.last_chunk);
        }
    }

    fn save(&mut self, n_chunk: i32) {
        if let Err(e) = save::save(self, n_chunk) {
            common::log_err!("save_imatrix: {}\n", e);
            self.save_error.get_or_insert(e);
        }
    }

    /// A MUL_MAT of weight `wname` (its ne[2], ne[3] in `src0_ne23`) on activations `src1`.
    pub fn add_mul_mat(
        &mut self,
        wname: &str,
        src0_ne23: [i64; 2],
        src1: &Operand,
    ) -> Result<(), String> {
        let n_mat = (src0_ne23[0] * src0_ne23[1]).max(1);
        let ne0 = src1.ne[0].max(0) as usize;
        let chunk_size = self.settings.chunk_size.max(1) as i64;
        let e = self.stats.entry(wname.to_string()).or_default();
        // one count per dense tensor (an older GGUF imatrix may hold one per matrix)
        if e.counts.len() > 1 && e.counts.iter().all(|&c| c == e.counts[0]) {
            e.counts.truncate(1);
        }
        let want = ne0 * n_mat as usize;
        if e.values.is_empty() {
            e.values = vec![0.0; want];
            e.counts = vec![0];
        } else if e.values.len() != want {
            return Err(format!(
                "collect_imatrix: inconsistent size for {} ({} vs {})",
                wname,
                e.values.len(),
                want
            ));
        }
        common::log_dbg!(
            "collect_imatrix[{}]: {:>32}, MUL_MAT, {:5} x {:5} x {:5}, 0\n",
            self.last_chunk,
            wname,
            src1.ne[0],
            src1.ne[1],
            src1.ne[2]
        );
        for i3 in 0..src1.ne[3] {
            for i2 in 0..src1.ne[2] {
                // 3D+ activations are flattened onto a 2D weight
                let mat_id =
                    (i3 % src0_ne23[1].max(1)) * src0_ne23[0].max(1) + (i2 % src0_ne23[0].max(1));
                let acc = &mut e.values[mat_id as usize * ne0..(mat_id as usize + 1) * ne0];
                for row in 0..src1.ne[1] {
                    let base = row as usize * src1.nb[1]
                        + i2 as usize * src1.nb[2]
                        + i3 as usize * src1.nb[3];
                    let xs = src1
                        .row(base, ne0)
                        .ok_or_else(|| malformed(wname, "a row outside the data"))?;
                    accumulate(acc, xs);
                }
            }
        }
        if !all_finite(&e.values) {
            return Err(format!(
                "collect_imatrix: non-finite values detected in {wname}"
            ));
        }
        let add = src1.nrows() / n_mat;
        // one count in practice, more when a tensor feeds both MUL_MAT_ID and MUL_MAT
        for i in 0..self.stats[wname].counts.len() {
            let c = {
                let e = self.stats.get_mut(wname).expect("inserted above");
                e.counts[i] += add;
                e.counts[i]
            };
            self.chunk_reached((c / chunk_size) as i32);
        }
        Ok(())
    }

    /// A MUL_MAT_ID over `n_as` experts: `src1` is [cols, n_expert_used or 1, n_tokens], `ids`
    /// [n_expert_used, n_tokens] i32 expert ids.
    pub fn add_mul_mat_id(
        &mut self,
        wname: &str,
        n_as: i64,
        src1: &Operand,
        ids: &Operand,
    ) -> Result<(), String> {
        if ids.ne[1] != src1.ne[2] {
            return Err(malformed(wname, "ids and tokens of different counts"));
        }
        // the extra dimension would need to be stored somewhere in the file
        if src1.nrows() != src1.ne[1] * src1.ne[2] {
            return Err(format!(
                "collect_imatrix: tensor has more than 3 dimensions: {wname}"
            ));
        }
        let n_as_u = n_as.max(1) as usize;
        let ne0 = src1.ne[0].max(0) as usize;
        let chunk_size = self.settings.chunk_size.max(1) as i64;
        let e = self.stats.entry(wname.to_string()).or_default();
        if e.counts.len() == 1 && n_as > 1 {
            // broadcast, after loading an old imatrix
            let c = e.counts[0];
            e.counts.resize(n_as_u, c);
        }
        if e.values.is_empty() {
            e.values = vec![0.0; ne0 * n_as_u];
            e.counts = vec![0; n_as_u];
        } else if e.values.len() != ne0 * n_as_u {
            return Err(format!(
                "collect_imatrix: inconsistent size for {} ({} vs {})",
                wname,
                e.values.len(),
                ne0 * n_as_u
            ));
        } else if e.counts.len() != n_as_u {
            return Err(format!(
                "collect_imatrix: inconsistent expert count for {} ({} vs {})",
                wname,
                e.counts.len(),
                n_as_u
            ));
        }
        common::log_dbg!(
            "collect_imatrix[{}]: {:>32}, MUL_MAT_ID, {:5} x {:5}, 0\n",
            self.last_chunk,
            wname,
            src1.ne[0],
            src1.ne[2]
        );
        let n_tokens = src1.ne[2];
        let mut touched = vec![false; n_as_u];
        for idx in 0..ids.ne[0] {
            for row in 0..n_tokens {
                let ex = ids
                    .i32_at(row as usize * ids.nb[1] + idx as usize * ids.nb[0])
                    .ok_or_else(|| malformed(wname, "an expert id outside the data"))?;
                if ex < 0 || ex as i64 >= n_as {
                    return Err(format!(
                        "collect_imatrix: expert id {ex} of {wname} is outside 0..{n_as}"
                    ));
                }
                let ex = ex as usize;
                let i11 = idx % src1.ne[1].max(1);
                let base = i11 as usize * src1.nb[1] + row as usize * src1.nb[2];
                e.counts[ex] += 1;
                touched[ex] = true;
                let xs = src1
                    .row(base, ne0)
                    .ok_or_else(|| malformed(wname, "a row outside the data"))?;
                accumulate(&mut e.values[ex * ne0..(ex + 1) * ne0], xs);
            }
        }
        for (ex, &t) in touched.iter().enumerate() {
            if t && !all_finite(&e.values[ex * ne0..(ex + 1) * ne0]) {
                return Err(format!(
                    "collect_imatrix: non-finite values detected in {wname}"
                ));
            }
        }
        for ex in 0..n_as_u {
            let c = self.stats[wname].counts[ex];
            self.chunk_reached((c / chunk_size) as i32);
        }
        Ok(())
    }

    /// `load_imatrix`: adds a file's sums and counts to ours (the legacy format's means scaled
    /// back by the chunk size) and takes its datasets.
    pub fn combine(&mut self, m: &llama::quant::imatrix::Imatrix) -> Result<(), String> {
        let chunk_size = self.settings.chunk_size;
        for (name, entry) in &m.entries {
            let e = self.stats.entry(name.clone()).or_default();
            if m.is_legacy {
                if e.values.is_empty() {
                    e.values = vec![0.0; entry.sums.len()];
                    e.counts = vec![0];
                } else if e.values.len() != entry.sums.len() {
                    return Err(format!(
                        "load_imatrix: mismatched sums size for {}: {} != {}",
                        name,
                        entry.sums.len(),
                        e.values.len()
                    ));
                }
                for (v, s) in e.values.iter_mut().zip(&entry.sums) {
                    *v += s * chunk_size as f32;
                }
                let ncall = entry.counts.first().copied().unwrap_or(0);
                for c in e.counts.iter_mut() {
                    *c += ncall * chunk_size as i64;
                }
            } else {
                let nval = entry.sums.len();
                let ncounts = entry.counts.len();
                if e.values.is_empty() {
                    e.values = vec![0.0; nval];
                } else if nval != e.values.len() {
                    return Err(format!(
                        "load_imatrix: mismatched sums size for {}: {} != {}",
                        name,
                        nval,
                        e.values.len()
                    ));
                }
                if e.counts.is_empty() {
                    e.counts = vec![0; ncounts];
                } else if e.counts.len() == 1 && ncounts > 1 {
                    let c = e.counts[0];
                    e.counts.resize(ncounts, c);
                } else if ncounts != e.counts.len() {
                    return Err(format!(
                        "load_imatrix: mismatched counts size for {}: {} != {}",
                        name,
                        ncounts,
                        e.counts.len()
                    ));
                }
                for (v, s) in e.values.iter_mut().zip(&entry.sums) {
                    *v += s;
                }
                for (c, n) in e.counts.iter_mut().zip(&entry.counts) {
                    *c += n;
                }
            }
        }
        self.datasets.extend(m.datasets.iter().cloned());
        let max_count = self
            .stats
            .values()
            .flat_map(|s| s.counts.iter().copied())
            .max()
            .unwrap_or(0)
            .max(0);
        self.last_chunk = (max_count / chunk_size.max(1) as i64) as i32;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            out_file: String::new(),
            n_out_freq: 1000,
            chunk_size: 16,
            ..Settings::default()
        }
    }

    fn f32_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn names_lose_their_backend_prefix_and_copy_suffix() {
        assert_eq!(
            filter_tensor_name("CUDA0#blk.0.attn_k.weight#0"),
            "blk.0.attn_k.weight"
        );
        assert_eq!(filter_tensor_name("CPU#output.weight"), "output.weight");
        assert_eq!(
            filter_tensor_name("blk.1.ffn_up.weight"),
            "blk.1.ffn_up.weight"
        );
    }

    #[test]
    fn only_weight_matrices_over_large_batches_are_asked_for() {
        let mut c = Collector::new(settings());
        assert!(c.wants(false, "blk.0.attn_q.weight", 16, true));
        assert!(!c.wants(false, "blk.0.attn_q.weight", 15, true));
        assert!(!c.wants(false, "blk.0.attn_q.weight", 64, false));
        assert!(!c.wants(false, "output.weight", 64, true));
        assert!(!c.wants(false, "k-0", 64, true));
        assert!(c.wants(true, "anything", 1, false));
        c.settings.process_output = true;
        assert!(c.wants(false, "output.weight", 64, true));
    }

    #[test]
    fn dense_sums_are_squares_per_column_and_counts_are_rows() {
        let mut c = Collector::new(settings());
        // 2 columns, 3 rows
        let x = [1.0f32, 2.0, -3.0, 0.5, 2.0, -1.0];
        let data = f32_bytes(&x);
        let src1 = Operand {
            ne: [2, 3, 1, 1],
            nb: [4, 8, 24, 24],
            data: &data,
        };
        c.add_mul_mat("blk.0.w", [1, 1], &src1).unwrap();
        c.add_mul_mat("blk.0.w", [1, 1], &src1).unwrap();
        let s = &c.stats["blk.0.w"];
        assert_eq!(
            s.values,
            vec![2.0 * (1.0 + 9.0 + 4.0), 2.0 * (4.0 + 0.25 + 1.0)]
        );
        assert_eq!(s.counts, vec![6]);
        // a different width for the same weight is refused
        let src1b = Operand {
            ne: [3, 2, 1, 1],
            nb: [4, 12, 24, 24],
            data: &data,
        };
        assert!(c.add_mul_mat("blk.0.w", [1, 1], &src1b).is_err());
    }

    #[test]
    fn expert_sums_follow_the_routing_ids() {
        let mut c = Collector::new(settings());
        // 2 columns, 1 shared row per token (ne1 = 1), 2 tokens, 2 experts used of 3
        let x = [1.0f32, 2.0, 3.0, 4.0];
        let data = f32_bytes(&x);
        let src1 = Operand {
            ne: [2, 1, 2, 1],
            nb: [4, 8, 8, 16],
            data: &data,
        };
        let ids: Vec<u8> = [0i32, 2, 2, 1]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let ids = Operand {
            ne: [2, 2, 1, 1],
            nb: [4, 8, 16, 16],
            data: &ids,
        };
        c.add_mul_mat_id("blk.0.ffn_up_exps.weight", 3, &src1, &ids)
            .unwrap();
        let s = &c.stats["blk.0.ffn_up_exps.weight"];
        // token 0 went to experts 0 and 2, token 1 to 2 and 1
        assert_eq!(s.counts, vec![1, 1, 2]);
        assert_eq!(s.values, vec![1.0, 4.0, 9.0, 16.0, 10.0, 20.0]);
        let bad: Vec<u8> = [0i32, 5, 2, 1]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let bad = Operand {
            ne: [2, 2, 1, 1],
            nb: [4, 8, 16, 16],
            data: &bad,
        };
        assert!(c
            .add_mul_mat_id("blk.0.ffn_up_exps.weight", 3, &src1, &bad)
            .is_err());
    }

    #[test]
    fn a_non_finite_activation_is_an_error_naming_the_tensor() {
        let mut c = Collector::new(settings());
        let data = f32_bytes(&[f32::INFINITY, 1.0]);
        let src1 = Operand {
            ne: [2, 1, 1, 1],
            nb: [4, 8, 8, 8],
            data: &data,
        };
        let e = c
            .add_mul_mat("blk.3.ffn_down.weight", [1, 1], &src1)
            .unwrap_err();
        assert!(
            e.contains("non-finite values detected in blk.3.ffn_down.weight"),
            "{e}"
        );
    }

    #[test]
    fn combining_adds_gguf_sums_and_rescales_legacy_means() {
        use llama::quant::imatrix::{Imatrix, ImatrixEntry};
        let mut c = Collector::new(settings());
        let mut g = Imatrix::default();
        g.entries.insert(
            "blk.0.w".into(),
            ImatrixEntry {
                sums: vec![3.0, 5.0],
                counts: vec![32],
            },
        );
        g.datasets.push("a.txt".into());
        c.combine(&g).unwrap();
        c.combine(&g).unwrap();
        assert_eq!(c.stats["blk.0.w"].values, vec![6.0, 10.0]);
        assert_eq!(c.stats["blk.0.w"].counts, vec![64]);
        assert_eq!(c.last_chunk, 4);
        assert_eq!(c.datasets, vec!["a.txt", "a.txt"]);
        let mut l = g.clone();
        l.is_legacy = true;
        l.entries.get_mut("blk.0.w").unwrap().counts = vec![2];
        c.combine(&l).unwrap();
        assert_eq!(c.stats["blk.0.w"].values, vec![6.0 + 48.0, 10.0 + 80.0]);
        assert_eq!(c.stats["blk.0.w"].counts, vec![96]);
        let mut wrong = g.clone();
        wrong.entries.get_mut("blk.0.w").unwrap().sums = vec![1.0; 3];
        assert!(c
            .combine(&wrong)
            .unwrap_err()
            .contains("mismatched sums size for blk.0.w"));
    }
}
