//! The mixture-of-experts feed-forward (llm_graph_context::build_moe_ffn): the router's
//! probabilities, the top-k experts of each token, their weights (normalised, scaled), the
//! selected experts' gated feed-forwards as MUL_MAT_ID products, and the weighted sum over the
//! selected experts. Node order and names are llama.cpp's ("ffn_moe_logits", "ffn_moe_probs",
//! "ffn_moe_argsort", "ffn_moe_topk", "ffn_moe_weights", ..., "ffn_moe_out"), so graph sizes,
//! scheduler splits and eval-callback dumps line up with it.

use super::{GatedAct, GraphBuilder};
use crate::arch::moe::{Gating, MoeLayer};
use ggml::{SortOrder, TensorId, UnaryOp};

/// What one call of build_moe_ffn uses besides the input and the layer's weights.
#[derive(Clone, Copy)]
pub(crate) struct MoeParams {
    /// the experts' activation (SiLU: SwiGLU with a gate stack, plain SiLU without)
    pub act: GatedAct,
    /// divide the selected experts' weights by their sum
    pub norm_w: bool,
    /// multiply the weights by this (0 or 1: not at all)
    pub w_scale: f32,
    pub gating: Gating,
}

/// ggml clamps the weight sum to the smallest normal F16 before dividing by it.
const MIN_WEIGHT_SUM: f32 = 6.103_515_6e-5;

impl GraphBuilder<'_> {
    /// build_moe_ffn over the router and expert stacks of `l` (router and up/down stacks
    /// required at load; the gate stack optional); returns {n_embd, n_tokens}.
    pub fn build_moe_ffn(
        &mut self,
        cur: TensorId,
        l: &MoeLayer,
        p: MoeParams,
        il: i32,
    ) -> TensorId {
        let need = |t: Option<TensorId>| t.expect("router and expert stacks are required at load");
        let hp = &self.model.hparams;
        let n_expert = hp.n_expert as i64;
        // a warmup run routes every token through every expert, so that all their weights are
        // touched once (llm_graph_context's n_expert_used); the sum still takes n_expert_used
        let n_used_hp = hp.n_expert_used as i64;
        let n_used = if self.p.warmup { n_expert } else { n_used_hp };
        let (n_embd, n_tokens) = {
            let t = &self.g.ctx[cur];
            (t.ne[0], t.ne[1])
        };

        let mut logits = self.build_lora_mm(need(l.gate_inp), cur);
        self.cb(logits, "ffn_moe_logits", il);
        if let Some(b) = self.wo(l.gate_inp_b) {
            logits = self.g.ctx.add(logits, b);
            self.cb(logits, "ffn_moe_logits_biased", il);
        }

        let probs = match p.gating {
            Gating::Softmax => self.g.ctx.soft_max(logits),
            Gating::Sigmoid => self.g.ctx.unary(logits, UnaryOp::Sigmoid),
            Gating::SoftmaxWeight => logits,
        };
        self.cb(probs, "ffn_moe_probs", il);

        // the selection bias picks the experts; their weights come from the unbiased probs
        let mut selection_probs = probs;
        if let Some(b) = self.wo(l.exp_probs_b) {
            selection_probs = self.g.ctx.add(probs, b);
            self.cb(selection_probs, "ffn_moe_probs_biased", il);
        }

        if hp.n_expert_groups > 1 && n_tokens > 0 {
            selection_probs = self.mask_expert_groups(selection_probs, il);
        }

        let (sorted, selected) = self.argsort_top_k(selection_probs, n_used);
        self.cb(sorted, "ffn_moe_argsort", il);
        self.cb(selected, "ffn_moe_topk", il);

        let probs = self.g.ctx.reshape_3d(probs, 1, n_expert, n_tokens);
        let mut weights = self.g.ctx.get_rows(probs, selected);
        self.cb(weights, "ffn_moe_weights", il);

        if p.gating == Gating::SoftmaxWeight {
            weights = self.g.ctx.reshape_2d(weights, n_used, n_tokens);
            weights = self.g.ctx.soft_max(weights);
            weights = self.g.ctx.reshape_3d(weights, 1, n_used, n_tokens);
            self.cb(weights, "ffn_moe_weights_softmax", il);
        }
        if p.norm_w {
            weights = self.g.ctx.reshape_2d(weights, n_used, n_tokens);
            let sum = self.g.ctx.sum_rows(weights);
            self.cb(sum, "ffn_moe_weights_sum", il);
            let sum = self.g.ctx.clamp(sum, MIN_WEIGHT_SUM, f32::INFINITY);
            self.cb(sum, "ffn_moe_weights_sum_clamped", il);
            weights = self.g.ctx.div(weights, sum);
            self.cb(weights, "ffn_moe_weights_norm", il);
            weights = self.g.ctx.reshape_3d(weights, 1, n_used, n_tokens);
        }
        if p.w_scale != 0.0 && p.w_scale != 1.0 {
            weights = self.g.ctx.scale(weights, p.w_scale);
            self.cb(weights, "ffn_moe_weights_scaled", il);
        }
        // expanded early, as llama.cpp does, so that the weights come before the experts
        self.g.build_forward_expand(weights);

        let cur = self.g.ctx.reshape_3d(cur, n_embd, 1, n_tokens);
        let (gated, up, has_gate) = match l.gate_up_exps {
            // one product for both stacks, then a view of each half (gate rows first)
            Some(gu) => {
                let gate_up = self.build_lora_mm_id(gu, cur, selected, None);
                self.cb(gate_up, "ffn_moe_gate_up", il);
                let t = &self.g.ctx[gate_up];
                let (ne, nb) = (t.ne, t.nb);
                let n_ff = ne[0] / 2;
                let gate = self
                    .g
                    .ctx
                    .view_3d(gate_up, n_ff, ne[1], ne[2], nb[1], nb[2], 0);
                self.cb(gate, "ffn_moe_gate", il);
                let off = n_ff as usize * nb[0];
                let up = self
                    .g
                    .ctx
                    .view_3d(gate_up, n_ff, ne[1], ne[2], nb[1], nb[2], off);
                self.cb(up, "ffn_moe_up", il);
                (gate, up, true)
            }
            None => self.moe_gate_and_up(cur, l, selected, il),
        };
        let act = match (p.act, has_gate) {
            (GatedAct::Silu, true) => {
                let t = self.g.ctx.swiglu_split(gated, up);
                self.cb(t, "ffn_moe_swiglu", il);
                t
            }
            (GatedAct::Silu, false) => {
                let t = self.g.ctx.silu(gated);
                self.cb(t, "ffn_moe_silu", il);
                t
            }
            (GatedAct::Gelu, true) => {
                let t = self.g.ctx.geglu_split(gated, up);
                self.cb(t, "ffn_moe_geglu", il);
                t
            }
            (GatedAct::Gelu, false) => {
                let t = self.g.ctx.gelu(gated);
                self.cb(t, "ffn_moe_gelu", il);
                t
            }
        };

        let mut experts = self.build_lora_mm_id(need(l.down_exps), act, selected, l.down_exps_s);
        self.cb(experts, "ffn_moe_down", il);
        if l.down_exps_s.is_some() {
            self.cb(experts, "ffn_moe_down_scaled", il);
        }
        experts = self.g.ctx.mul(experts, weights);
        self.cb(experts, "ffn_moe_weighted", il);
        self.g.build_forward_expand(experts);

        // the views first, then the adds (llama.cpp orders them so for its fused kernels)
        let (nb1, nb2) = {
            let t = &self.g.ctx[experts];
            (t.nb[1], t.nb[2])
        };
        let views: Vec<TensorId> = (0..n_used_hp as usize)
            .map(|i| {
                let v = self.g.ctx.view_2d(experts, n_embd, n_tokens, nb2, i * nb1);
                self.g.build_forward_expand(v);
                v
            })
            .collect();
        let mut out = views[0];
        for &v in &views[1..] {
            out = self.g.ctx.add(out, v);
            self.g.build_forward_expand(out);
        }
        if views.len() == 1 {
            // a view of the experts would be returned otherwise; the callers want rows
            out = self.g.ctx.cont(out);
        }
        self.cb(out, "ffn_moe_out", il);
        out
    }

    /// The separate up and (optional) gate stacks' products; returns (gate or up, up, whether
    /// there is a gate).
    fn moe_gate_and_up(
        &mut self,
        cur: TensorId,
        l: &MoeLayer,
        selected: TensorId,
        il: i32,
    ) -> (TensorId, TensorId, bool) {
        let up_exps = l.up_exps.expect("the up stack is required at load");
        let up = self.build_lora_mm_id(up_exps, cur, selected, l.up_exps_s);
        self.cb(up, "ffn_moe_up", il);
        if l.up_exps_s.is_some() {
            self.cb(up, "ffn_moe_up_scaled", il);
        }
        let gated = match l.gate_exps {
            Some(g) => {
                let t = self.build_lora_mm_id(g, cur, selected, l.gate_exps_s);
                self.cb(t, "ffn_moe_gate", il);
                t
            }
            None => up,
        };
        if l.gate_exps_s.is_some() {
            self.cb(gated, "ffn_moe_gate_scaled", il);
        }
        (gated, up, l.gate_exps.is_some())
    }

    /// ggml_argsort_top_k: a descending argsort and a view of its first `k` columns; returns
    /// (the argsort, the view).
    fn argsort_top_k(&mut self, a: TensorId, k: i64) -> (TensorId, TensorId) {
        let sorted = self.g.ctx.argsort(a, SortOrder::Desc);
        let t = &self.g.ctx[sorted];
        let (ne, nb) = (t.ne, t.nb);
        let top = self
            .g
            .ctx
            .view_4d(sorted, [k, ne[1], ne[2], ne[3]], nb[1], nb[2], nb[3], 0);
        (sorted, top)
    }

    /// Group-limited selection (DeepSeek V3): the experts form `expert_group_count` groups,
    /// each scored by the sum of its two best selection probabilities; only the
    /// `expert_group_used_count` best groups stay candidates, the others' probabilities are
    /// set to -inf. {n_expert, n_tokens} in and out.
    fn mask_expert_groups(&mut self, probs: TensorId, il: i32) -> TensorId {
        let hp = &self.model.hparams;
        let (n_expert, n_tokens) = (self.g.ctx[probs].ne[0], self.g.ctx[probs].ne[1]);
        let n_groups = hp.n_expert_groups as i64;
        let n_group_used = hp.n_group_used as i64;
        let per_group = n_expert / n_groups;
        let ctx = &mut self.g.ctx;
        let groups = ctx.reshape_3d(probs, per_group, n_groups, n_tokens);
        let (_, top2) = self.argsort_top_k(groups, 2);
        let ctx = &mut self.g.ctx;
        let rows = ctx.reshape_4d(groups, 1, per_group, n_groups, n_tokens);
        let mut scores = ctx.get_rows(rows, top2);
        let ne = ctx[scores].ne;
        scores = ctx.reshape_3d(scores, ne[1], ne[2], ne[3]);
        scores = ctx.sum_rows(scores);
        let ne = ctx[scores].ne;
        scores = ctx.reshape_2d(scores, ne[1], ne[2]);
        let (_, best) = self.argsort_top_k(scores, n_group_used);
        self.cb(best, "ffn_moe_group_topk", il);
        let ctx = &mut self.g.ctx;
        let kept = ctx.get_rows(groups, best);
        let masked = ctx.fill(groups, f32::NEG_INFINITY);
        let masked = ctx.set_rows(masked, kept, best);
        let out = ctx.reshape_2d(masked, n_expert, n_tokens);
        self.cb(out, "ffn_moe_probs_masked", il);
        out
    }

    /// The shared expert of qwen2moe: a SwiGLU feed-forward scaled per token by
    /// sigmoid(gate_inp_shexp · x), computed as silu(x) / x as llama.cpp does.
    pub fn build_shared_expert_gated(&mut self, cur: TensorId, l: &MoeLayer, il: i32) -> TensorId {
        let need = |t: Option<TensorId>| t.expect("shared-expert weights are required at load");
        let gate_inp = self.build_lora_mm(need(l.gate_inp_shexp), cur);
        self.cb(gate_inp, "ffn_shexp_gate_inp", il);
        let silu = self.g.ctx.silu(gate_inp);
        let gate = self.g.ctx.div(silu, gate_inp);
        self.cb(gate, "ffn_shexp_gate", il);
        let ffn = self.build_ffn_swiglu(
            cur,
            need(l.up_shexp),
            None,
            need(l.gate_shexp),
            None,
            need(l.down_shexp),
            None,
            il,
        );
        self.cb(ffn, "ffn_shexp", il);
        let out = self.g.ctx.mul(ffn, gate);
        self.cb(out, "ffn_shexp_out", il);
        out
    }
}
