//! ggml_backend_sched_compute_splits: copy each split's inputs in, then run the split on its
//! backend (as one graph, or in runs between the nodes an eval callback wants to see), with an
//! abort check after each split.

use super::Sched;
use crate::backend::{self, BufferUsage, GraphView, Status};
use crate::context::Context;
use crate::tensor::{flags, TensorId};
use crate::Op;

/// ggml copies this much past a run of experts (unless it ends at the last expert) so that
/// kernels reading a padded last row never see garbage.
const EXPERT_TAIL_PADDING: usize = 512;

impl Sched {
    /// Waits on the host for backend b's event of the current copy, or for the whole backend
    /// when it has no events.
    fn event_synchronize(&mut self, b: usize) -> Result<(), String> {
        if self.events_enabled[b] {
            if let Some(ev) = &self.events[b][self.cur_copy] {
                return ev.synchronize().map_err(|e| e.to_string());
            }
        }
        self.backend_synchronize(b)
    }

    /// Makes backend b's stream wait for its own event of the current copy.
    fn event_wait(&mut self, b: usize) -> Result<(), String> {
        if self.events_enabled[b] {
            if let Some(ev) = &self.events[b][self.cur_copy] {
                return self.backends[b].event_wait(ev).map_err(|e| e.to_string());
            }
        }
        self.backend_synchronize(b)
    }

    /// Copies only the experts the router picked, in runs of consecutive experts.
    #[allow(clippy::too_many_arguments)]
    fn copy_used_experts(
        &mut self,
        ctx: &Context,
        input: TensorId,
        input_cpy: TensorId,
        node: TensorId,
        later_inputs: &[TensorId],
        split_backend: usize,
        prev_ids: &mut Option<TensorId>,
        used: &mut Vec<bool>,
    ) -> Result<(), String> {
        let n_expert = ctx[input].ne[2] as usize;
        let expert_size = ctx[input].nb[2];
        let input_backend = self.bid(input) as usize;
        self.backend_synchronize(input_backend)?;

        // the ids may be an input of this split that has not been copied yet: read the original
        let mut ids_tensor = ctx[node].src[2].ok_or("MUL_MAT_ID without ids")?;
        let mut ids_backend = split_backend;
        for &later in later_inputs {
            if Some(ids_tensor) == self.copy_of(later, split_backend, self.cur_copy) {
                ids_tensor = later;
                ids_backend = self.bid(later) as usize;
                break;
            }
        }

        if *prev_ids != Some(ids_tensor) {
            let t = &ctx[ids_tensor];
            let mut bytes = vec![0u8; t.nbytes()];
            self.backends[ids_backend]
                .get_tensor_async(t, &mut bytes, 0)
                .map_err(|e| e.to_string())?;
            self.backend_synchronize(ids_backend)?;
            used.clear();
            used.resize(n_expert, false);
            for i1 in 0..t.ne[1] as usize {
                for i0 in 0..t.ne[0] as usize {
                    let at = i1 * t.nb[1] + i0 * t.nb[0];
                    let id = i32::from_le_bytes([
                        bytes[at],
                        bytes[at + 1],
                        bytes[at + 2],
                        bytes[at + 3],
                    ]);
                    if id < 0 || id as usize >= n_expert {
                        return Err(format!(
                            "expert id {id} out of range [0, {n_expert}) in {}",
                            t.name
                        ));
                    }
                    used[id as usize] = true;
                }
            }
            *prev_ids = Some(ids_tensor);
        }

        let mut copy_run = |first: usize, last: usize| -> Result<(), String> {
            let offset = first * expert_size;
            let padding = expert_size.min(EXPERT_TAIL_PADDING);
            let padding_end = if last < n_expert - 1 { padding } else { 0 };
            let mut tmp = vec![0u8; (last - first + 1) * expert_size + padding_end];
            backend::get_tensor(&ctx[input], &mut tmp, offset).map_err(|e| e.to_string())?;
            self.backends[split_backend]
                .set_tensor_async(&ctx[input_cpy], &tmp, offset)
                .map_err(|e| e.to_string())?;
            // the backend may read the bytes until it next synchronizes: keep them till then
            self.staging[split_backend].push(tmp);
            Ok(())
        };
        let mut run: Option<(usize, usize)> = None;
        for id in (0..n_expert).filter(|&i| used[i]) {
            run = match run {
                Some((first, last)) if id == last + 1 => Some((first, id)),
                Some((first, last)) => {
                    copy_run(first, last)?;
                    Some((id, id))
                }
                None => Some((id, id)),
            };
        }
        if let Some((first, last)) = run {
            copy_run(first, last)?;
        }
        Ok(())
    }

    fn copy_inputs(
        &mut self,
        ctx: &Context,
        split_id: usize,
        prev_ids: &mut Option<TensorId>,
        used: &mut Vec<bool>,
    ) -> Result<(), String> {
        let split_backend = self.splits[split_id].backend_id;
        let inputs = self.splits[split_id].inputs.clone();
        let first_node = self.splits[split_id].nodes.first().copied();
        for (k, &input) in inputs.iter().enumerate() {
            let input_backend = self.bid(input) as usize;
            let input_cpy = self
                .copy_of(input, split_backend, self.cur_copy)
                .ok_or("split input without a copy")?;
            if ctx[input].has_flag(flags::INPUT) {
                // the caller may overwrite its input as soon as we return: copy it now
                self.event_synchronize(split_backend)?;
                backend::tensor_copy(&ctx[input], &ctx[input_cpy]).map_err(|e| e.to_string())?;
                continue;
            }
            // the split backend must be done reading the previous contents of the copy
            self.event_wait(split_backend)?;
            let buf = ctx[input]
                .buffer()
                .ok_or_else(|| format!("input {} has no memory", ctx[input].name))?;
            let moe = first_node.is_some_and(|n| {
                buf.usage() == BufferUsage::Weights
                    && buf.is_host()
                    && matches!(ctx[n].op, Op::MulMatId)
                    && ctx[n].src[0] == Some(input_cpy)
            });
            if let (true, Some(node)) = (moe, first_node) {
                self.copy_used_experts(
                    ctx,
                    input,
                    input_cpy,
                    node,
                    &inputs[k + 1..],
                    split_backend,
                    prev_ids,
                    used,
                )?;
            } else if !self.backends[split_backend].cpy_tensor_async(&ctx[input], &ctx[input_cpy]) {
                self.backend_synchronize(input_backend)?;
                self.event_synchronize(split_backend)?;
                backend::tensor_copy(&ctx[input], &ctx[input_cpy]).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }

    pub(super) fn compute_splits(&mut self, ctx: &Context) -> Status {
        let mut prev_ids: Option<TensorId> = None;
        let mut used: Vec<bool> = Vec::new();
        let mut prev_backend: Option<usize> = None;

        for split_id in 0..self.n_splits {
            let b = self.splits[split_id].backend_id;
            // the allocator may have reused memory across splits: the previous backend must be
            // done before a split without inputs (and so without a wait) starts
            let mut ready = Ok(());
            if let Some(p) = prev_backend {
                if self.splits[split_id].inputs.is_empty() && p != b {
                    ready = self.event_synchronize(p);
                }
            }
            let ready =
                ready.and_then(|()| self.copy_inputs(ctx, split_id, &mut prev_ids, &mut used));
            if let Err(e) = ready {
                crate::log_error!("{}: {}\n", "ggml_backend_sched_compute_splits", e);
                return Status::Failed(e);
            }

            let nodes = std::mem::take(&mut self.splits[split_id].nodes);
            let status = match self.callback_eval.as_mut() {
                None => self.backends[b].graph_compute(GraphView { ctx, nodes: &nodes }),
                Some(cb) => {
                    let backend = &mut self.backends[b];
                    let mut status = Status::Success;
                    let mut j0 = 0;
                    while j0 < nodes.len() {
                        // the longest run of nodes the caller does not want to see, plus the one it does
                        let mut j1 = j0;
                        let mut need = cb(ctx, nodes[j1], true);
                        while !need && j1 + 1 < nodes.len() {
                            j1 += 1;
                            need = cb(ctx, nodes[j1], true);
                        }
                        status = backend.graph_compute(GraphView {
                            ctx,
                            nodes: &nodes[j0..=j1],
                        });
                        if status != Status::Success {
                            break;
                        }
                        if let Err(e) = backend.synchronize() {
                            status = Status::Failed(e.to_string());
                            break;
                        }
                        if need && !cb(ctx, nodes[j1], false) {
                            break;
                        }
                        j0 = j1 + 1;
                    }
                    status
                }
            };
            self.splits[split_id].nodes = nodes;
            if status != Status::Success {
                return status;
            }
            if self.abort_requested() {
                return Status::Aborted;
            }

            if self.events_enabled[b] {
                if let Some(ev) = &self.events[b][self.cur_copy] {
                    if let Err(e) = self.backends[b].event_record(ev) {
                        return Status::Failed(e.to_string());
                    }
                }
            }
            prev_backend = Some(b);
        }
        Status::Success
    }
}
