//! Round trips for every type, known vectors worked out by hand from ggml's code, and the
//! chunk/row equivalences that llama-quantize relies on.

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

use super::*;
use crate::Type;

const ALL: [Type; 17] = [
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

/// Deterministic pseudo-random data, roughly normal with outliers.
fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            let mut acc = 0.0f32;
            for _ in 0..4 {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                acc += ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5;
            }
            acc
        })
        .collect()
}

fn rmse_ratio(ty: Type, x: &[f32]) -> f32 {
    let mut q = vec![0u8; bytes_for(ty, x.len())];
    quantize_row_ref(ty, x, &mut q);
    let mut y = vec![0f32; x.len()];
    dequantize_row(ty, &q, &mut y);
    let err: f64 = x
        .iter()
        .zip(&y)
        .map(|(a, b)| ((a - b) as f64).powi(2))
        .sum();
    let sig: f64 = x.iter().map(|a| (*a as f64).powi(2)).sum();
    (err / sig).sqrt() as f32
}

#[test]
fn round_trip_error_per_type() {
    let x = data(4096, 7);
    // Relative RMS error bounds: about 2^-bits with margin for the scale overhead.
    let bounds = [
        (Type::F32, 0.0),
        (Type::F16, 1e-3),
        (Type::Bf16, 5e-3),
        (Type::Q8_0, 0.01),
        (Type::Q8_1, 0.01),
        (Type::Q8K, 0.01),
        (Type::Q6K, 0.03),
        (Type::Q5_0, 0.06),
        (Type::Q5_1, 0.06),
        (Type::Q5K, 0.06),
        (Type::Q4_0, 0.12),
        (Type::Q4_1, 0.12),
        (Type::Q4K, 0.12),
        (Type::Iq4Nl, 0.12),
        (Type::Q3K, 0.25),
        (Type::Q2K, 0.5),
    ];
    for (ty, bound) in bounds {
        let r = rmse_ratio(ty, &x);
        assert!(r <= bound, "{ty}: relative rmse {r} above {bound}");
        if ty.is_quantized() {
            assert!(r > 0.0, "{ty}: lossless on random data is suspicious");
        }
    }
}

#[test]
fn zeros_stay_zero_and_odd_values_do_not_panic() {
    for ty in ALL {
        let n = 512;
        let mut q = vec![0xAAu8; bytes_for(ty, n)];
        quantize_row_ref(ty, &vec![0.0; n], &mut q);
        let mut y = vec![1.0f32; n];
        dequantize_row(ty, &q, &mut y);
        assert!(y.iter().all(|v| *v == 0.0), "{ty}");

        let mut odd = data(n, 3);
        odd[1] = f32::NAN;
        odd[40] = f32::INFINITY;
        odd[300] = 1e30;
        odd[301] = -1e-40;
        quantize_row_ref(ty, &odd, &mut q);
        dequantize_row(ty, &q, &mut y);
        let mut q2 = vec![0u8; q.len()];
        quantize_chunk(ty, &odd, &mut q2, 0, 2, 256, Some(&[1.0; 256]));
    }
}

#[test]
fn q8_0_known_block() {
    // amax 127 gives d = 1 and quants equal to the inputs rounded half away from zero.
    let mut x = [0f32; 32];
    for (i, v) in x.iter_mut().enumerate() {
        *v = i as f32 * 4.0 - 0.5;
    }
    x[31] = 127.0;
    x[0] = -2.5;
    let mut q = [0u8; 34];
    quantize_row_q8_0_ref(&x, &mut q);
    assert_eq!(u16::from_le_bytes([q[0], q[1]]), 0x3C00);
    assert_eq!(q[2] as i8, -3); // roundf(-2.5) = -3
    assert_eq!(q[3] as i8, 4); // roundf(3.5) = 4
    assert_eq!(q[33] as i8, 127);
}

#[test]
fn q4_0_known_block() {
    // max is -8 => d = 1, id = 1; q = min(15, (int8)(x + 8.5)).
    let mut x = [0f32; 32];
    x[0] = -8.0;
    x[1] = 7.4;
    x[2] = -0.6;
    x[16] = 3.0;
    x[17] = 7.6; // 16.1 truncates to 16, clamped to 15
    let mut q = [0u8; 18];
    quantize_row_q4_0_ref(&x, &mut q);
    assert_eq!(u16::from_le_bytes([q[0], q[1]]), 0x3C00);
    assert_eq!(q[2], 11 << 4); // low nibble 0, high nibble 11
    assert_eq!(q[3], 15 | (15 << 4));
    assert_eq!(q[4], 7 | (8 << 4));
    let mut y = [0f32; 32];
    dequantize_row_q4_0(&q, &mut y);
    assert_eq!(y[0], -8.0);
    assert_eq!(y[17], 7.0);
}

#[test]
fn q4_1_and_q5_1_keep_min_and_range() {
    let x: Vec<f32> = (0..32).map(|i| 1.0 + i as f32 * 0.5).collect();
    for ty in [Type::Q4_1, Type::Q5_1] {
        let mut q = vec![0u8; bytes_for(ty, 32)];
        quantize_row_ref(ty, &x, &mut q);
        assert_eq!(
            fp16_to_fp32(u16::from_le_bytes([q[2], q[3]])),
            1.0,
            "{ty} min"
        );
        let mut y = vec![0f32; 32];
        dequantize_row(ty, &q, &mut y);
        assert!(
            (y[0] - 1.0).abs() < 1e-3 && (y[31] - 16.5).abs() < 0.02,
            "{ty}: {y:?}"
        );
    }
}

#[test]
fn q5_0_high_bits_land_in_qh() {
    // max -16 => d = 1: x = 15 maps to 31 (high bit set), x = -16 to 0.
    let mut x = [0f32; 32];
    x[0] = -16.0;
    x[5] = 15.0;
    x[20] = 15.0;
    let mut q = [0u8; 22];
    quantize_row_q5_0_ref(&x, &mut q);
    let qh = u32::from_le_bytes([q[2], q[3], q[4], q[5]]);
    assert_eq!(qh & (1 << 5), 1 << 5);
    assert_eq!(qh & (1 << 20), 1 << 20);
    assert_eq!(qh & 1, 0);
    let mut y = [0f32; 32];
    dequantize_row_q5_0(&q, &mut y);
    assert_eq!((y[0], y[5], y[20], y[1]), (-16.0, 15.0, 15.0, 0.0));
}

#[test]
fn q6_k_and_q8_k_on_integer_data() {
    // Q6_K of integers in -32..31: the searched scale stays near 1, so every value comes back
    // within half a step.
    let x: Vec<f32> = (0..256).map(|i| ((i * 7) % 64) as f32 - 32.0).collect();
    let mut q = vec![0u8; 210];
    quantize_row_q6_k_ref(&x, &mut q);
    let mut y = vec![0f32; 256];
    dequantize_row_q6_k(&q, &mut y);
    for i in 0..256 {
        assert!((x[i] - y[i]).abs() < 0.5, "{i}: {} vs {}", x[i], y[i]);
    }
    // Q8_K: scale is max/-127 exactly and the bsums add up.
    let mut q = vec![0u8; 292];
    quantize_row_q8_k_ref(&x, &mut q);
    let b = BlockQ8K::read(&q);
    assert_eq!(b.d, 1.0 / (-127.0f32 / -32.0));
    for j in 0..16 {
        let s: i32 = b.qs[16 * j..16 * j + 16].iter().map(|v| *v as i32).sum();
        assert_eq!(b.bsums[j] as i32, s);
    }
}

#[test]
fn blocks_round_trip_through_bytes() {
    let x = data(256, 11);
    for ty in [
        Type::Q2K,
        Type::Q3K,
        Type::Q4K,
        Type::Q5K,
        Type::Q6K,
        Type::Q8K,
    ] {
        let mut q = vec![0u8; bytes_for(ty, 256)];
        quantize_row_ref(ty, &x, &mut q);
        let mut again = vec![0u8; q.len()];
        match ty {
            Type::Q2K => BlockQ2K::read(&q).write(&mut again),
            Type::Q3K => BlockQ3K::read(&q).write(&mut again),
            Type::Q4K => BlockQ4K::read(&q).write(&mut again),
            Type::Q5K => BlockQ5K::read(&q).write(&mut again),
            Type::Q6K => BlockQ6K::read(&q).write(&mut again),
            _ => BlockQ8K::read(&q).write(&mut again),
        }
        assert_eq!(q, again, "{ty}");
    }
}

#[test]
fn chunk_matches_row_ref_without_imatrix() {
    let n_per_row = 512;
    let x = data(n_per_row * 6, 5);
    for ty in ALL {
        if ty == Type::Iq4Nl {
            continue; // its chunk quantizer searches more than the reference one
        }
        let row = bytes_for(ty, n_per_row);
        let mut whole = vec![0u8; row * 6];
        quantize_row_ref(ty, &x, &mut whole);
        let mut chunked = vec![0u8; row * 6];
        let a = quantize_chunk(ty, &x, &mut chunked, 0, 2, n_per_row, None);
        let b = quantize_chunk(ty, &x, &mut chunked, 2, 4, n_per_row, None);
        assert_eq!((a, b), (2 * row, 4 * row));
        assert_eq!(whole, chunked, "{ty}");
    }
}

#[test]
fn imatrix_quantizers_are_not_worse_with_flat_weights() {
    let n_per_row = 1024;
    let x = data(n_per_row * 4, 9);
    let ones = vec![1.0f32; n_per_row];
    for ty in [
        Type::Q4_0,
        Type::Q4_1,
        Type::Q5_0,
        Type::Q5_1,
        Type::Q2K,
        Type::Q3K,
        Type::Q4K,
        Type::Q5K,
        Type::Q6K,
        Type::Iq4Nl,
    ] {
        let row = bytes_for(ty, n_per_row);
        let mut q = vec![0u8; row * 4];
        quantize_chunk(ty, &x, &mut q, 0, 4, n_per_row, Some(&ones));
        let mut y = vec![0f32; x.len()];
        dequantize_row(ty, &q, &mut y);
        let err: f64 = x
            .iter()
            .zip(&y)
            .map(|(a, b)| ((a - b) as f64).powi(2))
            .sum();
        let sig: f64 = x.iter().map(|a| (*a as f64).powi(2)).sum();
        let with = (err / sig).sqrt() as f32;
        let without = rmse_ratio(ty, &x);
        assert!(
            with < without * 1.15,
            "{ty}: imatrix rmse {with} vs reference {without}"
        );
    }
}

#[test]
fn iq4_nl_chunk_searches_better_than_ref() {
    let x = data(32 * 64, 13);
    let mut a = vec![0u8; bytes_for(Type::Iq4Nl, x.len())];
    quantize_chunk(Type::Iq4Nl, &x, &mut a, 0, 1, x.len(), None);
    let mut y = vec![0f32; x.len()];
    dequantize_row(Type::Iq4Nl, &a, &mut y);
    let err: f32 = x.iter().zip(&y).map(|(p, q)| (p - q) * (p - q)).sum();
    let sig: f32 = x.iter().map(|p| p * p).sum();
    assert!((err / sig).sqrt() <= rmse_ratio(Type::Iq4Nl, &x) + 1e-6);
}

#[test]
#[should_panic(expected = "smaller than")]
fn short_destination_is_reported() {
    let mut q = vec![0u8; 10];
    quantize_row_ref(Type::Q4_0, &[0.0; 32], &mut q);
}
