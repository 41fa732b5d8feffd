//! Random test rows shared by the dot-product tests against llama.cpp's recorded bits
//! (tests_ggml on x86, tests_neon on aarch64): the generator and the activation and float
//! rows, which must stay byte for byte what they were when the fixtures were recorded.

use ggml::quants::{fp32_to_bf16, fp32_to_fp16};
use ggml::Type;

pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub(super) fn byte(&mut self) -> u8 {
        (self.next() >> 32) as u8
    }
    /// Uniform in [lo, hi).
    pub(super) fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next() >> 40) as f32 / (1u64 << 24) as f32)
    }
}

pub(super) fn put_f16(b: &mut [u8], v: f32) {
    b.copy_from_slice(&fp32_to_fp16(v).to_le_bytes());
}

/// Random activations in `vdt` (Q8_K, Q8_0 or Q8_1), codes in -127..=127 as ggml's
/// quantizers give.
pub(super) fn activations(vdt: Type, n: usize, rng: &mut Rng) -> Vec<u8> {
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
        // Q8_1 also holds s = d * sum(q) after d
        let bs = if vdt == Type::Q8_1 { 36 } else { 34 };
        let mut y = vec![0u8; n / 32 * bs];
        for b in y.chunks_exact_mut(bs) {
            let d = rng.range(0.001, 0.05);
            put_f16(&mut b[..2], d);
            let mut sum = 0;
            for o in &mut b[bs - 32..] {
                let c = code(rng);
                sum += c;
                *o = c as i8 as u8;
            }
            if bs == 36 {
                put_f16(&mut b[2..4], d * sum as f32);
            }
        }
        y
    }
}

/// `n` values in [-2, 2) as F32, F16 or BF16.
pub(super) fn floats(ty: Type, n: usize, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..n {
        let v = rng.range(-2.0, 2.0);
        match ty {
            Type::F32 => out.extend_from_slice(&v.to_le_bytes()),
            Type::F16 => out.extend_from_slice(&fp32_to_fp16(v).to_le_bytes()),
            _ => out.extend_from_slice(&fp32_to_bf16(v).to_le_bytes()),
        }
    }
    out
}

/// One dot product's inputs: raw x blocks (or floats) and y in the type the kernel pairs with.
pub(super) struct Case {
    pub ty: Type,
    pub name: &'static str,
    pub n: usize,
    pub seed: u64,
    pub x: Vec<u8>,
    pub y: Vec<u8>,
}

/// Writes `cases` to $VEC_DOT_CASES for scripts/vec-dot-ref.c and vec-dot-ref-neon.c: per
/// case the name, n, x and y, each length-prefixed (u32 little-endian).
pub(super) fn write_case_file(cases: &[Case]) {
    let path = std::env::var("VEC_DOT_CASES").expect("VEC_DOT_CASES=<output file>");
    let mut buf = Vec::new();
    for c in cases {
        for part in [c.name.as_bytes(), &(c.n as u32).to_le_bytes(), &c.x, &c.y] {
            buf.extend_from_slice(&(part.len() as u32).to_le_bytes());
            buf.extend_from_slice(part);
        }
    }
    std::fs::write(path, buf).unwrap();
}

/// The test of a float rows kernel (`x86_f16_rows::rows`, `x86_bf16::rows`): every row of a
/// chunk, one by one and by halves (odd and even row counts), equals the one-row kernel `one`
/// to the bit, at widths with and without a tail (and one whose tail alone is the sum), the
/// rows padded apart (a stride longer than the row, as a view's may be).
///
/// # Safety
/// Both kernels' CPU features are present.
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn check_float_rows(
    ty: Type,
    one: unsafe fn(usize, &[u8], &[u8]) -> f32,
    rows: unsafe fn(usize, *const u8, usize, *const u8, &mut [f32], bool),
) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for n in [40, 64, 100, 2048, 2085] {
        for nrows in [1, 2, 7, 16] {
            let y = floats(ty, n, &mut rng);
            let stride = 2 * n + 64;
            let mut x = vec![0u8; stride * nrows];
            for r in 0..nrows {
                x[r * stride..r * stride + 2 * n].copy_from_slice(&floats(ty, n, &mut rng));
            }
            let want: Vec<u32> = (0..nrows)
                .map(|r| {
                    // SAFETY: the caller's promise; the row and y hold n values.
                    unsafe { one(n, &x[r * stride..r * stride + 2 * n], &y) }.to_bits()
                })
                .collect();
            for halves in [false, true] {
                let mut out = vec![0f32; nrows];
                // SAFETY: as above; nrows rows of n values, stride apart.
                unsafe { rows(n, x.as_ptr(), stride, y.as_ptr(), &mut out, halves) };
                let got: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
                assert_eq!(got, want, "{ty:?}: n {n}, {nrows} rows, halves {halves}");
            }
        }
    }
}
