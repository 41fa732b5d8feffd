//! Matrix products on Vulkan0 against the CPU backend (not the f64 reference): the shaders
//! take src1 as the CPU's vec_dot_type values, so the two differ by float rounding only.

mod common;

use ggml::backend::{Backend, GraphView};
use ggml::{Context, Graph, Type};

fn run(
    dev: &ggml::backend::DeviceRef,
    mut backend: Box<dyn Backend>,
    wty: Type,
    k: i64,
    m: i64,
    n: i64,
) -> Vec<f32> {
    let mut c = Context::new();
    let a = c.new_tensor(wty, &[k, m, 1, 1]);
    let b = c.new_tensor(Type::F32, &[k, n, 1, 1]);
    let d = c.mul_mat(a, b);
    let mut g = Graph::new(c);
    g.build_forward_expand(d);
    ggml_op_tests::alloc::alloc_ctx(&mut g.ctx, &dev.buffer_type()).unwrap();
    let mut rng = 12345u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    };
    let av: Vec<f32> = (0..k * m).map(|_| next()).collect();
    let bv: Vec<f32> = (0..k * n).map(|_| next()).collect();
    let mut q = vec![0u8; wty.row_size(k) * m as usize];
    ggml::quants::quantize_row_ref(wty, &av, &mut q);
    ggml::backend::set_tensor(&g.ctx[a], &q, 0).unwrap();
    ggml::backend::tensor_set_f32(&g.ctx[b], &bv).unwrap();
    assert_eq!(
        backend.graph_compute(GraphView {
            ctx: &g.ctx,
            nodes: &g.nodes
        }),
        ggml::backend::Status::Success
    );
    ggml::backend::tensor_to_f32(&g.ctx[d]).unwrap()
}

#[test]
fn mul_mat_matches_the_cpu_to_float_rounding() {
    let Some(vk) = common::device_or_skip() else {
        return;
    };
    let cpu = ggml_cpu::device();
    for wty in [Type::F16, Type::Q8_0, Type::Q4_0, Type::Q4K, Type::Q6K] {
        for n in [1, 8, 40] {
            let (k, m) = (256, 64);
            let want = run(
                &cpu,
                Box::new(ggml_cpu::CpuBackend::new(ggml_cpu::device())),
                wty,
                k,
                m,
                n,
            );
            let got = run(&vk, vk.clone().init_backend().unwrap(), wty, k, m, n);
            let mut worst = 0f32;
            for (g, w) in got.iter().zip(&want) {
                worst = worst.max((g - w).abs() / w.abs().max(1.0));
            }
            eprintln!("{wty:?} n={n}: worst relative difference {worst:e}");
            assert!(worst < 1e-5, "{wty:?} n={n}: {worst}");
        }
    }
}

// The types whose shaders keep the CPU backend's float order (exact integer block sums, the
// CPU kernel's float steps; docs/vulkan.md) give its results to the bit, for every batch size
// the CPU's dispatch tells apart: one column (vec_dot / gemv), fewer than 8 (Q4_K's repacked
// gemm for the first ne11 - ne11 % 4, gemv after), 8 or more (the tiled K path), and Q4_K
// weights with rows % 8 != 0 (not repacked: the AVX2 vec_dot, tiled from 8 columns).
#[test]
fn exact_order_types_match_the_cpu_bit_for_bit() {
    let Some(vk) = common::device_or_skip() else {
        return;
    };
    let cpu = ggml_cpu::device();
    let mut failures = Vec::new();
    for (wty, m) in [
        (Type::Q8_0, 64),
        (Type::Q4_0, 64),
        (Type::Q5_0, 64),
        (Type::Q4K, 64),
        (Type::Q4K, 60),
        (Type::Q6K, 64),
    ] {
        for n in [1, 3, 5, 6, 8, 13, 40] {
            let k = 512;
            let want = run(
                &cpu,
                Box::new(ggml_cpu::CpuBackend::new(ggml_cpu::device())),
                wty,
                k,
                m,
                n,
            );
            let got = run(&vk, vk.clone().init_backend().unwrap(), wty, k, m, n);
            let differ = got
                .iter()
                .zip(&want)
                .filter(|(g, w)| g.to_bits() != w.to_bits())
                .count();
            let first = got
                .iter()
                .zip(&want)
                .position(|(g, w)| g.to_bits() != w.to_bits());
            let shown = first.map(|i| (i, got[i], want[i]));
            if differ != 0 {
                failures.push(format!(
                    "{wty:?} rows {m} n={n}: {differ} cells differ, first (cell, vulkan, cpu) {shown:?}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
