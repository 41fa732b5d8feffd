//! The CPU kernels: one function per op, called on every thread of the pool with that thread's
//! index; each kernel takes its share of the rows. Dispatch matches `Op` exhaustively.

mod attn;
mod binary;
mod copy;
mod gemm;
#[cfg(target_arch = "x86_64")]
mod gemm_bf16;
pub(crate) mod ktile;
mod layout;
mod matmul;
mod mm_repacked;
#[cfg(target_arch = "x86_64")]
mod mm_rows16;
mod norm;
pub(crate) mod qtile;
mod reduce;
pub(crate) mod rope;
mod rows;
mod unary;

use crate::pool::SpinBarrier;
use crate::tref::TRef;
use ggml::{Context, Op, Tensor, TensorId};
use std::sync::atomic::{AtomicBool, AtomicUsize};

/// What one thread gets for one node.
pub(crate) struct Params<'a> {
    pub ith: usize,
    pub nth: usize,
    /// The node's shared work buffer (see `work_size`).
    pub wdata: *mut u8,
    pub wsize: usize,
    barrier: &'a SpinBarrier,
    /// Per-thread f32 scratch, grown on demand and kept across nodes.
    pub scratch: &'a mut Vec<f32>,
    error: &'a AtomicBool,
    /// A work counter shared by the threads (dynamic chunk scheduling); a kernel that uses it
    /// resets it on thread 0 before a barrier.
    pub counter: &'a AtomicUsize,
    /// This thread's ROPE rows of the graph being computed.
    rope: &'a mut rope::RopeCache,
}

impl<'a> Params<'a> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        ith: usize,
        nth: usize,
        wdata: *mut u8,
        wsize: usize,
        barrier: &'a SpinBarrier,
        scratch: &'a mut Vec<f32>,
        error: &'a AtomicBool,
        counter: &'a AtomicUsize,
        rope: &'a mut rope::RopeCache,
    ) -> Params<'a> {
        Params {
            ith,
            nth,
            wdata,
            wsize,
            barrier,
            scratch,
            error,
            counter,
            rope,
        }
    }

    /// All threads of the node wait here (every thread must call it the same number of times).
    pub fn barrier(&self) {
        self.barrier.wait(self.nth)
    }

    /// The error flag, for kernels that hold the scratch borrowed.
    pub fn err(&self) -> &'a AtomicBool {
        self.error
    }

    /// `scratch(n)` and this thread's ROPE rows together.
    fn scratch_and_rope(&mut self, n: usize) -> (&mut [f32], &mut rope::RopeCache) {
        if self.scratch.len() < n {
            self.scratch.resize(n, 0.0);
        }
        (&mut self.scratch[..n], &mut *self.rope)
    }

    /// A scratch slice of `n` floats.
    pub fn scratch(&mut self, n: usize) -> &mut [f32] {
        if self.scratch.len() < n {
            self.scratch.resize(n, 0.0);
        }
        &mut self.scratch[..n]
    }
}

/// The node's tensor and its sources as raw views.
pub(crate) struct Node<'a> {
    pub t: &'a Tensor,
    pub dst: TRef,
    pub src: [Option<TRef>; 5],
}

impl<'a> Node<'a> {
    pub fn new(ctx: &'a Context, id: TensorId) -> Node<'a> {
        let t = &ctx[id];
        let mut src = [None; 5];
        for (slot, s) in src.iter_mut().zip(t.src.iter()) {
            *slot = s.map(|s| TRef::new(&ctx[s]));
        }
        Node {
            t,
            dst: TRef::new(t),
            src,
        }
    }

    /// Source `i`, which the op constructors guarantee exists for the ops that read it.
    pub fn s(&self, i: usize) -> TRef {
        match self.src[i] {
            Some(s) => s,
            None => panic!("{}: '{}' lacks source {}", self.t.op.name(), self.t.name, i),
        }
    }
}

/// Nodes that compute nothing: views share their source's memory.
pub(crate) fn is_noop(t: &Tensor) -> bool {
    t.op.is_view() || t.op.is_none() || t.is_empty()
}

/// Elements up to which a row-wise node runs on thread 0 alone: splitting it saves less time
/// than the barrier that the split needs (a barrier round trip costs about as much as one
/// thread normalising or rotating a few thousand floats).
const SOLO_MAX_ELEMENTS: i64 = 4096;

/// Whether a node is small enough to run on thread 0 alone (with nth = 1), so that a run of
/// such nodes needs no barrier between them. Only ops whose rows are computed independently of
/// the thread split qualify (no work buffer, no barrier inside, no shared counter): their
/// results are the same bits on one thread as on many.
pub(crate) fn solo(t: &Tensor) -> bool {
    let rowwise = matches!(
        t.op,
        Op::Dup
            | Op::Cont
            | Op::Cpy
            | Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Scale { .. }
            | Op::Unary(_)
            | Op::Glu { .. }
            | Op::Norm { .. }
            | Op::RmsNorm { .. }
            | Op::GetRows
            | Op::SetRows
            | Op::SoftMax { .. }
            | Op::Rope(_)
    );
    rowwise && t.nelements() <= SOLO_MAX_ELEMENTS
}

/// Bytes of shared work memory a node needs with `nth` threads.
pub(crate) fn work_size(ctx: &Context, id: TensorId, nth: usize) -> usize {
    let t = &ctx[id];
    match t.op {
        Op::MulMat { .. } => matmul::work_size(ctx, t),
        Op::MulMatId => matmul::work_size_id(ctx, t, nth),
        Op::FlashAttnExt { .. } => attn::work_size(ctx, t, nth),
        _ => 0,
    }
}

/// Computes one node on thread `p.ith`.
pub(crate) fn compute(p: &mut Params, ctx: &Context, id: TensorId) {
    let n = Node::new(ctx, id);
    match n.t.op {
        Op::None | Op::Reshape | Op::View | Op::Permute { .. } | Op::Transpose => {}
        Op::Dup | Op::Cont | Op::Cpy => copy::dup(p, &n),
        Op::Add => binary::binary(p, &n, |a, b| a + b),
        Op::Sub => binary::binary(p, &n, |a, b| a - b),
        Op::Mul => binary::binary(p, &n, |a, b| a * b),
        Op::Div => binary::binary(p, &n, |a, b| a / b),
        Op::AddId => binary::add_id(p, &n),
        Op::Sqr => unary::map(p, &n, |x| x * x),
        Op::Sqrt => unary::map(p, &n, f32::sqrt),
        Op::Scale { s, b } => unary::scale(p, &n, s, b),
        Op::Clamp { min, max } => unary::map(p, &n, move |x| x.min(max).max(min)),
        Op::Fill { c } => unary::map(p, &n, move |_| c),
        Op::Unary(u) => unary::unary(p, &n, u),
        Op::Glu { op, swapped } => unary::glu(p, &n, op, swapped),
        Op::Sum => reduce::sum(p, &n),
        Op::SumRows => reduce::sum_rows(p, &n, false),
        Op::Mean => reduce::sum_rows(p, &n, true),
        Op::Argmax => reduce::argmax(p, &n),
        Op::Argsort { order } => reduce::argsort(p, &n, order),
        Op::TopK { k } => reduce::top_k(p, &n, k as usize),
        Op::Repeat => layout::repeat(p, &n),
        Op::Concat { dim } => layout::concat(p, &n, dim as usize),
        Op::Norm { eps } => norm::norm(p, &n, eps),
        Op::RmsNorm { eps } => norm::rms_norm(p, &n, eps),
        Op::MulMat { .. } => matmul::mul_mat(p, &n),
        Op::MulMatId => matmul::mul_mat_id(p, &n),
        Op::GetRows => rows::get_rows(p, &n),
        Op::SetRows => rows::set_rows(p, &n),
        Op::SoftMax { scale, max_bias } => attn::soft_max(p, &n, scale, max_bias),
        Op::Rope(rp) => rope::rope(p, &n, &rp),
        Op::FlashAttnExt {
            scale,
            max_bias,
            logit_softcap,
            ..
        } => attn::flash_attn_ext(p, &n, scale, max_bias, logit_softcap),
    }
}

/// ALiBi slope of head `h` (ggml's m0/m1 rule); 1 without max_bias.
pub(crate) fn alibi_slope(max_bias: f32, n_head: usize, h: usize) -> f32 {
    if max_bias <= 0.0 {
        return 1.0;
    }
    let n_head_log2 = 1u32 << (n_head as f32).log2().floor() as u32;
    let m0 = 2.0f32.powf(-max_bias / n_head_log2 as f32);
    let m1 = 2.0f32.powf(-(max_bias / 2.0) / n_head_log2 as f32);
    if (h as u32) < n_head_log2 {
        m0.powf((h + 1) as f32)
    } else {
        m1.powf((2 * (h as i32 - n_head_log2 as i32) + 1) as f32)
    }
}
