//! ggml: tensors, types, ops, graphs, the allocator, the backend API and the scheduler.
//! Nothing here knows about language models.

pub mod alloc;
pub mod backend;
pub mod context;
pub mod graph;
pub mod log;
pub mod meta;
pub mod op;
pub mod quants;
pub mod sched;
pub mod tensor;
pub mod types;

pub use context::Context;
pub use graph::Graph;
pub use op::{GluOp, Op, Prec, RopeParams, SortOrder, UnaryOp};
pub use tensor::{Tensor, TensorId};
pub use types::{Type, TypeInfo};
