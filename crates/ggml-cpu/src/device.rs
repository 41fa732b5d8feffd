//! The CPU registration, its one device and its buffer types: "CPU" (host memory),
//! "CPU_Mapped" (borrowed host memory such as a mapped model file) and the extra "CPU_REPACK"
//! (weights in the layout of the repacked kernels, `repack`).

use crate::backend::CpuBackend;
use ggml::backend::{
    Backend, BackendError, Buffer, BufferTypeRef, Device, DeviceCaps, DeviceKind, DeviceRef,
    HostBuffer, HostBufferType, Reg,
};
use ggml::{Context, TensorId};
use std::sync::{Arc, OnceLock};

/// ggml's TENSOR_ALIGNMENT: what the CPU buffer type reports to the allocator.
pub const TENSOR_ALIGNMENT: usize = 32;

pub struct CpuReg {
    dev: DeviceRef,
}

impl Reg for CpuReg {
    fn name(&self) -> &str {
        "CPU"
    }
    fn devices(&self) -> Vec<DeviceRef> {
        vec![self.dev.clone()]
    }
}

/// The process-wide CPU registration (one device, one set of buffer types).
pub fn reg() -> Arc<dyn Reg> {
    static REG: OnceLock<Arc<CpuReg>> = OnceLock::new();
    REG.get_or_init(|| {
        Arc::new(CpuReg {
            dev: Arc::new(CpuDevice::new()),
        })
    })
    .clone()
}

/// The CPU device.
pub fn device() -> DeviceRef {
    reg().devices().remove(0)
}

pub struct CpuDevice {
    description: String,
    buft: BufferTypeRef,
    mapped_buft: Arc<HostBufferType>,
}

impl CpuDevice {
    fn new() -> CpuDevice {
        CpuDevice {
            description: cpu_brand(),
            buft: Arc::new(HostBufferType {
                name: "CPU".into(),
                alignment: TENSOR_ALIGNMENT,
                max_size: usize::MAX,
            }),
            mapped_buft: Arc::new(HostBufferType {
                name: "CPU_Mapped".into(),
                alignment: TENSOR_ALIGNMENT,
                max_size: usize::MAX,
            }),
        }
    }
}

/// The CPU's brand string ("model name" in /proc/cpuinfo), or "CPU".
fn cpu_brand() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "CPU".to_string())
}

/// (available, total) bytes from /proc/meminfo.
fn meminfo() -> (usize, usize) {
    let Ok(s) = std::fs::read_to_string("/proc/meminfo") else {
        return (0, 0);
    };
    let field = |name: &str| -> usize {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<usize>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("MemAvailable:"), field("MemTotal:"))
}

impl Device for CpuDevice {
    fn name(&self) -> &str {
        "CPU"
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn kind(&self) -> DeviceKind {
        DeviceKind::Cpu
    }
    fn memory(&self) -> (usize, usize) {
        meminfo()
    }
    fn caps(&self) -> DeviceCaps {
        DeviceCaps {
            async_: false,
            host_buffer: false,
            buffer_from_host_ptr: true,
            events: false,
        }
    }
    fn init_backend(self: Arc<Self>) -> Result<Box<dyn Backend>, BackendError> {
        Ok(Box::new(CpuBackend::new(self)))
    }
    fn buffer_type(&self) -> BufferTypeRef {
        self.buft.clone()
    }
    /// CPU_REPACK, as ggml's CPU backend lists it on every machine (which weights it takes
    /// depends on the CPU: `repack::layout_for`).
    fn extra_buffer_types(&self) -> Vec<BufferTypeRef> {
        vec![crate::repack::buffer_type()]
    }
    fn buffer_from_host_ptr(&self, ptr: usize, size: usize) -> Option<Arc<Buffer>> {
        self.buffer_from_host_ptr_owned(ptr, size, Arc::new(()))
    }
    fn buffer_from_host_ptr_owned(
        &self,
        ptr: usize,
        size: usize,
        owner: Arc<dyn Send + Sync>,
    ) -> Option<Arc<Buffer>> {
        if ptr == 0 {
            return None;
        }
        // SAFETY: the caller guarantees ptr..ptr+size is valid host memory for as long as
        // `owner` lives, and the buffer holds `owner`.
        let mem = unsafe { HostBuffer::from_raw(ptr, size, owner) };
        let buft: BufferTypeRef = self.mapped_buft.clone();
        Some(Arc::new(Buffer::new(buft, Box::new(mem))))
    }
    fn supports_op(&self, ctx: &Context, op: TensorId) -> bool {
        crate::support::supports_op(ctx, op)
    }
    fn supports_buft(&self, buft: &BufferTypeRef) -> bool {
        buft.is_host() || crate::repack::is_repack_buft(buft)
    }
}

/// A CPU backend with the default thread count.
pub fn init_backend() -> Box<dyn Backend> {
    Box::new(CpuBackend::new(device()))
}
