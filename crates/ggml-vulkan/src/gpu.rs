//! One logical Vulkan device: its queue, limits, memory types, the pipelines made so far, and a
//! stream that records, submits and waits (every transfer and graph is complete when the call
//! returns, so the scheduler's staging data may be freed right after it).

use crate::instance::{self, Instance};
use crate::pipelines::Pipelines;
use ash::vk;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Uploads and downloads go through a host-visible staging buffer of at most this many bytes.
const STAGING_MAX: usize = 16 << 20;

/// How long one submission may run before the device counts as hung (GGML_VK_FENCE_TIMEOUT_S
/// overrides it): a driver that never signals the fence is an error, not a hang.
const FENCE_TIMEOUT_S: u64 = 600;

fn fence_timeout() -> Duration {
    let s = std::env::var("GGML_VK_FENCE_TIMEOUT_S")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&s| s > 0)
        .unwrap_or(FENCE_TIMEOUT_S);
    Duration::from_secs(s)
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub max_storage_range: usize,
    pub min_storage_align: usize,
    pub min_map_align: usize,
    /// ggml's suballocation_block_size: min(1 GiB, the largest allocation)
    pub max_buffer: usize,
}

pub(crate) struct Gpu {
    pub name: String,
    pub description: String,
    pub pd: vk::PhysicalDevice,
    pub device: ash::Device,
    pub push: ash::khr::push_descriptor::Device,
    pub limits: Limits,
    pub mem_device: u32,
    pub mem_host: u32,
    pub pipelines: Pipelines,
    stream: Mutex<Stream>,
    /// set once a submission failed or timed out: the stream's command buffer may still be in
    /// use, so every later call fails at once with the first cause
    lost: Mutex<Option<String>>,
    lost_flag: AtomicBool,
    fence_timeout: Duration,
}

pub(crate) struct Stream {
    queue: vk::Queue,
    pool: vk::CommandPool,
    pub cmd: vk::CommandBuffer,
    fence: vk::Fence,
    staging: Option<Staging>,
}

pub(crate) struct Staging {
    pub buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    pub ptr: *mut u8,
    pub size: usize,
}

// SAFETY: the staging pointer is a persistent host mapping used only under the stream's mutex.
unsafe impl Send for Stream {}

/// A Vulkan result as Vulkan-Hpp names it (ErrorOutOfDeviceMemory), which ggml-vulkan prints.
fn vk_result_name(e: vk::Result) -> String {
    let upper = format!("{e:?}");
    let mut out = String::new();
    for word in upper.split('_') {
        let mut c = word.chars();
        if let Some(f) = c.next() {
            out.push(f);
            out.extend(c.flat_map(char::to_lowercase));
        }
    }
    out
}

fn vk_err(what: &str, e: vk::Result) -> String {
    format!("{what}: {e:?}")
}

impl Gpu {
    pub(crate) fn instance() -> &'static Instance {
        instance::get().expect("a Gpu exists only when the instance does")
    }

    /// Opens physical device `index` of the visible list.
    pub(crate) fn open(index: usize) -> Result<Gpu, String> {
        let inst = instance::get().ok_or("no Vulkan instance")?;
        let pd = *inst.devices.get(index).ok_or("no such Vulkan device")?;
        let i = &inst.instance;
        // SAFETY: pd belongs to this instance.
        let props = unsafe { i.get_physical_device_properties(pd) };
        let description = props
            .device_name_as_c_str()
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default();
        let family = instance::compute_queue_family(i, pd).ok_or("no compute queue")?;
        let membudget = instance::has_extension(i, pd, ash::ext::memory_budget::NAME);

        let prio = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&prio)];
        let mut exts = vec![ash::khr::push_descriptor::NAME.as_ptr()];
        if membudget {
            exts.push(ash::ext::memory_budget::NAME.as_ptr());
        }
        let mut f11 =
            vk::PhysicalDeviceVulkan11Features::default().storage_buffer16_bit_access(true);
        let mut f12 =
            vk::PhysicalDeviceVulkan12Features::default().storage_buffer8_bit_access(true);
        // double precision on a CPU-type device (lavapipe) that has it: there the shaders that
        // keep the CPU backend's float order round their fused multiply-adds and divisions
        // through doubles (the `_f64` variants), since the driver splits fma into a multiply
        // and an add. GPUs fuse fma and keep the float variants (no slow doubles).
        // GGML_VK_NO_EXACT=1 keeps the float variants there too (faster, not the CPU's bits)
        let f64_ok = instance::has_float64_int64(i, pd)
            && props.device_type == vk::PhysicalDeviceType::CPU
            && std::env::var_os("GGML_VK_NO_EXACT").is_none_or(|v| v.is_empty() || v == "0");
        let base = vk::PhysicalDeviceFeatures::default()
            .shader_float64(f64_ok)
            .shader_int64(f64_ok);
        let info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_features(&base)
            .enabled_extension_names(&exts)
            .push_next(&mut f11)
            .push_next(&mut f12);
        // SAFETY: every pointer in the create info lives across the call; the features were
        // checked by instance::usable.
        let device =
            unsafe { i.create_device(pd, &info, None) }.map_err(|e| vk_err("vkCreateDevice", e))?;
        let push = ash::khr::push_descriptor::Device::new(i, &device);

        // SAFETY: pd belongs to this instance.
        let mem = unsafe { i.get_physical_device_memory_properties(pd) };
        let find = |want: vk::MemoryPropertyFlags, avoid: vk::MemoryPropertyFlags| {
            (0..mem.memory_type_count).find(|&t| {
                let f = mem.memory_types[t as usize].property_flags;
                f.contains(want) && !f.intersects(avoid)
            })
        };
        let mem_device = find(
            vk::MemoryPropertyFlags::DEVICE_LOCAL,
            vk::MemoryPropertyFlags::empty(),
        )
        .or_else(|| {
            find(
                vk::MemoryPropertyFlags::empty(),
                vk::MemoryPropertyFlags::empty(),
            )
        })
        .ok_or("no memory type")?;
        let host = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let mem_host = find(
            host | vk::MemoryPropertyFlags::HOST_CACHED,
            vk::MemoryPropertyFlags::empty(),
        )
        .or_else(|| find(host, vk::MemoryPropertyFlags::empty()))
        .ok_or("no host-visible memory type")?;

        let mut p3 = vk::PhysicalDeviceMaintenance3Properties::default();
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut p3);
        // SAFETY: the chained struct lives across the call.
        unsafe { i.get_physical_device_properties2(pd, &mut p2) };
        let max_alloc = p3.max_memory_allocation_size as usize;
        let limits = Limits {
            max_storage_range: props.limits.max_storage_buffer_range as usize,
            min_storage_align: props.limits.min_storage_buffer_offset_alignment as usize,
            min_map_align: props.limits.min_memory_map_alignment.max(1),
            max_buffer: max_alloc.min(1 << 30),
        };

        // SAFETY: the family index exists and one queue was requested.
        let queue = unsafe { device.get_device_queue(family, 0) };
        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: the device is valid; the objects are destroyed in Drop.
        let pool = unsafe { device.create_command_pool(&pool_info, None) }
            .map_err(|e| vk_err("vkCreateCommandPool", e))?;
        let alloc = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: as above.
        let cmd = unsafe { device.allocate_command_buffers(&alloc) }
            .map_err(|e| vk_err("vkAllocateCommandBuffers", e))?[0];
        // SAFETY: as above.
        let fence = unsafe { device.create_fence(&vk::FenceCreateInfo::default(), None) }
            .map_err(|e| vk_err("vkCreateFence", e))?;
        let pipelines = Pipelines::new(&device, f64_ok)?;
        Ok(Gpu {
            name: format!("Vulkan{index}"),
            description,
            pd,
            device,
            push,
            limits,
            mem_device,
            mem_host,
            pipelines,
            stream: Mutex::new(Stream {
                queue,
                pool,
                cmd,
                fence,
                staging: None,
            }),
            lost: Mutex::new(None),
            lost_flag: AtomicBool::new(false),
            fence_timeout: fence_timeout(),
        })
    }

    /// (free, total) bytes of the device-local heaps, as ggml_backend_vk_get_device_memory.
    pub(crate) fn memory(inst: &Instance, pd: vk::PhysicalDevice) -> (usize, usize) {
        let i = &inst.instance;
        let integrated = {
            // SAFETY: pd belongs to this instance.
            let p = unsafe { i.get_physical_device_properties(pd) };
            p.device_type == vk::PhysicalDeviceType::INTEGRATED_GPU
        };
        let budget_ok = instance::has_extension(i, pd, ash::ext::memory_budget::NAME);
        let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
        let mut mp = vk::PhysicalDeviceMemoryProperties2::default();
        if budget_ok {
            mp = mp.push_next(&mut budget);
        }
        // SAFETY: the chained struct lives across the call.
        unsafe { i.get_physical_device_memory_properties2(pd, &mut mp) };
        let props = mp.memory_properties;
        let (mut free, mut total) = (0usize, 0usize);
        for h in 0..props.memory_heap_count as usize {
            let heap = props.memory_heaps[h];
            if integrated || heap.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL) {
                total += heap.size as usize;
                free += if budget_ok {
                    budget.heap_budget[h].saturating_sub(budget.heap_usage[h]) as usize
                } else {
                    heap.size as usize
                };
            }
        }
        (free, total)
    }

    fn lock(&self) -> MutexGuard<'_, Stream> {
        self.stream.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cause of the failure that took the device out of use, if one did.
    pub(crate) fn lost(&self) -> Option<String> {
        if !self.lost_flag.load(Ordering::Acquire) {
            return None;
        }
        self.lost.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn mark_lost(&self, cause: &str) {
        let mut l = self.lost.lock().unwrap_or_else(|e| e.into_inner());
        if l.is_none() {
            *l = Some(cause.to_string());
        }
        self.lost_flag.store(true, Ordering::Release);
    }

    /// Waits for the stream's fence in one-second slices up to the timeout. A lost device is
    /// VK_ERROR_DEVICE_LOST from the wait; a fence never signalled is reported after the
    /// timeout. Either way the device is marked lost.
    fn wait_fence(&self, fence: vk::Fence) -> Result<(), String> {
        let start = Instant::now();
        loop {
            // SAFETY: the fence belongs to this device and was submitted with the queue.
            let r = unsafe { self.device.wait_for_fences(&[fence], true, 1_000_000_000) };
            match r {
                Ok(()) => return Ok(()),
                Err(vk::Result::TIMEOUT) if start.elapsed() < self.fence_timeout => continue,
                Err(vk::Result::TIMEOUT) => {
                    let e = format!(
                        "vkWaitForFences: the device did not finish within {} s (set GGML_VK_FENCE_TIMEOUT_S for longer work)",
                        self.fence_timeout.as_secs()
                    );
                    self.mark_lost(&e);
                    return Err(e);
                }
                Err(e) => {
                    let e = vk_err("vkWaitForFences", e);
                    self.mark_lost(&e);
                    return Err(e);
                }
            }
        }
    }

    /// Allocates device memory of `mem_type` bound to a new storage/transfer buffer.
    pub(crate) fn create_buffer(
        &self,
        size: usize,
        mem_type: u32,
    ) -> Result<(vk::Buffer, vk::DeviceMemory), String> {
        let info = vk::BufferCreateInfo::default()
            .size(size.max(16) as u64)
            .usage(
                vk::BufferUsageFlags::STORAGE_BUFFER
                    | vk::BufferUsageFlags::TRANSFER_SRC
                    | vk::BufferUsageFlags::TRANSFER_DST,
            )
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: the device is valid; on failure nothing is leaked (the buffer is destroyed).
        unsafe {
            let buffer = self
                .device
                .create_buffer(&info, None)
                .map_err(|e| vk_err("vkCreateBuffer", e))?;
            let req = self.device.get_buffer_memory_requirements(buffer);
            // as ggml-vulkan: a memory type only fits when its heap can hold the request (a
            // driver such as lavapipe would otherwise hand out memory past its heap)
            let props = Self::instance()
                .instance
                .get_physical_device_memory_properties(self.pd);
            let heap = props.memory_types[mem_type as usize].heap_index as usize;
            let fits = req.memory_type_bits & (1 << mem_type) != 0
                && props.memory_heaps[heap].size >= req.size;
            let alloc = vk::MemoryAllocateInfo::default()
                .allocation_size(req.size)
                .memory_type_index(mem_type);
            let allocated = if fits {
                self.device
                    .allocate_memory(&alloc, None)
                    .map_err(|e| format!("vk::Device::allocateMemory: {}", vk_result_name(e)))
            } else {
                Err("No suitable memory type found: ErrorOutOfDeviceMemory".to_string())
            };
            let memory = match allocated {
                Ok(m) => m,
                Err(e) => {
                    self.device.destroy_buffer(buffer, None);
                    // ggml-vulkan's own lines, on stderr
                    let kind = if mem_type == self.mem_device {
                        "Device memory"
                    } else {
                        "Memory"
                    };
                    eprintln!("ggml_vulkan: {kind} allocation of size {size} failed.");
                    eprintln!("ggml_vulkan: {e}");
                    return Err(e);
                }
            };
            if let Err(e) = self.device.bind_buffer_memory(buffer, memory, 0) {
                self.device.destroy_buffer(buffer, None);
                self.device.free_memory(memory, None);
                return Err(vk_err("vkBindBufferMemory", e));
            }
            Ok((buffer, memory))
        }
    }

    pub(crate) fn map(&self, memory: vk::DeviceMemory) -> Result<*mut u8, String> {
        // SAFETY: host-visible memory, mapped whole once for its lifetime.
        unsafe {
            self.device
                .map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                .map(|p| p as *mut u8)
                .map_err(|e| vk_err("vkMapMemory", e))
        }
    }

    pub(crate) fn destroy_buffer(&self, buffer: vk::Buffer, memory: vk::DeviceMemory) {
        if self.lost_flag.load(Ordering::Acquire) {
            // a submission that timed out may still use it: leak rather than free in-use memory
            return;
        }
        // SAFETY: every submission that used the buffer has completed (the stream waits).
        unsafe {
            self.device.destroy_buffer(buffer, None);
            self.device.free_memory(memory, None);
        }
    }

    /// Records with `f` into the stream's command buffer, submits and waits. A global barrier
    /// before and after orders it against every earlier submission and makes its writes
    /// visible to the host.
    pub(crate) fn submit(
        &self,
        f: impl FnOnce(&Gpu, &mut Stream) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut s = self.lock();
        self.submit_locked(&mut s, f)
    }

    fn submit_locked(
        &self,
        s: &mut Stream,
        f: impl FnOnce(&Gpu, &mut Stream) -> Result<(), String>,
    ) -> Result<(), String> {
        if let Some(cause) = self.lost() {
            return Err(format!(
                "the device is out of use after an earlier failure ({cause})"
            ));
        }
        let d = &self.device;
        let begin = vk::CommandBufferBeginInfo::default()
            .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: the command buffer is not in use (every submission is waited for).
        unsafe { d.begin_command_buffer(s.cmd, &begin) }
            .map_err(|e| vk_err("vkBeginCommandBuffer", e))?;
        self.barrier(
            s.cmd,
            vk::PipelineStageFlags::ALL_COMMANDS,
            vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE,
        );
        let recorded = f(self, s);
        self.barrier(
            s.cmd,
            vk::PipelineStageFlags::HOST,
            vk::AccessFlags::HOST_READ | vk::AccessFlags::HOST_WRITE,
        );
        // SAFETY: recording began above.
        unsafe { d.end_command_buffer(s.cmd) }.map_err(|e| vk_err("vkEndCommandBuffer", e))?;
        recorded?;
        let cmds = [s.cmd];
        let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
        // SAFETY: the command buffer is fully recorded; the fence is unsignalled.
        unsafe { d.queue_submit(s.queue, &submit, s.fence) }.map_err(|e| {
            let e = vk_err("vkQueueSubmit", e);
            self.mark_lost(&e);
            e
        })?;
        self.wait_fence(s.fence)?;
        // SAFETY: the fence has signalled, so no submission uses it.
        unsafe { d.reset_fences(&[s.fence]) }.map_err(|e| vk_err("vkResetFences", e))?;
        Ok(())
    }

    /// A full memory barrier from every earlier command to `dst`.
    pub(crate) fn barrier(
        &self,
        cmd: vk::CommandBuffer,
        dst: vk::PipelineStageFlags,
        access: vk::AccessFlags,
    ) {
        let mb = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::MEMORY_WRITE)
            .dst_access_mask(access)];
        // SAFETY: cmd is recording.
        unsafe {
            self.device.cmd_pipeline_barrier(
                cmd,
                vk::PipelineStageFlags::ALL_COMMANDS,
                dst,
                vk::DependencyFlags::empty(),
                &mb,
                &[],
                &[],
            )
        };
    }

    fn staging<'s>(&self, s: &'s mut Stream, need: usize) -> Result<&'s Staging, String> {
        let need = need.clamp(1, STAGING_MAX);
        if s.staging.as_ref().is_some_and(|st| st.size < need) {
            if let Some(old) = s.staging.take() {
                self.destroy_buffer(old.buffer, old.memory);
            }
        }
        if s.staging.is_none() {
            let (buffer, memory) = self.create_buffer(need, self.mem_host)?;
            let ptr = match self.map(memory) {
                Ok(p) => p,
                Err(e) => {
                    self.destroy_buffer(buffer, memory);
                    return Err(e);
                }
            };
            s.staging = Some(Staging {
                buffer,
                memory,
                ptr,
                size: need,
            });
        }
        Ok(s.staging.as_ref().expect("made above"))
    }

    /// Host bytes into `dst` at `offset`, through the staging buffer.
    pub(crate) fn write(&self, dst: vk::Buffer, offset: usize, data: &[u8]) -> Result<(), String> {
        let mut s = self.lock();
        let mut done = 0;
        while done < data.len() {
            let (sbuf, sptr, n) = {
                let st = self.staging(&mut s, data.len() - done)?;
                (st.buffer, st.ptr, st.size.min(data.len() - done))
            };
            // SAFETY: the staging mapping holds at least n bytes and no submission uses it now.
            unsafe { std::ptr::copy_nonoverlapping(data[done..].as_ptr(), sptr, n) };
            let region = [vk::BufferCopy {
                src_offset: 0,
                dst_offset: (offset + done) as u64,
                size: n as u64,
            }];
            self.submit_locked(&mut s, |g, st| {
                // SAFETY: both buffers are valid and the region is inside them.
                unsafe { g.device.cmd_copy_buffer(st.cmd, sbuf, dst, &region) };
                Ok(())
            })?;
            done += n;
        }
        Ok(())
    }

    /// Bytes of `src` at `offset` into host memory, through the staging buffer.
    pub(crate) fn read(
        &self,
        src: vk::Buffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), String> {
        let mut s = self.lock();
        let mut done = 0;
        while done < out.len() {
            let (sbuf, sptr, n) = {
                let st = self.staging(&mut s, out.len() - done)?;
                (st.buffer, st.ptr, st.size.min(out.len() - done))
            };
            let region = [vk::BufferCopy {
                src_offset: (offset + done) as u64,
                dst_offset: 0,
                size: n as u64,
            }];
            self.submit_locked(&mut s, |g, st| {
                // SAFETY: both buffers are valid and the region is inside them.
                unsafe { g.device.cmd_copy_buffer(st.cmd, src, sbuf, &region) };
                Ok(())
            })?;
            // SAFETY: the copy has completed; the mapping holds n bytes.
            unsafe { std::ptr::copy_nonoverlapping(sptr, out[done..].as_mut_ptr(), n) };
            done += n;
        }
        Ok(())
    }

    /// Fills `size` bytes at `offset` with `value`.
    pub(crate) fn fill(
        &self,
        dst: vk::Buffer,
        offset: usize,
        value: u8,
        size: usize,
    ) -> Result<(), String> {
        if !offset.is_multiple_of(4) || !size.is_multiple_of(4) {
            return self.write(dst, offset, &vec![value; size]);
        }
        let word = u32::from_ne_bytes([value; 4]);
        self.submit(|g, st| {
            // SAFETY: offset and size are multiples of 4 inside the buffer.
            unsafe {
                g.device
                    .cmd_fill_buffer(st.cmd, dst, offset as u64, size as u64, word)
            };
            Ok(())
        })
    }

    /// A device-side copy between two buffers of this device.
    pub(crate) fn copy(
        &self,
        src: vk::Buffer,
        src_off: usize,
        dst: vk::Buffer,
        dst_off: usize,
        size: usize,
    ) -> Result<(), String> {
        let region = [vk::BufferCopy {
            src_offset: src_off as u64,
            dst_offset: dst_off as u64,
            size: size as u64,
        }];
        self.submit(|g, st| {
            // SAFETY: both buffers are valid and the regions are inside them.
            unsafe { g.device.cmd_copy_buffer(st.cmd, src, dst, &region) };
            Ok(())
        })
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        if self.lost_flag.load(Ordering::Acquire) {
            // waiting for idle could hang on a device that never finished: leak it instead
            return;
        }
        let s = self.stream.get_mut().unwrap_or_else(|e| e.into_inner());
        // SAFETY: nothing is in flight (every submission was waited for); objects are destroyed
        // once, the device last.
        unsafe {
            let _ = self.device.device_wait_idle();
            if let Some(st) = s.staging.take() {
                self.device.destroy_buffer(st.buffer, None);
                self.device.free_memory(st.memory, None);
            }
            self.device.destroy_fence(s.fence, None);
            self.device.destroy_command_pool(s.pool, None);
            self.pipelines.destroy(&self.device);
            self.device.destroy_device(None);
        }
    }
}
