//! The Vulkan backend: a graph split becomes one command buffer of dispatches with a barrier
//! between each, submitted and waited for.

use crate::device::VkDevice;
use crate::ops;
use ash::vk;
use ggml::backend::{Backend, BackendError, DeviceRef, GraphView, Status};
use ggml::Tensor;
use std::sync::Arc;

pub struct VkBackend {
    pub(crate) dev: Arc<VkDevice>,
}

impl Backend for VkBackend {
    fn name(&self) -> &str {
        &self.dev.gpu.name
    }
    fn device(&self) -> DeviceRef {
        self.dev.clone()
    }
    fn graph_compute(&mut self, graph: GraphView<'_>) -> Status {
        let gpu = &self.dev.gpu;
        let mut work = Vec::new();
        for &n in graph.nodes {
            let t = &graph.ctx[n];
            if t.op.is_view() || t.op.is_none() || t.nelements() == 0 {
                continue;
            }
            match ops::plan(gpu, graph.ctx, n) {
                Ok(d) => work.push((n, d)),
                Err(e) => {
                    let e = format!("ggml_vulkan: {} ({}): {e}", t.name, t.op.desc());
                    ggml::log_error!("{e}\n");
                    return Status::Failed(e);
                }
            }
        }
        if work.is_empty() {
            return Status::Success;
        }
        let mut pipelines = Vec::with_capacity(work.len());
        for (n, d) in &work {
            match gpu.pipelines.get(&gpu.device, d.shader) {
                Ok(p) => pipelines.push(p),
                Err(e) => {
                    let t = &graph.ctx[*n];
                    let e = format!(
                        "ggml_vulkan: pipeline of op {} ({}) failed: {e}",
                        t.op.desc(),
                        t.name
                    );
                    ggml::log_error!("{e}\n");
                    return Status::Failed(e);
                }
            }
        }
        let layout = gpu.pipelines.layout;
        let r = gpu.submit(|g, st| {
            for ((_, d), &pipe) in work.iter().zip(&pipelines) {
                let infos: Vec<[vk::DescriptorBufferInfo; 1]> = d
                    .bind
                    .iter()
                    .map(|b| {
                        [vk::DescriptorBufferInfo {
                            buffer: b.buffer,
                            offset: b.offset,
                            range: b.range,
                        }]
                    })
                    .collect();
                let writes: Vec<vk::WriteDescriptorSet> = infos
                    .iter()
                    .enumerate()
                    .map(|(i, info)| {
                        vk::WriteDescriptorSet::default()
                            .dst_binding(i as u32)
                            .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                            .buffer_info(info)
                    })
                    .collect();
                let push: Vec<u8> = d.push.iter().flat_map(|w| w.to_ne_bytes()).collect();
                // SAFETY: st.cmd is recording; the pipeline, layout and buffers are valid and
                // outlive the submission (it is waited for before they can be dropped).
                unsafe {
                    g.device
                        .cmd_bind_pipeline(st.cmd, vk::PipelineBindPoint::COMPUTE, pipe);
                    g.push.cmd_push_descriptor_set(
                        st.cmd,
                        vk::PipelineBindPoint::COMPUTE,
                        layout,
                        0,
                        &writes,
                    );
                    g.device.cmd_push_constants(
                        st.cmd,
                        layout,
                        vk::ShaderStageFlags::COMPUTE,
                        0,
                        &push,
                    );
                    g.device
                        .cmd_dispatch(st.cmd, d.groups[0], d.groups[1], d.groups[2]);
                }
                g.barrier(
                    st.cmd,
                    vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
                    vk::AccessFlags::SHADER_READ
                        | vk::AccessFlags::SHADER_WRITE
                        | vk::AccessFlags::TRANSFER_READ,
                );
            }
            Ok(())
        });
        match r {
            Ok(()) => Status::Success,
            Err(e) => {
                let e = format!("ggml_vulkan: graph on {} failed: {e}", gpu.name);
                ggml::log_error!("{e}\n");
                Status::Failed(e)
            }
        }
    }
    /// Every call completed before it returned; what is left to report is a device taken out
    /// of use by an earlier failure.
    fn synchronize(&mut self) -> Result<(), BackendError> {
        match self.dev.gpu.lost() {
            Some(cause) => Err(BackendError::Other(format!(
                "{}: device out of use: {cause}",
                self.dev.gpu.name
            ))),
            None => Ok(()),
        }
    }
    fn cpy_tensor_async(&mut self, src: &Tensor, dst: &Tensor) -> bool {
        // a device-side copy when both tensors are in this device's memory; otherwise the
        // scheduler copies through the host
        let (Some((sm, so)), Some((dm, doff))) = (
            crate::buffer::device_mem(src),
            crate::buffer::device_mem(dst),
        ) else {
            return false;
        };
        if !Arc::ptr_eq(&sm.gpu, &self.dev.gpu)
            || !Arc::ptr_eq(&dm.gpu, &self.dev.gpu)
            || src.nbytes() != dst.nbytes()
            || !src.is_contiguous()
            || !dst.is_contiguous()
        {
            return false;
        }
        match self
            .dev
            .gpu
            .copy(sm.buffer, so, dm.buffer, doff, src.nbytes())
        {
            Ok(()) => true,
            Err(e) => {
                ggml::log_error!(
                    "ggml_vulkan: copy {} -> {} failed: {e}\n",
                    src.name,
                    dst.name
                );
                false
            }
        }
    }
}
