//! Graph builders shared by the scheduler tests.
#![allow(dead_code)]

use ggml::alloc::Tallocr;
use ggml::backend::{Buffer, BufferTypeRef, BufferUsage};
use ggml::{Context, Graph, TensorId, Type};
use std::sync::Arc;

/// Puts the tensors in one new buffer of `buft` marked as weights (as the model loader does).
pub fn place_weights(ctx: &mut Context, ids: &[TensorId], buft: &BufferTypeRef) -> Arc<Buffer> {
    place(ctx, ids, buft, BufferUsage::Weights)
}

pub fn place(
    ctx: &mut Context,
    ids: &[TensorId],
    buft: &BufferTypeRef,
    usage: BufferUsage,
) -> Arc<Buffer> {
    let a = buft.alignment();
    let size: usize = ids
        .iter()
        .map(|&t| buft.alloc_size(&ctx[t]).div_ceil(a) * a)
        .sum::<usize>()
        + a;
    let buf = buft.clone().alloc_buffer(size).expect("test buffer");
    buf.set_usage(usage);
    let mut ta = Tallocr::new(buf.clone());
    for &t in ids {
        ta.alloc(ctx, t).expect("fits");
    }
    buf
}

pub fn named(ctx: &mut Context, t: TensorId, name: &str) -> TensorId {
    ctx.set_name(t, name)
}

/// Example 6 of the architecture seed: embd, then per layer attn (weights), add, ffn (weights),
/// out, then logits (the output layer's weights).
pub struct Toy {
    pub g: Graph,
    pub embd: TensorId,
    pub inp_tokens: TensorId,
    pub out: Vec<TensorId>,
    pub logits: TensorId,
    /// per layer: is the layer (its attention weights) on the GPU
    pub layer_on_gpu: Vec<bool>,
    pub buffers: Vec<Arc<Buffer>>,
}

pub const D: i64 = 32;
pub const V: i64 = 16;

/// i_gpu_start = max(n_layer + 1 - ngl, 0) as llama-model.cpp; `ffn_on_cpu` layers keep their
/// FFN weights on the CPU (a tensor override).
pub fn toy(
    n_layer: usize,
    ngl: usize,
    ffn_on_cpu: &[usize],
    cpu: &BufferTypeRef,
    gpu: &BufferTypeRef,
) -> Toy {
    toy_sized(n_layer, ngl, ffn_on_cpu, cpu, gpu, D)
}

pub fn toy_sized(
    n_layer: usize,
    ngl: usize,
    ffn_on_cpu: &[usize],
    cpu: &BufferTypeRef,
    gpu: &BufferTypeRef,
    d: i64,
) -> Toy {
    let gpu_start = (n_layer + 1).saturating_sub(ngl);
    let mut ctx = Context::new();
    let (mut on_cpu, mut on_gpu) = (Vec::new(), Vec::new());
    let tok_embd = ctx.new_tensor_2d(Type::F32, d, V);
    named(&mut ctx, tok_embd, "token_embd.weight");
    on_cpu.push(tok_embd);
    let inp_tokens = ctx.new_tensor_1d(Type::I32, 1);
    named(&mut ctx, inp_tokens, "inp_tokens");
    ctx.set_input(inp_tokens);
    let embd = ctx.get_rows(tok_embd, inp_tokens);
    named(&mut ctx, embd, "embd");
    let mut x = embd;
    let mut out = Vec::new();
    let mut layer_on_gpu = Vec::new();
    for il in 0..n_layer {
        let wa = ctx.new_tensor_2d(Type::F32, d, d);
        named(&mut ctx, wa, &format!("blk.{il}.attn.weight"));
        let wf = ctx.new_tensor_2d(Type::F32, d, d);
        named(&mut ctx, wf, &format!("blk.{il}.ffn.weight"));
        let gpu_layer = il >= gpu_start;
        layer_on_gpu.push(gpu_layer);
        if gpu_layer {
            on_gpu.push(wa)
        } else {
            on_cpu.push(wa)
        }
        if gpu_layer && !ffn_on_cpu.contains(&il) {
            on_gpu.push(wf)
        } else {
            on_cpu.push(wf)
        }
        let attn = ctx.mul_mat(wa, x);
        named(&mut ctx, attn, &format!("attn-{il}"));
        let add = ctx.add(attn, x);
        named(&mut ctx, add, &format!("add-{il}"));
        let ffn = ctx.mul_mat(wf, add);
        named(&mut ctx, ffn, &format!("ffn-{il}"));
        let o = ctx.add(ffn, add);
        named(&mut ctx, o, &format!("out-{il}"));
        out.push(o);
        x = o;
    }
    let wo = ctx.new_tensor_2d(Type::F32, d, V);
    named(&mut ctx, wo, "output.weight");
    if n_layer >= gpu_start {
        on_gpu.push(wo)
    } else {
        on_cpu.push(wo)
    }
    let logits = ctx.mul_mat(wo, x);
    named(&mut ctx, logits, "logits");
    ctx.set_output(logits);
    let buffers = vec![
        place_weights(&mut ctx, &on_cpu, cpu),
        place_weights(&mut ctx, &on_gpu, gpu),
    ];
    let mut g = Graph::new(ctx);
    g.build_forward_expand(logits);
    Toy {
        g,
        embd,
        inp_tokens,
        out,
        logits,
        layer_on_gpu,
        buffers,
    }
}

/// Deterministic values from the tensor's name, so two builds of a graph hold the same weights.
pub fn fill_by_name(ctx: &Context, t: TensorId) {
    let tensor = &ctx[t];
    let mut h: u64 = 1469598103934665603;
    for b in tensor.name.bytes() {
        h = (h ^ b as u64).wrapping_mul(1099511628211);
    }
    let n = tensor.nelements() as usize;
    let vals: Vec<f32> = (0..n)
        .map(|i| {
            h = h
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407 + i as u64);
            ((h >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.25
        })
        .collect();
    ggml::backend::tensor_set_f32(tensor, &vals).unwrap();
}

/// Fills every allocated F32 leaf of the graph (the weights).
pub fn fill_weights(g: &Graph) {
    for &l in &g.leafs {
        if g.ctx[l].data.is_some() && g.ctx[l].ty == Type::F32 {
            fill_by_name(&g.ctx, l);
        }
    }
}
