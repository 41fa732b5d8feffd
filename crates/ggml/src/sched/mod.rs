//! The multi-backend scheduler (ggml_backend_sched): assigns every node of a graph to one of a
//! priority-ordered list of backends, cuts the graph into splits that run on one backend each,
//! copies the tensors that cross backends and plans all compute memory with the graph allocator.
//! docs/scheduler.md explains the passes with a worked example.
//!
//! The graph owns its context, so the scheduler adds its tensors (input copies, dependency
//! views) to `graph.ctx` and rewrites `graph.nodes`' sources in place: after `reset()` the graph
//! must be rebuilt, as in ggml.

mod compute;
mod debug;
mod split;

pub use debug::fmt_size;

use crate::alloc::Gallocr;
use crate::backend::{Backend, BufferTypeRef, DeviceKind, DeviceRef, Event, Status};
use crate::context::Context;
use crate::graph::Graph;
use crate::tensor::TensorId;
use std::sync::Arc;

pub const MAX_BACKENDS: usize = 16;
pub const MAX_SPLIT_INPUTS: usize = 30;
pub const MAX_COPIES: usize = 4;

/// Called for each node when set: with `ask` true, "do you want this node's data?"; with `ask`
/// false, after the node was computed, "continue?" (false stops the split).
pub type EvalCallback = Box<dyn FnMut(&Context, TensorId, bool) -> bool + Send>;

/// Returning true aborts the computation (ggml_abort_callback).
pub type AbortCallback = Arc<dyn Fn() -> bool + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum SchedError {
    #[error("the scheduler needs at least one backend")]
    NoBackends,
    #[error("at most {MAX_BACKENDS} backends, got {0}")]
    TooManyBackends(usize),
    #[error("the last backend must be a CPU device, got {0}")]
    LastNotCpu(String),
    #[error("backend {backend} does not support buffer type {buft}")]
    BuftNotSupported { backend: String, buft: String },
    #[error("pre-allocated tensor ({tensor}) in a buffer ({buffer}) that cannot run the operation ({op})")]
    PreAllocated {
        tensor: String,
        buffer: String,
        op: &'static str,
    },
    #[error(
        "node {node} ({op}) has no backend: all nodes should be assigned by now, this can happen if there is no CPU fallback"
    )]
    Unassigned { node: String, op: &'static str },
    #[error("graph of {0} nodes and leafs exceeds the scheduler's graph size {1}")]
    GraphTooLarge(usize, usize),
    #[error("failed to reserve graph buffers: {0}")]
    Reserve(crate::alloc::AllocError),
    #[error("failed to allocate graph")]
    AllocGraph,
    #[error("alloc_graph called on an allocated graph without reset")]
    AlreadyAllocated,
    #[error("{0} buffer types given for {1} backends")]
    BuftCount(usize, usize),
    #[error("{0}")]
    Backend(String),
    #[error("unexpected graph reallocation (graph size = {graph_size}, nodes = {nodes}, leafs = {leafs}), debug_realloc = {debug_realloc}")]
    UnexpectedRealloc {
        graph_size: usize,
        nodes: usize,
        leafs: usize,
        debug_realloc: i32,
    },
}

/// A run of consecutive nodes on one backend and the foreign tensors it copies in.
#[derive(Default, Clone, Debug)]
pub struct Split {
    pub backend_id: usize,
    pub i_start: usize,
    pub i_end: usize,
    /// the original tensors; their copies live in the split's backend
    pub inputs: Vec<TensorId>,
    inputs_capacity: usize,
    /// the split's nodes after graph_optimize
    pub nodes: Vec<TensorId>,
}

impl Split {
    fn grow_inputs(&mut self) {
        let new_cap = if self.inputs_capacity > 0 {
            2 * self.inputs_capacity
        } else {
            MAX_SPLIT_INPUTS
        };
        if self.inputs_capacity > 0 {
            crate::log_warn!(
                "{}: increasing split inputs capacity from {} to {}\n",
                "ggml_backend_sched_split_inputs_grow",
                self.inputs_capacity,
                new_cap
            );
        }
        self.inputs_capacity = new_cap;
    }
}

pub struct Sched {
    is_reset: bool,
    is_alloc: bool,
    backends: Vec<Box<dyn Backend>>,
    devs: Vec<DeviceRef>,
    bufts: Vec<BufferTypeRef>,
    galloc: Gallocr,

    /// backend of each tensor of the graph's context, -1 when unassigned
    hv_backend_ids: Vec<i32>,
    /// [tensor][backend][copy] -> the tensor's copy in that backend
    hv_copies: Vec<Option<TensorId>>,
    causes: Vec<&'static str>,
    use_counts: Vec<u32>,

    node_backend_ids: Vec<usize>,
    leaf_backend_ids: Vec<usize>,
    prev_node_backend_ids: Vec<usize>,
    prev_leaf_backend_ids: Vec<usize>,

    /// the flattened graph the allocator plans (ggml's sched->graph)
    graph_nodes: Vec<TensorId>,
    graph_leafs: Vec<TensorId>,

    splits: Vec<Split>,
    n_splits: usize,

    n_copies: usize,
    cur_copy: usize,
    next_copy: usize,
    events_enabled: Vec<bool>,
    /// events[backend][copy], made once by the device (ggml's sched->events)
    events: Vec<Vec<Option<Arc<dyn Event>>>>,
    /// bytes handed to a backend's set_tensor_async, kept until that backend synchronizes
    staging: Vec<Vec<Vec<u8>>>,
    graph_inputs: Vec<TensorId>,
    graph_inputs_capacity: usize,

    callback_eval: Option<EvalCallback>,
    abort: Option<AbortCallback>,
    op_offload: bool,
    hash_size: usize,

    debug: i32,
    debug_realloc: i32,
    debug_graph_size: usize,
    debug_prev_graph_size: usize,
}

impl Drop for Sched {
    fn drop(&mut self) {
        // the staging must outlive any transfer still reading it
        if self.staging.iter().any(|s| !s.is_empty()) {
            let _ = self.synchronize();
        }
    }
}

fn env_int(name: &str) -> Option<i32> {
    // atoi: leading digits, 0 when none
    std::env::var(name).ok().map(|v| {
        let v = v.trim_start();
        let (sign, digits) = match v.strip_prefix('-') {
            Some(rest) => (-1, rest),
            None => (1, v.strip_prefix('+').unwrap_or(v)),
        };
        let n: String = digits.chars().take_while(|c| c.is_ascii_digit()).collect();
        sign * n.parse::<i32>().unwrap_or(0)
    })
}

/// ggml_hash_size: the smallest prime of ggml's table that holds `min` entries.
fn hash_size(min: usize) -> usize {
    const PRIMES: [usize; 32] = [
        2, 3, 5, 11, 17, 37, 67, 131, 257, 521, 1031, 2053, 4099, 8209, 16411, 32771, 65537,
        131101, 262147, 524309, 1048583, 2097169, 4194319, 8388617, 16777259, 33554467, 67108879,
        134217757, 268435459, 536870923, 1073741827, 2147483659,
    ];
    PRIMES
        .iter()
        .copied()
        .find(|&p| p >= min)
        .unwrap_or(min | 1)
}

impl Sched {
    /// ggml_backend_sched_new: `backends` in priority order with a CPU last; `bufts` the compute
    /// buffer type of each (default: the device's); `parallel` enables pipeline parallelism
    /// (4 copies of every crossing tensor); `op_offload` lets a backend pull host-weight ops.
    pub fn new(
        backends: Vec<Box<dyn Backend>>,
        bufts: Option<Vec<BufferTypeRef>>,
        graph_size: usize,
        parallel: bool,
        op_offload: bool,
    ) -> Result<Sched, SchedError> {
        let n = backends.len();
        if n == 0 {
            return Err(SchedError::NoBackends);
        }
        if n > MAX_BACKENDS {
            return Err(SchedError::TooManyBackends(n));
        }
        let devs: Vec<DeviceRef> = backends.iter().map(|b| b.device()).collect();
        if devs[n - 1].kind() != DeviceKind::Cpu {
            return Err(SchedError::LastNotCpu(backends[n - 1].name().to_string()));
        }
        let bufts = match bufts {
            Some(b) => b,
            None => devs.iter().map(|d| d.buffer_type()).collect(),
        };
        if bufts.len() != n {
            return Err(SchedError::BuftCount(bufts.len(), n));
        }
        for (i, b) in bufts.iter().enumerate() {
            if !devs[i].supports_buft(b) {
                return Err(SchedError::BuftNotSupported {
                    backend: backends[i].name().to_string(),
                    buft: b.name().to_string(),
                });
            }
        }
        let n_copies = if parallel { MAX_COPIES } else { 1 };
        let events: Vec<Vec<Option<Arc<dyn Event>>>> = devs
            .iter()
            .map(|d| {
                (0..n_copies)
                    .map(|_| {
                        (n_copies > 1 && d.caps().events)
                            .then(|| d.event_new())
                            .flatten()
                    })
                    .collect()
            })
            .collect();
        // a device that says it has events but makes none is synchronized instead
        let events_enabled = events
            .iter()
            .map(|e| e.iter().all(Option::is_some) && n_copies > 1)
            .collect();
        let mut sched = Sched {
            is_reset: false,
            is_alloc: false,
            galloc: Gallocr::new_n(bufts.clone()),
            backends,
            devs,
            bufts,
            hv_backend_ids: Vec::new(),
            hv_copies: Vec::new(),
            causes: Vec::new(),
            use_counts: Vec::new(),
            node_backend_ids: Vec::new(),
            leaf_backend_ids: Vec::new(),
            prev_node_backend_ids: Vec::new(),
            prev_leaf_backend_ids: Vec::new(),
            graph_nodes: Vec::new(),
            graph_leafs: Vec::new(),
            splits: Vec::new(),
            n_splits: 0,
            n_copies,
            cur_copy: 0,
            next_copy: 0,
            events_enabled,
            events,
            staging: vec![Vec::new(); n],
            graph_inputs: Vec::new(),
            graph_inputs_capacity: MAX_SPLIT_INPUTS,
            callback_eval: None,
            abort: None,
            op_offload,
            hash_size: hash_size(graph_size),
            debug: env_int("GGML_SCHED_DEBUG").unwrap_or(0),
            debug_realloc: env_int("GGML_SCHED_DEBUG_REALLOC").unwrap_or(0),
            debug_graph_size: 0,
            debug_prev_graph_size: 0,
        };
        sched.reset();
        Ok(sched)
    }

    // ---- the per-tensor tables ----

    fn bid(&self, t: TensorId) -> i32 {
        self.hv_backend_ids.get(t.index()).copied().unwrap_or(-1)
    }

    fn set_bid(&mut self, t: TensorId, b: i32) {
        if self.hv_backend_ids.len() <= t.index() {
            self.hv_backend_ids.resize(t.index() + 1, -1);
        }
        self.hv_backend_ids[t.index()] = b;
    }

    fn copy_index(&self, t: TensorId, backend: usize, c: usize) -> usize {
        (t.index() * self.backends.len() + backend) * self.n_copies + c
    }

    fn copy_of(&self, t: TensorId, backend: usize, c: usize) -> Option<TensorId> {
        self.hv_copies
            .get(self.copy_index(t, backend, c))
            .copied()
            .flatten()
    }

    fn set_copy(&mut self, t: TensorId, backend: usize, c: usize, copy: TensorId) {
        let i = self.copy_index(t, backend, c);
        if self.hv_copies.len() <= i {
            self.hv_copies.resize(i + 1, None);
        }
        self.hv_copies[i] = Some(copy);
    }

    fn set_cause(&mut self, t: TensorId, cause: &'static str) {
        if self.causes.len() <= t.index() {
            self.causes.resize(t.index() + 1, "");
        }
        self.causes[t.index()] = cause;
    }

    /// Why the tensor got its backend ("1.dst", "2.sup", "usr", ...; empty when it has none).
    pub fn cause(&self, t: TensorId) -> &str {
        self.causes.get(t.index()).copied().unwrap_or("")
    }

    fn check_size(&self, g: &Graph) -> Result<(), SchedError> {
        let n = g.nodes.len() + g.leafs.len();
        if n > self.hash_size {
            return Err(SchedError::GraphTooLarge(n, self.hash_size));
        }
        Ok(())
    }

    // ---- the public API ----

    /// Forgets every assignment and copy; the graph given since must be rebuilt before reuse.
    pub fn reset(&mut self) {
        if !self.is_reset {
            self.hv_backend_ids.clear();
            self.hv_copies.clear();
            self.causes.clear();
            self.is_reset = true;
        }
        self.is_alloc = false;
    }

    /// Splits the worst-case graph and sizes every compute buffer for it (then resets).
    pub fn reserve(&mut self, g: &mut Graph) -> Result<(), SchedError> {
        self.check_size(g)?;
        self.synchronize().map_err(SchedError::Backend)?;
        self.split_graph(g)?;
        self.galloc
            .reserve_n(
                &g.ctx,
                &self.graph_nodes,
                &self.graph_leafs,
                Some(&self.node_backend_ids),
                Some(&self.leaf_backend_ids),
            )
            .map_err(SchedError::Reserve)?;
        self.reset();
        Ok(())
    }

    /// The bytes each backend's buffer would need for this graph, allocating nothing.
    pub fn reserve_size(&mut self, g: &mut Graph) -> Result<Vec<usize>, SchedError> {
        self.check_size(g)?;
        self.reset();
        self.synchronize().map_err(SchedError::Backend)?;
        self.split_graph(g)?;
        self.galloc
            .reserve_n_size(
                &g.ctx,
                &self.graph_nodes,
                &self.graph_leafs,
                Some(&self.node_backend_ids),
                Some(&self.leaf_backend_ids),
            )
            .map_err(SchedError::Reserve)
    }

    /// Splits the graph and gives all its tensors memory (rotating the pipeline copy).
    pub fn alloc_graph(&mut self, g: &mut Graph) -> Result<(), SchedError> {
        self.check_size(g)?;
        if self.is_alloc {
            return Err(SchedError::AlreadyAllocated);
        }
        self.cur_copy = self.next_copy;
        self.next_copy = (self.next_copy + 1) % self.n_copies;
        self.split_graph(g)?;
        self.alloc_splits(&mut g.ctx)?;
        self.is_alloc = true;
        Ok(())
    }

    /// ggml_backend_sched_alloc_splits: a change of buffer type (not of backend id) or a plan
    /// that no longer fits means reserving again, after synchronizing every backend directly.
    fn alloc_splits(&mut self, ctx: &mut Context) -> Result<(), SchedError> {
        let changed = |ids: &[usize], prev: &[usize], n: usize, bufts: &[BufferTypeRef]| {
            (0..n).any(|i| {
                let p = prev.get(i).copied().unwrap_or(0);
                ids[i] != p && !crate::backend::same_buft(&bufts[ids[i]], &bufts[p])
            })
        };
        let backend_ids_changed = changed(
            &self.node_backend_ids,
            &self.prev_node_backend_ids,
            self.graph_nodes.len(),
            &self.bufts,
        ) || changed(
            &self.leaf_backend_ids,
            &self.prev_leaf_backend_ids,
            self.graph_leafs.len(),
            &self.bufts,
        );

        if backend_ids_changed
            || !self
                .galloc
                .alloc_graph_n(ctx, &self.graph_nodes, &self.graph_leafs)
        {
            if self.debug_realloc > 0 {
                // only a reallocation of a graph whose size and assignment did not change is a bug
                let unexpected =
                    !backend_ids_changed && self.debug_prev_graph_size == self.debug_graph_size;
                if unexpected || self.debug_realloc > 1 {
                    let e = SchedError::UnexpectedRealloc {
                        graph_size: self.debug_graph_size,
                        nodes: self.graph_nodes.len(),
                        leafs: self.graph_leafs.len(),
                        debug_realloc: self.debug_realloc,
                    };
                    crate::log_error!("{}: {}\n", "ggml_backend_sched_alloc_splits", e);
                    return Err(e);
                }
            }
            // the inputs may move: wait for every backend without touching cur_copy
            for b in 0..self.backends.len() {
                self.backend_synchronize(b).map_err(SchedError::Backend)?;
            }
            if let Err(e) = self.galloc.reserve_n(
                ctx,
                &self.graph_nodes,
                &self.graph_leafs,
                Some(&self.node_backend_ids),
                Some(&self.leaf_backend_ids),
            ) {
                crate::log_error!(
                    "{}: failed to reserve graph\n",
                    "ggml_backend_sched_alloc_splits"
                );
                return Err(SchedError::Reserve(e));
            }
            if !self
                .galloc
                .alloc_graph_n(ctx, &self.graph_nodes, &self.graph_leafs)
            {
                crate::log_error!(
                    "{}: failed to allocate graph\n",
                    "ggml_backend_sched_alloc_splits"
                );
                return Err(SchedError::AllocGraph);
            }
        }
        Ok(())
    }

    /// Computes the graph (allocating it first unless alloc_graph was called) and waits.
    pub fn graph_compute(&mut self, g: &mut Graph) -> Status {
        let status = self.graph_compute_async(g);
        let synced = self.synchronize();
        match (status, synced) {
            (Status::Success, Err(e)) => Status::Failed(e),
            (status, _) => status,
        }
    }

    pub fn graph_compute_async(&mut self, g: &mut Graph) -> Status {
        if !self.is_reset && !self.is_alloc {
            self.reset();
        }
        if !self.is_alloc {
            if let Err(e) = self.alloc_graph(g) {
                crate::log_error!("{}: {}\n", "ggml_backend_sched_graph_compute_async", e);
                return Status::AllocFailed(e.to_string());
            }
        }
        self.compute_splits(&g.ctx)
    }

    /// Waits for every backend; while no graph is allocated the next graph uses copy 0, so a
    /// generation loop keeps one identical graph from token to token.
    /// The first backend error is returned after every backend was waited for.
    pub fn synchronize(&mut self) -> Result<(), String> {
        let mut first = Ok(());
        for b in 0..self.backends.len() {
            let r = self.backend_synchronize(b);
            if first.is_ok() {
                first = r;
            }
        }
        if !self.is_alloc {
            self.next_copy = 0;
        }
        first
    }

    /// Waits for one backend, then frees the staging it may have been reading.
    pub(super) fn backend_synchronize(&mut self, b: usize) -> Result<(), String> {
        let r = self.backends[b]
            .synchronize()
            .map_err(|e| format!("{}: {e}", self.backends[b].name()));
        self.staging[b].clear();
        r
    }

    pub fn set_eval_callback(&mut self, cb: Option<EvalCallback>) {
        self.callback_eval = cb;
    }

    /// Sets the abort callback of every backend, and checks it after each split too: a backend
    /// that cannot stop inside its graph (a GPU's) still stops at the next split boundary.
    pub fn set_abort_callback(&mut self, cb: Option<AbortCallback>) {
        for b in &mut self.backends {
            b.set_abort_callback(cb.clone());
        }
        self.abort = cb;
    }

    /// Whether the abort callback asks to stop now (false without one).
    pub fn abort_requested(&self) -> bool {
        self.abort.as_ref().is_some_and(|cb| cb())
    }

    /// Pins a tensor of the next graph to a backend; no pass overwrites it.
    pub fn set_tensor_backend(&mut self, t: TensorId, backend: usize) {
        assert!(
            backend < self.backends.len(),
            "backend index {backend} out of range"
        );
        self.set_bid(t, backend as i32);
        self.set_cause(t, "usr");
        self.is_reset = false;
    }

    /// The backend index a tensor of the last split graph runs on.
    pub fn get_tensor_backend(&self, t: TensorId) -> Option<usize> {
        match self.bid(t) {
            -1 => None,
            b => Some(b as usize),
        }
    }

    pub fn n_splits(&self) -> usize {
        self.n_splits
    }
    pub fn splits(&self) -> &[Split] {
        &self.splits[..self.n_splits]
    }
    /// The number of input copies of the last split graph (the sum over the splits).
    pub fn n_split_inputs(&self) -> usize {
        self.splits().iter().map(|s| s.inputs.len()).sum()
    }
    pub fn n_copies(&self) -> usize {
        self.n_copies
    }
    pub fn cur_copy(&self) -> usize {
        self.cur_copy
    }
    pub fn n_backends(&self) -> usize {
        self.backends.len()
    }
    pub fn backend(&mut self, i: usize) -> &mut dyn Backend {
        self.backends[i].as_mut()
    }
    pub fn backend_ref(&self, i: usize) -> &dyn Backend {
        self.backends[i].as_ref()
    }
    /// The index of the backend with that name.
    pub fn backend_index(&self, name: &str) -> Option<usize> {
        self.backends.iter().position(|b| b.name() == name)
    }
    pub fn get_buffer_type(&self, backend: usize) -> &BufferTypeRef {
        &self.bufts[backend]
    }
    /// Bytes of the backend's compute buffer (0 when an earlier backend shares its type).
    pub fn get_buffer_size(&self, backend: usize) -> usize {
        self.galloc.get_buffer_size(backend)
    }
    /// The copy of `t` in `backend` for pipeline copy `c`, if the last split made one.
    pub fn tensor_copy(&self, t: TensorId, backend: usize, c: usize) -> Option<TensorId> {
        self.copy_of(t, backend, c)
    }
    /// The flattened graph the allocator planned: nodes and leafs (input_dep / input_cpy
    /// included).
    pub fn alloc_graph_view(&self) -> (&[TensorId], &[TensorId]) {
        (&self.graph_nodes, &self.graph_leafs)
    }
    /// GGML_SCHED_DEBUG level (read from the environment at construction).
    pub fn set_debug(&mut self, level: i32) {
        self.debug = level;
    }
    /// GGML_SCHED_DEBUG_REALLOC level (read from the environment at construction).
    pub fn set_debug_realloc(&mut self, level: i32) {
        self.debug_realloc = level;
    }
}
