//! A bump allocator for test graphs: every tensor of a context that owns memory gets a slice of
//! one buffer of the given buffer type; views then point into their roots.

use ggml::backend::{BackendError, Buffer, BufferTypeRef};
use ggml::tensor::TensorData;
use ggml::Context;
use std::sync::Arc;

/// Allocates every unallocated tensor of `ctx` in one new buffer; returns the buffer (None when
/// nothing needed memory).
pub fn alloc_ctx(
    ctx: &mut Context,
    buft: &BufferTypeRef,
) -> Result<Option<Arc<Buffer>>, BackendError> {
    let align = buft.alignment().max(1);
    let mut offs = Vec::new();
    let mut total = 0usize;
    for id in ctx.ids() {
        let t = &ctx[id];
        if t.data.is_none() && t.view_src.is_none() {
            total = total.div_ceil(align) * align;
            offs.push((id, total));
            total += buft.alloc_size(t).max(1);
        }
    }
    if offs.is_empty() {
        set_view_data(ctx);
        return Ok(None);
    }
    let buf = buft.clone().alloc_buffer(total)?;
    for (id, off) in offs {
        ctx[id].data = Some(TensorData {
            buffer: buf.clone(),
            addr: buf.base() + off,
        });
    }
    set_view_data(ctx);
    Ok(Some(buf))
}

/// Views created before their source was allocated get their address now.
fn set_view_data(ctx: &mut Context) {
    for id in ctx.ids() {
        let (vs, offs) = (ctx[id].view_src, ctx[id].view_offs);
        if let Some(v) = vs {
            if ctx[id].data.is_none() {
                if let Some(d) = ctx[v].data.clone() {
                    ctx[id].data = Some(TensorData {
                        buffer: d.buffer,
                        addr: d.addr + offs,
                    });
                }
            }
        }
    }
}
