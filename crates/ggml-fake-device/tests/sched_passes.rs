//! The scheduler's assignment passes, split rules, copies and debug output, on a fake GPU and a
//! mock CPU (nothing is computed here).

mod common;

use common::*;
use ggml::backend::{BufferTypeRef, BufferUsage, Device};
use ggml::sched::{Sched, SchedError};
use ggml::{Context, Graph, RopeParams, Tensor, TensorId, Type};
use ggml_fake_device::{MockCpuDevice, TestDevice, TestDeviceConfig};
use std::sync::Arc;

const GPU: usize = 0;
const CPU: usize = 1;

struct Rig {
    cpu: Arc<MockCpuDevice>,
    gpu: Arc<TestDevice>,
}

impl Rig {
    fn new() -> Rig {
        Rig::with(TestDeviceConfig::gpu("GPU0"))
    }
    fn with(cfg: TestDeviceConfig) -> Rig {
        Rig {
            cpu: MockCpuDevice::new(),
            gpu: TestDevice::new(cfg),
        }
    }
    fn cpu_buft(&self) -> BufferTypeRef {
        self.cpu.buffer_type()
    }
    fn gpu_buft(&self) -> BufferTypeRef {
        self.gpu.buffer_type()
    }
    fn sched(&self, op_offload: bool) -> Sched {
        let backends = vec![self.gpu.backend(self.cpu.backend()), self.cpu.backend()];
        let mut s = Sched::new(backends, None, 4096, false, op_offload).unwrap();
        s.set_debug(0);
        s.set_debug_realloc(0);
        s
    }
}

fn input(ctx: &mut Context, name: &str, ne: &[i64]) -> TensorId {
    let t = ctx.new_tensor(Type::F32, ne);
    ctx.set_name(t, name);
    ctx.set_input(t);
    t
}

fn weight(ctx: &mut Context, name: &str, ne: &[i64]) -> TensorId {
    let t = ctx.new_tensor(Type::F32, ne);
    ctx.set_name(t, name)
}

fn graph(ctx: Context, outs: &[TensorId]) -> Graph {
    let mut g = Graph::new(ctx);
    for &o in outs {
        g.build_forward_expand(o);
    }
    g
}

fn assigned(s: &Sched, t: TensorId) -> (Option<usize>, String) {
    (s.get_tensor_backend(t), s.cause(t).to_string())
}

fn on(b: usize, cause: &str) -> (Option<usize>, String) {
    (Some(b), cause.to_string())
}

// ---------------------------------------------------------------- construction

#[test]
fn construction_checks_the_backend_list() {
    let r = Rig::new();
    let err = Sched::new(
        vec![r.cpu.backend(), r.gpu.backend(r.cpu.backend())],
        None,
        64,
        false,
        true,
    );
    assert!(matches!(err, Err(SchedError::LastNotCpu(n)) if n == "GPU0"));
    assert!(matches!(
        Sched::new(vec![], None, 64, false, true),
        Err(SchedError::NoBackends)
    ));
    let many = (0..17).map(|_| r.cpu.backend()).collect();
    assert!(matches!(
        Sched::new(many, None, 64, false, true),
        Err(SchedError::TooManyBackends(17))
    ));
    // a buffer type the backend cannot use
    let bad = Sched::new(
        vec![r.gpu.backend(r.cpu.backend()), r.cpu.backend()],
        Some(vec![r.cpu_buft(), r.gpu_buft()]),
        64,
        false,
        true,
    );
    assert!(matches!(bad, Err(SchedError::BuftNotSupported { .. })));
    let s = Sched::new(
        vec![r.gpu.backend(r.cpu.backend()), r.cpu.backend()],
        None,
        64,
        true,
        true,
    )
    .unwrap();
    assert_eq!((s.n_backends(), s.n_copies()), (2, 4));
    assert!(ggml::backend::same_buft(
        s.get_buffer_type(GPU),
        &r.gpu_buft()
    ));
}

// ---------------------------------------------------------------- pass 1

#[test]
fn pass1_inputs_weights_and_preallocated_destinations() {
    let r = Rig::new();
    let mut ctx = Context::new();
    let inp = input(&mut ctx, "inp", &[common::D]);
    let wg = weight(&mut ctx, "wg", &[common::D, common::D]);
    let gvec = weight(&mut ctx, "gvec", &[common::D]);
    let wc = weight(&mut ctx, "wc", &[common::D, common::D]);
    let kv = weight(&mut ctx, "kv", &[common::D, 4]);
    let _wbufs = (
        place_weights(&mut ctx, &[wg, gvec], &r.gpu_buft()),
        place_weights(&mut ctx, &[wc], &r.cpu_buft()),
    );
    let _kvbuf = place(&mut ctx, &[kv], &r.gpu_buft(), BufferUsage::Any);
    let a = ctx.mul_mat(wg, inp);
    let b = ctx.mul(a, gvec);
    let kv_row = ctx.view_1d(kv, common::D, 0);
    let st = ctx.cpy(b, kv_row);
    let c = ctx.mul_mat(wc, inp);
    let mut g = graph(ctx, &[st, c]);
    let mut s = r.sched(true);
    s.alloc_graph(&mut g).unwrap();
    assert_eq!(assigned(&s, inp), on(CPU, "1.inp"));
    assert_eq!(assigned(&s, wg), on(GPU, "1.dst"));
    assert_eq!(assigned(&s, a), on(GPU, "1.wgt0"));
    assert_eq!(assigned(&s, b), on(GPU, "1.wgt1"));
    assert_eq!(assigned(&s, kv_row), on(GPU, "1.dst"));
    assert_eq!(
        assigned(&s, st),
        on(GPU, "1.dst"),
        "a KV cache write runs where the cache is"
    );
    // batch 1: the GPU vetoes the offload, the matmul stays with its host weight
    assert_eq!(assigned(&s, c), on(CPU, "1.wgt0"));
}

#[test]
fn pass1_vsrc_through_an_unallocated_view() {
    let r = Rig::new();
    let mut ctx = Context::new();
    let kv = weight(&mut ctx, "kv", &[common::D]);
    // a view made before its source was allocated has no memory of its own yet
    let v = ctx.view_1d(kv, common::D, 0);
    let _buf = place(&mut ctx, &[kv], &r.gpu_buft(), BufferUsage::Any);
    let mut t: Tensor = ctx[v].clone();
    t.view_src = Some(v);
    t.src = [None; ggml::tensor::MAX_SRC];
    t.src[0] = Some(v);
    t.name = "v2".into();
    let v2 = ctx.push(t);
    let out = ctx.scale(v2, 2.0);
    let mut g = graph(ctx, &[out]);
    let mut s = r.sched(true);
    s.alloc_graph(&mut g).unwrap();
    assert_eq!(assigned(&s, v), on(GPU, "1.dst"));
    assert_eq!(assigned(&s, v2), on(GPU, "1.vsrc"));
    assert_eq!(s.get_tensor_backend(out), Some(GPU));
}

#[test]
fn pass1_a_preallocated_tensor_no_backend_can_run_is_an_error() {
    let r = Rig::with(TestDeviceConfig {
        refuse_ops: vec!["CPY".into()],
        ..TestDeviceConfig::gpu("GPU0")
    });
    let mut ctx = Context::new();
    let x = input(&mut ctx, "x", &[common::D]);
    let kv = weight(&mut ctx, "kv", &[common::D]);
    let _buf = place(&mut ctx, &[kv], &r.gpu_buft(), BufferUsage::Any);
    let st = ctx.cpy(x, kv);
    let mut g = graph(ctx, &[st]);
    let err = r.sched(true).alloc_graph(&mut g).unwrap_err();
    assert!(
        matches!(&err, SchedError::PreAllocated { buffer, op: "CPY", .. } if buffer == "GPU0"),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "pre-allocated tensor (kv (copy of x)) in a buffer (GPU0) that cannot run the operation (CPY)"
    );
}

#[test]
fn pass1_rope_and_flash_attn_ignore_their_small_weights() {
    let r = Rig::new();
    let mut ctx = Context::new();
    let d = common::D;
    let inp = input(&mut ctx, "inp", &[d]);
    let pos = ctx.new_tensor_1d(Type::I32, 1);
    ctx.set_input(pos);
    let wq = weight(&mut ctx, "wq", &[d, d]);
    let wk = weight(&mut ctx, "wk", &[d, d]);
    let freq = weight(&mut ctx, "rope_freqs", &[d / 2]);
    let sinks = weight(&mut ctx, "sinks", &[1]);
    let _b = (
        place_weights(&mut ctx, &[wq, wk], &r.cpu_buft()),
        place_weights(&mut ctx, &[freq, sinks], &r.gpu_buft()),
    );
    let q = ctx.mul_mat(wq, inp);
    let q3 = ctx.reshape_3d(q, d, 1, 1);
    let p = RopeParams {
        n_dims: d as i32,
        ..Default::default()
    };
    let qr = ctx.rope_ext(q3, pos, Some(freq), p);
    let k = ctx.mul_mat(wk, inp);
    let k3 = ctx.reshape_3d(k, d, 1, 1);
    let fa = ctx.flash_attn_ext(qr, k3, k3, None, 1.0, 0.0, 0.0);
    ctx.flash_attn_ext_add_sinks(fa, Some(sinks));
    let mut g = graph(ctx, &[fa]);
    let mut s = r.sched(true);
    s.alloc_graph(&mut g).unwrap();
    // both would be 1.wgt2 / 1.wgt4 on the GPU if the weight rule applied to them
    assert_eq!(assigned(&s, qr), on(CPU, "2.sup"));
    assert_eq!(assigned(&s, fa), on(CPU, "2.sup"));
    // their GPU weights are staged on the CPU instead, and the second foreign weight starts a new
    // split so that the staging memory of the first can be reused
    let inputs: Vec<Vec<&str>> = s
        .splits()
        .iter()
        .map(|sp| sp.inputs.iter().map(|&t| g.ctx.name(t)).collect())
        .collect();
    assert_eq!(inputs, vec![vec!["rope_freqs"], vec!["sinks"]]);
    assert!(s.splits().iter().all(|sp| sp.backend_id == CPU));
}

#[test]
fn pass1_op_offload_pulls_host_weight_ops_from_batch_32() {
    for (batch, op_offload, refuse, expect) in [
        (31, true, false, on(CPU, "1.wgt0")),
        (32, true, false, on(GPU, "1.off")),
        (32, false, false, on(CPU, "1.wgt0")),
        (32, true, true, on(CPU, "1.wgt0")),
    ] {
        let mut cfg = TestDeviceConfig::gpu("GPU0");
        if refuse {
            cfg.refuse_ops = vec!["MUL_MAT".into()];
        }
        let r = Rig::with(cfg);
        let mut ctx = Context::new();
        let inp = input(&mut ctx, "inp", &[common::D, batch]);
        let wc = weight(&mut ctx, "wc", &[common::D, common::D]);
        let _b = place_weights(&mut ctx, &[wc], &r.cpu_buft());
        let m = ctx.mul_mat(wc, inp);
        let mut g = graph(ctx, &[m]);
        let mut s = r.sched(op_offload);
        s.alloc_graph(&mut g).unwrap();
        assert_eq!(
            assigned(&s, m),
            expect,
            "batch {batch} op_offload {op_offload} refuse {refuse}"
        );
    }
}

// ---------------------------------------------------------------- pass 2

/// g0 (GPU weight) -> s1 -> c2 (CPU weight) -> s3 [-> g4 (GPU weight) -> s5]
fn chain(r: &Rig, with_tail: bool) -> (Graph, [TensorId; 3]) {
    let mut ctx = Context::new();
    let d = common::D;
    let inp = input(&mut ctx, "inp", &[d]);
    let wg = weight(&mut ctx, "wg", &[d, d]);
    let wg2 = weight(&mut ctx, "wg2", &[d, d]);
    let wc = weight(&mut ctx, "wc", &[d, d]);
    let _b = (
        place_weights(&mut ctx, &[wg, wg2], &r.gpu_buft()),
        place_weights(&mut ctx, &[wc], &r.cpu_buft()),
    );
    let g0 = ctx.mul_mat(wg, inp);
    let s1 = ctx.scale(g0, 0.5);
    let c2 = ctx.mul_mat(wc, s1);
    let s3 = ctx.scale(c2, 0.5);
    let mut last = s3;
    if with_tail {
        let g4 = ctx.mul_mat(wg2, s3);
        last = ctx.scale(g4, 0.5);
    }
    (graph(ctx, &[last]), [s1, c2, s3])
}

#[test]
fn pass2_gpus_spread_both_ways_and_the_cpu_never_does() {
    let r = Rig::new();
    let (mut g, [s1, c2, s3]) = chain(&r, true);
    let mut s = r.sched(true);
    s.alloc_graph(&mut g).unwrap();
    assert_eq!(assigned(&s, s1), on(GPU, "2.sup"));
    assert_eq!(assigned(&s, c2), on(CPU, "1.wgt0"));
    // s3 reads the CPU's output, yet the upward GPU sweep claims it
    assert_eq!(assigned(&s, s3), on(GPU, "2.sup"));

    // with no GPU node after it, only the "rest" sweeps reach s3, and the CPU spreads
    let (mut g, [_, _, s3]) = chain(&r, false);
    let mut s = r.sched(true);
    s.alloc_graph(&mut g).unwrap();
    assert_eq!(assigned(&s, s3), on(CPU, "2.sup"));
}

#[test]
fn views_are_skipped_and_never_cut_a_split() {
    let r = Rig::new();
    let mut ctx = Context::new();
    let d = common::D;
    let inp = input(&mut ctx, "inp", &[d]);
    let wg = weight(&mut ctx, "wg", &[d, d]);
    let k = ctx.new_tensor_1d(Type::F32, d);
    ctx.set_name(k, "k");
    let _b = place_weights(&mut ctx, &[wg], &r.gpu_buft());
    let g0 = ctx.mul_mat(wg, inp);
    let v = ctx.reshape_2d(g0, d / 2, 2);
    let sv = ctx.scale(v, 2.0);
    let sum = ctx.add(g0, k);
    let mut g = graph(ctx, &[sv, sum]);
    let mut s = r.sched(true);
    s.alloc_graph(&mut g).unwrap();
    assert_eq!(assigned(&s, v), on(GPU, "4.vsrc"));
    assert_eq!(assigned(&s, sv), on(GPU, "2.sup"));
    // a constant nobody placed follows its consumer
    assert_eq!(assigned(&s, k), on(GPU, "4.cur"));
    assert_eq!(s.n_splits(), 1);
    assert_eq!(
        s.n_split_inputs(),
        1,
        "only inp is copied in: k was placed on the GPU"
    );
}

// ---------------------------------------------------------------- pass 3

#[test]
fn pass3_an_op_the_gpu_refuses_goes_where_most_sources_are_readable() {
    let r = Rig::with(TestDeviceConfig {
        refuse_ops: vec!["SILU".into()],
        ..TestDeviceConfig::gpu("GPU0")
    });
    let mut ctx = Context::new();
    let d = common::D;
    let inp = input(&mut ctx, "inp", &[d]);
    let wg = weight(&mut ctx, "wg", &[d, d]);
    let wg2 = weight(&mut ctx, "wg2", &[d, d]);
    let _b = place_weights(&mut ctx, &[wg, wg2], &r.gpu_buft());
    let g0 = ctx.mul_mat(wg, inp);
    let act = ctx.silu(g0);
    let g1 = ctx.mul_mat(wg2, act);
    let mut g = graph(ctx, &[g1]);
    let mut s = r.sched(true);
    s.alloc_graph(&mut g).unwrap();
    assert_eq!(assigned(&s, act), on(CPU, "3.best"));
    let backends: Vec<usize> = s.splits().iter().map(|sp| sp.backend_id).collect();
    assert_eq!(backends, vec![GPU, CPU, GPU]);
    assert_eq!(s.n_split_inputs(), 3);
}

#[test]
fn pass3_upgrades_to_a_higher_priority_backend_with_the_same_buffer_type_without_copies() {
    let cpu = MockCpuDevice::new();
    let blas = TestDevice::new(TestDeviceConfig {
        refuse_ops: vec!["MUL_MAT".into()],
        ..TestDeviceConfig::accel("BLAS", cpu.buffer_type())
    });
    let mut s = Sched::new(
        vec![blas.backend(cpu.backend()), cpu.backend()],
        None,
        4096,
        false,
        true,
    )
    .unwrap();
    let mut ctx = Context::new();
    let d = common::D;
    let inp = input(&mut ctx, "inp", &[d]);
    let wc = weight(&mut ctx, "wc", &[d, d]);
    let _b = place_weights(&mut ctx, &[wc], &cpu.buffer_type());
    let a = ctx.mul_mat(wc, inp);
    let b = ctx.scale(a, 3.0);
    let mut g = graph(ctx, &[b]);
    s.alloc_graph(&mut g).unwrap();
    assert_eq!(assigned(&s, a), on(1, "1.wgt0"));
    assert_eq!(assigned(&s, b), on(0, "3.upg"));
    assert_eq!(s.n_splits(), 2);
    assert_eq!(
        s.n_split_inputs(),
        0,
        "backends sharing a buffer type pass tensors without copies"
    );
    // one buffer type, one compute buffer: the second backend reports none of its own
    assert!(s.get_buffer_size(0) > 0);
    assert_eq!(s.get_buffer_size(1), 0);
}

// ---------------------------------------------------------------- pins and failures

#[test]
fn user_pins_survive_every_pass() {
    let r = Rig::new();
    let (mut g, [s1, _, s3]) = chain(&r, true);
    let mut s = r.sched(true);
    s.set_tensor_backend(s1, CPU);
    s.set_tensor_backend(s3, CPU);
    s.alloc_graph(&mut g).unwrap();
    assert_eq!(assigned(&s, s1), on(CPU, "usr"));
    assert_eq!(assigned(&s, s3), on(CPU, "usr"));
    // reset forgets pins along with everything else
    s.reset();
    assert_eq!(s.get_tensor_backend(s1), None);
}

#[test]
fn an_op_no_backend_supports_is_the_no_cpu_fallback_error() {
    let cpu = MockCpuDevice::refusing(&["SQR"]);
    let gpu = TestDevice::new(TestDeviceConfig {
        refuse_ops: vec!["SQR".into()],
        ..TestDeviceConfig::gpu("GPU0")
    });
    let mut s = Sched::new(
        vec![gpu.backend(cpu.backend()), cpu.backend()],
        None,
        4096,
        false,
        true,
    )
    .unwrap();
    let mut ctx = Context::new();
    let x = input(&mut ctx, "x", &[8]);
    let y = ctx.sqr(x);
    ctx.set_name(y, "y");
    let mut g = graph(ctx, &[y]);
    let err = s.alloc_graph(&mut g).unwrap_err();
    assert!(matches!(&err, SchedError::Unassigned { node, op: "SQR" } if node == "y"));
    assert!(err.to_string().contains(
        "all nodes should be assigned by now, this can happen if there is no CPU fallback"
    ));
}

// ---------------------------------------------------------------- splits and copies

#[test]
fn a_second_foreign_weight_starts_a_new_split() {
    let r = Rig::new();
    let mut ctx = Context::new();
    let d = common::D;
    let inp = input(&mut ctx, "inp", &[d, 32]);
    let w1 = weight(&mut ctx, "w1", &[d, d]);
    let w2 = weight(&mut ctx, "w2", &[d, d]);
    let _b = place_weights(&mut ctx, &[w1, w2], &r.cpu_buft());
    let m1 = ctx.mul_mat(w1, inp);
    let m2 = ctx.mul_mat(w2, m1);
    let mut g = graph(ctx, &[m2]);
    let mut s = r.sched(true);
    s.alloc_graph(&mut g).unwrap();
    assert_eq!(assigned(&s, m1), on(GPU, "1.off"));
    assert_eq!(assigned(&s, m2), on(GPU, "1.off"));
    let splits: Vec<(usize, Vec<&str>)> = s
        .splits()
        .iter()
        .map(|sp| {
            (
                sp.backend_id,
                sp.inputs.iter().map(|&t| g.ctx.name(t)).collect(),
            )
        })
        .collect();
    assert_eq!(splits, vec![(GPU, vec!["w1", "inp"]), (GPU, vec!["w2"])]);
    // the matmuls now read the GPU replicas
    assert_eq!(g.ctx.name(g.ctx[m1].src[0].unwrap()), "GPU0#w1#0");
    assert_eq!(g.ctx.name(g.ctx[m2].src[0].unwrap()), "GPU0#w2#0");
}

#[test]
fn a_full_input_list_starts_a_new_split_and_copies_are_rewritten_in_place() {
    let r = Rig::new();
    let mut ctx = Context::new();
    let d = common::D;
    let inp = input(&mut ctx, "inp", &[d]);
    let wg = weight(&mut ctx, "wg", &[d, d]);
    let wc: Vec<TensorId> = (0..40)
        .map(|i| weight(&mut ctx, &format!("wc{i}"), &[d, d]))
        .collect();
    let _b = (
        place_weights(&mut ctx, &[wg], &r.gpu_buft()),
        place_weights(&mut ctx, &wc, &r.cpu_buft()),
    );
    let c: Vec<TensorId> = wc
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            let t = ctx.mul_mat(w, inp);
            ctx.set_name(t, &format!("c_{i}"))
        })
        .collect();
    let mut x = ctx.mul_mat(wg, inp);
    let mut adds = Vec::new();
    for &ci in &c {
        x = ctx.add(x, ci);
        adds.push(x);
    }
    let mut g = Graph::new(ctx);
    for &ci in &c {
        g.build_forward_expand(ci);
    }
    g.build_forward_expand(x);
    let n_nodes = g.nodes.len();
    let mut s = r.sched(true);
    s.alloc_graph(&mut g).unwrap();
    let n_inputs: Vec<(usize, usize)> = s
        .splits()
        .iter()
        .map(|sp| (sp.backend_id, sp.inputs.len()))
        .collect();
    // inp + c_0..c_28 fill the 30 slots; c_29 needs a 31st and cuts the split
    assert_eq!(n_inputs, vec![(CPU, 0), (GPU, 30), (GPU, 11)]);
    assert_eq!(g.ctx.name(s.splits()[2].inputs[0]), "c_29");
    let cpy = s.tensor_copy(c[0], GPU, 0).unwrap();
    assert_eq!(g.ctx.name(cpy), "GPU0#c_0#0");
    assert_eq!(
        g.ctx[adds[0]].src[1],
        Some(cpy),
        "the caller's graph reads the copy"
    );
    assert_eq!(g.ctx[cpy].nb, g.ctx[c[0]].nb);
    // the allocator's graph: an input_dep and an input_cpy per input before each split's nodes
    let (nodes, _) = s.alloc_graph_view();
    assert_eq!(nodes.len(), n_nodes + 2 * 41);
    let first_gpu = s.splits()[1].i_start;
    let dep = nodes[first_gpu];
    assert_eq!(g.ctx[dep].view_src, Some(inp));
    assert_eq!(g.ctx[dep].src[0], Some(inp));
    assert_eq!(nodes[first_gpu + 1], s.tensor_copy(inp, GPU, 0).unwrap());
    // graph_optimize ran once per GPU split
    assert_eq!(
        r.gpu
            .counters()
            .optimize_calls
            .load(std::sync::atomic::Ordering::SeqCst),
        2
    );
}

#[test]
fn the_pin_at_the_attention_output_keeps_a_host_kv_cache_off_the_gpu() {
    // offload_kqv = false: the cache lives in host memory, the projections on the GPU
    let build = |r: &Rig| {
        let mut ctx = Context::new();
        let d = common::D;
        let x = input(&mut ctx, "x", &[d]);
        let w: Vec<TensorId> = ["wq", "wk", "wv", "wo"]
            .iter()
            .map(|n| weight(&mut ctx, n, &[d, d]))
            .collect();
        let kc = weight(&mut ctx, "cache_k", &[d, 4]);
        let vc = weight(&mut ctx, "cache_v", &[4, d]);
        let _b = (
            place_weights(&mut ctx, &w, &r.gpu_buft()),
            place(&mut ctx, &[kc, vc], &r.cpu_buft(), BufferUsage::Any),
        );
        let q = ctx.mul_mat(w[0], x);
        let k = ctx.mul_mat(w[1], x);
        let krow = ctx.view_1d(kc, d, 0);
        let kst = ctx.cpy(k, krow);
        let v = ctx.mul_mat(w[2], x);
        let vcol = ctx.view_2d(vc, 1, d, 16, 0);
        let vst = ctx.cpy(v, vcol);
        let kall = ctx.view_2d(kc, d, 4, 4 * d as usize, 0);
        let kq = ctx.mul_mat(kall, q);
        let sm = ctx.soft_max(kq);
        let kqv = ctx.mul_mat(vc, sm);
        let cur = ctx.scale(kqv, 1.0);
        ctx.set_name(cur, "kqv_out");
        let out = ctx.mul_mat(w[3], cur);
        (graph(ctx, &[q, kst, vst, out]), cur, kq)
    };
    let r = Rig::new();
    let (mut g, _, kq) = build(&r);
    let mut s = r.sched(true);
    s.alloc_graph(&mut g).unwrap();
    assert_eq!(
        s.get_tensor_backend(kq),
        Some(GPU),
        "without the pin the GPU claims the attention"
    );
    let gpu_inputs: Vec<String> = s
        .splits()
        .iter()
        .filter(|sp| sp.backend_id == GPU)
        .flat_map(|sp| sp.inputs.iter().map(|&t| g.ctx.name(t).to_string()))
        .collect();
    assert!(
        gpu_inputs.iter().any(|n| n.starts_with("cache_k"))
            && gpu_inputs.contains(&"cache_v".to_string())
    );

    let (mut g, cur, kq) = build(&r);
    let mut s = r.sched(true);
    s.set_tensor_backend(cur, CPU);
    s.alloc_graph(&mut g).unwrap();
    assert_eq!(assigned(&s, kq), on(CPU, "2.sup"));
    let inputs: Vec<(usize, Vec<&str>)> = s
        .splits()
        .iter()
        .map(|sp| {
            (
                sp.backend_id,
                sp.inputs.iter().map(|&t| g.ctx.name(t)).collect(),
            )
        })
        .collect();
    assert!(
        inputs
            .iter()
            .all(|(_, i)| !i.iter().any(|n| n.starts_with("cache"))),
        "{inputs:?}"
    );
    assert_eq!(inputs.last().unwrap(), &(GPU, vec!["kqv_out"]));
}

// ---------------------------------------------------------------- Example 6

fn run_toy(
    ngl: usize,
    ffn_on_cpu: &[usize],
    pin_layer_outputs: bool,
) -> (usize, usize, Vec<usize>) {
    let r = Rig::new();
    let mut toy = toy(2, ngl, ffn_on_cpu, &r.cpu_buft(), &r.gpu_buft());
    let mut s = r.sched(true);
    if pin_layer_outputs {
        // as llama.cpp pins each layer's norm: the layer's output stays on the layer's device
        for (il, &o) in toy.out.iter().enumerate() {
            s.set_tensor_backend(o, if toy.layer_on_gpu[il] { GPU } else { CPU });
        }
    }
    s.reserve(&mut toy.g).unwrap();
    let backends = s.splits().iter().map(|sp| sp.backend_id).collect();
    (s.n_splits(), s.n_split_inputs(), backends)
}

#[test]
fn example6_splits_and_copies_of_a_two_layer_model() {
    assert_eq!(run_toy(0, &[], true), (1, 0, vec![CPU]));
    assert_eq!(run_toy(3, &[], true), (2, 1, vec![CPU, GPU]));
    assert_eq!(run_toy(2, &[], true), (2, 1, vec![CPU, GPU]));
    assert_eq!(run_toy(3, &[1], true), (4, 3, vec![CPU, GPU, CPU, GPU]));
}

#[test]
fn example6_without_pins_the_gpu_pulls_the_layer_0_output_across() {
    // out-0 = ffn-0 + add-0 has no weight: the upward GPU sweep claims it, so both of its
    // sources cross instead of the one layer output
    assert_eq!(run_toy(2, &[], false), (2, 2, vec![CPU, GPU]));
    assert_eq!(run_toy(3, &[1], false), (4, 3, vec![CPU, GPU, CPU, GPU]));
}

#[test]
fn reserve_sizes_one_compute_buffer_per_backend() {
    let r = Rig::new();
    let mut toy = toy(2, 3, &[], &r.cpu_buft(), &r.gpu_buft());
    let mut s = r.sched(true);
    s.reserve(&mut toy.g).unwrap();
    // CPU: inp_tokens (4 -> 32 bytes) and embd (128). GPU (128-byte alignment): the copy of embd
    // and attn-0 are live together; every ADD then works in place and each matmul takes the
    // bytes its predecessor's dying input left, so two 128-byte slots suffice
    assert_eq!(s.get_buffer_size(CPU), 160);
    assert_eq!(s.get_buffer_size(GPU), 256);
}

// ---------------------------------------------------------------- GGML_SCHED_DEBUG

#[test]
fn debug_output_reads_like_ggml() {
    let r = Rig::new();
    let mut toy = toy(2, 3, &[], &r.cpu_buft(), &r.gpu_buft());
    let mut s = r.sched(true);
    s.set_debug(2);
    s.alloc_graph(&mut toy.g).unwrap();
    let text = s.assignments_text(&toy.g);
    let lines: Vec<&str> = text.split('\n').collect();
    assert_eq!(lines[0], "");
    assert_eq!(lines[1], "## SPLIT #0: CPU # 0 inputs");
    assert_eq!(
        lines[2],
        "node #  0 (  GET_ROWS):                 embd (   0K) [  CPU   1.wgt0] use=2,c=1:    token_embd.weight (   2K) [  CPU    1.dst]           inp_tokens (   0K) [  CPU    1.inp]"
    );
    assert_eq!(lines[3], "");
    assert_eq!(lines[4], "## SPLIT #1: GPU0 # 1 inputs: [embd (   0K)] ");
    assert_eq!(
        lines[5],
        "node #  1 (   MUL_MAT):               attn-0 (   0K) [ GPU0   1.wgt0] use=1,c=1:    blk.0.attn.weight (   4K) [ GPU0    1.dst]          GPU0#embd#0 (   0K) [ NULL    4.cpy]"
    );
    assert_eq!(
        lines[6],
        "node #  2 (       ADD):                add-0 (   0K) [ GPU0    2.sup] use=2,c=1:               attn-0 (   0K) [ GPU0   1.wgt0]          GPU0#embd#0 (   0K) [ NULL    4.cpy]"
    );
    // level 1 prints the split headers only
    s.set_debug(1);
    assert_eq!(
        s.assignments_text(&toy.g),
        "\n## SPLIT #0: CPU # 0 inputs\n\n## SPLIT #1: GPU0 # 1 inputs: [embd (   0K)] \n"
    );
}

// ---------------------------------------------------------------- reallocation

#[test]
fn the_unexpected_reallocation_tripwire() {
    let r = Rig::new();
    let run = |s: &mut Sched, d: i64| -> Result<(), SchedError> {
        s.reset();
        let mut toy = toy_sized(2, 3, &[], &r.cpu_buft(), &r.gpu_buft(), d);
        s.alloc_graph(&mut toy.g)
    };
    let mut s = r.sched(true);
    s.set_debug_realloc(1);
    run(&mut s, 32).unwrap(); // the first plan: the assignment changed from nothing
    run(&mut s, 32).unwrap(); // the same graph fits the plan
                              // same node count, same assignment, bigger tensors: the plan is thrown away unexpectedly
    let err = run(&mut s, 64).unwrap_err();
    assert!(
        matches!(
            err,
            SchedError::UnexpectedRealloc {
                debug_realloc: 1,
                ..
            }
        ),
        "{err}"
    );
    assert!(err
        .to_string()
        .starts_with("unexpected graph reallocation (graph size = "));

    // without the tripwire the scheduler re-plans and the buffers grow
    let mut s = r.sched(true);
    run(&mut s, 32).unwrap();
    let before = s.get_buffer_size(GPU);
    run(&mut s, 64).unwrap();
    assert_eq!(s.get_buffer_size(GPU), 2 * before);

    // level 2 stops at any reallocation, the first one included
    let mut s = r.sched(true);
    s.set_debug_realloc(2);
    assert!(matches!(
        run(&mut s, 32),
        Err(SchedError::UnexpectedRealloc {
            debug_realloc: 2,
            ..
        })
    ));
}

#[test]
fn one_node_overflowing_the_input_list_doubles_it_with_a_warning() {
    let warnings: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let w = warnings.clone();
    ggml::log::set_log_callback(Some(Box::new(move |level, text| {
        if level == ggml::log::LogLevel::Warn && text.contains("capacity") {
            w.lock().unwrap().push(text.to_string());
        }
    })));
    let r = Rig::new();
    let mut ctx = Context::new();
    let d = common::D;
    let inp = input(&mut ctx, "inp", &[d]);
    let wg = weight(&mut ctx, "wg", &[d, d]);
    let wc: Vec<TensorId> = (0..30)
        .map(|i| weight(&mut ctx, &format!("wc{i}"), &[d, d]))
        .collect();
    let _b = (
        place_weights(&mut ctx, &[wg], &r.gpu_buft()),
        place_weights(&mut ctx, &wc, &r.cpu_buft()),
    );
    let c: Vec<TensorId> = wc.iter().map(|&w| ctx.mul_mat(w, inp)).collect();
    let mut x = ctx.mul_mat(wg, inp);
    for &ci in &c[..28] {
        x = ctx.add(x, ci);
    }
    // 29 inputs so far (inp, c_0..c_27): this node brings two more at once
    let pair = ctx.add(c[28], c[29]);
    let last = ctx.add(x, pair);
    let mut g = Graph::new(ctx);
    for &ci in &c {
        g.build_forward_expand(ci);
    }
    g.build_forward_expand(last);
    let mut s = r.sched(true);
    s.alloc_graph(&mut g).unwrap();
    let n_inputs: Vec<usize> = s.splits().iter().map(|sp| sp.inputs.len()).collect();
    assert_eq!(n_inputs, vec![0, 31]);
    let seen = warnings.lock().unwrap().clone();
    ggml::log::set_log_callback(None);
    assert_eq!(
        seen,
        vec!["ggml_backend_sched_split_inputs_grow: increasing split inputs capacity from 30 to 60\n".to_string()]
    );
}
