//! The device-local buffer type `Vulkan<N>` and the pinned host buffer type `Vulkan_Host`.
//!
//! A device buffer has no host address: it gets a unique fake base address (as ggml-vulkan's
//! vk_ptr_base) so that tensors can point into it like into any buffer; offsets are
//! `addr - base`. Reads and writes go through the device's staging buffer.

use crate::gpu::Gpu;
use ash::vk;
use ggml::backend::{BackendError, Buffer, BufferImpl, BufferType, HostBuffer};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Fake device addresses start here and never repeat (1 MiB apart at least).
static NEXT_BASE: AtomicUsize = AtomicUsize::new(0x1000_0000_0000);

fn fake_base(size: usize) -> usize {
    let span = size.div_ceil(1 << 20).saturating_add(1) << 20;
    NEXT_BASE.fetch_add(span, Ordering::Relaxed)
}

pub struct VkBufferType {
    pub(crate) gpu: Arc<Gpu>,
}

impl BufferType for VkBufferType {
    fn name(&self) -> &str {
        &self.gpu.name
    }
    fn alloc_buffer(self: Arc<Self>, size: usize) -> Result<Arc<Buffer>, BackendError> {
        let (buffer, memory) =
            self.gpu
                .create_buffer(size, self.gpu.mem_device)
                .map_err(|reason| BackendError::Alloc {
                    buft: self.gpu.name.clone(),
                    size,
                    reason,
                })?;
        let mem = DeviceMem {
            gpu: self.gpu.clone(),
            buffer,
            memory,
            base: fake_base(size),
            size,
        };
        Ok(Arc::new(Buffer::new(self, Box::new(mem))))
    }
    fn alignment(&self) -> usize {
        self.gpu.limits.min_storage_align
    }
    fn max_size(&self) -> usize {
        self.gpu.limits.max_buffer
    }
    fn is_host(&self) -> bool {
        false
    }
}

/// One allocation of device memory and the buffer bound to it.
pub(crate) struct DeviceMem {
    pub gpu: Arc<Gpu>,
    pub buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    pub base: usize,
    pub size: usize,
}

impl DeviceMem {
    fn report(&self, what: &str, len: usize, r: Result<(), String>) -> Result<(), BackendError> {
        r.map_err(|e| {
            BackendError::Other(format!("{what} of {len} bytes on {}: {e}", self.gpu.name))
        })
    }
}

impl BufferImpl for DeviceMem {
    fn base(&self) -> usize {
        self.base
    }
    fn size(&self) -> usize {
        self.size
    }
    fn set(&self, addr: usize, data: &[u8]) -> Result<(), BackendError> {
        let r = self.gpu.write(self.buffer, addr - self.base, data);
        self.report("write", data.len(), r)
    }
    fn get(&self, addr: usize, out: &mut [u8]) -> Result<(), BackendError> {
        let r = self.gpu.read(self.buffer, addr - self.base, out);
        self.report("read", out.len(), r)
    }
    fn memset(&self, addr: usize, value: u8, size: usize) -> Result<(), BackendError> {
        let r = self.gpu.fill(self.buffer, addr - self.base, value, size);
        self.report("memset", size, r)
    }
    /// A device-side copy when `src` is in this device's memory too (as ggml-vulkan's
    /// buffer cpy_tensor); otherwise the caller goes through the host.
    fn cpy_tensor(&self, src: &ggml::Tensor, dst: &ggml::Tensor) -> Result<bool, BackendError> {
        let (Some((sm, so)), Some((dm, doff))) = (device_mem(src), device_mem(dst)) else {
            return Ok(false);
        };
        if !Arc::ptr_eq(&sm.gpu, &self.gpu) || !std::ptr::eq(dm, self) {
            return Ok(false);
        }
        let n = src.nbytes();
        let r = self.gpu.copy(sm.buffer, so, dm.buffer, doff, n);
        self.report("copy", n, r).map(|()| true)
    }
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

impl Drop for DeviceMem {
    fn drop(&mut self) {
        self.gpu.destroy_buffer(self.buffer, self.memory);
    }
}

/// The device buffer behind a tensor of a `Vulkan<N>` buffer, and the tensor's byte offset in it.
pub(crate) fn device_mem(t: &ggml::Tensor) -> Option<(&DeviceMem, usize)> {
    let buf = t.buffer()?;
    let mem = buf.imp_any()?.downcast_ref::<DeviceMem>()?;
    Some((mem, t.addr().checked_sub(mem.base)?))
}

/// Host memory allocated through Vulkan (pinned, mapped for good), handed to the CPU as host
/// memory: the CPU backend computes on it directly.
pub struct VkHostBufferType {
    pub(crate) gpu: Arc<Gpu>,
}

struct HostAlloc {
    gpu: Arc<Gpu>,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
}

impl Drop for HostAlloc {
    fn drop(&mut self) {
        self.gpu.destroy_buffer(self.buffer, self.memory);
    }
}

impl BufferType for VkHostBufferType {
    fn name(&self) -> &str {
        "Vulkan_Host"
    }
    fn alloc_buffer(self: Arc<Self>, size: usize) -> Result<Arc<Buffer>, BackendError> {
        // as ggml: 32 bytes more, like the CPU buffer type
        let size = size + 32;
        let err = |reason: String| BackendError::Alloc {
            buft: "Vulkan_Host".into(),
            size,
            reason,
        };
        let (buffer, memory) = self
            .gpu
            .create_buffer(size, self.gpu.mem_host)
            .map_err(err)?;
        let keep = HostAlloc {
            gpu: self.gpu.clone(),
            buffer,
            memory,
        };
        let ptr = self.gpu.map(memory).map_err(err)?;
        // SAFETY: the mapping covers `size` bytes and stays valid while `keep` (which frees the
        // memory, unmapping it) is alive; HostBuffer keeps it for the buffer's lifetime.
        let mem = unsafe { HostBuffer::from_raw(ptr as usize, size, Arc::new(keep)) };
        mem_zero(ptr, size);
        Ok(Arc::new(Buffer::new(self, Box::new(mem))))
    }
    fn alignment(&self) -> usize {
        self.gpu.limits.min_map_align
    }
    fn max_size(&self) -> usize {
        self.gpu.limits.max_buffer
    }
    fn is_host(&self) -> bool {
        true
    }
}

fn mem_zero(ptr: *mut u8, size: usize) {
    // SAFETY: ptr maps `size` writable bytes (just allocated, not shared yet).
    unsafe { std::ptr::write_bytes(ptr, 0, size) }
}
