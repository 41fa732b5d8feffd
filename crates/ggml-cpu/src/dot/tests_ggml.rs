//! Our dot products against llama.cpp's own: random raw blocks (every grid index, sign and
//! scale pattern, not only what a quantizer emits) fed to ggml's `ggml_vec_dot_*` (its AVX2
//! build) and `ggml_vec_dot_*_generic`, whose f32 results are recorded in
//! tests/fixtures/vec-dot-avx2/results.txt (see its README for the command). The AVX2
//! kernels must give ggml's AVX2 bits, the scalar ones ggml's generic bits.

use super::*;
use ggml::quants::fp32_to_fp16;
use std::fmt::Write as _;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn byte(&mut self) -> u8 {
        (self.next() >> 32) as u8
    }
    /// Uniform in [lo, hi).
    fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next() >> 40) as f32 / (1u64 << 24) as f32)
    }
}

/// The types with a ggml AVX2 dot product that these cases cover, with ggml's name, the block
/// size in elements and bytes; Q2_0 has only ggml's generic code on x86.
pub(super) const CASE_TYPES: [(Type, &str, usize, usize); 14] = [
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
];

/// Element counts of the cases: many blocks, and an odd count of MXFP4 blocks (its tail).
const LENGTHS: [usize; 2] = [4096, 2848 + 256 * 8];

fn put_f16(b: &mut [u8], v: f32) {
    b.copy_from_slice(&fp32_to_fp16(v).to_le_bytes());
}

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
            _ => put_f16(&mut b[..2], rng.range(0.002, 0.05)),
        }
    }
    x
}

/// Random activations in `vdt` (Q8_K or Q8_0), codes in -127..=127 as ggml's quantizers give.
fn activations(vdt: Type, n: usize, rng: &mut Rng) -> Vec<u8> {
    let code = |rng: &mut Rng| (rng.next() % 255) as i32 - 127;
    if vdt == Type::Q8K {
        let mut y = vec![0u8; n / 256 * 292];
        for b in y.chunks_exact_mut(292) {
            b[..4].copy_from_slice(&rng.range(0.001, 0.05).to_le_bytes());
            let q: Vec<i32> = (0..256).map(|_| code(rng)).collect();
            for (o, v) in b[4..260].iter_mut().zip(&q) {
                *o = *v as i8 as u8;
            }
            for j in 0..16 {
                let s: i32 = q[16 * j..16 * j + 16].iter().sum();
                b[260 + 2 * j..262 + 2 * j].copy_from_slice(&(s as i16).to_le_bytes());
            }
        }
        y
    } else {
        let mut y = vec![0u8; n / 32 * 34];
        for b in y.chunks_exact_mut(34) {
            put_f16(&mut b[..2], rng.range(0.001, 0.05));
            for o in &mut b[2..] {
                *o = code(rng) as i8 as u8;
            }
        }
        y
    }
}

pub(super) struct Case {
    pub ty: Type,
    pub name: &'static str,
    pub n: usize,
    pub seed: u64,
    pub x: Vec<u8>,
    pub y: Vec<u8>,
}

pub(super) fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for (ti, &(ty, name, qk, bs)) in CASE_TYPES.iter().enumerate() {
        for (li, &len) in LENGTHS.iter().enumerate() {
            let n = len / qk * qk;
            let seed = 1000 + 10 * ti as u64 + li as u64;
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let x = weights(ty, n / qk, bs, &mut rng);
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

/// Writes the cases for scripts/vec-dot-ref.c: per case the name, n, x and y, each
/// length-prefixed (u32 little-endian).
#[test]
#[ignore = "records the inputs of the llama.cpp fixture; run by hand, see its README"]
fn write_cases() {
    let path = std::env::var("VEC_DOT_CASES").expect("VEC_DOT_CASES=<output file>");
    let mut buf = Vec::new();
    for c in cases() {
        for part in [c.name.as_bytes(), &(c.n as u32).to_le_bytes(), &c.x, &c.y] {
            buf.extend_from_slice(&(part.len() as u32).to_le_bytes());
            buf.extend_from_slice(part);
        }
    }
    std::fs::write(path, buf).unwrap();
}

/// (name, n) -> (ggml AVX2 bits, ggml generic bits), from the fixture.
fn recorded() -> Vec<(String, usize, u32, u32)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/vec-dot-avx2/results.txt"
    );
    let text = std::fs::read_to_string(path).expect("fixture tests/fixtures/vec-dot-avx2");
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

/// Compares every case with its recorded result: equal bits, or within `ulps(ty)` units in
/// the last place.
fn compare(
    level: SimdLevel,
    pick: impl Fn(&(String, usize, u32, u32)) -> u32,
    ulps: impl Fn(Type) -> i64,
) {
    let rec = recorded();
    let mut bad = String::new();
    let mut checked = 0;
    for c in cases() {
        let r = rec
            .iter()
            .find(|r| r.0 == c.name && r.1 == c.n)
            .unwrap_or_else(|| panic!("no recorded result for {} n={}", c.name, c.n));
        let got = (traits_for(level, c.ty).unwrap().vec_dot)(c.n, &c.x, &c.y);
        let want = f32::from_bits(pick(r));
        checked += 1;
        let off = (got.to_bits() as i64 - want.to_bits() as i64).abs();
        if got.is_sign_negative() != want.is_sign_negative() || off > ulps(c.ty) {
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

#[cfg(target_arch = "x86_64")]
#[test]
fn avx2_kernels_give_ggml_avx2_bits() {
    if !SimdLevel::available().contains(&SimdLevel::Avx2) {
        skip("this CPU has no AVX2");
        return;
    }
    // (ggml has no AVX2 Q2_0 kernel: for it both columns hold the generic result)
    compare(SimdLevel::Avx2, |r| r.2, |_| 0);
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
    compare(SimdLevel::Scalar, |r| r.3, ulps);
}

#[cfg(target_arch = "x86_64")]
fn skip(why: &str) {
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "CI=true: {why}"
    );
    eprintln!("skipped: {why}");
}
