//! Quantize / dequantize round trips for every type, with test-quantize-fns' data and error
//! limits, and through the CPU backend's CPY (which must equal the quantizers' bytes).

use ggml::Type;

const TYPES: [Type; 17] = [
    Type::F32,
    Type::F16,
    Type::Bf16,
    Type::Q4_0,
    Type::Q4_1,
    Type::Q5_0,
    Type::Q5_1,
    Type::Q8_0,
    Type::Q8_1,
    Type::Q2K,
    Type::Q3K,
    Type::Q4K,
    Type::Q5K,
    Type::Q6K,
    Type::Q8K,
    Type::Iq4Nl,
    Type::I32,
];

/// test-quantize-fns: 0.1 + 2 cos(i + offset)
fn synthetic(n: usize, offset: f32) -> Vec<f32> {
    (0..n)
        .map(|i| 0.1 + 2.0 * (i as f32 + offset).cos())
        .collect()
}

fn limit(ty: Type) -> f64 {
    match ty {
        Type::Q2K => 0.0075,
        Type::Q3K => 0.0040,
        Type::I32 => 1.0,
        _ => 0.002,
    }
}

#[test]
fn every_type_round_trips_within_its_error_limit() {
    let n = 32 * 128;
    let src = synthetic(n, 0.0);
    for ty in TYPES {
        let mut q = vec![0u8; ty.row_size(n as i64)];
        ggml::quants::quantize_row_ref(ty, &src, &mut q);
        let mut back = vec![0f32; n];
        ggml::quants::dequantize_row(ty, &q, &mut back);
        // test-quantize-fns' array_rmse: sqrt(sum of squared differences) / n
        let err = src
            .iter()
            .zip(&back)
            .map(|(a, b)| ((a - b) as f64).powi(2))
            .sum::<f64>()
            .sqrt()
            / n as f64;
        assert!(
            err < limit(ty),
            "{ty}: round-trip error {err} over {}",
            limit(ty)
        );
        // a second round trip of the dequantized values changes nothing for exact types
        if matches!(ty, Type::F32 | Type::F16 | Type::Bf16 | Type::Q8_0) {
            let mut q2 = vec![0u8; q.len()];
            ggml::quants::quantize_row_ref(ty, &back, &mut q2);
            assert_eq!(
                q, q2,
                "{ty}: re-quantizing dequantized values changed the bytes"
            );
        }
    }
}

#[test]
fn cpu_copies_quantize_like_the_quantizers() {
    use ggml::backend::{get_tensor, tensor_set_f32};
    use ggml_op_tests::alloc::alloc_ctx;
    let n = 256i64;
    for ty in TYPES
        .iter()
        .copied()
        .filter(|t| t.is_quantized() && !matches!(t, Type::Q8_0 | Type::Q8_1))
    {
        let mut ctx = ggml::Context::new();
        let a = ctx.new_tensor_2d(Type::F32, n, 3);
        let b = ctx.new_tensor_2d(ty, n, 3);
        let c = ctx.cpy(a, b);
        let mut g = ggml::Graph::new(ctx);
        g.build_forward_expand(c);
        alloc_ctx(&mut g.ctx, &ggml_cpu::device().buffer_type()).expect("alloc");
        let src = synthetic(3 * n as usize, 1.0);
        tensor_set_f32(&g.ctx[a], &src).unwrap();
        assert_eq!(
            ggml_cpu::compute_graph(&g, 2),
            ggml::backend::Status::Success
        );
        let mut got = vec![0u8; g.ctx[b].nbytes()];
        get_tensor(&g.ctx[b], &mut got, 0).unwrap();
        let mut want = vec![0u8; got.len()];
        ggml::quants::quantize_row_ref(ty, &src, &mut want);
        assert_eq!(got, want, "{ty}");
    }
}
