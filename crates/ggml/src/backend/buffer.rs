//! Buffer types and buffers. A buffer is a range of memory with a base address; tensors point
//! into it with absolute addresses, as ggml's `data` pointers do.

use crate::tensor::Tensor;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use super::BackendError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferUsage {
    Any = 0,
    Weights = 1,
    Compute = 2,
}

pub trait BufferType: Send + Sync {
    fn name(&self) -> &str;
    fn alloc_buffer(self: Arc<Self>, size: usize) -> Result<Arc<Buffer>, BackendError>;
    fn alignment(&self) -> usize;
    fn max_size(&self) -> usize {
        usize::MAX
    }
    /// Bytes a tensor needs in this buffer type (padding for some backends).
    fn alloc_size(&self, t: &Tensor) -> usize {
        t.nbytes()
    }
    fn is_host(&self) -> bool;
}

pub type BufferTypeRef = Arc<dyn BufferType>;

/// Buffer types are singletons compared by identity, as ggml compares pointers.
pub fn same_buft(a: &BufferTypeRef, b: &BufferTypeRef) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

/// The memory behind a buffer (ggml_backend_buffer_i). Transfers return the device's error
/// (a lost device, a failed staging map) instead of logging it.
pub trait BufferImpl: Send + Sync {
    fn base(&self) -> usize;
    fn size(&self) -> usize;
    fn set(&self, addr: usize, data: &[u8]) -> Result<(), BackendError>;
    fn get(&self, addr: usize, out: &mut [u8]) -> Result<(), BackendError>;
    fn memset(&self, addr: usize, value: u8, size: usize) -> Result<(), BackendError>;
    /// Called once for each tensor (views included) the allocators place in this buffer, after
    /// its address is set (ggml_backend_buffer_init_tensor): a backend that keeps per-tensor
    /// state or must clear padding does it here.
    fn init_tensor(&self, _t: &Tensor) -> Result<(), BackendError> {
        Ok(())
    }
    /// Copy `src` (any buffer) into `dst` (a tensor of this buffer) without the host, where
    /// the backend can (ggml_backend_buffer_i::cpy_tensor); Ok(false) declines and the caller
    /// copies through the host.
    fn cpy_tensor(&self, _src: &Tensor, _dst: &Tensor) -> Result<bool, BackendError> {
        Ok(false)
    }
    /// Tensor-level access for memory whose layout depends on the tensor (the meta device's
    /// buffers hold each tensor as N slices); None for plain memory.
    fn tensor_io(&self) -> Option<&dyn TensorIo> {
        None
    }
    /// The implementation itself, for a backend that must reach its own buffers' handles (a
    /// GPU buffer's device memory); None for memory any backend reads by address.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// Reads and writes of whole tensors, for buffers that cannot serve them by address alone.
pub trait TensorIo: Send + Sync {
    fn set_tensor(&self, t: &Tensor, data: &[u8], offset: usize) -> Result<(), BackendError>;
    fn get_tensor(&self, t: &Tensor, out: &mut [u8], offset: usize) -> Result<(), BackendError>;
    fn memset_tensor(
        &self,
        t: &Tensor,
        value: u8,
        offset: usize,
        size: usize,
    ) -> Result<(), BackendError>;
    fn as_any(&self) -> &dyn std::any::Any;
}

pub struct Buffer {
    buft: BufferTypeRef,
    imp: Box<dyn BufferImpl>,
    usage: AtomicU8,
}

impl Buffer {
    pub fn new(buft: BufferTypeRef, imp: Box<dyn BufferImpl>) -> Buffer {
        Buffer {
            buft,
            imp,
            usage: AtomicU8::new(BufferUsage::Any as u8),
        }
    }
    pub fn name(&self) -> &str {
        self.buft.name()
    }
    pub fn buft(&self) -> &BufferTypeRef {
        &self.buft
    }
    pub fn base(&self) -> usize {
        self.imp.base()
    }
    pub fn size(&self) -> usize {
        self.imp.size()
    }
    pub fn is_host(&self) -> bool {
        self.buft.is_host()
    }
    pub fn usage(&self) -> BufferUsage {
        match self.usage.load(Ordering::Relaxed) {
            1 => BufferUsage::Weights,
            2 => BufferUsage::Compute,
            _ => BufferUsage::Any,
        }
    }
    pub fn set_usage(&self, u: BufferUsage) {
        self.usage.store(u as u8, Ordering::Relaxed)
    }
    fn check(&self, addr: usize, len: usize) -> Result<(), BackendError> {
        let (base, size) = (self.base(), self.size());
        if !range_inside(base, size, addr, len) {
            return Err(BackendError::Other(format!(
                "access of {len} bytes at {addr:#x} outside buffer {} [{base:#x}, +{size})",
                self.name()
            )));
        }
        Ok(())
    }
    pub fn set(&self, addr: usize, data: &[u8]) -> Result<(), BackendError> {
        self.check(addr, data.len())?;
        self.imp.set(addr, data)
    }
    pub fn get(&self, addr: usize, out: &mut [u8]) -> Result<(), BackendError> {
        self.check(addr, out.len())?;
        self.imp.get(addr, out)
    }
    pub fn memset(&self, addr: usize, value: u8, size: usize) -> Result<(), BackendError> {
        self.check(addr, size)?;
        self.imp.memset(addr, value, size)
    }
    /// The buffer's hook for a tensor just placed in it (see [`BufferImpl::init_tensor`]).
    pub fn init_tensor(&self, t: &Tensor) -> Result<(), BackendError> {
        self.imp.init_tensor(t)
    }
    /// A copy into `dst` (a tensor of this buffer) by the buffer itself; Ok(false) when it
    /// cannot, and the caller goes through the host.
    pub fn cpy_tensor(&self, src: &Tensor, dst: &Tensor) -> Result<bool, BackendError> {
        self.imp.cpy_tensor(src, dst)
    }
    pub fn tensor_io(&self) -> Option<&dyn TensorIo> {
        self.imp.tensor_io()
    }
    pub fn imp_any(&self) -> Option<&dyn std::any::Any> {
        self.imp.as_any()
    }
    pub fn clear(&self, value: u8) -> Result<(), BackendError> {
        self.imp.memset(self.base(), value, self.size())
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer({}, {} bytes)", self.name(), self.size())
    }
}

/// Whether `len` bytes at `addr` lie inside the `size` bytes at `base`.
pub fn range_inside(base: usize, size: usize, addr: usize, len: usize) -> bool {
    addr >= base && addr.checked_add(len).is_some_and(|e| e <= base + size)
}

/// Host memory owned by the buffer (64-byte aligned), or borrowed host memory that some owner
/// (a memory map) keeps alive for the buffer's lifetime.
pub struct HostBuffer {
    ptr: usize,
    size: usize,
    owned: Option<std::alloc::Layout>,
    _keep: Option<Arc<dyn Send + Sync>>,
}

pub const HOST_ALIGN: usize = 64;
const ANON_MAP_MIN: usize = 1 << 20;

impl HostBuffer {
    pub fn alloc(size: usize) -> Option<HostBuffer> {
        // Large buffers (compute buffers of hundreds of MiB) come from an anonymous map: the
        // kernel hands out zero pages lazily, where an aligned alloc_zeroed would memset every
        // page up front and make context creation slow.
        if size >= ANON_MAP_MIN {
            let mut map = memmap2::MmapMut::map_anon(size).ok()?;
            // 2 MiB pages where the kernel leaves them to madvise (THP "madvise"): the weights a
            // token streams through once (CPU_REPACK's copies) cross a 4 KiB page every few
            // blocks, each a TLB miss and a new start for the hardware prefetcher. A hint: a
            // kernel without it maps small pages as before.
            #[cfg(target_os = "linux")]
            let _ = map.advise(memmap2::Advice::HugePage);
            let ptr = map.as_mut_ptr() as usize;
            return Some(HostBuffer {
                ptr,
                size,
                owned: None,
                _keep: Some(Arc::new(map)),
            });
        }
        let layout = std::alloc::Layout::from_size_align(size.max(1), HOST_ALIGN).ok()?;
        // SAFETY: the layout has a non-zero size; zeroed memory makes fresh buffers deterministic.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return None;
        }
        Some(HostBuffer {
            ptr: ptr as usize,
            size,
            owned: Some(layout),
            _keep: None,
        })
    }
    /// `alloc` for a buffer that is written whole right after (CPU_REPACK's weights): its
    /// pages faulted in up front from several threads at once (`in_parts`). A huge page's first
    /// touch zeroes 2 MiB, and in a virtual machine whose host takes freed memory back it also
    /// waits for the host to back it again: on a 2-core VM, 600 MiB of fresh huge pages took
    /// 0.85-1.32 s to touch from one thread and 0.40-0.55 s from two (4 KiB pages 0.25-0.28
    /// s); the 1.1B q4_0 shape's load (its 519 MiB CPU_REPACK copy) went from 1.20-1.50 to
    /// 0.80-1.09 s.
    pub fn alloc_populated(size: usize) -> Option<HostBuffer> {
        const PAGE: usize = 4096;
        let buf = HostBuffer::alloc(size)?;
        if buf.owned.is_none() {
            in_parts(buf.ptr, buf.size, |a, b| {
                let mut at = a.next_multiple_of(PAGE);
                while at < b {
                    // SAFETY: the page lies inside the writable anonymous map just made, which
                    // no one else has yet; it holds zeros, and writing a zero byte leaves it so.
                    unsafe { std::ptr::write_volatile(at as *mut u8, 0) };
                    at += PAGE;
                }
            });
        }
        Some(buf)
    }
    /// Borrow `size` bytes at `ptr`; `keep` owns that memory and outlives the buffer.
    ///
    /// # Safety
    /// `ptr..ptr+size` must stay valid and writable-or-unwritten while `keep` is alive.
    pub unsafe fn from_raw(ptr: usize, size: usize, keep: Arc<dyn Send + Sync>) -> HostBuffer {
        HostBuffer {
            ptr,
            size,
            owned: None,
            _keep: Some(keep),
        }
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        if let Some(layout) = self.owned {
            // SAFETY: ptr came from alloc_zeroed with this layout and is freed once.
            unsafe { std::alloc::dealloc(self.ptr as *mut u8, layout) };
        }
    }
}

impl BufferImpl for HostBuffer {
    fn base(&self) -> usize {
        self.ptr
    }
    fn size(&self) -> usize {
        self.size
    }
    fn set(&self, addr: usize, data: &[u8]) -> Result<(), BackendError> {
        // SAFETY: Buffer::set bounds-checked addr..addr+len against this allocation.
        unsafe { std::ptr::copy(data.as_ptr(), addr as *mut u8, data.len()) };
        Ok(())
    }
    fn get(&self, addr: usize, out: &mut [u8]) -> Result<(), BackendError> {
        // SAFETY: Buffer::get bounds-checked addr..addr+len against this allocation.
        unsafe { std::ptr::copy(addr as *const u8, out.as_mut_ptr(), out.len()) };
        Ok(())
    }
    fn memset(&self, addr: usize, value: u8, size: usize) -> Result<(), BackendError> {
        // (a KV cache's clear is the first touch of its pages: from every core, as in
        // alloc_populated)
        in_parts(addr, size, |a, b| {
            // SAFETY: Buffer::memset bounds-checked addr..addr + size, and a..b lies inside it;
            // the parts do not overlap.
            unsafe { std::ptr::write_bytes(a as *mut u8, value, b - a) };
        });
        Ok(())
    }
}

/// Runs `f` over `addr..addr + size` split into one part per core (up to 8), each on its own
/// thread, where the range is large enough (8 MiB) for that to pay; in one call otherwise.
fn in_parts(addr: usize, size: usize, f: impl Fn(usize, usize) + Sync) {
    const MIN: usize = 8 << 20;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    if threads < 2 || size < MIN {
        f(addr, addr + size);
        return;
    }
    let per = size.div_ceil(threads).next_multiple_of(4096);
    std::thread::scope(|s| {
        let f = &f;
        for t in 0..threads {
            let (a, b) = (
                (addr + t * per).min(addr + size),
                (addr + (t + 1) * per).min(addr + size),
            );
            // a part whose thread cannot start runs here
            let started = a < b
                && std::thread::Builder::new()
                    .spawn_scoped(s, move || f(a, b))
                    .is_ok();
            if !started && a < b {
                f(a, b);
            }
        }
    });
}

/// A plain host-memory buffer type (the CPU backend's "CPU", and test backends' memory).
pub struct HostBufferType {
    pub name: String,
    pub alignment: usize,
    pub max_size: usize,
}

impl BufferType for HostBufferType {
    fn name(&self) -> &str {
        &self.name
    }
    fn alloc_buffer(self: Arc<Self>, size: usize) -> Result<Arc<Buffer>, BackendError> {
        let mem = HostBuffer::alloc(size).ok_or_else(|| BackendError::Alloc {
            buft: self.name.clone(),
            size,
            reason: "out of memory".into(),
        })?;
        Ok(Arc::new(Buffer::new(self, Box::new(mem))))
    }
    fn alignment(&self) -> usize {
        self.alignment
    }
    fn max_size(&self) -> usize {
        self.max_size
    }
    fn is_host(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::{BufferImpl, HostBuffer};

    /// A buffer faulted in from several threads reads as zeros; memsets large enough to be
    /// split (and ranges that start and end off a page) set exactly their bytes.
    #[test]
    fn populated_buffers_and_split_memsets() {
        let size = (24 << 20) + 1000;
        let buf = HostBuffer::alloc_populated(size).unwrap();
        let bytes = |b: &HostBuffer| {
            // SAFETY: the buffer owns size readable bytes at its base.
            unsafe { std::slice::from_raw_parts(b.base() as *const u8, b.size()) }.to_vec()
        };
        assert!(bytes(&buf).iter().all(|&x| x == 0));
        let (a, n) = (4093, (17 << 20) + 5);
        buf.memset(buf.base() + a, 0xA5, n).unwrap();
        let got = bytes(&buf);
        assert!(got[..a].iter().all(|&x| x == 0));
        assert!(got[a..a + n].iter().all(|&x| x == 0xA5));
        assert!(got[a + n..].iter().all(|&x| x == 0));
        buf.memset(buf.base(), 7, size).unwrap();
        assert!(bytes(&buf).iter().all(|&x| x == 7));
        // a small buffer (heap, not a map) stays as it was
        let small = HostBuffer::alloc_populated(1000).unwrap();
        assert!(bytes(&small).iter().all(|&x| x == 0));
    }
}
