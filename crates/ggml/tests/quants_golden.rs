//! The types ported from ggml-quants.c against bytes ggml itself wrote (see
//! tests/fixtures/quants/README.md): quantize_chunk must match byte for byte, and the
//! dequantized values bit for bit.

use ggml::quants::{bytes_for, dequantize_row, quantize_chunk};
use ggml::Type;

const NROWS: usize = 3;
const N_PER_ROW: usize = 512;

/// harness.c's data: the generator of the quants unit tests, plus a zero block and a
/// 1e-20-scaled block at the start of row 1.
fn data() -> Vec<f32> {
    let step = |s: u64| {
        s.wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407)
    };
    let mut s = step(7);
    let mut x: Vec<f32> = (0..NROWS * N_PER_ROW)
        .map(|_| {
            let mut acc = 0.0f32;
            for _ in 0..4 {
                s = step(s);
                acc += ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5;
            }
            acc
        })
        .collect();
    x[N_PER_ROW..N_PER_ROW + 32].fill(0.0);
    for v in &mut x[N_PER_ROW + 32..N_PER_ROW + 64] {
        *v *= 1e-20;
    }
    x
}

fn imatrix() -> Vec<f32> {
    (0..N_PER_ROW)
        .map(|i| 0.1 + ((i * 37) % 101) as f32 / 25.0)
        .collect()
}

fn check(ty: Type, file: &str, with_imatrix: bool) {
    let path = format!(
        "{}/tests/fixtures/quants/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let golden = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let x = data();
    let w = imatrix();
    let nq = bytes_for(ty, x.len());
    assert_eq!(golden.len(), nq + 4 * x.len(), "{file}: fixture size");
    let mut q = vec![0u8; nq];
    let written = quantize_chunk(
        ty,
        &x,
        &mut q,
        0,
        NROWS,
        N_PER_ROW,
        with_imatrix.then_some(&w[..]),
    );
    assert_eq!(written, nq);
    if let Some(i) = (0..nq).find(|&i| q[i] != golden[i]) {
        let b = i / ty.type_size();
        panic!(
            "{file}: byte {i} (block {b}, offset {}) is {:#04x}, ggml wrote {:#04x}",
            i % ty.type_size(),
            q[i],
            golden[i]
        );
    }
    let mut y = vec![0f32; x.len()];
    dequantize_row(ty, &golden[..nq], &mut y);
    for (i, c) in golden[nq..].chunks_exact(4).enumerate() {
        let want = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        assert_eq!(
            y[i].to_bits(),
            want.to_bits(),
            "{file}: value {i} dequantizes to {}, ggml gives {want}",
            y[i]
        );
    }
}

#[test]
fn tq1_0_matches_ggml() {
    check(Type::Tq1_0, "tq1_0.bin", false);
}

#[test]
fn tq2_0_matches_ggml() {
    check(Type::Tq2_0, "tq2_0.bin", false);
}

#[test]
fn mxfp4_matches_ggml() {
    check(Type::Mxfp4, "mxfp4.bin", false);
}

#[test]
fn nvfp4_matches_ggml() {
    check(Type::Nvfp4, "nvfp4.bin", false);
}

#[test]
fn q1_0_matches_ggml() {
    check(Type::Q1_0, "q1_0.bin", false);
}

#[test]
fn q2_0_matches_ggml() {
    check(Type::Q2_0, "q2_0.bin", false);
}

#[test]
fn iq4_xs_matches_ggml() {
    check(Type::Iq4Xs, "iq4_xs.bin", false);
}

#[test]
fn iq4_xs_with_imatrix_matches_ggml() {
    check(Type::Iq4Xs, "iq4_xs-imatrix.bin", true);
}

#[test]
fn iq2_xxs_with_imatrix_matches_ggml() {
    check(Type::Iq2Xxs, "iq2_xxs-imatrix.bin", true);
}

#[test]
fn iq2_xs_with_imatrix_matches_ggml() {
    check(Type::Iq2Xs, "iq2_xs-imatrix.bin", true);
}

#[test]
fn iq2_s_matches_ggml() {
    check(Type::Iq2S, "iq2_s.bin", false);
    check(Type::Iq2S, "iq2_s-imatrix.bin", true);
}

#[test]
fn iq3_xxs_matches_ggml() {
    check(Type::Iq3Xxs, "iq3_xxs.bin", false);
    check(Type::Iq3Xxs, "iq3_xxs-imatrix.bin", true);
}

#[test]
fn iq3_s_matches_ggml() {
    check(Type::Iq3S, "iq3_s.bin", false);
    check(Type::Iq3S, "iq3_s-imatrix.bin", true);
}

#[test]
fn iq1_s_with_imatrix_matches_ggml() {
    check(Type::Iq1S, "iq1_s-imatrix.bin", true);
}

#[test]
fn iq1_m_matches_ggml() {
    check(Type::Iq1M, "iq1_m.bin", false);
    check(Type::Iq1M, "iq1_m-imatrix.bin", true);
}
