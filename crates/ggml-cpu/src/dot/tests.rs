//! Every SIMD kernel against the scalar reference on random data, and the scalar kernels
//! against a dot product of the dequantized operands.

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

use super::*;
use ggml::quants::{bytes_for, dequantize_row, quantize_row_ref};

fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 4.0
        })
        .collect()
}

const TYPES: [Type; 28] = [
    Type::F32,
    Type::F16,
    Type::Bf16,
    Type::Q4_0,
    Type::Q4_1,
    Type::Q5_0,
    Type::Q5_1,
    Type::Q8_0,
    Type::Iq4Nl,
    Type::Q2K,
    Type::Q3K,
    Type::Q4K,
    Type::Q5K,
    Type::Q6K,
    Type::Iq4Xs,
    Type::Tq1_0,
    Type::Tq2_0,
    Type::Mxfp4,
    Type::Nvfp4,
    Type::Q1_0,
    Type::Q2_0,
    Type::Iq2Xxs,
    Type::Iq2Xs,
    Type::Iq2S,
    Type::Iq3Xxs,
    Type::Iq3S,
    Type::Iq1S,
    Type::Iq1M,
];

/// Weights in `ty` and activations converted by `from_float`, for `n` elements.
fn operands(ty: Type, n: usize, seed: u64) -> (Vec<u8>, Vec<u8>, CpuTypeTraits) {
    let tr = scalar_traits(ty).unwrap();
    let w = data(n, seed);
    let a = data(n, seed + 100);
    let mut wq = vec![0u8; bytes_for(ty, n)];
    if ggml::quants::requires_imatrix(ty) {
        // the types ggml only quantizes with an importance matrix get a flat one
        let ones = vec![1.0f32; n];
        ggml::quants::quantize_chunk(ty, &w, &mut wq, 0, 1, n, Some(&ones));
    } else {
        quantize_row_ref(ty, &w, &mut wq);
    }
    let mut aq = vec![0u8; bytes_for(tr.vec_dot_type, n)];
    (tr.from_float)(&a, &mut aq);
    (wq, aq, tr)
}

#[test]
fn scalar_matches_dequantized_dot() {
    for ty in TYPES {
        let n = 1024;
        let (wq, aq, tr) = operands(ty, n, 1);
        let mut wf = vec![0f32; n];
        dequantize_row(ty, &wq, &mut wf);
        let mut af = vec![0f32; n];
        dequantize_row(tr.vec_dot_type, &aq, &mut af);
        let want: f64 = wf.iter().zip(&af).map(|(a, b)| *a as f64 * *b as f64).sum();
        let got = (tr.vec_dot)(n, &wq, &aq) as f64;
        let scale: f64 = wf
            .iter()
            .zip(&af)
            .map(|(a, b)| (*a as f64 * *b as f64).abs())
            .sum();
        // Q8_1 carries d*sum(q) rounded to fp16, which the dot uses for the min term.
        let tol = if tr.vec_dot_type == Type::Q8_1 {
            2e-3
        } else {
            1e-5
        };
        assert!((got - want).abs() <= tol * scale, "{ty}: {got} vs {want}");
    }
}

#[test]
fn simd_kernels_match_scalar() {
    for level in SimdLevel::available() {
        for ty in TYPES {
            let fast = traits_for(level, ty).unwrap();
            let slow = scalar_traits(ty).unwrap();
            assert_eq!(fast.vec_dot_type, slow.vec_dot_type);
            // Lengths that exercise both the unrolled loops and the tails.
            for (k, n) in [256usize, 512, 4096, 256 * 3 + 256].into_iter().enumerate() {
                let n = if ty.block_size() == 1 { n + 7 * k } else { n };
                let (wq, aq, _) = operands(ty, n, 10 + k as u64);
                let a = (fast.vec_dot)(n, &wq, &aq);
                let b = (slow.vec_dot)(n, &wq, &aq);
                let tol = 2e-5 * b.abs().max(1.0) * (n as f32).sqrt();
                assert!(
                    (a - b).abs() <= tol,
                    "{level:?} {ty} n={n}: {a} vs scalar {b}"
                );
            }
        }
    }
}

#[test]
fn q8_0_activation_quantization_rounds_half_to_even() {
    // amax 127 => multiplier 1, so 2.5 -> 2 and 3.5 -> 4 (the file quantizer would give 3 and 4).
    let mut x = [0f32; 32];
    x[0] = 127.0;
    x[1] = 2.5;
    x[2] = 3.5;
    x[3] = -2.5;
    let mut q = [0u8; 34];
    quantize_row_q8_0(&x, &mut q);
    assert_eq!([q[3] as i8, q[4] as i8, q[5] as i8], [2, 4, -2]);
    let mut q1 = [0u8; 36];
    quantize_row_q8_1(&x, &mut q1);
    let s = ggml::quants::fp16_to_fp32(u16::from_le_bytes([q1[2], q1[3]]));
    assert_eq!(s, 131.0);
}

#[test]
fn cpu_traits_cover_every_dot_type() {
    for ty in TYPES {
        let tr = cpu_traits(ty);
        assert_eq!(tr.vec_dot_type, scalar_traits(ty).unwrap().vec_dot_type);
    }
    assert!(!has_traits(Type::I32));
    let (wq, aq, _) = operands(Type::Q4K, 512, 3);
    let two = [wq.clone(), wq].concat();
    let mut out = [0f32; 2];
    vec_dot_rows(Type::Q4K, 512, &two, 2, &aq, &mut out);
    assert_eq!(out[0], out[1]);
}

#[test]
#[should_panic(expected = "shorter")]
fn short_operands_are_rejected() {
    let tr = cpu_traits(Type::Q8_0);
    (tr.vec_dot)(64, &[0u8; 34], &[0u8; 68]);
}

#[test]
fn q8_k_activations_equal_the_reference_quantizer() {
    let mut x = data(256 * 6, 11);
    // a zero block, a block whose largest |x| appears with both signs (the first one wins),
    // and exact halves that must round to even
    x[256..512].fill(0.0);
    x[600] = -9.0;
    x[700] = 9.0;
    for (i, v) in x[1024..1280].iter_mut().enumerate() {
        *v = (i as f32 - 128.0) * 0.5;
    }
    let mut got = vec![0u8; 6 * 292];
    let mut want = vec![0u8; 6 * 292];
    (cpu_traits(Type::Q4K).from_float)(&x, &mut got);
    ggml::quants::quantize_row_ref(Type::Q8K, &x, &mut want);
    assert_eq!(got, want);
}

#[test]
fn tiled_iq_order_is_the_same_dot_product() {
    // llama.cpp's tiled order for IQ weights (its exact digits: tests/tests/perplexity_iq.rs)
    let mut covered = 0;
    for ty in TYPES {
        let Some(tiled) = tiled_iq_kernel(ty) else {
            continue;
        };
        covered += 1;
        let slow = scalar_traits(ty).unwrap();
        for (k, n) in [256usize, 4096, 256 * 7].into_iter().enumerate() {
            let (wq, aq, _) = operands(ty, n, 60 + k as u64);
            let a = tiled(n, &wq, &aq);
            let b = (slow.vec_dot)(n, &wq, &aq);
            let tol = 2e-5 * b.abs().max(1.0) * (n as f32).sqrt();
            assert!((a - b).abs() <= tol, "{ty} n={n}: tiled {a} vs scalar {b}");
        }
    }
    #[cfg(target_arch = "x86_64")]
    if SimdLevel::available().contains(&SimdLevel::Avx2) {
        assert_eq!(covered, 8, "the eight IQ types llama.cpp tiles");
    }
}

/// The Q6_K row loops (eight rows a pass, the rest one by one; and two rows a pass from the two
/// halves) give each row the bits of the dot product the CPU's table uses.
#[cfg(target_arch = "x86_64")]
#[test]
fn q6_k_row_loop_equals_the_dot_product() {
    if !super::x86_k512::available() {
        eprintln!("skipped: no AVX-512 VNNI on this CPU");
        return;
    }
    let tr = cpu_traits(Type::Q6K);
    for (n, nrows) in [(256, 21), (512, 8), (2048, 13), (2048, 1), (1536, 6)] {
        let (_, y, _) = operands(Type::Q6K, n, 3);
        let rows: Vec<u8> = (0..nrows)
            .flat_map(|r| operands(Type::Q6K, n, 40 + r as u64).0)
            .collect();
        let rb = bytes_for(Type::Q6K, n);
        let mut out = vec![0.0f32; nrows];
        // SAFETY: AVX-512 VNNI was detected; rows holds nrows rows of n / 256 blocks, rb bytes
        // apart, and y one Q8_K row of n values.
        unsafe { super::x86_k512::q6_k_rows(n / 256, rows.as_ptr(), rb, y.as_ptr(), &mut out) };
        let mut halves = vec![0.0f32; nrows];
        // SAFETY: as above.
        unsafe {
            super::x86_k512::q6_k_rows_halves(n / 256, rows.as_ptr(), rb, y.as_ptr(), &mut halves)
        };
        for (r, (o, h)) in out.iter().zip(&halves).enumerate() {
            let want = (tr.vec_dot)(n, &rows[r * rb..(r + 1) * rb], &y);
            assert_eq!(o.to_bits(), want.to_bits(), "n {n} row {r}");
            assert_eq!(h.to_bits(), want.to_bits(), "n {n} row {r}, by halves");
        }
    }
}

/// The four-row kernels give each row the bits of the dot product the CPU's table uses.
#[cfg(target_arch = "x86_64")]
#[test]
fn rows4_kernels_equal_the_dot_product() {
    for (ty, n) in [
        (Type::Q4_1, 2048),
        (Type::Q5_1, 2048),
        (Type::Q6K, 2048),
        (Type::F16, 2048),
        (Type::F16, 64 * 5 + 37),
    ] {
        // (any row length: the kernels' bits, whatever rows the table gives them)
        let Some((f, qk)) = rows4_kernel(ty, usize::MAX) else {
            eprintln!("skipped {ty}: no kernel for this CPU");
            continue;
        };
        let tr = cpu_traits(ty);
        let rows: Vec<(Vec<u8>, Vec<u8>)> = (0..4)
            .map(|r| {
                let (w, y, _) = operands(ty, n, 7 + r);
                (w, y)
            })
            .collect();
        // one activation row (the first one's), four weight rows
        let y = &rows[0].1;
        let x: [*const u8; 4] = std::array::from_fn(|r| rows[r].0.as_ptr());
        let mut out = [0.0f32; 4];
        // SAFETY: AVX2 was detected (rows4_kernel); every row holds n / qk blocks and y the
        // matching Q8_1 blocks.
        unsafe { f(n / qk, &x, y.as_ptr(), &mut out) };
        for r in 0..4 {
            let want = (tr.vec_dot)(n, &rows[r].0, y);
            assert_eq!(out[r].to_bits(), want.to_bits(), "{ty} row {r}");
        }
    }
}
