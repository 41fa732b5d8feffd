//! Memory planning for graphs and contexts (ggml-alloc.c).
//!
//! - [`Gallocr`]: the graph allocator. It simulates a graph's execution with child and view
//!   refcounts, giving each intermediate tensor an offset in one arena per buffer type and reusing
//!   memory as soon as a tensor's last consumer has run (in place for the ops that allow it).
//!   `reserve_n` plans and sizes the buffers; `alloc_graph` stamps addresses into the tensors.
//! - [`Tallocr`]: a bump allocator over one existing buffer.
//! - [`alloc_ctx_tensors`]: every tensor of a context in one buffer of a buffer type (weights,
//!   KV cache).

mod dyn_tallocr;
mod gallocr;
mod tallocr;

pub use dyn_tallocr::BufferAddress;
pub use gallocr::Gallocr;
pub use tallocr::{alloc_ctx_tensors, alloc_ctx_tensors_set, alloc_ctx_tensors_size, Tallocr};

use crate::backend::BackendError;

#[derive(Debug, thiserror::Error)]
pub enum AllocError {
    #[error("graph allocation: not enough space to allocate {size} bytes for {tensor} (largest block {max_avail} bytes)")]
    OutOfSpace {
        tensor: String,
        size: usize,
        max_avail: usize,
    },
    #[error("graph allocation: out of free blocks")]
    OutOfFreeBlocks,
    #[error("not enough space in the buffer to allocate {tensor} (needed {needed}, available {available})")]
    BufferFull {
        tensor: String,
        needed: usize,
        available: usize,
    },
    #[error("tensor {0} is already allocated")]
    AlreadyAllocated(String),
    #[error("{0} buffers would be needed (the buffer type's max size is exceeded); use alloc_ctx_tensors_set")]
    NeedsMultipleBuffers(usize),
    #[error(transparent)]
    Backend(#[from] BackendError),
}
