//! The two file formats llama-imatrix writes (save_imatrix, save_imatrix_legacy), byte for byte
//! as llama.cpp writes them. Every file goes through a temporary beside it that is renamed when
//! complete, so a run stopped by Ctrl+C leaves the previous file or none, never half of one.

use std::io::Write;
use std::path::Path;

use gguf::{Array, GgufWriter, Value};

use crate::collector::Collector;

/// Why a file could not be written: its name and the cause.
#[derive(Debug)]
pub struct SaveError {
    pub file: String,
    pub cause: String,
}

impl std::error::Error for SaveError {}

impl std::fmt::Display for SaveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "failed to write {}: {}", self.file, self.cause)
    }
}

fn save_error(file: &str, cause: impl std::fmt::Display) -> SaveError {
    SaveError {
        file: file.to_string(),
        cause: cause.to_string(),
    }
}

/// The file name of a save: `-o`, with `.at_N` for the copies of `--save-frequency`.
pub fn file_name(out_file: &str, n_chunk: i32) -> String {
    if n_chunk > 0 {
        format!("{out_file}.at_{n_chunk}")
    } else {
        out_file.to_string()
    }
}

/// Writes the collector's state in the format `--output-format` (or the default) picks.
pub fn save(c: &Collector, n_chunk: i32) -> Result<(), SaveError> {
    let s = &c.settings;
    if s.imat_dat > 0 {
        let fname = file_name(&s.out_file, n_chunk);
        let bytes = legacy_bytes(c);
        write_atomic(&fname, &bytes)?;
    } else {
        if s.imat_dat == 0 && !s.out_file.ends_with(".gguf") {
            common::log_wrn!(
                "\nsave_imatrix: saving imatrix using GGUF format with a different suffix than .gguf\n"
            );
            common::log_wrn!(
                "save_imatrix: if you want the previous imatrix format, use --output-format dat\n"
            );
        }
        let fname = file_name(&s.out_file, n_chunk);
        let bytes = gguf_bytes(c).map_err(|e| save_error(&fname, e))?;
        write_atomic(&fname, &bytes)?;
    }
    // LOGV(1, "\n")
    common::log::log(common::log::LogLevel::None, 1, "\n");
    common::log_dbg!(
        "save_imatrix: stored collected data after {} chunks in {}\n",
        c.last_chunk,
        file_name(&s.out_file, n_chunk)
    );
    Ok(())
}

fn write_atomic(fname: &str, bytes: &[u8]) -> Result<(), SaveError> {
    let path = Path::new(fname);
    let err = |e: std::io::Error| save_error(fname, e);
    let (mut f, guard) = atomic_file::create_tmp(path).map_err(err)?;
    f.write_all(bytes).map_err(err)?;
    f.flush().map_err(err)?;
    drop(f);
    guard.commit(path).map_err(err)
}

/// Counts without data: the share of matrices that saw no token, warned about once per file.
fn partial_share(counts: &[i64]) -> (usize, usize) {
    let zeros = counts.iter().filter(|&&c| c == 0).count();
    (zeros, counts.len())
}

/// The legacy `.dat` format: per entry the mean squared activation times the number of chunks
/// it saw, then the chunk count and the dataset name.
pub fn legacy_bytes(c: &Collector) -> Vec<u8> {
    let chunk_size = c.settings.chunk_size.max(1) as i64;
    let mut to_store = Vec::new();
    let mut is_first = true;
    for (name, st) in &c.stats {
        let (n_zeros, n_all) = partial_share(&st.counts);
        if n_all == 0 {
            continue;
        }
        if n_zeros != 0 && is_first {
            common::log_inf!("\n");
            is_first = false;
        }
        if n_zeros == n_all {
            common::log_wrn!(
                "save_imatrix_legacy: entry '{:>40}' has no data - skipping\n",
                name
            );
            continue;
        }
        if n_zeros > 0 {
            common::log_wrn!(
                "save_imatrix_legacy: entry '{:>40}' has partial data ({:.2}%)\n",
                name,
                100.0f32 * (n_all - n_zeros) as f32 / n_all as f32
            );
        }
        to_store.push(name);
    }
    if to_store.len() < c.stats.len() {
        common::log_wrn!(
            "save_imatrix_legacy: storing only {} out of {} entries\n",
            to_store.len(),
            c.stats.len()
        );
    }
    let mut out = Vec::new();
    let i32le = |out: &mut Vec<u8>, v: i32| out.extend_from_slice(&v.to_le_bytes());
    i32le(&mut out, to_store.len() as i32);
    for name in to_store {
        let st = &c.stats[name];
        i32le(&mut out, name.len() as i32);
        out.extend_from_slice(name.as_bytes());
        // ceiling division, so that no entry claims zero chunks
        let max = st.counts.iter().copied().max().unwrap_or(0);
        let ncall = ((max + chunk_size - 1) / chunk_size) as i32;
        i32le(&mut out, ncall);
        let nval = st.values.len();
        let nmat = st.counts.len();
        i32le(&mut out, nval as i32);
        if nval > 0 && nmat > 0 {
            let per = (nval / nmat).max(1);
            for (i, &v) in st.values.iter().enumerate() {
                let mut count = st.counts[(i / per).min(nmat - 1)] as f32;
                let mut value = v;
                if count == 0.0 {
                    // partial data is stored as 1
                    value = 1.0;
                    count = 1.0;
                }
                out.extend_from_slice(&((value / count) * ncall as f32).to_le_bytes());
            }
        }
    }
    i32le(&mut out, c.last_chunk);
    // the dataset: -f, or the last one of the combined files
    let dataset = if c.settings.prompt_file.is_empty() {
        c.datasets.last().map_or("", String::as_str)
    } else {
        c.settings.prompt_file.as_str()
    };
    i32le(&mut out, dataset.len() as i32);
    out.extend_from_slice(dataset.as_bytes());
    out
}

/// ggml's tensor shape in a GGUF file: the dimensions up to the last one above 1.
fn gguf_shape(ne: [u64; 2]) -> Vec<u64> {
    if ne[1] > 1 {
        ne.to_vec()
    } else {
        vec![ne[0]]
    }
}

/// The GGUF format: raw sums (`<name>.in_sum2`, [cols, n_mat]) and counts (`<name>.counts`,
/// [1, n_mat]) as F32, with the datasets, the chunk count and the chunk size.
pub fn gguf_bytes(c: &Collector) -> Result<Vec<u8>, gguf::GgufError> {
    let mut is_first = true;
    for (name, st) in &c.stats {
        let (n_zeros, n_all) = partial_share(&st.counts);
        if n_zeros != 0 && is_first {
            common::log_inf!("\n");
            is_first = false;
        }
        if n_zeros > 0 {
            common::log_wrn!(
                "save_imatrix: entry '{:>40}' has partial data ({:.2}%)\n",
                name,
                100.0f32 * (n_all - n_zeros) as f32 / n_all as f32
            );
        }
    }
    let mut datasets: Vec<&str> = c.datasets.iter().map(String::as_str).collect();
    if !c.settings.prompt_file.is_empty() {
        datasets.push(&c.settings.prompt_file);
    }
    let mut w = GgufWriter::new();
    w.add_kv("general.type", Value::Str("imatrix".into()))?;
    w.add_kv("imatrix.datasets", Value::Array(Array::from_strs(datasets)))?;
    w.add_kv("imatrix.chunk_count", Value::U32(c.last_chunk as u32))?;
    w.add_kv(
        "imatrix.chunk_size",
        Value::U32(c.settings.chunk_size as u32),
    )?;
    let mut data: Vec<Vec<u8>> = Vec::new();
    for (name, st) in &c.stats {
        let nval = st.values.len();
        let nmat = st.counts.len();
        if nval == 0 || nmat == 0 {
            continue;
        }
        let cols = (nval / nmat) as u64;
        w.add_tensor(
            format!("{name}.in_sum2"),
            ggml::Type::F32,
            &gguf_shape([cols, nmat as u64]),
        )?;
        w.add_tensor(
            format!("{name}.counts"),
            ggml::Type::F32,
            &gguf_shape([1, nmat as u64]),
        )?;
        // a matrix that is not a whole number of columns keeps ggml's element count
        let sums = &st.values[..(cols as usize * nmat)];
        data.push(sums.iter().flat_map(|v| v.to_le_bytes()).collect());
        data.push(
            st.counts
                .iter()
                .flat_map(|&v| (v as f32).to_le_bytes())
                .collect(),
        );
    }
    let slices: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
    w.to_bytes(&slices)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::{Settings, Stats};

    fn collector() -> Collector {
        let mut c = Collector::new(Settings {
            out_file: "x.gguf".into(),
            n_out_freq: 10,
            chunk_size: 4,
            prompt_file: "t.txt".into(),
            ..Settings::default()
        });
        c.stats.insert(
            "blk.0.b".into(),
            Stats {
                values: vec![8.0, 4.0],
                counts: vec![8],
            },
        );
        c.stats.insert(
            "blk.0.a".into(),
            Stats {
                values: vec![1.0, 2.0, 3.0, 4.0],
                counts: vec![2, 0],
            },
        );
        c.last_chunk = 2;
        c
    }

    fn i32s(b: &[u8]) -> i32 {
        i32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    #[test]
    fn legacy_layout_scales_means_by_chunks_and_stores_partial_data_as_one() {
        let b = legacy_bytes(&collector());
        assert_eq!(i32s(&b[0..]), 2);
        // sorted: blk.0.a first
        assert_eq!(i32s(&b[4..]), 7);
        assert_eq!(&b[8..15], b"blk.0.a");
        assert_eq!(i32s(&b[15..]), 1); // ncall = ceil(2 / 4)
        assert_eq!(i32s(&b[19..]), 4);
        let f = |o: usize| f32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        assert_eq!([f(23), f(27), f(31), f(35)], [0.5, 1.0, 1.0, 1.0]);
        let tail = &b[b.len() - 13..];
        assert_eq!(i32s(tail), 2);
        assert_eq!(i32s(&tail[4..]), 5);
        assert_eq!(&tail[8..], b"t.txt");
    }

    #[test]
    fn gguf_holds_raw_sums_counts_and_metadata() {
        let c = collector();
        let b = gguf_bytes(&c).unwrap();
        let dir = std::env::temp_dir().join(format!("imatrix-save-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.gguf");
        std::fs::write(&p, &b).unwrap();
        let m = llama::quant::imatrix::load(&p).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(m.has_metadata);
        assert_eq!(m.chunk_count, 2);
        assert_eq!(m.chunk_size, 4);
        assert_eq!(m.datasets, vec!["t.txt"]);
        assert_eq!(m.entries["blk.0.a"].sums, vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(m.entries["blk.0.a"].counts, vec![2, 0]);
        assert_eq!(m.entries["blk.0.b"].counts, vec![8]);
    }

    #[test]
    fn save_frequency_copies_are_named_at_n() {
        assert_eq!(file_name("imatrix.gguf", -1), "imatrix.gguf");
        assert_eq!(file_name("imatrix.gguf", 20), "imatrix.gguf.at_20");
    }
}
