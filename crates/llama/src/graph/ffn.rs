//! Norms, the Q/K/V projections and the feed-forward block (build_norm, build_qkv, build_ffn).

use super::GraphBuilder;
use crate::model::Layer;
use ggml::TensorId;

/// The normalisations the graphs use (LLM_NORM_RMS, LLM_NORM).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum NormType {
    Rms,
    /// LayerNorm: mean removed, then scaled to unit variance (f_norm_eps)
    #[allow(dead_code)]
    Layer,
}

/// The activation of a gated (LLM_FFN_PAR) feed-forward.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum GatedAct {
    /// SiLU: SwiGLU
    Silu,
    /// GELU (tanh approximation): GeGLU
    Gelu,
}

impl GraphBuilder<'_> {
    /// build_norm: normalise, then scale by the weight and add the bias, when given.
    pub fn build_norm(
        &mut self,
        cur: TensorId,
        mw: Option<TensorId>,
        mb: Option<TensorId>,
        ty: NormType,
        il: i32,
    ) -> TensorId {
        let hp = &self.model.hparams;
        let mut cur = match ty {
            NormType::Rms => {
                let eps = hp.f_norm_rms_eps;
                self.g.ctx.rms_norm(cur, eps)
            }
            NormType::Layer => {
                let eps = hp.f_norm_eps;
                self.g.ctx.norm(cur, eps)
            }
        };
        if mw.is_some() || mb.is_some() {
            self.cb(cur, "norm", il);
        }
        if let Some(w) = mw {
            let w = self.w(w);
            cur = self.g.ctx.mul(cur, w);
            if mb.is_some() {
                self.cb(cur, "norm_w", il);
            }
        }
        if let Some(b) = mb {
            let b = self.w(b);
            cur = self.g.ctx.add(cur, b);
        }
        cur
    }

    /// build_qkv (separate matrices): projections, optional biases, then heads.
    pub fn build_qkv(
        &mut self,
        layer: &Layer,
        cur: TensorId,
        n_embd_head: i64,
        n_head: i64,
        n_head_kv: i64,
        il: i32,
    ) -> [TensorId; 3] {
        let n_tokens = self.p.n_tokens as i64;
        let clamp = self.model.hparams.f_clamp_kqv;
        let mut out = [cur; 3];
        let parts = [
            (layer.wq, layer.bq, "Qcur"),
            (layer.wk, layer.bk, "Kcur"),
            (layer.wv, layer.bv, "Vcur"),
        ];
        for (i, (w, b, name)) in parts.into_iter().enumerate() {
            let w = w.expect("projection weights are required at load");
            let mut t = self.build_lora_mm(w, cur);
            self.cb(t, name, il);
            if let Some(b) = self.wo(b) {
                t = self.g.ctx.add(t, b);
                self.cb(t, name, il);
            }
            if clamp > 0.0 {
                t = self.g.ctx.clamp(t, -clamp, clamp);
                self.cb(t, &format!("{name}_clamped"), il);
            }
            out[i] = t;
        }
        let heads = [n_head, n_head_kv, n_head_kv];
        let names = ["Qcur", "Kcur", "Vcur"];
        for i in 0..3 {
            out[i] = self
                .g
                .ctx
                .reshape_3d(out[i], n_embd_head, heads[i], n_tokens);
        }
        for i in 0..3 {
            self.cb(out[i], names[i], il);
        }
        out
    }

    /// build_ffn with SiLU and a parallel gate (SwiGLU), biases optional.
    #[allow(clippy::too_many_arguments)]
    pub fn build_ffn_swiglu(
        &mut self,
        cur: TensorId,
        up: TensorId,
        up_b: Option<TensorId>,
        gate: TensorId,
        gate_b: Option<TensorId>,
        down: TensorId,
        down_b: Option<TensorId>,
        il: i32,
    ) -> TensorId {
        let w = [(up, up_b), (gate, gate_b), (down, down_b)];
        self.build_ffn_gated(cur, w, GatedAct::Silu, il)
    }

    /// build_ffn with a parallel gate: down(act(gate(x)) * up(x)), each matrix with an optional
    /// bias; `w` is [(up, bias), (gate, bias), (down, bias)].
    pub fn build_ffn_gated(
        &mut self,
        cur: TensorId,
        w: [(TensorId, Option<TensorId>); 3],
        act: GatedAct,
        il: i32,
    ) -> TensorId {
        let [(up, up_b), (gate, gate_b), (down, down_b)] = w;
        let mut tmp = self.build_lora_mm(up, cur);
        self.cb(tmp, "ffn_up", il);
        if let Some(b) = self.wo(up_b) {
            tmp = self.g.ctx.add(tmp, b);
            self.cb(tmp, "ffn_up_b", il);
        }
        let mut g = self.build_lora_mm(gate, cur);
        self.cb(g, "ffn_gate", il);
        if let Some(b) = self.wo(gate_b) {
            g = self.g.ctx.add(g, b);
            self.cb(g, "ffn_gate_b", il);
        }
        let mut out = match act {
            GatedAct::Silu => {
                let t = self.g.ctx.swiglu_split(g, tmp);
                self.cb(t, "ffn_swiglu", il);
                t
            }
            GatedAct::Gelu => {
                let t = self.g.ctx.geglu_split(g, tmp);
                self.cb(t, "ffn_geglu", il);
                t
            }
        };
        out = self.build_lora_mm(down, out);
        if let Some(b) = self.wo(down_b) {
            self.cb(out, "ffn_down", il);
            out = self.g.ctx.add(out, b);
        }
        out
    }
}
