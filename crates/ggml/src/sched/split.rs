//! ggml_backend_sched_split_graph: the five passes that give every node a backend, the cut into
//! splits with their input copies (rewriting the caller's graph in place), and the flattened
//! graph copy with its input_dep / input_cpy nodes that the allocator plans.

use super::{Sched, SchedError, Split, MAX_SPLIT_INPUTS};
use crate::backend::BufferUsage;
use crate::context::Context;
use crate::graph::Graph;
use crate::tensor::{flags, TensorId, MAX_SRC};

impl Sched {
    /// ggml_backend_sched_backend_from_buffer: the highest-priority backend that can read the
    /// buffer type `tensor` lives in and run `op`.
    fn backend_from_buffer(&self, ctx: &Context, tensor: TensorId, op: TensorId) -> Option<usize> {
        let t = &ctx[tensor];
        let buffer = match t.view_src {
            Some(vs) => ctx[vs].buffer()?,
            None => t.buffer()?,
        };
        (0..self.backends.len()).find(|&i| {
            self.devs[i].supports_buft(buffer.buft()) && self.devs[i].supports_op(ctx, op)
        })
    }

    /// Pass 1 for one tensor: is its placement already decided?
    fn backend_id_from_cur(&mut self, ctx: &Context, id: TensorId) -> Result<i32, SchedError> {
        let t = &ctx[id];
        if let Some(b) = self.backend_from_buffer(ctx, id, id) {
            self.set_cause(id, "1.dst");
            return Ok(b as i32);
        }
        if let Some(vs) = t.view_src {
            if let Some(b) = self.backend_from_buffer(ctx, vs, id) {
                self.set_cause(id, "1.vsrc");
                return Ok(b as i32);
            }
        }
        let pre = match t.view_src {
            Some(vs) => ctx[vs].buffer(),
            None => t.buffer(),
        };
        if let Some(buffer) = pre {
            // a pre-allocated tensor cannot move to another backend
            return Err(SchedError::PreAllocated {
                tensor: t.name.clone(),
                buffer: buffer.name().to_string(),
                op: t.op.name(),
            });
        }
        if t.has_flag(flags::INPUT) {
            self.set_cause(id, "1.inp");
            return Ok(self.backends.len() as i32 - 1);
        }
        // ROPE's frequency factors and FLASH_ATTN_EXT's sinks are too small to decide placement
        let allow = !matches!(t.op, crate::Op::Rope(_) | crate::Op::FlashAttnExt { .. });
        if allow {
            for (i, src) in t.src.iter().enumerate() {
                let Some(src) = *src else { continue };
                let Some(buf) = ctx[src].buffer() else {
                    continue;
                };
                if buf.usage() != BufferUsage::Weights {
                    continue;
                }
                let src_backend = self
                    .backend_from_buffer(ctx, src, id)
                    .map_or(-1, |b| b as i32);
                let last = self.backends.len() as i32 - 1;
                // a higher-priority backend may want to run an op on a host weight anyway
                if self.op_offload && src_backend == last && buf.is_host() {
                    for b in 0..last as usize {
                        if self.devs[b].supports_op(ctx, id) && self.devs[b].offload_op(ctx, id) {
                            self.set_cause(id, "1.off");
                            return Ok(b as i32);
                        }
                    }
                }
                const WGT: [&str; MAX_SRC] = [
                    "1.wgt0", "1.wgt1", "1.wgt2", "1.wgt3", "1.wgt4", "1.wgt5", "1.wgt6", "1.wgt7",
                    "1.wgt8", "1.wgt9",
                ];
                self.set_cause(id, WGT[i]);
                return Ok(src_backend);
            }
        }
        Ok(-1)
    }

    /// ggml_backend_sched_buffer_supported: can `backend` read `t` where it is (or will be)?
    pub(super) fn buffer_supported(&self, ctx: &Context, t: TensorId, backend: usize) -> bool {
        let tensor = &ctx[t];
        let buf = match tensor.view_src {
            Some(vs) => ctx[vs].buffer(),
            None => tensor.buffer(),
        };
        let buft = match buf {
            Some(b) => Some(b.buft().clone()),
            None => {
                let mut id = self.bid(t);
                if id == -1 {
                    if let Some(vs) = tensor.view_src {
                        id = self.bid(vs);
                    }
                }
                (id != -1).then(|| self.bufts[id as usize].clone())
            }
        };
        buft.is_some_and(|b| self.devs[backend].supports_buft(&b))
    }

    fn set_if_supported(&mut self, ctx: &Context, node: TensorId, backend: usize) {
        if self.devs[backend].supports_op(ctx, node) {
            self.set_bid(node, backend as i32);
            self.set_cause(node, "2.sup");
        }
    }

    /// Pass 2: one sweep carrying a backend along; `gpu_only` sweeps drop the CPU (last backend)
    /// instead of spreading it, so the CPU only gets what no GPU sweep reached.
    fn expand(&mut self, ctx: &Context, nodes: &[TensorId], forward: bool, gpu_only: bool) {
        let last = self.backends.len() as i32 - 1;
        let mut cur = -1i32;
        let order: Box<dyn Iterator<Item = &TensorId>> = if forward {
            Box::new(nodes.iter())
        } else {
            Box::new(nodes.iter().rev())
        };
        for &node in order {
            if ctx[node].op.is_view() {
                continue;
            }
            let b = self.bid(node);
            if b != -1 {
                cur = if gpu_only && b == last { -1 } else { b };
            } else if cur != -1 {
                self.set_if_supported(ctx, node, cur as usize);
            }
        }
    }

    /// Pass 3: upgrade assigned nodes to a higher-priority backend with the same buffer type;
    /// give unassigned nodes (refused during expansion) the backend that reads most of their
    /// sources without a copy.
    fn upgrade_and_guess(&mut self, ctx: &Context, nodes: &[TensorId]) {
        for &node in nodes {
            if ctx[node].op.is_view() {
                continue;
            }
            let cur = self.bid(node);
            if cur == -1 {
                let mut best = -1i32;
                for b in 0..self.backends.len() {
                    if !self.devs[b].supports_op(ctx, node) {
                        continue;
                    }
                    let n = ctx[node]
                        .srcs()
                        .filter(|&s| {
                            let assigned = self.bid(s) != -1
                                || ctx[s].view_src.is_some_and(|v| self.bid(v) != -1);
                            assigned && self.buffer_supported(ctx, s, b)
                        })
                        .count() as i32;
                    if n > best {
                        best = n;
                        self.set_bid(node, b as i32);
                        self.set_cause(node, "3.best");
                    }
                }
            } else {
                let cur = cur as usize;
                for b in 0..cur {
                    if crate::backend::same_buft(&self.bufts[b], &self.bufts[cur])
                        && self.devs[b].supports_op(ctx, node)
                        && ctx[node].srcs().all(|s| self.buffer_supported(ctx, s, b))
                    {
                        self.set_bid(node, b as i32);
                        self.set_cause(node, "3.upg");
                        break;
                    }
                }
            }
        }
    }

    /// Pass 4: views follow their source, other sources follow their consumer; a node still
    /// unassigned takes the first backend that supports it.
    fn assign_sources(&mut self, ctx: &Context, nodes: &[TensorId]) -> Result<(), SchedError> {
        for &node in nodes {
            if let Some(vs) = ctx[node].view_src {
                if self.bid(node) == -1 {
                    let b = self.bid(vs);
                    self.set_bid(node, b);
                    self.set_cause(node, "4.vsrc");
                }
            }
            let cur = self.bid(node);
            for src in ctx[node].srcs() {
                if self.bid(src) == -1 {
                    if let Some(vs) = ctx[src].view_src {
                        // views are always on the same backend as their source
                        let b = self.bid(vs);
                        self.set_bid(src, b);
                        self.set_cause(src, "4.vsrc");
                    } else {
                        self.set_bid(src, cur);
                        self.set_cause(src, "4.cur");
                    }
                }
            }
            for b in 0..self.backends.len() {
                if self.bid(node) != -1 {
                    break;
                }
                self.set_if_supported(ctx, node, b);
            }
            if self.bid(node) == -1 {
                return Err(SchedError::Unassigned {
                    node: ctx[node].name.clone(),
                    op: ctx[node].op.desc(),
                });
            }
        }
        Ok(())
    }

    /// A copy of `src` with the same layout, named `<backend>#<name>#<copy>`.
    fn new_copy(&self, ctx: &mut Context, src: TensorId, backend: usize, c: usize) -> TensorId {
        let t = ctx.dup_tensor(src);
        ctx[t].nb = ctx[src].nb;
        let name = format!("{}#{}#{}", self.backends[backend].name(), ctx[src].name, c);
        ctx[t].set_name(&name);
        t
    }

    /// Pass 5: cut the node list into splits and create the copies of foreign inputs.
    fn cut_splits(&mut self, g: &mut Graph) -> Result<(), SchedError> {
        let n_nodes = g.nodes.len();
        let first = g
            .nodes
            .iter()
            .position(|&n| !g.ctx[n].op.is_view())
            .unwrap_or(n_nodes);
        let first_backend = if first < n_nodes {
            self.bid(g.nodes[first])
        } else {
            self.backends.len() as i32 - 1
        };
        let mut i_split = 0usize;
        self.split_slot(0);
        self.splits[0].backend_id = first_backend.max(0) as usize;
        self.splits[0].i_start = 0;
        self.splits[0].inputs.clear();
        let mut cur = first_backend;

        for i in first..n_nodes {
            let node = g.nodes[i];
            if g.ctx[node].op.is_view() {
                continue;
            }
            let node_backend = self.bid(node);
            if node_backend == -1 {
                // all nodes should be assigned by now; this can happen if there is no CPU fallback
                return Err(SchedError::Unassigned {
                    node: g.ctx[node].name.clone(),
                    op: g.ctx[node].op.desc(),
                });
            }

            let mut need_new_split = false;
            let split = &self.splits[i_split];
            if node_backend == cur && !split.inputs.is_empty() {
                for src in g.ctx[node].srcs() {
                    // a weight of an incompatible backend: a new split lets the allocator reuse
                    // the staging memory of the previous split's weights
                    if let Some(buf) = g.ctx[src].buffer() {
                        if buf.usage() == BufferUsage::Weights {
                            let sb = self.bid(src);
                            if sb != cur && !self.buffer_supported(&g.ctx, src, cur as usize) {
                                need_new_split = true;
                                break;
                            }
                        }
                    }
                    // FIXME (as ggml): counts only when the input list is already full
                    if split.inputs.len() >= split.inputs_capacity {
                        let sb = self.bid(src);
                        let supported = self.buffer_supported(&g.ctx, src, cur as usize);
                        if sb != cur && self.copy_of(src, cur as usize, 0).is_none() && !supported {
                            need_new_split = true;
                            break;
                        }
                    }
                }
            }

            if node_backend != cur || need_new_split {
                self.splits[i_split].i_end = i;
                i_split += 1;
                self.split_slot(i_split);
                let s = &mut self.splits[i_split];
                s.backend_id = node_backend as usize;
                s.i_start = i;
                s.inputs.clear();
                cur = node_backend;
            }

            for j in 0..MAX_SRC {
                let Some(src) = g.ctx[node].src[j] else {
                    continue;
                };
                let src_backend = self.bid(src);
                if src_backend == -1 {
                    return Err(SchedError::Unassigned {
                        node: g.ctx[src].name.clone(),
                        op: g.ctx[src].op.desc(),
                    });
                }
                let src_backend = src_backend as usize;

                if g.ctx[src].has_flag(flags::INPUT)
                    && self.n_copies > 1
                    && self.copy_of(src, src_backend, 0).is_none()
                {
                    for c in 0..self.n_copies {
                        let t = if c == self.cur_copy {
                            src
                        } else {
                            self.new_copy(&mut g.ctx, src, src_backend, c)
                        };
                        // inputs and outputs so the allocator never overwrites them
                        g.ctx[t].flags |= flags::INPUT | flags::OUTPUT;
                        self.set_copy(src, src_backend, c, t);
                        self.set_cause(t, "4.cpy");
                    }
                    if self.graph_inputs.len() >= self.graph_inputs_capacity {
                        self.graph_inputs_grow();
                    }
                    self.graph_inputs.push(src);
                }

                if src_backend as i32 != cur && !self.buffer_supported(&g.ctx, src, cur as usize) {
                    let cb = cur as usize;
                    if self.copy_of(src, cb, 0).is_none() {
                        for c in 0..self.n_copies {
                            let t = self.new_copy(&mut g.ctx, src, cb, c);
                            if self.n_copies > 1 {
                                g.ctx[t].flags |= flags::INPUT | flags::OUTPUT;
                            }
                            self.set_copy(src, cb, c, t);
                            self.set_cause(t, "4.cpy");
                        }
                        let split = &mut self.splits[i_split];
                        if split.inputs.len() >= split.inputs_capacity {
                            split.grow_inputs();
                        }
                        split.inputs.push(src);
                    }
                    // the caller's graph now reads the local replica
                    g.ctx[node].src[j] = self.copy_of(src, cb, self.cur_copy);
                }
            }
        }
        self.splits[i_split].i_end = n_nodes;
        self.n_splits = i_split + 1;
        Ok(())
    }

    fn split_slot(&mut self, i: usize) {
        while self.splits.len() <= i {
            self.splits.push(Split::default());
        }
    }

    fn graph_inputs_grow(&mut self) {
        let new_cap = if self.graph_inputs_capacity > 0 {
            2 * self.graph_inputs_capacity
        } else {
            MAX_SPLIT_INPUTS
        };
        if self.graph_inputs_capacity > 0 {
            crate::log_warn!(
                "{}: increasing graph inputs capacity from {} to {}\n",
                "ggml_backend_sched_graph_inputs_grow",
                self.graph_inputs_capacity,
                new_cap
            );
        }
        self.graph_inputs_capacity = new_cap;
    }

    /// Lets each split's backend reorder its nodes (graph_optimize) before the graph copy is
    /// built from them, so both stay in sync.
    fn optimize_splits(&mut self, g: &mut Graph) {
        let mut shift: isize = 0;
        for s in 0..self.n_splits {
            let (start, end) = (
                (self.splits[s].i_start as isize + shift) as usize,
                (self.splits[s].i_end as isize + shift) as usize,
            );
            let mut nodes = g.nodes[start..end].to_vec();
            let backend = self.splits[s].backend_id;
            self.backends[backend].graph_optimize(&mut g.ctx, &mut nodes);
            let delta = nodes.len() as isize - (end - start) as isize;
            g.nodes.splice(start..end, nodes.iter().copied());
            let split = &mut self.splits[s];
            split.i_start = start;
            split.i_end = (end as isize + delta) as usize;
            split.nodes = nodes;
            shift += delta;
        }
    }

    /// Builds the flattened graph the allocator plans: before each split's nodes, one
    /// input_dep (keeps the source alive until the copy) and one input_cpy (allocates the copy
    /// at the split's start) per input; with pipeline copies every copy is also a leaf.
    fn build_graph_copy(&mut self, g: &mut Graph) {
        let total_inputs: usize = self.graph_inputs.len()
            + self.splits[..self.n_splits]
                .iter()
                .map(|s| s.inputs.len())
                .sum::<usize>();
        let graph_size = g.nodes.len().max(g.leafs.len()) + total_inputs * 2 * self.n_copies;
        self.debug_prev_graph_size = self.debug_graph_size;
        self.debug_graph_size = graph_size;

        let mut nodes = Vec::with_capacity(graph_size);
        let mut node_ids = Vec::with_capacity(graph_size);
        for s in 0..self.n_splits {
            let backend = self.splits[s].backend_id;
            for j in 0..self.splits[s].inputs.len() {
                let input = self.splits[s].inputs[j];
                let input_cpy = self
                    .copy_of(input, backend, self.cur_copy)
                    .expect("split input without a copy");
                let dep = g.ctx.view_tensor(input);
                g.ctx[dep].src[0] = Some(input);
                nodes.push(dep);
                node_ids.push(self.bid(input).max(0) as usize);
                nodes.push(input_cpy);
                node_ids.push(backend);
            }
            for j in self.splits[s].i_start..self.splits[s].i_end {
                nodes.push(g.nodes[j]);
                node_ids.push(self.bid(g.nodes[j]).max(0) as usize);
            }
        }

        let mut leafs = Vec::new();
        let mut leaf_ids = Vec::new();
        if self.n_copies > 1 {
            for &input in &self.graph_inputs {
                let b = self.bid(input).max(0) as usize;
                for c in 0..self.n_copies {
                    leafs.push(
                        self.copy_of(input, b, c)
                            .expect("graph input without copies"),
                    );
                    leaf_ids.push(b);
                }
            }
            for s in &self.splits[..self.n_splits] {
                for &input in &s.inputs {
                    for c in 0..self.n_copies {
                        leafs.push(
                            self.copy_of(input, s.backend_id, c)
                                .expect("split input without copies"),
                        );
                        leaf_ids.push(s.backend_id);
                    }
                }
            }
        }
        for &leaf in &g.leafs {
            leafs.push(leaf);
            leaf_ids.push(self.bid(leaf).max(0) as usize);
        }

        fill(&mut self.node_backend_ids, &node_ids);
        fill(&mut self.leaf_backend_ids, &leaf_ids);
        self.graph_nodes = nodes;
        self.graph_leafs = leafs;
    }

    /// ggml_backend_sched_split_graph.
    pub(super) fn split_graph(&mut self, g: &mut Graph) -> Result<(), SchedError> {
        self.n_splits = 0;
        self.graph_inputs.clear();
        self.is_reset = false;
        self.count_uses(g);

        let leafs = g.leafs.clone();
        let nodes = g.nodes.clone();
        // pass 1: what is already decided (user pins are never overwritten)
        for &leaf in &leafs {
            if self.bid(leaf) == -1 {
                let b = self.backend_id_from_cur(&g.ctx, leaf)?;
                self.set_bid(leaf, b);
            }
        }
        for &node in &nodes {
            if self.bid(node) == -1 {
                let b = self.backend_id_from_cur(&g.ctx, node)?;
                self.set_bid(node, b);
            }
        }
        // pass 2: GPU down, GPU up, then anything down and up
        self.expand(&g.ctx, &nodes, true, true);
        self.expand(&g.ctx, &nodes, false, true);
        self.expand(&g.ctx, &nodes, true, false);
        self.expand(&g.ctx, &nodes, false, false);
        self.upgrade_and_guess(&g.ctx, &nodes);
        self.assign_sources(&g.ctx, &nodes)?;
        self.cut_splits(g)?;

        if self.debug > 0 {
            self.print_assignments(g);
        }

        std::mem::swap(&mut self.node_backend_ids, &mut self.prev_node_backend_ids);
        std::mem::swap(&mut self.leaf_backend_ids, &mut self.prev_leaf_backend_ids);

        self.optimize_splits(g);
        self.build_graph_copy(g);
        Ok(())
    }
}

/// Writes `ids` at the front of `dst` without shrinking it: entries past the current graph keep
/// their old values, as the fixed-size arrays ggml compares against do.
fn fill(dst: &mut Vec<usize>, ids: &[usize]) {
    if dst.len() < ids.len() {
        dst.resize(ids.len(), 0);
    }
    dst[..ids.len()].copy_from_slice(ids);
}
