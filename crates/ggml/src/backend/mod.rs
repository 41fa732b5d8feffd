//! The backend API in ggml's four levels: a registry of backends (`Reg`) that enumerate
//! `Device`s (static capability answers), which create `Backend`s (command streams that compute
//! whole graphs); memory is a `BufferType` that allocates `Buffer`s.

mod buffer;
mod registry;

pub use buffer::{
    same_buft, Buffer, BufferImpl, BufferType, BufferTypeRef, BufferUsage, HostBuffer,
    HostBufferType, TensorIo,
};
pub use registry::{dev_by_name, devices, register, register_lazy, regs};

use crate::context::Context;
use crate::tensor::{Tensor, TensorId};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("failed to allocate {size} bytes in buffer type {buft}: {reason}")]
    Alloc {
        buft: String,
        size: usize,
        reason: String,
    },
    #[error("{0}")]
    Other(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    Cpu,
    Gpu,
    IGpu,
    Accel,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceCaps {
    pub async_: bool,
    pub host_buffer: bool,
    pub buffer_from_host_ptr: bool,
    pub events: bool,
}

/// The result of a graph computation (ggml_status).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Success,
    Aborted,
    Failed,
    AllocFailed,
}

/// A subset of a graph's nodes, computed in order (a scheduler split or a whole graph).
pub struct GraphView<'a> {
    pub ctx: &'a Context,
    pub nodes: &'a [TensorId],
}

/// Static answers about one piece of hardware.
pub trait Device: Send + Sync {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    fn kind(&self) -> DeviceKind;
    /// (free, total) bytes
    fn memory(&self) -> (usize, usize);
    fn caps(&self) -> DeviceCaps;
    fn init_backend(self: Arc<Self>) -> Result<Box<dyn Backend>, BackendError>;
    fn buffer_type(&self) -> BufferTypeRef;
    fn host_buffer_type(&self) -> Option<BufferTypeRef> {
        None
    }
    /// Extra buffer types the device prefers for weights (e.g. CPU_REPACK), best first.
    fn extra_buffer_types(&self) -> Vec<BufferTypeRef> {
        Vec::new()
    }
    /// Wrap host memory (a mapped file) as a buffer without copying, where supported.
    fn buffer_from_host_ptr(&self, _ptr: usize, _size: usize) -> Option<Arc<Buffer>> {
        None
    }
    /// As `buffer_from_host_ptr`, with the owner of the memory (a memory map) that the buffer
    /// keeps alive; devices that borrow host memory override this.
    fn buffer_from_host_ptr_owned(
        &self,
        ptr: usize,
        size: usize,
        owner: Arc<dyn Send + Sync>,
    ) -> Option<Arc<Buffer>> {
        let _ = owner;
        self.buffer_from_host_ptr(ptr, size)
    }
    fn supports_op(&self, ctx: &Context, op: TensorId) -> bool;
    fn supports_buft(&self, buft: &BufferTypeRef) -> bool;
    /// Whether an op whose weight lives in host memory is worth running here anyway
    /// (ggml's default veto: batch size below GGML_OP_OFFLOAD_MIN_BATCH).
    fn offload_op(&self, _ctx: &Context, _op: TensorId) -> bool {
        false
    }
}

pub type DeviceRef = Arc<dyn Device>;

/// A synchronisation point recorded on a backend's stream.
pub trait Event: Send + Sync {
    fn synchronize(&self);
}

/// A command stream on one device.
pub trait Backend: Send {
    fn name(&self) -> &str;
    fn device(&self) -> DeviceRef;
    fn graph_compute(&mut self, graph: GraphView<'_>) -> Status;
    /// Reorder or fuse a split's nodes before it is computed (none by default).
    fn graph_optimize(&mut self, _ctx: &mut Context, _nodes: &mut Vec<TensorId>) {}
    fn synchronize(&mut self) {}
    /// Asynchronous writes and reads; the default is the buffer's synchronous path. The
    /// caller may free or reuse `data` as soon as `set_tensor_async` returns (the scheduler's
    /// staging does): a backend that transfers later must copy it first.
    fn set_tensor_async(&mut self, t: &Tensor, data: &[u8], offset: usize) {
        set_tensor(t, data, offset)
    }
    fn get_tensor_async(&mut self, t: &Tensor, out: &mut [u8], offset: usize) {
        get_tensor(t, out, offset)
    }
    /// Copy src (owned by another backend) into dst on this stream; false if not supported.
    fn cpy_tensor_async(&mut self, _src: &Tensor, _dst: &Tensor) -> bool {
        false
    }
    fn event_record(&mut self) -> Option<Arc<dyn Event>> {
        None
    }
    fn event_wait(&mut self, ev: &Arc<dyn Event>) {
        ev.synchronize()
    }
    fn set_n_threads(&mut self, _n: usize) {}
    /// As `set_n_threads`, saying whether the next graph is a batch (more than one token):
    /// a CPU backend then runs it on its batch threadpool when that has its own settings.
    fn set_graph_threads(&mut self, n: usize, _batch: bool) {
        self.set_n_threads(n)
    }
    /// Creates now the threads that `n` threads of computation will need, so that a limit of
    /// the OS is a setup error rather than a failed compute later.
    fn reserve_threads(&mut self, _n: usize) -> Result<(), String> {
        Ok(())
    }
    /// Called after every node when set; returning true aborts the computation (as ggml's
    /// ggml_abort_callback).
    fn set_abort_callback(&mut self, _cb: Option<Arc<dyn Fn() -> bool + Send + Sync>>) {}
}

/// A loaded backend library: its devices and optional entry points.
pub trait Reg: Send + Sync {
    fn name(&self) -> &str;
    fn devices(&self) -> Vec<DeviceRef>;
    /// ggml_backend_comm_init: a communicator over these devices' backends for the meta
    /// device's all-reduce (NCCL on CUDA); None when the backend has none.
    fn comm_init(&self, _devices: &[DeviceRef]) -> Option<Box<dyn Comm>> {
        None
    }
}

/// A backend's own collective operations (ggml_backend_comm_allreduce_tensor).
pub trait Comm: Send {
    /// Sum `tensors` (one per device, the same shape, each in its device's memory) in place on
    /// every device; false declines, and the caller falls back to its own reduce.
    fn allreduce(&mut self, tensors: &[&Tensor]) -> bool;
}

fn buffer_of(t: &Tensor) -> &Arc<Buffer> {
    match t.buffer() {
        Some(b) => b,
        None => panic!("tensor '{}' has no buffer", t.name),
    }
}

/// Write bytes into a tensor at `offset` (ggml_backend_tensor_set).
pub fn set_tensor(t: &Tensor, data: &[u8], offset: usize) {
    assert!(
        offset + data.len() <= t.nbytes(),
        "set_tensor: write out of bounds of '{}'",
        t.name
    );
    if let Some(io) = buffer_of(t).tensor_io() {
        return io.set_tensor(t, data, offset);
    }
    buffer_of(t).set(t.addr() + offset, data);
}

/// Read bytes of a tensor from `offset` (ggml_backend_tensor_get).
pub fn get_tensor(t: &Tensor, out: &mut [u8], offset: usize) {
    assert!(
        offset + out.len() <= t.nbytes(),
        "get_tensor: read out of bounds of '{}'",
        t.name
    );
    if let Some(io) = buffer_of(t).tensor_io() {
        return io.get_tensor(t, out, offset);
    }
    buffer_of(t).get(t.addr() + offset, out);
}

/// Fill a tensor's bytes with one value (ggml_backend_tensor_memset).
pub fn memset_tensor(t: &Tensor, value: u8, offset: usize, size: usize) {
    assert!(
        offset + size <= t.nbytes(),
        "memset_tensor: out of bounds of '{}'",
        t.name
    );
    if let Some(io) = buffer_of(t).tensor_io() {
        return io.memset_tensor(t, value, offset, size);
    }
    buffer_of(t).memset(t.addr() + offset, value, size);
}

/// Copy src's bytes into dst (same size), through the host when the buffers differ.
pub fn tensor_copy(src: &Tensor, dst: &Tensor) {
    let n = src.nbytes();
    assert_eq!(
        n,
        dst.nbytes(),
        "tensor_copy: sizes differ ('{}' -> '{}')",
        src.name,
        dst.name
    );
    if n == 0 {
        return;
    }
    let (sb, db) = (buffer_of(src), buffer_of(dst));
    if sb.tensor_io().is_some() || db.tensor_io().is_some() {
        let mut tmp = vec![0u8; n];
        get_tensor(src, &mut tmp, 0);
        set_tensor(dst, &tmp, 0);
        return;
    }
    if sb.is_host() && db.is_host() {
        // SAFETY: both ranges were bounds-checked by nbytes against live host buffers that the
        // tensors keep alive; ptr::copy tolerates overlap.
        unsafe { std::ptr::copy(src.addr() as *const u8, dst.addr() as *mut u8, n) };
        return;
    }
    let mut tmp = vec![0u8; n];
    sb.get(src.addr(), &mut tmp);
    db.set(dst.addr(), &tmp);
}

/// Read a whole tensor as f32 values (the tensor must be F32 and contiguous).
pub fn tensor_to_f32(t: &Tensor) -> Vec<f32> {
    assert!(
        t.ty == crate::Type::F32 && t.is_contiguous(),
        "tensor_to_f32: '{}' is not contiguous f32",
        t.name
    );
    let mut bytes = vec![0u8; t.nbytes()];
    get_tensor(t, &mut bytes, 0);
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Write f32 values into a contiguous F32 tensor.
pub fn tensor_set_f32(t: &Tensor, values: &[f32]) {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    set_tensor(t, &bytes, 0);
}
