//! LoRA adapters (llama_adapter_lora): pairs of low-rank matrices `<weight>.lora_a` and
//! `<weight>.lora_b` read from a GGUF adapter file, kept in the buffer type of the model
//! weight they modify, and applied in the graph by `build_lora_mm` as
//! `W·x + scale · B·(A·x)` with scale = adapter_scale · alpha / rank (alpha 0: adapter_scale).
//! A context holds the adapters it applies and their scales (llama_set_adapters_lora).

use crate::context::Context;
use crate::error::{LlamaError, Result};
use crate::model::Model;
use ggml::backend::{set_tensor, Buffer, BufferTypeRef};
use ggml::{Tensor, TensorId};
use gguf::{display, Value};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// One adapted weight: A is [n_in, rank], B is [rank, n_out] (for token_embd, A is
/// [rank, n_vocab] and B [rank, n_embd]: rows of A are gathered per token).
#[derive(Clone, Copy, Debug)]
struct Pair {
    a: TensorId,
    b: TensorId,
}

pub struct LoraAdapter {
    model: Arc<Model>,
    ctx: ggml::Context,
    /// model tensor name -> its pair
    ab: HashMap<String, Pair>,
    alpha: f32,
    /// the adapter's scalar metadata as strings (llama_adapter_meta_val_str)
    meta: Vec<(String, String)>,
    alora_invocation_tokens: Vec<i32>,
    _buffers: Vec<Arc<Buffer>>,
}

impl std::fmt::Debug for LoraAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LoraAdapter({} weights)", self.ab.len())
    }
}

impl Drop for LoraAdapter {
    fn drop(&mut self) {
        self.model
            .lora_nodes
            .fetch_sub(self.n_nodes(), Ordering::Relaxed);
    }
}

fn bad(why: impl Into<String>) -> LlamaError {
    LlamaError::Adapter(why.into())
}

impl LoraAdapter {
    /// llama_adapter_lora_init: reads the adapter at `path` for `model`, with llama.cpp's log
    /// lines; on failure logs "failed to apply lora adapter: <why>" and returns the cause.
    pub fn load(model: &Arc<Model>, path: &str) -> Result<Arc<LoraAdapter>> {
        ggml::log_info!("llama_adapter_lora_init: loading lora adapter from '{path}' ...\n");
        if let Err(e) = std::fs::File::open(path) {
            let why = e.to_string();
            let why = why.split(" (os error").next().unwrap_or_default();
            ggml::log_error!("llama_adapter_lora_init: failed to open '{path}': {why}\n");
            return Err(bad(format!("failed to open '{path}': {why}")));
        }
        let file = match gguf::GgufFile::open(path) {
            Ok(f) => f,
            Err(e) => {
                ggml::log_error!("gguf_init_from_file: {}\n", e);
                let why = format!("failed to load lora adapter from file: {e}");
                ggml::log_error!(
                    "llama_adapter_lora_init_from_file_ptr: failed to apply lora adapter: {why}\n"
                );
                return Err(bad(why));
            }
        };
        Self::from_file(model, &file)
            .inspect_err(|e| {
                ggml::log_error!(
                    "llama_adapter_lora_init_from_file_ptr: failed to apply lora adapter: {e}\n"
                )
            })
            .map(Arc::new)
    }

    fn from_file(model: &Arc<Model>, file: &gguf::GgufFile) -> Result<LoraAdapter> {
        const F: &str = "llama_adapter_lora_init_impl";
        ggml::log_info!("{F}: Dumping metadata keys/values.\n");
        let mut meta = Vec::new();
        for (i, (key, value)) in file.kv.iter().enumerate() {
            if !matches!(value, Value::Array(_)) {
                meta.push((key.clone(), display::kv_to_str(value, None)));
            }
            ggml::log_info!("{F}: {}\n", display::kv_line_string(i, key, value));
        }
        let get_str = |key: &str| match file.get(key) {
            Some(Value::Str(s)) => s.clone(),
            _ => String::new(),
        };
        let general_type = get_str("general.type");
        if general_type != "adapter" {
            return Err(bad(format!(
                "expect general.type to be 'adapter', but got: {general_type}"
            )));
        }
        if get_str("general.architecture") != model.arch_name {
            return Err(bad("model arch and LoRA arch mismatch"));
        }
        let adapter_type = get_str("adapter.type");
        if adapter_type != "lora" {
            return Err(bad(format!(
                "expect adapter.type to be 'lora', but got: {adapter_type}"
            )));
        }
        let alpha = match file.get("adapter.lora.alpha") {
            Some(Value::F32(x)) => *x,
            None => 0.0,
            Some(_) => return Err(bad("invalid gguf type for adapter.lora.alpha")),
        };
        const INVOCATION: &str = "adapter.alora.invocation_tokens";
        let alora_invocation_tokens = match file.get(INVOCATION) {
            None => Vec::new(),
            Some(Value::Array(a)) => match a.as_slice::<u32>() {
                Some(v) => v.iter().map(|&t| t as i32).collect(),
                None => return Err(bad(format!("invalid gguf element type for {INVOCATION}"))),
            },
            Some(_) => return Err(bad(format!("invalid gguf type for {INVOCATION}"))),
        };

        // bundle lora_a and lora_b into pairs, by the name of the weight they adapt (sorted,
        // as llama.cpp's std::map, which fixes the order of the buffers' contents)
        let mut pairs: std::collections::BTreeMap<String, [Option<usize>; 2]> = Default::default();
        for (i, t) in file.tensors.iter().enumerate() {
            if let Some(base) = t.name.strip_suffix(".lora_a") {
                pairs.entry(base.to_string()).or_default()[0] = Some(i);
            } else if let Some(base) = t.name.strip_suffix(".lora_b") {
                pairs.entry(base.to_string()).or_default()[1] = Some(i);
            } else if t.name.ends_with("_norm.weight") {
                // llama.cpp ignores norm vectors: most adapters work without them
                continue;
            } else {
                return Err(bad(format!(
                    "LoRA tensor '{}' has unexpected suffix",
                    t.name
                )));
            }
        }

        let cpu_extras: Vec<BufferTypeRef> = model
            .placement
            .cpu
            .as_ref()
            .map(|d| d.extra_buffer_types())
            .unwrap_or_default();
        let cpu_buft = model.placement.cpu.as_ref().map(|d| d.buffer_type());
        let mut ctx = ggml::Context::new();
        let mut ab = HashMap::new();
        let mut by_buft: Vec<(BufferTypeRef, Vec<TensorId>)> = Vec::new();
        let mut sources: Vec<(TensorId, usize)> = Vec::new();
        for (name, [ia, ib]) in &pairs {
            let (Some(ia), Some(ib)) = (*ia, *ib) else {
                return Err(bad(format!(
                    "LoRA tensor pair for '{name}' is missing one component"
                )));
            };
            let Some(mid) = model.ctx.find(name) else {
                return Err(bad(format!(
                    "LoRA tensor '{name}' does not exist in base model (hint: maybe wrong base model?)"
                )));
            };
            let mt = &model.ctx[mid];
            let (ta, tb) = (&file.tensors[ia], &file.tensors[ib]);
            let (a_ne, b_ne) = (ta.ne.map(|x| x as i64), tb.ne.map(|x| x as i64));
            if name.ends_with("token_embd.weight") {
                // B is not transposed and A, B are flipped (see build_inp_embd)
                if mt.ne[0] != b_ne[1] || mt.ne[1] != a_ne[1] {
                    return Err(bad(format!(
                        "tensor '{name}' has incorrect shape (hint: maybe wrong base model?)"
                    )));
                }
            } else {
                if mt.ne[0] != a_ne[0] || mt.ne[1] != b_ne[1] {
                    return Err(bad(format!(
                        "tensor '{name}' has incorrect shape (hint: maybe wrong base model?)"
                    )));
                }
                if a_ne[1] != b_ne[0] {
                    return Err(bad(
                        "lora_a tensor is not transposed (hint: adapter from \"finetune\" example is no longer supported)",
                    ));
                }
            }
            let mut buft = match (&mt.data, &cpu_buft) {
                (Some(d), _) => d.buffer.buft().clone(),
                (None, Some(c)) => c.clone(),
                (None, None) => return Err(LlamaError::NoDevice("no CPU backend found".into())),
            };
            // repacking buffer types hold only what their kernels know: use the CPU's
            if cpu_extras
                .iter()
                .any(|x| ggml::backend::same_buft(x, &buft))
            {
                ggml::log_warn!(
                    "{F}: lora for '{name}' cannot use buft '{}', fallback to CPU\n",
                    buft.name()
                );
                buft = cpu_buft
                    .clone()
                    .ok_or_else(|| LlamaError::NoDevice("no CPU backend found".into()))?;
            }
            ggml::log_debug!("{F}: lora for '{name}' -> '{}'\n", buft.name());
            let a = ctx.new_tensor(ta.ty, &a_ne[..ta.n_dims.max(1) as usize]);
            ctx.set_name(a, &ta.name);
            let b = ctx.new_tensor(tb.ty, &b_ne[..tb.n_dims.max(1) as usize]);
            ctx.set_name(b, &tb.name);
            match by_buft
                .iter_mut()
                .find(|(x, _)| ggml::backend::same_buft(x, &buft))
            {
                Some((_, ids)) => ids.extend([a, b]),
                None => by_buft.push((buft, vec![a, b])),
            }
            sources.extend([(a, ia), (b, ib)]);
            ab.insert(name.clone(), Pair { a, b });
        }

        let mut buffers = Vec::new();
        for (buft, ids) in &by_buft {
            let buf = crate::buffers::alloc_tensors(&mut ctx, ids, buft, "lora adapter")
                .map_err(|_| bad("failed to allocate buffer for lora adapter\n"))?;
            ggml::log_info!(
                "{F}: {:>10} LoRA buffer size = {:8.2} MiB\n",
                buf.name(),
                buf.size() as f64 / 1024.0 / 1024.0
            );
            buffers.push(buf);
        }
        for (id, i) in sources {
            let info = &file.tensors[i];
            let want = ctx[id].nbytes();
            if info.size as usize != want {
                return Err(bad(format!(
                    "LoRA tensor '{}' data is not within the file bounds, file is corrupted or incomplete",
                    info.name
                )));
            }
            set_tensor(&ctx[id], file.tensor_data(info), 0)?;
        }
        ggml::log_info!("{F}: loaded {} tensors from lora file\n", ab.len() * 2);
        let adapter = LoraAdapter {
            model: model.clone(),
            ctx,
            ab,
            alpha,
            meta,
            alora_invocation_tokens,
            _buffers: buffers,
        };
        model
            .lora_nodes
            .fetch_add(adapter.n_nodes(), Ordering::Relaxed);
        Ok(adapter)
    }

    /// The A and B tensors for the model weight named `name`, and the scale to apply them with.
    pub(crate) fn weight(&self, name: &str, adapter_scale: f32) -> Option<(&Tensor, &Tensor, f32)> {
        let p = self.ab.get(name)?;
        let (a, b) = (&self.ctx[p.a], &self.ctx[p.b]);
        let rank = b.ne[0] as f32;
        let scale = if self.alpha != 0.0 {
            adapter_scale * self.alpha / rank
        } else {
            adapter_scale
        };
        Some((a, b, scale))
    }

    /// Graph nodes the adapter adds at most (a, b, scale, add, two products per weight).
    pub fn n_nodes(&self) -> usize {
        self.ab.len() * 6
    }

    /// llama_adapter_meta_val_str
    pub fn meta_val_str(&self, key: &str) -> Option<&str> {
        self.meta
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn meta(&self) -> &[(String, String)] {
        &self.meta
    }

    pub fn alpha(&self) -> f32 {
        self.alpha
    }

    /// llama_adapter_get_alora_invocation_tokens
    pub fn alora_invocation_tokens(&self) -> &[i32] {
        &self.alora_invocation_tokens
    }
}

impl Context {
    /// llama_set_adapters_lora: the adapters this context applies, with their scales (a zero
    /// scale leaves an adapter out). A change rebuilds the graph and its reservation.
    pub fn set_adapters_lora(&mut self, adapters: &[(Arc<LoraAdapter>, f32)]) {
        let wanted: Vec<(Arc<LoraAdapter>, f32)> = adapters
            .iter()
            .filter(|(_, s)| *s != 0.0)
            .cloned()
            .collect();
        let same = wanted.len() == self.loras.len()
            && wanted
                .iter()
                .zip(&self.loras)
                .all(|((a, s), (b, t))| Arc::ptr_eq(a, b) && s == t);
        if same {
            return;
        }
        self.loras = wanted;
        self.sched_need_reserve = true;
        self.prev = None;
    }

    pub fn lora_adapters(&self) -> &[(Arc<LoraAdapter>, f32)] {
        &self.loras
    }
}
