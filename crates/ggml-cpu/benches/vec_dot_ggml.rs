//! `cargo bench -p ggml-cpu --bench vec_dot_ggml`: our dot products of the IQ, TQ, FP4 and
//! Q1_0/Q2_0 types beside llama.cpp's own (`ggml_vec_dot_*` of its CPU build, called by
//! scripts/vec-dot-ref.c on the same bytes), one thread, timed in the same run: for each type
//! ours, then llama.cpp's, over a ROWS x 4096 weight (every row dotted with one activation
//! row, the mat-vec of one token; llama.cpp runs these types through the same kernel for
//! batches too). Prints ns per row and the ratio (llama.cpp's time / ours: above 1 is faster).
//!
//! `LLAMACPP_LIB` is the folder holding libggml-cpu.so and libggml-base.so (default
//! /work/llamacpp-build/bin); `VEC_DOT_ROWS` the number of weight rows (default 512);
//! `VEC_DOT_N` the row length (default 4096, a multiple of 256: short rows show the per-row
//! cost, as the 256-wide output matrix of the reference model does); `VEC_DOT_TYPES` a comma
//! list of the types to run (ggml's names, e.g. `q6_K,q4_K`; default the IQ, TQ, FP4 and
//! Q1_0/Q2_0 ones; `all` adds the legacy, K-quant and float types).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use ggml::quants::{bytes_for, quantize_chunk, requires_imatrix};
use ggml::Type;
use ggml_cpu::dot::{traits_for, SimdLevel};

/// The types this bench runs unless VEC_DOT_TYPES says otherwise.
const DEFAULT_TYPES: usize = 14;

const TYPES: [(Type, &str); 28] = [
    (Type::Iq1S, "iq1_s_q8_K"),
    (Type::Iq1M, "iq1_m_q8_K"),
    (Type::Iq2Xxs, "iq2_xxs_q8_K"),
    (Type::Iq2Xs, "iq2_xs_q8_K"),
    (Type::Iq2S, "iq2_s_q8_K"),
    (Type::Iq3Xxs, "iq3_xxs_q8_K"),
    (Type::Iq3S, "iq3_s_q8_K"),
    (Type::Iq4Xs, "iq4_xs_q8_K"),
    (Type::Tq1_0, "tq1_0_q8_K"),
    (Type::Tq2_0, "tq2_0_q8_K"),
    (Type::Mxfp4, "mxfp4_q8_0"),
    (Type::Nvfp4, "nvfp4_q8_0"),
    (Type::Q1_0, "q1_0_q8_0"),
    (Type::Q2_0, "q2_0_q8_0"),
    (Type::Q4_0, "q4_0_q8_0"),
    (Type::Q4_1, "q4_1_q8_1"),
    (Type::Q5_0, "q5_0_q8_0"),
    (Type::Q5_1, "q5_1_q8_1"),
    (Type::Q8_0, "q8_0_q8_0"),
    (Type::Iq4Nl, "iq4_nl_q8_0"),
    (Type::Q2K, "q2_K_q8_K"),
    (Type::Q3K, "q3_K_q8_K"),
    (Type::Q4K, "q4_K_q8_K"),
    (Type::Q5K, "q5_K_q8_K"),
    (Type::Q6K, "q6_K_q8_K"),
    (Type::F32, "f32"),
    (Type::F16, "f16"),
    (Type::Bf16, "bf16"),
];

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

/// ns per row: the best of 3 runs of at least 0.2 s over all rows (as the C side does).
fn time_rows(f: fn(usize, &[u8], &[u8]) -> f32, n: usize, w: &[u8], rows: usize, y: &[u8]) -> f64 {
    let row = w.len() / rows;
    let mut best = f64::MAX;
    let mut sink = 0.0f32;
    for _ in 0..3 {
        let start = Instant::now();
        let mut passes = 0u32;
        while passes == 0 || start.elapsed() < Duration::from_millis(200) {
            for r in 0..rows {
                sink += f(n, &w[r * row..(r + 1) * row], y);
            }
            passes += 1;
        }
        best = best.min(start.elapsed().as_secs_f64() / passes as f64);
    }
    std::hint::black_box(sink);
    best / rows as f64 * 1e9
}

/// The case file of scripts/vec-dot-ref.c: name, n, x, y, each length-prefixed.
fn case_file(name: &str, n: usize, x: &[u8], y: &[u8]) -> Vec<u8> {
    let mut buf = Vec::new();
    for part in [name.as_bytes(), &(n as u32).to_le_bytes(), x, y] {
        buf.extend_from_slice(&(part.len() as u32).to_le_bytes());
        buf.extend_from_slice(part);
    }
    buf
}

fn main() {
    let rows: usize = std::env::var("VEC_DOT_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512);
    let n: usize = std::env::var("VEC_DOT_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4096);
    if n == 0 || !n.is_multiple_of(256) {
        eprintln!("error: VEC_DOT_N must be a positive multiple of 256, not {n}");
        std::process::exit(1);
    }
    let wanted = std::env::var("VEC_DOT_TYPES").ok();
    let picked: Vec<(Type, &str)> = match wanted.as_deref() {
        None => TYPES[..DEFAULT_TYPES].to_vec(),
        Some("all") => TYPES.to_vec(),
        Some(list) => {
            let names: Vec<&str> = list.split(',').collect();
            let p: Vec<_> = TYPES
                .iter()
                .filter(|(ty, _)| names.contains(&ty.to_string().as_str()))
                .copied()
                .collect();
            if p.len() != names.len() {
                eprintln!("error: VEC_DOT_TYPES names a type this bench does not have: {list}");
                std::process::exit(1);
            }
            p
        }
    };
    let lib = std::env::var("LLAMACPP_LIB").unwrap_or_else(|_| "/work/llamacpp-build/bin".into());
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let tmp = std::env::temp_dir().join(format!("vec-dot-ggml-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let exe = tmp.join("vec-dot-ref");
    let cc = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(root.join("scripts/vec-dot-ref.c"))
        .arg(format!("-L{lib}"))
        .args(["-lggml-cpu", "-lggml-base"])
        .status();
    if !cc.is_ok_and(|s| s.success()) {
        eprintln!("error: cannot build scripts/vec-dot-ref.c against {lib} (set LLAMACPP_LIB)");
        std::process::exit(1);
    }
    let level = SimdLevel::detect();
    println!("vec_dot over a {rows}x{n} weight, 1 thread, ours at SIMD level {level:?} vs llama.cpp ({lib})");
    println!(
        "{:<8} {:>12} {:>14} {:>8}",
        "type", "ours ns/row", "llama.cpp ns", "ratio"
    );
    let x = data(n * rows, 1);
    let a = data(n, 2);
    for (ty, name) in picked {
        let tr = traits_for(level, ty).unwrap();
        let mut w = vec![0u8; bytes_for(ty, n * rows)];
        // the types ggml quantizes only with an importance matrix get a flat one
        let ones = vec![1.0f32; n];
        let imat = requires_imatrix(ty).then_some(&ones[..]);
        quantize_chunk(ty, &x, &mut w, 0, rows, n, imat);
        let mut y = vec![0u8; bytes_for(tr.vec_dot_type, n)];
        (tr.from_float)(&a, &mut y);

        let ours = time_rows(tr.vec_dot, n, &w, rows, &y);
        let file = tmp.join("case.bin");
        std::fs::write(&file, case_file(name, n, &w, &y)).unwrap();
        let out = Command::new(&exe)
            .arg("--bench")
            .arg(rows.to_string())
            .arg(&file)
            .env("LD_LIBRARY_PATH", &lib)
            .output()
            .expect("run vec-dot-ref");
        let text = String::from_utf8_lossy(&out.stdout);
        let theirs: f64 = text
            .split_whitespace()
            .nth(2)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| {
                panic!(
                    "vec-dot-ref: {text}{}",
                    String::from_utf8_lossy(&out.stderr)
                )
            });
        println!(
            "{:<8} {:>12.1} {:>14.1} {:>8.2}",
            ty.to_string(),
            ours,
            theirs,
            theirs / ours
        );
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
