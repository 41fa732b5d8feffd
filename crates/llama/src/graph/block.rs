//! The pre-norm decoder layer the mixture-of-experts architectures share (qwen2moe.cpp,
//! olmoe.cpp, deepseek.cpp, deepseek2.cpp write the same loop): RMS `attn_norm`, the
//! architecture's attention, the last layer's output rows picked, the residual (`ffn_inp`),
//! RMS `ffn_norm`, the architecture's feed-forward, the residual, the control vector, `l_out`.
//! Node names and order are those loops', so graph sizes and eval-callback dumps stay equal.

use super::{GraphBuilder, NormType};
use crate::model::Layer;
use ggml::TensorId;

impl GraphBuilder<'_> {
    /// Every layer over `inp_l` (the embeddings); `attn` and `ffn` get the normed input of
    /// their layer and return its output (`ffn` names its own, e.g. "ffn_out"). Returns the
    /// last layer's output.
    pub fn build_prenorm_layers(
        &mut self,
        mut inp_l: TensorId,
        inp_out_ids: TensorId,
        mut attn: impl FnMut(&mut Self, &Layer, TensorId, usize) -> TensorId,
        mut ffn: impl FnMut(&mut Self, &Layer, TensorId, usize) -> TensorId,
    ) -> TensorId {
        let model = self.model;
        let n_layer = model.hparams.n_layer as usize;
        for il in 0..n_layer {
            let layer = &model.layers[il];
            let ili = il as i32;
            let mut inp_sa = inp_l;
            let mut cur = self.build_norm(inp_l, layer.attn_norm, None, NormType::Rms, ili);
            self.cb(cur, "attn_norm", ili);
            cur = attn(self, layer, cur, il);
            if il == n_layer - 1 {
                cur = self.g.ctx.get_rows(cur, inp_out_ids);
                inp_sa = self.g.ctx.get_rows(inp_sa, inp_out_ids);
            }
            let ffn_inp = self.g.ctx.add(cur, inp_sa);
            self.cb(ffn_inp, "ffn_inp", ili);
            cur = self.build_norm(ffn_inp, layer.ffn_norm, None, NormType::Rms, ili);
            self.cb(cur, "ffn_norm", ili);
            cur = ffn(self, layer, cur, il);
            cur = self.g.ctx.add(cur, ffn_inp);
            cur = self.build_cvec(cur, il);
            self.cb(cur, "l_out", ili);
            inp_l = cur;
        }
        inp_l
    }

    /// The head of these architectures: RMS `result_norm` (kept as the embeddings), then the
    /// output matrix (`result_output`).
    pub fn build_rms_output_head(&mut self, inp: TensorId) -> TensorId {
        let model = self.model;
        let mut cur = self.build_norm(inp, model.output_norm, None, NormType::Rms, -1);
        self.cb(cur, "result_norm", -1);
        self.t_embd = Some(cur);
        let output = model.output.expect("loaded models have an output matrix");
        cur = self.build_lora_mm(output, cur);
        self.cb(cur, "result_output", -1);
        cur
    }
}
