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

/// As ggml_backend_alloc_ctx_tensors_from_buft: `ids` in consecutive runs of at most the
/// buffer type's max size (a tensor larger than that alone), one buffer per run. A failed
/// allocation logs ggml's line and returns the buffer type's error.
pub fn alloc_tensors_split(
    ctx: &mut Context,
    ids: &[TensorId],
    buft: &BufferTypeRef,
    what: &str,
) -> Result<Vec<Arc<Buffer>>> {
    let (align, max) = (buft.alignment(), buft.max_size());
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut cur = 0usize;
    let mut start = 0usize;
    for (i, &t) in ids.iter().enumerate() {
        let n = pad(buft.alloc_size(&ctx[t]), align);
        if cur > 0 && cur + n > max {
            runs.push((start, i));
            start = i;
            cur = 0;
        }
        cur += n;
    }
    if start < ids.len() {
        runs.push((start, ids.len()));
    }
    let mut out = Vec::with_capacity(runs.len());
    for (a, b) in runs {
        let size = tensors_size(ctx, &ids[a..b], buft);
        let buf = alloc_tensors(ctx, &ids[a..b], buft, what).inspect_err(|_| {
            ggml::log_error!(
                "alloc_tensor_range: failed to allocate {} buffer of size {}\n",
                buft.name(),
                size
            );
        })?;
        out.push(buf);
    }
    Ok(out)
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
