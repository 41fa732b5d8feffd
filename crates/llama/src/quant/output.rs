//! The quantized file(s): their KV pairs (the input's, then the quantization keys, the user's
//! overrides, the pruned block count and the split keys, in llama.cpp's order) and the
//! writers, one per output shard. Every shard goes to a temporary file (`<shard>.tmp<pid>`,
//! through the gguf writer) and all are renamed only once all are complete, so a failed or
//! interrupted run leaves no partial model.

use gguf::{FileStream, GgufFile, GgufWriter, PendingFile, Value};

use super::input::split_path;
use super::kv_override::{effective, set_kv, KvOverride};
use super::QuantError;

/// llama.cpp's GGML_QNT_VERSION, written as general.quantization_version.
pub const QNT_VERSION: u32 = 2;

fn failed(msg: impl Into<String>) -> QuantError {
    QuantError::Failed(msg.into())
}

/// The output's KV pairs: the input's, then quantization_version and file_type (moved to the
/// end as gguf_set_val does), without the split keys.
pub fn output_kv(f: &GgufFile, ftype_id: u32) -> Vec<(String, Value)> {
    let drop = ["split.no", "split.count", "split.tensors.count"];
    let mut kv: Vec<(String, Value)> =
        f.kv.iter()
            .filter(|(k, _)| !drop.contains(&k.as_str()))
            .cloned()
            .collect();
    set_kv(
        &mut kv,
        "general.quantization_version",
        Value::U32(QNT_VERSION),
    );
    set_kv(&mut kv, "general.file_type", Value::U32(ftype_id));
    kv
}

/// The first shard's KV pairs: `output_kv`, the overrides, and the block count of a pruned
/// model (`block_count_key`, `Some` only when layers were pruned).
pub fn main_kv(
    f: &GgufFile,
    ftype_id: u32,
    overrides: &[KvOverride],
    pruned_block_count: Option<(String, u32)>,
) -> Vec<(String, Value)> {
    let mut kv = output_kv(f, ftype_id);
    for o in effective(overrides) {
        set_kv(&mut kv, &o.key, o.value.to_gguf());
    }
    if let Some((key, n)) = pruned_block_count {
        set_kv(&mut kv, &key, Value::U32(n));
    }
    kv
}

/// Appends the split keys of shard `i` of `n` (llama.cpp sets them only when n > 1).
pub fn add_split_keys(kv: &mut Vec<(String, Value)>, i: usize, n: usize, n_tensors: usize) {
    set_kv(kv, "split.no", Value::U16(i as u16));
    set_kv(kv, "split.count", Value::U16(n as u16));
    set_kv(kv, "split.tensors.count", Value::I32(n_tensors as i32));
}

/// The output files being written.
pub struct Outputs {
    /// Final path of each shard.
    paths: Vec<String>,
    streams: Vec<Option<FileStream>>,
    writers: Vec<Option<GgufWriter>>,
}

impl Outputs {
    /// `writers[i]` describes shard `i`; with `keep_split` the shards are named
    /// `OUT-0000i-of-0000n.gguf`, else there is exactly one, named `out`.
    pub fn new(out: &str, keep_split: bool, writers: Vec<GgufWriter>) -> Outputs {
        let n = writers.len();
        let paths = (0..n)
            .map(|i| {
                if keep_split {
                    split_path(out, i, n)
                } else {
                    out.to_string()
                }
            })
            .collect();
        Outputs {
            paths,
            streams: (0..n).map(|_| None).collect(),
            writers: writers.into_iter().map(Some).collect(),
        }
    }

    /// The stream of shard `i`, its temporary file created on first use.
    fn stream(&mut self, i: usize) -> Result<&mut FileStream, QuantError> {
        if self.streams[i].is_none() {
            let w = self.writers[i]
                .take()
                .ok_or_else(|| failed("shard reopened"))?;
            let s = w
                .create(&self.paths[i])
                .map_err(|e| failed(e.to_string()))?;
            self.streams[i] = Some(s);
        }
        self.streams[i].as_mut().ok_or_else(|| failed("no stream"))
    }

    /// Writes one tensor's data to shard `i` (tensors of a shard come in its order).
    pub fn write(&mut self, i: usize, data: &[u8]) -> Result<(), QuantError> {
        self.stream(i)?
            .write_tensor(data)
            .map_err(|e| failed(e.to_string()))
    }

    /// Completes every shard, then moves them all into place; returns their paths. Until the
    /// renames every shard is a temporary that an error, a drop or SIGINT/SIGTERM removes.
    pub fn finish(mut self) -> Result<Vec<String>, QuantError> {
        let mut pending: Vec<PendingFile> = Vec::with_capacity(self.paths.len());
        for i in 0..self.paths.len() {
            // A shard without tensors is still a file (its header alone).
            self.stream(i)?;
            let s = self.streams[i].take().ok_or_else(|| failed("no stream"))?;
            pending.push(s.finish_pending().map_err(|e| failed(e.to_string()))?);
        }
        for p in pending {
            p.commit().map_err(|e| failed(e.to_string()))?;
        }
        Ok(self.paths)
    }
}
