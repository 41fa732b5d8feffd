//! Control vectors (llama_adapter_cvec): one F32 direction of n_embd per layer, added to the
//! layer's output (`build_cvec`) for the layers in [layer_start, layer_end]. As in llama.cpp,
//! layer 0 never has one and the data of layer il starts at n_embd * (il - 1); the tensors live
//! on the device of their layer and are created, zeroed, at the first `set_adapter_cvec`.

use crate::context::Context;
use crate::error::{LlamaError, Result};
use ggml::backend::{set_tensor, Buffer, BufferTypeRef};
use ggml::{TensorId, Type};
use std::sync::Arc;

#[derive(Default)]
pub struct ControlVector {
    ctx: ggml::Context,
    /// index = layer; None for layer 0
    tensors: Vec<Option<TensorId>>,
    _buffers: Vec<Arc<Buffer>>,
    layer_start: i32,
    layer_end: i32,
}

impl ControlVector {
    /// The direction added after layer `il`, when the vector is on for it (tensor_for).
    pub(crate) fn tensor_for(&self, il: i32) -> Option<&ggml::Tensor> {
        if il < 0 || il < self.layer_start || il > self.layer_end {
            return None;
        }
        let id = (*self.tensors.get(il as usize)?)?;
        Some(&self.ctx[id])
    }

    fn init(&mut self, model: &crate::Model) -> Result<()> {
        let hp = &model.hparams;
        let cpu = model
            .placement
            .cpu
            .clone()
            .ok_or_else(|| LlamaError::NoDevice("the model has no CPU device".into()))?;
        let mut by_buft: Vec<(BufferTypeRef, Vec<TensorId>)> = Vec::new();
        self.tensors.push(None);
        for il in 1..hp.n_layer as usize {
            let buft = model.dev_layer(il).unwrap_or(&cpu).buffer_type();
            let t = self.ctx.new_tensor(Type::F32, &[hp.n_embd as i64]);
            self.tensors.push(Some(t));
            match by_buft
                .iter_mut()
                .find(|(b, _)| ggml::backend::same_buft(b, &buft))
            {
                Some((_, ids)) => ids.push(t),
                None => by_buft.push((buft, vec![t])),
            }
        }
        for (buft, ids) in &by_buft {
            let buf = crate::buffers::alloc_tensors(&mut self.ctx, ids, buft, "control vector")
                .inspect_err(|_| {
                    ggml::log_error!("init: failed to allocate buffer for control vector\n")
                })?;
            buf.clear(0)?;
            self._buffers.push(buf);
        }
        Ok(())
    }
}

impl Context {
    /// llama_set_adapter_cvec: `data` holds n_embd floats per layer from layer 1 on (None turns
    /// the vector off but keeps its tensors). The compute buffers are reserved again before
    /// the next decode, since the graph gains the additions.
    pub fn set_adapter_cvec(
        &mut self,
        data: Option<&[f32]>,
        n_embd: i32,
        il_start: i32,
        il_end: i32,
    ) -> Result<()> {
        ggml::log_debug!(
            "set_adapter_cvec: il_start = {}, il_end = {}\n",
            il_start,
            il_end
        );
        self.sched_need_reserve = true;
        self.prev = None;
        let Some(data) = data else {
            self.cvec.layer_start = -1;
            self.cvec.layer_end = -1;
            return Ok(());
        };
        let hp = &self.model.hparams;
        if n_embd != hp.n_embd as i32 {
            ggml::log_error!("apply: control vector n_embd does not match model\n");
            return Err(LlamaError::BadParams(
                "control vector n_embd does not match model".into(),
            ));
        }
        if self.cvec.tensors.is_empty() {
            let model = self.model.clone();
            self.cvec.init(&model)?;
        }
        self.cvec.layer_start = il_start;
        self.cvec.layer_end = il_end;
        let n = n_embd as usize;
        for il in 1..hp.n_layer as usize {
            let off = n * (il - 1);
            if off + n <= data.len() {
                let id = self.cvec.tensors[il].expect("layers >= 1 have a tensor");
                let bytes: Vec<u8> = data[off..off + n]
                    .iter()
                    .flat_map(|x| x.to_le_bytes())
                    .collect();
                set_tensor(&self.cvec.ctx[id], &bytes, 0)?;
            }
        }
        Ok(())
    }

    /// The reservation a new control vector asks for, at the start of a decode.
    pub(crate) fn reserve_if_needed(&mut self) -> Result<()> {
        if !self.sched_need_reserve {
            return Ok(());
        }
        self.sched_need_reserve = false;
        ggml::log_info!("sched_reserve: reserving ...\n");
        let n_tokens = self.cparams.n_ctx.min(self.cparams.n_ubatch) as usize;
        let max_nodes = crate::context::graph_max_nodes(&self.model, n_tokens);
        self.sched_reserve(max_nodes)
    }
}

/// One `--control-vector[-scaled]` file and its strength.
pub struct ControlVectorFile {
    pub path: String,
    pub strength: f32,
}

/// What common_control_vector_load makes of the files: n_embd and the summed, scaled
/// directions from layer 1 on; None after the reason was logged (llama.cpp's lines).
pub fn load_control_vectors(files: &[ControlVectorFile]) -> Option<(i32, Vec<f32>)> {
    let mut result: Option<(i32, Vec<f32>)> = None;
    for f in files {
        let Some((n_embd, data)) = load_one(f) else {
            ggml::log_error!("cmn  common_contr: no valid control vector files passed\n");
            return None;
        };
        match &mut result {
            None => result = Some((n_embd, data)),
            Some((n, acc)) => {
                if *n != n_embd {
                    ggml::log_error!(
                        "cmn  common_contr: control vectors in {} does not match previous dimensions\n",
                        f.path
                    );
                    ggml::log_error!("cmn  common_contr: no valid control vector files passed\n");
                    return None;
                }
                if acc.len() < data.len() {
                    acc.resize(data.len(), 0.0);
                }
                for (a, d) in acc.iter_mut().zip(&data) {
                    *a += d;
                }
            }
        }
    }
    if result.is_none() {
        ggml::log_error!("cmn  common_contr: no valid control vector files passed\n");
    }
    result
}

/// common_control_vector_load_one: the `direction.N` tensors (N >= 1, F32, 1-D, all of one
/// length) of a file, scaled by its strength.
fn load_one(f: &ControlVectorFile) -> Option<(i32, Vec<f32>)> {
    let err = |why: &str| {
        ggml::log_error!("cmn  common_contr: {} in {}\n", why, f.path);
        ggml::log_warn!(
            "cmn  common_contr: skipping {} due to invalid direction tensors\n",
            f.path
        );
        None
    };
    let file = match gguf::GgufFile::open(&f.path) {
        Ok(g) => g,
        Err(e) => {
            ggml::log_error!("gguf_init_from_file: {}\n", e);
            ggml::log_error!(
                "cmn  common_contr: failed to load control vector file from {}\n",
                f.path
            );
            return None;
        }
    };
    if file.tensors.is_empty() {
        ggml::log_warn!(
            "cmn  common_contr: no direction tensors found in {}\n",
            f.path
        );
    }
    let mut n_embd: i64 = -1;
    let mut data: Vec<f32> = Vec::new();
    for t in &file.tensors {
        let layer = t
            .name
            .split_once('.')
            .filter(|(head, _)| *head == "direction")
            .and_then(|(_, idx)| parse_stoi(idx));
        let layer = match layer {
            // no model has that many layers; the bound keeps a hostile index from sizing memory
            Some(l) if l > 0 && l <= 65536 => l as usize,
            Some(0) => return err("invalid (zero) direction tensor layer index"),
            _ => return err("invalid/unparsable direction tensor layer index"),
        };
        if t.ty != Type::F32 {
            return err("invalid (non-F32) direction tensor type");
        }
        if t.ne[1..].iter().any(|&n| n != 1) {
            return err("invalid (non-1D) direction tensor shape");
        }
        let n = t.ne[0] as i64;
        if n_embd == -1 {
            n_embd = n;
        } else if n != n_embd {
            ggml::log_error!(
                "cmn  common_contr: direction tensor in {} does not match previous dimensions\n",
                f.path
            );
            ggml::log_warn!(
                "cmn  common_contr: skipping {} due to invalid direction tensors\n",
                f.path
            );
            return None;
        }
        let n = n as usize;
        let range = t.offset as usize..(t.offset + t.size) as usize;
        let Some(bytes) = file.data().get(range) else {
            return err("direction tensor data out of the file");
        };
        if data.len() < n * layer {
            data.resize(n * layer, 0.0);
        }
        let dst = &mut data[n * (layer - 1)..n * layer];
        for (d, c) in dst.iter_mut().zip(bytes.chunks_exact(4)) {
            *d += f32::from_le_bytes([c[0], c[1], c[2], c[3]]) * f.strength;
        }
    }
    if n_embd == -1 {
        // no tensors at all: llama.cpp keeps n_embd = -1 and skips the file
        ggml::log_warn!(
            "cmn  common_contr: skipping {} due to invalid direction tensors\n",
            f.path
        );
        return None;
    }
    Some((n_embd as i32, data))
}

/// std::stoi: optional whitespace, a sign, digits; what follows the digits is ignored.
fn parse_stoi(s: &str) -> Option<i64> {
    let t = s.trim_start();
    let (neg, rest) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let v: i64 = digits.parse().ok()?;
    if v > i32::MAX as i64 {
        return None;
    }
    Some(if neg { -v } else { v })
}
