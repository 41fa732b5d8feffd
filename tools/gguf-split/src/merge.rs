//! --merge: read every shard's metadata first (the first shard's KV pairs with split.count set
//! to 0, so that the result is not taken for a shard again), then copy the tensor data packed
//! one after another into one file written through a temporary.

use std::path::Path;

use gguf::{GgufError, GgufFile, GgufWriter, Value};

use crate::args::Params;
use crate::kv;
use crate::naming::{split_path, split_prefix};

const F: &str = "gguf_merge";
/// llama.cpp moves the cursor back over its "..." before "done".
const DONE: &str = "\x1b[3Ddone";

fn load_error(path: &str, e: GgufError) -> String {
    format!("\n{F}:  failed to load input GGUF from {path}: {e}")
}

/// The shard count the first shard declares.
fn split_count(first: &GgufFile) -> Result<usize, String> {
    match kv::get(&first.kv, kv::SPLIT_COUNT) {
        None => Err(format!(
            "\n{F}: input file does not contain {} metadata",
            kv::SPLIT_COUNT
        )),
        Some(Value::U16(n)) if *n >= 1 => Ok(*n as usize),
        Some(Value::U16(n)) => Err(format!(
            "\n{F}: input file does not contain a valid split count {n}"
        )),
        Some(other) => Err(format!(
            "\n{F}: input file does not contain a valid split count ({} is {}, not u16)",
            kv::SPLIT_COUNT,
            other.value_type()
        )),
    }
}

/// A later shard must belong to the same split: llama.cpp does not look, and would merge a
/// stray file of the same name.
fn check_shard(shard: &GgufFile, path: &str, i: usize, n: usize) -> Result<(), String> {
    let expect = |key: &str, want: usize| match kv::get(&shard.kv, key) {
        Some(Value::U16(v)) if *v as usize == want => Ok(()),
        Some(Value::U16(v)) => Err(format!(
            "\n{F}: {path} has {key} = {v}, expected {want}: it is not split {} of {n}",
            i + 1
        )),
        Some(v) => Err(format!(
            "\n{F}: {path} has {key} of type {}, expected u16",
            v.value_type()
        )),
        None => Err(format!("\n{F}: {path} does not contain {key} metadata")),
    };
    expect(kv::SPLIT_NO, i)?;
    expect(kv::SPLIT_COUNT, n)
}

pub fn run(params: &Params) -> Result<(), String> {
    eprintln!("{F}: {} -> {}", params.input, params.output);
    if std::fs::File::open(&params.output).is_ok() || Path::new(&params.output).exists() {
        return Err(format!("{F}: output file {} already exists", params.output));
    }

    let mut out = GgufWriter::new();
    let mut shards: Vec<(String, GgufFile)> = Vec::new();
    let mut n_split = 1;
    let mut prefix = String::new();
    let mut total_tensors = 0;
    let mut i = 0;
    while i < n_split {
        let path = if i == 0 {
            params.input.clone()
        } else {
            split_path(&prefix, i, n_split)
        };
        eprint!("{F}: reading metadata {path} ...");
        let mut shard = GgufFile::open_metadata(&path).map_err(|e| load_error(&path, e))?;
        if i == 0 {
            n_split = split_count(&shard)?;
            prefix = split_prefix(&path, 0, n_split)
                .ok_or_else(|| {
                    format!("\n{F}: unexpected input file name: {path} i_split=0 n_split={n_split}")
                })?
                .to_string();
            kv::set(&mut shard.kv, kv::SPLIT_COUNT, Value::U16(0));
            for (k, v) in &shard.kv {
                out.add_kv(k.clone(), v.clone())
                    .map_err(|e| format!("\n{F}: {path}: {e}"))?;
            }
        } else {
            check_shard(&shard, &path, i, n_split)?;
        }
        for t in &shard.tensors {
            out.add_tensor(t.name.clone(), t.ty, t.shape())
                .map_err(|e| format!("\n{F}: {path}: {e}"))?;
        }
        total_tensors += shard.tensors.len();
        eprintln!("{DONE}");
        shards.push((path, shard));
        i += 1;
    }

    let mut file = if params.dry_run {
        None
    } else {
        Some(
            out.create(&params.output)
                .map_err(|e| format!("{F}: {e}"))?,
        )
    };
    for (path, meta) in &shards {
        let shard = GgufFile::open(path)
            .map_err(|e| format!("{F}:  failed to open input GGUF from {path}: {e}"))?;
        if shard.tensors != meta.tensors {
            return Err(format!("{F}: {path} changed while it was being merged"));
        }
        eprint!("{F}: writing tensors {path} ...");
        for t in &shard.tensors {
            let data = shard.tensor_data(t);
            if data.len() as u64 != t.size {
                return Err(format!(
                    "\n{F}: {path}: tensor '{}' ends past the end of the file",
                    t.name
                ));
            }
            if let Some(f) = file.as_mut() {
                f.write_tensor(data).map_err(|e| format!("\n{F}: {e}"))?;
            }
        }
        eprintln!("{DONE}");
    }
    if let Some(f) = file {
        f.finish().map_err(|e| format!("{F}: {e}"))?;
    }

    let mut delete_failed = false;
    if params.delete_splits && !params.dry_run {
        // only now: the merged file is complete, so no failure can lose the model
        for (path, _) in &shards {
            match std::fs::remove_file(path) {
                Ok(()) => eprintln!("{F}: deleted file {path}"),
                Err(e) => {
                    eprintln!("error: failed to delete {path}: {e}");
                    delete_failed = true;
                }
            }
        }
    }
    eprintln!(
        "{F}: {} merged from {n_split} split with {total_tensors} tensors.",
        params.output
    );
    if delete_failed {
        return Err(String::new());
    }
    Ok(())
}
