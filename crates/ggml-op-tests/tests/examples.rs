//! Examples 2 and 3 of the architecture seed, computed on the CPU backend.

use ggml::backend::{get_tensor, set_tensor, tensor_set_f32, tensor_to_f32, GraphView, Status};
use ggml::{Context, Graph, Type};
use ggml_op_tests::alloc::alloc_ctx;

fn f32s(t: &ggml::Tensor) -> Vec<f32> {
    tensor_to_f32(t).unwrap()
}

#[test]
fn example2_strides_and_transposed_view() {
    let mut ctx = Context::new();
    let m = ctx.new_tensor_2d(Type::F32, 4, 3);
    assert_eq!(ctx[m].ne, [4, 3, 1, 1]);
    assert_eq!(ctx[m].nb, [4, 16, 48, 48]);
    let tr = ctx.transpose(m);
    assert_eq!(ctx[tr].ne, [3, 4, 1, 1]);
    assert_eq!(ctx[tr].nb, [16, 4, 48, 48]);
    assert!(!ctx[tr].is_contiguous());
    let c = ctx.cont(tr);
    let mut g = Graph::new(ctx);
    g.build_forward_expand(c);
    let dev = ggml_cpu::device();
    alloc_ctx(&mut g.ctx, &dev.buffer_type()).expect("alloc");
    let values: Vec<f32> = (0..12).map(|i| i as f32).collect();
    tensor_set_f32(&g.ctx[m], &values).unwrap();
    // element (i0 = 2, i1 = 1) is at byte 2*4 + 1*16 = 24 and holds 6
    let mut b = [0u8; 4];
    get_tensor(&g.ctx[m], &mut b, 24).unwrap();
    assert_eq!(f32::from_le_bytes(b), 6.0);
    assert_eq!(ggml_cpu::compute_graph(&g, 2), Status::Success);
    let rows = f32s(&g.ctx[c]);
    assert_eq!(
        rows,
        vec![0.0, 4.0, 8.0, 1.0, 5.0, 9.0, 2.0, 6.0, 10.0, 3.0, 7.0, 11.0]
    );
}

#[test]
fn example2_ffn_gate_sizes_and_q8_0_copy() {
    let mut ctx = Context::new();
    let want = [
        (Type::F32, [4usize, 1024, 720896, 720896]),
        (Type::F16, [2, 512, 360448, 360448]),
        (Type::Q8_0, [34, 272, 191488, 191488]),
    ];
    for (ty, nb) in want {
        let t = ctx.new_tensor_2d(ty, 256, 704);
        assert_eq!(ctx[t].nb, nb, "{ty}");
        assert_eq!(ctx[t].nbytes(), nb[3], "{ty}");
    }
    // quantize a {256, 704} f32 gate into q8_0 on the CPU backend: 191,488 bytes
    let mut ctx = Context::new();
    let src = ctx.new_tensor_2d(Type::F32, 256, 704);
    let dst = ctx.new_tensor_2d(Type::Q8_0, 256, 704);
    let cpy = ctx.cpy(src, dst);
    let back = ctx.cast(cpy, Type::F32);
    let mut g = Graph::new(ctx);
    g.build_forward_expand(back);
    alloc_ctx(&mut g.ctx, &ggml_cpu::device().buffer_type()).expect("alloc");
    let vals: Vec<f32> = (0..256 * 704).map(|i| ((i as f32) * 0.37).sin()).collect();
    tensor_set_f32(&g.ctx[src], &vals).unwrap();
    assert_eq!(ggml_cpu::compute_graph(&g, 2), Status::Success);
    assert_eq!(g.ctx[dst].nbytes(), 191_488);
    let mut q = vec![0u8; 191_488];
    get_tensor(&g.ctx[dst], &mut q, 0).unwrap();
    let got = f32s(&g.ctx[back]);
    let max_err = got
        .iter()
        .zip(&vals)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(max_err < 1.0 / 127.0, "q8_0 round trip error {max_err}");
    let mut deq = vec![0f32; 256 * 704];
    ggml::quants::dequantize_row(Type::Q8_0, &q, &mut deq);
    assert_eq!(deq, got);
}

#[test]
fn example3_graph_computed_twice_with_new_inputs() {
    let mut ctx = Context::new();
    let x = ctx.new_tensor_1d(Type::F32, 1);
    let a = ctx.new_tensor_1d(Type::F32, 1);
    let b = ctx.new_tensor_1d(Type::F32, 1);
    ctx.set_name(x, "x");
    ctx.set_name(a, "a");
    ctx.set_name(b, "b");
    let x2 = ctx.mul(x, x);
    let ax2 = ctx.mul(a, x2);
    let f = ctx.add(ax2, b);
    let mut g = Graph::new(ctx);
    g.build_forward_expand(f);
    let names = |ids: &[ggml::TensorId]| {
        ids.iter()
            .map(|&i| g.ctx[i].name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&g.leafs), ["a", "x", "b"]);
    assert_eq!(g.nodes, vec![x2, ax2, f]);
    alloc_ctx(&mut g.ctx, &ggml_cpu::device().buffer_type()).expect("alloc");
    tensor_set_f32(&g.ctx[a], &[3.0]).unwrap();
    tensor_set_f32(&g.ctx[b], &[4.0]).unwrap();
    let dev = ggml_cpu::device();
    let mut backend = dev.clone().init_backend().expect("backend");
    for (input, want) in [(2.0f32, 16.0f32), (5.0, 79.0)] {
        set_tensor(&g.ctx[x], &input.to_le_bytes(), 0).unwrap();
        let st = backend.graph_compute(GraphView {
            ctx: &g.ctx,
            nodes: &g.nodes,
        });
        assert_eq!(st, Status::Success);
        assert_eq!(f32s(&g.ctx[f]), vec![want]);
    }
}
