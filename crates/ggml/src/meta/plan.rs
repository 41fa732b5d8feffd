//! The compute plan of the meta backend: every node mapped to its slice on each device, and
//! the node list cut into subgraphs, each ending where an all-reduce is due.

use super::buffer::{meta_buffer_of, MetaBufferImpl};
use super::rules::{MetaError, Resolver, StateCache, StaticSplitFn};
use super::slice::{slice_shape, slice_view_offs};
use super::split::{SplitAxis, SplitState};
use crate::context::Context;
use crate::tensor::{flags, TensorData, TensorId};
use crate::Op;
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A run of nodes issued on every device, then (when `reduce` is set) the all-reduce of that
/// node's partial sums.
#[derive(Clone, Debug)]
pub struct Subgraph {
    /// first and last node index (inclusive) in the incoming node list
    pub first: usize,
    pub last: usize,
    /// the node index whose per-device values are summed after the run
    pub reduce: Option<usize>,
    /// the nodes each device computes (those with empty slices left out)
    pub nodes: Vec<Vec<TensorId>>,
}

pub struct Plan {
    /// what the plan was built from (ggml's graph uid)
    pub uid: u64,
    /// each device's view of the context: every meta tensor replaced by its slice
    pub ctxs: Vec<Context>,
    pub subgraphs: Vec<Subgraph>,
    /// per device and node index: whether the device computes the node
    pub computed: Vec<Vec<bool>>,
    /// each node's split state (without assume_sync)
    pub states: Vec<SplitState>,
}

/// The tensors the nodes touch: the nodes, their sources, and the view sources under both.
fn touched(ctx: &Context, nodes: &[TensorId]) -> BTreeSet<TensorId> {
    let mut out = BTreeSet::new();
    let mut stack: Vec<TensorId> = Vec::new();
    for &n in nodes {
        stack.push(n);
        stack.extend(ctx[n].srcs());
    }
    while let Some(t) = stack.pop() {
        if out.insert(t) {
            if let Some(v) = ctx[t].view_src {
                stack.push(v);
            }
        }
    }
    out
}

/// ggml's graph uid, as a hash of everything the plan depends on.
pub fn graph_uid(ctx: &Context, nodes: &[TensorId]) -> u64 {
    let mut h = DefaultHasher::new();
    nodes.hash(&mut h);
    for id in touched(ctx, nodes) {
        let t = &ctx[id];
        (
            id,
            t.ty,
            t.ne,
            t.nb,
            t.op.name(),
            t.src,
            t.view_src,
            t.view_offs,
        )
            .hash(&mut h);
        // meta buffers share one placeholder address space: a reallocated buffer has the same
        // addresses, so its identity is part of the graph too
        let buf = t.buffer().map(|b| Arc::as_ptr(b) as *const u8 as usize);
        (t.addr(), buf, t.flags, &t.name).hash(&mut h);
        if let Op::Permute { axes } = t.op {
            axes.hash(&mut h);
        }
    }
    h.finish()
}

fn use_counts(ctx: &Context, nodes: &[TensorId]) -> HashMap<TensorId, usize> {
    let mut m = HashMap::new();
    for &n in nodes {
        for s in ctx[n].srcs() {
            *m.entry(s).or_insert(0) += 1;
        }
    }
    m
}

struct Cutter<'a, 'b> {
    ctx: &'a Context,
    nodes: &'a [TensorId],
    res: Resolver<'b>,
    uses: HashMap<TensorId, usize>,
    computed: &'a [Vec<bool>],
}

impl Cutter<'_, '_> {
    fn axis(&mut self, t: TensorId) -> Result<SplitAxis, MetaError> {
        Ok(self.res.state(t, false)?.axis)
    }
    fn n_used(&self, i: usize) -> usize {
        self.uses.get(&self.nodes[i]).copied().unwrap_or(0)
    }
    fn is_host_view(&self, i: usize) -> bool {
        let t = &self.ctx[self.nodes[i]];
        t.view_src.is_some_and(|v| {
            self.ctx[v].op.is_none() && self.ctx[v].buffer().is_some_and(|b| b.is_host())
        })
    }

    /// Past the node, skip mirrored nodes that do not read it.
    fn skip_unrelated(&mut self, mut id: usize, node: TensorId) -> Result<usize, MetaError> {
        while id + 1 < self.nodes.len() {
            let next = self.nodes[id + 1];
            if self.axis(next)? != SplitAxis::Mirrored {
                break;
            }
            let mut safe = true;
            for s in self.ctx[next].srcs() {
                if s == node || self.axis(s)? != SplitAxis::Mirrored {
                    safe = false;
                    break;
                }
            }
            if !safe {
                break;
            }
            id += 1;
        }
        Ok(id)
    }

    /// get_i_delayed_branch: the last node after PARTIAL node i that the reduce can wait for:
    /// an ADD_ID bias, a chain of MULs by mirrored gates, and the view-and-add tree that sums
    /// MoE experts.
    fn delayed_branch(&mut self, i: usize) -> Result<usize, MetaError> {
        let ctx = self.ctx;
        let n = self.nodes.len();
        let mut id = i;
        let mut idr = i;
        let mut node = self.nodes[id];
        let mut n_used = self.n_used(id);

        id = self.skip_unrelated(id, node)?;
        if id + 1 >= n {
            return Ok(idr);
        }
        let next = self.nodes[id + 1];
        let nt = &ctx[next];
        if matches!(nt.op, Op::AddId)
            && nt.src[0] == Some(node)
            && self.axis(nt.src[1].expect("ADD_ID has b"))? == SplitAxis::Partial
            && self.axis(nt.src[2].expect("ADD_ID has ids"))? == SplitAxis::Mirrored
        {
            node = next;
            id += 1;
            idr = id;
            n_used = self.n_used(id);
        }
        loop {
            id = self.skip_unrelated(id, node)?;
            if id + 1 >= n {
                return Ok(idr);
            }
            let next = self.nodes[id + 1];
            let nt = &ctx[next];
            let gate_mirrored = match nt.src[1] {
                Some(s) => self.axis(s)? == SplitAxis::Mirrored,
                None => false,
            };
            if matches!(nt.op, Op::Mul) && nt.src[0] == Some(node) && gate_mirrored {
                node = next;
                id += 1;
                idr = id;
                n_used = self.n_used(id);
            } else {
                break;
            }
        }
        let nd = &ctx[node];
        if n_used as i64 != nd.ne[1] || id + 2 * n_used > n || n_used < 2 {
            return Ok(idr);
        }
        for k in 0..n_used {
            let next = &ctx[self.nodes[id + 1]];
            if !matches!(next.op, Op::View)
                || next.view_src != Some(node)
                || next.view_offs != k * nd.nb[1]
                || next.ne[0] != nd.ne[0]
                || next.ne[1] != nd.ne[2]
                || next.nb[1] != nd.nb[2]
                || self.n_used(id + 1) != 1
            {
                return Ok(idr);
            }
            id += 1;
        }
        {
            let next = &ctx[self.nodes[id + 1]];
            if !matches!(next.op, Op::Add)
                || next.src[0] != Some(self.nodes[id + 1 - n_used])
                || next.src[1] != Some(self.nodes[id + 2 - n_used])
                || self.n_used(id + 1) != 1
            {
                return Ok(idr);
            }
            id += 1;
        }
        for _ in 0..n_used - 2 {
            if id + 1 >= n {
                return Ok(idr);
            }
            let next = &ctx[self.nodes[id + 1]];
            if !matches!(next.op, Op::Add)
                || next.src[0] != Some(self.nodes[id])
                || next.src[1] != Some(self.nodes[id + 2 - n_used])
                || self.n_used(id + 1) != 1
            {
                return Ok(idr);
            }
            id += 1;
        }
        Ok(id)
    }

    /// get_i_delayed: also AllReduce(a) + AllReduce(b) == AllReduce(a + b) for an independent
    /// partial branch summed right after.
    fn delayed(&mut self, i: usize) -> Result<usize, MetaError> {
        let ctx = self.ctx;
        let i_delayed = self.delayed_branch(i)?;
        let node = self.nodes[i_delayed];
        if self.n_used(i_delayed) != 1 {
            return Ok(i_delayed);
        }
        for id in i_delayed + 1..self.nodes.len() {
            let next = &ctx[self.nodes[id]];
            if next.view_src == Some(node) || next.srcs().any(|s| s == node) {
                return Ok(i_delayed);
            }
            if self.is_host_view(id) || self.axis(self.nodes[id])? != SplitAxis::Partial {
                continue;
            }
            let i_other = id;
            let i_other_delayed = self.delayed_branch(i_other)?;
            let other = self.nodes[i_other_delayed];
            if self.n_used(i_other_delayed) != 1 || i_other_delayed + 1 >= self.nodes.len() {
                return Ok(i_delayed);
            }
            let sum_id = self.nodes[i_other_delayed + 1];
            let sum = &ctx[sum_id];
            let (nt, ot) = (&ctx[node], &ctx[other]);
            let pair = (sum.src[0] == Some(node) && sum.src[1] == Some(other))
                || (sum.src[0] == Some(other) && sum.src[1] == Some(node));
            if !matches!(sum.op, Op::Add)
                || nt.ne != ot.ne
                || nt.ty != ot.ty
                || sum.ty != nt.ty
                || !pair
                || self.axis(sum_id)? != SplitAxis::Mirrored
            {
                return Ok(i_delayed);
            }
            if self.computed.iter().any(|c| c[i] != c[i_other]) {
                return Ok(i_delayed);
            }
            return Ok(i_other_delayed + 1);
        }
        Ok(i_delayed)
    }
}

/// Builds the plan for `nodes` of `ctx` over n devices.
pub fn build_plan(
    ctx: &Context,
    nodes: &[TensorId],
    n: usize,
    static_split: &StaticSplitFn,
    cache: &mut StateCache,
) -> Result<Plan, MetaError> {
    let uid = graph_uid(ctx, nodes);
    let touched = touched(ctx, nodes);
    let mut res = Resolver {
        ctx,
        n,
        static_split,
        cache,
    };
    let mut sync_state: HashMap<TensorId, SplitState> = HashMap::new();
    for &id in &touched {
        if meta_buffer_of(&ctx[id]).is_some() || ctx[id].buffer().is_none() {
            sync_state.insert(id, res.state(id, true)?);
        }
    }

    // each device's context
    let mut ctxs = Vec::with_capacity(n);
    for j in 0..n {
        let mut cj = ctx.clone();
        for id in ctx.ids() {
            let t = &ctx[id];
            let Some(mb) = meta_buffer_of(t) else {
                continue;
            };
            let Some(s) = sync_state.get(&id) else {
                // not used here: nothing may reach the placeholder address
                cj[id].data = None;
                continue;
            };
            let (ne, nb) = slice_shape(t, s, j);
            let data = match t.view_src.filter(|&v| meta_buffer_of(&ctx[v]).is_some()) {
                Some(v) => {
                    let vs = &sync_state[&v];
                    let offs = slice_view_offs(t, s, &ctx[v], vs, j);
                    let base = cj[v].data.clone().ok_or_else(|| {
                        MetaError(format!("view source of '{}' has no slice", t.name))
                    })?;
                    TensorData {
                        buffer: base.buffer,
                        addr: base.addr + offs,
                    }
                }
                None => match mb.static_at(t.addr()) {
                    Some((_, addrs)) => TensorData {
                        buffer: mb.simple()[j].clone(),
                        addr: addrs[j],
                    },
                    None => TensorData {
                        buffer: mb.simple()[j].clone(),
                        addr: mb.compute_addr(t.addr(), j),
                    },
                },
            };
            let x = &mut cj[id];
            x.ne = ne;
            x.nb = nb;
            x.data = Some(data);
        }
        // a node with an empty slice, or reading one, is not computed on this device
        for &id in nodes {
            let empty = sync_state.get(&id).is_some_and(|s| s.is_empty_on(j))
                || ctx[id]
                    .srcs()
                    .any(|s| sync_state.get(&s).is_some_and(|ss| ss.is_empty_on(j)));
            if empty {
                cj[id].flags &= !flags::COMPUTE;
            }
        }
        ctxs.push(cj);
    }

    let mut computed: Vec<Vec<bool>> = ctxs
        .iter()
        .map(|cj| {
            nodes
                .iter()
                .map(|&id| cj[id].has_flag(flags::COMPUTE))
                .collect()
        })
        .collect();
    let mut states = Vec::with_capacity(nodes.len());
    for &id in nodes {
        states.push(res.state(id, false)?);
    }

    let mut cuts: Vec<(usize, usize, Option<usize>)> = Vec::new();
    {
        let uses = use_counts(ctx, nodes);
        let mut cut = Cutter {
            ctx,
            nodes,
            res,
            uses,
            computed: &computed,
        };
        let mut i_start = 0;
        let mut i = 0;
        while i < nodes.len() {
            let partial = states[i].is_partial() && !cut.is_host_view(i);
            if !(partial || i + 1 == nodes.len()) {
                i += 1;
                continue;
            }
            let i_delayed = if partial { cut.delayed(i)? } else { i };
            cuts.push((i_start, i_delayed, partial.then_some(i)));
            i_start = i_delayed + 1;
            i = i_delayed + 1;
        }
    }
    let mut subgraphs = Vec::with_capacity(cuts.len());
    for (first, last, partial_at) in cuts {
        // a device that skips the partial node contributes zeros to the reduce; with a delayed
        // reduce, every node up to the reduce point must be skipped too or it would contribute
        // whatever those nodes computed from the missing input
        if let Some(i) = partial_at {
            for (j, cj) in ctxs.iter_mut().enumerate() {
                if !computed[j][i] {
                    for ii in i + 1..=last {
                        cj[nodes[ii]].flags &= !flags::COMPUTE;
                        computed[j][ii] = false;
                    }
                }
            }
        }
        let per_dev = (0..n)
            .map(|j| {
                (first..=last)
                    .filter(|&k| computed[j][k])
                    .map(|k| nodes[k])
                    .collect()
            })
            .collect();
        subgraphs.push(Subgraph {
            first,
            last,
            reduce: partial_at.map(|_| last),
            nodes: per_dev,
        });
    }

    // reads of the graph's outputs gather by these; what an earlier plan recorded in the same
    // buffers may name memory that now holds other tensors
    let mut cleared: Vec<*const MetaBufferImpl> = Vec::new();
    for &id in nodes {
        if let Some(mb) = meta_buffer_of(&ctx[id]) {
            if !cleared.contains(&(mb as *const _)) {
                mb.clear_compute_states();
                cleared.push(mb);
            }
        }
    }
    for &id in nodes {
        if let (Some(mb), Some(s)) = (meta_buffer_of(&ctx[id]), sync_state.get(&id)) {
            let addrs = ctxs.iter().map(|c| c[id].addr()).collect();
            mb.record_compute_state(&ctx[id], s, addrs);
        }
    }
    Ok(Plan {
        uid,
        ctxs,
        subgraphs,
        computed,
        states,
    })
}
