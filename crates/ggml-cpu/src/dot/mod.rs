//! ggml's `type_traits_cpu`: for each weight type, the type its dot-product partner is
//! converted to (`vec_dot_type`), that conversion (`from_float`), and the dot product itself.
//! Kernels are picked once per process from the CPU's features: AVX-512 (F/BW/VL/VNNI),
//! AVX2+FMA+F16C, NEON, or the portable scalar code that defines the results.

mod fp4;
mod iq;
#[cfg(target_arch = "aarch64")]
mod neon;
#[cfg(target_arch = "aarch64")]
mod neon_iq;
#[cfg(target_arch = "aarch64")]
mod neon_iq_grid;
#[cfg(target_arch = "aarch64")]
mod neon_k;
#[cfg(target_arch = "aarch64")]
mod neon_q1q2;
mod q1q2;
mod scalar;
#[cfg(test)]
mod test_rows;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_ggml;
#[cfg(all(test, target_arch = "aarch64"))]
mod tests_neon;
mod tq;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_bf16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_f16_rows;
#[cfg(target_arch = "x86_64")]
mod x86_fp4;
#[cfg(target_arch = "x86_64")]
mod x86_iq;
#[cfg(target_arch = "x86_64")]
mod x86_iq1;
#[cfg(target_arch = "x86_64")]
mod x86_iq2;
#[cfg(target_arch = "x86_64")]
mod x86_iq3;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_iq4_xs;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_k23;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_k4x16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_k4x8;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_k512;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_kt16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_mxfp4_repack;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_prepared;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_q0x16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_q2k_repack;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_q4_1;
#[cfg(target_arch = "x86_64")]
mod x86_q6_k;
#[cfg(target_arch = "x86_64")]
mod x86_q8;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_q8_0_rows;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_q8_0_tile;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_rows8;
#[cfg(target_arch = "x86_64")]
mod x86_tiled;

use std::sync::OnceLock;

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::rows4_kernel;

use ggml::quants::{self, fp32_to_bf16, fp32_to_fp16};
use ggml::Type;

/// A dot product of `n` elements of two rows.
pub type VecDotFn = fn(usize, &[u8], &[u8]) -> f32;

/// The per-type functions a matmul needs.
#[derive(Clone, Copy)]
pub struct CpuTypeTraits {
    /// The type the other operand (activations) is converted to before the dot product.
    pub vec_dot_type: Type,
    /// Converts f32 activations (whole blocks) into `vec_dot_type`.
    pub from_float: fn(&[f32], &mut [u8]),
    /// Dot product of `n` elements: `x` in the weight type, `y` in `vec_dot_type`.
    pub vec_dot: VecDotFn,
}

/// An instruction-set level with its own kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimdLevel {
    Scalar,
    Avx2,
    Avx512,
    Neon,
    /// NEON with SDOT (FEAT_DotProd), as ggml built with `__ARM_FEATURE_DOTPROD`.
    NeonDotprod,
}

impl SimdLevel {
    /// The best level this CPU supports.
    pub fn detect() -> SimdLevel {
        #[cfg(target_arch = "x86_64")]
        {
            if x86::has_avx512() {
                return SimdLevel::Avx512;
            }
            if x86::has_avx2() {
                return SimdLevel::Avx2;
            }
        }
        #[cfg(target_arch = "aarch64")]
        {
            let f = crate::simd::features::cpu();
            if f.neon && f.dotprod {
                return SimdLevel::NeonDotprod;
            }
            if f.neon {
                return SimdLevel::Neon;
            }
        }
        SimdLevel::Scalar
    }

    /// Every level this CPU can run, the scalar one first.
    pub fn available() -> Vec<SimdLevel> {
        let mut v = vec![SimdLevel::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            if x86::has_avx2() {
                v.push(SimdLevel::Avx2);
            }
            if x86::has_avx512() {
                v.push(SimdLevel::Avx512);
            }
        }
        #[cfg(target_arch = "aarch64")]
        {
            let f = crate::simd::features::cpu();
            if f.neon {
                v.push(SimdLevel::Neon);
            }
            if f.neon && f.dotprod {
                v.push(SimdLevel::NeonDotprod);
            }
        }
        v
    }
}

fn f32_from_float(src: &[f32], dst: &mut [u8]) {
    for (d, s) in dst.chunks_exact_mut(4).zip(src) {
        d.copy_from_slice(&s.to_le_bytes());
    }
}

fn f16_from_float(src: &[f32], dst: &mut [u8]) {
    for (d, s) in dst.chunks_exact_mut(2).zip(src) {
        d.copy_from_slice(&fp32_to_fp16(*s).to_le_bytes());
    }
}

fn bf16_from_float(src: &[f32], dst: &mut [u8]) {
    for (d, s) in dst.chunks_exact_mut(2).zip(src) {
        d.copy_from_slice(&fp32_to_bf16(*s).to_le_bytes());
    }
}

/// Q8_0 activations as ggml's x86 `quantize_row_q8_0` makes them (the build the reference
/// outputs come from): d = amax/127, multiplier 127/amax, rounding half to even. (The
/// reference quantizer for files uses 1/d and rounds half away from zero.)
pub fn quantize_row_q8_0(src: &[f32], dst: &mut [u8]) {
    q8_dispatch(src, dst, 34, |d, _sum| (fp32_to_fp16(d), None));
}

/// Q8_1 activations as ggml's x86 `quantize_row_q8_1`: like Q8_0 plus s = d * sum(q).
pub fn quantize_row_q8_1(src: &[f32], dst: &mut [u8]) {
    q8_dispatch(src, dst, 36, |d, sum| {
        (fp32_to_fp16(d), Some(fp32_to_fp16(d * sum as f32)))
    });
}

/// `q8_blocks` through AVX-512 where the CPU has it (the same bits, `x86_q8`).
fn q8_dispatch(
    src: &[f32],
    dst: &mut [u8],
    bs: usize,
    head: impl Fn(f32, i32) -> (u16, Option<u16>),
) {
    assert_eq!(
        src.len() % 32,
        0,
        "quantize_row_q8: length not a multiple of 32"
    );
    assert!(
        dst.len() >= src.len() / 32 * bs,
        "quantize_row_q8: destination too small"
    );
    #[cfg(target_arch = "x86_64")]
    if crate::simd::features::cpu().avx512bw_vl() {
        let put = |d: f32, sum: i32, out: &mut [u8]| {
            let (dh, sh) = head(d, sum);
            out[0..2].copy_from_slice(&dh.to_le_bytes());
            if let Some(s) = sh {
                out[2..4].copy_from_slice(&s.to_le_bytes());
            }
        };
        // SAFETY: AVX-512 F/BW/VL are available; sizes asserted above.
        unsafe { x86_q8::q8_blocks(src, dst, bs, &put) };
        return;
    }
    q8_blocks(src, dst, bs, head)
}

/// The portable loop of `q8_dispatch` (sizes checked by it).
fn q8_blocks(
    src: &[f32],
    dst: &mut [u8],
    bs: usize,
    head: impl Fn(f32, i32) -> (u16, Option<u16>),
) {
    for (x, out) in src.chunks_exact(32).zip(dst.chunks_exact_mut(bs)) {
        let mut amax = 0.0f32;
        for v in x {
            amax = amax.max(v.abs());
        }
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        let qs = &mut out[bs - 32..];
        let mut sum = 0i32;
        for (q, v) in qs.iter_mut().zip(x) {
            // |v * id| <= 127: adding 1.5 * 2^23 rounds to an integer, half to even, as
            // round_ties_even does (without a libm call on CPUs lacking SSE4.1's roundps)
            let r = ((v * id + 12_582_912.0f32).to_bits() as i32 & 0x007f_ffff) - 0x0040_0000;
            sum += r;
            *q = r as i8 as u8;
        }
        let (dh, sh) = head(d, sum);
        out[0..2].copy_from_slice(&dh.to_le_bytes());
        if let Some(s) = sh {
            out[2..4].copy_from_slice(&s.to_le_bytes());
        }
    }
}

/// Q8_K activations, bit for bit ggml's quantize_row_q8_K (its reference quantizer on every
/// CPU), in loops the compiler vectorises: the block's largest |x| (its first occurrence
/// gives the sign), codes round(-127 / max * x) half to even (the 1.5 * 2^23 trick), at most
/// 127, then the sums of every 16 codes.
fn q8_k_from_float(src: &[f32], dst: &mut [u8]) {
    assert_eq!(
        src.len() % 256,
        0,
        "quantize_row_q8_K: length not a multiple of 256"
    );
    assert!(
        dst.len() >= src.len() / 256 * 292,
        "quantize_row_q8_K: destination too small"
    );
    #[cfg(target_arch = "x86_64")]
    if crate::simd::features::cpu().avx512bw_vl() {
        // SAFETY: AVX-512 F/BW/VL are available; sizes asserted above.
        unsafe { x86_q8::q8_k_blocks(src, dst) };
        return;
    }
    q8_k_scalar(src, dst)
}

/// The portable loop of `q8_k_from_float` (sizes checked by it).
fn q8_k_scalar(src: &[f32], dst: &mut [u8]) {
    for (x, out) in src.chunks_exact(256).zip(dst.chunks_exact_mut(292)) {
        let mut lanes = [0.0f32; 8];
        for c in x.chunks_exact(8) {
            for (m, v) in lanes.iter_mut().zip(c) {
                *m = m.max(v.abs());
            }
        }
        let amax = lanes.iter().fold(0.0f32, |a, &b| a.max(b));
        if amax == 0.0 {
            out.fill(0);
            continue;
        }
        let max = x.iter().copied().find(|v| v.abs() == amax).unwrap_or(amax);
        let iscale = -127.0f32 / max;
        let mut q = [0i8; 256];
        for (o, &v) in q.iter_mut().zip(x) {
            let r = ((iscale * v + 12_582_912.0f32).to_bits() as i32 & 0x007f_ffff) - 0x0040_0000;
            *o = r.min(127) as i8;
        }
        out[0..4].copy_from_slice(&(1.0 / iscale).to_le_bytes());
        for (o, &v) in out[4..260].iter_mut().zip(&q) {
            *o = v as u8;
        }
        for (j, c) in q.chunks_exact(16).enumerate() {
            let s: i16 = c.iter().map(|&v| v as i16).sum();
            out[260 + 2 * j..262 + 2 * j].copy_from_slice(&s.to_le_bytes());
        }
    }
}

const fn t(
    vec_dot_type: Type,
    from_float: fn(&[f32], &mut [u8]),
    vec_dot: fn(usize, &[u8], &[u8]) -> f32,
) -> CpuTypeTraits {
    CpuTypeTraits {
        vec_dot_type,
        from_float,
        vec_dot,
    }
}

/// The portable traits of `ty`, or None for a type with no dot product.
pub fn scalar_traits(ty: Type) -> Option<CpuTypeTraits> {
    use scalar::*;
    Some(match ty {
        Type::F32 => t(Type::F32, f32_from_float, f32_f32),
        Type::F16 => t(Type::F16, f16_from_float, f16_f16),
        Type::Bf16 => t(Type::Bf16, bf16_from_float, bf16_bf16),
        Type::Q4_0 => t(Type::Q8_0, quantize_row_q8_0, q4_0_q8_0),
        Type::Q4_1 => t(Type::Q8_1, quantize_row_q8_1, q4_1_q8_1),
        Type::Q5_0 => t(Type::Q8_0, quantize_row_q8_0, q5_0_q8_0),
        Type::Q5_1 => t(Type::Q8_1, quantize_row_q8_1, q5_1_q8_1),
        Type::Q8_0 => t(Type::Q8_0, quantize_row_q8_0, q8_0_q8_0),
        Type::Iq4Nl => t(Type::Q8_0, quantize_row_q8_0, iq4_nl_q8_0),
        Type::Q2K => t(Type::Q8K, q8_k_from_float, q2_k_q8_k),
        Type::Q3K => t(Type::Q8K, q8_k_from_float, q3_k_q8_k),
        Type::Q4K => t(Type::Q8K, q8_k_from_float, q4_k_q8_k),
        Type::Q5K => t(Type::Q8K, q8_k_from_float, q5_k_q8_k),
        Type::Q6K => t(Type::Q8K, q8_k_from_float, q6_k_q8_k),
        Type::Iq4Xs => t(Type::Q8K, q8_k_from_float, iq::iq4_xs_q8_k),
        Type::Iq2Xxs => t(Type::Q8K, q8_k_from_float, iq::iq2_xxs_q8_k),
        Type::Iq2Xs => t(Type::Q8K, q8_k_from_float, iq::iq2_xs_q8_k),
        Type::Iq2S => t(Type::Q8K, q8_k_from_float, iq::iq2_s_q8_k),
        Type::Iq3Xxs => t(Type::Q8K, q8_k_from_float, iq::iq3_xxs_q8_k),
        Type::Iq3S => t(Type::Q8K, q8_k_from_float, iq::iq3_s_q8_k),
        Type::Iq1S => t(Type::Q8K, q8_k_from_float, iq::iq1_s_q8_k),
        Type::Iq1M => t(Type::Q8K, q8_k_from_float, iq::iq1_m_q8_k),
        Type::Tq1_0 => t(Type::Q8K, q8_k_from_float, tq::tq1_0_q8_k),
        Type::Tq2_0 => t(Type::Q8K, q8_k_from_float, tq::tq2_0_q8_k),
        Type::Mxfp4 => t(Type::Q8_0, quantize_row_q8_0, fp4::mxfp4_q8_0),
        Type::Nvfp4 => t(Type::Q8_0, quantize_row_q8_0, fp4::nvfp4_q8_0),
        Type::Q1_0 => t(Type::Q8_0, quantize_row_q8_0, q1q2::q1_0_q8_0),
        Type::Q2_0 => t(Type::Q8_0, quantize_row_q8_0, q1q2::q2_0_q8_0),
        _ => return None,
    })
}

/// The traits of `ty` with the kernels of `level` where it has one (scalar otherwise).
/// `level` must be supported by this CPU (see `SimdLevel::available`).
pub fn traits_for(level: SimdLevel, ty: Type) -> Option<CpuTypeTraits> {
    let mut tr = scalar_traits(ty)?;
    let fast: Option<VecDotFn> = match level {
        SimdLevel::Scalar => None,
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 => x86::avx2_kernel(ty),
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512 => x86::avx512_kernel(ty),
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => neon::kernel(ty, false),
        #[cfg(target_arch = "aarch64")]
        SimdLevel::NeonDotprod => neon::kernel(ty, true),
        #[allow(unreachable_patterns)]
        _ => None,
    };
    // the IQ/TQ/FP4 kernels live apart from x86.rs; they need AVX2, which AVX-512 implies
    #[cfg(target_arch = "x86_64")]
    let fast = fast.or_else(|| match level {
        SimdLevel::Avx2 | SimdLevel::Avx512 => x86_iq::avx2_kernel(ty),
        _ => None,
    });
    assert!(
        SimdLevel::available().contains(&level),
        "SIMD level {level:?} not supported by this CPU"
    );
    if let Some(f) = fast {
        tr.vec_dot = f;
    }
    Some(tr)
}

/// For IQ weights times batches of >= 8 columns, llama.cpp's x86 build runs its tiled matmul
/// instead of the dot product: the function (same arguments) that gives its float order, or
/// None where the dot product is what it runs.
pub fn tiled_iq_kernel(ty: Type) -> Option<VecDotFn> {
    #[cfg(target_arch = "x86_64")]
    {
        x86_tiled::kernel(ty)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = ty;
        None
    }
}

static TABLE: OnceLock<Vec<(Type, CpuTypeTraits)>> = OnceLock::new();

/// The traits of `ty` for this CPU, chosen once. Panics for a type without a dot product
/// (I8, I16, I32, I64, F64, Q8_1, Q8_K); `has_traits` tells which ones have one.
pub fn cpu_traits(ty: Type) -> &'static CpuTypeTraits {
    let table = TABLE.get_or_init(|| {
        let level = SimdLevel::detect();
        Type::ALL
            .iter()
            .filter_map(|&t| traits_for(level, t).map(|tr| (t, tr)))
            .collect()
    });
    table
        .iter()
        .find(|(t, _)| *t == ty)
        .map(|(_, tr)| tr)
        .unwrap_or_else(|| panic!("no CPU dot product for type {ty}"))
}

/// Whether `cpu_traits(ty)` exists.
pub fn has_traits(ty: Type) -> bool {
    scalar_traits(ty).is_some()
}

/// Dot products of `nrows` consecutive rows of `w` (each `n` elements of `ty`) with `y`
/// (already in `vec_dot_type`), written to `out`.
pub fn vec_dot_rows(ty: Type, n: usize, w: &[u8], nrows: usize, y: &[u8], out: &mut [f32]) {
    let tr = cpu_traits(ty);
    let row = quants::bytes_for(ty, n);
    assert!(
        w.len() >= row * nrows && out.len() >= nrows,
        "vec_dot_rows: buffers too small"
    );
    for (r, o) in out.iter_mut().take(nrows).enumerate() {
        *o = (tr.vec_dot)(n, &w[r * row..(r + 1) * row], y);
    }
}
