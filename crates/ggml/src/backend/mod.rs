//! The backend API in ggml's four levels: a registry of backends (`Reg`) that enumerate
//! `Device`s (static capability answers), which create `Backend`s (command streams that compute
//! whole graphs); memory is a `BufferType` that allocates `Buffer`s.

mod buffer;
mod registry;

pub use buffer::{
    range_inside, same_buft, Buffer, BufferImpl, BufferType, BufferTypeRef, BufferUsage,
    HostBuffer, HostBufferType, TensorIo,
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

/// The result of a graph computation (ggml_status), with the cause of a failure as the
/// backend saw it, so that it reaches the tool's error line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Success,
    Aborted,
    Failed(String),
    AllocFailed(String),
}

impl Status {
    /// The number of ggml's enum ggml_status, which llama.cpp's messages print.
    pub fn code(&self) -> i32 {
        match self {
            Status::Success => 0,
            Status::Aborted => 1,
            Status::Failed(_) => -1,
            Status::AllocFailed(_) => -2,
        }
    }
    /// The cause of a failure; None for success and abort.
    pub fn message(&self) -> Option<&str> {
        match self {
            Status::Failed(m) | Status::AllocFailed(m) => Some(m),
            Status::Success | Status::Aborted => None,
        }
    }
    pub fn is_success(&self) -> bool {
        *self == Status::Success
    }
}

impl From<BackendError> for Status {
    fn from(e: BackendError) -> Status {
        match e {
            BackendError::Alloc { .. } => Status::AllocFailed(e.to_string()),
            BackendError::Other(m) => Status::Failed(m),
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Success => write!(f, "success"),
            Status::Aborted => write!(f, "aborted"),
            Status::Failed(m) => write!(f, "failed: {m}"),
            Status::AllocFailed(m) => write!(f, "allocation failed: {m}"),
        }
    }
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
    /// A new event of this device (ggml_backend_event_new), created once and recorded again and
    /// again; None when the device has none (`caps().events` false).
    fn event_new(&self) -> Option<Arc<dyn Event>> {
        None
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

/// A synchronisation point of one device, recorded on its backends' streams any number of
/// times; waiting on an event never recorded returns at once.
pub trait Event: Send + Sync {
    /// Blocks the host until the work before the event's last recording is done.
    fn synchronize(&self) -> Result<(), BackendError>;
    fn as_any(&self) -> &dyn std::any::Any;
}

/// A command stream on one device.
pub trait Backend: Send {
    fn name(&self) -> &str;
    fn device(&self) -> DeviceRef;
    fn graph_compute(&mut self, graph: GraphView<'_>) -> Status;
    /// Reorder or fuse a split's nodes before it is computed (none by default).
    fn graph_optimize(&mut self, _ctx: &mut Context, _nodes: &mut Vec<TensorId>) {}
    /// Waits until everything queued on this stream is done; a device error (a lost device)
    /// is returned, not hidden.
    fn synchronize(&mut self) -> Result<(), BackendError> {
        Ok(())
    }
    /// Queues a write of `data` into `t` at `offset`; the default is the buffer's synchronous
    /// path. As ggml_backend_tensor_set_async: `data` must stay valid and unchanged until this
    /// backend's next `synchronize` returns (the scheduler keeps its staging until then); a
    /// backend may read it at any time before that.
    fn set_tensor_async(
        &mut self,
        t: &Tensor,
        data: &[u8],
        offset: usize,
    ) -> Result<(), BackendError> {
        set_tensor(t, data, offset)
    }
    /// Queues a read of `t` into `out`. The borrow ends with the call, so a backend that reads
    /// later must complete the read before returning (the default is synchronous).
    fn get_tensor_async(
        &mut self,
        t: &Tensor,
        out: &mut [u8],
        offset: usize,
    ) -> Result<(), BackendError> {
        get_tensor(t, out, offset)
    }
    /// Copy src (owned by another backend) into dst on this stream; false if not supported.
    fn cpy_tensor_async(&mut self, _src: &Tensor, _dst: &Tensor) -> bool {
        false
    }
    /// Records `ev` (made by this backend's device) at the current point of the stream.
    fn event_record(&mut self, _ev: &Arc<dyn Event>) -> Result<(), BackendError> {
        Err(BackendError::Other(format!(
            "{}: this backend has no events",
            self.name()
        )))
    }
    /// Makes this stream wait for `ev`; the default waits on the host.
    fn event_wait(&mut self, ev: &Arc<dyn Event>) -> Result<(), BackendError> {
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

fn buffer_of(t: &Tensor) -> Result<&Arc<Buffer>, BackendError> {
    t.buffer()
        .ok_or_else(|| BackendError::Other(format!("tensor '{}' has no buffer", t.name)))
}

fn check_range(t: &Tensor, what: &str, offset: usize, len: usize) -> Result<(), BackendError> {
    if offset.checked_add(len).is_none_or(|end| end > t.nbytes()) {
        return Err(BackendError::Other(format!(
            "{what}: {len} bytes at offset {offset} out of bounds of '{}' ({} bytes)",
            t.name,
            t.nbytes()
        )));
    }
    Ok(())
}

/// Write bytes into a tensor at `offset` (ggml_backend_tensor_set).
pub fn set_tensor(t: &Tensor, data: &[u8], offset: usize) -> Result<(), BackendError> {
    check_range(t, "set_tensor", offset, data.len())?;
    let buf = buffer_of(t)?;
    if let Some(io) = buf.tensor_io() {
        return io.set_tensor(t, data, offset);
    }
    buf.set(t.addr() + offset, data)
}

/// Read bytes of a tensor from `offset` (ggml_backend_tensor_get).
pub fn get_tensor(t: &Tensor, out: &mut [u8], offset: usize) -> Result<(), BackendError> {
    check_range(t, "get_tensor", offset, out.len())?;
    let buf = buffer_of(t)?;
    if let Some(io) = buf.tensor_io() {
        return io.get_tensor(t, out, offset);
    }
    buf.get(t.addr() + offset, out)
}

/// Fill a tensor's bytes with one value (ggml_backend_tensor_memset).
pub fn memset_tensor(
    t: &Tensor,
    value: u8,
    offset: usize,
    size: usize,
) -> Result<(), BackendError> {
    check_range(t, "memset_tensor", offset, size)?;
    let buf = buffer_of(t)?;
    if let Some(io) = buf.tensor_io() {
        return io.memset_tensor(t, value, offset, size);
    }
    buf.memset(t.addr() + offset, value, size)
}

/// Copy src's bytes into dst (same size) as ggml_backend_tensor_copy: host to host directly,
/// else by dst's buffer when it can (a device-side copy), else through the host.
pub fn tensor_copy(src: &Tensor, dst: &Tensor) -> Result<(), BackendError> {
    let n = src.nbytes();
    if n != dst.nbytes() {
        return Err(BackendError::Other(format!(
            "tensor_copy: sizes differ ('{}' {} bytes -> '{}' {} bytes)",
            src.name,
            n,
            dst.name,
            dst.nbytes()
        )));
    }
    if n == 0 {
        return Ok(());
    }
    let (sb, db) = (buffer_of(src)?, buffer_of(dst)?);
    let plain = sb.tensor_io().is_none() && db.tensor_io().is_none();
    if plain && sb.is_host() && db.is_host() {
        // SAFETY: both tensors are n bytes inside live host buffers that they keep alive;
        // ptr::copy tolerates overlap.
        unsafe { std::ptr::copy(src.addr() as *const u8, dst.addr() as *mut u8, n) };
        return Ok(());
    }
    if plain && db.cpy_tensor(src, dst)? {
        return Ok(());
    }
    let mut tmp = vec![0u8; n];
    get_tensor(src, &mut tmp, 0)?;
    set_tensor(dst, &tmp, 0)
}

/// Read a whole tensor as f32 values (the tensor must be F32 and contiguous).
pub fn tensor_to_f32(t: &Tensor) -> Result<Vec<f32>, BackendError> {
    if t.ty != crate::Type::F32 || !t.is_contiguous() {
        return Err(BackendError::Other(format!(
            "tensor_to_f32: '{}' is not contiguous f32",
            t.name
        )));
    }
    let mut bytes = vec![0u8; t.nbytes()];
    get_tensor(t, &mut bytes, 0)?;
    Ok(bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Write f32 values into a contiguous F32 tensor.
pub fn tensor_set_f32(t: &Tensor, values: &[f32]) -> Result<(), BackendError> {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    set_tensor(t, &bytes, 0)
}
