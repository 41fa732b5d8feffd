//! The qwen2 graph (src/models/qwen2.cpp): llama's block with Q/K/V biases and NeoX rope.

use crate::graph::{GraphBuilder, NormType};
use crate::model::Model;
use ggml::TensorId;

pub(crate) fn build(model: &Model, b: &mut GraphBuilder) -> TensorId {
    let hp = &model.hparams;
    let n_embd_head = hp.n_embd_head_v as i64;
    let n_layer = hp.n_layer as usize;
    let n_tokens = b.p.n_tokens as i64;
    let tok_embd = model.tok_embd.expect("loaded models have token embeddings");

    let mut inp_l = b.build_inp_embd(tok_embd);
    let inp_pos = b.build_inp_pos();
    b.build_attn_inp_kv();
    let inp_out_ids = b.build_inp_out_ids();

    for il in 0..n_layer {
        let layer = &model.layers[il];
        let ili = il as i32;
        let mut inp_sa = inp_l;
        let mut cur = b.build_norm(inp_l, layer.attn_norm, None, NormType::Rms, ili);
        b.cb(cur, "attn_norm", ili);

        let mut qkv = [cur; 3];
        let parts = [
            (layer.wq, layer.bq, "Qcur"),
            (layer.wk, layer.bk, "Kcur"),
            (layer.wv, layer.bv, "Vcur"),
        ];
        for (i, (w, bias, name)) in parts.into_iter().enumerate() {
            let w = b.wo(w).expect("projection weights are required at load");
            let mut t = b.g.ctx.mul_mat(w, cur);
            if let Some(bias) = b.wo(bias) {
                t = b.g.ctx.add(t, bias);
            }
            b.cb(t, name, ili);
            qkv[i] = t;
        }
        let q =
            b.g.ctx
                .reshape_3d(qkv[0], n_embd_head, hp.n_head(il) as i64, n_tokens);
        let k =
            b.g.ctx
                .reshape_3d(qkv[1], n_embd_head, hp.n_head_kv(il) as i64, n_tokens);
        let v =
            b.g.ctx
                .reshape_3d(qkv[2], n_embd_head, hp.n_head_kv(il) as i64, n_tokens);
        let q = b.rope(q, inp_pos, None);
        let k = b.rope(k, inp_pos, None);
        b.cb(q, "Qcur", ili);
        b.cb(k, "Kcur", ili);
        b.cb(v, "Vcur", ili);
        cur = b.build_attn(
            layer.wo,
            layer.bo,
            q,
            k,
            v,
            1.0 / (n_embd_head as f32).sqrt(),
            il,
        );

        if il == n_layer - 1 {
            cur = b.g.ctx.get_rows(cur, inp_out_ids);
            inp_sa = b.g.ctx.get_rows(inp_sa, inp_out_ids);
        }
        let ffn_inp = b.g.ctx.add(cur, inp_sa);
        b.cb(ffn_inp, "ffn_inp", ili);

        cur = b.build_norm(ffn_inp, layer.ffn_norm, None, NormType::Rms, ili);
        b.cb(cur, "ffn_norm", ili);
        cur = b.build_ffn_swiglu(
            cur,
            layer.ffn_up.expect("ffn weights are required at load"),
            None,
            layer.ffn_gate.expect("ffn weights are required at load"),
            None,
            layer.ffn_down.expect("ffn weights are required at load"),
            None,
            ili,
        );
        b.cb(cur, "ffn_out", ili);
        cur = b.g.ctx.add(cur, ffn_inp);
        cur = b.build_cvec(cur, il);
        b.cb(cur, "l_out", ili);
        inp_l = cur;
    }

    let mut cur = b.build_norm(inp_l, model.output_norm, None, NormType::Rms, -1);
    b.cb(cur, "result_norm", -1);
    b.t_embd = Some(cur);
    let output = b.w(model.output.expect("loaded models have an output matrix"));
    cur = b.g.ctx.mul_mat(output, cur);
    if let Some(ob) = b.wo(model.output_b) {
        cur = b.g.ctx.add(cur, ob);
    }
    b.cb(cur, "result_output", -1);
    cur
}
