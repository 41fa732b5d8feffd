//! The graph allocator on small graphs whose plans are worked out by hand (addresses are
//! offsets from the buffer base; every tensor is 64 f32 = 256 bytes unless noted).

use ggml::alloc::{alloc_ctx_tensors, alloc_ctx_tensors_size, Gallocr, Tallocr};
use ggml::backend::{BufferTypeRef, HostBufferType};
use ggml::tensor::flags;
use ggml::{Context, Graph, TensorId, Type};
use std::sync::Arc;

fn host_buft(alignment: usize, max_size: usize) -> BufferTypeRef {
    Arc::new(HostBufferType {
        name: "H".into(),
        alignment,
        max_size,
    })
}

fn input(ctx: &mut Context, name: &str) -> TensorId {
    let t = ctx.new_tensor_1d(Type::F32, 64);
    ctx.set_name(t, name);
    ctx.set_input(t);
    t
}

/// (buffer base, offset) of an allocated tensor.
fn at(g: &Graph, t: TensorId) -> (usize, usize) {
    let d = g.ctx[t].data.as_ref().expect("tensor allocated");
    (d.buffer.base(), d.addr - d.buffer.base())
}

fn off(g: &Graph, t: TensorId) -> usize {
    at(g, t).1
}

#[test]
fn inplace_ops_reuse_their_dying_parent() {
    let mut ctx = Context::new();
    let x = input(&mut ctx, "x");
    let y = input(&mut ctx, "y");
    let a = ctx.add(x, y);
    let b = ctx.sqr(a);
    let c = ctx.sum_rows(b);
    let mut g = Graph::new(ctx);
    g.build_forward_expand(c);

    let mut ga = Gallocr::new(host_buft(32, usize::MAX));
    ga.reserve(&g).unwrap();
    assert!(ga.alloc_graph(&mut g));
    // x@0 y@256; a takes x's bytes in place, b takes a's; c (4 bytes, padded to 32) goes where
    // y was freed, so nothing grows past the two inputs
    assert_eq!(
        [off(&g, x), off(&g, y), off(&g, a), off(&g, b), off(&g, c)],
        [0, 256, 0, 0, 256]
    );
    assert_eq!(ga.get_buffer_size(0), 512);
}

#[test]
fn a_view_keeps_its_source_alive_until_its_last_consumer() {
    let mut ctx = Context::new();
    let x = input(&mut ctx, "x");
    let a = ctx.cont(x);
    let v = ctx.view_1d(a, 32, 0);
    let b = ctx.cont(v);
    let c = ctx.cont(x);
    let mut g = Graph::new(ctx);
    g.build_forward_expand(b);
    g.build_forward_expand(c);

    let mut ga = Gallocr::new(host_buft(32, usize::MAX));
    ga.reserve(&g).unwrap();
    assert!(ga.alloc_graph(&mut g));
    // a@256 stays allocated while its view v is unread, so b (128 bytes) goes to 512; once b ran
    // the view is dead, a is freed, and c reuses a's bytes
    assert_eq!(
        [off(&g, x), off(&g, a), off(&g, b), off(&g, c)],
        [0, 256, 512, 256]
    );
    assert_eq!(off(&g, v), 256, "a view points into its source");
    assert_eq!(ga.get_buffer_size(0), 640);
}

#[test]
fn outputs_are_never_reused_or_freed() {
    let mut ctx = Context::new();
    let x = input(&mut ctx, "x");
    let a = ctx.cont(x);
    ctx[a].flags |= flags::OUTPUT;
    let b = ctx.sqr(a);
    let c = ctx.cont(b);
    let mut g = Graph::new(ctx);
    g.build_forward_expand(c);

    let mut ga = Gallocr::new(host_buft(32, usize::MAX));
    ga.reserve(&g).unwrap();
    assert!(ga.alloc_graph(&mut g));
    // sqr could work in place on a, but a is an output: b takes the freed x at 0 instead, and c
    // cannot take a's bytes after b frees it either
    assert_eq!(
        [off(&g, x), off(&g, a), off(&g, b), off(&g, c)],
        [0, 256, 0, 512]
    );
    assert_eq!(ga.get_buffer_size(0), 768);
}

#[test]
fn chunks_open_when_the_max_size_is_exceeded() {
    let mut ctx = Context::new();
    let x = input(&mut ctx, "x");
    let y = input(&mut ctx, "y");
    let z = ctx.new_tensor_1d(Type::F32, 300); // 1200 -> 1216 bytes, more than a chunk
    ctx.set_input(z);
    let a = ctx.cont(x);
    let b = ctx.cont(y);
    let c = ctx.cont(z);
    let mut g = Graph::new(ctx);
    for t in [a, b, c] {
        g.build_forward_expand(t);
    }

    let mut ga = Gallocr::new(host_buft(32, 512));
    ga.reserve(&g).unwrap();
    assert!(ga.alloc_graph(&mut g));
    // x and y fill chunk 0; z gets a chunk of its own size; a opens chunk 2; b prefers x's freed
    // bytes in chunk 0 (no growth) over the tail of chunk 2; c fits nowhere and opens chunk 3
    let (base0, _) = at(&g, x);
    assert_eq!(at(&g, y), (base0, 256));
    let (base_a, a_off) = at(&g, a);
    assert_eq!(a_off, 0);
    assert_eq!(at(&g, b), (base0, 0));
    let bases = [base0, at(&g, z).0, base_a, at(&g, c).0];
    for i in 0..4 {
        for j in 0..i {
            assert_ne!(
                bases[i], bases[j],
                "chunks {j} and {i} are separate buffers"
            );
        }
    }
    assert_eq!(ga.get_buffer_size(0), 512 + 1216 + 256 + 1216);
}

#[test]
fn alloc_graph_reuses_the_plan_and_replans_a_bigger_single_buffer_graph() {
    let build = |n: i64| {
        let mut ctx = Context::new();
        let x = ctx.new_tensor_1d(Type::F32, n);
        ctx.set_input(x);
        let a = ctx.cont(x);
        let b = ctx.cont(a);
        let mut g = Graph::new(ctx);
        g.build_forward_expand(b);
        g
    };
    let mut ga = Gallocr::new(host_buft(32, usize::MAX));
    let mut g = build(64);
    ga.reserve(&g).unwrap();
    assert!(ga.alloc_graph(&mut g));
    assert_eq!(ga.get_buffer_size(0), 512);
    // the same shape fits the existing plan
    let mut g2 = build(64);
    assert!(ga.alloc_graph(&mut g2));
    assert_eq!(ga.get_buffer_size(0), 512);
    // a bigger graph no longer fits: with one buffer the allocator re-plans by itself
    let mut g3 = build(128);
    assert!(ga.alloc_graph(&mut g3));
    assert_eq!(ga.get_buffer_size(0), 1024);
}

#[test]
fn two_buffer_ids_plan_separately_and_share_a_buffer_type() {
    let buft = host_buft(32, usize::MAX);
    let other = host_buft(64, usize::MAX);
    let mut ctx = Context::new();
    let x = input(&mut ctx, "x");
    let a = ctx.cont(x);
    let b = ctx.cont(a);
    let mut g = Graph::new(ctx);
    g.build_forward_expand(b);
    // x and a in buffer 0, b in buffer 2 (same type as 0), buffer 1 unused
    let mut ga = Gallocr::new_n(vec![buft.clone(), other, buft]);
    ga.reserve_n(&g.ctx, &g.nodes, &g.leafs, Some(&[0, 2]), Some(&[0]))
        .unwrap();
    let (nodes, leafs) = (g.nodes.clone(), g.leafs.clone());
    assert!(ga.alloc_graph_n(&mut g.ctx, &nodes, &leafs));
    // one allocator for ids 0 and 2: x@0, a@256, x freed, b reuses 0
    assert_eq!([off(&g, x), off(&g, a), off(&g, b)], [0, 256, 0]);
    assert_eq!(at(&g, x).0, at(&g, b).0);
    assert_eq!(
        (
            ga.get_buffer_size(0),
            ga.get_buffer_size(1),
            ga.get_buffer_size(2)
        ),
        (512, 0, 0)
    );
}

#[test]
fn context_tensors_get_one_buffer_and_views_follow() {
    let buft = host_buft(32, usize::MAX);
    let mut ctx = Context::new();
    let w = ctx.new_tensor_2d(Type::F32, 10, 3); // 120 -> 128
    let k = ctx.new_tensor_1d(Type::F16, 7); // 14 -> 32
    let v = ctx.view_1d(w, 5, 40);
    assert_eq!(alloc_ctx_tensors_size(&ctx, &buft), 160);
    let buf = alloc_ctx_tensors(&mut ctx, &buft)
        .unwrap()
        .expect("a buffer");
    assert_eq!(buf.size(), 160);
    let base = buf.base();
    assert_eq!(ctx[w].addr() - base, 0);
    assert_eq!(ctx[k].addr() - base, 128);
    assert_eq!(ctx[v].addr() - base, 40);
    // everything is allocated now: nothing left to do
    assert!(alloc_ctx_tensors(&mut ctx, &buft).unwrap().is_none());
}

#[test]
fn tallocr_refuses_what_does_not_fit() {
    let buft = host_buft(32, usize::MAX);
    let buf = buft.clone().alloc_buffer(64).unwrap();
    let mut ctx = Context::new();
    let a = ctx.new_tensor_1d(Type::F32, 8); // 32
    let b = ctx.new_tensor_1d(Type::F32, 9); // 36 -> 64
    let mut ta = Tallocr::new(buf);
    ta.alloc(&mut ctx, a).unwrap();
    assert!(ta.alloc(&mut ctx, b).is_err());
    assert!(ctx[b].data.is_none());
    assert!(
        ta.alloc(&mut ctx, a).is_err(),
        "allocating twice is an error"
    );
}

#[test]
fn measuring_sizes_allocates_nothing_and_drops_stale_buffers() {
    let buft = host_buft(32, usize::MAX);
    let build = |n: i64| {
        let mut ctx = Context::new();
        let x = ctx.new_tensor_1d(Type::F32, n);
        ctx.set_input(x);
        let a = ctx.cont(x);
        let mut g = Graph::new(ctx);
        g.build_forward_expand(a);
        g
    };
    let mut ga = Gallocr::new_n(vec![buft.clone(), buft]);
    let g = build(64);
    // both ids share the buffer type and each reports the shared total
    assert_eq!(
        ga.reserve_n_size(&g.ctx, &g.nodes, &g.leafs, None, None)
            .unwrap(),
        vec![512, 512]
    );
    assert_eq!(ga.get_buffer_size(0), 0, "nothing was allocated");
    let mut g = build(64);
    let (nodes, leafs) = (g.nodes.clone(), g.leafs.clone());
    // with two buffer ids the allocator cannot re-plan by itself: the caller must reserve
    assert!(!ga.alloc_graph_n(&mut g.ctx, &nodes, &leafs));
    ga.reserve_n(&g.ctx, &nodes, &leafs, None, None).unwrap();
    assert!(ga.alloc_graph_n(&mut g.ctx, &nodes, &leafs));
    assert_eq!((ga.get_buffer_size(0), ga.get_buffer_size(1)), (512, 0));
    // measuring a bigger graph drops the buffer that became too small
    let big = build(128);
    assert_eq!(
        ga.reserve_n_size(&big.ctx, &big.nodes, &big.leafs, None, None)
            .unwrap(),
        vec![1024, 1024]
    );
    assert_eq!(ga.get_buffer_size(0), 0);
}
