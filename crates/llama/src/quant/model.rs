//! llama_model_quantize: read a model (all its shards), choose each tensor's type, quantize
//! the tensors (rows split across threads, with the importance matrix when one is given) and
//! write the new file(s) atomically, logging as llama.cpp does.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use ggml::quants::{bytes_for, dequantize_row, quantize_chunk};
use ggml::Type;
use gguf::{GgufFile, GgufWriter, TensorInfo};

use super::input::{ModelFiles, Weight};
use super::kv_override::{lookup, KvOverride, OverrideValue};
use super::output::{add_split_keys, main_kv, Outputs};
use super::prune::LayerMap;
use super::{tensor_requires_imatrix, ModelInfo, QuantError, QuantizeParams, TypeChooser};
use crate::loader::{LoadMode, ModelLoader};

pub use super::output::{output_kv, QNT_VERSION};

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
    /// Write one output shard per input shard (`OUT-0000i-of-0000n.gguf`).
    pub keep_split: bool,
    /// Metadata written over the input's (`--override-kv`), in order.
    pub kv_overrides: Vec<KvOverride>,
    /// Layers to remove; the others are renumbered.
    pub prune_layers: Vec<u32>,
    /// Importance per column for each tensor (by its name in the input), from an imatrix file.
    pub imatrix: Option<HashMap<String, Vec<f32>>>,
}

impl ModelQuantizeParams {
    pub fn new(types: QuantizeParams) -> ModelQuantizeParams {
        ModelQuantizeParams {
            types,
            nthread: 1,
            allow_requantize: false,
            dry_run: false,
            keep_split: false,
            kv_overrides: Vec::new(),
            prune_layers: Vec::new(),
            imatrix: None,
        }
    }
}

/// What a run produced (sizes in bytes of the tensor data).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuantizeStats {
    pub size_org: u64,
    pub size_new: u64,
    pub n_fallback: u32,
    pub n_tensors: usize,
    /// The files written (none for a dry run).
    pub outputs: Vec<String>,
}

fn failed(msg: impl Into<String>) -> QuantError {
    QuantError::Failed(msg.into())
}

/// A u32 hyperparameter as the model loader reads it: an `int` override wins (logged).
fn u32_key(f: &GgufFile, key: &str, overrides: &[KvOverride]) -> Option<u32> {
    if let Some(OverrideValue::Int(v)) = lookup(overrides, key, "int") {
        return Some(*v as u32);
    }
    f.get(key).and_then(|v| v.as_u64()).map(|v| v as u32)
}

/// The model facts the type choice needs, from the file's metadata.
pub fn model_info(f: &GgufFile) -> Result<ModelInfo, QuantError> {
    model_info_with(f, &[])
}

/// `model_info` with `--override-kv` applied to the keys it reads.
pub fn model_info_with(f: &GgufFile, overrides: &[KvOverride]) -> Result<ModelInfo, QuantError> {
    let arch = match lookup(overrides, "general.architecture", "str") {
        Some(OverrideValue::Str(s)) => s.clone(),
        _ => match f.get("general.architecture") {
            Some(gguf::Value::Str(s)) => s.clone(),
            _ => {
                return Err(failed(
                    "llama_model_loader: missing or invalid general.architecture",
                ))
            }
        },
    };
    let n_layer = u32_key(f, &format!("{arch}.block_count"), overrides).unwrap_or(0);
    let n_expert = u32_key(f, &format!("{arch}.expert_count"), overrides).unwrap_or(0);
    let n_head = u32_key(f, &format!("{arch}.attention.head_count"), overrides).unwrap_or(0);
    let n_head_kv =
        u32_key(f, &format!("{arch}.attention.head_count_kv"), overrides).unwrap_or(n_head);
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

/// Quantizes a tensor's matrices one after another: with an importance matrix each matrix
/// (expert) of a 3-D tensor has its own `n_per_row` weights.
fn quantize_tensor(
    ty: Type,
    src: &[f32],
    ne: &[u64; 4],
    imatrix: Option<&[f32]>,
    nthread: usize,
) -> Vec<u8> {
    let n_per_row = ne[0] as usize;
    let Some(w) = imatrix else {
        return quantize_rows(ty, src, n_per_row, None, nthread);
    };
    let per_matrix = n_per_row * ne[1] as usize;
    let mut out = Vec::with_capacity(bytes_for(ty, n_per_row) * (src.len() / n_per_row));
    for (i, m) in src.chunks(per_matrix.max(1)).enumerate() {
        let i2 = i % ne[2].max(1) as usize;
        let wi = &w[i2 * n_per_row..(i2 + 1) * n_per_row];
        out.extend(quantize_rows(ty, m, n_per_row, Some(wi), nthread));
    }
    out
}

/// One tensor of the output: where it comes from and what it becomes.
struct Planned<'a> {
    weight: Weight<'a>,
    /// The name in the output (renumbered when layers are pruned).
    name: String,
    target: Type,
    requires_imatrix: bool,
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
    if !p.dry_run {
        check_output(out, p.keep_split)?;
    }
    let loader = ModelLoader::open(inp, LoadMode::Mmap).map_err(|e| failed(e.to_string()))?;
    let main: Arc<GgufFile> = loader.gguf.clone();
    let files = ModelFiles::open(inp, main.clone())?;
    let model = model_info_with(&main, &p.kv_overrides)?;
    let ftype = p.types.ftype;
    // COPY keeps the input's file type (guessed flag included, as llama.cpp writes it).
    let ftype_id = if p.types.only_copy {
        loader.ftype
    } else {
        ftype.id()
    };
    let mut types = p.types.clone();
    types.has_imatrix = p.imatrix.is_some();
    if let Some(im) = &p.imatrix {
        ggml::log_info!(
            "\nllama_model_quantize_impl: have importance matrix data with {} entries\n",
            im.len()
        );
        for v in im.values().flatten() {
            if !v.is_finite() {
                return Err(failed(format!(
                    "imatrix contains non-finite value {}\n",
                    gguf::display::c_float(*v as f64)
                )));
            }
        }
    }

    let weights = files.weights()?;
    let n_tensors_all = weights.len();
    let n_elements: u64 = weights.iter().map(|w| w.info.n_elements()).sum();
    let mut layers = LayerMap::new(p.prune_layers.clone());
    let mut plan: Vec<Planned> = Vec::with_capacity(weights.len());
    for w in weights {
        if let Some(name) = layers.remap(&w.info.name) {
            plan.push(Planned {
                weight: w,
                name,
                target: Type::F32,
                requires_imatrix: false,
            });
        }
    }
    if p.keep_split {
        plan.sort_by_key(|t| (t.weight.idx, t.weight.info.offset));
    }

    // Preliminary pass: every tensor's type (fallback warnings are logged here, as llama.cpp does).
    let names: Vec<&str> = plan.iter().map(|t| t.name.as_str()).collect();
    let mut chooser = TypeChooser::new(&model, &types, &names);
    let mut will_require_imatrix = false;
    for t in plan.iter_mut() {
        let info = t.weight.info;
        let desc = super::TensorDesc {
            name: t.name.clone(),
            ne: info.ne,
            ty: info.ty,
        };
        let choice = chooser.choose(&desc)?;
        for w in &choice.warnings {
            ggml::log_warn!("{}", w);
        }
        if choice.ty != info.ty && !ggml::quants::is_supported(choice.ty) {
            return Err(failed(format!(
                "tensor '{}': quantizing to type {} is not implemented",
                t.name, choice.ty
            )));
        }
        t.target = choice.ty;
        t.requires_imatrix = tensor_requires_imatrix(&t.name, choice.ty, ftype);
        let allows = super::allows_quantization(&types, &desc);
        if p.imatrix.is_none() && allows && t.requires_imatrix {
            if p.dry_run {
                will_require_imatrix = true;
            } else {
                ggml::log_error!(
                    "\n============================================================================\n ERROR: this quantization requires an importance matrix!\n        - offending tensor: {}\n        - target type: {}\n============================================================================\n\n",
                    t.name,
                    choice.ty
                );
                return Err(failed("this quantization requires an imatrix!"));
            }
        }
    }

    let n_split = if p.keep_split {
        plan.iter().map(|t| t.weight.idx + 1).max().unwrap_or(1)
    } else {
        1
    };
    let block_count = layers.is_active().then(|| {
        (
            format!("{}.block_count", model.arch),
            layers.block_count() as u32,
        )
    });
    let mut kv0 = main_kv(&main, ftype_id, &p.kv_overrides, block_count);
    check_result(inp, &kv0, &plan)?;
    let mut writers: Vec<GgufWriter> = (0..n_split).map(|_| GgufWriter::new()).collect();
    for (i, w) in writers.iter_mut().enumerate() {
        let mut kv = if i == 0 {
            std::mem::take(&mut kv0)
        } else {
            Vec::new()
        };
        if n_split > 1 {
            add_split_keys(&mut kv, i, n_split, plan.len());
        }
        for (k, v) in kv {
            w.add_kv(k, v).map_err(|e| failed(e.to_string()))?;
        }
    }
    for t in &plan {
        let shard = if p.keep_split { t.weight.idx } else { 0 };
        writers[shard]
            .add_tensor(t.name.clone(), t.target, t.weight.info.shape())
            .map_err(|e| failed(e.to_string()))?;
    }
    let out_str = out.display().to_string();
    let mut outputs = if p.dry_run {
        None
    } else {
        Some(Outputs::new(&out_str, p.keep_split, writers))
    };

    let mut stats = QuantizeStats {
        n_tensors: n_tensors_all,
        ..Default::default()
    };
    for (i, t) in plan.iter().enumerate() {
        let info = t.weight.info;
        let new_type = t.target;
        let data = files.data(&t.weight);
        if data.len() as u64 != info.size {
            return Err(failed(format!(
                "tensor '{}' data is not within the file bounds",
                info.name
            )));
        }
        ggml::log_info!(
            "[{:>4}/{:>4}] {:<36} - [{}], type = {:>6}, ",
            i + 1,
            n_tensors_all,
            t.name,
            shape_str(&info.ne),
            info.ty.name()
        );
        // An empty tensor has nothing to convert; it keeps its bytes (none) under the new type.
        let quantize = info.ty != new_type && info.n_elements() > 0;
        if quantize && !info.ne[0].is_multiple_of(new_type.block_size() as u64) {
            return Err(failed(format!(
                "tensor '{}': rows of {} elements do not divide into {} blocks of {}",
                t.name,
                info.ne[0],
                new_type,
                new_type.block_size()
            )));
        }
        let org = info.size;
        let new_size;
        if p.dry_run {
            if quantize {
                new_size = bytes_for(new_type, info.ne[0] as usize) as u64
                    * (info.n_elements() / info.ne[0].max(1));
                ggml::log_info!(
                    "size = {:8.2} MiB -> {:8.2} MiB ({})\n",
                    org as f64 / MIB,
                    new_size as f64 / MIB,
                    new_type
                );
                will_require_imatrix |= t.requires_imatrix;
            } else {
                new_size = org;
                ggml::log_info!("size = {:8.3} MiB\n", org as f64 / MIB);
            }
        } else {
            let shard = if p.keep_split { t.weight.idx } else { 0 };
            let outs = outputs.as_mut().ok_or_else(|| failed("no output"))?;
            if !quantize {
                new_size = org;
                ggml::log_info!("size = {:8.3} MiB\n", org as f64 / MIB);
                outs.write(shard, data)?;
            } else {
                let imatrix = tensor_imatrix(p, t)?;
                // ggml cannot make IQ2_XXS, IQ2_XS or IQ1_S without one (it asserts); this is
                // reachable for output.weight / token_embd through --output-tensor-type or
                // --token-embedding-type, which tensor_requires_imatrix exempts
                if imatrix.is_none() && ggml::quants::requires_imatrix(new_type) {
                    return Err(failed(format!(
                        "tensor '{}': type {} cannot be quantized without an importance matrix",
                        t.name, new_type
                    )));
                }
                if imatrix.is_none() && t.requires_imatrix {
                    ggml::log_error!(
                        "\n\n============================================================\n"
                    );
                    ggml::log_error!(
                        "Missing importance matrix for tensor {} in a very low-bit quantization\n",
                        t.name
                    );
                    ggml::log_error!("The result will be garbage, so bailing out\n");
                    ggml::log_error!(
                        "============================================================\n\n"
                    );
                    return Err(failed(format!(
                        "Missing importance matrix for tensor {} in a very low-bit quantization",
                        t.name
                    )));
                }
                if info.ty.is_quantized() && !p.allow_requantize {
                    return Err(failed(format!(
                        "requantizing from type {} is disabled",
                        info.ty
                    )));
                }
                ggml::log_info!("converting to {} .. ", new_type);
                let src = to_f32(info, data)?;
                let q = quantize_tensor(new_type, &src, &info.ne, imatrix, p.nthread);
                new_size = q.len() as u64;
                outs.write(shard, &q)?;
                ggml::log_info!(
                    "size = {:8.2} MiB -> {:8.2} MiB\n",
                    org as f64 / MIB,
                    new_size as f64 / MIB
                );
            }
        }
        stats.size_org += org;
        stats.size_new += new_size;
        progress(i + 1, plan.len());
    }
    if let Some(o) = outputs {
        stats.outputs = o.finish()?;
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
    if p.imatrix.is_none() && p.dry_run && will_require_imatrix {
        ggml::log_warn!("llama_model_quantize_impl: WARNING: dry run completed successfully, but actually completing this quantization will require an imatrix!\n");
    }
    stats.n_fallback = chooser.n_fallback;
    if chooser.n_fallback > 0 {
        ggml::log_warn!(
            "llama_model_quantize_impl: WARNING: {} of {} tensor(s) required fallback quantization\n",
            chooser.n_fallback,
            n_tensors_all
        );
    }
    Ok(stats)
}

/// Fails at once, before anything is read, where the output cannot be written: a directory,
/// a missing directory, no permission. The probe is the very temporary the writer creates.
fn check_output(out: &Path, keep_split: bool) -> Result<(), QuantError> {
    if !keep_split && out.is_dir() {
        return Err(failed(format!(
            "output path '{}' is a directory",
            out.display()
        )));
    }
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !dir.exists() {
        return Err(failed(format!(
            "cannot write '{}': directory '{}' does not exist",
            out.display(),
            dir.display()
        )));
    }
    atomic_file::create_tmp(out)
        .map(drop)
        .map_err(|e| failed(format!("cannot write '{}': {e}", out.display())))
}

/// Runs the loader's checks (`llama::model_check`) on the model about to be written: its KV
/// pairs and tensors with their new names and types. Nothing is written for a model the
/// loader would reject; the loader's warnings are logged.
fn check_result(
    inp: &Path,
    kv: &[(String, gguf::Value)],
    plan: &[Planned],
) -> Result<(), QuantError> {
    let mut probe = GgufFile::open_metadata(inp).map_err(|e| failed(e.to_string()))?;
    probe.kv = kv.to_vec();
    probe.tensors = plan
        .iter()
        .map(|t| TensorInfo::new(t.name.clone(), t.target, t.weight.info.shape()))
        .collect::<Result<_, _>>()
        .map_err(|e| failed(e.to_string()))?;
    let warnings =
        crate::model_check::check_loadable(Arc::new(probe)).map_err(|e| failed(e.to_string()))?;
    for w in warnings {
        ggml::log_warn!("llama_model_quantize_impl: warning: {}\n", w);
    }
    Ok(())
}

/// The importance weights for a tensor being quantized: looked up by its name in the input,
/// `None` (logged) when the file has none, an error when their count does not fit the tensor.
fn tensor_imatrix<'a>(
    p: &'a ModelQuantizeParams,
    t: &Planned,
) -> Result<Option<&'a [f32]>, QuantError> {
    let Some(im) = &p.imatrix else {
        return Ok(None);
    };
    let Some(v) = im.get(&t.weight.info.name) else {
        ggml::log_info!(
            "\n====== llama_model_quantize_impl: did not find weights for {}\n",
            t.name
        );
        return Ok(None);
    };
    let ne = &t.weight.info.ne;
    let want = (ne[0] * ne[2]) as usize;
    if v.len() == want {
        return Ok(Some(v));
    }
    ggml::log_info!(
        "\n====== llama_model_quantize_impl: imatrix size {} is different from tensor size {} for {}\n",
        v.len(),
        want,
        t.name
    );
    // Embeddings often have a mismatched entry; llama.cpp quantizes them without one.
    if super::is_token_embd(&t.name) {
        return Ok(None);
    }
    Err(failed(format!(
        "imatrix size {} is different from tensor size {} for {}",
        v.len(),
        want,
        t.name
    )))
}
