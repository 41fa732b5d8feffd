//! decode (llama_context::decode): validate the batch, find KV slots for all its ubatches,
//! then for each ubatch (unless the abort callback stops the batch first) build (or reuse) the
//! graph, fill its inputs, compute, and keep the requested logits; plus the logits accessors,
//! the memory (KV) operations and perf.

use crate::batch::{self, Batch, Ubatch};
use crate::context::Context;
use crate::graph::BuiltGraph;
use crate::kv_cache::{KvCache, SlotInfo};
use crate::kv_memory::MemSlot;
use crate::perf::{cfloat, PerfContextData};
use ggml::backend::{set_tensor, BackendError, Status};
use ggml::Type;

fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn i64_bytes(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

impl Context {
    /// llama_decode: 0 ok, 1 no KV slot for the batch, 2 aborted, -1 invalid batch, -2 / -3
    /// allocation or compute failures.
    pub fn decode(&mut self, batch: &Batch) -> i32 {
        if batch.is_empty() {
            ggml::log_error!("decode: n_tokens == 0\n");
            return -1;
        }
        if self.model.no_alloc() {
            ggml::log_error!("decode: the model was loaded without tensor data (no_alloc)\n");
            return -2;
        }
        let output_all = self.cparams.embeddings;
        let kv = &self.kv;
        let full = match batch::validate(
            batch,
            self.model.hparams.n_vocab,
            self.cparams.n_seq_max,
            output_all,
            |s| kv.seq_pos_max(s),
        ) {
            Ok(b) => b,
            Err(e) => {
                ggml::log_error!("init: {}\n", e);
                ggml::log_error!("decode: failed to initialize batch\n");
                return -1;
            }
        };
        let n_tokens_all = full.token.len();
        let n_outputs_all = full.n_outputs;
        let t_compute_start = self.perf.now_us();
        if let Err(e) = self.reserve_if_needed() {
            ggml::log_error!("decode: failed to reserve the compute buffers: {}\n", e);
            return -2;
        }

        if self.kv.has_shift() {
            if let Err(e) = self.apply_k_shift() {
                ggml::log_error!("decode: failed to apply the K-shift: {}\n", e);
                return -2;
            }
        }

        let ubatches = batch::split_simple(&full, self.cparams.n_ubatch as usize);
        let Some(slots) = self.kv.prepare(&ubatches) else {
            ggml::log_warn!(
                "decode: failed to find a memory slot for batch of size {}\n",
                n_tokens_all
            );
            return 1;
        };

        // the output buffer grows to the largest batch seen
        let n_vocab = self.model.hparams.n_vocab as usize;
        let need = n_outputs_all.max(self.cparams.n_seq_max as usize) * n_vocab;
        if self.logits.len() < need {
            self.logits.resize(need, 0.0);
        }
        if self.cparams.embeddings {
            let n_embd = self.model.hparams.n_embd as usize;
            self.embd.resize(n_outputs_all * n_embd, 0.0);
        }
        self.output_ids = vec![-1; n_tokens_all];

        let mut n_outputs_prev = 0usize;
        for (ub, slot) in ubatches.iter().zip(&slots) {
            let n_outputs = if n_outputs_all == n_tokens_all {
                ub.n_tokens()
            } else {
                ub.n_outputs()
            };
            // the previous ubatches are kept: an abort here loses only the rest of the batch
            let status = if self.sched.abort_requested() {
                Status::Aborted
            } else {
                self.process_ubatch(ub, slot, n_outputs, n_outputs_prev)
            };
            if status != Status::Success {
                // forget what this ubatch stored, as llama.cpp does
                let mut pos_min = std::collections::BTreeMap::new();
                for (i, ids) in ub.seq_id.iter().enumerate() {
                    let e = pos_min.entry(ids[0]).or_insert(i32::MAX);
                    *e = (*e).min(ub.pos[i]);
                }
                for (s, p) in pos_min {
                    ggml::log_warn!("decode: removing memory module entries for seq_id = {}, pos = [{}, +inf)\n", s, p);
                    self.kv.seq_rm(s, p, -1);
                }
                self.n_outputs = 0;
                return match status {
                    Status::Aborted => 2,
                    Status::AllocFailed(_) => -2,
                    _ => -3,
                };
            }
            for (i, &o) in ub.output.iter().enumerate() {
                if o || n_outputs_all == n_tokens_all {
                    self.output_ids[ub.idx[i]] = n_outputs_prev as i32;
                    n_outputs_prev += 1;
                }
            }
        }
        self.n_outputs = n_outputs_all;
        // compute is synchronous: this is where llama.cpp's synchronize() books the time
        self.perf
            .record(n_tokens_all, t_compute_start, self.cparams.no_perf);
        0
    }

    fn process_ubatch(
        &mut self,
        ub: &Ubatch,
        slot: &MemSlot,
        n_outputs: usize,
        out_row: usize,
    ) -> Status {
        self.kv.apply(slot, ub);
        // a graph with no output would be empty at the end: compute one row and ignore it
        let n_outputs_graph = n_outputs.max(1);
        let n_kv_swa = self.kv.swa.as_ref().map_or(0, KvCache::n_kv);
        let p = self.graph_params(
            ub.n_tokens(),
            n_outputs_graph,
            self.kv.base.n_kv(),
            n_kv_swa,
        );
        // a graph with the attention-temperature input is never reused: llama.cpp's input has
        // no reuse check (llm_graph_input_attn_temp)
        let reuse = !self.cparams.graph_reuse_disable
            && self
                .prev
                .as_ref()
                .is_some_and(|g| g.params == p && g.inputs.attn_scale.is_none());
        if reuse {
            self.perf.n_reused += 1;
        } else {
            self.prev = None;
            self.sched.reset();
            let mut built = self.build_graph(p);
            if let Err(e) = self.sched.alloc_graph(&mut built.graph) {
                ggml::log_error!("process_ubatch: failed to allocate graph: {}\n", e);
                return Status::AllocFailed(e.to_string());
            }
            self.prev = Some(built);
        }
        let built = self.prev.take().expect("graph built or reused above");
        if let Err(e) = self.set_inputs(&built, ub, slot, n_outputs) {
            ggml::log_error!("process_ubatch: failed to set the graph inputs: {}\n", e);
            self.prev = Some(built);
            return Status::Failed(e.to_string());
        }
        let n_threads = if ub.n_tokens() > 1 {
            self.cparams.n_threads_batch
        } else {
            self.cparams.n_threads
        };
        self.sched
            .backend(self.cpu_backend)
            .set_graph_threads(n_threads, ub.n_tokens() > 1);
        let mut built = built;
        let status = self.sched.graph_compute(&mut built.graph);
        if status != Status::Success {
            ggml::log_error!(
                "graph_compute: ggml_backend_sched_graph_compute_async failed with error {}\n",
                status.code()
            );
            ggml::log_error!(
                "process_ubatch: failed to compute graph, compute status: {}\n",
                status.code()
            );
            return status;
        }
        if let (true, true, Some(e)) = (n_outputs > 0, self.cparams.embeddings, built.embd) {
            let n_embd = self.model.hparams.n_embd as usize;
            let mut bytes = vec![0u8; n_outputs * n_embd * 4];
            if let Err(e) = ggml::backend::get_tensor(&built.graph.ctx[e], &mut bytes, 0) {
                ggml::log_error!("process_ubatch: failed to read the embeddings: {}\n", e);
                self.prev = Some(built);
                return Status::Failed(e.to_string());
            }
            let dst = &mut self.embd[out_row * n_embd..(out_row + n_outputs) * n_embd];
            for (d, c) in dst.iter_mut().zip(bytes.chunks_exact(4)) {
                *d = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        if n_outputs > 0 {
            let t = &built.graph.ctx[built.logits];
            let n_vocab = self.model.hparams.n_vocab as usize;
            let mut bytes = vec![0u8; n_outputs * n_vocab * 4];
            if let Err(e) = ggml::backend::get_tensor(t, &mut bytes, 0) {
                ggml::log_error!("process_ubatch: failed to read the logits: {}\n", e);
                self.prev = Some(built);
                return Status::Failed(e.to_string());
            }
            let dst = &mut self.logits[out_row * n_vocab..(out_row + n_outputs) * n_vocab];
            for (d, c) in dst.iter_mut().zip(bytes.chunks_exact(4)) {
                *d = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        self.prev = Some(built);
        Status::Success
    }

    fn set_inputs(
        &self,
        g: &BuiltGraph,
        ub: &Ubatch,
        slot: &MemSlot,
        n_outputs: usize,
    ) -> Result<(), BackendError> {
        let ctx = &g.graph.ctx;
        let live = |t: Option<ggml::TensorId>| t.filter(|&t| ctx[t].data.is_some());
        if let Some(t) = live(g.inputs.tokens) {
            set_tensor(&ctx[t], &i32_bytes(&ub.token), 0)?;
        }
        if let Some(t) = live(g.inputs.pos) {
            set_tensor(&ctx[t], &i32_bytes(&ub.pos), 0)?;
        }
        if let Some(t) = live(g.inputs.attn_scale) {
            let scales = crate::graph::attn_temp_scales(&self.model.hparams, &ub.pos);
            let bytes: Vec<u8> = scales.iter().flat_map(|x| x.to_le_bytes()).collect();
            set_tensor(&ctx[t], &bytes, 0)?;
        }
        let i = &g.inputs;
        self.set_cache_inputs(
            g,
            ub,
            &self.kv.base,
            &slot.base,
            [i.k_idxs, i.v_idxs, i.kq_mask],
        )?;
        if let (Some(cache), Some(s)) = (self.kv.swa.as_ref(), slot.swa.as_ref()) {
            let ins = [i.k_idxs_swa, i.v_idxs_swa, i.kq_mask_swa];
            self.set_cache_inputs(g, ub, cache, s, ins)?;
        }
        if let Some(t) = live(g.inputs.out_ids) {
            let n_tokens = ub.n_tokens();
            let ids: Vec<i32> = if n_outputs == n_tokens {
                (0..n_tokens as i32).collect()
            } else if n_outputs == 0 {
                vec![n_tokens as i32 - 1]
            } else {
                (0..n_tokens)
                    .filter(|&i| ub.output[i])
                    .map(|i| i as i32)
                    .collect()
            };
            set_tensor(&ctx[t], &i32_bytes(&ids), 0)?;
        }
        Ok(())
    }

    /// The K/V indices and the mask of one cache.
    fn set_cache_inputs(
        &self,
        g: &BuiltGraph,
        ub: &Ubatch,
        kv: &KvCache,
        slot: &SlotInfo,
        [k_idxs, v_idxs, kq_mask]: [Option<ggml::TensorId>; 3],
    ) -> Result<(), BackendError> {
        let ctx = &g.graph.ctx;
        let live = |t: Option<ggml::TensorId>| t.filter(|&t| ctx[t].data.is_some());
        if let Some(t) = live(k_idxs) {
            set_tensor(&ctx[t], &i64_bytes(&kv.k_idxs(slot)), 0)?;
        }
        if let Some(t) = live(v_idxs) {
            let n_embd_v = self.model.hparams.n_embd_v_gqa_max() as usize;
            set_tensor(&ctx[t], &i64_bytes(&kv.v_idxs(slot, n_embd_v)), 0)?;
        }
        if let Some(t) = live(kq_mask) {
            let n_kv = ctx[t].ne[0] as usize;
            let alibi = self.model.hparams.f_max_alibi_bias > 0.0;
            let mask = kv.kq_mask(ub, n_kv, g.params.causal, alibi);
            let bytes: Vec<u8> = if ctx[t].ty == Type::F16 {
                mask.iter()
                    .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
                    .collect()
            } else {
                mask.iter().flat_map(|x| x.to_le_bytes()).collect()
            };
            set_tensor(&ctx[t], &bytes, 0)?;
        }
        Ok(())
    }

    /// Logits of the i-th token of the last batch (negative: counted from the last output).
    pub fn get_logits_ith(&self, i: i32) -> Option<&[f32]> {
        let n_vocab = self.model.hparams.n_vocab as usize;
        let row = if i < 0 {
            let j = self.n_outputs as i32 + i;
            if j < 0 {
                ggml::log_error!("get_logits_ith: invalid logits id {}, reason: negative index out of range [0, {})\n", i, self.n_outputs);
                return None;
            }
            j as usize
        } else {
            match self.output_ids.get(i as usize) {
                Some(&r) if r >= 0 => r as usize,
                Some(_) => {
                    ggml::log_error!(
                        "get_logits_ith: invalid logits id {}, reason: batch.logits[{}] != true\n",
                        i,
                        i
                    );
                    return None;
                }
                None => {
                    ggml::log_error!(
                        "get_logits_ith: invalid logits id {}, reason: out of range [0, {})\n",
                        i,
                        self.output_ids.len()
                    );
                    return None;
                }
            }
        };
        if row >= self.n_outputs {
            return None;
        }
        self.logits.get(row * n_vocab..(row + 1) * n_vocab)
    }

    /// The output row of batch token i (negative: from the last output).
    fn output_row(&self, i: i32) -> Option<usize> {
        let row = if i < 0 {
            usize::try_from(self.n_outputs as i32 + i).ok()?
        } else {
            usize::try_from(*self.output_ids.get(i as usize)?).ok()?
        };
        (row < self.n_outputs).then_some(row)
    }

    /// Embeddings (final normalised hidden state) of the i-th token of the last batch, for a
    /// context created with `embeddings: true` (every token is an output then).
    pub fn get_embeddings_ith(&self, i: i32) -> Option<&[f32]> {
        if !self.cparams.embeddings {
            return None;
        }
        let n_embd = self.model.hparams.n_embd as usize;
        let row = self.output_row(i)?;
        self.embd.get(row * n_embd..(row + 1) * n_embd)
    }

    /// All embeddings of the last batch, n_outputs x n_embd (empty without `embeddings`).
    pub fn get_embeddings(&self) -> &[f32] {
        let n = self.n_outputs * self.model.hparams.n_embd as usize;
        self.embd.get(..n).unwrap_or(&[])
    }

    /// All outputs of the last batch, n_outputs x n_vocab.
    pub fn get_logits(&self) -> &[f32] {
        let n_vocab = self.model.hparams.n_vocab as usize;
        &self.logits[..self.n_outputs * n_vocab]
    }

    pub fn n_outputs(&self) -> usize {
        self.n_outputs
    }

    // ---- memory (KV cache) ----

    pub fn memory_clear(&mut self, data: bool) {
        self.kv.clear(data);
    }
    pub fn memory_seq_rm(&mut self, seq: i32, p0: i32, p1: i32) -> bool {
        self.kv.seq_rm(seq, p0, p1)
    }
    pub fn memory_seq_cp(&mut self, src: i32, dst: i32, p0: i32, p1: i32) {
        self.kv.seq_cp(src, dst, p0, p1)
    }
    pub fn memory_seq_keep(&mut self, seq: i32) {
        self.kv.seq_keep(seq)
    }
    pub fn memory_seq_add(&mut self, seq: i32, p0: i32, p1: i32, delta: i32) {
        self.kv.seq_add(seq, p0, p1, delta)
    }
    pub fn memory_seq_div(&mut self, seq: i32, p0: i32, p1: i32, d: i32) {
        self.kv.seq_div(seq, p0, p1, d)
    }
    pub fn memory_seq_pos_max(&self, seq: i32) -> i32 {
        self.kv.seq_pos_max(seq)
    }
    pub fn memory_seq_pos_min(&self, seq: i32) -> i32 {
        self.kv.seq_pos_min(seq)
    }
    /// Whether positions can be shifted (llama_memory_can_shift).
    pub fn memory_can_shift(&self) -> bool {
        true
    }

    // ---- perf ----

    pub fn perf(&self) -> PerfContextData {
        self.perf.data()
    }
    pub fn perf_reset(&mut self) {
        self.perf.reset();
    }
    /// llama_perf_context_print
    pub fn perf_print(&self) {
        let d = self.perf.data();
        let t_end_ms = self.perf.now_us() as f64 / 1e3;
        ggml::log_info!(
            "llama_perf_context_print:        load time = {} ms\n",
            cfloat(d.t_load_ms, 10, 2)
        );
        ggml::log_info!(
            "llama_perf_context_print: prompt eval time = {} ms / {:5} tokens ({} ms per token, {} tokens per second)\n",
            cfloat(d.t_p_eval_ms, 10, 2),
            d.n_p_eval,
            cfloat(d.t_p_eval_ms / d.n_p_eval as f64, 8, 2),
            cfloat(1e3 / d.t_p_eval_ms * d.n_p_eval as f64, 8, 2)
        );
        ggml::log_info!(
            "llama_perf_context_print:        eval time = {} ms / {:5} runs   ({} ms per token, {} tokens per second)\n",
            cfloat(d.t_eval_ms, 10, 2),
            d.n_eval,
            cfloat(d.t_eval_ms / d.n_eval as f64, 8, 2),
            cfloat(1e3 / d.t_eval_ms * d.n_eval as f64, 8, 2)
        );
        ggml::log_info!(
            "llama_perf_context_print:       total time = {} ms / {:5} tokens\n",
            cfloat(t_end_ms - d.t_start_ms, 10, 2),
            d.n_p_eval + d.n_eval
        );
        ggml::log_info!(
            "llama_perf_context_print:    graphs reused = {:10}\n",
            d.n_reused
        );
    }
}
