//! llama_model_quantize: read a model, choose each tensor's type, quantize the tensors (rows
//! split across threads) and write the new file atomically, logging as llama.cpp does.

use std::path::Path;

use ggml::quants::{bytes_for, dequantize_row, quantize_chunk};
use ggml::Type;
use gguf::{GgufFile, GgufWriter, TensorInfo, Value};

use super::{
    layer_of, tensor_requires_imatrix, ModelInfo, QuantError, QuantizeParams, TypeChooser,
};
use crate::loader::{LoadMode, ModelLoader};

/// llama.cpp's GGML_QNT_VERSION, written as general.quantization_version.
pub const QNT_VERSION: u32 = 2;

/// Everything llama_model_quantize takes besides the paths.
#[derive(Clone, Debug)]
pub struct ModelQuantizeParams {
    pub types: QuantizeParams,
    /// Threads for quantizing a tensor's rows (at least 1).
    pub nthread: usize,
    /// Allow quantizing tensors that are already quantized (they are dequantized first).
    pub allow_requantize: bool,
    /// Only compute and print the sizes; no file is written.
    pub dry_run: bool,
}

/// What a run produced (sizes in bytes of the tensor data).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuantizeStats {
    pub size_org: u64,
    pub size_new: u64,
    pub n_fallback: u32,
    pub n_tensors: usize,
}

fn failed(msg: impl Into<String>) -> QuantError {
    QuantError::Failed(msg.into())
}

fn u32_key(f: &GgufFile, key: &str) -> Option<u32> {
    f.get(key).and_then(|v| v.as_u64()).map(|v| v as u32)
}

/// The model facts the type choice needs, from the file's metadata.
pub fn model_info(f: &GgufFile) -> Result<ModelInfo, QuantError> {
    let arch = match f.get("general.architecture") {
        Some(Value::Str(s)) => s.clone(),
        _ => {
            return Err(failed(
                "llama_model_loader: missing or invalid general.architecture",
            ))
        }
    };
    let n_layer = u32_key(f, &format!("{arch}.block_count")).unwrap_or(0);
    let n_head = u32_key(f, &format!("{arch}.attention.head_count")).unwrap_or(0);
    let n_head_kv = u32_key(f, &format!("{arch}.attention.head_count_kv")).unwrap_or(n_head);
    let n_expert = u32_key(f, &format!("{arch}.expert_count")).unwrap_or(0);
    let is_70b = arch == "llama" && n_layer == 80;
    Ok(ModelInfo {
        arch,
        n_layer,
        n_expert,
        n_head,
        n_head_kv,
        is_70b,
    })
}

/// The output's KV pairs: the input's, then quantization_version and file_type (moved to the
/// end as gguf_set_val does), without the split keys.
pub fn output_kv(f: &GgufFile, ftype_id: u32) -> Vec<(String, Value)> {
    let drop = [
        "general.quantization_version",
        "general.file_type",
        "split.no",
        "split.count",
        "split.tensors.count",
    ];
    let mut kv: Vec<(String, Value)> =
        f.kv.iter()
            .filter(|(k, _)| !drop.contains(&k.as_str()))
            .cloned()
            .collect();
    kv.push((
        "general.quantization_version".into(),
        Value::U32(QNT_VERSION),
    ));
    kv.push(("general.file_type".into(), Value::U32(ftype_id)));
    kv
}

/// `llama_format_tensor_shape`: always four dims.
fn shape_str(ne: &[u64; 4]) -> String {
    format!("{:>6}, {:>6}, {:>6}, {:>6}", ne[0], ne[1], ne[2], ne[3])
}

const MIB: f64 = 1024.0 * 1024.0;

/// The tensor's values as f32, dequantizing any other type.
fn to_f32(t: &TensorInfo, data: &[u8]) -> Result<Vec<f32>, QuantError> {
    let n = t.n_elements() as usize;
    let mut out = vec![0f32; n];
    if !ggml::quants::is_supported(t.ty) {
        return Err(failed(format!(
            "type {} of {} cannot be converted to f32",
            t.ty, t.name
        )));
    }
    dequantize_row(t.ty, data, &mut out);
    Ok(out)
}

/// Quantizes all rows of `src` into `ty`, rows shared among `nthread` scoped threads.
fn quantize_rows(
    ty: Type,
    src: &[f32],
    n_per_row: usize,
    imatrix: Option<&[f32]>,
    nthread: usize,
) -> Vec<u8> {
    let nrows = src.len() / n_per_row;
    let row_size = bytes_for(ty, n_per_row);
    let mut dst = vec![0u8; nrows * row_size];
    // llama.cpp hands out chunks of at least 32*512 elements; any split gives the same bytes.
    let rows_per_chunk = (16384usize.div_ceil(n_per_row)).max(1);
    let chunks: Vec<(usize, &mut [u8])> = dst
        .chunks_mut(rows_per_chunk * row_size)
        .enumerate()
        .collect();
    let nthread = nthread.clamp(1, chunks.len().max(1));
    let mut per_thread: Vec<Vec<(usize, &mut [u8])>> = (0..nthread).map(|_| Vec::new()).collect();
    for (i, c) in chunks.into_iter().enumerate() {
        per_thread[i % nthread].push(c);
    }
    std::thread::scope(|s| {
        for work in per_thread {
            s.spawn(move || {
                for (ci, out) in work {
                    let first = ci * rows_per_chunk;
                    let n = out.len() / row_size;
                    let rows = &src[first * n_per_row..(first + n) * n_per_row];
                    quantize_chunk(ty, rows, out, 0, n, n_per_row, imatrix);
                }
            });
        }
    });
    dst
}

/// Quantizes the model at `inp` into `out` (llama_model_quantize).
pub fn model_quantize(
    inp: &Path,
    out: &Path,
    p: &ModelQuantizeParams,
) -> Result<QuantizeStats, QuantError> {
    model_quantize_with_progress(inp, out, p, &|_, _| {})
}

/// `model_quantize`, calling `progress(done, total)` after each tensor (for a progress bar).
pub fn model_quantize_with_progress(
    inp: &Path,
    out: &Path,
    p: &ModelQuantizeParams,
    progress: &dyn Fn(usize, usize),
) -> Result<QuantizeStats, QuantError> {
    let loader = ModelLoader::open(inp, LoadMode::Mmap).map_err(|e| failed(e.to_string()))?;
    let f: &GgufFile = &loader.gguf;
    let model = model_info(f)?;
    let ftype = p.types.ftype;

    let mut order: Vec<&TensorInfo> = f.tensors.iter().collect();
    order.sort_by(|a, b| {
        let key = |n: &str| layer_of(n).unwrap_or(-1);
        (key(&a.name), &a.name).cmp(&(key(&b.name), &b.name))
    });
    let names: Vec<&str> = order.iter().map(|t| t.name.as_str()).collect();

    // Preliminary pass: every tensor's type (fallback warnings are logged here, as llama.cpp does).
    let mut chooser = TypeChooser::new(&model, &p.types, &names);
    let mut targets = Vec::with_capacity(order.len());
    for t in &order {
        let desc = super::TensorDesc {
            name: t.name.clone(),
            ne: t.ne,
            ty: t.ty,
        };
        let choice = chooser.choose(&desc)?;
        for w in &choice.warnings {
            ggml::log_warn!("{}", w);
        }
        if choice.ty != t.ty
            && tensor_requires_imatrix(&t.name, choice.ty, ftype)
            && !p.types.has_imatrix
            && !p.dry_run
        {
            ggml::log_error!(
                "\n============================================================================\n ERROR: this quantization requires an importance matrix!\n        - offending tensor: {}\n        - target type: {}\n============================================================================\n\n",
                t.name,
                choice.ty
            );
            return Err(failed("this quantization requires an imatrix!"));
        }
        targets.push(choice.ty);
    }

    let mut writer = GgufWriter::new();
    for (k, v) in output_kv(f, ftype.id()) {
        writer.add_kv(k, v).map_err(|e| failed(e.to_string()))?;
    }
    for (t, ty) in order.iter().zip(&targets) {
        writer
            .add_tensor(t.name.clone(), *ty, t.shape())
            .map_err(|e| failed(e.to_string()))?;
    }
    let mut stream = if p.dry_run {
        None
    } else {
        Some(writer.create(out).map_err(|e| failed(e.to_string()))?)
    };

    let n_tensors = order.len();
    let mut stats = QuantizeStats {
        n_tensors,
        ..Default::default()
    };
    let n_elements: u64 = f.tensors.iter().map(|t| t.n_elements()).sum();
    for (i, (t, &new_type)) in order.iter().zip(&targets).enumerate() {
        let data = f.tensor_data(t);
        if data.len() as u64 != t.size {
            return Err(failed(format!(
                "tensor '{}' data is not within the file bounds",
                t.name
            )));
        }
        ggml::log_info!(
            "[{:>4}/{:>4}] {:<36} - [{}], type = {:>6}, ",
            i + 1,
            n_tensors,
            t.name,
            shape_str(&t.ne),
            t.ty.name()
        );
        // An empty tensor has nothing to convert; it keeps its bytes (none) under the new type.
        let quantize = t.ty != new_type && t.n_elements() > 0;
        if quantize && !t.ne[0].is_multiple_of(new_type.block_size() as u64) {
            return Err(failed(format!(
                "tensor '{}': rows of {} elements do not divide into {} blocks of {}",
                t.name,
                t.ne[0],
                new_type,
                new_type.block_size()
            )));
        }
        let org = t.size;
        let new_size;
        if p.dry_run {
            if quantize {
                new_size = bytes_for(new_type, t.ne[0] as usize) as u64
                    * (t.n_elements() / t.ne[0].max(1));
                ggml::log_info!(
                    "size = {:8.2} MiB -> {:8.2} MiB ({})\n",
                    org as f64 / MIB,
                    new_size as f64 / MIB,
                    new_type
                );
            } else {
                new_size = org;
                ggml::log_info!("size = {:8.3} MiB\n", org as f64 / MIB);
            }
        } else if !quantize {
            new_size = org;
            ggml::log_info!("size = {:8.3} MiB\n", org as f64 / MIB);
            stream
                .as_mut()
                .expect("file")
                .write_tensor(data)
                .map_err(|e| failed(e.to_string()))?;
        } else {
            if t.ty.is_quantized() && !p.allow_requantize {
                return Err(failed(format!(
                    "requantizing from type {} is disabled",
                    t.ty
                )));
            }
            ggml::log_info!("converting to {} .. ", new_type);
            let src = to_f32(t, data)?;
            let q = quantize_rows(new_type, &src, t.ne[0] as usize, None, p.nthread);
            new_size = q.len() as u64;
            stream
                .as_mut()
                .expect("file")
                .write_tensor(&q)
                .map_err(|e| failed(e.to_string()))?;
            ggml::log_info!(
                "size = {:8.2} MiB -> {:8.2} MiB\n",
                org as f64 / MIB,
                new_size as f64 / MIB
            );
        }
        stats.size_org += org;
        stats.size_new += new_size;
        progress(i + 1, n_tensors);
    }
    if let Some(s) = stream {
        s.finish().map_err(|e| failed(e.to_string()))?;
    }
    let bpw = |b: u64| {
        if n_elements == 0 {
            0.0
        } else {
            b as f64 * 8.0 / n_elements as f64
        }
    };
    ggml::log_info!(
        "llama_model_quantize_impl: model size  = {:8.2} MiB ({:.2} BPW)\n",
        stats.size_org as f64 / MIB,
        bpw(stats.size_org)
    );
    ggml::log_info!(
        "llama_model_quantize_impl: quant size  = {:8.2} MiB ({:.2} BPW)\n",
        stats.size_new as f64 / MIB,
        bpw(stats.size_new)
    );
    stats.n_fallback = chooser.n_fallback;
    if chooser.n_fallback > 0 {
        ggml::log_warn!(
            "llama_model_quantize_impl: WARNING: {} of {} tensor(s) required fallback quantization\n",
            chooser.n_fallback,
            n_tensors
        );
    }
    Ok(stats)
}
