//! Graphs computed through the scheduler across the fake GPU (running the CPU kernels on its own
//! memory) and the CPU, compared bit for bit with the CPU alone.

mod common;

use common::*;
use ggml::backend::{tensor_to_f32, Backend, BufferTypeRef, Device, Status};
use ggml::sched::Sched;
use ggml::{Context, Graph, TensorId, Type};
use ggml_fake_device::{Counters, TestDevice, TestDeviceConfig};
use std::sync::{Arc, Mutex};

const GPU: usize = 0;

fn cpu_backend() -> Box<dyn Backend> {
    let mut b = ggml_cpu::init_backend();
    b.set_n_threads(2);
    b
}

fn cpu_buft() -> BufferTypeRef {
    ggml_cpu::device().buffer_type()
}

fn gpu_sched(cfg: TestDeviceConfig, parallel: bool) -> (Sched, Arc<Counters>, BufferTypeRef) {
    let gpu = TestDevice::new(cfg);
    let mut s = Sched::new(
        vec![gpu.backend(cpu_backend()), cpu_backend()],
        None,
        4096,
        parallel,
        true,
    )
    .unwrap();
    s.set_debug(0);
    s.set_debug_realloc(0);
    (s, gpu.counters(), gpu.buffer_type())
}

fn cpu_sched() -> Sched {
    let mut s = Sched::new(vec![cpu_backend()], None, 4096, false, true).unwrap();
    s.set_debug(0);
    s
}

fn set_token(g: &Graph, t: TensorId, token: i32) {
    ggml::backend::set_tensor(&g.ctx[t], &token.to_le_bytes(), 0).unwrap();
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The toy model's logits on the CPU alone.
fn reference_logits(token: i32) -> Vec<f32> {
    reference_logits_sized(token, D)
}

fn reference_logits_sized(token: i32, d: i64) -> Vec<f32> {
    let mut s = cpu_sched();
    let mut toy = toy_sized(2, 0, &[], &cpu_buft(), &cpu_buft(), d);
    fill_weights(&toy.g);
    s.alloc_graph(&mut toy.g).unwrap();
    set_token(&toy.g, toy.inp_tokens, token);
    assert_eq!(s.graph_compute(&mut toy.g), Status::Success);
    tensor_to_f32(&toy.g.ctx[toy.logits]).unwrap()
}

#[test]
fn gpu_and_cpu_splits_compute_the_same_bits_as_the_cpu_alone() {
    let want = reference_logits(3);
    for (ngl, ffn_on_cpu, async_copy) in [
        (3, vec![], false),
        (2, vec![], true),
        (3, vec![1], false),
        (3, vec![1], true),
    ] {
        let cfg = TestDeviceConfig {
            async_copy,
            ..TestDeviceConfig::gpu("GPU0")
        };
        let (mut s, counters, gpu_buft) = gpu_sched(cfg, false);
        let mut toy = toy(2, ngl, &ffn_on_cpu, &cpu_buft(), &gpu_buft);
        fill_weights(&toy.g);
        s.alloc_graph(&mut toy.g).unwrap();
        set_token(&toy.g, toy.inp_tokens, 3);
        assert_eq!(s.graph_compute(&mut toy.g), Status::Success);
        let got = tensor_to_f32(&toy.g.ctx[toy.logits]).unwrap();
        // every tensor placed in the GPU's memory went through its buffer's init_tensor
        let on_gpu = toy
            .g
            .ctx
            .ids()
            .filter(|&t| toy.g.ctx[t].buffer().is_some_and(|b| b.name() == "GPU0"))
            .count();
        assert!(on_gpu > 0 && Counters::get(&counters.init_tensor_calls) >= on_gpu);
        assert_eq!(
            bits(&got),
            bits(&want),
            "ngl {ngl} ffn_on_cpu {ffn_on_cpu:?}"
        );
        assert!(Counters::get(&counters.graph_computes) >= 1);
        if async_copy {
            assert!(
                Counters::get(&counters.cpy_async_calls) >= 1,
                "intermediate inputs try the async path"
            );
        }
    }
}

#[test]
fn the_eval_callback_sees_the_nodes_it_asks_for_with_their_values() {
    type Observed = Vec<(String, Vec<f32>)>;
    type Seen = Arc<Mutex<Observed>>;
    let watch = |seen: Seen| -> ggml::sched::EvalCallback {
        Box::new(move |ctx: &Context, t: TensorId, ask: bool| {
            let name = ctx[t].name.clone();
            let wanted = name == "add-0" || name == "ffn-1";
            if !ask && wanted {
                seen.lock()
                    .unwrap()
                    .push((name, tensor_to_f32(&ctx[t]).unwrap()));
            }
            !ask || wanted
        })
    };

    let run = |gpu: bool| -> (Observed, Option<Arc<Counters>>) {
        let seen: Seen = Arc::default();
        let (mut s, counters, toy) = if gpu {
            let (s, c, gbuft) = gpu_sched(TestDeviceConfig::gpu("GPU0"), false);
            (s, Some(c), toy(2, 3, &[1], &cpu_buft(), &gbuft))
        } else {
            (cpu_sched(), None, toy(2, 0, &[], &cpu_buft(), &cpu_buft()))
        };
        let mut toy = toy;
        fill_weights(&toy.g);
        s.set_eval_callback(Some(watch(seen.clone())));
        s.alloc_graph(&mut toy.g).unwrap();
        set_token(&toy.g, toy.inp_tokens, 5);
        assert_eq!(s.graph_compute(&mut toy.g), Status::Success);
        let v = seen.lock().unwrap().clone();
        (v, counters)
    };
    let (want, _) = run(false);
    let (got, counters) = run(true);
    assert_eq!(
        want.iter().map(|w| &w.0).collect::<Vec<_>>(),
        vec!["add-0", "ffn-1"]
    );
    assert_eq!(got.len(), 2);
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(w.0, g.0);
        assert_eq!(bits(&w.1), bits(&g.1), "{}", w.0);
    }
    // GPU splits: [attn-0 add-0 | ffn-0 out-0 attn-1 add-1] and [out-1 logits]: three runs
    let c = counters.unwrap();
    assert_eq!(Counters::get(&c.graph_computes), 3);
    assert_eq!(
        c.computed.lock().unwrap()[..2],
        ["attn-0".to_string(), "add-0".to_string()]
    );
}

#[test]
fn moe_experts_in_host_memory_are_copied_only_where_used() {
    const K: i64 = 32;
    const M: i64 = 16;
    const N_EXPERT: i64 = 8;
    const T: i64 = 32;
    let used = [[1, 2], [5, 1], [2, 5]];
    let build = || {
        let mut ctx = Context::new();
        let experts = ctx.new_tensor_3d(Type::F32, K, M, N_EXPERT);
        ctx.set_name(experts, "ffn_up_exps.weight");
        let _w = place_weights(&mut ctx, &[experts], &cpu_buft());
        let b = ctx.new_tensor_3d(Type::F32, K, 1, T);
        ctx.set_name(b, "b");
        ctx.set_input(b);
        let ids = ctx.new_tensor_2d(Type::I32, 2, T);
        ctx.set_name(ids, "ids");
        ctx.set_input(ids);
        let mm = ctx.mul_mat_id(experts, b, ids);
        ctx.set_name(mm, "moe_up");
        ctx.set_output(mm);
        let mut g = Graph::new(ctx);
        g.build_forward_expand(mm);
        fill_by_name(&g.ctx, experts);
        (g, b, ids, mm, _w)
    };
    let set_inputs = |g: &Graph, b: TensorId, ids: TensorId| {
        fill_by_name(&g.ctx, b);
        let v: Vec<u8> = (0..T as usize)
            .flat_map(|t| used[t % 3])
            .flat_map(|i: i32| i.to_le_bytes())
            .collect();
        ggml::backend::set_tensor(&g.ctx[ids], &v, 0).unwrap();
    };

    let mut s = cpu_sched();
    let (mut g, b, ids, mm, _w) = build();
    s.alloc_graph(&mut g).unwrap();
    set_inputs(&g, b, ids);
    assert_eq!(s.graph_compute(&mut g), Status::Success);
    let want = tensor_to_f32(&g.ctx[mm]).unwrap();

    let (mut s, counters, _) = gpu_sched(TestDeviceConfig::gpu("GPU0"), false);
    let (mut g, b, ids, mm, _w2) = build();
    s.alloc_graph(&mut g).unwrap();
    assert_eq!(
        s.get_tensor_backend(mm),
        Some(GPU),
        "batch 32 offloads the expert matmul"
    );
    assert_eq!(s.cause(mm), "1.off");
    set_inputs(&g, b, ids);
    assert_eq!(s.graph_compute(&mut g), Status::Success);
    assert_eq!(bits(&tensor_to_f32(&g.ctx[mm]).unwrap()), bits(&want));
    // experts 1-2 in one run, 5 in another, each with 512 bytes of tail padding; the user
    // inputs b and ids are copied whole by the synchronous path, not set_tensor_async
    let expert = (K * M * 4) as usize;
    assert_eq!(Counters::get(&counters.set_async_calls), 2);
    assert_eq!(
        Counters::get(&counters.set_async_bytes),
        (2 * expert + 512) + (expert + 512)
    );
}

#[test]
fn pipeline_copies_rotate_and_copy_0_returns_after_a_synchronize() {
    let want = [reference_logits_sized(7, 32), reference_logits_sized(7, 64)];
    let (mut s, counters, gbuft) = gpu_sched(TestDeviceConfig::gpu("GPU0"), true);
    assert_eq!(s.n_copies(), 4);
    let run = |s: &mut Sched, d: i64| -> (usize, String) {
        let mut toy = toy_sized(2, 3, &[], &cpu_buft(), &gbuft, d);
        fill_weights(&toy.g);
        s.alloc_graph(&mut toy.g).unwrap();
        let names: Vec<String> = (0..4)
            .map(|c| {
                toy.g
                    .ctx
                    .name(s.tensor_copy(toy.embd, GPU, c).unwrap())
                    .to_string()
            })
            .collect();
        assert_eq!(
            names,
            ["GPU0#embd#0", "GPU0#embd#1", "GPU0#embd#2", "GPU0#embd#3"]
        );
        // the graph input keeps its own tensor as the current copy and gets three more
        let c0 = s.tensor_copy(toy.inp_tokens, 1, s.cur_copy()).unwrap();
        assert_eq!(c0, toy.inp_tokens);
        set_token(&toy.g, toy.inp_tokens, 7);
        assert_eq!(s.graph_compute(&mut toy.g), Status::Success);
        let want = &want[(d / 64) as usize];
        assert_eq!(
            bits(&tensor_to_f32(&toy.g.ctx[toy.logits]).unwrap()),
            bits(want)
        );
        let attn0 = toy.g.ctx.find("attn-0").unwrap();
        let read = toy.g.ctx.name(toy.g.ctx[attn0].src[1].unwrap()).to_string();
        (s.cur_copy(), read)
    };
    let copy = |c: usize| (c, format!("GPU0#embd#{c}"));
    assert_eq!(run(&mut s, 32), copy(0));
    // back to back without an idle synchronize: the next copy
    s.reset();
    assert_eq!(run(&mut s, 32), copy(1));
    // a bigger graph reallocates; the backends are synchronized without resetting the rotation
    s.reset();
    assert_eq!(run(&mut s, 64), copy(2));
    s.reset();
    assert_eq!(run(&mut s, 64), copy(3));
    s.reset();
    assert_eq!(run(&mut s, 64), copy(0));
    // idle: reset then synchronize -> copy 0 again (what keeps generation graphs identical)
    s.reset();
    assert_eq!(run(&mut s, 64), copy(1));
    s.reset();
    s.synchronize().unwrap();
    assert_eq!(run(&mut s, 64), copy(0));
    assert!(
        Counters::get(&counters.events_recorded) >= 4,
        "each GPU split records its event"
    );
    // the events are the scheduler's, made once per (backend, copy), as ggml's events[b][c]
    assert_eq!(Counters::get(&counters.events_created), 4);
    // four copies of the crossing tensor live in the GPU's compute buffer
    assert!(s.get_buffer_size(GPU) >= 4 * 256);
}

#[test]
fn moe_ids_are_read_back_once_per_ids_tensor() {
    const K: i64 = 32;
    const N_EXPERT: i64 = 8;
    const T: i64 = 32;
    // gate, up, down: three expert matmuls on the same routing, each its own split (a new
    // foreign weight cuts the split), each copying experts 0 and 3..4 only
    let build = || {
        let mut ctx = Context::new();
        let e: Vec<TensorId> = (0..3)
            .map(|i| {
                let t = ctx.new_tensor_3d(Type::F32, K, K, N_EXPERT);
                ctx.set_name(t, &format!("exps{i}.weight"))
            })
            .collect();
        let w = place_weights(&mut ctx, &e, &cpu_buft());
        let b = ctx.new_tensor_3d(Type::F32, K, 1, T);
        ctx.set_name(b, "b");
        ctx.set_input(b);
        let ids = ctx.new_tensor_2d(Type::I32, 2, T);
        ctx.set_name(ids, "ids");
        ctx.set_input(ids);
        let h1 = ctx.mul_mat_id(e[0], b, ids);
        let h2 = ctx.mul_mat_id(e[1], h1, ids);
        let h3 = ctx.mul_mat_id(e[2], h2, ids);
        ctx.set_output(h3);
        let mut g = Graph::new(ctx);
        g.build_forward_expand(h3);
        for &t in &e {
            fill_by_name(&g.ctx, t);
        }
        (g, b, ids, h3, w)
    };
    let set_inputs = |g: &Graph, b: TensorId, ids: TensorId| {
        fill_by_name(&g.ctx, b);
        let v: Vec<u8> = (0..T)
            .flat_map(|t| if t % 2 == 0 { [0, 3] } else { [4, 0] })
            .flat_map(|i: i32| i.to_le_bytes())
            .collect();
        ggml::backend::set_tensor(&g.ctx[ids], &v, 0).unwrap();
    };
    let mut s = cpu_sched();
    let (mut g, b, ids, h3, _w) = build();
    s.alloc_graph(&mut g).unwrap();
    set_inputs(&g, b, ids);
    assert_eq!(s.graph_compute(&mut g), Status::Success);
    let want = tensor_to_f32(&g.ctx[h3]).unwrap();

    let (mut s, counters, _) = gpu_sched(TestDeviceConfig::gpu("GPU0"), false);
    let (mut g, b, ids, h3, _w) = build();
    s.alloc_graph(&mut g).unwrap();
    assert_eq!(s.n_splits(), 3);
    set_inputs(&g, b, ids);
    assert_eq!(s.graph_compute(&mut g), Status::Success);
    assert_eq!(bits(&tensor_to_f32(&g.ctx[h3]).unwrap()), bits(&want));
    let expert = (K * K * 4) as usize;
    assert_eq!(
        Counters::get(&counters.set_async_bytes),
        3 * ((expert + 512) + (2 * expert + 512))
    );
    // split 1 reads the original ids on the CPU (its copy comes later in the same split), split 2
    // reads the GPU copy, split 3 reuses what split 2 read
    assert_eq!(Counters::get(&counters.get_async_calls), 1);
}

#[test]
fn moe_expert_staging_outlives_a_deferred_set_tensor_async() {
    const K: i64 = 32;
    const N_EXPERT: i64 = 8;
    const T: i64 = 32;
    // gate, up, down: three expert matmuls on the same routing, each its own split (a new
    // foreign weight cuts the split), each copying experts 0 and 3..4 only
    let build = || {
        let mut ctx = Context::new();
        let e: Vec<TensorId> = (0..3)
            .map(|i| {
                let t = ctx.new_tensor_3d(Type::F32, K, K, N_EXPERT);
                ctx.set_name(t, &format!("exps{i}.weight"))
            })
            .collect();
        let w = place_weights(&mut ctx, &e, &cpu_buft());
        let b = ctx.new_tensor_3d(Type::F32, K, 1, T);
        ctx.set_name(b, "b");
        ctx.set_input(b);
        let ids = ctx.new_tensor_2d(Type::I32, 2, T);
        ctx.set_name(ids, "ids");
        ctx.set_input(ids);
        let h1 = ctx.mul_mat_id(e[0], b, ids);
        let h2 = ctx.mul_mat_id(e[1], h1, ids);
        let h3 = ctx.mul_mat_id(e[2], h2, ids);
        ctx.set_output(h3);
        let mut g = Graph::new(ctx);
        g.build_forward_expand(h3);
        for &t in &e {
            fill_by_name(&g.ctx, t);
        }
        (g, b, ids, h3, w)
    };
    let set_inputs = |g: &Graph, b: TensorId, ids: TensorId| {
        fill_by_name(&g.ctx, b);
        let v: Vec<u8> = (0..T)
            .flat_map(|t| if t % 2 == 0 { [0, 3] } else { [4, 0] })
            .flat_map(|i: i32| i.to_le_bytes())
            .collect();
        ggml::backend::set_tensor(&g.ctx[ids], &v, 0).unwrap();
    };
    let mut s = cpu_sched();
    let (mut g, b, ids, h3, _w) = build();
    s.alloc_graph(&mut g).unwrap();
    set_inputs(&g, b, ids);
    assert_eq!(s.graph_compute(&mut g), Status::Success);
    let want = tensor_to_f32(&g.ctx[h3]).unwrap();

    // the GPU writes the expert bytes only at its next graph_compute or synchronize: the
    // scheduler's staging must still hold them then
    let cfg = TestDeviceConfig {
        defer_set_async: true,
        ..TestDeviceConfig::gpu("GPU0")
    };
    let (mut s, counters, _) = gpu_sched(cfg, false);
    let (mut g, b, ids, h3, _w) = build();
    s.alloc_graph(&mut g).unwrap();
    assert_eq!(s.n_splits(), 3);
    set_inputs(&g, b, ids);
    assert_eq!(s.graph_compute(&mut g), Status::Success);
    assert_eq!(bits(&tensor_to_f32(&g.ctx[h3]).unwrap()), bits(&want));
    assert!(Counters::get(&counters.set_async_calls) > 0);
    // a second graph: the staging of the first was freed at its synchronize
    let (mut g, b, ids, h3, _w) = build();
    s.reset();
    s.alloc_graph(&mut g).unwrap();
    set_inputs(&g, b, ids);
    assert_eq!(s.graph_compute(&mut g), Status::Success);
    assert_eq!(bits(&tensor_to_f32(&g.ctx[h3]).unwrap()), bits(&want));
}
