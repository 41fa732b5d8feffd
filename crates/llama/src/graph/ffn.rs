//! Norms, the Q/K/V projections and the feed-forward block (build_norm, build_qkv, build_ffn).

use super::GraphBuilder;
use crate::model::Layer;
use ggml::TensorId;

/// The normalisations the graphs use (LLM_NORM_RMS, LLM_NORM).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum NormType {
    Rms,
    /// LayerNorm: mean removed, then scaled to unit variance (f_norm_eps)
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

/// The activation of build_ffn (llm_ffn_op_type): with a parallel gate SiLU and GELU fuse
/// into SwiGLU / GeGLU; `Swiglu` is the fused GLU of one matrix holding gate and up halves.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum FfnAct {
    Silu,
    Gelu,
    Swiglu,
}

/// Where the gate reads its input (llm_ffn_gate_type): the up projection's output (Seq) or the
/// FFN's input beside the up projection (Par).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum FfnGate {
    Seq,
    Par,
}

/// A weight matrix with its optional bias.
pub(crate) type Proj = (TensorId, Option<TensorId>);

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

    /// build_qkv: the fused or separate projections with their biases, then heads.
    pub fn build_qkv(
        &mut self,
        layer: &Layer,
        cur: TensorId,
        n_embd_head: i64,
        n_head: i64,
        n_head_kv: i64,
        il: i32,
    ) -> [TensorId; 3] {
        self.build_qkv_impl(layer, cur, n_embd_head, n_head, n_head_kv, il, true)
    }

    /// build_qkv with reshape = false: the projections as [n_embd_*, n_tokens] matrices, not
    /// named here and not clamped (olmo2 norms whole rows before splitting heads).
    pub fn build_qkv_2d(
        &mut self,
        layer: &Layer,
        cur: TensorId,
        n_embd_head: i64,
        n_head: i64,
        n_head_kv: i64,
        il: i32,
    ) -> [TensorId; 3] {
        self.build_qkv_impl(layer, cur, n_embd_head, n_head, n_head_kv, il, false)
    }

    #[allow(clippy::too_many_arguments)]
    fn build_qkv_impl(
        &mut self,
        layer: &Layer,
        cur: TensorId,
        n_embd_head: i64,
        n_head: i64,
        n_head_kv: i64,
        il: i32,
        reshape: bool,
    ) -> [TensorId; 3] {
        if let Some(wqkv) = layer.wqkv {
            return self.build_qkv_fused(
                layer,
                wqkv,
                cur,
                n_embd_head,
                [n_head, n_head_kv],
                il,
                reshape,
            );
        }
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
            if reshape {
                self.cb(t, name, il);
            }
            if let Some(b) = self.wo(b) {
                t = self.g.ctx.add(t, b);
                if reshape {
                    self.cb(t, name, il);
                }
            }
            if reshape && clamp > 0.0 {
                t = self.g.ctx.clamp(t, -clamp, clamp);
                self.cb(t, &format!("{name}_clamped"), il);
            }
            out[i] = t;
        }
        if !reshape {
            return out;
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

    /// The fused path: one product, its bias (fused, or the three separate ones concatenated),
    /// then views of the Q, K and V parts of each row.
    #[allow(clippy::too_many_arguments)]
    fn build_qkv_fused(
        &mut self,
        layer: &Layer,
        wqkv: TensorId,
        cur: TensorId,
        head: i64,
        [n_head, n_head_kv]: [i64; 2],
        il: i32,
        reshape: bool,
    ) -> [TensorId; 3] {
        let n_tokens = self.p.n_tokens as i64;
        let mut qkv = self.build_lora_mm(wqkv, cur);
        self.cb(qkv, "wqkv", il);
        if let Some(b) = self.wo(layer.wqkv_b) {
            qkv = self.g.ctx.add(qkv, b);
            self.cb(qkv, "wqkv_b", il);
        } else if let (Some(bq), Some(bk), Some(bv)) = (layer.bq, layer.bk, layer.bv) {
            let (bq, bk, bv) = (self.w(bq), self.w(bk), self.w(bv));
            let qk = self.g.ctx.concat(bq, bk, 0);
            let b = self.g.ctx.concat(qk, bv, 0);
            qkv = self.g.ctx.add(qkv, b);
            self.cb(qkv, "wqkv_b", il);
        }
        let clamp = self.model.hparams.f_clamp_kqv;
        if reshape && clamp > 0.0 {
            qkv = self.g.ctx.clamp(qkv, -clamp, clamp);
            self.cb(qkv, "wqkv_clamped", il);
        }
        let (ty, nb1) = (self.g.ctx[qkv].ty, self.g.ctx[qkv].nb[1]);
        let (n_q, n_k) = (head * n_head, head * n_head_kv);
        let offs = [0, ty.row_size(n_q), ty.row_size(n_q + n_k)];
        let heads = [n_head, n_head_kv, n_head_kv];
        let mut out = [qkv; 3];
        for i in 0..3 {
            out[i] = if reshape {
                let nb = ty.row_size(head);
                self.g
                    .ctx
                    .view_3d(qkv, head, heads[i], n_tokens, nb, nb1, offs[i])
            } else {
                let v = self
                    .g
                    .ctx
                    .view_2d(qkv, head * heads[i], n_tokens, nb1, offs[i]);
                self.g.ctx.cont(v)
            };
        }
        if reshape {
            for (i, name) in ["Qcur", "Kcur", "Vcur"].into_iter().enumerate() {
                self.cb(out[i], name, il);
            }
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
        let [up, gate, down] = w;
        let act = match act {
            GatedAct::Silu => FfnAct::Silu,
            GatedAct::Gelu => FfnAct::Gelu,
        };
        self.build_ffn(cur, up, Some(gate), down, act, FfnGate::Par, il)
    }

    /// build_ffn: up (with bias), the gate when there is one (after up, or beside it), the
    /// activation, the product with up for a parallel gate, down (with bias).
    #[allow(clippy::too_many_arguments)]
    pub fn build_ffn(
        &mut self,
        cur: TensorId,
        (up, up_b): Proj,
        gate: Option<Proj>,
        (down, down_b): Proj,
        act: FfnAct,
        gate_ty: FfnGate,
        il: i32,
    ) -> TensorId {
        let mut tmp = self.build_lora_mm(up, cur);
        self.cb(tmp, "ffn_up", il);
        if let Some(b) = self.wo(up_b) {
            tmp = self.g.ctx.add(tmp, b);
            self.cb(tmp, "ffn_up_b", il);
        }
        let mut x = tmp;
        if let Some((gate, gate_b)) = gate {
            let input = if gate_ty == FfnGate::Seq { tmp } else { cur };
            x = self.build_lora_mm(gate, input);
            self.cb(x, "ffn_gate", il);
            if let Some(b) = self.wo(gate_b) {
                x = self.g.ctx.add(x, b);
                self.cb(x, "ffn_gate_b", il);
            }
        }
        let par = gate.is_some() && gate_ty == FfnGate::Par;
        let (t, name) = match act {
            FfnAct::Silu if par => (self.g.ctx.swiglu_split(x, tmp), "ffn_swiglu"),
            FfnAct::Gelu if par => (self.g.ctx.geglu_split(x, tmp), "ffn_geglu"),
            FfnAct::Silu => (self.g.ctx.silu(x), "ffn_silu"),
            FfnAct::Gelu => (self.g.ctx.gelu(x), "ffn_gelu"),
            FfnAct::Swiglu => (self.g.ctx.glu(x, ggml::GluOp::Swiglu, false), "ffn_swiglu"),
        };
        self.cb(t, name, il);
        // a Swiglu activation with a parallel gate multiplies by up after the GLU
        let mut out = if par && act == FfnAct::Swiglu {
            let t = self.g.ctx.mul(t, tmp);
            self.cb(t, "ffn_gate_par", il);
            t
        } else {
            t
        };
        out = self.build_lora_mm(down, out);
        if let Some(b) = self.wo(down_b) {
            self.cb(out, "ffn_down", il);
            out = self.g.ctx.add(out, b);
        }
        out
    }
}
