//! The llama graph (src/models/llama.cpp): pre-norm decoder blocks with rope, grouped-query
//! attention and a SwiGLU feed-forward.

use crate::graph::{GraphBuilder, NormType};
use crate::model::Model;
use ggml::TensorId;

pub(crate) fn build(model: &Model, b: &mut GraphBuilder) -> TensorId {
    let hp = &model.hparams;
    let n_embd_head = hp.n_embd_head_v as i64;
    let n_layer = hp.n_layer as usize;
    let tok_embd = model.tok_embd.expect("loaded models have token embeddings");

    let mut inp_l = b.build_inp_embd(tok_embd);
    let inp_pos = b.build_inp_pos();
    b.build_attn_inp_kv();
    let kq_scale = if hp.f_attention_scale == 0.0 {
        1.0 / (n_embd_head as f32).sqrt()
    } else {
        hp.f_attention_scale
    };
    let inp_out_ids = b.build_inp_out_ids();

    for il in 0..n_layer {
        let layer = &model.layers[il];
        let ili = il as i32;
        let mut inp_sa = inp_l;
        let mut cur = b.build_norm(inp_l, layer.attn_norm, None, NormType::Rms, ili);
        b.cb(cur, "attn_norm", ili);

        let rope_factors = b.wo(model.rope_freqs(il));
        let [q, k, v] = b.build_qkv(
            layer,
            cur,
            n_embd_head,
            hp.n_head(il) as i64,
            hp.n_head_kv(il) as i64,
            ili,
        );
        let q = b.rope(q, inp_pos, rope_factors);
        let k = b.rope(k, inp_pos, rope_factors);
        b.cb(q, "Qcur", ili);
        b.cb(k, "Kcur", ili);
        b.cb(v, "Vcur", ili);
        cur = b.build_attn(layer.wo, layer.bo, q, k, v, kq_scale, il);
        b.cb(cur, "attn_out", ili);

        if il == n_layer - 1 {
            cur = b.g.ctx.get_rows(cur, inp_out_ids);
            inp_sa = b.g.ctx.get_rows(inp_sa, inp_out_ids);
        }
        let ffn_inp = b.g.ctx.add(cur, inp_sa);
        b.cb(ffn_inp, "ffn_inp", ili);

        cur = b.build_norm(ffn_inp, layer.ffn_norm, None, NormType::Rms, ili);
        b.cb(cur, "ffn_norm", ili);
        let (up, gate, down) = (layer.ffn_up, layer.ffn_gate, layer.ffn_down);
        cur = b.build_ffn_swiglu(
            cur,
            up.expect("ffn weights are required at load"),
            layer.ffn_up_b,
            gate.expect("ffn weights are required at load"),
            layer.ffn_gate_b,
            down.expect("ffn weights are required at load"),
            layer.ffn_down_b,
            ili,
        );
        b.cb(cur, "ffn_out", ili);
        cur = b.g.ctx.add(cur, ffn_inp);
        b.cb(cur, "ffn_out", ili);
        cur = b.build_cvec(cur, il);
        b.cb(cur, "l_out", ili);
        inp_l = cur;
    }

    let mut cur = b.build_norm(inp_l, model.output_norm, None, NormType::Rms, -1);
    b.cb(cur, "result_norm", -1);
    b.t_embd = Some(cur);
    let output = b.w(model.output.expect("loaded models have an output matrix"));
    cur = b.g.ctx.mul_mat(output, cur);
    b.cb(cur, "result_output", -1);
    cur
}
