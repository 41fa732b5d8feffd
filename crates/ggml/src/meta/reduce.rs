//! The all-reduce that ends a subgraph: the backend's own when its registry offers one, else
//! the butterfly fallback in ceil(log2 N) steps.

use super::rules::MetaError;
use crate::backend::{self, Backend, Buffer, GraphView, Status};
use crate::context::Context;
use crate::tensor::{Tensor, TensorData};
use std::sync::Arc;

/// One transfer of the fallback: device `src` pushes its partial sum to `dst`, which adds it
/// into its own (or, for `CopyBack`, takes it as the result).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceStep {
    /// a device past the largest power of two folds into the lower one, before the butterfly
    Fold { src: usize, dst: usize },
    /// butterfly exchange at this stride
    Exchange {
        src: usize,
        dst: usize,
        stride: usize,
    },
    /// the reduced result copied back to a folded device
    CopyBack { src: usize, dst: usize },
    /// a device whose slice was empty had its contents cleared to zero first
    Zero { dev: usize },
}

/// The temporary buffers of the fallback: one per device and step, so that the copies of
/// different steps never alias.
#[derive(Default)]
pub struct TmpBuffers {
    bufs: Vec<Vec<Option<Arc<Buffer>>>>,
}

impl TmpBuffers {
    fn get(
        &mut self,
        backends: &[Box<dyn Backend>],
        dev: usize,
        step: usize,
        size: usize,
    ) -> Result<Arc<Buffer>, MetaError> {
        if self.bufs.len() < backends.len() {
            self.bufs.resize(backends.len(), Vec::new());
        }
        let row = &mut self.bufs[dev];
        if row.len() <= step {
            row.resize(step + 1, None);
        }
        if let Some(b) = &row[step] {
            if b.size() >= size {
                return Ok(b.clone());
            }
        }
        let buft = backends[dev].device().buffer_type();
        let b = buft
            .alloc_buffer(size)
            .map_err(|e| MetaError(format!("reduce buffer: {e}")))?;
        row[step] = Some(b.clone());
        Ok(b)
    }
}

/// The number of steps the fallback takes for n devices: ceil(log2 n).
pub fn n_reduce_steps(n: usize) -> usize {
    let mut steps = 0;
    while (1usize << steps) < n {
        steps += 1;
    }
    steps
}

/// dst += src's tensor, on dst's backend, through a temporary buffer of step `step`.
fn push(
    backends: &mut [Box<dyn Backend>],
    tensors: &[Tensor],
    tmp: &mut TmpBuffers,
    src: usize,
    dst: usize,
    step: usize,
) -> Result<Tensor, MetaError> {
    let t = &tensors[dst];
    let buf = tmp.get(backends, dst, step, t.nbytes())?;
    let mut staged = Tensor::new(t.ty, t.ne);
    staged.name = format!("{}#reduce{step}", t.name);
    staged.data = Some(TensorData {
        addr: buf.base(),
        buffer: buf,
    });
    if !backends[dst].cpy_tensor_async(&tensors[src], &staged) {
        backends[src]
            .synchronize()
            .map_err(|e| MetaError(e.to_string()))?;
        backend::tensor_copy(&tensors[src], &staged).map_err(|e| MetaError(e.to_string()))?;
    }
    Ok(staged)
}

fn add_into(backend: &mut dyn Backend, dst: &Tensor, staged: &Tensor) -> Result<(), MetaError> {
    let mut c = Context::with_capacity(3);
    let a = c.import(dst);
    let b = c.import(staged);
    let r = c.add_inplace(a, b);
    match backend.graph_compute(GraphView {
        ctx: &c,
        nodes: &[r],
    }) {
        Status::Success => Ok(()),
        s => Err(MetaError(format!(
            "reduce add of '{}' on {} failed: {s}",
            dst.name,
            backend.name()
        ))),
    }
}

/// The generic all-reduce: afterwards every `tensors[j]` (device j's copy of one full-shape,
/// contiguous F32 tensor, in its own memory) holds the sum over all devices. `computed[j]`
/// false marks a device that skipped the node (an empty slice): its contents are zeroed first.
pub fn allreduce_fallback(
    backends: &mut [Box<dyn Backend>],
    tensors: &[Tensor],
    computed: &[bool],
    tmp: &mut TmpBuffers,
) -> Result<Vec<ReduceStep>, MetaError> {
    let n = backends.len();
    let mut log = Vec::new();
    for (j, t) in tensors.iter().enumerate() {
        if !t.is_contiguous() {
            return Err(MetaError(format!("reduce of non-contiguous '{}'", t.name)));
        }
        if !computed[j] {
            // ggml scales by 0 here (its own FIXME: 0 * NaN is NaN); clearing the bytes gives
            // the zero the sum needs whatever the memory held
            backend::memset_tensor(t, 0, 0, t.nbytes()).map_err(|e| MetaError(e.to_string()))?;
            log.push(ReduceStep::Zero { dev: j });
        }
    }
    if n < 2 {
        return Ok(log);
    }
    let mut p = 1;
    while p * 2 <= n {
        p *= 2;
    }
    let mut step = 0;
    for src in p..n {
        let dst = src - p;
        let staged = push(backends, tensors, tmp, src, dst, 0)?;
        add_into(backends[dst].as_mut(), &tensors[dst], &staged)?;
        log.push(ReduceStep::Fold { src, dst });
        step = 1;
    }
    let mut stride = p / 2;
    while stride >= 1 {
        // every copy of a step is taken before any add of it changes a source
        let mut staged: Vec<(usize, Tensor)> = Vec::new();
        for j in 0..p {
            let dst = j ^ stride;
            staged.push((dst, push(backends, tensors, tmp, j, dst, step)?));
            log.push(ReduceStep::Exchange {
                src: j,
                dst,
                stride,
            });
        }
        for (dst, s) in &staged {
            add_into(backends[*dst].as_mut(), &tensors[*dst], s)?;
        }
        step += 1;
        stride /= 2;
    }
    for dst in p..n {
        let src = dst - p;
        if !backends[dst].cpy_tensor_async(&tensors[src], &tensors[dst]) {
            backends[src]
                .synchronize()
                .map_err(|e| MetaError(e.to_string()))?;
            backend::tensor_copy(&tensors[src], &tensors[dst])
                .map_err(|e| MetaError(e.to_string()))?;
        }
        log.push(ReduceStep::CopyBack { src, dst });
    }
    Ok(log)
}
