//! ggml: tensors, types, ops, graphs, the allocator, the backend API and the scheduler.
//! Nothing here knows about language models.

pub mod log;
pub mod quants;
pub mod types;

pub use types::{Type, TypeInfo};
