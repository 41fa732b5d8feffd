//! Attention over a K-only cache (build_attn_inp_k and its build_attn): absorbed multi-head
//! latent attention stores one row per token (the latent and its rotated part) and reads V as
//! the latent's leading columns of that same row; `v_mla` then decompresses each head.

use super::GraphBuilder;
use ggml::{TensorId, Type};

impl GraphBuilder<'_> {
    /// build_attn_inp_k: the K row indices and the mask (no V indices: there is no V cache).
    pub fn build_attn_inp_k(&mut self) {
        let n_tokens = self.p.n_tokens as i64;
        let k = self.new_input(Type::I64, &[n_tokens], "attn_inp_k_idxs");
        let m = self.attn_mask(self.p.n_kv);
        self.inputs.k_idxs = Some(k);
        self.inputs.kq_mask = Some(m);
        self.inputs.n_objects += 1;
    }

    /// build_attn (K-only cache): store K, attend with V a view of the cached K rows,
    /// decompress with `v_mla`, project the output.
    #[allow(clippy::too_many_arguments)]
    pub fn build_attn_mla(
        &mut self,
        wo: Option<TensorId>,
        q_cur: TensorId,
        k_cur: TensorId,
        v_cur: TensorId,
        v_mla: TensorId,
        kq_scale: f32,
        il: usize,
    ) -> TensorId {
        // q, v, k: k last, as llama.cpp expands them (rope fusion into the cache)
        self.g.build_forward_expand(q_cur);
        self.g.build_forward_expand(v_cur);
        self.g.build_forward_expand(k_cur);
        let k_store = self.cpy_k(k_cur, il);
        self.g.build_forward_expand(k_store);
        let k = self.get_k(il);
        let (kne, knb) = (self.g.ctx[k].ne, self.g.ctx[k].nb);
        let n_v = self.g.ctx[v_cur].ne[0];
        let v = self
            .g
            .ctx
            .view_4d(k, [n_v, kne[1], kne[2], kne[3]], knb[1], knb[2], knb[3], 0);
        let mask = self.layer_inputs(il).2;
        let v_mla = self.w(v_mla);
        let mut cur = self.build_attn_mha(q_cur, k, v, mask, Some(v_mla), kq_scale, il as i32);
        self.cb(cur, "kqv_out", il as i32);
        if let Some(wo) = wo {
            cur = self.build_lora_mm(wo, cur);
        }
        cur
    }
}
