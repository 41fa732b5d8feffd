//! `cargo bench -p ggml-cpu --bench vec_dot`: one 4096x4096 matrix-vector product per type
//! (every weight row dotted with one activation row), single thread, with the scalar
//! kernels and with the SIMD level this CPU selects. Prints GFLOP/s, weight GB/s and the
//! SIMD/scalar ratio. `VEC_DOT_N=1024` shrinks the matrix for a quick run;
//! `VEC_DOT_LEVEL=avx2` picks a lower SIMD level than the CPU's best.

use std::time::{Duration, Instant};

use ggml::quants::{bytes_for, quantize_row_ref};
use ggml::Type;
use ggml_cpu::dot::{traits_for, CpuTypeTraits, SimdLevel};

fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect()
}

/// Seconds per full pass over the matrix (best of several runs of at least 0.2 s).
fn time_pass(tr: &CpuTypeTraits, n: usize, rows: usize, w: &[u8], y: &[u8]) -> f64 {
    let row = w.len() / rows;
    let mut best = f64::MAX;
    let mut sink = 0.0f32;
    for _ in 0..3 {
        let start = Instant::now();
        let mut passes = 0;
        while start.elapsed() < Duration::from_millis(200) || passes == 0 {
            for r in 0..rows {
                sink += (tr.vec_dot)(n, &w[r * row..(r + 1) * row], y);
            }
            passes += 1;
        }
        best = best.min(start.elapsed().as_secs_f64() / passes as f64);
    }
    std::hint::black_box(sink);
    best
}

fn main() {
    let n: usize = std::env::var("VEC_DOT_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4096);
    let rows = n;
    // VEC_DOT_LEVEL=avx2 (or scalar, avx512, neon) compares a lower level on the same CPU.
    let level = match std::env::var("VEC_DOT_LEVEL").ok().as_deref() {
        Some("avx2") => SimdLevel::Avx2,
        Some("avx512") => SimdLevel::Avx512,
        Some("neon") => SimdLevel::Neon,
        Some("scalar") => SimdLevel::Scalar,
        _ => SimdLevel::detect(),
    };
    println!("vec_dot over a {rows}x{n} weight, 1 thread, SIMD level {level:?}");
    println!(
        "{:<7} {:>12} {:>10} {:>12} {:>10} {:>8}",
        "type", "scalar GF/s", "GB/s", "SIMD GF/s", "GB/s", "ratio"
    );
    let x = data(n * rows, 1);
    let a = data(n, 2);
    for ty in [
        Type::F32,
        Type::F16,
        Type::Bf16,
        Type::Q8_0,
        Type::Q4_0,
        Type::Q4_1,
        Type::Q5_0,
        Type::Q5_1,
        Type::Iq4Nl,
        Type::Q2K,
        Type::Q3K,
        Type::Q4K,
        Type::Q5K,
        Type::Q6K,
    ] {
        let mut w = vec![0u8; bytes_for(ty, n * rows)];
        quantize_row_ref(ty, &x, &mut w);
        let slow = traits_for(SimdLevel::Scalar, ty).unwrap();
        let fast = traits_for(level, ty).unwrap();
        let mut y = vec![0u8; bytes_for(slow.vec_dot_type, n)];
        (slow.from_float)(&a, &mut y);
        let flops = 2.0 * (n * rows) as f64;
        let bytes = w.len() as f64;
        let ts = time_pass(&slow, n, rows, &w, &y);
        let tf = time_pass(&fast, n, rows, &w, &y);
        println!(
            "{:<7} {:>12.2} {:>10.2} {:>12.2} {:>10.2} {:>7.1}x",
            ty.name(),
            flops / ts / 1e9,
            bytes / ts / 1e9,
            flops / tf / 1e9,
            bytes / tf / 1e9,
            ts / tf
        );
    }
}
