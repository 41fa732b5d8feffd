//! The meta device: a device that is secretly N devices (tensor parallelism, `-sm tensor`).
//! The scheduler sees one backend; below its graph_compute every tensor is N slices, each
//! distributed as its [`SplitState`] says, and the partial sums of row-parallel matmuls are
//! all-reduced between subgraphs. See docs/meta.md.

mod backend;
mod buffer;
mod device;
mod plan;
mod reduce;
mod rules;
mod slice;
mod split;

pub use backend::{MetaBackend, ReduceRecord};
pub use buffer::{
    device_buffer_sizes, meta_buffer_of, reported_size, MetaBufferImpl, MetaBufferType,
};
pub use device::{as_meta_buft, meta_device, meta_names, MetaDevice};
pub use plan::{build_plan, graph_uid, Plan, Subgraph};
pub use reduce::{allreduce_fallback, n_reduce_steps, ReduceStep, TmpBuffers};
pub use rules::{MetaError, Resolver, StateCache, StaticSplitFn};
pub use slice::{slice_nbytes, slice_shape};
pub use split::{split_counts, SplitAxis, SplitState};
