//! Backends for testing the scheduler without a GPU (test support, never shipped).
//!
//! - [`TestDevice`] reports itself as a GPU (or any kind) with a non-host buffer type of its
//!   own, or shares another device's buffer type (a BLAS-like accelerator). It can be told to
//!   refuse chosen ops or nodes and decides `offload_op` by batch size like CUDA does. Its
//!   backend runs the graph with an inner backend (the CPU's kernels: the memory is host memory
//!   underneath) and counts what the scheduler asked of it: bytes written, copies, syncs,
//!   events, computed nodes.
//! - [`MockCpuDevice`]: a CPU device that supports every op and computes nothing, for tests of
//!   the assignment passes that need no kernels.
//! - [`fake_gpus`] and [`FakeReg`]: N fake GPUs at a time (GPU0, GPU1, ...) whose
//!   `init_backend` works, in a registry that can offer a communicator, for the meta device
//!   (`-sm tensor -dev GPU0,GPU1` in libllama's tests).

mod device;
mod mock_cpu;
mod reg;

pub use device::{
    Counters, InnerBackendFn, TestBackend, TestBufferType, TestDevice, TestDeviceConfig,
};
pub use mock_cpu::MockCpuDevice;
pub use reg::{fake_gpus, FakeReg};

/// ggml-cuda's get_op_batch_size: the dimension that counts tokens for the offload decision.
pub fn op_batch_size(ctx: &ggml::Context, op: ggml::TensorId) -> i64 {
    let t = &ctx[op];
    match t.op {
        ggml::Op::GetRows => 0,
        ggml::Op::MulMat { .. } => t.ne[1],
        ggml::Op::MulMatId | ggml::Op::Rope(_) => t.ne[2],
        _ => t.nrows(),
    }
}
