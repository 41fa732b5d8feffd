//! Our dot products against llama.cpp's own: random raw blocks (every grid index, sign and
//! scale pattern, not only what a quantizer emits) and random F32/F16/BF16 rows fed to ggml's
//! `ggml_vec_dot_*` and `ggml_vec_dot_*_generic`, whose f32 results are recorded in
//! tests/fixtures/vec-dot-avx2/results.txt (ggml's AVX2 build, the first `AVX2_FIXTURE_TYPES`
//! types) and tests/fixtures/vec-dot-avx512/results.txt (its AVX-512 build, every type); see
//! their READMEs for the commands. The AVX2 kernels must give ggml's AVX2 bits, the AVX-512
//! ones its AVX-512 bits, the scalar ones ggml's generic bits.

use super::test_rows::{activations, floats, put_f16, write_case_file, Case, Rng};
use super::*;
use ggml::quants::fp32_to_fp16;
use std::fmt::Write as _;

/// The types these cases cover, with ggml's name, the block size in elements and bytes. The
/// AVX2 fixture was recorded for the first `AVX2_FIXTURE_TYPES` (the others came later, with
/// the AVX-512 fixture); new types go at the end, so that every case keeps its seed. Q2_0 has
/// only ggml's generic code on x86.
pub(super) const CASE_TYPES: [(Type, &str, usize, usize); 28] = [
    (Type::Iq2Xxs, "iq2_xxs_q8_K", 256, 66),
    (Type::Iq2Xs, "iq2_xs_q8_K", 256, 74),
    (Type::Iq2S, "iq2_s_q8_K", 256, 82),
    (Type::Iq3Xxs, "iq3_xxs_q8_K", 256, 98),
    (Type::Iq3S, "iq3_s_q8_K", 256, 110),
    (Type::Iq1S, "iq1_s_q8_K", 256, 50),
    (Type::Iq1M, "iq1_m_q8_K", 256, 56),
    (Type::Iq4Xs, "iq4_xs_q8_K", 256, 136),
    (Type::Tq1_0, "tq1_0_q8_K", 256, 54),
    (Type::Tq2_0, "tq2_0_q8_K", 256, 66),
    (Type::Mxfp4, "mxfp4_q8_0", 32, 17),
    (Type::Nvfp4, "nvfp4_q8_0", 64, 36),
    (Type::Q1_0, "q1_0_q8_0", 128, 18),
    (Type::Q2_0, "q2_0_q8_0", 64, 18),
    (Type::F32, "f32", 1, 4),
    (Type::F16, "f16", 1, 2),
    (Type::Bf16, "bf16", 1, 2),
    (Type::Q4_0, "q4_0_q8_0", 32, 18),
    (Type::Q4_1, "q4_1_q8_1", 32, 20),
    (Type::Q5_0, "q5_0_q8_0", 32, 22),
    (Type::Q5_1, "q5_1_q8_1", 32, 24),
    (Type::Q8_0, "q8_0_q8_0", 32, 34),
    (Type::Iq4Nl, "iq4_nl_q8_0", 32, 18),
    (Type::Q2K, "q2_K_q8_K", 256, 84),
    (Type::Q3K, "q3_K_q8_K", 256, 110),
    (Type::Q4K, "q4_K_q8_K", 256, 144),
    (Type::Q5K, "q5_K_q8_K", 256, 176),
    (Type::Q6K, "q6_K_q8_K", 256, 210),
];

/// How many of `CASE_TYPES` (the first ones) tests/fixtures/vec-dot-avx2 has generic bits
/// for: the rows of the types after them were recorded from another build of the same source
/// (see the fixture's README), whose AVX2 kernels give the first build's bits on every type
/// but whose generic code GCC contracted differently.
const AVX2_GENERIC_TYPES: usize = 14;

/// Element counts of the cases: many blocks, and an odd count of MXFP4 blocks (its tail); the
/// float types get 7 more elements in the second (the scalar loop after ggml's SIMD one).
const LENGTHS: [usize; 2] = [4096, 2848 + 256 * 8];

/// Random weight blocks: random bytes with every scale field set to a finite, moderate value.
fn weights(ty: Type, blocks: usize, bs: usize, rng: &mut Rng) -> Vec<u8> {
    let mut x: Vec<u8> = (0..blocks * bs).map(|_| rng.byte()).collect();
    for b in x.chunks_exact_mut(bs) {
        match ty {
            Type::Iq1M => {
                // the fp16 scale is spread over the top nibbles of the four u16 scale words
                let d = fp32_to_fp16(rng.range(0.002, 0.05));
                for j in 0..4 {
                    let o = 48 + 2 * j;
                    let w = u16::from_le_bytes([b[o], b[o + 1]]) & 0x0fff;
                    let w = w | (((d >> (4 * j)) & 0xf) << 12);
                    b[o..o + 2].copy_from_slice(&w.to_le_bytes());
                }
            }
            Type::Tq1_0 => put_f16(&mut b[52..54], rng.range(0.002, 0.05)),
            Type::Tq2_0 => put_f16(&mut b[64..66], rng.range(0.002, 0.05)),
            Type::Mxfp4 => b[0] = 118 + rng.byte() % 12,
            Type::Nvfp4 => b[..4]
                .iter_mut()
                .for_each(|v| *v = 0x20 + rng.byte() % 0x30),
            // two fp16 scales (d and m, or d and dmin)
            Type::Q4_1 | Type::Q5_1 | Type::Q4K | Type::Q5K | Type::Q2K => {
                let o = if ty == Type::Q2K { 80 } else { 0 };
                put_f16(&mut b[o..o + 2], rng.range(0.002, 0.05));
                put_f16(&mut b[o + 2..o + 4], rng.range(0.002, 0.05));
            }
            Type::Q3K => put_f16(&mut b[108..110], rng.range(0.002, 0.05)),
            Type::Q6K => put_f16(&mut b[208..210], rng.range(0.002, 0.05)),
            _ => put_f16(&mut b[..2], rng.range(0.002, 0.05)),
        }
    }
    x
}

pub(super) fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for (ti, &(ty, name, qk, bs)) in CASE_TYPES.iter().enumerate() {
        for (li, &len) in LENGTHS.iter().enumerate() {
            let n = if qk == 1 { len + 7 * li } else { len / qk * qk };
            let seed = 1000 + 10 * ti as u64 + li as u64;
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let (x, y) = if qk == 1 {
                (floats(ty, n, &mut rng), floats(ty, n, &mut rng))
            } else {
                let x = weights(ty, n / qk, bs, &mut rng);
                let vdt = scalar_traits(ty).unwrap().vec_dot_type;
                (x, activations(vdt, n, &mut rng))
            };
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

/// Writes the cases for scripts/vec-dot-ref.c: per case the name, n, x and y, each
/// length-prefixed (u32 little-endian).
#[test]
#[ignore = "records the inputs of the llama.cpp fixture; run by hand, see its README"]
fn write_cases() {
    write_case_file(&cases());
}

/// (name, n) -> (bits of ggml's kernel for the build, ggml generic bits), from
/// tests/fixtures/`fixture`.
fn recorded(fixture: &str) -> Vec<(String, usize, u32, u32)> {
    let path = format!(
        "{}/../../tests/fixtures/{fixture}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let hex = |s: &str| u32::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
            (
                f[0].to_string(),
                f[1].parse().unwrap(),
                hex(f[2]),
                hex(f[3]),
            )
        })
        .collect()
}

/// Compares every case of `types` with its result recorded in `fixture`: `kernel(ty)` must
/// give equal bits, or be within `ulps(ty)` units in the last place.
fn compare(
    fixture: &str,
    types: &[Type],
    kernel: impl Fn(Type) -> VecDotFn,
    pick: impl Fn(&(String, usize, u32, u32)) -> u32,
    ulps: impl Fn(Type) -> i64,
) {
    let rec = recorded(fixture);
    let mut bad = String::new();
    let mut checked = 0;
    for c in cases().into_iter().filter(|c| types.contains(&c.ty)) {
        let r = rec
            .iter()
            .find(|r| r.0 == c.name && r.1 == c.n)
            .unwrap_or_else(|| panic!("{fixture}: no recorded result for {} n={}", c.name, c.n));
        let got = kernel(c.ty)(c.n, &c.x, &c.y);
        let want = f32::from_bits(pick(r));
        checked += 1;
        let off = (got.to_bits() as i64 - want.to_bits() as i64).abs();
        if got.is_sign_negative() != want.is_sign_negative() || off > ulps(c.ty) {
            let _ = writeln!(
                bad,
                "{fixture} {} n={} seed={}: {got:e} vs ggml {want:e}",
                c.name, c.n, c.seed
            );
        }
    }
    let names: Vec<&str> = CASE_TYPES
        .iter()
        .filter(|t| types.contains(&t.0))
        .map(|t| t.1)
        .collect();
    assert_eq!(
        checked,
        rec.iter().filter(|r| names.contains(&r.0.as_str())).count(),
        "every case recorded in {fixture} for these types is checked"
    );
    assert!(bad.is_empty(), "results differ from llama.cpp:\n{bad}");
}

/// The first `count` types of `CASE_TYPES`.
fn first_types(count: usize) -> Vec<Type> {
    CASE_TYPES[..count].iter().map(|t| t.0).collect()
}

/// The kernels `traits_for` gives at `level`.
fn level_kernel(level: SimdLevel) -> impl Fn(Type) -> VecDotFn {
    move |ty| traits_for(level, ty).unwrap().vec_dot
}

#[cfg(target_arch = "x86_64")]
#[test]
fn avx2_kernels_give_ggml_avx2_bits() {
    if !SimdLevel::available().contains(&SimdLevel::Avx2) {
        skip("this CPU has no AVX2");
        return;
    }
    // (ggml has no AVX2 Q2_0 kernel: for it both columns hold the generic result)
    compare(
        "vec-dot-avx2/results.txt",
        &first_types(CASE_TYPES.len()),
        level_kernel(SimdLevel::Avx2),
        |r| r.2,
        |_| 0,
    );
}

#[cfg(target_arch = "x86_64")]
#[test]
fn avx512_kernels_give_ggml_avx512_bits() {
    if !SimdLevel::available().contains(&SimdLevel::Avx512) {
        // CI machines may lack AVX-512: an absent CPU feature is a skip, even under CI=true
        eprintln!("skipped: this CPU has no AVX-512 (F/BW/VL/VNNI)");
        return;
    }
    compare(
        "vec-dot-avx512/results.txt",
        &first_types(CASE_TYPES.len()),
        level_kernel(SimdLevel::Avx512),
        |r| r.2,
        |_| 0,
    );
}

/// The BF16 kernel for AVX-512 CPUs without AVX512_BF16 (which `traits_for` picks only there)
/// against ggml's vec.cpp built with -mno-avx512bf16 (see the fixture's README).
#[cfg(target_arch = "x86_64")]
#[test]
fn avx512f_bf16_kernel_gives_ggml_avx512f_bits() {
    if !SimdLevel::available().contains(&SimdLevel::Avx512) {
        eprintln!("skipped: this CPU has no AVX-512 (F/BW/VL/VNNI)");
        return;
    }
    compare(
        "vec-dot-avx512/results-no-avx512bf16.txt",
        &[Type::Bf16],
        |_| super::x86_bf16::bf16_avx512f,
        |r| r.2,
        |_| 0,
    );
}

#[test]
fn scalar_kernels_give_ggml_generic_bits() {
    // GCC builds ggml with FMA (-march=native), and it contracts the last line of the IQ1
    // generic kernels, `sumf += d * y.d * (sumi + DELTA * sumi1)`, into one fma; our scalar
    // kernels are what a CPU without FMA computes (one rounding more), so those two may be a
    // few ulps off (ggml's AVX2 build never runs its generic IQ1 code anyway)
    let ulps = |ty| {
        if matches!(ty, Type::Iq1S | Type::Iq1M) {
            8
        } else {
            0
        }
    };
    compare(
        "vec-dot-avx2/results.txt",
        &first_types(AVX2_GENERIC_TYPES),
        level_kernel(SimdLevel::Scalar),
        |r| r.3,
        ulps,
    );
}

#[cfg(target_arch = "x86_64")]
fn skip(why: &str) {
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "CI=true: {why}"
    );
    eprintln!("skipped: {why}");
}
