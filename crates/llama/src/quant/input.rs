//! The input model's tensors, across the shards of a split model (gguf-split's
//! `PREFIX-00001-of-00003.gguf` files, keys `split.no`, `split.count`, `split.tensors.count`),
//! as llama.cpp's model loader gathers them.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gguf::{GgufFile, TensorInfo};

use super::{layer_of, QuantError};

/// One weight: which shard holds it and where.
pub struct Weight<'a> {
    /// Index of the shard (0 for an unsplit model).
    pub idx: usize,
    pub info: &'a TensorInfo,
}

/// All shards of the model; shard 0 is the file given.
pub struct ModelFiles {
    pub shards: Vec<Arc<GgufFile>>,
}

fn failed(msg: String) -> QuantError {
    QuantError::Failed(msg)
}

/// llama_split_path: `PREFIX-%05d-of-%05d.gguf`, numbered from 1.
pub fn split_path(prefix: &str, split_no: usize, split_count: usize) -> String {
    format!("{prefix}-{:05}-of-{:05}.gguf", split_no + 1, split_count)
}

/// llama_split_prefix: the path without its `-%05d-of-%05d.gguf` ending, if it has it.
fn split_prefix(path: &str, split_no: usize, split_count: usize) -> Option<&str> {
    let postfix = format!("-{:05}-of-{:05}.gguf", split_no + 1, split_count);
    path.strip_suffix(&postfix)
}

fn u16_key(f: &GgufFile, key: &str) -> Option<u64> {
    f.get(key).and_then(|v| v.as_u64())
}

impl ModelFiles {
    /// Opens the other shards named after `path` when `main` declares `split.count` > 1.
    pub fn open(path: &Path, main: Arc<GgufFile>) -> Result<ModelFiles, QuantError> {
        let n_split = u16_key(&main, "split.count").unwrap_or(0) as usize;
        let mut shards = vec![main];
        if n_split <= 1 {
            return Ok(ModelFiles { shards });
        }
        let fname = path.display().to_string();
        let idx = u16_key(&shards[0], "split.no").unwrap_or(0);
        if idx != 0 {
            return Err(failed(format!(
                "illegal split file idx: {idx} (file: {fname}), model must be loaded with the first split"
            )));
        }
        let prefix = split_prefix(&fname, 0, n_split)
            .filter(|p| !p.is_empty())
            .ok_or_else(|| failed(format!("invalid split file name: {fname}")))?;
        for i in 1..n_split {
            let name = split_path(prefix, i, n_split);
            let f = GgufFile::open(PathBuf::from(&name)).map_err(|_| {
                failed(format!(
                    "llama_model_loader: failed to load GGUF split from {name}"
                ))
            })?;
            let Some(no) = u16_key(&f, "split.no") else {
                return Err(failed(format!("missing key split.no in GGUF split {name}")));
            };
            if no as usize != i {
                return Err(failed(format!(
                    "invalid split file idx: {no} (file: {name}), expected {i}"
                )));
            }
            shards.push(Arc::new(f));
        }
        let files = ModelFiles { shards };
        let n: usize = files.shards.iter().map(|f| f.tensors.len()).sum();
        if let Some(want) = u16_key(&files.shards[0], "split.tensors.count") {
            if want as usize != n {
                return Err(failed(format!(
                    "corrupted model: {want} tensors expected but {n} found"
                )));
            }
        }
        Ok(files)
    }

    /// Every weight in the loader's order: tensors without a layer first, then by layer, each
    /// group by name (llama.cpp's weight_name_comparer).
    pub fn weights(&self) -> Result<Vec<Weight<'_>>, QuantError> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for (idx, f) in self.shards.iter().enumerate() {
            for info in &f.tensors {
                if !seen.insert(info.name.as_str()) {
                    return Err(failed(format!(
                        "invalid model: tensor '{}' is duplicated",
                        info.name
                    )));
                }
                out.push(Weight { idx, info });
            }
        }
        out.sort_by(|a, b| {
            let key = |n: &str| layer_of(n).unwrap_or(-1);
            (key(&a.info.name), &a.info.name).cmp(&(key(&b.info.name), &b.info.name))
        });
        Ok(out)
    }

    pub fn data(&self, w: &Weight) -> &[u8] {
        self.shards[w.idx].tensor_data(w.info)
    }
}
