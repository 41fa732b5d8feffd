//! The CPU backend: computes a whole graph on a persistent thread pool, one barrier between
//! nodes (none between small row-wise nodes that thread 0 runs alone), with an abort check
//! after every node.

use crate::ops::{self, Params};
use crate::placement;
use crate::pool::Pool;
use ggml::backend::{Backend, DeviceRef, GraphView, Status};
use ggml::{Context, Tensor, TensorId};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// ggml's GGML_MAX_N_THREADS.
pub const MAX_THREADS: usize = 512;

pub type AbortCallback = Arc<dyn Fn() -> bool + Send + Sync>;

/// The default thread count: the cores available to this process.
pub fn default_n_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

pub struct CpuBackend {
    dev: DeviceRef,
    n_threads: usize,
    pool: Pool,
    /// the batch threadpool, when its settings differ from the generation pool's
    pool_batch: Option<Pool>,
    /// whether the next graph is a batch
    batch: bool,
    /// which pool (batch or not) last placed the calling thread
    placed: Option<bool>,
    abort: Option<AbortCallback>,
    /// Shared work memory, 64-byte aligned (u64 words keep the alignment of 8; the start is
    /// rounded up to 64 inside).
    work: Vec<u64>,
    /// per-node times, when GGML_CPU_PROFILE asks for them (printed on drop)
    profile: Option<crate::profile::Profile>,
}

impl CpuBackend {
    pub fn new(dev: DeviceRef) -> CpuBackend {
        let n = default_n_threads().clamp(1, MAX_THREADS);
        let (gen, batch) = placement::threadpool_params();
        let pool_batch = (batch != gen).then(|| Pool::with_params(n, batch));
        CpuBackend {
            dev,
            n_threads: n,
            pool: Pool::with_params(n, gen),
            pool_batch,
            batch: false,
            placed: None,
            abort: None,
            work: Vec::new(),
            profile: crate::profile::wanted().then(|| crate::profile::Profile::new(n)),
        }
    }

    pub fn n_threads(&self) -> usize {
        self.n_threads
    }

    /// Threads for the next graphs (1 to ggml's GGML_MAX_N_THREADS, 512).
    pub fn set_threads(&mut self, n: usize) {
        self.n_threads = n.clamp(1, MAX_THREADS);
    }

    fn work_ptr(&mut self, size: usize) -> *mut u8 {
        let words = size.div_ceil(8) + 8;
        if self.work.len() < words {
            self.work.resize(words, 0);
        }
        let p = self.work.as_mut_ptr() as *mut u8;
        p.wrapping_add(p.align_offset(64))
    }

    /// Computes `nodes` of `ctx` in order.
    pub fn compute(&mut self, ctx: &Context, nodes: &[TensorId]) -> Status {
        let t_setup = self.profile.is_some().then(Instant::now);
        for &id in nodes {
            if ops::is_noop(&ctx[id]) {
                continue;
            }
            if let Err(msg) = check_node(ctx, id) {
                ggml::log_error!("{}: {}\n", "ggml_graph_compute", msg);
                return Status::Failed(msg.to_string());
            }
        }
        let nth = self.n_threads.max(1);
        let wsize = nodes
            .iter()
            .map(|&id| ops::work_size(ctx, id, nth))
            .max()
            .unwrap_or(0);
        let wdata = self.work_ptr(wsize) as usize;
        let aborted = AtomicBool::new(false);
        let error = AtomicBool::new(false);
        let counter = AtomicUsize::new(0);
        let abort = self.abort.clone();
        let profiling = self.profile.is_some();
        let times: Mutex<Vec<(TensorId, Duration)>> = Mutex::new(Vec::new());
        let setup = t_setup.map(|t| t.elapsed());
        let t_graph = t_setup.map(|_| Instant::now());
        let plan = plan(ctx, nodes, nth);
        let job = |ith: usize, nth: usize, barrier: &crate::pool::SpinBarrier| {
            let timed = profiling && ith == 0;
            let mut mine = Vec::new();
            let mut rope = ops::rope::RopeCache::default();
            SCRATCH.with(|s| {
                let mut scratch = s.borrow_mut();
                for step in &plan {
                    let t0 = timed.then(Instant::now);
                    // after an abort thread 0 runs no more solo nodes: it goes straight on to
                    // the next barrier, where every thread stops (a shared node always follows
                    // a barrier, so an abort never reaches one)
                    let run = !step.solo || (ith == 0 && !aborted.load(Ordering::Relaxed));
                    if run {
                        let mut p = Params::new(
                            if step.solo { 0 } else { ith },
                            if step.solo { 1 } else { nth },
                            wdata as *mut u8,
                            wsize,
                            barrier,
                            &mut scratch,
                            &error,
                            &counter,
                            &mut rope,
                        );
                        ops::compute(&mut p, ctx, step.id);
                        if ith == 0 {
                            if let Some(cb) = &abort {
                                if cb() {
                                    aborted.store(true, Ordering::Relaxed);
                                }
                            }
                        }
                    }
                    if step.barrier {
                        barrier.wait(nth);
                    }
                    if let Some(t0) = t0 {
                        mine.push((step.id, t0.elapsed()));
                    }
                    // only after a barrier: every thread leaves at the same node
                    if step.barrier && (aborted.load(Ordering::Relaxed) || barrier.is_poisoned()) {
                        break;
                    }
                }
            });
            if timed {
                *times.lock().unwrap_or_else(|e| e.into_inner()) = mine;
            }
        };
        let use_batch = self.batch && self.pool_batch.is_some();
        let pool = match (&mut self.pool_batch, use_batch) {
            (Some(p), true) => p,
            _ => &mut self.pool,
        };
        if self.placed != Some(use_batch) {
            pool.place_caller();
            self.placed = Some(use_batch);
        }
        match pool.run(nth, &job) {
            Ok(true) => {}
            Ok(false) => {
                ggml::log_error!("{}: a compute thread panicked\n", "ggml_graph_compute");
                return Status::Failed("a compute thread panicked".into());
            }
            Err(e) => {
                ggml::log_error!("{}: {}\n", "ggml_graph_compute", e);
                return Status::Failed(e.to_string());
            }
        }
        if let (Some(prof), Some(setup), Some(t_graph)) = (&mut self.profile, setup, t_graph) {
            prof.graph(setup, t_graph.elapsed(), nth);
            for (id, d) in times.into_inner().unwrap_or_else(|e| e.into_inner()) {
                prof.node(ctx, id, d);
            }
        }
        if aborted.load(Ordering::Relaxed) {
            Status::Aborted
        } else if error.load(Ordering::Relaxed) {
            ggml::log_error!("{}: an index was out of range\n", "ggml_graph_compute");
            Status::Failed("an index was out of range".into())
        } else {
            Status::Success
        }
    }
}

impl Drop for CpuBackend {
    fn drop(&mut self) {
        if let Some(p) = &self.profile {
            eprint!("{}", p.report());
        }
    }
}

/// One node of the graph as the threads step through it.
struct Step {
    id: TensorId,
    /// run by thread 0 alone (ops::solo)
    solo: bool,
    /// whether the threads meet after it: not between two solo nodes (thread 0 runs both in
    /// order), nor after the last node (the pool waits for every thread anyway)
    barrier: bool,
}

fn plan(ctx: &Context, nodes: &[TensorId], nth: usize) -> Vec<Step> {
    let ids: Vec<TensorId> = nodes
        .iter()
        .copied()
        .filter(|&id| !ops::is_noop(&ctx[id]))
        .collect();
    let solo: Vec<bool> = ids
        .iter()
        .map(|&id| nth > 1 && ops::solo(&ctx[id]))
        .collect();
    (0..ids.len())
        .map(|k| Step {
            id: ids[k],
            solo: solo[k],
            barrier: k + 1 < ids.len() && !(solo[k] && solo[k + 1]),
        })
        .collect()
}

thread_local! {
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Every tensor the node reads or writes must be in a host buffer, inside its bounds.
fn check_node(ctx: &Context, id: TensorId) -> Result<(), String> {
    let t = &ctx[id];
    if !crate::support::supports_op(ctx, id) {
        return Err(format!(
            "op {} ({}) on '{}' is not supported by the CPU backend",
            t.op.desc(),
            t.ty,
            t.name
        ));
    }
    check_tensor(t)?;
    for s in t.srcs() {
        check_tensor(&ctx[s])?;
    }
    Ok(())
}

fn check_tensor(t: &Tensor) -> Result<(), String> {
    if t.is_empty() {
        return Ok(());
    }
    let Some(d) = &t.data else {
        return Err(format!("tensor '{}' has no data", t.name));
    };
    if !d.buffer.is_host() && !crate::repack::is_repack_buft(d.buffer.buft()) {
        return Err(format!(
            "tensor '{}' is in non-host buffer {}",
            t.name,
            d.buffer.name()
        ));
    }
    let (base, size) = (d.buffer.base(), d.buffer.size());
    if d.addr < base || d.addr + t.nbytes() > base + size {
        return Err(format!(
            "tensor '{}' lies outside its buffer {}",
            t.name,
            d.buffer.name()
        ));
    }
    Ok(())
}

impl Backend for CpuBackend {
    fn name(&self) -> &str {
        "CPU"
    }
    fn device(&self) -> DeviceRef {
        self.dev.clone()
    }
    fn graph_compute(&mut self, graph: GraphView<'_>) -> Status {
        self.compute(graph.ctx, graph.nodes)
    }
    fn set_n_threads(&mut self, n: usize) {
        self.set_threads(n);
    }
    fn set_graph_threads(&mut self, n: usize, batch: bool) {
        self.set_threads(n);
        self.batch = batch;
    }
    fn reserve_threads(&mut self, n: usize) -> Result<(), String> {
        let n = n.clamp(1, MAX_THREADS);
        if let Some(b) = &mut self.pool_batch {
            b.reserve(n)?;
        }
        self.pool.reserve(n)
    }
    fn set_abort_callback(&mut self, cb: Option<Arc<dyn Fn() -> bool + Send + Sync>>) {
        self.abort = cb;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ggml::Type;

    #[test]
    fn threads_meet_only_where_a_node_is_shared() {
        let mut ctx = Context::new();
        let x = ctx.new_tensor_1d(Type::F32, 64);
        let w = ctx.new_tensor_2d(Type::F32, 64, 64);
        let big = ctx.new_tensor_1d(Type::F32, 100_000);
        let a = ctx.add(x, x);
        let v = ctx.reshape_1d(a, 64);
        let b = ctx.add(v, x);
        let m = ctx.mul_mat(w, b);
        let c = ctx.add(m, m);
        let d = ctx.add(big, big);
        let e = ctx.add(c, c);
        let nodes = [a, v, b, m, c, d, e];
        let shape = |nth| {
            plan(&ctx, &nodes, nth)
                .iter()
                .map(|s| (s.id, s.solo, s.barrier))
                .collect::<Vec<_>>()
        };
        // the view computes nothing; the small additions run on thread 0, the product and the
        // large addition on every thread, with a barrier on each side of them
        assert_eq!(
            shape(2),
            vec![
                (a, true, false),
                (b, true, true),
                (m, false, true),
                (c, true, true),
                (d, false, true),
                (e, true, false),
            ]
        );
        // one thread: nothing is solo, every node but the last ends at a barrier (a no-op
        // there)
        assert_eq!(
            shape(1),
            vec![
                (a, false, true),
                (b, false, true),
                (m, false, true),
                (c, false, true),
                (d, false, true),
                (e, false, false),
            ]
        );
    }
}
