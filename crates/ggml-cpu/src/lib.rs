//! ggml's CPU backend: the "CPU" device and buffer types, a persistent thread pool that runs
//! whole graphs, and a kernel for every op (see `ops`).
//!
//! Use:
//! - `ggml_cpu::init()` registers the backend with `ggml::backend::register` (the registry keeps
//!   the CPU last); `ggml_cpu::device()` is the one device ("CPU", kind `Cpu`).
//! - `device().buffer_type()` is the "CPU" host buffer type (alignment 32, ggml's
//!   TENSOR_ALIGNMENT); `device().buffer_from_host_ptr_owned(ptr, len, owner)` wraps mapped
//!   memory as a "CPU_Mapped" buffer that keeps `owner` (the mmap) alive.
//! - `device().init_backend()` or `CpuBackend::new(device())` make a backend; `set_n_threads`
//!   sets the thread count (default: all available cores), `set_abort_callback` takes a
//!   callback that aborts the graph when it returns true (checked after every node).
//! - `graph_compute` runs the nodes in order on the pool; every tensor must already be in a host
//!   buffer. Unsupported op/type combinations, unallocated tensors and out-of-range row indices
//!   give `Status::Failed` with a logged reason instead of a panic.
//! - `compute_graph(&graph, n_threads)` is a one-shot convenience for tests and tools.

mod backend;
mod device;
pub mod dot;
mod fp;
mod ops;
pub mod placement;
mod pool;
mod profile;
mod quant;
mod repack;
mod simd;
mod support;
mod tref;

pub use backend::{default_n_threads, AbortCallback, CpuBackend};
pub use device::{device, init_backend, reg, CpuDevice, CpuReg, TENSOR_ALIGNMENT};

use ggml::backend::Status;

/// Registers the CPU backend with ggml's backend registry.
pub fn init() {
    ggml::backend::register(reg());
}

/// Computes every node of `graph` on a fresh CPU backend with `n_threads` threads (a
/// convenience for tests and tools; long-lived callers keep a backend).
pub fn compute_graph(graph: &ggml::Graph, n_threads: usize) -> Status {
    let mut b = CpuBackend::new(device());
    b.set_threads(n_threads);
    b.compute(&graph.ctx, &graph.nodes)
}
