//! Our NEON dot products against llama.cpp's own aarch64 ones: random raw blocks fed to
//! ggml's `ggml_vec_dot_*` compiled for armv8-a (its vdotq emulation) and for
//! armv8.2-a+dotprod (SDOT), run under qemu-aarch64, whose f32 results are recorded in
//! tests/fixtures/vec-dot-neon/ (see its README for the command). The NEON kernels must give
//! the armv8-a bits, the SDOT ones the dotprod bits. Run by scripts/test-aarch64.

use super::test_rows::{activations, floats, put_f16, write_case_file, Case, Rng};
use super::*;
use ggml::quants::fp32_to_fp16;
use std::fmt::Write as _;

/// The types, ggml's kernel name, block elements, block bytes and the offsets of the fp16
/// scale fields that get finite values (every other byte is random).
const CASE_TYPES: [(Type, &str, usize, usize, &[usize]); 28] = [
    (Type::F32, "f32", 1, 4, &[]),
    (Type::F16, "f16", 1, 2, &[]),
    (Type::Bf16, "bf16", 1, 2, &[]),
    (Type::Q4_0, "q4_0_q8_0", 32, 18, &[0]),
    (Type::Q4_1, "q4_1_q8_1", 32, 20, &[0, 2]),
    (Type::Q5_0, "q5_0_q8_0", 32, 22, &[0]),
    (Type::Q5_1, "q5_1_q8_1", 32, 24, &[0, 2]),
    (Type::Q8_0, "q8_0_q8_0", 32, 34, &[0]),
    (Type::Iq4Nl, "iq4_nl_q8_0", 32, 18, &[0]),
    (Type::Q2K, "q2_K_q8_K", 256, 84, &[80, 82]),
    (Type::Q3K, "q3_K_q8_K", 256, 110, &[108]),
    (Type::Q4K, "q4_K_q8_K", 256, 144, &[0, 2]),
    (Type::Q5K, "q5_K_q8_K", 256, 176, &[0, 2]),
    (Type::Q6K, "q6_K_q8_K", 256, 210, &[208]),
    (Type::Iq4Xs, "iq4_xs_q8_K", 256, 136, &[0]),
    (Type::Tq1_0, "tq1_0_q8_K", 256, 54, &[52]),
    (Type::Tq2_0, "tq2_0_q8_K", 256, 66, &[64]),
    (Type::Q1_0, "q1_0_q8_0", 128, 18, &[0]),
    (Type::Q2_0, "q2_0_q8_0", 64, 18, &[0]),
    (Type::Iq2Xxs, "iq2_xxs_q8_K", 256, 66, &[0]),
    (Type::Iq2Xs, "iq2_xs_q8_K", 256, 74, &[0]),
    (Type::Iq2S, "iq2_s_q8_K", 256, 82, &[0]),
    (Type::Iq3Xxs, "iq3_xxs_q8_K", 256, 98, &[0]),
    (Type::Iq3S, "iq3_s_q8_K", 256, 110, &[0]),
    (Type::Iq1S, "iq1_s_q8_K", 256, 50, &[0]),
    // (its fp16 scale is spread over the top nibbles of its scale words)
    (Type::Iq1M, "iq1_m_q8_K", 256, 56, &[]),
    // (their scale bytes are set apart: an E8M0 exponent, four UE4M3 scales)
    (Type::Mxfp4, "mxfp4_q8_0", 32, 17, &[]),
    (Type::Nvfp4, "nvfp4_q8_0", 64, 36, &[]),
];

/// An even and an odd count of 32-element blocks (ggml's pair loop and its tail); the float
/// types get 7 more elements in the second (the loop after ggml's 16-wide one).
const LENGTHS: [usize; 2] = [4096, 4096 + 256 + 32];

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for (ti, &(ty, name, qk, bs, scales)) in CASE_TYPES.iter().enumerate() {
        for (li, &len) in LENGTHS.iter().enumerate() {
            let n = if qk == 1 { len + 7 * li } else { len / qk * qk };
            let seed = 2000 + 10 * ti as u64 + li as u64;
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            if qk == 1 {
                let (x, y) = (floats(ty, n, &mut rng), floats(ty, n, &mut rng));
                out.push(Case {
                    ty,
                    name,
                    n,
                    seed,
                    x,
                    y,
                });
                continue;
            }
            let mut x: Vec<u8> = (0..n / qk * bs).map(|_| rng.byte()).collect();
            for b in x.chunks_exact_mut(bs) {
                for &o in scales {
                    put_f16(&mut b[o..o + 2], rng.range(0.002, 0.05));
                }
                match ty {
                    Type::Iq1M => {
                        let d = fp32_to_fp16(rng.range(0.002, 0.05));
                        for j in 0..4 {
                            let o = 48 + 2 * j;
                            let w = u16::from_le_bytes([b[o], b[o + 1]]) & 0x0fff;
                            let w = w | (((d >> (4 * j)) & 0xf) << 12);
                            b[o..o + 2].copy_from_slice(&w.to_le_bytes());
                        }
                    }
                    Type::Mxfp4 => b[0] = 118 + rng.byte() % 12,
                    Type::Nvfp4 => b[..4]
                        .iter_mut()
                        .for_each(|v| *v = 0x20 + rng.byte() % 0x30),
                    _ => {}
                }
            }
            let vdt = scalar_traits(ty).unwrap().vec_dot_type;
            let y = activations(vdt, n, &mut rng);
            out.push(Case {
                ty,
                name,
                n,
                seed,
                x,
                y,
            });
        }
    }
    out
}

/// Writes the cases for scripts/vec-dot-ref-neon.c: per case the name, n, x and y, each
/// length-prefixed (u32 little-endian).
#[test]
#[ignore = "records the inputs of the llama.cpp fixture; run by hand, see its README"]
fn write_cases() {
    write_case_file(&cases());
}

/// (name, n, bits) from one fixture file.
fn recorded(file: &str) -> Vec<(String, usize, u32)> {
    let path = format!(
        "{}/../../tests/fixtures/vec-dot-neon/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("fixture {path}: {e}"));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let bits = u32::from_str_radix(f[2].trim_start_matches("0x"), 16).unwrap();
            (f[0].to_string(), f[1].parse().unwrap(), bits)
        })
        .collect()
}

fn compare(level: SimdLevel, file: &str) {
    let rec = recorded(file);
    let mut bad = String::new();
    let mut checked = 0;
    for c in cases() {
        let r = rec
            .iter()
            .find(|r| r.0 == c.name && r.1 == c.n)
            .unwrap_or_else(|| panic!("no recorded result for {} n={}", c.name, c.n));
        let got = (traits_for(level, c.ty).unwrap().vec_dot)(c.n, &c.x, &c.y);
        let want = f32::from_bits(r.2);
        checked += 1;
        if got.to_bits() != want.to_bits() {
            let _ = writeln!(
                bad,
                "{level:?} {} n={} seed={}: {got:e} vs ggml {want:e}",
                c.name, c.n, c.seed
            );
        }
    }
    assert_eq!(checked, rec.len(), "every recorded case is checked");
    assert!(bad.is_empty(), "results differ from llama.cpp:\n{bad}");
}

#[test]
fn neon_kernels_give_ggml_neon_bits() {
    compare(SimdLevel::Neon, "results-armv8-a.txt");
}

#[test]
fn sdot_kernels_give_ggml_dotprod_bits() {
    if !SimdLevel::available().contains(&SimdLevel::NeonDotprod) {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true")
                || std::env::var("AARCH64_EXPECT_DOTPROD").as_deref() == Ok("0"),
            "CI=true: this CPU has no FEAT_DotProd"
        );
        eprintln!("skipped: this CPU has no FEAT_DotProd (qemu -cpu max has it)");
        return;
    }
    compare(SimdLevel::NeonDotprod, "results-dotprod.txt");
}

/// scripts/test-aarch64 runs the tests under CPUs with and without FEAT_DotProd and says
/// which one through AARCH64_EXPECT_DOTPROD: the dispatch must follow the detection.
#[test]
fn dispatch_follows_the_detected_cpu() {
    let has = SimdLevel::available().contains(&SimdLevel::NeonDotprod);
    assert_eq!(
        SimdLevel::detect(),
        if has {
            SimdLevel::NeonDotprod
        } else {
            SimdLevel::Neon
        }
    );
    match std::env::var("AARCH64_EXPECT_DOTPROD").as_deref() {
        Ok("1") => assert!(has, "the CPU has FEAT_DotProd but it was not detected"),
        Ok("0") => assert!(!has, "FEAT_DotProd detected on a CPU without it"),
        _ => {}
    }
}
