//! A per-node timer for finding where a graph's time goes: `GGML_CPU_PROFILE=1` makes thread 0
//! time every node (from its start to the barrier after it, so the slowest thread's share is
//! what counts) and, when the backend is dropped, print to stderr the time per op, per node
//! shape and the bytes the matmul weights streamed. Off (the default) it costs one branch per
//! node. A diagnostic only: the figures are wall time on a possibly busy machine.

use ggml::{Context, Op, Tensor, TensorId};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

/// Whether profiling was asked for (read once per backend).
pub(crate) fn wanted() -> bool {
    std::env::var("GGML_CPU_PROFILE").is_ok_and(|v| !v.is_empty() && v != "0")
}

#[derive(Default, Clone, Copy)]
struct Entry {
    count: u64,
    time: Duration,
    /// bytes of src 0 (the weight, for matmuls) read per call
    bytes: u64,
    /// multiply-adds of the node per call (matmuls only)
    flops: u64,
}

#[derive(Default)]
pub(crate) struct Profile {
    by_op: HashMap<String, Entry>,
    by_shape: HashMap<String, Entry>,
    graphs: u64,
    /// time of the graphs, from the first node's start to the last node's barrier
    nodes_time: Duration,
    /// time spent before the threads start (checks, work sizes)
    setup_time: Duration,
    n_threads: usize,
}

/// The key of a node's shape, the bytes of its src 0 and its floating-point operations
/// (matmuls and flash attention; 0 for the rest): a matmul by weight type and {K, M},
/// columns; flash attention by K's type, head sizes, heads, keys and queries (the
/// parameters of test-backend-ops' FLASH_ATTN_EXT, whose FLOP count this is); any other op
/// by its src 0's and its result's types and its result's shape.
fn shape_key(ctx: &Context, t: &Tensor) -> Option<(String, u64, u64)> {
    if let Op::FlashAttnExt { .. } = t.op {
        let (q, k, v) = (&ctx[t.src[0]?], &ctx[t.src[1]?], &ctx[t.src[2]?]);
        let key = format!(
            "FLASH_ATTN_EXT {} hs={}/{} nh={} kv={} nb={}",
            k.ty, q.ne[0], v.ne[0], q.ne[2], k.ne[1], q.ne[1]
        );
        let flops = 2 * (q.ne[2] * q.ne[3] * q.ne[1] * (q.ne[0] + v.ne[0]) * k.ne[1]) as u64;
        return Some((key, k.nbytes() as u64, flops));
    }
    if !matches!(t.op, Op::MulMat { .. } | Op::MulMatId) {
        let bytes = t.src[0].map_or(0, |s| ctx[s].nbytes() as u64);
        let src = t.src[0].map_or(String::new(), |s| format!("{}->", ctx[s].ty));
        let ne = t.ne;
        let key = format!(
            "{} {}{} {}x{}x{}x{}",
            t.op.name(),
            src,
            t.ty,
            ne[0],
            ne[1],
            ne[2],
            ne[3]
        );
        return Some((key, bytes, 0));
    }
    let (a, b) = (&ctx[t.src[0]?], &ctx[t.src[1]?]);
    let key = format!(
        "{} {} {}x{}x{} * {} cols",
        t.op.name(),
        a.ty,
        a.ne[0],
        a.ne[1],
        a.ne[2],
        b.ne[1] * b.ne[2] * b.ne[3]
    );
    let flops = 2 * (t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]) as u64 * a.ne[0] as u64;
    Some((key, a.nbytes() as u64, flops))
}

impl Profile {
    pub fn new(n_threads: usize) -> Profile {
        Profile {
            n_threads,
            ..Default::default()
        }
    }

    pub fn graph(&mut self, setup: Duration, total: Duration, n_threads: usize) {
        self.graphs += 1;
        self.setup_time += setup;
        self.nodes_time += total;
        self.n_threads = n_threads;
    }

    pub fn node(&mut self, ctx: &Context, id: TensorId, time: Duration) {
        let t = &ctx[id];
        let op = self.by_op.entry(t.op.name().to_string()).or_default();
        op.count += 1;
        op.time += time;
        if let Some((key, bytes, flops)) = shape_key(ctx, t) {
            op.bytes += bytes;
            let e = self.by_shape.entry(key).or_default();
            e.count += 1;
            e.time += time;
            e.bytes = bytes;
            e.flops = flops;
        }
    }

    pub fn report(&self) -> String {
        let mut s = String::new();
        let total = self.nodes_time.as_secs_f64().max(1e-12);
        let _ = writeln!(
            s,
            "ggml-cpu profile: {} graphs, {} threads, nodes {:.3} ms/graph, setup {:.3} ms/graph",
            self.graphs,
            self.n_threads,
            1e3 * total / self.graphs.max(1) as f64,
            1e3 * self.setup_time.as_secs_f64() / self.graphs.max(1) as f64
        );
        let _ = writeln!(
            s,
            "  {:<14} {:>9} {:>12} {:>7} {:>10}",
            "op", "calls", "ms/graph", "share", "us/call"
        );
        let mut ops: Vec<_> = self.by_op.iter().collect();
        ops.sort_by_key(|e| std::cmp::Reverse(e.1.time));
        for (name, e) in ops {
            let t = e.time.as_secs_f64();
            let _ = writeln!(
                s,
                "  {:<14} {:>9} {:>12.3} {:>6.1}% {:>10.2}",
                name,
                e.count,
                1e3 * t / self.graphs.max(1) as f64,
                100.0 * t / total,
                1e6 * t / e.count.max(1) as f64
            );
        }
        let _ = writeln!(
            s,
            "  {:<48} {:>9} {:>10} {:>8} {:>9}",
            "node shape", "calls", "us/call", "GB/s", "GFLOP/s"
        );
        let mut shapes: Vec<_> = self.by_shape.iter().collect();
        shapes.sort_by_key(|e| std::cmp::Reverse(e.1.time));
        for (key, e) in shapes {
            let per = e.time.as_secs_f64() / e.count.max(1) as f64;
            let _ = writeln!(
                s,
                "  {:<48} {:>9} {:>10.2} {:>8.2} {:>9.2}",
                key,
                e.count,
                1e6 * per,
                e.bytes as f64 / per.max(1e-12) / 1e9,
                e.flops as f64 / per.max(1e-12) / 1e9
            );
        }
        s
    }
}
