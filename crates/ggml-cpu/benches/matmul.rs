//! MUL_MAT through the CPU backend at generation shape (4096 x 4096 weight times 1 column)
//! and prompt shape (times 512 columns), per weight type: GFLOP/s and GB/s of weight reads,
//! with the ratio to llama.cpp's throughput on the reference machine where one can be derived.
//!
//! `cargo bench -p ggml-cpu --bench matmul` (env: BENCH_THREADS, default all cores;
//! BENCH_SIZE, default 4096; BENCH_TYPES, e.g. "q4_0,q8_0"; BENCH_COLS, default "1,512").

use ggml::backend::{tensor_set_f32, Status};
use ggml::tensor::TensorData;
use ggml::{Context, Graph, Type};
use std::time::Instant;

/// llama.cpp on the reference machine (shared/reference/bench.md, 1.1B-shape model, 2
/// threads): tg128 x model bytes = weight bytes streamed per second; pp512 x 2 x 1.1e9 =
/// FLOP per second. Whole-model figures, so only a rough yardstick for one matmul.
fn llama_cpp_reference(ty: Type) -> Option<(f64, f64)> {
    let gib = 1024.0 * 1024.0 * 1024.0;
    let (tg, size, pp) = match ty {
        Type::Q4_0 => (21.55, 606.53 / 1024.0 * gib, 84.63),
        Type::Q8_0 => (8.53, 1.09 * gib, 56.95),
        Type::F16 => (6.64, 2.05 * gib, 53.27),
        _ => return None,
    };
    Some((tg * size / 1e9, pp * 2.0 * 1.1e9 / 1e9))
}

/// CPU seconds this process has used (user + system, from /proc/self/stat at 100 ticks per
/// second): on a shared machine wall time also counts other processes' turns.
fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = after
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    // fields after the command: state is skipped by the parse; utime, stime are 14, 15 overall
    f.get(10).copied().unwrap_or(0.0) / 100.0 + f.get(11).copied().unwrap_or(0.0) / 100.0
}

/// CPU seconds of the calling thread (which computes the whole graph at one thread): with one
/// thread this is the kernels' own time, whatever else the machine runs.
fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn run(ty: Type, k: i64, m: i64, n: i64, threads: usize, iters: usize) -> (f64, f64, f64, usize) {
    let mut ctx = Context::new();
    let w = ctx.new_tensor_2d(ty, k, m);
    let x = ctx.new_tensor_2d(Type::F32, k, n);
    let y = ctx.mul_mat(w, x);
    let mut g = Graph::new(ctx);
    g.build_forward_expand(y);
    let dev = ggml_cpu::device();
    let buft = dev.buffer_type();
    let sizes: Vec<usize> = [w, x, y]
        .iter()
        .map(|&t| g.ctx[t].nbytes().div_ceil(64) * 64)
        .collect();
    let buf = buft.alloc_buffer(sizes.iter().sum()).expect("alloc");
    let mut off = 0;
    for (&t, &s) in [w, x, y].iter().zip(&sizes) {
        g.ctx[t].data = Some(TensorData {
            buffer: buf.clone(),
            addr: buf.base() + off,
        });
        off += s;
    }
    // weights: quantized random rows
    let row: Vec<f32> = (0..k)
        .map(|i| ((i * 7919 % 1000) as f32 / 500.0) - 1.0)
        .collect();
    let mut q = vec![0u8; ty.row_size(k)];
    ggml::quants::quantize_row_ref(ty, &row, &mut q);
    for r in 0..m as usize {
        ggml::backend::set_tensor(&g.ctx[w], &q, r * q.len()).unwrap();
    }
    let xs: Vec<f32> = (0..k * n).map(|i| ((i % 97) as f32 / 48.0) - 1.0).collect();
    tensor_set_f32(&g.ctx[x], &xs).unwrap();
    let mut backend = ggml_cpu::CpuBackend::new(dev);
    backend.set_threads(threads);
    assert_eq!(backend.compute(&g.ctx, &g.nodes), Status::Success);
    let (t0, c0, tc0) = (Instant::now(), cpu_secs(), thread_cpu_secs());
    for _ in 0..iters {
        backend.compute(&g.ctx, &g.nodes);
    }
    let wall = t0.elapsed().as_secs_f64() / iters as f64;
    let cpu = (cpu_secs() - c0) / iters as f64;
    let tcpu = (thread_cpu_secs() - tc0) / iters as f64;
    (wall, cpu, tcpu, g.ctx[w].nbytes())
}

/// FLASH_ATTN_EXT at generation shape: one query per head, f16 K and V.
fn attention(threads: usize, n_kv: i64) -> f64 {
    let (d, h, hkv) = (128i64, 32i64, 8i64);
    let mut ctx = Context::new();
    let q = ctx.new_tensor_3d(Type::F32, d, 1, h);
    let k = ctx.new_tensor_3d(Type::F16, d, n_kv, hkv);
    let v = ctx.new_tensor_3d(Type::F16, d, n_kv, hkv);
    let m = ctx.new_tensor_2d(Type::F16, n_kv, 1);
    let out = ctx.flash_attn_ext(q, k, v, Some(m), 0.088, 0.0, 0.0);
    let mut g = Graph::new(ctx);
    g.build_forward_expand(out);
    let dev = ggml_cpu::device();
    let ts = [q, k, v, m, out];
    let sizes: Vec<usize> = ts
        .iter()
        .map(|&t| g.ctx[t].nbytes().div_ceil(64) * 64)
        .collect();
    let buf = dev
        .buffer_type()
        .alloc_buffer(sizes.iter().sum())
        .expect("alloc");
    let mut off = 0;
    for (&t, &s) in ts.iter().zip(&sizes) {
        g.ctx[t].data = Some(TensorData {
            buffer: buf.clone(),
            addr: buf.base() + off,
        });
        off += s;
    }
    let mut backend = ggml_cpu::CpuBackend::new(dev);
    backend.set_threads(threads);
    assert_eq!(backend.compute(&g.ctx, &g.nodes), Status::Success);
    let iters = 10;
    let t0 = Instant::now();
    for _ in 0..iters {
        backend.compute(&g.ctx, &g.nodes);
    }
    t0.elapsed().as_secs_f64() / iters as f64
}

fn main() {
    let threads = std::env::var("BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(ggml_cpu::default_n_threads);
    let size: i64 = std::env::var("BENCH_SIZE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4096);
    let types: Vec<Type> = match std::env::var("BENCH_TYPES") {
        Ok(v) => v.split(',').filter_map(Type::from_name).collect(),
        Err(_) => vec![
            Type::F32,
            Type::F16,
            Type::Q8_0,
            Type::Q4_0,
            Type::Q4K,
            Type::Q6K,
        ],
    };
    let cols: Vec<i64> = std::env::var("BENCH_COLS")
        .unwrap_or_else(|_| "1,512".into())
        .split(',')
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    println!("MUL_MAT {size} x {size} weight, {threads} threads");
    println!("(rates from wall time; cpu ms far below ms x threads means the machine is busy)");
    println!(
        "{:<6} {:>6} {:>10} {:>10} {:>12} {:>10} {:>10} {:>24}",
        "type", "n", "ms", "cpu ms", "thread0 ms", "GFLOP/s", "GB/s", "llama.cpp (whole model)"
    );
    for ty in types {
        for &n in &cols {
            let iters = if n == 1 { 200 } else { 3 };
            let (secs, cpu, tcpu, wbytes) = run(ty, size, size, n, threads, iters);
            let gflops = 2.0 * (size * size * n) as f64 / secs / 1e9;
            let gbs = wbytes as f64 / secs / 1e9;
            let reference = match (llama_cpp_reference(ty), n) {
                (Some((gb, _)), 1) => format!("{gb:.1} GB/s, ratio {:.2}", gbs / gb),
                (Some((_, gf)), _) => format!("{gf:.0} GFLOP/s, ratio {:.2}", gflops / gf),
                (None, _) => "-".to_string(),
            };
            println!(
                "{:<6} {:>6} {:>10.3} {:>10.3} {:>12.3} {:>10.1} {:>10.2} {:>24}",
                ty.name(),
                n,
                secs * 1e3,
                cpu * 1e3,
                tcpu * 1e3,
                gflops,
                gbs,
                reference
            );
        }
    }
    let n_kv = 4096;
    let secs = attention(threads, n_kv);
    let kv_bytes = 2.0 * (128 * n_kv * 8 * 2) as f64;
    println!(
        "FLASH_ATTN_EXT d=128 h=32 h_kv=8 n_kv={n_kv} f16 K/V, 1 query: {:.3} ms, {:.2} GB/s of K/V",
        secs * 1e3,
        kv_bytes / secs / 1e9
    );
}
