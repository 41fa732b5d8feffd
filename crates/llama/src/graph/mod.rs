//! Graph building (llm_graph_context): the shared building blocks every architecture uses —
//! inputs, norm, Q/K/V projections, attention over the KV cache with or without flash
//! attention, the feed-forward block — and the tensor naming callback (`cb`) that gives nodes
//! llama.cpp's names ("Qcur-0", "kq_soft_max-0", "ffn_swiglu-0").

mod attn;
mod block;
pub(crate) use ffn::{FfnAct, FfnGate, GatedAct, NormType};
mod ffn;
mod mla;
mod moe;
pub(crate) use moe::MoeParams;

use crate::kv_memory::KvMemory;
use crate::model::Model;
use ggml::{Graph, RopeParams, TensorId, Type};
use std::collections::HashMap;

/// What a graph depends on besides the weights: its shape and the context's settings.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GraphParams {
    pub n_tokens: usize,
    pub n_outputs: usize,
    pub n_kv: usize,
    /// the cells the sliding-window layers attend over (0 without a sliding-window cache)
    pub n_kv_swa: usize,
    pub flash_attn: bool,
    pub causal: bool,
    /// the context of one sequence (get_rope_factors picks longrope factors by it)
    pub n_ctx_seq: u32,
    /// rope settings common to all layers (n_dims, mode, base, scale, yarn)
    pub rope: RopeParams,
    /// a warmup run (llama_set_warmup): MoE layers route every token to every expert
    pub warmup: bool,
}

/// The input tensors of one graph, filled before each compute.
#[derive(Clone, Debug, Default)]
pub(crate) struct GraphInputs {
    pub tokens: Option<TensorId>,
    pub pos: Option<TensorId>,
    /// per-token query scales of attention temperature tuning (build_inp_attn_scale)
    pub attn_scale: Option<TensorId>,
    pub k_idxs: Option<TensorId>,
    pub v_idxs: Option<TensorId>,
    pub kq_mask: Option<TensorId>,
    pub k_idxs_swa: Option<TensorId>,
    pub v_idxs_swa: Option<TensorId>,
    pub kq_mask_swa: Option<TensorId>,
    pub out_ids: Option<TensorId>,
    /// input objects (llm_graph_input_*): embd, pos, attn, out_ids
    pub n_objects: usize,
    /// input tensors some node reads, counted before the scheduler rewires sources to its
    /// copies (llama_graph_n_input_tensors); set by graph_reserve
    pub n_tensors: usize,
}

impl GraphInputs {
    /// In creation order.
    pub fn all(&self) -> Vec<TensorId> {
        [
            self.tokens,
            self.pos,
            self.attn_scale,
            self.k_idxs,
            self.v_idxs,
            self.kq_mask,
            self.k_idxs_swa,
            self.v_idxs_swa,
            self.kq_mask_swa,
            self.out_ids,
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// A built graph and where its inputs and logits are.
pub(crate) struct BuiltGraph {
    pub graph: Graph,
    pub inputs: GraphInputs,
    pub logits: TensorId,
    /// the final normalised hidden states (embeddings), when the architecture has them
    pub embd: Option<TensorId>,
    pub params: GraphParams,
}

pub(crate) struct GraphBuilder<'a> {
    pub g: Graph,
    pub model: &'a Model,
    pub kv: &'a KvMemory,
    pub p: GraphParams,
    weights: HashMap<TensorId, TensorId>,
    cache: HashMap<(usize, bool), TensorId>,
    pub inputs: GraphInputs,
    /// set by the architecture to its final hidden states (llm_graph_result::t_embd)
    pub t_embd: Option<TensorId>,
    /// the context's control vector
    pub cvec: Option<&'a crate::cvec::ControlVector>,
    /// the context's LoRA adapters and their scales
    pub loras: &'a [(std::sync::Arc<crate::lora::LoraAdapter>, f32)],
}

impl<'a> GraphBuilder<'a> {
    pub fn new(model: &'a Model, kv: &'a KvMemory, p: GraphParams) -> GraphBuilder<'a> {
        GraphBuilder {
            g: Graph::new(ggml::Context::with_capacity(1024)),
            model,
            kv,
            p,
            weights: HashMap::new(),
            cache: HashMap::new(),
            inputs: GraphInputs::default(),
            t_embd: None,
            cvec: None,
            loras: &[],
        }
    }

    /// build_cvec: the layer's control-vector direction added to its output, when there is one.
    pub fn build_cvec(&mut self, cur: TensorId, il: usize) -> TensorId {
        let Some(dir) = self.cvec.and_then(|c| c.tensor_for(il as i32)) else {
            return cur;
        };
        let dir = self.g.ctx.import(dir);
        self.g.ctx.add(cur, dir)
    }

    /// The graph's leaf for a model weight.
    pub fn w(&mut self, id: TensorId) -> TensorId {
        if let Some(&t) = self.weights.get(&id) {
            return t;
        }
        let t = self.g.ctx.import(&self.model.ctx[id]);
        self.weights.insert(id, t);
        t
    }
    pub fn wo(&mut self, id: Option<TensorId>) -> Option<TensorId> {
        id.map(|id| self.w(id))
    }

    /// The graph leaves of every applied adapter's (A, B) pair for a model weight, with the
    /// scale to add their product at.
    fn lora_pairs(&mut self, weight: TensorId) -> Vec<(TensorId, TensorId, f32)> {
        let name = &self.model.ctx[weight].name;
        let found: Vec<_> = self
            .loras
            .iter()
            .filter_map(|(adapter, s)| adapter.weight(name, *s))
            .collect();
        found
            .into_iter()
            .map(|(a, b, scale)| (self.g.ctx.import(a), self.g.ctx.import(b), scale))
            .collect()
    }

    /// build_lora_mm: `weight × cur` for a model weight (its id in the model, not a graph
    /// leaf). Every weight matrix product of every architecture goes through here, so that a
    /// LoRA adapter applies wherever llama.cpp applies it.
    pub fn build_lora_mm(&mut self, weight: TensorId, cur: TensorId) -> TensorId {
        let w = self.w(weight);
        let mut res = self.g.ctx.mul_mat(w, cur);
        for (a, b, scale) in self.lora_pairs(weight) {
            let a_cur = self.g.ctx.mul_mat(a, cur);
            let ab_cur = self.g.ctx.mul_mat(b, a_cur);
            let ab_cur = self.g.ctx.scale(ab_cur, scale);
            res = self.g.ctx.add(res, ab_cur);
        }
        res
    }

    /// build_lora_mm_id: the products of the experts `ids` picks from the stack `weight`, the
    /// one entry for expert matrices (as build_lora_mm is for the others).
    /// `w_s`: the stack's per-expert scales ({n_expert}), picked per token and expert by the
    /// same ids.
    pub fn build_lora_mm_id(
        &mut self,
        weight: TensorId,
        cur: TensorId,
        ids: TensorId,
        w_s: Option<TensorId>,
    ) -> TensorId {
        let w = self.w(weight);
        let mut res = self.g.ctx.mul_mat_id(w, cur, ids);
        if let Some(w_s) = self.wo(w_s) {
            let n_expert = self.g.ctx[w_s].ne[0];
            let n_tokens = self.g.ctx[cur].ne[2];
            let s = self.g.ctx.reshape_3d(w_s, 1, n_expert, 1);
            let s = self.g.ctx.repeat_4d(s, [1, n_expert, n_tokens, 1]);
            let s = self.g.ctx.get_rows(s, ids);
            res = self.g.ctx.mul(res, s);
        }
        // per-expert pairs, picked by the same ids
        for (a, b, scale) in self.lora_pairs(weight) {
            let a_cur = self.g.ctx.mul_mat_id(a, cur, ids);
            let ab_cur = self.g.ctx.mul_mat_id(b, a_cur, ids);
            let ab_cur = self.g.ctx.scale(ab_cur, scale);
            res = self.g.ctx.add(res, ab_cur);
        }
        res
    }

    /// The graph's leaf for the K (or V) tensor of layer `il` in the cache that holds it.
    pub fn cache_tensor(&mut self, il: usize, v: bool) -> TensorId {
        let cache = self.kv.cache_of(il);
        let (k_id, v_id) = cache.layer(il).expect("every attention layer has a cache");
        let id = if v {
            v_id.expect("only caches with values are asked for V")
        } else {
            k_id
        };
        let key = (il, v);
        if let Some(&t) = self.cache.get(&key) {
            return t;
        }
        let t = self.g.ctx.import(&cache.ctx[id]);
        self.cache.insert(key, t);
        t
    }

    /// The naming callback: "name-il" for layer tensors, "name" otherwise.
    pub fn cb(&mut self, t: TensorId, name: &str, il: i32) {
        if il >= 0 {
            self.g.ctx.set_name(t, &format!("{name}-{il}"));
        } else {
            self.g.ctx.set_name(t, name);
        }
    }

    fn new_input(&mut self, ty: Type, ne: &[i64], name: &str) -> TensorId {
        let t = self.g.ctx.new_tensor(ty, ne);
        self.g.ctx.set_input(t);
        self.g.ctx.set_name(t, name);
        t
    }

    /// build_inp_embd: the token ids and their embedding rows.
    pub fn build_inp_embd(&mut self, tok_embd: TensorId) -> TensorId {
        let n = self.p.n_tokens as i64;
        let tokens = self.new_input(Type::I32, &[n], "inp_tokens");
        let n_embd = self.model.hparams.n_embd as i64;
        let embd = self.new_input(Type::F32, &[n_embd, n], "inp_embd");
        let w = self.w(tok_embd);
        let mut cur = self.g.ctx.get_rows(w, tokens);
        // B is not transposed: the token's row of A times B
        for (a, b, scale) in self.lora_pairs(tok_embd) {
            let rows = self.g.ctx.get_rows(a, tokens);
            let delta = self.g.ctx.mul_mat(b, rows);
            let delta = self.g.ctx.scale(delta, scale);
            cur = self.g.ctx.add(cur, delta);
        }
        // ggml_build_forward_select: both alternatives (token ids, embeddings) are in the graph
        // so that its topology does not depend on the batch; only the token path computes
        self.g.build_forward_expand(cur);
        self.g.build_forward_expand(embd);
        self.cb(cur, "embd", -1);
        self.inputs.tokens = Some(tokens);
        self.inputs.n_objects += 1;
        cur
    }

    pub fn build_inp_pos(&mut self) -> TensorId {
        let pos = self.new_input(Type::I32, &[self.p.n_tokens as i64], "inp_pos");
        self.inputs.pos = Some(pos);
        self.inputs.n_objects += 1;
        pos
    }

    /// build_inp_attn_scale: one query scale per token, [1, 1, n_tokens] to broadcast over
    /// the heads; filled from the positions (attn_temp_scales).
    pub fn build_inp_attn_scale(&mut self) -> TensorId {
        let n = self.p.n_tokens as i64;
        let t = self.new_input(Type::F32, &[1, 1, n], "inp_attn_scale");
        self.inputs.attn_scale = Some(t);
        self.inputs.n_objects += 1;
        t
    }

    pub fn build_inp_out_ids(&mut self) -> TensorId {
        let t = self.new_input(Type::I32, &[self.p.n_outputs as i64], "out_ids");
        self.inputs.out_ids = Some(t);
        self.inputs.n_objects += 1;
        t
    }

    /// The graph leaf of layer `il`'s rope factors (get_rope_factors), when it has any.
    pub fn rope_factors(&mut self, il: usize) -> Option<TensorId> {
        let f = self.model.rope_factors(il, self.p.n_ctx_seq);
        self.wo(f)
    }

    pub fn rope(&mut self, x: TensorId, pos: TensorId, factors: Option<TensorId>) -> TensorId {
        let p = self.p.rope;
        self.g.ctx.rope_ext(x, pos, factors, p)
    }

    /// Rope with the frequencies of layer `il`: sliding-window layers use their own base and
    /// scale (llama_model::get_rope_freq_base / _scale).
    pub fn rope_layer(&mut self, x: TensorId, pos: TensorId, il: usize) -> TensorId {
        let mut p = self.p.rope;
        let hp = &self.model.hparams;
        if hp.is_swa(il) {
            p.freq_base = hp.rope_freq_base_train_swa;
            p.freq_scale = hp.rope_freq_scale_train_swa;
        }
        self.g.ctx.rope_ext(x, pos, None, p)
    }

    /// The token embeddings scaled (gemma: by sqrt(n_embd)), named "inp_scaled".
    pub fn scale_embd(&mut self, cur: TensorId, s: f32) -> TensorId {
        let cur = self.g.ctx.scale(cur, s);
        self.cb(cur, "inp_scaled", -1);
        cur
    }

    /// The final norm (with the model's output-norm bias, when it has one) named result_norm
    /// and kept as the embeddings, then the output matrix; the caller scales the logits and
    /// names them result_output.
    pub fn build_output_head(&mut self, inp: TensorId, ty: NormType) -> TensorId {
        let (norm, norm_b) = (self.model.output_norm, self.model.output_norm_b);
        let cur = self.build_norm(inp, norm, norm_b, ty, -1);
        self.cb(cur, "result_norm", -1);
        self.t_embd = Some(cur);
        let output = self
            .model
            .output
            .expect("loaded models have an output matrix");
        self.build_lora_mm(output, cur)
    }

    /// The final logit soft-cap: cap * tanh(logits / cap), when the model has one.
    pub fn logit_softcap(&mut self, cur: TensorId) -> TensorId {
        let cap = self.model.hparams.f_final_logit_softcapping;
        if cap == 0.0 {
            return cur;
        }
        let cur = self.g.ctx.scale(cur, 1.0 / cap);
        let cur = self.g.ctx.unary(cur, ggml::UnaryOp::Tanh);
        self.g.ctx.scale(cur, cap)
    }

    pub fn finish(mut self, logits: TensorId) -> BuiltGraph {
        self.g.build_forward_expand(logits);
        BuiltGraph {
            graph: self.g,
            inputs: self.inputs,
            logits,
            embd: self.t_embd,
            params: self.p,
        }
    }
}

/// llm_graph_input_attn_temp::set_input: the query scale of each position.
pub(crate) fn attn_temp_scales(hp: &crate::hparams::HParams, pos: &[i32]) -> Vec<f32> {
    let floor_scale = hp.n_attn_temp_floor_scale as f32;
    pos.iter()
        .map(|&p| {
            let steps = ((p as f32 + hp.f_attn_temp_offset) / floor_scale).floor() as f64;
            ((steps + 1.0).ln() * hp.f_attn_temp_scale as f64 + 1.0) as f32
        })
        .collect()
}
