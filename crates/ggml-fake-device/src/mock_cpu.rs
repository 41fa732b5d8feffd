//! A CPU device for pass-logic tests: it supports every op on host memory and computes nothing
//! (its graph_compute fails, so no test can mistake it for a real backend).

use ggml::backend::{
    Backend, BackendError, BufferTypeRef, Device, DeviceCaps, DeviceKind, DeviceRef, GraphView,
    HostBufferType, Status,
};
use ggml::{Context, TensorId};
use std::sync::Arc;

pub struct MockCpuDevice {
    buft: BufferTypeRef,
    refuse_ops: Vec<String>,
}

impl MockCpuDevice {
    pub fn new() -> Arc<MockCpuDevice> {
        MockCpuDevice::refusing(&[])
    }

    /// A CPU that refuses the named ops (to take away the universal fallback).
    pub fn refusing(ops: &[&str]) -> Arc<MockCpuDevice> {
        Arc::new(MockCpuDevice {
            buft: Arc::new(HostBufferType {
                name: "CPU".into(),
                alignment: 32,
                max_size: usize::MAX,
            }),
            refuse_ops: ops.iter().map(|s| s.to_string()).collect(),
        })
    }

    pub fn backend(self: &Arc<Self>) -> Box<dyn Backend> {
        Box::new(MockCpuBackend { dev: self.clone() })
    }
}

impl Device for MockCpuDevice {
    fn name(&self) -> &str {
        "CPU"
    }
    fn description(&self) -> &str {
        "mock CPU"
    }
    fn kind(&self) -> DeviceKind {
        DeviceKind::Cpu
    }
    fn memory(&self) -> (usize, usize) {
        (1 << 30, 1 << 30)
    }
    fn caps(&self) -> DeviceCaps {
        DeviceCaps::default()
    }
    fn init_backend(self: Arc<Self>) -> Result<Box<dyn Backend>, BackendError> {
        Ok(self.backend())
    }
    fn buffer_type(&self) -> BufferTypeRef {
        self.buft.clone()
    }
    fn supports_op(&self, ctx: &Context, op: TensorId) -> bool {
        !self.refuse_ops.iter().any(|o| o == ctx[op].op.desc())
    }
    fn supports_buft(&self, buft: &BufferTypeRef) -> bool {
        buft.is_host()
    }
}

struct MockCpuBackend {
    dev: Arc<MockCpuDevice>,
}

impl Backend for MockCpuBackend {
    fn name(&self) -> &str {
        "CPU"
    }
    fn device(&self) -> DeviceRef {
        self.dev.clone()
    }
    fn graph_compute(&mut self, _graph: GraphView<'_>) -> Status {
        Status::Failed("the mock CPU computes nothing".into())
    }
}
