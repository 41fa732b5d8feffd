//! The reference's memory: one f64 per element of every root tensor, so views, in-place ops,
//! CPY and SET_ROWS into views behave as they do on real memory. Values written into a tensor
//! are rounded to its type the way a backend would store them.

use ggml::{Context, Tensor, TensorId, Type};
use std::collections::HashMap;

#[derive(Default)]
pub struct Shadow {
    mem: HashMap<u32, Vec<f64>>,
}

pub fn ne(t: &Tensor) -> [usize; 4] {
    t.ne.map(|n| n.max(0) as usize)
}

/// Dense index in ne order.
#[inline]
pub fn at(ne: &[usize; 4], i0: usize, i1: usize, i2: usize, i3: usize) -> usize {
    i0 + ne[0] * (i1 + ne[1] * (i2 + ne[2] * i3))
}

fn root_of(ctx: &Context, id: TensorId) -> (TensorId, usize) {
    let t = &ctx[id];
    match t.view_src {
        Some(r) => (r, t.view_offs),
        None => (id, 0),
    }
}

fn elems_of_root(t: &Tensor) -> usize {
    t.nbytes() / t.ty.type_size() * t.ty.block_size()
}

/// Element index in the root of element (i) of tensor t viewed at `offs` bytes.
fn elem_index(t: &Tensor, offs: usize, i: [usize; 4]) -> usize {
    let bs = t.ty.block_size();
    let byte = offs + (i[0] / bs) * t.nb[0] + i[1] * t.nb[1] + i[2] * t.nb[2] + i[3] * t.nb[3];
    byte / t.ty.type_size() * bs + i[0] % bs
}

/// Rounds a value the way storing it as `ty` would (quantized types are handled per row).
pub fn round_to(ty: Type, v: f64) -> f64 {
    match ty {
        Type::F32 => v as f32 as f64,
        Type::F16 => half::f16::from_f32(v as f32).to_f64(),
        Type::Bf16 => half::bf16::from_f32(v as f32).to_f64(),
        Type::I32 => (v as f32) as i32 as f64,
        Type::I64 => v as i64 as f64,
        _ => v,
    }
}

/// Decodes a tensor's raw (contiguous) bytes into f64 values.
pub fn decode(ty: Type, bytes: &[u8]) -> Vec<f64> {
    match ty {
        Type::F32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
            .collect(),
        Type::F16 => bytes
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64())
            .collect(),
        Type::Bf16 => bytes
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f64())
            .collect(),
        Type::I32 => bytes
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
            .collect(),
        Type::I64 => bytes
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f64)
            .collect(),
        _ if ty.is_quantized() => {
            let n = bytes.len() / ty.type_size() * ty.block_size();
            let mut out = vec![0f32; n];
            ggml::quants::dequantize_row(
                ty,
                &bytes[..bytes.len() / ty.type_size() * ty.type_size()],
                &mut out,
            );
            out.into_iter().map(|v| v as f64).collect()
        }
        _ => vec![f64::NAN; bytes.len() / ty.type_size().max(1)],
    }
}

impl Shadow {
    /// Copies a root tensor's current bytes (from its backend buffer) into the shadow.
    pub fn load(&mut self, ctx: &Context, id: TensorId) -> Result<(), ggml::backend::BackendError> {
        let t = &ctx[id];
        let mut bytes = vec![0u8; t.nbytes()];
        ggml::backend::get_tensor(t, &mut bytes, 0)?;
        self.mem.insert(id.0, decode(t.ty, &bytes));
        Ok(())
    }

    fn root_mem(&mut self, ctx: &Context, root: TensorId) -> &mut Vec<f64> {
        let n = elems_of_root(&ctx[root]);
        self.mem.entry(root.0).or_insert_with(|| vec![f64::NAN; n])
    }

    /// The tensor's values in ne order.
    pub fn dense(&mut self, ctx: &Context, id: TensorId) -> Vec<f64> {
        let t = &ctx[id];
        let (root, offs) = root_of(ctx, id);
        let n = ne(t);
        let mem = self.root_mem(ctx, root);
        let mut out = Vec::with_capacity(n.iter().product());
        for i3 in 0..n[3] {
            for i2 in 0..n[2] {
                for i1 in 0..n[1] {
                    for i0 in 0..n[0] {
                        let k = elem_index(t, offs, [i0, i1, i2, i3]);
                        out.push(mem.get(k).copied().unwrap_or(f64::NAN));
                    }
                }
            }
        }
        out
    }

    /// Stores values (ne order) into the tensor, rounded to its type.
    pub fn store(&mut self, ctx: &Context, id: TensorId, vals: &[f64]) {
        let t = &ctx[id];
        let (root, offs) = root_of(ctx, id);
        let n = ne(t);
        let mut vals = vals.to_vec();
        if t.ty.is_quantized() {
            // rows whose values did not change keep them: re-quantizing dequantized values
            // does not reproduce them for every type
            let current = self.dense(ctx, id);
            for (row, cur) in vals
                .chunks_mut(n[0].max(1))
                .zip(current.chunks(n[0].max(1)))
            {
                if row.iter().zip(cur).all(|(a, b)| a == b) {
                    continue;
                }
                let f: Vec<f32> = row.iter().map(|&v| v as f32).collect();
                let mut q = vec![0u8; t.ty.row_size(n[0] as i64)];
                crate::runner::quantize_values(t.ty, &f, &mut q);
                let mut back = vec![0f32; n[0]];
                ggml::quants::dequantize_row(t.ty, &q, &mut back);
                for (r, b) in row.iter_mut().zip(back) {
                    *r = b as f64;
                }
            }
        } else {
            for v in vals.iter_mut() {
                *v = round_to(t.ty, *v);
            }
        }
        let mem = self.root_mem(ctx, root);
        let mut k = 0;
        for i3 in 0..n[3] {
            for i2 in 0..n[2] {
                for i1 in 0..n[1] {
                    for i0 in 0..n[0] {
                        let e = elem_index(t, offs, [i0, i1, i2, i3]);
                        if e < mem.len() {
                            mem[e] = vals[k];
                        }
                        k += 1;
                    }
                }
            }
        }
    }
}
