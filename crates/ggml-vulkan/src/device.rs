//! The ggml device `Vulkan<N>` and the registry of all of them.

use crate::backend::VkBackend;
use crate::buffer::{VkBufferType, VkHostBufferType};
use crate::gpu::Gpu;
use crate::{instance, ops};
use ggml::backend::{
    same_buft, Backend, BackendError, BufferTypeRef, Device, DeviceCaps, DeviceKind, DeviceRef, Reg,
};
use ggml::{Context, TensorId};
use std::sync::{Arc, OnceLock};

pub struct VkDevice {
    pub(crate) gpu: Arc<Gpu>,
    buft: BufferTypeRef,
    host_buft: BufferTypeRef,
    integrated: bool,
    offload_min_batch: i64,
}

impl Device for VkDevice {
    fn name(&self) -> &str {
        &self.gpu.name
    }
    fn description(&self) -> &str {
        &self.gpu.description
    }
    fn kind(&self) -> DeviceKind {
        if self.integrated {
            DeviceKind::IGpu
        } else {
            DeviceKind::Gpu
        }
    }
    fn memory(&self) -> (usize, usize) {
        Gpu::memory(Gpu::instance(), self.gpu.pd)
    }
    fn caps(&self) -> DeviceCaps {
        // every transfer and graph completes before its call returns: no events to offer
        DeviceCaps {
            async_: false,
            host_buffer: true,
            buffer_from_host_ptr: false,
            events: false,
        }
    }
    fn init_backend(self: Arc<Self>) -> Result<Box<dyn Backend>, BackendError> {
        Ok(Box::new(VkBackend { dev: self }))
    }
    fn buffer_type(&self) -> BufferTypeRef {
        self.buft.clone()
    }
    fn host_buffer_type(&self) -> Option<BufferTypeRef> {
        Some(self.host_buft.clone())
    }
    fn supports_op(&self, ctx: &Context, op: TensorId) -> bool {
        ops::supports(&self.gpu, ctx, op)
    }
    fn supports_buft(&self, buft: &BufferTypeRef) -> bool {
        same_buft(buft, &self.buft)
    }
    fn offload_op(&self, ctx: &Context, op: TensorId) -> bool {
        ops::op_batch_size(&ctx[op]) >= self.offload_min_batch
    }
}

pub struct VkReg {
    devices: Vec<DeviceRef>,
}

impl Reg for VkReg {
    fn name(&self) -> &str {
        "Vulkan"
    }
    fn devices(&self) -> Vec<DeviceRef> {
        self.devices.clone()
    }
}

static REG: OnceLock<Arc<VkReg>> = OnceLock::new();

/// The Vulkan registry: one device per visible physical device that opened (none without a
/// loader or a usable device).
pub fn reg() -> Arc<VkReg> {
    REG.get_or_init(|| {
        let min_batch = std::env::var("GGML_OP_OFFLOAD_MIN_BATCH")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(32);
        let mut devices: Vec<DeviceRef> = Vec::new();
        // one pinned host buffer type for every device, allocated through the first, as
        // ggml's ggml_backend_vk_host_buffer_type(): the meta device over several Vulkan
        // devices then keeps its outputs and CPU compute buffers pinned, as llama.cpp does
        let mut host_buft: Option<Arc<VkHostBufferType>> = None;
        if let Some(inst) = instance::get() {
            for i in 0..inst.devices.len() {
                match Gpu::open(i) {
                    Ok(gpu) => {
                        // SAFETY: the physical device belongs to the instance.
                        let ty = unsafe { inst.instance.get_physical_device_properties(gpu.pd) }
                            .device_type;
                        let gpu = Arc::new(gpu);
                        let host = host_buft
                            .get_or_insert_with(|| Arc::new(VkHostBufferType { gpu: gpu.clone() }))
                            .clone();
                        devices.push(Arc::new(VkDevice {
                            buft: Arc::new(VkBufferType { gpu: gpu.clone() }),
                            host_buft: host,
                            integrated: ty == ash::vk::PhysicalDeviceType::INTEGRATED_GPU,
                            offload_min_batch: min_batch,
                            gpu,
                        }));
                    }
                    Err(e) => ggml::log_warn!("ggml_vulkan: device {i} unusable: {e}\n"),
                }
            }
        }
        Arc::new(VkReg { devices })
    })
    .clone()
}
