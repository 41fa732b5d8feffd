//! ggml's CPU backend: the "CPU" device and buffer types, a persistent thread pool that runs
//! whole graphs, and a kernel for every op (see `ops`).

mod backend;
mod device;
pub mod dot;
mod fp;
mod ops;
mod pool;
mod quant;
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
