//! --split: plan the shards as llama.cpp's split_strategy does, print the plan, then write every
//! shard to a temporary file and rename them all only once each is complete.

use gguf::{GgufError, GgufFile, GgufWriter, TensorInfo, Value};

use crate::args::{Mode, Params};
use crate::kv;
use crate::naming::split_path;

/// llama.cpp counts tensor sizes padded to the default alignment whatever the file's own.
const PAD: u64 = gguf::DEFAULT_ALIGNMENT;

fn padded(n: u64) -> u64 {
    n.div_ceil(PAD) * PAD
}

/// One output file: its KV pairs and the input tensors it holds, in input order.
pub struct Shard {
    pub kv: Vec<(String, Value)>,
    pub tensors: Vec<usize>,
}

fn new_shard(input: &GgufFile, index: usize, n_tensors: usize) -> Result<Shard, String> {
    // every shard says which one it is; only the first carries the model's metadata
    let mut kv = if index == 0 {
        input.kv.clone()
    } else {
        Vec::new()
    };
    let no = u16::try_from(index)
        .map_err(|_| format!("error: more than {} splits are needed", u16::MAX))?;
    kv::set(&mut kv, kv::SPLIT_NO, Value::U16(no));
    kv::set(&mut kv, kv::SPLIT_COUNT, Value::U16(0));
    let count = i32::try_from(n_tensors).map_err(|_| "error: too many tensors".to_string())?;
    kv::set(&mut kv, kv::SPLIT_TENSORS_COUNT, Value::I32(count));
    Ok(Shard {
        kv,
        tensors: Vec::new(),
    })
}

/// The shards, or the error llama.cpp stops with when a limit leaves one of them empty.
pub fn plan(input: &GgufFile, params: &Params) -> Result<Vec<Shard>, String> {
    let n_tensors = input.tensors.len();
    let mut shards = vec![new_shard(input, 0, n_tensors)?];
    if params.no_tensor_first_split {
        shards.push(new_shard(input, 1, n_tensors)?);
    }
    let mut current_size = 0u64;
    for (i, t) in input.tensors.iter().enumerate() {
        let n_bytes = padded(t.size);
        let next_size = current_size.saturating_add(n_bytes);
        let split_here = match params.mode {
            Mode::Bytes(max) => next_size > max,
            Mode::Tensors(max) => i > 0 && i % max as usize == 0,
        };
        if split_here {
            if shards.last().is_some_and(|s| s.tensors.is_empty()) {
                return Err(
                    "error: one of splits have 0 tensors. Maybe size or tensors limit is too small"
                        .into(),
                );
            }
            shards.push(new_shard(input, shards.len(), n_tensors)?);
            current_size = n_bytes;
        } else {
            current_size = next_size;
        }
        shards.last_mut().expect("one shard").tensors.push(i);
    }
    let count = shards.len() as u16;
    for s in &mut shards {
        kv::set(&mut s.kv, kv::SPLIT_COUNT, Value::U16(count));
    }
    Ok(shards)
}

fn writer(input: &GgufFile, shard: &Shard) -> Result<GgufWriter, GgufError> {
    let mut w = GgufWriter::new();
    for (k, v) in &shard.kv {
        w.add_kv(k.clone(), v.clone())?;
    }
    for &i in &shard.tensors {
        let t: &TensorInfo = &input.tensors[i];
        w.add_tensor(t.name.clone(), t.ty, t.shape())?;
    }
    Ok(w)
}

pub fn print_plan(input: &GgufFile, shards: &[Shard]) -> Result<(), String> {
    println!("n_split: {}", shards.len());
    for (i, s) in shards.iter().enumerate() {
        let w = writer(input, s).map_err(|e| format!("error: {e}"))?;
        let data: u64 = s.tensors.iter().map(|&t| input.tensors[t].size).sum();
        let total = (w.header_bytes().len() as u64 + data) / 1000 / 1000;
        println!(
            "split {:05}: n_tensors = {}, total_size = {}M",
            i + 1,
            s.tensors.len(),
            total
        );
    }
    Ok(())
}

/// Write every shard; none appears under its final name unless all were written.
pub fn write(input: &GgufFile, shards: &[Shard], output: &str) -> Result<(), String> {
    use std::io::Write;
    let mut pending = Vec::with_capacity(shards.len());
    for (i, s) in shards.iter().enumerate() {
        let path = split_path(output, i, shards.len());
        print!("Writing file {path} ... ");
        let _ = std::io::stdout().flush();
        let fail = |e: GgufError| format!("\nerror: {e}");
        let mut f = writer(input, s)
            .and_then(|w| w.create(&path))
            .map_err(fail)?;
        for &t in &s.tensors {
            f.write_tensor(input.tensor_data(&input.tensors[t]))
                .map_err(fail)?;
        }
        pending.push(f.finish_pending().map_err(fail)?);
        println!("done");
    }
    for p in pending {
        p.commit().map_err(|e| format!("error: {e}"))?;
    }
    Ok(())
}

/// Every tensor's data must lie inside the file before any shard is started.
pub fn check_data(input: &GgufFile) -> Result<(), String> {
    for t in &input.tensors {
        if input.tensor_data(t).len() as u64 != t.size {
            return Err(format!(
                "tensor '{}' ends past the end of the file ({} bytes)",
                t.name, input.file_size
            ));
        }
    }
    Ok(())
}

pub fn run(params: &Params) -> Result<(), String> {
    const F: &str = "gguf_split";
    let input = GgufFile::open(&params.input).map_err(|e| match e {
        GgufError::Open { .. } => {
            format!("{F}:  failed to open input GGUF from {}: {e}", params.input)
        }
        _ => format!("{F}:  failed to load input GGUF from {}: {e}", params.input),
    })?;
    check_data(&input)
        .map_err(|e| format!("{F}:  failed to load input GGUF from {}: {e}", params.input))?;
    let shards = plan(&input, params)?;
    print_plan(&input, &shards)?;
    if !params.dry_run {
        write(&input, &shards, &params.output)?;
    }
    eprintln!(
        "{F}: {} gguf split written with a total of {} tensors.",
        shards.len(),
        input.tensors.len()
    );
    Ok(())
}
