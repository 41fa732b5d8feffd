//! How a compute tensor's split follows from its sources (ggml_backend_meta_get_split_state):
//! every source is resolved first (with assume_sync, so a PARTIAL source counts as the MIRRORED
//! tensor it will be once reduced), then the op's rule decides. The table is a whitelist: a
//! combination no rule covers is an error naming the op and the tensors.

use super::split::{SplitAxis, SplitState};
use crate::backend::BufferUsage;
use crate::context::Context;
use crate::tensor::{Tensor, TensorId, MAX_DIMS};
use crate::Op;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// The split state a statically allocated tensor (a weight, a cache) gets: the user callback
/// of ggml_backend_meta_device.
pub type StaticSplitFn = dyn Fn(&Tensor) -> SplitState + Send + Sync;

#[derive(Debug, Clone, thiserror::Error)]
#[error("meta device: {0}")]
pub struct MetaError(pub String);

fn err<T>(msg: String) -> Result<T, MetaError> {
    Err(MetaError(msg))
}

/// What of a tensor its split state depends on; a change invalidates the cache (ggml compares
/// the whole tensor struct with memcmp).
fn fingerprint(ctx: &Context, id: TensorId) -> u64 {
    fn one(t: &Tensor, h: &mut DefaultHasher) {
        t.ty.hash(h);
        t.ne.hash(h);
        t.nb.hash(h);
        t.op.name().hash(h);
        match t.op {
            Op::Permute { axes } => axes.hash(h),
            Op::Concat { dim } => dim.hash(h),
            _ => {}
        }
        t.src.hash(h);
        t.view_src.hash(h);
        t.view_offs.hash(h);
        t.name.hash(h);
        t.addr().hash(h);
        t.buffer().map(|b| b.usage() as u8).hash(h);
    }
    let mut h = DefaultHasher::new();
    let t = &ctx[id];
    one(t, &mut h);
    // a source replaced under the same id changes the answer too
    for s in t.srcs() {
        one(&ctx[s], &mut h);
    }
    h.finish()
}

/// Split states already worked out, keyed on the tensor and the assume_sync flag. Unbounded, as
/// ggml's; cleared whole when an entry is found stale.
#[derive(Default)]
pub struct StateCache {
    map: HashMap<(TensorId, bool), (u64, SplitState)>,
    /// GGML_META_DEBUG: print each state when first worked out
    pub debug: bool,
}

impl StateCache {
    pub fn new() -> StateCache {
        StateCache {
            map: HashMap::new(),
            debug: std::env::var("GGML_META_DEBUG")
                .ok()
                .and_then(|v| v.trim().parse::<i32>().ok())
                .is_some_and(|v| v > 0),
        }
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Resolves split states over one context.
pub struct Resolver<'a> {
    pub ctx: &'a Context,
    pub n: usize,
    pub static_split: &'a (dyn Fn(&Tensor) -> SplitState + Send + Sync + 'a),
    pub cache: &'a mut StateCache,
}

/// A tensor whose split comes from the callback: a leaf that is not in a compute buffer.
fn is_static(t: &Tensor) -> bool {
    t.op.is_none()
        && t.view_src.is_none()
        && t.buffer().is_none_or(|b| b.usage() != BufferUsage::Compute)
}

impl Resolver<'_> {
    /// ggml_backend_meta_get_split_state(tensor, assume_sync)
    pub fn state(&mut self, id: TensorId, assume_sync: bool) -> Result<SplitState, MetaError> {
        let fp = fingerprint(self.ctx, id);
        if let Some((f, s)) = self.cache.map.get(&(id, assume_sync)) {
            if *f == fp {
                return Ok(s.clone());
            }
            self.cache.map.clear();
        }
        let s = self.calculate(id, assume_sync)?;
        if self.cache.debug {
            self.print(id, &s)?;
        }
        self.cache.map.insert((id, assume_sync), (fp, s.clone()));
        Ok(s)
    }

    fn print(&mut self, id: TensorId, s: &SplitState) -> Result<(), MetaError> {
        let t = &self.ctx[id];
        let mut srcs = Vec::new();
        for src in t.srcs().filter(|&x| x != id) {
            let ss = self.state(src, true)?;
            let st = &self.ctx[src];
            srcs.push(format!("{}[{}, {}]", st.name, st.op.name(), ss));
        }
        crate::log_debug!(
            "SPLIT_STATE: {{{}}} -> {}[{}, {}]\n",
            srcs.join(", "),
            t.name,
            t.op.name(),
            s
        );
        Ok(())
    }

    fn calculate(&mut self, id: TensorId, assume_sync: bool) -> Result<SplitState, MetaError> {
        let ctx = self.ctx;
        let t = &ctx[id];
        if t.nelements() == 0 {
            // nothing to distribute: every device holds the (empty) whole
            return Ok(SplitState::mirrored());
        }
        if is_static(t) {
            let s = (self.static_split)(t);
            self.check_static(t, &s)?;
            return Ok(s);
        }
        let mut src_ss: Vec<Option<SplitState>> = vec![None; t.src.len()];
        for (i, s) in t.src.iter().enumerate() {
            if let Some(s) = *s {
                if s != id {
                    src_ss[i] = Some(self.state(s, true)?);
                }
            }
        }
        let mut rule = Rule {
            ctx,
            t,
            n: self.n,
            ss: &src_ss,
            assume_sync,
        };
        let mut out = rule.apply()?;
        rule.take_ratio(&mut out)?;
        Ok(out)
    }

    fn check_static(&self, t: &Tensor, s: &SplitState) -> Result<(), MetaError> {
        if let Some(d) = s.axis.dim() {
            if s.nr.is_empty() || s.ne.len() != self.n * s.n_segments() {
                return err(format!(
                    "split of '{}' has {} counts in {} segments for {} devices",
                    t.name,
                    s.ne.len(),
                    s.n_segments(),
                    self.n
                ));
            }
            let g = if d == 0 { t.ty.block_size() as i64 } else { 1 };
            if s.ne.iter().any(|&x| x < 0 || x % g != 0) {
                return err(format!(
                    "split of '{}' along axis {d} is not in whole blocks of {g}: {:?}",
                    t.name, s.ne
                ));
            }
            let sum: i64 = (0..self.n).map(|j| s.count(j)).sum();
            if sum != t.ne[d] {
                return err(format!(
                    "split of '{}' along axis {d} covers {sum} of {} elements",
                    t.name, t.ne[d]
                ));
            }
        }
        Ok(())
    }
}

struct Rule<'a> {
    ctx: &'a Context,
    t: &'a Tensor,
    n: usize,
    ss: &'a [Option<SplitState>],
    assume_sync: bool,
}

fn axis_of(s: &Option<SplitState>) -> Option<SplitAxis> {
    s.as_ref().map(|s| s.axis)
}

impl Rule<'_> {
    fn src(&self, i: usize) -> Result<&SplitState, MetaError> {
        self.ss[i].as_ref().ok_or_else(|| {
            MetaError(format!(
                "{} '{}' lacks source {i}",
                self.t.op.name(),
                self.t.name
            ))
        })
    }
    fn src_t(&self, i: usize) -> &Tensor {
        &self.ctx[self.t.src[i].expect("source resolved before")]
    }
    fn unsupported<T>(&self, what: &str) -> Result<T, MetaError> {
        let srcs: Vec<String> = self
            .t
            .src
            .iter()
            .zip(self.ss)
            .filter_map(|(s, ss)| {
                Some(format!(
                    "{}={}",
                    self.ctx[(*s)?].name,
                    ss.as_ref()?.axis.name()
                ))
            })
            .collect();
        err(format!(
            "unsupported {} split states ({what}): node={} {}",
            self.t.op.name(),
            self.t.name,
            srcs.join(" ")
        ))
    }

    /// handle_generic: every source must agree; scalar_only refuses a real axis.
    fn generic(&self, scalar_only: bool) -> Result<SplitState, MetaError> {
        let mut ret: Option<&SplitState> = None;
        for s in self.ss.iter().flatten() {
            match ret {
                None => ret = Some(s),
                Some(r) if !r.equal(s, self.n) => return self.unsupported("sources disagree"),
                _ => {}
            }
        }
        let Some(r) = ret else {
            return self.unsupported("no sources");
        };
        if scalar_only && r.axis.dim().is_some() {
            return self.unsupported("op needs whole tensors");
        }
        Ok(r.clone())
    }

    /// handle_per_row: rows are independent, so any split but along the row passes through.
    fn per_row(&self) -> Result<SplitState, MetaError> {
        let s = self.src(0)?;
        if s.axis == SplitAxis::Axis(0) {
            return self.unsupported("split along the row");
        }
        Ok(s.clone())
    }

    /// handle_bin_bcast: a split src0 with a src1 broadcast along the split axis, ADD_ID's bias
    /// add, else all sources alike.
    fn bin_bcast(&self) -> Result<SplitState, MetaError> {
        let s0 = self.src(0)?;
        let s1 = self.src(1)?;
        if let Some(d) = s0.axis.dim() {
            if self.src_t(1).ne[d] == 1 && s1.is_mirrored() {
                return Ok(s0.clone());
            }
        }
        let s2 = axis_of(&self.ss[2]);
        if s2 == Some(SplitAxis::Mirrored)
            && (s0.axis == s1.axis || s0.is_mirrored() && s1.is_partial())
        {
            return Ok(s0.clone()); // ADD_ID
        }
        if s2.is_some() && s2 != Some(SplitAxis::Mirrored) {
            return self.unsupported("ids not mirrored");
        }
        self.generic(false)
    }

    fn concat(&self, dim: i32) -> Result<SplitState, MetaError> {
        let (s0, s1) = (self.src(0)?, self.src(1)?);
        let cat = SplitAxis::Axis(dim as usize);
        if s0.is_mirrored() && s1.axis.dim().is_some() {
            if s1.axis == cat {
                return self.unsupported("split along the concat axis");
            }
            return Ok(s1.clone());
        }
        if s1.is_mirrored() && s0.axis.dim().is_some() {
            if s0.axis == cat {
                return self.unsupported("split along the concat axis");
            }
            return Ok(s0.clone());
        }
        if s0.axis == s1.axis && s0.axis != cat {
            return Ok(s0.clone());
        }
        self.generic(true)
    }

    /// handle_mul_mat: the algebra of tensor parallelism.
    fn mul_mat(&self) -> Result<SplitState, MetaError> {
        let (s0, s1) = (self.src(0)?, self.src(1)?);
        use SplitAxis::*;
        match (s0.axis, s1.axis) {
            // replicated work
            (Mirrored, Mirrored) => Ok(SplitState::mirrored()),
            // column-parallel: outputs are split. ggml gives the result one segment: each
            // device's rows of every segment of a fused weight (Q_j K_j V_j) back to back.
            (Axis(1), Mirrored) => Ok(SplitState::axis(
                0,
                (0..self.n).map(|j| s0.count(j)).collect(),
            )),
            (Mirrored, Axis(1)) => Ok(s1.clone()),
            // row-parallel: partial sums, reduced before anyone reads them
            (Axis(0), Axis(0)) => {
                if !s0.equal(s1, self.n) {
                    return self.unsupported("contraction splits differ");
                }
                Ok(if self.assume_sync {
                    SplitState::mirrored()
                } else {
                    SplitState::partial()
                })
            }
            (Axis(a), Axis(b)) if a == b && a >= 2 => {
                if !s0.equal(s1, self.n) {
                    return self.unsupported("batch splits differ");
                }
                Ok(s0.clone())
            }
            // batched matmul with the batches split and a replicated activation
            (Axis(a), Mirrored) if a >= 2 => Ok(s0.clone()),
            _ => self.unsupported("no matmul rule"),
        }
    }

    /// handle_reshape: which output dimension the split axis lands on.
    fn reshape(&self) -> Result<SplitState, MetaError> {
        let s = self.src(0)?;
        let Some(axis) = s.axis.dim() else {
            return Ok(s.clone());
        };
        let src = self.src_t(0);
        let t = self.t;
        let mut base_in: i64 = src.ne[..=axis].iter().product();
        // ggml divides out the repetitions of a one-segment split only: the pattern that
        // repeats is then what the output's dimension must hold a whole number of
        if s.n_segments() == 1 {
            base_in /= s.nr0() as i64;
            if axis == src.n_dims() - 1 && s.nr0() == 1 {
                return Ok(SplitState::axis_nr(t.n_dims() - 1, 1));
            }
            if axis == 0 && t.ne[0] == src.ne[0] && t.ne[1] == 1 && s.nr0() == 1 {
                let complete_rows = (0..self.n).all(|j| s.ne[j] == 0 || s.ne[j] == src.ne[0]);
                if complete_rows {
                    // a whole-row split moves to the following singleton dimension
                    return Ok(SplitState::axis_nr(1, 1));
                }
            }
        }
        let mut base_out: i64 = 1;
        for dim in 0..MAX_DIMS {
            base_out *= t.ne[dim];
            if base_out % base_in == 0 {
                return Ok(SplitState::axis_nr(dim, (base_out / base_in) as u32));
            }
            if base_out > base_in {
                if !s.is_simple() {
                    return self.unsupported("reshape of a repeated or segmented split");
                }
                return Ok(SplitState::axis_nr(dim, 1));
            }
        }
        self.unsupported("shape mismatch")
    }

    fn view(&self) -> Result<SplitState, MetaError> {
        let t = self.t;
        let src = self.src_t(0);
        let s = self.src(0)?;
        if t.is_contiguous() && src.is_contiguous() {
            return self.reshape();
        }
        let same_strides =
            (0..MAX_DIMS).all(|d| (t.ne[d] == 1 && src.ne[d] == 1) || t.nb[d] == src.nb[d]);
        if same_strides {
            return Ok(s.clone());
        }
        if let Some(axis) = s.axis.dim() {
            if !t.is_permuted() && !src.is_permuted() && axis < MAX_DIMS - 1 {
                for dim in 0..MAX_DIMS - 1 {
                    if t.nb[dim + 1] == src.nb[axis + 1] {
                        return Ok(SplitState::axis_nr(dim, 1));
                    }
                }
                return self.unsupported("view strides match no split dimension");
            }
            return self.unsupported("view of a permuted tensor");
        }
        Ok(s.clone())
    }

    /// handle_permute: the split axis follows the permutation.
    fn permute(&self, axes: [i32; 4]) -> Result<SplitState, MetaError> {
        let s = self.src(0)?;
        match s.axis.dim() {
            Some(a) => {
                self.one_pattern(s)?;
                Ok(SplitState::axis_nr(axes[a] as usize, s.nr0()))
            }
            None => Ok(s.clone()),
        }
    }

    fn transpose(&self) -> Result<SplitState, MetaError> {
        let s = self.src(0)?;
        match s.axis {
            SplitAxis::Axis(a) if a < 2 => {
                self.one_pattern(s)?;
                Ok(SplitState::axis_nr(a ^ 1, s.nr0()))
            }
            _ => Ok(s.clone()),
        }
    }

    /// Permute and transpose keep the repetitions of one segment (ggml asserts n_segments == 1
    /// or nr[0] == 1): several segments that repeat have no one count to carry.
    fn one_pattern(&self, s: &SplitState) -> Result<(), MetaError> {
        if s.n_segments() > 1 && s.nr0() != 1 {
            return self.unsupported("several segments that repeat");
        }
        Ok(())
    }

    fn get_rows(&self) -> Result<SplitState, MetaError> {
        let (s0, s1) = (self.src(0)?, self.src(1)?);
        if s0.axis == SplitAxis::Axis(0) && s1.is_mirrored() {
            return Ok(s0.clone());
        }
        self.generic(true)
    }

    fn set_rows(&self) -> Result<SplitState, MetaError> {
        let (s0, s1, s2) = (self.src(0)?, self.src(1)?, self.src(2)?);
        if s0.axis == SplitAxis::Axis(1) {
            return self.unsupported("rows split across devices");
        }
        if !s1.is_mirrored() {
            return self.unsupported("indices not mirrored");
        }
        if !s0.equal(s2, self.n) {
            return self.unsupported("rows and destination split differently");
        }
        Ok(s2.clone())
    }

    fn rope(&self) -> Result<SplitState, MetaError> {
        if !self.src(1)?.is_mirrored() {
            return self.unsupported("positions not mirrored");
        }
        Ok(self.src(0)?.clone())
    }

    /// handle_flash_attn_ext: Q/K/V split on heads (axis 2) gives the heads of the result
    /// (axis 1); all mirrored gives mirrored.
    fn flash_attn_ext(&self) -> Result<SplitState, MetaError> {
        use SplitAxis::*;
        if let Some(m) = axis_of(&self.ss[3]) {
            if m != Mirrored {
                return self.unsupported("mask not mirrored");
            }
        }
        let (q, k, v) = (self.src(0)?, self.src(1)?, self.src(2)?);
        let sinks = axis_of(&self.ss[4]);
        if q.is_mirrored() {
            if !k.is_mirrored() || !v.is_mirrored() || sinks.is_some_and(|s| s != Mirrored) {
                return self.unsupported("mirrored Q with split K/V");
            }
            return Ok(SplitState::mirrored());
        }
        if q.axis != Axis(2) {
            return self.unsupported("Q not split by heads");
        }
        let kv_split = k.axis == Axis(2) && v.axis == Axis(2);
        let kv_mirrored = k.is_mirrored() && v.is_mirrored();
        if !(kv_split || kv_mirrored) || sinks.is_some_and(|s| s != Axis(0)) {
            return self.unsupported("K/V not split like Q");
        }
        Ok(SplitState::axis_nr(1, 1))
    }

    fn apply(&mut self) -> Result<SplitState, MetaError> {
        match self.t.op {
            Op::None => Ok(SplitState::mirrored()),
            Op::Dup => self.generic(true),
            Op::Add | Op::AddId | Op::Sub | Op::Mul | Op::Div => self.bin_bcast(),
            Op::Sqr
            | Op::Sqrt
            | Op::Scale { .. }
            | Op::Clamp { .. }
            | Op::Fill { .. }
            | Op::Unary(_) => self.generic(false),
            Op::Glu { .. } | Op::SoftMax { .. } | Op::Repeat => self.generic(false),
            Op::Sum => self.generic(true),
            Op::SumRows | Op::Mean | Op::Argmax | Op::Argsort { .. } | Op::TopK { .. } => {
                self.per_row()
            }
            Op::Norm { .. } | Op::RmsNorm { .. } => self.per_row(),
            Op::Concat { dim } => self.concat(dim),
            Op::MulMat { .. } | Op::MulMatId => self.mul_mat(),
            Op::Cpy => {
                if self.src(0)?.axis.dim().is_some() {
                    self.reshape()
                } else {
                    self.generic(false)
                }
            }
            Op::Cont | Op::Reshape => self.reshape(),
            Op::View => self.view(),
            Op::Permute { axes } => self.permute(axes),
            Op::Transpose => self.transpose(),
            Op::GetRows => self.get_rows(),
            Op::SetRows => self.set_rows(),
            Op::Rope(_) => self.rope(),
            Op::FlashAttnExt { .. } => self.flash_attn_ext(),
        }
    }

    /// Per-device counts of a real-axis result, in the ratio of the first source split along a
    /// real axis; every other such source must agree with that ratio. A result that keeps its
    /// source's extent along the axis and the rule's state unchanged (an elementwise op) keeps
    /// the source's segments, so that it reads back in its own layout; any other result is one
    /// segment repeated as the rule says (ggml keeps nr[0] and drops the rest).
    fn take_ratio(&self, out: &mut SplitState) -> Result<(), MetaError> {
        let Some(axis) = out.axis.dim() else {
            return Ok(());
        };
        let mut first = true;
        for (i, ss) in self.ss.iter().enumerate() {
            let Some(ss) = ss else { continue };
            let Some(src_axis) = ss.axis.dim() else {
                continue;
            };
            let src_ne = self.src_t(i).ne[src_axis];
            if first {
                if self.t.ne[axis] == src_ne && out.nr == ss.nr && out.ne == ss.ne {
                    first = false;
                    continue;
                }
                let nr = out.nr0();
                let mut ne = vec![0i64; self.n];
                for (j, x) in ne.iter_mut().enumerate() {
                    *x = ss.count(j) * self.t.ne[axis];
                    if *x != 0 || src_ne != 0 {
                        let div = src_ne * nr as i64;
                        if div == 0 || *x % div != 0 {
                            return self.unsupported("split does not divide the result");
                        }
                        *x /= div;
                    }
                }
                out.ne = ne;
                out.nr = vec![nr];
                first = false;
            } else {
                for j in 0..self.n {
                    if out.count(j) * src_ne != ss.count(j) * self.t.ne[axis] {
                        return self.unsupported("sources split in different ratios");
                    }
                }
            }
        }
        if first {
            return self.unsupported("split result without a split source");
        }
        Ok(())
    }
}
