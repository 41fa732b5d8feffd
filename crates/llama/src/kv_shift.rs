//! Applying position shifts to the cached keys (build_graph_shift): after memory_seq_add the
//! keys of the moved cells are rotated by the difference before the next decode.

use crate::context::Context;
use crate::error::{LlamaError, Result};
use ggml::backend::{set_tensor, Status};
use ggml::{Graph, Type};

impl Context {
    pub(crate) fn apply_k_shift(&mut self) -> Result<()> {
        self.apply_k_shift_of(false)?;
        if self.kv.swa.is_some() {
            self.apply_k_shift_of(true)?;
        }
        Ok(())
    }

    /// The K-shift of one cache (the sliding-window one when `swa`), each layer rotated with
    /// its own rope frequencies.
    fn apply_k_shift_of(&mut self, swa: bool) -> Result<()> {
        let hp = self.model.hparams.clone();
        let kv = if swa {
            self.kv.swa.as_ref().expect("checked by the caller")
        } else {
            &self.kv.base
        };
        if !kv.cells.has_shift() {
            return Ok(());
        }
        let size = kv.size() as i64;
        let mut g = Graph::new(ggml::Context::new());
        let shift = g.ctx.new_tensor_1d(Type::I32, size);
        g.ctx.set_input(shift);
        g.ctx.set_name(shift, "inp_k_shift");
        let base_rope = self.graph_params(1, 1, size as usize, 0).rope;
        for il in kv.layer_indices() {
            let (k_id, _) = kv.layer(il).expect("layer_indices lists held layers");
            let k = g.ctx.import(&kv.ctx[k_id]);
            let ty = g.ctx[k].ty;
            let (head, n_head_kv, n_embd_gqa) = (
                hp.n_embd_head_k as i64,
                hp.n_head_kv(il) as i64,
                hp.n_embd_k_gqa(il) as i64,
            );
            // MLA rows hold the latent, then the rotated part: rotate only that tail
            let n_rot = hp.n_rot as i64;
            let (width, offset) = if hp.mla.n_lora_kv > 0 {
                (n_rot, ty.row_size(head - n_rot))
            } else {
                (head, 0)
            };
            let view = g.ctx.view_3d(
                k,
                width,
                n_head_kv,
                size,
                ty.row_size(head),
                ty.row_size(n_embd_gqa),
                offset,
            );
            let factors = self
                .model
                .rope_freqs(il)
                .map(|f| g.ctx.import(&self.model.ctx[f]));
            let mut rope = base_rope;
            rope.n_dims = hp.n_rot as i32;
            if hp.is_swa(il) {
                rope.freq_base = hp.rope_freq_base_train_swa;
                rope.freq_scale = hp.rope_freq_scale_train_swa;
            }
            let out = if ty.is_quantized() {
                // dequantize, rotate, quantize back
                let tmp = g.ctx.cast(view, Type::F32);
                let tmp = g.ctx.rope_ext(tmp, shift, factors, rope);
                g.ctx.cpy(tmp, view)
            } else {
                g.ctx.rope_ext_inplace(view, shift, factors, rope)
            };
            g.build_forward_expand(out);
        }
        let data: Vec<u8> = (0..size as usize)
            .flat_map(|i| {
                (if kv.cells.is_empty(i) {
                    0
                } else {
                    kv.cells.shift(i)
                })
                .to_le_bytes()
            })
            .collect();
        self.prev = None;
        self.sched.reset();
        self.sched
            .alloc_graph(&mut g)
            .map_err(|e| LlamaError::Compute(e.to_string()))?;
        set_tensor(&g.ctx[shift], &data, 0)?;
        let status = self.sched.graph_compute(&mut g);
        self.sched.reset();
        if status != Status::Success {
            return Err(LlamaError::Compute(format!("K-shift graph: {status}")));
        }
        let kv = if swa {
            self.kv.swa.as_mut().expect("checked by the caller")
        } else {
            &mut self.kv.base
        };
        kv.cells.reset_shift();
        Ok(())
    }
}
