//! The meta buffer type and buffer: a meta buffer is N real buffers. Compute buffers are N
//! buffers of the full size, a tensor's slice at the tensor's own offset in each; statically
//! allocated tensors (weights, caches) are packed per device, so each device holds only its
//! slices.

use super::rules::{MetaError, StaticSplitFn};
use super::slice::{for_each_run, slice_nbytes, slice_shape};
use super::split::SplitState;
use crate::backend::{BackendError, Buffer, BufferImpl, BufferType, BufferTypeRef, TensorIo};
use crate::context::Context;
use crate::tensor::{Tensor, TensorData, TensorId};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// The placeholder base of every meta buffer's address space (ggml uses a constant too): the
/// addresses are never dereferenced, only mapped to the devices' buffers.
const META_BASE: usize = 0x1000_0000_0000;

pub struct MetaBufferType {
    pub(crate) name: String,
    pub(crate) simple: Vec<BufferTypeRef>,
    pub(crate) split: Arc<StaticSplitFn>,
}

impl MetaBufferType {
    pub fn n(&self) -> usize {
        self.simple.len()
    }
    pub fn simple(&self) -> &[BufferTypeRef] {
        &self.simple
    }

    /// ggml_backend_meta_alloc_ctx_tensors_from_buft: each tensor's split from the callback,
    /// each device's buffer sized for its slices only. The tensors get addresses in the meta
    /// buffer's placeholder space.
    pub fn alloc_static(
        self: &Arc<Self>,
        ctx: &mut Context,
        ids: &[TensorId],
    ) -> Result<Arc<Buffer>, BackendError> {
        let n = self.n();
        let pad = |x: usize, a: usize| x.div_ceil(a.max(1)) * a.max(1);
        let mut states = Vec::with_capacity(ids.len());
        let mut dev_size = vec![0usize; n];
        for &id in ids {
            let s = (self.split)(&ctx[id]);
            for (j, sz) in dev_size.iter_mut().enumerate() {
                *sz += pad(slice_nbytes(&ctx[id], &s, j), self.simple[j].alignment());
            }
            states.push(s);
        }
        let mut bufs = Vec::with_capacity(n);
        for (j, b) in self.simple.iter().enumerate() {
            bufs.push(b.clone().alloc_buffer(dev_size[j])?);
        }
        let align = self.alignment();
        let mut statics = BTreeMap::new();
        let mut meta_off = 0usize;
        let mut dev_off = vec![0usize; n];
        for (&id, s) in ids.iter().zip(states) {
            let mut addrs = Vec::with_capacity(n);
            for j in 0..n {
                addrs.push(bufs[j].base() + dev_off[j]);
                dev_off[j] += pad(slice_nbytes(&ctx[id], &s, j), self.simple[j].alignment());
            }
            statics.insert(
                META_BASE + meta_off,
                StaticSlices {
                    state: s,
                    addrs,
                    layout: layout_of(&ctx[id]),
                },
            );
            meta_off += pad(ctx[id].nbytes(), align);
        }
        let buft: BufferTypeRef = self.clone();
        let imp = MetaBufferImpl {
            size: meta_off,
            bufs,
            statics: Mutex::new(statics),
            compute_states: Mutex::new(HashMap::new()),
        };
        let buffer = Arc::new(Buffer::new(buft, Box::new(imp)));
        let mut off = 0usize;
        for &id in ids {
            ctx[id].data = Some(TensorData {
                buffer: buffer.clone(),
                addr: META_BASE + off,
            });
            off += pad(ctx[id].nbytes(), align);
        }
        Ok(buffer)
    }
}

impl BufferType for MetaBufferType {
    fn name(&self) -> &str {
        &self.name
    }
    fn alloc_buffer(self: Arc<Self>, size: usize) -> Result<Arc<Buffer>, BackendError> {
        let mut bufs = Vec::with_capacity(self.n());
        for b in &self.simple {
            bufs.push(b.clone().alloc_buffer(size)?);
        }
        let imp = MetaBufferImpl {
            size,
            bufs,
            statics: Mutex::new(BTreeMap::new()),
            compute_states: Mutex::new(HashMap::new()),
        };
        Ok(Arc::new(Buffer::new(self, Box::new(imp))))
    }
    fn alignment(&self) -> usize {
        self.simple.iter().map(|b| b.alignment()).max().unwrap_or(1)
    }
    fn max_size(&self) -> usize {
        self.simple
            .iter()
            .map(|b| b.max_size())
            .min()
            .unwrap_or(usize::MAX)
    }
    fn alloc_size(&self, t: &Tensor) -> usize {
        self.simple
            .iter()
            .map(|b| b.alloc_size(t))
            .max()
            .unwrap_or(0)
    }
    fn is_host(&self) -> bool {
        // the memory is the devices'; nothing can address a meta tensor directly
        false
    }
}

/// A statically allocated tensor's split and where each device's slice is.
pub(crate) struct StaticSlices {
    pub state: SplitState,
    pub addrs: Vec<usize>,
    /// the tensor's shape and type, for writes by address (the loader's)
    pub layout: Tensor,
}

fn layout_of(t: &Tensor) -> Tensor {
    let mut x = Tensor::new(t.ty, t.ne);
    x.nb = t.nb;
    x.name = t.name.clone();
    x
}

pub struct MetaBufferImpl {
    size: usize,
    pub(crate) bufs: Vec<Arc<Buffer>>,
    /// statically allocated tensors by meta address
    statics: Mutex<BTreeMap<usize, StaticSlices>>,
    /// compute tensors' states as the meta backend last resolved them, by (address, name), so
    /// that reads of a graph's outputs know how to gather them
    compute_states: Mutex<HashMap<(usize, String), Placement>>,
}

/// A tensor's split and each device's address of its slice.
type Placement = (SplitState, Vec<usize>);

/// The devices' buffers of a meta buffer, by name and size (for the startup log); None for any
/// other buffer.
pub fn device_buffer_sizes(b: &Buffer) -> Option<Vec<(String, usize)>> {
    let m = b.tensor_io()?.as_any().downcast_ref::<MetaBufferImpl>()?;
    Some(
        m.bufs
            .iter()
            .map(|x| (x.name().to_string(), x.size()))
            .collect(),
    )
}

/// The size ggml reports for a buffer: a meta buffer's is its largest member's (what one device
/// holds), not the span of whole tensors it addresses.
pub fn reported_size(b: &Buffer) -> usize {
    device_buffer_sizes(b)
        .and_then(|v| v.into_iter().map(|(_, s)| s).max())
        .unwrap_or_else(|| b.size())
}

/// The meta buffer behind a tensor, if it is in one.
pub fn meta_buffer_of(t: &Tensor) -> Option<&MetaBufferImpl> {
    t.buffer()?
        .tensor_io()?
        .as_any()
        .downcast_ref::<MetaBufferImpl>()
}

impl MetaBufferImpl {
    pub fn n(&self) -> usize {
        self.bufs.len()
    }
    /// The devices' buffers.
    pub fn simple(&self) -> &[Arc<Buffer>] {
        &self.bufs
    }

    /// The split and per-device addresses of a statically allocated tensor at this address.
    pub(crate) fn static_at(&self, addr: usize) -> Option<(SplitState, Vec<usize>)> {
        let m = self.statics.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&addr).map(|s| (s.state.clone(), s.addrs.clone()))
    }

    /// Device j's address of a compute tensor at meta address `addr`.
    pub(crate) fn compute_addr(&self, addr: usize, j: usize) -> usize {
        self.bufs[j].base() + (addr - META_BASE)
    }

    pub(crate) fn clear_compute_states(&self) {
        let mut m = self
            .compute_states
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        m.clear();
    }

    /// A node's split and its slices' addresses as the plan placed them (a view of a static
    /// tensor lives inside that tensor's slices, not at the compute offset).
    pub(crate) fn record_compute_state(&self, t: &Tensor, s: &SplitState, addrs: Vec<usize>) {
        let mut m = self
            .compute_states
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        m.insert((t.addr(), t.name.clone()), (s.clone(), addrs));
    }

    /// How `t` is laid out over the devices, and each device's address of it: as the last plan
    /// placed it, as it was allocated (static tensors), or mirrored at its compute offset.
    fn placement(&self, t: &Tensor) -> (SplitState, Vec<usize>) {
        {
            let m = self
                .compute_states
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if let Some(p) = m.get(&(t.addr(), t.name.clone())) {
                return p.clone();
            }
        }
        if let Some(p) = self.static_at(t.addr()) {
            return p;
        }
        let n = self.n();
        let addrs = (0..n).map(|j| self.compute_addr(t.addr(), j)).collect();
        (SplitState::mirrored(), addrs)
    }

    /// Gathers a strided (viewed, permuted) split tensor element by element, each device's
    /// elements along the split axis going where its segments and repetitions put them; false
    /// where the layout is not one this can walk (blocks along the split, part reads).
    fn gather_strided(&self, t: &Tensor, s: &SplitState, addrs: &[usize], out: &mut [u8]) -> bool {
        let Some(d) = s.axis.dim() else {
            return false;
        };
        if t.ty.block_size() != 1 || out.len() != t.nbytes() || s.n_devices() != self.n() {
            return false;
        }
        let map = s.index_map();
        if map.iter().map(|m| m.len() as i64).sum::<i64>() != t.ne[d] {
            return false;
        }
        let ts = t.ty.type_size();
        for (j, buf) in self.bufs.iter().enumerate() {
            if s.count(j) == 0 {
                continue;
            }
            let (ne, nb) = slice_shape(t, s, j);
            let mut x = Tensor::new(t.ty, ne);
            x.nb = nb;
            let mut tmp = vec![0u8; x.nbytes()];
            if buf.get(addrs[j], &mut tmp).is_err() {
                return false;
            }
            for i3 in 0..ne[3] {
                for i2 in 0..ne[2] {
                    for i1 in 0..ne[1] {
                        for i0 in 0..ne[0] {
                            let i = [i0, i1, i2, i3];
                            let src: usize = (0..4).map(|k| i[k] as usize * nb[k]).sum();
                            let dst: usize = (0..4)
                                .map(|k| {
                                    let g = if k == d { map[j][i[k] as usize] } else { i[k] };
                                    g as usize * t.nb[k]
                                })
                                .sum();
                            out[dst..dst + ts].copy_from_slice(&tmp[src..src + ts]);
                        }
                    }
                }
            }
        }
        true
    }

    fn fail(&self, t: &Tensor, what: &str, s: &SplitState) -> BackendError {
        // a layout the loader or the graph should never produce
        BackendError::Other(
            MetaError(format!(
                "cannot {what} '{}' split as {s}: the counts do not cover it in whole blocks, or it is not contiguous",
                t.name
            ))
            .to_string(),
        )
    }
}

impl MetaBufferImpl {
    /// The static tensor whose bytes contain meta address `addr`, and the offset into it.
    fn static_containing(&self, addr: usize) -> Option<(SplitState, Vec<usize>, Tensor, usize)> {
        let m = self.statics.lock().unwrap_or_else(|e| e.into_inner());
        let (&key, e) = m.range(..=addr).next_back()?;
        (addr < key + e.layout.nbytes().max(1)).then(|| {
            (
                e.state.clone(),
                e.addrs.clone(),
                e.layout.clone(),
                addr - key,
            )
        })
    }

    fn write(
        &self,
        t: &Tensor,
        s: SplitState,
        addrs: Vec<usize>,
        data: &[u8],
        offset: usize,
    ) -> Result<(), BackendError> {
        if s.axis.dim().is_none() {
            for (j, (buf, &addr)) in self.bufs.iter().zip(&addrs).enumerate() {
                if s.is_partial() && j > 0 {
                    // the sum over devices is the value: the first device holds it all
                    buf.memset(addr + offset, 0, data.len())?;
                } else {
                    buf.set(addr + offset, data)?;
                }
            }
            return Ok(());
        }
        let end = offset + data.len();
        let mut r = Ok(());
        let ok = for_each_run(t, &s, self.n(), |j, full, so, len| {
            let (a, b) = (full.max(offset), (full + len).min(end));
            if a < b && r.is_ok() {
                r = self.bufs[j].set(addrs[j] + so + (a - full), &data[a - offset..b - offset]);
            }
        });
        if !ok {
            return Err(self.fail(t, "write", &s));
        }
        r
    }

    fn read(
        &self,
        t: &Tensor,
        s: SplitState,
        addrs: Vec<usize>,
        out: &mut [u8],
        offset: usize,
    ) -> Result<(), BackendError> {
        if s.is_mirrored() {
            return self.bufs[0].get(addrs[0] + offset, out);
        }
        if s.is_partial() {
            if t.ty != crate::Type::F32 {
                return Err(self.fail(t, "sum", &s));
            }
            let mut acc = vec![0f32; out.len() / 4];
            let mut tmp = vec![0u8; out.len()];
            for (buf, &addr) in self.bufs.iter().zip(&addrs) {
                buf.get(addr + offset, &mut tmp)?;
                for (a, c) in acc.iter_mut().zip(tmp.chunks_exact(4)) {
                    *a += f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
            }
            for (o, a) in out.chunks_exact_mut(4).zip(acc) {
                o.copy_from_slice(&a.to_le_bytes());
            }
            return Ok(());
        }
        if !t.is_contiguous() && offset == 0 && self.gather_strided(t, &s, &addrs, out) {
            return Ok(());
        }
        let end = offset + out.len();
        let mut r = Ok(());
        let ok = for_each_run(t, &s, self.n(), |j, full, so, len| {
            let (a, b) = (full.max(offset), (full + len).min(end));
            if a < b && r.is_ok() {
                r = self.bufs[j].get(addrs[j] + so + (a - full), &mut out[a - offset..b - offset]);
            }
        });
        if !ok {
            return Err(self.fail(t, "read", &s));
        }
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn fill(
        &self,
        t: &Tensor,
        s: SplitState,
        addrs: Vec<usize>,
        value: u8,
        offset: usize,
        size: usize,
    ) -> Result<(), BackendError> {
        if s.axis.dim().is_none() {
            for (buf, &addr) in self.bufs.iter().zip(&addrs) {
                buf.memset(addr + offset, value, size)?;
            }
            return Ok(());
        }
        let end = offset + size;
        let mut r = Ok(());
        let ok = for_each_run(t, &s, self.n(), |j, full, so, len| {
            let (a, b) = (full.max(offset), (full + len).min(end));
            if a < b && r.is_ok() {
                r = self.bufs[j].memset(addrs[j] + so + (a - full), value, b - a);
            }
        });
        if !ok {
            return Err(self.fail(t, "fill", &s));
        }
        r
    }
}

impl TensorIo for MetaBufferImpl {
    fn set_tensor(&self, t: &Tensor, data: &[u8], offset: usize) -> Result<(), BackendError> {
        let (s, addrs) = self.placement(t);
        self.write(t, s, addrs, data, offset)
    }
    fn get_tensor(&self, t: &Tensor, out: &mut [u8], offset: usize) -> Result<(), BackendError> {
        let (s, addrs) = self.placement(t);
        self.read(t, s, addrs, out, offset)
    }
    fn memset_tensor(
        &self,
        t: &Tensor,
        value: u8,
        offset: usize,
        size: usize,
    ) -> Result<(), BackendError> {
        let (s, addrs) = self.placement(t);
        self.fill(t, s, addrs, value, offset, size)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl BufferImpl for MetaBufferImpl {
    fn base(&self) -> usize {
        META_BASE
    }
    fn size(&self) -> usize {
        self.size
    }
    // Untyped access by address: inside a static tensor (the loader writes weights by address)
    // it goes to that tensor's slices; a compute buffer is seen as mirrored, written to every
    // device and read from the first.
    fn set(&self, addr: usize, data: &[u8]) -> Result<(), BackendError> {
        if let Some((s, addrs, t, off)) = self.static_containing(addr) {
            return self.write(&t, s, addrs, data, off);
        }
        for j in 0..self.n() {
            self.bufs[j].set(self.compute_addr(addr, j), data)?;
        }
        Ok(())
    }
    fn get(&self, addr: usize, out: &mut [u8]) -> Result<(), BackendError> {
        if let Some((s, addrs, t, off)) = self.static_containing(addr) {
            return self.read(&t, s, addrs, out, off);
        }
        self.bufs[0].get(self.compute_addr(addr, 0), out)
    }
    fn memset(&self, addr: usize, value: u8, size: usize) -> Result<(), BackendError> {
        if addr == META_BASE && size == self.size {
            for b in &self.bufs {
                b.clear(value)?;
            }
            return Ok(());
        }
        if let Some((s, addrs, t, off)) = self.static_containing(addr) {
            return self.fill(&t, s, addrs, value, off, size);
        }
        for j in 0..self.n() {
            self.bufs[j].memset(self.compute_addr(addr, j), value, size)?;
        }
        Ok(())
    }
    fn tensor_io(&self) -> Option<&dyn TensorIo> {
        Some(self)
    }
}
