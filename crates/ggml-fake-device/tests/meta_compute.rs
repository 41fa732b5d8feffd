//! The meta device computing over N fake GPUs (host memory, the CPU's kernels): the butterfly
//! all-reduce for N = 2..5, a tensor-parallel MLP against the CPU alone, the delayed reduce, a
//! device with empty slices, the backend's own communicator, and plan reuse.

use ggml::alloc::Gallocr;
use ggml::backend::{
    tensor_set_f32, tensor_to_f32, Backend, BufferTypeRef, BufferUsage, Device, DeviceRef,
    GraphView, Status,
};
use ggml::meta::{
    allreduce_fallback, build_plan, meta_device, n_reduce_steps, split_counts, MetaBackend,
    MetaDevice, ReduceStep, SplitState, StateCache, TmpBuffers,
};
use ggml::tensor::TensorData;
use ggml::{Context, Graph, Tensor, TensorId, Type};
use ggml_fake_device::{fake_gpus, FakeReg, InnerBackendFn};
use std::sync::Arc;

fn cpu_inner() -> InnerBackendFn {
    Arc::new(|| {
        let mut b = ggml_cpu::init_backend();
        b.set_n_threads(1);
        Ok(b)
    })
}

fn devices(n: usize) -> Vec<DeviceRef> {
    fake_gpus("GPU", n, cpu_inner())
        .into_iter()
        .map(|d| d as DeviceRef)
        .collect()
}

fn backends(devs: &[DeviceRef]) -> Vec<Box<dyn Backend>> {
    devs.iter()
        .map(|d| d.clone().init_backend().unwrap())
        .collect()
}

/// One F32 tensor of `len` elements in device j's memory holding `vals`.
fn on_device(dev: &DeviceRef, vals: &[f32]) -> Tensor {
    let buf = dev.buffer_type().alloc_buffer(vals.len() * 4).unwrap();
    let mut t = Tensor::new(Type::F32, [vals.len() as i64, 1, 1, 1]);
    t.name = format!("part@{}", dev.name());
    t.data = Some(TensorData {
        addr: buf.base(),
        buffer: buf,
    });
    tensor_set_f32(&t, vals).unwrap();
    t
}

#[test]
fn butterfly_sums_over_2_to_5_devices_with_folding() {
    for n in 2..=5usize {
        let devs = devices(n);
        let mut bs = backends(&devs);
        let len = 7;
        let vals: Vec<Vec<f32>> = (0..n)
            .map(|j| (0..len).map(|i| (j * 10 + i) as f32 + 0.25).collect())
            .collect();
        let tensors: Vec<Tensor> = devs
            .iter()
            .zip(&vals)
            .map(|(d, v)| on_device(d, v))
            .collect();
        let want: Vec<f32> = (0..len).map(|i| (0..n).map(|j| vals[j][i]).sum()).collect();
        let mut tmp = TmpBuffers::default();
        let log = allreduce_fallback(&mut bs, &tensors, &vec![true; n], &mut tmp).unwrap();
        for t in &tensors {
            assert_eq!(tensor_to_f32(t).unwrap(), want, "n = {n}, {}", t.name);
        }
        let p = 1usize << (usize::BITS - 1 - n.leading_zeros());
        let folds = log
            .iter()
            .filter(|s| matches!(s, ReduceStep::Fold { .. }))
            .count();
        let backs = log
            .iter()
            .filter(|s| matches!(s, ReduceStep::CopyBack { .. }))
            .count();
        assert_eq!((folds, backs), (n - p, n - p), "n = {n}: {log:?}");
        let mut strides: Vec<usize> = log
            .iter()
            .filter_map(|s| match s {
                ReduceStep::Exchange { stride, src, dst } => {
                    assert_eq!(src ^ dst, *stride);
                    Some(*stride)
                }
                _ => None,
            })
            .collect();
        strides.dedup();
        let expect: Vec<usize> = (0..p.trailing_zeros()).rev().map(|k| 1 << k).collect();
        assert_eq!(strides, expect, "n = {n}");
        // ceil(log2 n) steps: the fold (when there is one) and log2 p exchanges
        assert_eq!(
            n_reduce_steps(n),
            usize::from(n > p) + p.trailing_zeros() as usize
        );
    }
}

#[test]
fn a_device_that_skipped_the_node_contributes_zero_even_over_garbage() {
    let devs = devices(3);
    let mut bs = backends(&devs);
    let t0 = on_device(&devs[0], &[1.0, 2.0]);
    let t1 = on_device(&devs[1], &[f32::NAN, f32::INFINITY]);
    let t2 = on_device(&devs[2], &[10.0, 20.0]);
    let tensors = vec![t0, t1, t2];
    let mut tmp = TmpBuffers::default();
    let log = allreduce_fallback(&mut bs, &tensors, &[true, false, true], &mut tmp).unwrap();
    assert!(log.contains(&ReduceStep::Zero { dev: 1 }));
    for t in &tensors {
        assert_eq!(tensor_to_f32(t).unwrap(), vec![11.0, 22.0]);
    }
}

const D: i64 = 64;
const F: i64 = 96;
const V: i64 = 40;
const T: i64 = 3;

/// Weights split as libllama's table would: up/gate by output rows, down by input columns,
/// the output by rows, norms mirrored; layer il rotates who is short.
fn mlp_split(n: usize, weights: Vec<f32>) -> Arc<ggml::meta::StaticSplitFn> {
    Arc::new(move |t: &Tensor| {
        let il: usize = t
            .name
            .strip_prefix("blk.")
            .and_then(|r| r.split('.').next())
            .and_then(|x| x.parse().ok())
            .unwrap_or(0);
        let rot = il % n;
        let n = &t.name;
        if n.contains("ffn_up") || n.contains("ffn_gate") {
            SplitState::axis(1, split_counts(t.ne[1], &weights, 32, rot))
        } else if n.contains("ffn_down") {
            SplitState::axis(0, split_counts(t.ne[0], &weights, 32, rot))
        } else if t.name == "output.weight" {
            SplitState::axis(1, split_counts(t.ne[1], &weights, 1, rot))
        } else {
            SplitState::mirrored()
        }
    })
}

struct Mlp {
    g: Graph,
    inp: TensorId,
    out: TensorId,
    weights: Vec<TensorId>,
}

/// Two pre-norm SwiGLU blocks with residuals, then the output projection; `gates` multiplies
/// each block's down projection by a chain of two mirrored gates (the delayed-reduce pattern).
fn mlp(n_layer: usize, gates: bool) -> Mlp {
    let mut ctx = Context::new();
    let mut weights = Vec::new();
    let mut w = |ctx: &mut Context, name: &str, ne: &[i64]| {
        let t = ctx.new_tensor(Type::F32, ne);
        ctx.set_name(t, name);
        weights.push(t);
        t
    };
    let inp = ctx.new_tensor_2d(Type::F32, D, T);
    ctx.set_name(inp, "inp_embd");
    ctx.set_input(inp);
    let mut x = inp;
    let mut layer_w = Vec::new();
    for il in 0..n_layer {
        let norm = w(&mut ctx, &format!("blk.{il}.ffn_norm.weight"), &[D]);
        let up = w(&mut ctx, &format!("blk.{il}.ffn_up.weight"), &[D, F]);
        let gate = w(&mut ctx, &format!("blk.{il}.ffn_gate.weight"), &[D, F]);
        let down = w(&mut ctx, &format!("blk.{il}.ffn_down.weight"), &[F, D]);
        let g1 = w(&mut ctx, &format!("blk.{il}.g1.weight"), &[D]);
        let g2 = w(&mut ctx, &format!("blk.{il}.g2.weight"), &[D]);
        layer_w.push((norm, up, gate, down, g1, g2));
    }
    let out_norm = w(&mut ctx, "output_norm.weight", &[D]);
    let out_w = w(&mut ctx, "output.weight", &[D, V]);
    for (il, &(norm, up, gate, down, g1, g2)) in layer_w.iter().enumerate() {
        let h = ctx.rms_norm(x, 1e-5);
        let h = ctx.mul(h, norm);
        let u = ctx.mul_mat(up, h);
        let g = ctx.mul_mat(gate, h);
        let a = ctx.swiglu_split(g, u);
        let mut d = ctx.mul_mat(down, a);
        ctx.set_name(d, &format!("ffn_down-{il}"));
        if gates {
            d = ctx.mul(d, g1);
            ctx.set_name(d, &format!("gate1-{il}"));
            d = ctx.mul(d, g2);
            ctx.set_name(d, &format!("gate2-{il}"));
        }
        x = ctx.add(d, x);
        ctx.set_name(x, &format!("ffn_out-{il}"));
    }
    let h = ctx.rms_norm(x, 1e-5);
    let h = ctx.mul(h, out_norm);
    let out = ctx.mul_mat(out_w, h);
    ctx.set_name(out, "result_output");
    ctx.set_output(out);
    let mut g = Graph::new(ctx);
    g.build_forward_expand(out);
    Mlp {
        g,
        inp,
        out,
        weights,
    }
}

fn fill(ctx: &Context, t: TensorId, seed: u64) -> Vec<f32> {
    let n = ctx[t].nelements() as usize;
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.5
        })
        .collect()
}

fn input_values() -> Vec<f32> {
    (0..D * T)
        .map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0)
        .collect()
}

/// The MLP on the CPU alone.
fn reference(n_layer: usize, gates: bool) -> Vec<f32> {
    reference_of(mlp(n_layer, gates))
}

fn reference_of(mut m: Mlp) -> Vec<f32> {
    let cpu_buft = ggml_cpu::device().buffer_type();
    let size: usize = m.weights.iter().map(|&t| m.g.ctx[t].nbytes() + 64).sum();
    let buf = cpu_buft.clone().alloc_buffer(size).unwrap();
    buf.set_usage(BufferUsage::Weights);
    let mut ta = ggml::alloc::Tallocr::new(buf);
    for &t in &m.weights {
        ta.alloc(&mut m.g.ctx, t).unwrap();
    }
    for (k, &t) in m.weights.iter().enumerate() {
        let v = fill(&m.g.ctx, t, k as u64 + 1);
        tensor_set_f32(&m.g.ctx[t], &v).unwrap();
    }
    let mut ga = Gallocr::new(cpu_buft);
    assert!(ga.alloc_graph(&mut m.g));
    tensor_set_f32(&m.g.ctx[m.inp], &input_values()).unwrap();
    let mut cpu = ggml_cpu::init_backend();
    cpu.set_n_threads(1);
    let st = cpu.graph_compute(GraphView {
        ctx: &m.g.ctx,
        nodes: &m.g.nodes,
    });
    assert_eq!(st, Status::Success);
    tensor_to_f32(&m.g.ctx[m.out]).unwrap()
}

struct Run {
    out: Vec<f32>,
    backend: MetaBackend,
    m: Mlp,
    weights: Arc<ggml::backend::Buffer>,
}

fn on_meta(
    dev: &Arc<MetaDevice>,
    bs: Vec<Box<dyn Backend>>,
    comm: Option<Box<dyn ggml::backend::Comm>>,
    n_layer: usize,
    gates: bool,
) -> Run {
    on_meta_of(dev, bs, comm, mlp(n_layer, gates))
}

fn on_meta_of(
    dev: &Arc<MetaDevice>,
    bs: Vec<Box<dyn Backend>>,
    comm: Option<Box<dyn ggml::backend::Comm>>,
    mut m: Mlp,
) -> Run {
    let buft = dev.meta_buft().clone();
    let wbuf = buft.alloc_static(&mut m.g.ctx, &m.weights).unwrap();
    wbuf.set_usage(BufferUsage::Weights);
    for (k, &t) in m.weights.iter().enumerate() {
        let v = fill(&m.g.ctx, t, k as u64 + 1);
        tensor_set_f32(&m.g.ctx[t], &v).unwrap();
        // the slices read back as the whole tensor
        assert_eq!(
            tensor_to_f32(&m.g.ctx[t]).unwrap(),
            v,
            "{}",
            m.g.ctx[t].name
        );
    }
    let meta_buft: BufferTypeRef = buft;
    let mut ga = Gallocr::new(meta_buft);
    assert!(ga.alloc_graph(&mut m.g));
    tensor_set_f32(&m.g.ctx[m.inp], &input_values()).unwrap();
    let mut backend = MetaBackend::with_backends(dev.clone(), bs, comm);
    let st = backend.graph_compute(GraphView {
        ctx: &m.g.ctx,
        nodes: &m.g.nodes,
    });
    assert_eq!(st, Status::Success);
    let out = tensor_to_f32(&m.g.ctx[m.out]).unwrap();
    Run {
        out,
        backend,
        m,
        weights: wbuf,
    }
}

/// Within 1e-5 of the largest value: partial sums are added in another order.
fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let tol = 1e-5 * scale;
        assert!((g - w).abs() <= tol, "{what}: [{i}] {g} vs {w}");
    }
}

#[test]
fn a_tensor_parallel_mlp_matches_the_cpu_alone() {
    let want = reference(2, false);
    for (n, weights) in [
        (2, vec![0.0, 0.0]),
        (3, vec![0.0, 0.0, 0.0]),
        (4, vec![0.0; 4]),
        (2, vec![1.0, 2.0]),
    ] {
        let devs = devices(n);
        let dev = meta_device(devs.clone(), mlp_split(n, weights.clone()));
        assert_eq!(
            dev.name(),
            format!(
                "Meta({})",
                (0..n)
                    .map(|j| format!("GPU{j}"))
                    .collect::<Vec<_>>()
                    .join(",")
            )
        );
        let r = on_meta(&dev, backends(&devs), None, 2, false);
        assert_close(&r.out, &want, &format!("n = {n}, split {weights:?}"));
        // one reduce per block (the down projection), none for the split logits
        let reduced: Vec<&str> = r
            .backend
            .last_reduces
            .iter()
            .map(|x| x.node.as_str())
            .collect();
        assert_eq!(reduced, ["ffn_down-0", "ffn_down-1"], "n = {n}");
        assert!(r.backend.last_reduces.iter().all(|x| !x.comm));
        assert_eq!(r.backend.plan().unwrap().subgraphs.len(), 3);
        // each device holds only its slices: the mirrored norms and gates in full, a share of
        // the projections
        let meta = ggml::meta::meta_buffer_of(&r.m.g.ctx[r.m.weights[0]]).unwrap();
        let sizes: Vec<usize> = meta.simple().iter().map(|b| b.size()).collect();
        let total: usize = r.m.weights.iter().map(|&t| r.m.g.ctx[t].nbytes()).sum();
        assert!(
            sizes.iter().all(|&s| s < total),
            "n = {n}: {sizes:?} of {total}"
        );
        assert!(sizes.iter().sum::<usize>() >= total);
        let _ = &r.weights;
    }
}

#[test]
fn the_plan_is_rebuilt_only_when_the_graph_changes() {
    let devs = devices(2);
    let dev = meta_device(devs.clone(), mlp_split(2, vec![0.0, 0.0]));
    let mut r = on_meta(&dev, backends(&devs), None, 1, false);
    assert_eq!(r.backend.n_builds, 1);
    let first = r.out.clone();
    for _ in 0..2 {
        // the allocator may reuse the input's memory once it is read: set it again, as decode does
        tensor_set_f32(&r.m.g.ctx[r.m.inp], &input_values()).unwrap();
        let st = r.backend.graph_compute(GraphView {
            ctx: &r.m.g.ctx,
            nodes: &r.m.g.nodes,
        });
        assert_eq!(st, Status::Success);
    }
    assert_eq!(r.backend.n_builds, 1, "the same graph reuses its plan");
    assert_eq!(tensor_to_f32(&r.m.g.ctx[r.m.out]).unwrap(), first);
    // a different node list is a different graph
    let nodes: Vec<TensorId> = r.m.g.nodes[..r.m.g.nodes.len() - 1].to_vec();
    let st = r.backend.graph_compute(GraphView {
        ctx: &r.m.g.ctx,
        nodes: &nodes,
    });
    assert_eq!(st, Status::Success);
    assert_eq!(r.backend.n_builds, 2);
    // back to the whole graph: built again
    tensor_set_f32(&r.m.g.ctx[r.m.inp], &input_values()).unwrap();
    let st = r.backend.graph_compute(GraphView {
        ctx: &r.m.g.ctx,
        nodes: &r.m.g.nodes,
    });
    assert_eq!(st, Status::Success);
    assert_eq!(r.backend.n_builds, 3);
    // a new compute buffer has the same placeholder addresses: still a different graph
    let buft: BufferTypeRef = dev.meta_buft().clone();
    let ids: Vec<TensorId> = r.m.g.ctx.ids().collect();
    for id in ids {
        if !r.m.weights.contains(&id) {
            r.m.g.ctx[id].data = None;
        }
    }
    let mut ga = Gallocr::new(buft);
    assert!(ga.alloc_graph(&mut r.m.g));
    tensor_set_f32(&r.m.g.ctx[r.m.inp], &input_values()).unwrap();
    let st = r.backend.graph_compute(GraphView {
        ctx: &r.m.g.ctx,
        nodes: &r.m.g.nodes,
    });
    assert_eq!(st, Status::Success);
    assert_eq!(r.backend.n_builds, 4);
    assert_eq!(tensor_to_f32(&r.m.g.ctx[r.m.out]).unwrap(), first);
}

#[test]
fn the_reduce_waits_past_muls_by_mirrored_gates() {
    let want = reference(2, true);
    let devs = devices(3);
    let dev = meta_device(devs.clone(), mlp_split(3, vec![0.0; 3]));
    let r = on_meta(&dev, backends(&devs), None, 2, true);
    assert_close(&r.out, &want, "delayed");
    let reduced: Vec<&str> = r
        .backend
        .last_reduces
        .iter()
        .map(|x| x.node.as_str())
        .collect();
    assert_eq!(reduced, ["gate2-0", "gate2-1"]);
    let plan = r.backend.plan().unwrap();
    let ctx = &r.m.g.ctx;
    let sg0 = &plan.subgraphs[0];
    assert_eq!(ctx[r.m.g.nodes[sg0.last]].name, "gate2-0");
    assert!(plan.states[sg0.reduce.unwrap() - 2].is_partial());
}

#[test]
fn zero_size_slices_skip_their_nodes_through_the_delayed_range() {
    // 96 columns in blocks of 32 over 4 devices: one device holds nothing of each FFN
    let want = reference(2, true);
    let n = 4;
    let devs = devices(n);
    let dev = meta_device(devs.clone(), mlp_split(n, vec![0.0; 4]));
    let r = on_meta(&dev, backends(&devs), None, 2, true);
    assert_close(&r.out, &want, "zero-size");
    let plan = r.backend.plan().unwrap();
    let ctx = &r.m.g.ctx;
    let idx = |name: &str| {
        r.m.g
            .nodes
            .iter()
            .position(|&t| ctx[t].name == name)
            .unwrap()
    };
    let (down, g1, g2) = (idx("ffn_down-0"), idx("gate1-0"), idx("gate2-0"));
    let idle: Vec<usize> = (0..n).filter(|&j| !plan.computed[j][down]).collect();
    assert_eq!(
        idle.len(),
        1,
        "exactly one device has an empty slice of layer 0"
    );
    let j = idle[0];
    assert!(!plan.computed[j][g1] && !plan.computed[j][g2]);
    assert!(r.backend.last_reduces[0]
        .steps
        .contains(&ReduceStep::Zero { dev: j }));
    // the other devices compute the whole chain
    for k in (0..n).filter(|&k| k != j) {
        assert!(plan.computed[k][down] && plan.computed[k][g2]);
    }
}

#[test]
fn the_registry_communicator_is_used_when_offered() {
    let want = reference(1, false);
    let fakes = fake_gpus("COMM", 2, cpu_inner());
    let devs: Vec<DeviceRef> = fakes.into_iter().map(|d| d as DeviceRef).collect();
    let reg = Arc::new(FakeReg::new("FAKE-COMM", devs.clone(), true));
    let calls = reg.comm_calls.clone();
    ggml::backend::register(reg);
    let dev = meta_device(devs.clone(), mlp_split(2, vec![0.0, 0.0]));
    let mut backend = MetaBackend::new(dev.clone()).unwrap();
    let mut m = mlp(1, false);
    let buft = dev.meta_buft().clone();
    buft.alloc_static(&mut m.g.ctx, &m.weights).unwrap();
    for (k, &t) in m.weights.iter().enumerate() {
        let v = fill(&m.g.ctx, t, k as u64 + 1);
        tensor_set_f32(&m.g.ctx[t], &v).unwrap();
    }
    let b: BufferTypeRef = buft;
    let mut ga = Gallocr::new(b);
    assert!(ga.alloc_graph(&mut m.g));
    tensor_set_f32(&m.g.ctx[m.inp], &input_values()).unwrap();
    assert_eq!(
        backend.graph_compute(GraphView {
            ctx: &m.g.ctx,
            nodes: &m.g.nodes
        }),
        Status::Success
    );
    assert_close(&tensor_to_f32(&m.g.ctx[m.out]).unwrap(), &want, "comm");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(backend.last_reduces.iter().all(|r| r.comm));
}

#[test]
fn an_op_without_a_rule_fails_the_compute_by_name() {
    let devs = devices(2);
    let dev = meta_device(devs.clone(), mlp_split(2, vec![0.0, 0.0]));
    let mut ctx = Context::new();
    let w = ctx.new_tensor_2d(Type::F32, F, D);
    ctx.set_name(w, "blk.0.ffn_down.weight"); // split by input columns
    let x = ctx.new_tensor_2d(Type::F32, F, T); // mirrored activation
    ctx.set_name(x, "act");
    let y = ctx.mul_mat(w, x);
    ctx.set_name(y, "row_parallel_without_split_input");
    let mut g = Graph::new(ctx);
    g.build_forward_expand(y);
    let mut cache = StateCache::default();
    let split = mlp_split(2, vec![0.0, 0.0]);
    let e = build_plan(&g.ctx, &g.nodes, 2, split.as_ref(), &mut cache)
        .err()
        .expect("refused");
    assert!(
        e.to_string().contains("MUL_MAT") && e.to_string().contains("row_parallel"),
        "{e}"
    );
    let _ = dev;
}

/// Experts' outputs [D, U, T] from a row-parallel projection, combined as MoE does: U views,
/// each expanded first, then a chain of adds (llama.cpp's build_moe_ffn).
fn moe_combine(u: i64) -> Mlp {
    let mut ctx = Context::new();
    let mut weights = Vec::new();
    let mut w = |ctx: &mut Context, name: &str, ne: &[i64]| {
        let t = ctx.new_tensor(Type::F32, ne);
        ctx.set_name(t, name);
        weights.push(t);
        t
    };
    let up = w(&mut ctx, "blk.0.ffn_up_exps.weight", &[D, F]);
    let down = w(&mut ctx, "blk.0.ffn_down_exps.weight", &[F, D]);
    let out_w = w(&mut ctx, "output.weight", &[D, V]);
    let inp = ctx.new_tensor_3d(Type::F32, D, u, T);
    ctx.set_name(inp, "inp_embd");
    ctx.set_input(inp);
    let h = ctx.mul_mat(up, inp);
    let h = ctx.silu(h);
    let experts = ctx.mul_mat(down, h);
    ctx.set_name(experts, "ffn_moe_down");
    let mut g = Graph::new(ctx);
    let nb1 = g.ctx[experts].nb[1];
    let nb2 = g.ctx[experts].nb[2];
    let views: Vec<TensorId> = (0..u as usize)
        .map(|k| {
            let v = g.ctx.view_2d(experts, D, T, nb2, k * nb1);
            g.build_forward_expand(v);
            v
        })
        .collect();
    let mut sum = g.ctx.add(views[0], views[1]);
    for &v in &views[2..] {
        sum = g.ctx.add(sum, v);
    }
    g.ctx.set_name(sum, "ffn_moe_out");
    let out = g.ctx.mul_mat(out_w, sum);
    g.ctx.set_name(out, "result_output");
    g.ctx.set_output(out);
    g.build_forward_expand(out);
    Mlp {
        g,
        inp,
        out,
        weights,
    }
}

fn moe_input(u: i64) -> Vec<f32> {
    (0..D * u * T)
        .map(|i| ((i * 53 % 97) as f32 / 48.0) - 1.0)
        .collect()
}

#[test]
fn the_reduce_waits_past_the_moe_expert_sum() {
    let u = 3;
    let mut want_m = moe_combine(u);
    // the reference sets its own input: patch input_values' length for this graph
    let want = {
        let cpu_buft = ggml_cpu::device().buffer_type();
        let size: usize = want_m
            .weights
            .iter()
            .map(|&t| want_m.g.ctx[t].nbytes() + 64)
            .sum();
        let buf = cpu_buft.clone().alloc_buffer(size).unwrap();
        buf.set_usage(BufferUsage::Weights);
        let mut ta = ggml::alloc::Tallocr::new(buf);
        for &t in &want_m.weights {
            ta.alloc(&mut want_m.g.ctx, t).unwrap();
        }
        for (k, &t) in want_m.weights.iter().enumerate() {
            tensor_set_f32(&want_m.g.ctx[t], &fill(&want_m.g.ctx, t, k as u64 + 1)).unwrap();
        }
        let mut ga = Gallocr::new(cpu_buft);
        assert!(ga.alloc_graph(&mut want_m.g));
        tensor_set_f32(&want_m.g.ctx[want_m.inp], &moe_input(u)).unwrap();
        let mut cpu = ggml_cpu::init_backend();
        let st = cpu.graph_compute(GraphView {
            ctx: &want_m.g.ctx,
            nodes: &want_m.g.nodes,
        });
        assert_eq!(st, Status::Success);
        tensor_to_f32(&want_m.g.ctx[want_m.out]).unwrap()
    };
    for n in [2usize, 4] {
        let devs = devices(n);
        let dev = meta_device(devs.clone(), mlp_split(n, vec![0.0; n]));
        let mut m = moe_combine(u);
        let buft = dev.meta_buft().clone();
        buft.alloc_static(&mut m.g.ctx, &m.weights)
            .unwrap()
            .set_usage(BufferUsage::Weights);
        for (k, &t) in m.weights.iter().enumerate() {
            tensor_set_f32(&m.g.ctx[t], &fill(&m.g.ctx, t, k as u64 + 1)).unwrap();
        }
        let b: BufferTypeRef = buft;
        let mut ga = Gallocr::new(b);
        assert!(ga.alloc_graph(&mut m.g));
        tensor_set_f32(&m.g.ctx[m.inp], &moe_input(u)).unwrap();
        let mut backend = MetaBackend::with_backends(dev.clone(), backends(&devs), None);
        let st = backend.graph_compute(GraphView {
            ctx: &m.g.ctx,
            nodes: &m.g.nodes,
        });
        assert_eq!(st, Status::Success);
        assert_close(
            &tensor_to_f32(&m.g.ctx[m.out]).unwrap(),
            &want,
            &format!("moe n = {n}"),
        );
        // one reduce, of the combined experts rather than of the 3x larger expert outputs
        let reduced: Vec<&str> = backend
            .last_reduces
            .iter()
            .map(|x| x.node.as_str())
            .collect();
        assert_eq!(reduced, ["ffn_moe_out"], "n = {n}");
    }
}

/// Two row-parallel branches on the same input, summed: AllReduce(a) + AllReduce(b) is
/// AllReduce(a + b), so one reduce serves both.
fn parallel_branches() -> Mlp {
    let mut ctx = Context::new();
    let mut weights = Vec::new();
    let mut w = |ctx: &mut Context, name: &str, ne: &[i64]| {
        let t = ctx.new_tensor(Type::F32, ne);
        ctx.set_name(t, name);
        weights.push(t);
        t
    };
    let up0 = w(&mut ctx, "blk.0.ffn_up.weight", &[D, F]);
    let down0 = w(&mut ctx, "blk.0.ffn_down.weight", &[F, D]);
    let up1 = w(&mut ctx, "blk.1.ffn_up.weight", &[D, F]);
    let down1 = w(&mut ctx, "blk.1.ffn_down.weight", &[F, D]);
    let out_w = w(&mut ctx, "output.weight", &[D, V]);
    let inp = ctx.new_tensor_2d(Type::F32, D, T);
    ctx.set_name(inp, "inp_embd");
    ctx.set_input(inp);
    let h0 = ctx.mul_mat(up0, inp);
    let h0 = ctx.silu(h0);
    let a = ctx.mul_mat(down0, h0);
    ctx.set_name(a, "branch_a");
    let h1 = ctx.mul_mat(up1, inp);
    let h1 = ctx.silu(h1);
    let b = ctx.mul_mat(down1, h1);
    ctx.set_name(b, "branch_b");
    let sum = ctx.add(a, b);
    ctx.set_name(sum, "branches");
    let out = ctx.mul_mat(out_w, sum);
    ctx.set_name(out, "result_output");
    ctx.set_output(out);
    let mut g = Graph::new(ctx);
    g.build_forward_expand(out);
    Mlp {
        g,
        inp,
        out,
        weights,
    }
}

#[test]
fn two_partial_branches_summed_share_one_reduce() {
    let want = reference_of(parallel_branches());
    for n in [2usize, 3] {
        let devs = devices(n);
        let dev = meta_device(devs.clone(), mlp_split(n, vec![0.0; n]));
        let r = on_meta_of(&dev, backends(&devs), None, parallel_branches());
        assert_close(&r.out, &want, &format!("branches n = {n}"));
        let reduced: Vec<&str> = r
            .backend
            .last_reduces
            .iter()
            .map(|x| x.node.as_str())
            .collect();
        assert_eq!(reduced, ["branches"], "n = {n}");
    }
}

#[test]
fn meta_debug_prints_each_subgraph_and_the_reduce_that_ends_it() {
    use std::sync::Mutex;
    let lines: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = lines.clone();
    // read when the backend is made; other tests of this binary may print too, harmlessly
    std::env::set_var("GGML_META_DEBUG", "1");
    ggml::log::set_log_callback(Some(Box::new(move |_, text| {
        if text.starts_with("META:") || text.starts_with("SPLIT_STATE:") {
            sink.lock().unwrap().push(text.to_string());
        }
    })));
    let devs = devices(3);
    let dev = meta_device(devs.clone(), mlp_split(3, vec![0.0; 3]));
    let r = on_meta(&dev, backends(&devs), None, 1, false);
    ggml::log::set_log_callback(None);
    std::env::remove_var("GGML_META_DEBUG");
    let lines = lines.lock().unwrap().clone();
    let n_nodes = r.m.g.nodes.len();
    let sub: Vec<&String> = lines.iter().filter(|l| l.starts_with("META:")).collect();
    let last_first = r.backend.plan().unwrap().subgraphs[0].last + 1;
    assert!(
        sub.iter()
            .any(|l| l.starts_with("META: subgraph 0: nodes 0..")
                && l.contains("AllReduce ffn_down-0 [MUL_MAT] via butterfly, 2 steps")),
        "{sub:#?}"
    );
    assert!(
        sub.iter().any(|l| l.starts_with(&format!(
            "META: subgraph 1: nodes {last_first}..{}",
            n_nodes - 1
        )) && l.contains("no reduce")),
        "{sub:#?}"
    );
    assert!(lines
        .iter()
        .any(|l| l.contains("-> blk.0.ffn_up.weight[NONE, 1, {32x1, 32x1, 32x1}]")));
}

#[test]
fn the_meta_device_answers_by_delegation() {
    use ggml_fake_device::{TestDevice, TestDeviceConfig};
    let a = TestDevice::new(TestDeviceConfig {
        inner: Some(cpu_inner()),
        ..TestDeviceConfig::gpu("DA")
    });
    let b = TestDevice::new(TestDeviceConfig {
        refuse_ops: vec!["SILU".into()],
        events: false,
        inner: Some(cpu_inner()),
        ..TestDeviceConfig::gpu("DB")
    });
    let devs: Vec<DeviceRef> = vec![a.clone(), b.clone()];
    let dev = meta_device(devs.clone(), mlp_split(2, vec![0.0, 0.0]));
    assert_eq!(dev.name(), "Meta(DA,DB)");
    // memory: the sum
    let (fa, ta) = a.memory();
    let (fb, tb) = b.memory();
    assert_eq!(dev.memory(), (fa + fb, ta + tb));
    // caps: all of them (DB has no events)
    assert!(!dev.caps().events && dev.caps().async_);
    // supports_op: every member must
    let mut ctx = Context::new();
    let x = ctx.new_tensor_1d(Type::F32, 8);
    let s = ctx.silu(x);
    let r = ctx.relu(x);
    assert!(!dev.supports_op(&ctx, s));
    assert!(dev.supports_op(&ctx, r));
    // buffers: only its own meta buffer type, not a member's
    assert!(dev.supports_buft(&dev.buffer_type()));
    assert!(!dev.supports_buft(&a.buffer_type()));
    let other = meta_device(
        vec![b.clone() as DeviceRef, a.clone()],
        mlp_split(2, vec![0.0; 2]),
    );
    assert!(
        !dev.supports_buft(&other.buffer_type()),
        "members in another order"
    );
    assert_eq!(dev.buffer_type().name(), "Meta(DA,DB)");
}

/// Q, K and V heads of the fused block: 6 heads of 8 over 3 KV heads.
const HD: i64 = 8;
const NQ: i64 = 6 * HD;
const NKV: i64 = 3 * HD;

/// libllama's split of the fused block's weights over n devices with layer rotation `rot`:
/// whole KV groups (2 Q heads, 1 K and 1 V head) per device in every segment of the fused QKV
/// and its bias, and in the row-parallel projections of each part; the fused up's gate and up
/// halves split as ffn_down's columns.
fn fused_split(n: usize, rot: usize) -> Arc<ggml::meta::StaticSplitFn> {
    let even = vec![0.0; n];
    let q = split_counts(NQ, &even, 2 * HD, rot);
    let kv = split_counts(NKV, &even, HD, rot);
    let f = split_counts(F, &even, 32, rot);
    let v = split_counts(V, &even, 1, rot);
    Arc::new(move |t: &Tensor| match t.name.as_str() {
        "blk.0.attn_qkv.weight" => SplitState::segmented(1, &[(q.clone(), 1), (kv.clone(), 2)]),
        "blk.0.attn_qkv.bias" => SplitState::segmented(0, &[(q.clone(), 1), (kv.clone(), 2)]),
        "blk.0.attn_output.weight" => SplitState::axis(0, q.clone()),
        "blk.0.attn_k_out.weight" | "blk.0.attn_v_out.weight" => SplitState::axis(0, kv.clone()),
        "blk.0.ffn_up.weight" => SplitState::segmented(1, &[(f.clone(), 2)]),
        "blk.0.ffn_down.weight" => SplitState::axis(0, f.clone()),
        "output.weight" => SplitState::axis(1, v.clone()),
        _ => SplitState::mirrored(),
    })
}

/// phi3's fused tensors without the attention: one QKV product with its bias, the Q, K and V
/// heads taken by views of each row (build_qkv), each projected back to D by its own
/// row-parallel matrix (so a view that took another device's rows, or another part's, shows);
/// then a SwiGLU FFN whose up matrix holds the gate and up halves; the output head.
fn fused_block() -> Mlp {
    let mut ctx = Context::new();
    let mut weights = Vec::new();
    let mut w = |ctx: &mut Context, name: &str, ne: &[i64]| {
        let t = ctx.new_tensor(Type::F32, ne);
        ctx.set_name(t, name);
        weights.push(t);
        t
    };
    let norm = w(&mut ctx, "blk.0.attn_norm.weight", &[D]);
    let wqkv = w(&mut ctx, "blk.0.attn_qkv.weight", &[D, NQ + 2 * NKV]);
    let bqkv = w(&mut ctx, "blk.0.attn_qkv.bias", &[NQ + 2 * NKV]);
    let wo_q = w(&mut ctx, "blk.0.attn_output.weight", &[NQ, D]);
    let wo_k = w(&mut ctx, "blk.0.attn_k_out.weight", &[NKV, D]);
    let wo_v = w(&mut ctx, "blk.0.attn_v_out.weight", &[NKV, D]);
    let ffn_norm = w(&mut ctx, "blk.0.ffn_norm.weight", &[D]);
    let up = w(&mut ctx, "blk.0.ffn_up.weight", &[D, 2 * F]);
    let down = w(&mut ctx, "blk.0.ffn_down.weight", &[F, D]);
    let out_w = w(&mut ctx, "output.weight", &[D, V]);
    let inp = ctx.new_tensor_2d(Type::F32, D, T);
    ctx.set_name(inp, "inp_embd");
    ctx.set_input(inp);
    let h = ctx.rms_norm(inp, 1e-5);
    let h = ctx.mul(h, norm);
    let qkv = ctx.mul_mat(wqkv, h);
    let qkv = ctx.add(qkv, bqkv);
    ctx.set_name(qkv, "wqkv_b");
    let (ts, nb1) = (4usize, ctx[qkv].nb[1]);
    let mut parts = Vec::new();
    for (heads, offs, wo) in [
        (6, 0, wo_q),
        (3, NQ as usize * ts, wo_k),
        (3, (NQ + NKV) as usize * ts, wo_v),
    ] {
        let view = ctx.view_3d(qkv, HD, heads, T, HD as usize * ts, nb1, offs);
        let c = ctx.cont(view);
        let rows = ctx.reshape_2d(c, HD * heads, T);
        parts.push(ctx.mul_mat(wo, rows));
    }
    let a = ctx.add(parts[0], parts[1]);
    let a = ctx.add(a, parts[2]);
    ctx.set_name(a, "attn_out");
    let x = ctx.add(a, inp);
    let h = ctx.rms_norm(x, 1e-5);
    let h = ctx.mul(h, ffn_norm);
    let gu = ctx.mul_mat(up, h);
    let act = ctx.glu(gu, ggml::GluOp::Swiglu, false);
    let d = ctx.mul_mat(down, act);
    ctx.set_name(d, "ffn_out");
    let x = ctx.add(d, x);
    let out = ctx.mul_mat(out_w, x);
    ctx.set_name(out, "result_output");
    ctx.set_output(out);
    let mut g = Graph::new(ctx);
    g.build_forward_expand(out);
    Mlp {
        g,
        inp,
        out,
        weights,
    }
}

#[test]
fn fused_qkv_and_up_gate_segments_match_the_cpu_alone() {
    let want = reference_of(fused_block());
    // 3 KV groups over 2 (either rotation), 3 and 4 devices: over 4 one device holds no head
    // and no FFN column
    for (n, rot) in [(2, 0), (2, 1), (3, 0), (4, 0)] {
        let devs = devices(n);
        let dev = meta_device(devs.clone(), fused_split(n, rot));
        // on_meta_of also reads every segmented weight back whole after writing it
        let r = on_meta_of(&dev, backends(&devs), None, fused_block());
        assert_close(&r.out, &want, &format!("n = {n}, rotation {rot}"));
        let _ = &r.weights;
    }
}

/// The bytes of device j's slice of the only tensor of a static meta buffer.
fn device_bytes(t: &Tensor, j: usize, len: usize) -> Vec<u8> {
    let meta = ggml::meta::meta_buffer_of(t).unwrap();
    let b = &meta.simple()[j];
    let mut out = vec![0u8; len];
    b.get(b.base(), &mut out).unwrap();
    out
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn segmented_and_repeated_static_tensors_scatter_to_each_devices_pieces() {
    let devs = devices(2);
    // qkv: 7 rows of 2 (Q rows 0-2 split 1 : 2, K rows 3-4 and V rows 5-6 split 1 : 1);
    // b: 18 values, a 2 : 4 pattern repeated 3 times; q8: two rows of 4 Q8_0 blocks, each
    // row's blocks 1 : 1 twice
    let split = Arc::new(|t: &Tensor| match t.name.as_str() {
        "qkv" => SplitState::segmented(1, &[(vec![1, 2], 1), (vec![1, 1], 2)]),
        "b" => SplitState::segmented(0, &[(vec![2, 4], 3)]),
        "q8" => SplitState::segmented(0, &[(vec![32, 32], 2)]),
        _ => SplitState::mirrored(),
    });
    let dev = meta_device(devs.clone(), split);
    let buft = dev.meta_buft().clone();
    let mut ctx = Context::new();
    let qkv = ctx.new_tensor(Type::F32, &[2, 7]);
    ctx.set_name(qkv, "qkv");
    let b = ctx.new_tensor(Type::F32, &[18]);
    ctx.set_name(b, "b");
    let q8 = ctx.new_tensor(Type::Q8_0, &[128, 2]);
    ctx.set_name(q8, "q8");
    let mut bufs = Vec::new();
    for t in [qkv, b, q8] {
        bufs.push(buft.alloc_static(&mut ctx, &[t]).unwrap());
    }

    // whole-tensor writes scatter each segment's rows to their devices
    let vals: Vec<f32> = (0..7)
        .flat_map(|r| [r as f32 * 10.0, r as f32 * 10.0 + 1.0])
        .collect();
    tensor_set_f32(&ctx[qkv], &vals).unwrap();
    assert_eq!(
        f32s(&device_bytes(&ctx[qkv], 0, 24)),
        [0., 1., 30., 31., 50., 51.]
    );
    assert_eq!(
        f32s(&device_bytes(&ctx[qkv], 1, 32)),
        [10., 11., 20., 21., 40., 41., 60., 61.]
    );
    assert_eq!(tensor_to_f32(&ctx[qkv]).unwrap(), vals);

    let bv: Vec<f32> = (0..18).map(|i| i as f32).collect();
    tensor_set_f32(&ctx[b], &bv).unwrap();
    assert_eq!(
        f32s(&device_bytes(&ctx[b], 0, 24)),
        [0., 1., 6., 7., 12., 13.]
    );
    assert_eq!(
        f32s(&device_bytes(&ctx[b], 1, 48)),
        [2., 3., 4., 5., 8., 9., 10., 11., 14., 15., 16., 17.]
    );
    assert_eq!(tensor_to_f32(&ctx[b]).unwrap(), bv);

    // the loader's writes by address, in pieces that cut through segments, land alike
    let bytes: Vec<u8> = bv.iter().rev().flat_map(|v| v.to_le_bytes()).collect();
    let meta_buf = &bufs[1];
    let base = ctx[b].addr();
    for (lo, hi) in [(0usize, 20usize), (20, 52), (52, 72)] {
        meta_buf.set(base + lo, &bytes[lo..hi]).unwrap();
    }
    let rev: Vec<f32> = bv.iter().rev().copied().collect();
    assert_eq!(tensor_to_f32(&ctx[b]).unwrap(), rev);
    let mut part = vec![0u8; 28];
    meta_buf.get(base + 16, &mut part).unwrap();
    assert_eq!(f32s(&part), rev[4..11]);

    // quantized along the split axis: whole blocks (34 bytes) per piece
    let raw: Vec<u8> = (0..2 * 4 * 34).map(|i| (i % 251) as u8).collect();
    ggml::backend::set_tensor(&ctx[q8], &raw, 0).unwrap();
    let d0 = device_bytes(&ctx[q8], 0, 4 * 34);
    // device 0: block 0 and block 2 of each row
    let blk = |r: usize, k: usize| raw[(r * 4 + k) * 34..(r * 4 + k + 1) * 34].to_vec();
    assert_eq!(d0, [blk(0, 0), blk(0, 2), blk(1, 0), blk(1, 2)].concat());
    let mut back = vec![0u8; raw.len()];
    ggml::backend::get_tensor(&ctx[q8], &mut back, 0).unwrap();
    assert_eq!(back, raw);
}

#[test]
fn a_compute_tensor_with_a_repeated_split_reads_and_writes_whole() {
    // a column-parallel product [F, T] folded into one row: its F split repeats T times
    let build = || {
        let mut ctx = Context::new();
        let w = ctx.new_tensor(Type::F32, &[D, F]);
        ctx.set_name(w, "blk.0.ffn_up.weight");
        let inp = ctx.new_tensor_2d(Type::F32, D, T);
        ctx.set_name(inp, "inp_embd");
        ctx.set_input(inp);
        let h = ctx.mul_mat(w, inp);
        let flat = ctx.reshape_1d(h, F * T);
        let out = ctx.scale(flat, 0.5);
        ctx.set_name(out, "folded");
        ctx.set_output(out);
        let mut g = Graph::new(ctx);
        g.build_forward_expand(out);
        Mlp {
            g,
            inp,
            out,
            weights: vec![w],
        }
    };
    let want = reference_of(build());
    for n in [2usize, 3] {
        let devs = devices(n);
        let dev = meta_device(devs.clone(), mlp_split(n, vec![0.0; n]));
        let r = on_meta_of(&dev, backends(&devs), None, build());
        // gathered whole: each row's pieces from every device, in order
        assert_close(&r.out, &want, &format!("n = {n}"));
        // and scattered back: a whole write reads back unchanged
        let t = &r.m.g.ctx[r.m.out];
        let vals: Vec<f32> = (0..F * T).map(|i| i as f32 * 0.25).collect();
        tensor_set_f32(t, &vals).unwrap();
        assert_eq!(tensor_to_f32(t).unwrap(), vals, "n = {n}");
        let _ = &r.weights;
    }
}
