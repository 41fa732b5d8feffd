//! Self-attention over the KV cache (build_attn_inp_kv, build_attn, build_attn_mha, and the
//! cache's cpy_k / cpy_v / get_k / get_v views).

use super::GraphBuilder;
use ggml::{Prec, TensorId, Type};

impl GraphBuilder<'_> {
    /// The K and V row indices and the mask of one cache (f16 for flash attention).
    fn attn_inputs(&mut self, n_kv: usize) -> [TensorId; 3] {
        let n_tokens = self.p.n_tokens as i64;
        let k_idxs = self.new_input(Type::I64, &[n_tokens], "attn_inp_k_idxs");
        let v_idxs = self.attn_v_idxs();
        let mask = self.attn_mask(n_kv);
        [k_idxs, v_idxs, mask]
    }

    fn attn_v_idxs(&mut self) -> TensorId {
        let n_tokens = self.p.n_tokens as i64;
        let n_v = if self.kv.v_trans() {
            n_tokens * self.model.hparams.n_embd_v_gqa_max() as i64
        } else {
            n_tokens
        };
        self.new_input(Type::I64, &[n_v], "attn_inp_v_idxs")
    }

    /// The attention mask over `n_kv` cells (f16 for flash attention).
    pub(super) fn attn_mask(&mut self, n_kv: usize) -> TensorId {
        let n_tokens = self.p.n_tokens as i64;
        let ty = if self.p.flash_attn {
            Type::F16
        } else {
            Type::F32
        };
        self.new_input(ty, &[n_kv as i64, n_tokens, 1, 1], "attn_inp_kq_mask")
    }

    /// build_attn_inp_kv: the inputs of the single cache.
    pub fn build_attn_inp_kv(&mut self) {
        let [k, v, m] = self.attn_inputs(self.p.n_kv);
        self.inputs.k_idxs = Some(k);
        self.inputs.v_idxs = Some(v);
        self.inputs.kq_mask = Some(m);
        self.inputs.n_objects += 1;
    }

    /// build_attn_inp_kv_iswa: the inputs of the dense cache, then of the sliding-window one;
    /// one input object for both.
    pub fn build_attn_inp_kv_iswa(&mut self) {
        let [k, v, m] = self.attn_inputs(self.p.n_kv);
        self.inputs.k_idxs = Some(k);
        self.inputs.v_idxs = Some(v);
        self.inputs.kq_mask = Some(m);
        let [k, v, m] = self.attn_inputs(self.p.n_kv_swa);
        self.inputs.k_idxs_swa = Some(k);
        self.inputs.v_idxs_swa = Some(v);
        self.inputs.kq_mask_swa = Some(m);
        self.inputs.n_objects += 1;
    }

    /// The attention inputs the cache of layer `il` uses: (k_idxs, v_idxs, mask); no v_idxs
    /// for a K-only cache.
    pub(super) fn layer_inputs(&self, il: usize) -> (TensorId, Option<TensorId>, Option<TensorId>) {
        let i = &self.inputs;
        let swa = self.kv.swa.is_some() && self.model.hparams.is_swa(il);
        let (k, v, m) = if swa {
            (i.k_idxs_swa, i.v_idxs_swa, i.kq_mask_swa)
        } else {
            (i.k_idxs, i.v_idxs, i.kq_mask)
        };
        (k.expect("attention inputs are built first"), v, m)
    }

    /// cpy_k: store the new keys in their cells.
    pub(super) fn cpy_k(&mut self, k_cur: TensorId, il: usize) -> TensorId {
        let k = self.cache_tensor(il, false);
        let c = &self.g.ctx[k_cur];
        let (n_embd_head, n_head, n_tokens, nb2) = (c.ne[0], c.ne[1], c.ne[2], c.nb[2]);
        let k_cur = self
            .g
            .ctx
            .view_2d(k_cur, n_embd_head * n_head, n_tokens, nb2, 0);
        let idxs = self.layer_inputs(il).0;
        self.g.ctx.set_rows(k, k_cur, idxs)
    }

    /// cpy_v: store the new values, row-wise, or one element per row in the transposed layout.
    fn cpy_v(&mut self, v_cur: TensorId, il: usize) -> TensorId {
        let v = self.cache_tensor(il, true);
        let idxs = self.layer_inputs(il).1.expect("a V cache has V indices");
        let c = &self.g.ctx[v_cur];
        let (n_embd_head, n_head, n_tokens, nb2) = (c.ne[0], c.ne[1], c.ne[2], c.nb[2]);
        let n_embd_gqa = n_embd_head * n_head;
        if !self.kv.v_trans() {
            let v_cur = self.g.ctx.view_2d(v_cur, n_embd_gqa, n_tokens, nb2, 0);
            return self.g.ctx.set_rows(v, v_cur, idxs);
        }
        let mut v_cur = if c.ty.row_size(n_embd_gqa) == nb2 {
            self.g.ctx.reshape_2d(v_cur, n_embd_gqa, n_tokens)
        } else {
            self.g.ctx.cont_2d(v_cur, n_embd_gqa, n_tokens)
        };
        let v_view = {
            let n = self.g.ctx[v].nelements();
            self.g.ctx.reshape_2d(v, 1, n)
        };
        let n = self.g.ctx[v_cur].nelements();
        v_cur = self.g.ctx.reshape_2d(v_cur, 1, n);
        self.g.ctx.set_rows(v_view, v_cur, idxs)
    }

    /// The cells of the cache of layer `il` and how many of them the graph attends over.
    fn cache_extent(&self, il: usize) -> (i64, i64) {
        let cache = self.kv.cache_of(il);
        let swa = self.kv.swa.is_some() && self.model.hparams.is_swa(il);
        let n_kv = if swa { self.p.n_kv_swa } else { self.p.n_kv };
        (cache.size() as i64, n_kv as i64)
    }

    pub(super) fn get_k(&mut self, il: usize) -> TensorId {
        let hp = &self.model.hparams;
        let (head, n_head_kv, n_embd_gqa) = (
            hp.n_embd_head_k as i64,
            hp.n_head_kv(il) as i64,
            hp.n_embd_k_gqa(il) as i64,
        );
        let k = self.cache_tensor(il, false);
        let ty = self.g.ctx[k].ty;
        let (size, n_kv) = self.cache_extent(il);
        self.g.ctx.view_4d(
            k,
            [head, n_head_kv, n_kv, 1],
            ty.row_size(head),
            ty.row_size(n_embd_gqa),
            ty.row_size(n_embd_gqa * size),
            0,
        )
    }

    fn get_v(&mut self, il: usize) -> TensorId {
        let hp = &self.model.hparams;
        let (head, n_head_kv, n_embd_gqa) = (
            hp.n_embd_head_v as i64,
            hp.n_head_kv(il) as i64,
            hp.n_embd_v_gqa(il) as i64,
        );
        let v = self.cache_tensor(il, true);
        let ty = self.g.ctx[v].ty;
        let (size, n_kv) = self.cache_extent(il);
        if !self.kv.v_trans() {
            return self.g.ctx.view_4d(
                v,
                [head, n_head_kv, n_kv, 1],
                ty.row_size(head),
                ty.row_size(n_embd_gqa),
                ty.row_size(n_embd_gqa * size),
                0,
            );
        }
        self.g.ctx.view_4d(
            v,
            [n_kv, n_head_kv, head, 1],
            ty.row_size(size * head),
            ty.row_size(size),
            ty.row_size(size * n_embd_gqa),
            0,
        )
    }

    /// build_attn_mha: softmax(K^T Q * scale + mask) V, fused or step by step; `v_mla`
    /// decompresses the output of absorbed MLA heads (MQA back to MHA).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn build_attn_mha(
        &mut self,
        q: TensorId,
        k: TensorId,
        v: TensorId,
        mask: Option<TensorId>,
        v_mla: Option<TensorId>,
        kq_scale: f32,
        il: i32,
    ) -> TensorId {
        let hp = &self.model.hparams;
        let max_bias = hp.f_max_alibi_bias;
        let softcap = if hp.attn_soft_cap {
            hp.f_attn_logit_softcapping
        } else {
            0.0
        };
        let v_trans = self.g.ctx[v].nb[1] > self.g.ctx[v].nb[2];
        let n_stream = self.g.ctx[k].ne[3];
        let ctx = &mut self.g.ctx;
        let (qn, qb) = (ctx[q].ne, ctx[q].nb);
        let q = ctx.view_4d(
            q,
            [qn[0], qn[1], qn[2] / n_stream, n_stream],
            qb[1],
            qb[2],
            qb[3] / n_stream as usize,
            0,
        );
        let q = ctx.permute(q, 0, 2, 1, 3);
        let mut k = ctx.permute(k, 0, 2, 1, 3);
        let mut v = ctx.permute(v, 0, 2, 1, 3);
        if self.p.flash_attn {
            let ctx = &mut self.g.ctx;
            if v_trans {
                v = ctx.transpose(v);
            }
            // the kernels want half-precision K and V
            if ctx[k].ty == Type::F32 {
                k = ctx.cast(k, Type::F16);
            }
            if ctx[v].ty == Type::F32 {
                v = ctx.cast(v, Type::F16);
            }
            let mut cur = ctx.flash_attn_ext(q, k, v, mask, kq_scale, max_bias, softcap);
            ctx.flash_attn_ext_set_prec(cur, Prec::F32);
            if let Some(v_mla) = v_mla {
                // a matrix-matrix product with the tokens in dim 1; the permutes are no-ops
                let ctx = &mut self.g.ctx;
                cur = ctx.permute(cur, 0, 2, 1, 3);
                cur = ctx.mul_mat(v_mla, cur);
                self.cb(cur, "fattn_mla", il);
                let ctx = &mut self.g.ctx;
                cur = ctx.permute(cur, 0, 2, 1, 3);
                cur = ctx.cont(cur);
            }
            let ctx = &mut self.g.ctx;
            let ne = ctx[cur].ne;
            ctx.reshape_2d(cur, ne[0] * ne[1], ne[2] * ne[3])
        } else {
            let mut kq = self.g.ctx.mul_mat(k, q);
            self.cb(kq, "kq", il);
            self.g.ctx.mul_mat_set_prec(kq, Prec::F32);
            if softcap != 0.0 {
                kq = self.g.ctx.scale(kq, 1.0 / softcap);
                self.cb(kq, "kq_scaled_1", il);
                kq = self.g.ctx.unary(kq, ggml::UnaryOp::Tanh);
                self.cb(kq, "kq_tanh", il);
                kq = self.g.ctx.scale(kq, softcap);
                self.cb(kq, "kq_scaled_2", il);
            }
            kq = self.g.ctx.soft_max_ext(kq, mask, kq_scale, max_bias);
            self.cb(kq, "kq_soft_max", il);
            if !v_trans {
                let t = self.g.ctx.transpose(v);
                v = self.g.ctx.cont(t);
                self.cb(v, "v_cont", il);
            }
            let mut kqv = self.g.ctx.mul_mat(v, kq);
            self.cb(kqv, "kqv", il);
            if let Some(v_mla) = v_mla {
                kqv = self.g.ctx.mul_mat(v_mla, kqv);
                self.cb(kqv, "kqv_mla", il);
            }
            let cur = self.g.ctx.permute(kqv, 0, 2, 1, 3);
            let ne = self.g.ctx[cur].ne;
            self.g.ctx.cont_2d(cur, ne[0] * ne[1], ne[2] * ne[3])
        }
    }

    /// build_attn (KV cache): store K and V, attend, project the output.
    #[allow(clippy::too_many_arguments)]
    pub fn build_attn(
        &mut self,
        wo: Option<TensorId>,
        wo_b: Option<TensorId>,
        q_cur: TensorId,
        k_cur: TensorId,
        v_cur: TensorId,
        kq_scale: f32,
        il: usize,
    ) -> TensorId {
        // the order llama.cpp expands them in: q, v, k with one cache (k last for rope
        // fusion), q, k, v with the two caches of iSWA
        self.g.build_forward_expand(q_cur);
        if self.kv.swa.is_some() {
            self.g.build_forward_expand(k_cur);
            self.g.build_forward_expand(v_cur);
        } else {
            self.g.build_forward_expand(v_cur);
            self.g.build_forward_expand(k_cur);
        }
        let k_store = self.cpy_k(k_cur, il);
        self.g.build_forward_expand(k_store);
        let v_store = self.cpy_v(v_cur, il);
        self.g.build_forward_expand(v_store);

        let k = self.get_k(il);
        let v = self.get_v(il);
        let mask = self.layer_inputs(il).2;
        let mut cur = self.build_attn_mha(q_cur, k, v, mask, None, kq_scale, il as i32);
        self.cb(cur, "kqv_out", il as i32);
        if let Some(wo) = wo {
            cur = self.build_lora_mm(wo, cur);
        }
        if let Some(b) = self.wo(wo_b) {
            self.cb(cur, "kqv_wo", il as i32);
            cur = self.g.ctx.add(cur, b);
        }
        cur
    }
}
