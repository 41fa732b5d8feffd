//! The graph allocator (ggml_gallocr): one dynamic allocator per buffer type, a liveness
//! simulation over the nodes in execution order, then real buffers sized from the simulation.

use super::dyn_tallocr::{BufferAddress, DynTallocr};
use super::AllocError;
use crate::backend::{same_buft, Buffer, BufferTypeRef, BufferUsage};
use crate::context::Context;
use crate::graph::Graph;
use crate::tensor::{flags, TensorData, TensorId, MAX_SRC};
use std::sync::Arc;

/// What the simulation knows about one tensor (ggml's `hash_node`).
#[derive(Clone, Copy, Debug, Default)]
struct HashNode {
    n_children: i32,
    n_views: i32,
    buffer_id: usize,
    addr: BufferAddress,
    allocated: bool,
}

/// The planned place of one tensor; `buffer_id` None for views, external and absent tensors.
#[derive(Clone, Copy, Debug)]
struct TensorAlloc {
    buffer_id: Option<usize>,
    addr: BufferAddress,
    size_max: usize,
}

const NO_ALLOC: TensorAlloc = TensorAlloc {
    buffer_id: None,
    addr: BufferAddress {
        chunk: usize::MAX,
        offset: usize::MAX,
    },
    size_max: 0,
};

#[derive(Clone, Copy, Debug)]
struct NodeAlloc {
    dst: TensorAlloc,
    src: [TensorAlloc; MAX_SRC],
}

/// A virtual buffer: the backend buffers behind the chunks of one dynamic allocator.
struct VBuffer {
    chunks: Vec<Arc<Buffer>>,
}

impl VBuffer {
    fn size(&self) -> usize {
        self.chunks.iter().map(|b| b.size()).sum()
    }
    fn chunk_size(&self, c: usize) -> usize {
        self.chunks.get(c).map_or(0, |b| b.size())
    }
}

pub struct Gallocr {
    bufts: Vec<BufferTypeRef>,
    /// buffer id -> its dynamic allocator; buffer ids of the same buffer type share one
    talloc_of: Vec<usize>,
    tallocs: Vec<DynTallocr>,
    buffers: Vec<Option<Arc<VBuffer>>>,
    hash: Vec<HashNode>,
    node_allocs: Vec<NodeAlloc>,
    leaf_allocs: Vec<TensorAlloc>,
    valid: bool,
}

fn same_layout(ctx: &Context, a: TensorId, b: TensorId) -> bool {
    let (a, b) = (&ctx[a], &ctx[b]);
    a.ty == b.ty && a.ne == b.ne && a.nb == b.nb
}

impl Gallocr {
    /// One allocator per buffer type (ggml_gallocr_new).
    pub fn new(buft: BufferTypeRef) -> Gallocr {
        Gallocr::new_n(vec![buft])
    }

    /// One buffer id per entry of `bufts`; entries of the same buffer type share their memory.
    pub fn new_n(bufts: Vec<BufferTypeRef>) -> Gallocr {
        let mut talloc_of = Vec::with_capacity(bufts.len());
        let mut tallocs = Vec::new();
        for (i, b) in bufts.iter().enumerate() {
            match (0..i).find(|&j| same_buft(&bufts[j], b)) {
                Some(j) => talloc_of.push(talloc_of[j]),
                None => {
                    tallocs.push(DynTallocr::new(b.alignment(), b.max_size()));
                    talloc_of.push(tallocs.len() - 1);
                }
            }
        }
        let n = bufts.len();
        Gallocr {
            bufts,
            talloc_of,
            tallocs,
            buffers: vec![None; n],
            hash: Vec::new(),
            node_allocs: Vec::new(),
            leaf_allocs: Vec::new(),
            valid: false,
        }
    }

    pub fn n_buffers(&self) -> usize {
        self.bufts.len()
    }

    fn alloc_size(&self, ctx: &Context, buffer_id: usize, t: TensorId) -> usize {
        self.bufts[buffer_id].alloc_size(&ctx[t])
    }

    fn is_external(ctx: &Context, t: TensorId) -> bool {
        ctx[t].data.is_some()
    }

    fn is_own(&self, t: TensorId) -> bool {
        self.hash[t.index()].allocated
    }

    fn is_allocated(&self, ctx: &Context, t: TensorId) -> bool {
        Self::is_external(ctx, t) || self.is_own(t)
    }

    fn talloc(&mut self, buffer_id: usize) -> &mut DynTallocr {
        &mut self.tallocs[self.talloc_of[buffer_id]]
    }

    /// Gives back the tail of a parent whose memory a smaller node now occupies.
    fn free_extra_space(
        &mut self,
        ctx: &Context,
        node: TensorId,
        parent: TensorId,
    ) -> Result<(), AllocError> {
        let hn = self.hash[node.index()];
        let p_hn = self.hash[parent.index()];
        let parent_size = self.alloc_size(ctx, p_hn.buffer_id, parent);
        let node_size = self.alloc_size(ctx, hn.buffer_id, node);
        assert!(
            parent_size >= node_size,
            "in-place reuse of a smaller parent"
        );
        let talloc = self.talloc(p_hn.buffer_id);
        // the chunks stay aligned after the freeing
        let parent_size = super::dyn_tallocr::align_up(parent_size, talloc.alignment);
        let node_size = super::dyn_tallocr::align_up(node_size, talloc.alignment);
        if parent_size > node_size {
            let addr = BufferAddress {
                chunk: p_hn.addr.chunk,
                offset: p_hn.addr.offset + node_size,
            };
            talloc.free_bytes(addr, parent_size - node_size)?;
        }
        Ok(())
    }

    fn allocate_node(
        &mut self,
        ctx: &Context,
        node: TensorId,
        buffer_id: usize,
    ) -> Result<(), AllocError> {
        if self.is_allocated(ctx, node) || ctx[node].is_view() {
            return Ok(());
        }
        self.hash[node.index()].allocated = true;
        let t = &ctx[node];
        if t.op.can_inplace() {
            for parent in t.srcs() {
                // external memory and outputs are never reused
                if !self.is_own(parent) {
                    continue;
                }
                let p = &ctx[parent];
                if p.has_flag(flags::OUTPUT)
                    || p.view_src.is_some_and(|v| ctx[v].has_flag(flags::OUTPUT))
                {
                    continue;
                }
                if !same_layout(ctx, node, parent) {
                    continue;
                }
                let p_hn = self.hash[parent.index()];
                if p_hn.n_children == 1 && p_hn.n_views == 0 {
                    if let Some(view_src) = p.view_src {
                        let vs_hn = self.hash[view_src.index()];
                        if vs_hn.n_views == 1 && vs_hn.n_children == 0 && p.view_offs == 0 {
                            let hn = &mut self.hash[node.index()];
                            hn.buffer_id = p_hn.buffer_id;
                            hn.addr = p_hn.addr;
                            self.hash[parent.index()].allocated = false;
                            self.hash[view_src.index()].allocated = false;
                            return self.free_extra_space(ctx, node, view_src);
                        }
                    } else {
                        let hn = &mut self.hash[node.index()];
                        hn.buffer_id = p_hn.buffer_id;
                        hn.addr = p_hn.addr;
                        self.hash[parent.index()].allocated = false; // the node frees it now
                        return self.free_extra_space(ctx, node, parent);
                    }
                }
            }
        }
        let size = self.alloc_size(ctx, buffer_id, node);
        let addr = self.talloc(buffer_id).alloc(size, &ctx[node].name)?;
        let hn = &mut self.hash[node.index()];
        hn.buffer_id = buffer_id;
        hn.addr = addr;
        Ok(())
    }

    fn free_node(&mut self, ctx: &Context, node: TensorId) -> Result<(), AllocError> {
        // graph outputs are never freed
        if ctx[node].has_flag(flags::OUTPUT) {
            return Ok(());
        }
        let hn = self.hash[node.index()];
        let size = self.alloc_size(ctx, hn.buffer_id, node);
        self.talloc(hn.buffer_id).free_bytes(hn.addr, size)?;
        self.hash[node.index()].allocated = false;
        Ok(())
    }

    fn alloc_graph_impl(
        &mut self,
        ctx: &Context,
        nodes: &[TensorId],
        leafs: &[TensorId],
        node_ids: Option<&[usize]>,
        leaf_ids: Option<&[usize]>,
    ) -> Result<(), AllocError> {
        let nid = |i: usize| node_ids.map_or(0, |v| v[i]);
        let lid = |i: usize| leaf_ids.map_or(0, |v| v[i]);

        // leafs first: the application may want them allocated even when no node reads them
        for (i, &leaf) in leafs.iter().enumerate() {
            self.allocate_node(ctx, leaf, lid(i))?;
        }

        // count children and views; graph inputs are allocated before anything can overwrite them
        for (i, &node) in nodes.iter().enumerate() {
            let t = &ctx[node];
            // OP_NONE views are the scheduler's dependency markers, not real views
            if let (Some(vs), false) = (t.view_src, t.op.is_none()) {
                self.hash[vs.index()].n_views += 1;
            }
            if t.has_flag(flags::INPUT) {
                self.allocate_node(ctx, node, nid(i))?;
            }
            for src in t.srcs() {
                self.hash[src.index()].n_children += 1;
                if ctx[src].has_flag(flags::INPUT) {
                    self.allocate_node(ctx, src, nid(i))?;
                }
            }
        }

        for (i, &node) in nodes.iter().enumerate() {
            let buffer_id = nid(i);
            let srcs: Vec<TensorId> = ctx[node].srcs().collect();
            // only leafs can still be unallocated among the parents
            for &parent in &srcs {
                self.allocate_node(ctx, parent, buffer_id)?;
            }
            self.allocate_node(ctx, node, buffer_id)?;

            for &parent in &srcs {
                let p_hn = &mut self.hash[parent.index()];
                p_hn.n_children -= 1;
                if p_hn.n_children == 0 && p_hn.n_views == 0 {
                    if let Some(vs) = ctx[parent].view_src {
                        let vs_hn = &mut self.hash[vs.index()];
                        vs_hn.n_views -= 1;
                        if vs_hn.n_views == 0 && vs_hn.n_children == 0 && vs_hn.allocated {
                            self.free_node(ctx, vs)?;
                        }
                    } else if p_hn.allocated {
                        self.free_node(ctx, parent)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn tensor_alloc(&self, ctx: &Context, t: TensorId) -> TensorAlloc {
        if ctx[t].view_src.is_some() || Self::is_external(ctx, t) {
            return NO_ALLOC;
        }
        let hn = self.hash[t.index()];
        TensorAlloc {
            buffer_id: Some(hn.buffer_id),
            addr: hn.addr,
            size_max: self.alloc_size(ctx, hn.buffer_id, t),
        }
    }

    /// The simulation: plans every tensor's place and each chunk's size, allocates nothing.
    fn reserve_plan(
        &mut self,
        ctx: &Context,
        nodes: &[TensorId],
        leafs: &[TensorId],
        node_ids: Option<&[usize]>,
        leaf_ids: Option<&[usize]>,
    ) -> Result<(), AllocError> {
        self.valid = false;
        self.hash.clear();
        self.hash.resize(ctx.len(), HashNode::default());
        for t in &mut self.tallocs {
            t.reset();
        }
        self.alloc_graph_impl(ctx, nodes, leafs, node_ids, leaf_ids)?;

        self.node_allocs = nodes
            .iter()
            .map(|&node| {
                let mut na = NodeAlloc {
                    dst: self.tensor_alloc(ctx, node),
                    src: [NO_ALLOC; MAX_SRC],
                };
                for (j, s) in ctx[node].src.iter().enumerate() {
                    if let Some(s) = *s {
                        na.src[j] = self.tensor_alloc(ctx, s);
                    }
                }
                na
            })
            .collect();
        self.leaf_allocs = leafs.iter().map(|&l| self.tensor_alloc(ctx, l)).collect();
        self.valid = true;
        Ok(())
    }

    /// Reallocates the buffers that are smaller than the plan; with `no_alloc` they are only
    /// dropped (the next alloc_graph then asks for a reserve), as ggml's measure path does.
    fn reserve_buffers(&mut self, no_alloc: bool) -> Result<(), AllocError> {
        for i in 0..self.bufts.len() {
            // a buffer type used several times has one buffer
            if let Some(j) = (0..i).find(|&j| self.talloc_of[j] == self.talloc_of[i]) {
                self.buffers[i] = self.buffers[j].clone();
            }
            let talloc = &self.tallocs[self.talloc_of[i]];
            // even with no tensor the buffer exists, so views can be initialized
            let mut realloc = self.buffers[i].is_none();
            let mut new_size = 0;
            for c in 0..talloc.n_chunks() {
                let cur = self.buffers[i].as_ref().map_or(0, |b| b.chunk_size(c));
                let new = talloc.max_size(c);
                new_size += new;
                if new > cur {
                    realloc = true;
                }
            }
            if !realloc {
                continue;
            }
            self.buffers[i] = None;
            if no_alloc {
                continue;
            }
            let mut chunks = Vec::with_capacity(talloc.n_chunks());
            for c in 0..talloc.n_chunks() {
                match self.bufts[i].clone().alloc_buffer(talloc.max_size(c)) {
                    Ok(b) => {
                        b.set_usage(BufferUsage::Compute);
                        chunks.push(b);
                    }
                    Err(e) => {
                        crate::log_error!(
                            "{}: failed to allocate {} buffer of size {}\n",
                            "ggml_gallocr_reserve_n",
                            self.bufts[i].name(),
                            new_size
                        );
                        return Err(e.into());
                    }
                }
            }
            self.buffers[i] = Some(Arc::new(VBuffer { chunks }));
        }
        Ok(())
    }

    /// Plans the graph with a buffer id per node and leaf (all 0 when None) and (re)allocates the
    /// buffers that have grown (ggml_gallocr_reserve_n).
    pub fn reserve_n(
        &mut self,
        ctx: &Context,
        nodes: &[TensorId],
        leafs: &[TensorId],
        node_ids: Option<&[usize]>,
        leaf_ids: Option<&[usize]>,
    ) -> Result<(), AllocError> {
        self.reserve_plan(ctx, nodes, leafs, node_ids, leaf_ids)?;
        self.reserve_buffers(false)
    }

    /// The bytes each buffer id would need, without allocating (ggml_gallocr_reserve_n_size);
    /// ids sharing a buffer type each report the shared total, as ggml does.
    pub fn reserve_n_size(
        &mut self,
        ctx: &Context,
        nodes: &[TensorId],
        leafs: &[TensorId],
        node_ids: Option<&[usize]>,
        leaf_ids: Option<&[usize]>,
    ) -> Result<Vec<usize>, AllocError> {
        self.reserve_plan(ctx, nodes, leafs, node_ids, leaf_ids)?;
        self.reserve_buffers(true)?;
        Ok((0..self.bufts.len())
            .map(|i| self.planned_size(i))
            .collect())
    }

    /// Plans a whole graph in buffer 0.
    pub fn reserve(&mut self, g: &Graph) -> Result<(), AllocError> {
        self.reserve_n(&g.ctx, &g.nodes, &g.leafs, None, None)
    }

    fn node_valid(&self, ctx: &Context, t: TensorId, ta: &TensorAlloc) -> bool {
        let mut node_size = 0;
        if !Self::is_external(ctx, t) && ctx[t].view_src.is_none() {
            // it had memory from us before and has none now
            let Some(b) = ta.buffer_id else { return false };
            node_size = self.alloc_size(ctx, b, t);
        }
        ta.size_max >= node_size
    }

    fn needs_realloc(&self, ctx: &Context, nodes: &[TensorId], leafs: &[TensorId]) -> bool {
        if !self.valid || self.buffers.iter().any(|b| b.is_none()) {
            return true;
        }
        if self.node_allocs.len() != nodes.len() || self.leaf_allocs.len() != leafs.len() {
            return true;
        }
        for (i, &node) in nodes.iter().enumerate() {
            let na = &self.node_allocs[i];
            if !self.node_valid(ctx, node, &na.dst) {
                return true;
            }
            for (j, s) in ctx[node].src.iter().enumerate() {
                if let Some(s) = *s {
                    if !self.node_valid(ctx, s, &na.src[j]) {
                        return true;
                    }
                }
            }
        }
        false
    }

    fn init_tensor(&self, ctx: &mut Context, t: TensorId, ta: &TensorAlloc) -> bool {
        if let Some(vs) = ctx[t].view_src {
            if ctx[t].data.is_none() {
                // a view of memory nobody allocated stays unallocated, as in ggml
                if let Some(d) = ctx[vs].data.clone() {
                    let offs = ctx[t].view_offs;
                    ctx[t].data = Some(TensorData {
                        buffer: d.buffer.clone(),
                        addr: d.addr + offs,
                    });
                    return buffer_init_tensor(&d.buffer, &ctx[t]);
                }
            }
            return true;
        }
        if ctx[t].data.is_some() {
            return true;
        }
        let Some(b) = ta.buffer_id else { return false };
        let Some(vbuf) = self.buffers[b].as_ref() else {
            return false;
        };
        let size = self.alloc_size(ctx, b, t);
        assert!(
            size <= ta.size_max,
            "tensor {} grew since the graph was reserved",
            ctx[t].name
        );
        let Some(chunk) = vbuf.chunks.get(ta.addr.chunk) else {
            return false;
        };
        let addr = chunk.base() + ta.addr.offset;
        assert!(
            ta.addr.offset + size <= chunk.size(),
            "tensor {} planned past the end of its buffer",
            ctx[t].name
        );
        ctx[t].data = Some(TensorData {
            buffer: chunk.clone(),
            addr,
        });
        buffer_init_tensor(chunk, &ctx[t])
    }

    /// Gives every tensor of the graph its memory from the last plan; with a single buffer the
    /// plan is redone when the graph no longer fits, with several `false` asks for a reserve.
    pub fn alloc_graph_n(
        &mut self,
        ctx: &mut Context,
        nodes: &[TensorId],
        leafs: &[TensorId],
    ) -> bool {
        if self.needs_realloc(ctx, nodes, leafs) {
            if self.bufts.len() == 1 {
                if let Err(e) = self.reserve_n(ctx, nodes, leafs, None, None) {
                    crate::log_error!("{}: {}\n", "ggml_gallocr_alloc_graph", e);
                    return false;
                }
            } else {
                // several buffers cannot be re-planned without their buffer ids: reserve_n
                return false;
            }
        }
        for (i, &leaf) in leafs.iter().enumerate() {
            if !self.init_tensor(ctx, leaf, &self.leaf_allocs[i]) {
                return false;
            }
        }
        for (i, &node) in nodes.iter().enumerate() {
            let na = self.node_allocs[i];
            for (j, s) in ctx[node].src.into_iter().enumerate() {
                if let Some(s) = s {
                    if !self.init_tensor(ctx, s, &na.src[j]) {
                        return false;
                    }
                }
            }
            if !self.init_tensor(ctx, node, &na.dst) {
                return false;
            }
        }
        true
    }

    pub fn alloc_graph(&mut self, g: &mut Graph) -> bool {
        let (nodes, leafs) = (std::mem::take(&mut g.nodes), std::mem::take(&mut g.leafs));
        let ok = self.alloc_graph_n(&mut g.ctx, &nodes, &leafs);
        g.nodes = nodes;
        g.leafs = leafs;
        ok
    }

    /// Bytes of buffer id `i` (0 when its buffer type was already counted for a lower id).
    pub fn get_buffer_size(&self, i: usize) -> usize {
        let Some(b) = self.buffers[i].as_ref() else {
            return 0;
        };
        if (0..i).any(|j| self.buffers[j].as_ref().is_some_and(|o| Arc::ptr_eq(o, b))) {
            return 0;
        }
        b.size()
    }

    /// The bytes the last plan needs for buffer id `i`, whether or not buffers were allocated.
    pub fn planned_size(&self, i: usize) -> usize {
        let t = &self.tallocs[self.talloc_of[i]];
        (0..t.n_chunks()).map(|c| t.max_size(c)).sum()
    }

    pub fn buffer_type(&self, i: usize) -> &BufferTypeRef {
        &self.bufts[i]
    }
}

/// The buffer's init_tensor hook; a failure is logged and fails the allocation.
fn buffer_init_tensor(buf: &crate::backend::Buffer, t: &crate::tensor::Tensor) -> bool {
    match buf.init_tensor(t) {
        Ok(()) => true,
        Err(e) => {
            crate::log_error!("ggml_gallocr_init_tensor: {}: {}\n", t.name, e);
            false
        }
    }
}
