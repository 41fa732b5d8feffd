//! Placing a list of tensors in one new buffer of a buffer type, one after another at the
//! buffer type's alignment (what ggml_backend_alloc_ctx_tensors_from_buft does for one context).

use crate::error::{LlamaError, Result};
use ggml::backend::{Buffer, BufferTypeRef};
use ggml::tensor::TensorData;
use ggml::{Context, TensorId};
use std::sync::Arc;

fn pad(x: usize, align: usize) -> usize {
    x.div_ceil(align.max(1)) * align.max(1)
}

/// Bytes the tensors take in `buft`, each padded to its alignment.
pub fn tensors_size(ctx: &Context, ids: &[TensorId], buft: &BufferTypeRef) -> usize {
    ids.iter()
        .map(|&t| pad(buft.alloc_size(&ctx[t]), buft.alignment()))
        .sum()
}

/// Allocates one buffer for `ids` and points each tensor into it.
pub fn alloc_tensors(
    ctx: &mut Context,
    ids: &[TensorId],
    buft: &BufferTypeRef,
    what: &str,
) -> Result<Arc<Buffer>> {
    if let Some(meta) = ggml::meta::as_meta_buft(buft) {
        // each device holds only its slices
        return meta.alloc_static(ctx, ids).map_err(|e| LlamaError::Alloc {
            what: what.to_string(),
            buft: buft.name().to_string(),
            size: tensors_size(ctx, ids, buft),
            why: e.to_string(),
        });
    }
    let size = tensors_size(ctx, ids, buft);
    let buffer = buft
        .clone()
        .alloc_buffer(size)
        .map_err(|e| LlamaError::Alloc {
            what: what.to_string(),
            buft: buft.name().to_string(),
            size,
            why: e.to_string(),
        })?;
    let align = buft.alignment();
    let mut offset = 0usize;
    for &t in ids {
        let n = buft.alloc_size(&ctx[t]);
        ctx[t].data = Some(TensorData {
            buffer: buffer.clone(),
            addr: buffer.base() + offset,
        });
        offset += pad(n, align);
    }
    Ok(buffer)
}

/// Memory that does not exist: a no_alloc model's weights and cache get addresses in it so
/// that graph planning treats them as allocated, as llama.cpp's dummy buffers do. Reads give
/// zeros and writes are dropped; nothing ever dereferences the addresses.
struct Placeholder {
    base: usize,
    size: usize,
}

impl ggml::backend::BufferImpl for Placeholder {
    fn base(&self) -> usize {
        self.base
    }
    fn size(&self) -> usize {
        self.size
    }
    fn set(
        &self,
        _addr: usize,
        _data: &[u8],
    ) -> std::result::Result<(), ggml::backend::BackendError> {
        Ok(())
    }
    fn get(
        &self,
        _addr: usize,
        out: &mut [u8],
    ) -> std::result::Result<(), ggml::backend::BackendError> {
        out.fill(0);
        Ok(())
    }
    fn memset(
        &self,
        _addr: usize,
        _value: u8,
        _size: usize,
    ) -> std::result::Result<(), ggml::backend::BackendError> {
        Ok(())
    }
}

/// Points `ids` into a placeholder buffer of `buft` (no memory is allocated).
pub fn place_tensors(ctx: &mut Context, ids: &[TensorId], buft: &BufferTypeRef) -> usize {
    let size = tensors_size(ctx, ids, buft);
    // a non-null, aligned, never dereferenced base
    let base = buft.alignment().max(4096);
    let buffer = Arc::new(Buffer::new(
        buft.clone(),
        Box::new(Placeholder { base, size }),
    ));
    let align = buft.alignment();
    let mut offset = 0usize;
    for &t in ids {
        let n = buft.alloc_size(&ctx[t]);
        ctx[t].data = Some(TensorData {
            buffer: buffer.clone(),
            addr: base + offset,
        });
        offset += pad(n, align);
    }
    size
}
