//! The scheduler reservation at context creation (sched_reserve): the automatic flash
//! attention decision, the prompt-processing and token-generation worst-case graphs, and the
//! compute buffer sizes and graph figures of startup-log part 4.

use crate::context::Context;
use crate::error::{LlamaError, Result};
use crate::graph::BuiltGraph;
use ggml::Op;
use std::time::Instant;

const MIB: f64 = 1024.0 * 1024.0;

impl Context {
    /// graph_reserve: build the graph of a worst-case ubatch and size (or only split) it.
    fn graph_reserve(
        &mut self,
        n_tokens: usize,
        n_seqs: usize,
        n_outputs: usize,
        split_only: bool,
    ) -> Result<BuiltGraph> {
        ggml::log_debug!(
            "graph_reserve: reserving a graph for ubatch with n_tokens = {:4}, n_seqs = {:2}, n_outputs = {:4}\n",
            n_tokens,
            n_seqs,
            n_outputs
        );
        // a ubatch gives every sequence the same number of tokens
        let n_tokens = if !n_tokens.is_multiple_of(n_seqs.max(1)) {
            let n = n_tokens.div_ceil(n_seqs) * n_seqs;
            ggml::log_debug!(
                "graph_reserve: making n_tokens a multiple of n_seqs - n_tokens = {}, n_seqs = {}, n_outputs = {}\n",
                n,
                n_seqs,
                n_outputs
            );
            n
        } else {
            n_tokens
        };
        self.sched.reset();
        self.prev = None;
        let n_kv_swa = self.kv.swa.as_ref().map_or(0, |c| c.size());
        let p = self.graph_params(n_tokens, n_outputs, self.kv.base.size(), n_kv_swa);
        let mut built = self.build_graph(p);
        log_input_tensors(&built);
        built.inputs.n_tensors = count_inputs(&built);
        // without memory (no_alloc models) the buffers are only measured
        let res = if split_only || self.model.no_alloc() {
            self.sched.reserve_size(&mut built.graph).map(|sizes| {
                if !split_only {
                    self.compute_sizes = sizes;
                }
            })
        } else {
            self.sched.reserve(&mut built.graph).map(|_| {
                self.compute_sizes = (0..self.backend_bufts.len())
                    .map(|i| self.sched.get_buffer_size(i))
                    .collect();
            })
        };
        res.map_err(|e| {
            ggml::log_error!("graph_reserve: failed to allocate compute buffers\n");
            LlamaError::Alloc {
                what: "compute buffers".into(),
                buft: "compute".into(),
                size: 0,
                why: e.to_string(),
            }
        })?;
        Ok(built)
    }

    pub(crate) fn sched_reserve(&mut self, max_nodes: usize) -> Result<()> {
        let t_start = Instant::now();
        ggml::log_debug!("sched_reserve: max_nodes = {}\n", max_nodes);
        ggml::log_debug!("sched_reserve: reserving full memory module\n");
        let n_seqs = self.cparams.n_seq_max as usize;
        let n_tokens = self.cparams.n_ctx.min(self.cparams.n_ubatch) as usize;
        // a reservation with zero outputs is not meaningful: one per sequence
        let n_outputs = n_seqs;
        ggml::log_debug!(
            "sched_reserve: worst-case: n_tokens = {}, n_seqs = {}, n_outputs = {}\n",
            n_tokens,
            n_seqs,
            n_outputs
        );

        if self.cparams.auto_fa {
            let g = self.graph_reserve(n_seqs, n_seqs, n_seqs, true)?;
            // flash attention stays on only where each layer's fused node runs on the layer's device
            let mut mismatch = false;
            let fa_nodes = g
                .graph
                .nodes
                .iter()
                .filter(|&&n| matches!(g.graph.ctx[n].op, Op::FlashAttnExt { .. }));
            for (il, &n) in fa_nodes.enumerate() {
                let dev_fa = self
                    .sched
                    .get_tensor_backend(n)
                    .map(|b| self.backend_devs[b].clone());
                let dev_kv = if self.cparams.offload_kqv {
                    self.model.dev_layer(il).cloned()
                } else {
                    self.backend_devs.last().cloned()
                };
                let same = match (&dev_fa, &dev_kv) {
                    (Some(a), Some(b)) => {
                        std::ptr::addr_eq(std::sync::Arc::as_ptr(a), std::sync::Arc::as_ptr(b))
                    }
                    _ => false,
                };
                if !same {
                    ggml::log_warn!(
                        "resolve_fused_ops: layer {} is assigned to device {} but the Flash Attention tensor is assigned to device {} (usually due to missing support)\n",
                        il,
                        dev_kv.as_ref().map_or("none", |d| d.name()),
                        dev_fa.as_ref().map_or("none", |d| d.name())
                    );
                    mismatch = true;
                    break;
                }
            }
            if mismatch {
                self.cparams.flash_attn = false;
                ggml::log_warn!(
                    "resolve_fused_ops: Flash Attention not supported, set to disabled\n"
                );
            } else {
                self.cparams.flash_attn = true;
                ggml::log_info!("resolve_fused_ops: Flash Attention enabled\n");
            }
            self.cparams.auto_fa = false;
        }
        // llama.cpp probes its fused DeepSeek V4 hyper-connection ops on every model; none of this
        // model's nodes use them, so each probe finds nothing to move and reports them enabled
        if self.cparams.auto_fhc {
            ggml::log_info!("resolve_fused_ops: resolving fused DeepSeek V4 HC support:\n");
            for stage in ["pre", "comb", "post"] {
                self.graph_reserve(n_seqs, n_seqs, n_seqs, true)?;
                ggml::log_info!(
                    "resolve_fused_ops: fused DeepSeek V4 HC {} enabled\n",
                    stage
                );
            }
            self.cparams.auto_fhc = false;
        }

        let n_outputs_pp = n_tokens.min(self.cparams.n_outputs_max as usize);
        let pp = self.graph_reserve(n_tokens, n_seqs, n_outputs_pp, false).inspect_err(|_| {
            ggml::log_error!("llama_init_from_model: failed to initialize the context: failed to allocate compute pp buffers\n");
        })?;
        let (n_splits_pp, n_nodes_pp) = (self.sched.n_splits(), pp.graph.n_nodes());
        let (objs_pp, inps_pp) = (pp.inputs.n_objects, pp.inputs.n_tensors);
        let tg = self.graph_reserve(n_seqs, n_seqs, n_seqs, false)?;
        let (n_splits_tg, n_nodes_tg) = (self.sched.n_splits(), tg.graph.n_nodes());
        let (objs_tg, inps_tg) = (tg.inputs.n_objects, tg.inputs.n_tensors);
        // the pp graph again, so that inference does not reallocate
        self.graph_reserve(n_tokens, n_seqs, n_outputs_pp, false)?;

        for (i, buft) in self.backend_bufts.iter().enumerate() {
            let size = self.compute_sizes.get(i).copied().unwrap_or(0);
            if size > 1 {
                ggml::log_info!(
                    "sched_reserve: {:>10} compute buffer size = {:8.2} MiB\n",
                    buft.name(),
                    size as f64 / MIB
                );
            }
        }
        // any figure that differs between the two graphs prints every figure as "pp / tg"
        let diff = n_nodes_pp != n_nodes_tg
            || n_splits_pp != n_splits_tg
            || objs_pp != objs_tg
            || inps_pp != inps_tg;
        let fmt = |a: usize, b: usize| {
            if diff {
                format!("{a} / {b}")
            } else {
                a.to_string()
            }
        };
        let tag = if diff {
            format!(" (pp bs={}, tg bs={})", n_tokens, n_seqs)
        } else {
            String::new()
        };
        ggml::log_info!(
            "sched_reserve: graph{}: nodes = {}, splits = {}, input objects = {}, input tensors = {}\n",
            tag,
            fmt(n_nodes_pp, n_nodes_tg),
            fmt(n_splits_pp, n_splits_tg),
            fmt(objs_pp, objs_tg),
            fmt(inps_pp, inps_tg)
        );
        self.n_nodes_splits = (n_nodes_pp, n_splits_pp);
        ggml::log_info!(
            "sched_reserve: reserve took {:.2} ms, sched copies = {}\n",
            t_start.elapsed().as_secs_f64() * 1e3,
            self.sched.n_copies()
        );
        Ok(())
    }
}

/// Input tensors that some node of the graph reads (ggml_graph_n_input_tensors).
fn graph_inputs(b: &BuiltGraph) -> Vec<ggml::TensorId> {
    let ctx = &b.graph.ctx;
    let used = |t| b.graph.nodes.iter().any(|&n| ctx[n].srcs().any(|s| s == t));
    b.inputs.all().into_iter().filter(|&t| used(t)).collect()
}

fn count_inputs(b: &BuiltGraph) -> usize {
    graph_inputs(b).len()
}

/// The debug listing of which node uses each input tensor (last created first, as llama.cpp).
fn log_input_tensors(b: &BuiltGraph) {
    let ctx = &b.graph.ctx;
    for t in graph_inputs(b).into_iter().rev() {
        let x = &ctx[t];
        for &n in &b.graph.nodes {
            if ctx[n].srcs().any(|s| s == t) {
                ggml::log_debug!(
                    "llama_graph_n_input_tensors: input tensor '{:>32}' [{}, ne = {{ {:5}, {:5}, {:5}, {:5} }}] is used by node '{}' ({})\n",
                    x.name,
                    x.ty.name(),
                    x.ne[0],
                    x.ne[1],
                    x.ne[2],
                    x.ne[3],
                    ctx[n].name,
                    ctx[n].op.name()
                );
            }
        }
    }
}
