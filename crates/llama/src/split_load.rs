//! Split models (llama-gguf-split's NAME-00001-of-0000N.gguf): given the first shard, the loader
//! opens the others by llama.cpp's naming rule (llama_split_prefix / llama_split_path), checks
//! each one's split.no, and indexes the tensors of all of them by name, as
//! llama_model_loader's constructor does. Metadata comes from the first shard only.

use crate::error::{LlamaError, Result};
use crate::kv_override::KvView;
use crate::loader::{LoadMode, Shard};
use gguf::{GgufFile, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const KEY_SPLIT_NO: &str = "split.no";
pub const KEY_SPLIT_COUNT: &str = "split.count";
pub const KEY_SPLIT_TENSORS_COUNT: &str = "split.tensors.count";

fn fail(why: String) -> LlamaError {
    LlamaError::Split(why)
}

/// llama_split_path: PREFIX-%05d-of-%05d.gguf for split `no` (0-based).
pub fn split_path(prefix: &str, no: u32, count: u32) -> String {
    format!("{prefix}-{:05}-of-{:05}.gguf", no + 1, count)
}

/// llama_split_prefix: the prefix of `path` when it ends as split `no` of `count` names it.
pub fn split_prefix(path: &str, no: u32, count: u32) -> Option<&str> {
    let postfix = format!("-{:05}-of-{:05}.gguf", no + 1, count);
    if path.len() <= postfix.len() {
        return None;
    }
    path.strip_suffix(postfix.as_str())
}

fn as_u16(key: &str, v: &Value) -> Result<u16> {
    match v {
        Value::U16(n) => Ok(*n),
        _ => Err(LlamaError::BadKey {
            key: key.into(),
            why: format!("expected u16, got {}", v.value_type().name()),
        }),
    }
}

/// Opens shards 1.. of a split model whose first file is `shards[0]`; nothing for a single file.
pub(crate) fn open_shards(
    path: &Path,
    mode: LoadMode,
    view: &KvView<'_>,
    shards: &mut Vec<Shard>,
) -> Result<()> {
    let n_split = match view.get(KEY_SPLIT_COUNT) {
        Some(v) => as_u16(KEY_SPLIT_COUNT, v)?,
        None => 0,
    };
    if n_split <= 1 {
        return Ok(());
    }
    let idx = match view.get(KEY_SPLIT_NO) {
        Some(v) => as_u16(KEY_SPLIT_NO, v)?,
        None => return Err(LlamaError::MissingKey(KEY_SPLIT_NO.into())),
    };
    let name = path.to_string_lossy();
    if idx != 0 {
        return Err(fail(format!(
            "illegal split file idx: {idx} (file: {name}), model must be loaded with the first split"
        )));
    }
    let prefix = split_prefix(&name, 0, n_split as u32)
        .ok_or_else(|| fail(format!("invalid split file name: {name}")))?;
    if prefix.is_empty() {
        return Err(fail(format!("invalid split file: {name}")));
    }
    for no in 1..n_split {
        let p = PathBuf::from(split_path(prefix, no as u32, n_split as u32));
        let opened = if mode.uses_mmap() {
            GgufFile::open_with(&p, gguf::ReadMode::MmapPopulate)
        } else {
            GgufFile::open_metadata(&p)
        };
        let g = opened.map_err(|e| {
            // ggml's own line for the file, then the loader's
            let func = match e {
                gguf::GgufError::Invalid { .. } => "gguf_init_from_file_impl",
                _ => "gguf_init_from_file",
            };
            ggml::log_error!("{}: {}\n", func, e);
            fail(format!(
                "llama_model_loader: failed to load GGUF split from {}",
                p.display()
            ))
        })?;
        let got = match g.get(KEY_SPLIT_NO) {
            Some(v) => as_u16(KEY_SPLIT_NO, v)?,
            None => {
                return Err(fail(format!(
                    "missing key {KEY_SPLIT_NO} in GGUF split {}",
                    p.display()
                )))
            }
        };
        if got != no {
            return Err(fail(format!(
                "invalid split file idx: {got} (file: {}), expected {no}",
                p.display()
            )));
        }
        shards.push(Shard {
            path: p,
            gguf: Arc::new(g),
        });
    }
    let n_tensors: usize = shards.iter().map(|s| s.gguf.tensors.len()).sum();
    let expected = match view.get(KEY_SPLIT_TENSORS_COUNT) {
        Some(Value::I32(n)) => *n as i64,
        Some(v) => {
            return Err(LlamaError::BadKey {
                key: KEY_SPLIT_TENSORS_COUNT.into(),
                why: format!("expected i32, got {}", v.value_type().name()),
            })
        }
        None => return Err(LlamaError::MissingKey(KEY_SPLIT_TENSORS_COUNT.into())),
    };
    if expected != n_tensors as i64 {
        return Err(fail(format!(
            "corrupted model: {expected} tensors expected but {n_tensors} found"
        )));
    }
    ggml::log_info!(
        "llama_model_loader: additional {} GGUFs metadata loaded.\n",
        n_split - 1
    );
    Ok(())
}

/// Tensor name -> (shard, index); a name in two places is an invalid model.
pub(crate) fn index_weights(shards: &[Shard]) -> Result<HashMap<String, (usize, usize)>> {
    let mut map = HashMap::new();
    for (si, s) in shards.iter().enumerate() {
        for (ti, t) in s.gguf.tensors.iter().enumerate() {
            if map.insert(t.name.clone(), (si, ti)).is_some() {
                return Err(fail(format!(
                    "invalid model: tensor '{}' is duplicated",
                    t.name
                )));
            }
        }
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_names_follow_llamacpp() {
        assert_eq!(split_path("m", 0, 2), "m-00001-of-00002.gguf");
        assert_eq!(split_path("/a/b", 11, 12), "/a/b-00012-of-00012.gguf");
        assert_eq!(split_prefix("/a/m-00001-of-00002.gguf", 0, 2), Some("/a/m"));
        assert_eq!(split_prefix("/a/m-00002-of-00002.gguf", 0, 2), None);
        assert_eq!(split_prefix("m.gguf", 0, 2), None);
        // the postfix alone is no file name
        assert_eq!(split_prefix("-00001-of-00002.gguf", 0, 2), None);
    }
}
