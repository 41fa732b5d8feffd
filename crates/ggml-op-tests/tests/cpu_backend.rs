//! CPU backend behaviour beyond single ops: threads, reuse, abort, errors, device facts.

use ggml::backend::{tensor_set_f32, tensor_to_f32, Backend, DeviceKind, GraphView, Status};
use ggml::{Context, Graph, Type};
use ggml_op_tests::alloc::alloc_ctx;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A chain of n small ADD nodes: x + 1 + 1 + ...
fn chain(n: usize, len: i64) -> (Graph, ggml::TensorId, ggml::TensorId) {
    let mut ctx = Context::new();
    let x = ctx.new_tensor_1d(Type::F32, len);
    let one = ctx.new_tensor_1d(Type::F32, 1);
    let mut cur = x;
    for _ in 0..n {
        cur = ctx.add(cur, one);
    }
    let mut g = Graph::new(ctx);
    g.build_forward_expand(cur);
    alloc_ctx(&mut g.ctx, &ggml_cpu::device().buffer_type()).expect("alloc");
    tensor_set_f32(&g.ctx[one], &[1.0]).unwrap();
    tensor_set_f32(&g.ctx[x], &vec![0.5; len as usize]).unwrap();
    (g, x, cur)
}

#[test]
fn many_small_nodes_on_every_thread_count() {
    for threads in [1, 2, 3, 4] {
        let (g, _, out) = chain(130, 4096);
        let mut b = ggml_cpu::CpuBackend::new(ggml_cpu::device());
        b.set_threads(threads);
        for _ in 0..3 {
            assert_eq!(
                b.graph_compute(GraphView {
                    ctx: &g.ctx,
                    nodes: &g.nodes
                }),
                Status::Success
            );
            assert!(
                tensor_to_f32(&g.ctx[out])
                    .unwrap()
                    .iter()
                    .all(|&v| v == 130.5),
                "{threads} threads"
            );
        }
        // per-graph overhead, for information (the machine is shared: no hard limit)
        let t0 = std::time::Instant::now();
        for _ in 0..20 {
            b.graph_compute(GraphView {
                ctx: &g.ctx,
                nodes: &g.nodes,
            });
        }
        let per_node = t0.elapsed().as_secs_f64() / 20.0 / 130.0;
        eprintln!("{threads} threads: {:.2} us per node", per_node * 1e6);
    }
}

#[test]
fn abort_callback_stops_between_nodes() {
    let (g, _, out) = chain(50, 64);
    let mut b = ggml_cpu::CpuBackend::new(ggml_cpu::device());
    b.set_threads(2);
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    b.set_abort_callback(Some(Arc::new(move || {
        c.fetch_add(1, Ordering::SeqCst) + 1 >= 10
    })));
    assert_eq!(
        b.graph_compute(GraphView {
            ctx: &g.ctx,
            nodes: &g.nodes
        }),
        Status::Aborted
    );
    assert_eq!(calls.load(Ordering::SeqCst), 10);
    // 10 of the 50 additions ran
    assert!(tensor_to_f32(&g.ctx[out])
        .unwrap()
        .iter()
        .all(|&v| v != 50.5));
    b.set_abort_callback(None);
    assert_eq!(
        b.graph_compute(GraphView {
            ctx: &g.ctx,
            nodes: &g.nodes
        }),
        Status::Success
    );
    assert!(tensor_to_f32(&g.ctx[out])
        .unwrap()
        .iter()
        .all(|&v| v == 50.5));
}

#[test]
fn out_of_range_rows_fail_instead_of_reading_out_of_bounds() {
    let mut ctx = Context::new();
    let a = ctx.new_tensor_2d(Type::F32, 8, 4);
    let idx = ctx.new_tensor_1d(Type::I32, 2);
    let r = ctx.get_rows(a, idx);
    let mut g = Graph::new(ctx);
    g.build_forward_expand(r);
    alloc_ctx(&mut g.ctx, &ggml_cpu::device().buffer_type()).expect("alloc");
    ggml::backend::set_tensor(
        &g.ctx[idx],
        &[1i32.to_le_bytes(), 4i32.to_le_bytes()].concat(),
        0,
    )
    .unwrap();
    // the status carries the cause
    assert_eq!(
        ggml_cpu::compute_graph(&g, 2),
        Status::Failed("an index was out of range".into())
    );
}

#[test]
fn unallocated_tensors_fail() {
    let mut ctx = Context::new();
    let a = ctx.new_tensor_1d(Type::F32, 8);
    let r = ctx.sqr(a);
    let mut g = Graph::new(ctx);
    g.build_forward_expand(r);
    let status = ggml_cpu::compute_graph(&g, 1);
    assert!(
        matches!(&status, Status::Failed(m) if m.contains("has no data")),
        "{status:?}"
    );
}

#[test]
fn device_and_buffer_types() {
    ggml_cpu::init();
    let dev = ggml::backend::dev_by_name("CPU").expect("CPU registered");
    assert_eq!(dev.kind(), DeviceKind::Cpu);
    assert!(!dev.description().is_empty());
    let (free, total) = dev.memory();
    assert!(total > 0 && free <= total);
    let buft = dev.buffer_type();
    assert_eq!(buft.name(), "CPU");
    assert_eq!(buft.alignment(), 32);
    assert!(buft.is_host() && dev.supports_buft(&buft));
    let mem = Arc::new(vec![7u8; 256]);
    let ptr = mem.as_ptr() as usize;
    let mapped = dev
        .buffer_from_host_ptr_owned(ptr, 256, mem.clone())
        .expect("mapped buffer");
    assert_eq!(mapped.name(), "CPU_Mapped");
    assert!(mapped.is_host() && mapped.base() == ptr && mapped.size() == 256);
    drop(mem);
    let mut out = [0u8; 4];
    mapped.get(ptr + 10, &mut out).unwrap();
    assert_eq!(out, [7; 4]);
}
