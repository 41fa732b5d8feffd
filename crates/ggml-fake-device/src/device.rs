//! The fake GPU: its device, buffer type and backend.

use ggml::backend::{
    same_buft, Backend, BackendError, Buffer, BufferImpl, BufferType, BufferTypeRef, Device,
    DeviceCaps, DeviceKind, DeviceRef, Event, GraphView, HostBuffer, Status,
};
use ggml::{Context, Tensor, TensorId};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Memory that is host memory underneath (so CPU kernels can run on it) but tells the
/// scheduler it is not host-visible, as a GPU's memory.
pub struct TestBufferType {
    pub name: String,
    pub alignment: usize,
    pub max_size: usize,
    /// tensors the allocators announced through init_tensor, over every buffer of this type
    pub init_tensor_calls: Arc<AtomicUsize>,
}

impl TestBufferType {
    pub fn new(name: &str, alignment: usize, max_size: usize) -> TestBufferType {
        TestBufferType {
            name: name.to_string(),
            alignment,
            max_size,
            init_tensor_calls: Arc::new(AtomicUsize::new(0)),
        }
    }
}

/// Host memory that counts the init_tensor calls it gets.
struct TestMem {
    mem: HostBuffer,
    init_tensor_calls: Arc<AtomicUsize>,
}

impl BufferImpl for TestMem {
    fn base(&self) -> usize {
        self.mem.base()
    }
    fn size(&self) -> usize {
        self.mem.size()
    }
    fn set(&self, addr: usize, data: &[u8]) -> Result<(), BackendError> {
        self.mem.set(addr, data)
    }
    fn get(&self, addr: usize, out: &mut [u8]) -> Result<(), BackendError> {
        self.mem.get(addr, out)
    }
    fn memset(&self, addr: usize, value: u8, size: usize) -> Result<(), BackendError> {
        self.mem.memset(addr, value, size)
    }
    fn init_tensor(&self, _t: &Tensor) -> Result<(), BackendError> {
        self.init_tensor_calls.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

impl BufferType for TestBufferType {
    fn name(&self) -> &str {
        &self.name
    }
    fn alloc_buffer(self: Arc<Self>, size: usize) -> Result<Arc<Buffer>, BackendError> {
        let mem = HostBuffer::alloc(size).ok_or_else(|| BackendError::Alloc {
            buft: self.name.clone(),
            size,
            reason: "out of memory".into(),
        })?;
        let mem = TestMem {
            mem,
            init_tensor_calls: self.init_tensor_calls.clone(),
        };
        Ok(Arc::new(Buffer::new(self, Box::new(mem))))
    }
    fn alignment(&self) -> usize {
        self.alignment
    }
    fn max_size(&self) -> usize {
        self.max_size
    }
    fn is_host(&self) -> bool {
        false
    }
}

/// What a test backend was asked to do, shared between the device, its backends and the test.
#[derive(Default, Debug)]
pub struct Counters {
    /// bytes written with set_tensor_async (the MoE expert copies use it)
    pub set_async_bytes: AtomicUsize,
    pub set_async_calls: AtomicUsize,
    pub get_async_calls: AtomicUsize,
    pub cpy_async_calls: AtomicUsize,
    pub synchronize_calls: AtomicUsize,
    /// events the device made (event_new)
    pub events_created: AtomicUsize,
    /// init_tensor calls on buffers of the device's own buffer type
    pub init_tensor_calls: Arc<AtomicUsize>,
    pub events_recorded: AtomicUsize,
    pub event_waits: AtomicUsize,
    pub graph_computes: AtomicUsize,
    pub optimize_calls: AtomicUsize,
    /// names of the nodes computed, in order
    pub computed: Mutex<Vec<String>>,
}

impl Counters {
    pub fn get(c: &AtomicUsize) -> usize {
        c.load(Ordering::SeqCst)
    }
}

pub struct TestDeviceConfig {
    pub name: String,
    pub kind: DeviceKind,
    /// None: a new non-host [`TestBufferType`] named after the device
    pub buft: Option<BufferTypeRef>,
    /// ops (by `Op::desc()` name, e.g. "MUL_MAT", "SILU") the device refuses
    pub refuse_ops: Vec<String>,
    /// nodes (by tensor name) the device refuses
    pub refuse_nodes: Vec<String>,
    /// offload_op accepts ops whose batch is at least this; None vetoes every offload
    pub offload_min_batch: Option<i64>,
    pub events: bool,
    /// cpy_tensor_async succeeds (else the scheduler falls back to a synchronous copy)
    pub async_copy: bool,
    /// set_tensor_async only queues the write, which happens at the next graph_compute or
    /// synchronize (as a GPU's transfer queue would): the caller's bytes must stay valid until
    /// then, as the contract says
    pub defer_set_async: bool,
    /// the device can also read host buffers (a unified-memory device)
    pub reads_host: bool,
    pub alignment: usize,
    pub max_size: usize,
    /// makes the inner backend for `init_backend` (None: init_backend fails, and tests build
    /// backends with [`TestDevice::backend`])
    pub inner: Option<InnerBackendFn>,
}

/// Makes the backend whose kernels a test device's backend runs (e.g. the CPU's).
pub type InnerBackendFn = Arc<dyn Fn() -> Result<Box<dyn Backend>, BackendError> + Send + Sync>;

impl TestDeviceConfig {
    /// A GPU with its own memory, events, and CUDA's default offload threshold of 32.
    pub fn gpu(name: &str) -> TestDeviceConfig {
        TestDeviceConfig {
            name: name.to_string(),
            kind: DeviceKind::Gpu,
            buft: None,
            refuse_ops: Vec::new(),
            refuse_nodes: Vec::new(),
            offload_min_batch: Some(32),
            events: true,
            async_copy: false,
            defer_set_async: false,
            reads_host: false,
            alignment: 128,
            max_size: usize::MAX,
            inner: None,
        }
    }

    /// An accelerator that works on another device's (host) buffer type, like BLAS.
    pub fn accel(name: &str, buft: BufferTypeRef) -> TestDeviceConfig {
        TestDeviceConfig {
            kind: DeviceKind::Accel,
            buft: Some(buft),
            offload_min_batch: None,
            ..Self::gpu(name)
        }
    }
}

pub struct TestDevice {
    cfg: TestDeviceConfig,
    buft: BufferTypeRef,
    counters: Arc<Counters>,
}

impl TestDevice {
    pub fn new(cfg: TestDeviceConfig) -> Arc<TestDevice> {
        let counters = Arc::new(Counters::default());
        let buft: BufferTypeRef = match &cfg.buft {
            Some(b) => b.clone(),
            None => {
                let mut t = TestBufferType::new(&cfg.name, cfg.alignment, cfg.max_size);
                t.init_tensor_calls = counters.init_tensor_calls.clone();
                Arc::new(t)
            }
        };
        Arc::new(TestDevice {
            cfg,
            buft,
            counters,
        })
    }

    pub fn counters(&self) -> Arc<Counters> {
        self.counters.clone()
    }

    /// A backend of this device that computes with `inner` (a backend whose kernels can run on
    /// host memory, e.g. the CPU's).
    pub fn backend(self: &Arc<Self>, inner: Box<dyn Backend>) -> Box<dyn Backend> {
        Box::new(TestBackend {
            dev: self.clone(),
            inner,
            pending: Vec::new(),
        })
    }
}

impl Device for TestDevice {
    fn name(&self) -> &str {
        &self.cfg.name
    }
    fn description(&self) -> &str {
        "scheduler test device"
    }
    fn kind(&self) -> DeviceKind {
        self.cfg.kind
    }
    fn memory(&self) -> (usize, usize) {
        (1 << 30, 1 << 30)
    }
    fn caps(&self) -> DeviceCaps {
        DeviceCaps {
            async_: true,
            host_buffer: false,
            buffer_from_host_ptr: false,
            events: self.cfg.events,
        }
    }
    fn init_backend(self: Arc<Self>) -> Result<Box<dyn Backend>, BackendError> {
        let Some(make) = self.cfg.inner.clone() else {
            return Err(BackendError::Other(
                "a test device computes with an inner backend: use TestDevice::backend".into(),
            ));
        };
        let inner = make()?;
        Ok(self.backend(inner))
    }
    fn buffer_type(&self) -> BufferTypeRef {
        self.buft.clone()
    }
    fn event_new(&self) -> Option<Arc<dyn Event>> {
        if !self.cfg.events {
            return None;
        }
        self.counters.events_created.fetch_add(1, Ordering::SeqCst);
        Some(Arc::new(TestEvent {
            counters: self.counters.clone(),
            recorded: AtomicUsize::new(0),
        }))
    }
    fn supports_op(&self, ctx: &Context, op: TensorId) -> bool {
        let t = &ctx[op];
        !self.cfg.refuse_ops.iter().any(|o| o == t.op.desc())
            && !self.cfg.refuse_nodes.contains(&t.name)
    }
    fn supports_buft(&self, buft: &BufferTypeRef) -> bool {
        same_buft(buft, &self.buft)
            || (self.cfg.reads_host || self.buft.is_host()) && buft.is_host()
    }
    fn offload_op(&self, ctx: &Context, op: TensorId) -> bool {
        self.cfg
            .offload_min_batch
            .is_some_and(|min| crate::op_batch_size(ctx, op) >= min)
    }
}

/// The context as the inner (CPU) backend must see it: the same tensors at the same addresses,
/// with this device's buffers presented as host buffers (which their memory is underneath).
fn host_view(ctx: &Context) -> Context {
    let mut shadow = ctx.clone();
    let mut aliases: Vec<(Arc<Buffer>, Arc<Buffer>)> = Vec::new();
    for id in ctx.ids() {
        let Some(d) = shadow[id].data.as_mut() else {
            continue;
        };
        if d.buffer.is_host() {
            continue;
        }
        let alias = match aliases
            .iter()
            .find(|(orig, _)| Arc::ptr_eq(orig, &d.buffer))
        {
            Some((_, a)) => a.clone(),
            None => {
                let orig = d.buffer.clone();
                let keep: Arc<dyn Send + Sync> = orig.clone();
                // SAFETY: every TestBufferType buffer is a HostBuffer of base()..base()+size();
                // `keep` holds that buffer, so the memory outlives the alias.
                let mem = unsafe { HostBuffer::from_raw(orig.base(), orig.size(), keep) };
                let buft: BufferTypeRef = Arc::new(ggml::backend::HostBufferType {
                    name: format!("{} (host view)", orig.name()),
                    alignment: orig.buft().alignment(),
                    max_size: orig.buft().max_size(),
                });
                let a = Arc::new(Buffer::new(buft, Box::new(mem)));
                a.set_usage(orig.usage());
                aliases.push((orig, a.clone()));
                a
            }
        };
        d.buffer = alias;
    }
    shadow
}

pub struct TestEvent {
    counters: Arc<Counters>,
    /// how often this event was recorded
    pub recorded: AtomicUsize,
}

impl Event for TestEvent {
    fn synchronize(&self) -> Result<(), BackendError> {
        // an event never recorded has nothing to wait for
        if self.recorded.load(Ordering::SeqCst) > 0 {
            self.counters.event_waits.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

pub struct TestBackend {
    dev: Arc<TestDevice>,
    inner: Box<dyn Backend>,
    /// writes queued by set_tensor_async with `defer_set_async`: (tensor, data address, length,
    /// offset)
    pending: Vec<(Tensor, usize, usize, usize)>,
}

impl TestBackend {
    /// Performs the queued writes, reading the caller's bytes now.
    fn flush(&mut self) -> Result<(), BackendError> {
        for (t, ptr, len, offset) in std::mem::take(&mut self.pending) {
            // SAFETY: set_tensor_async's contract keeps the bytes valid and unchanged until this
            // backend's next synchronize; flush runs no later than that.
            let data = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
            ggml::backend::set_tensor(&t, data, offset)?;
        }
        Ok(())
    }
}

impl Backend for TestBackend {
    fn name(&self) -> &str {
        &self.dev.cfg.name
    }
    fn device(&self) -> DeviceRef {
        self.dev.clone()
    }
    fn graph_compute(&mut self, graph: GraphView<'_>) -> Status {
        if let Err(e) = self.flush() {
            return Status::Failed(e.to_string());
        }
        let c = &self.dev.counters;
        c.graph_computes.fetch_add(1, Ordering::SeqCst);
        c.computed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(graph.nodes.iter().map(|&n| graph.ctx[n].name.clone()));
        let shadow = host_view(graph.ctx);
        self.inner.graph_compute(GraphView {
            ctx: &shadow,
            nodes: graph.nodes,
        })
    }
    fn graph_optimize(&mut self, _ctx: &mut Context, _nodes: &mut Vec<TensorId>) {
        self.dev
            .counters
            .optimize_calls
            .fetch_add(1, Ordering::SeqCst);
    }
    fn synchronize(&mut self) -> Result<(), BackendError> {
        self.dev
            .counters
            .synchronize_calls
            .fetch_add(1, Ordering::SeqCst);
        self.flush()?;
        self.inner.synchronize()
    }
    fn set_tensor_async(
        &mut self,
        t: &Tensor,
        data: &[u8],
        offset: usize,
    ) -> Result<(), BackendError> {
        let c = &self.dev.counters;
        c.set_async_calls.fetch_add(1, Ordering::SeqCst);
        c.set_async_bytes.fetch_add(data.len(), Ordering::SeqCst);
        if self.dev.cfg.defer_set_async {
            self.pending
                .push((t.clone(), data.as_ptr() as usize, data.len(), offset));
            return Ok(());
        }
        ggml::backend::set_tensor(t, data, offset)
    }
    fn get_tensor_async(
        &mut self,
        t: &Tensor,
        out: &mut [u8],
        offset: usize,
    ) -> Result<(), BackendError> {
        self.dev
            .counters
            .get_async_calls
            .fetch_add(1, Ordering::SeqCst);
        ggml::backend::get_tensor(t, out, offset)
    }
    fn cpy_tensor_async(&mut self, src: &Tensor, dst: &Tensor) -> bool {
        self.dev
            .counters
            .cpy_async_calls
            .fetch_add(1, Ordering::SeqCst);
        if !self.dev.cfg.async_copy {
            return false;
        }
        ggml::backend::tensor_copy(src, dst).is_ok()
    }
    fn event_record(&mut self, ev: &Arc<dyn Event>) -> Result<(), BackendError> {
        let Some(ev) = ev.as_any().downcast_ref::<TestEvent>() else {
            return Err(BackendError::Other(format!(
                "{}: an event of another device",
                self.dev.cfg.name
            )));
        };
        ev.recorded.fetch_add(1, Ordering::SeqCst);
        self.dev
            .counters
            .events_recorded
            .fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn set_n_threads(&mut self, n: usize) {
        self.inner.set_n_threads(n)
    }
}
