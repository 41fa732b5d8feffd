//! Allocation of tensors one after another in a single buffer (ggml_tallocr), and of all the
//! tensors of a context in buffers of one buffer type (ggml_backend_alloc_ctx_tensors_from_buft).

use super::dyn_tallocr::align_up;
use super::AllocError;
use crate::backend::{Buffer, BufferTypeRef};
use crate::context::Context;
use crate::tensor::{TensorData, TensorId};
use std::sync::Arc;

/// A bump allocator over one buffer.
pub struct Tallocr {
    buffer: Arc<Buffer>,
    alignment: usize,
    offset: usize,
}

impl Tallocr {
    pub fn new(buffer: Arc<Buffer>) -> Tallocr {
        let alignment = buffer.buft().alignment();
        assert!(
            alignment.is_power_of_two(),
            "buffer alignment {alignment} is not a power of two"
        );
        // the first tensor starts at the first aligned address of the buffer
        let offset = align_up(buffer.base(), alignment) - buffer.base();
        Tallocr {
            buffer,
            alignment,
            offset,
        }
    }

    pub fn buffer(&self) -> &Arc<Buffer> {
        &self.buffer
    }

    /// Bytes used so far, alignment padding included.
    pub fn offset(&self) -> usize {
        self.offset
    }

    pub fn alloc(&mut self, ctx: &mut Context, t: TensorId) -> Result<(), AllocError> {
        if ctx[t].data.is_some() {
            return Err(AllocError::AlreadyAllocated(ctx[t].name.clone()));
        }
        let size = align_up(self.buffer.buft().alloc_size(&ctx[t]), self.alignment);
        let available = self.buffer.size().saturating_sub(self.offset);
        if size > available {
            crate::log_error!(
                "{}: not enough space in the buffer to allocate {} (needed {}, available {})\n",
                "ggml_tallocr_alloc",
                ctx[t].name,
                size,
                available
            );
            return Err(AllocError::BufferFull {
                tensor: ctx[t].name.clone(),
                needed: size,
                available,
            });
        }
        let addr = self.buffer.base() + self.offset;
        self.offset += size;
        ctx[t].data = Some(TensorData {
            buffer: self.buffer.clone(),
            addr,
        });
        self.buffer.init_tensor(&ctx[t])?;
        Ok(())
    }
}

/// The tensors that need memory of their own: not allocated yet and not views.
fn own_size(ctx: &Context, t: TensorId, buft: &BufferTypeRef) -> usize {
    let tensor = &ctx[t];
    if tensor.data.is_some() || tensor.view_src.is_some() {
        return 0;
    }
    align_up(buft.alloc_size(tensor), buft.alignment())
}

/// Groups the context's tensors into buffer-sized ranges: (first, end, bytes) in tensor order,
/// a new range whenever the buffer type's max size would be exceeded.
fn ranges(ctx: &Context, buft: &BufferTypeRef) -> Vec<(usize, usize, usize)> {
    let max_size = buft.max_size();
    let mut out = Vec::new();
    let (mut first, mut cur) = (0usize, 0usize);
    for t in ctx.ids() {
        let this = own_size(ctx, t, buft);
        if cur > 0 && cur + this > max_size {
            out.push((first, t.index(), cur));
            first = t.index();
            cur = this;
        } else {
            cur += this;
        }
    }
    if cur > 0 {
        out.push((first, ctx.len(), cur));
    }
    out
}

/// The total bytes `alloc_ctx_tensors_set` would allocate.
pub fn alloc_ctx_tensors_size(ctx: &Context, buft: &BufferTypeRef) -> usize {
    ranges(ctx, buft).iter().map(|r| r.2).sum()
}

/// Allocates every unallocated tensor of the context in as few buffers of `buft` as its max
/// size allows, then points the views at their sources. Empty when nothing needed memory.
pub fn alloc_ctx_tensors_set(
    ctx: &mut Context,
    buft: &BufferTypeRef,
) -> Result<Vec<Arc<Buffer>>, AllocError> {
    let mut buffers = Vec::new();
    for (first, end, size) in ranges(ctx, buft) {
        let buffer = match buft.clone().alloc_buffer(size) {
            Ok(b) => b,
            Err(e) => {
                crate::log_error!(
                    "{}: failed to allocate {} buffer of size {}\n",
                    "alloc_tensor_range",
                    buft.name(),
                    size
                );
                return Err(e.into());
            }
        };
        let mut tallocr = Tallocr::new(buffer.clone());
        for i in first..end {
            let t = TensorId(i as u32);
            if ctx[t].data.is_none() && ctx[t].view_src.is_none() {
                tallocr.alloc(ctx, t)?;
            }
        }
        buffers.push(buffer);
    }
    for t in ctx.ids() {
        if let (Some(vs), None) = (ctx[t].view_src, &ctx[t].data) {
            if let Some(d) = ctx[vs].data.clone() {
                let offs = ctx[t].view_offs;
                ctx[t].data = Some(TensorData {
                    buffer: d.buffer.clone(),
                    addr: d.addr + offs,
                });
                d.buffer.init_tensor(&ctx[t])?;
            }
        }
    }
    Ok(buffers)
}

/// As `alloc_ctx_tensors_set` when one buffer suffices (every host buffer type): None when all
/// tensors were already allocated, an error when the max size would need several buffers.
pub fn alloc_ctx_tensors(
    ctx: &mut Context,
    buft: &BufferTypeRef,
) -> Result<Option<Arc<Buffer>>, AllocError> {
    let n = ranges(ctx, buft).len();
    if n > 1 {
        return Err(AllocError::NeedsMultipleBuffers(n));
    }
    Ok(alloc_ctx_tensors_set(ctx, buft)?.pop())
}
