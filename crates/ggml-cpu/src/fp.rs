//! Half and bfloat16 conversions for the kernels: ggml's own rounding (nearest even), from the
//! quants module, so CPU results match the bytes ggml writes.

pub(crate) use ggml::quants::{
    bf16_to_fp32 as bf16_to_f32, fp16_to_fp32 as f16_to_f32, fp32_to_bf16 as f32_to_bf16,
    fp32_to_fp16 as f32_to_f16,
};

/// dst[i] = f32(src[i]) for the common length. F16C converts exactly, as the scalar path does
/// (every half is representable in f32), so the two give the same bits.
pub(crate) fn f16_to_f32_row(src: &[u16], dst: &mut [f32]) {
    let n = src.len().min(dst.len());
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    {
        if x86::has_f16c() {
            // SAFETY: F16C is available (checked above); both slices hold at least n elements.
            i = unsafe { x86::f16_to_f32(&src[..n], &mut dst[..n]) };
        }
    }
    for (d, s) in dst[i..n].iter_mut().zip(&src[i..n]) {
        *d = f16_to_f32(*s);
    }
}

pub(crate) fn f32_to_f16_row(src: &[f32], dst: &mut [u16]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = f32_to_f16(*s);
    }
}

/// The f16 at `p` as f32 through F16C (exact, so `f16_to_f32`'s bits), for kernels' block
/// scales. Written out because LLVM turns `_mm_cvtph_ps(_mm_cvtsi32_si128(h))` into a vpinsrw
/// into whatever register is free, often a kernel's accumulator: each block's scale then
/// waited for the previous block's FMA (the AVX2 Q8_0 dot product ran at 0.30 of ggml's
/// speed). vmovd writes the whole register, so the conversion depends on the value alone.
///
/// # Safety
/// The CPU has F16C; `p` has 2 readable bytes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn f16c_at(p: *const u8) -> f32 {
    // SAFETY: the caller vouches for the 2 bytes.
    let h = unsafe { std::ptr::read_unaligned(p as *const u16) };
    let f: f32;
    // SAFETY: the caller vouches for F16C; the asm touches only its two registers.
    unsafe {
        std::arch::asm!(
            "vmovd {x}, {h:e}",
            "vcvtph2ps {x}, {x}",
            h = in(reg) h as u32,
            x = out(xmm_reg) f,
            options(pure, nomem, nostack, preserves_flags),
        );
    }
    f
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    pub fn has_f16c() -> bool {
        crate::simd::features::cpu().f16c()
    }

    /// Converts whole groups of 8 and returns how many elements it converted.
    ///
    /// # Safety
    /// AVX and F16C must be available; `dst` holds at least `src.len()` elements.
    #[target_feature(enable = "avx,f16c")]
    pub unsafe fn f16_to_f32(src: &[u16], dst: &mut [f32]) -> usize {
        let n = src.len() / 8 * 8;
        let (ps, pd) = (src.as_ptr(), dst.as_mut_ptr());
        let mut i = 0;
        while i < n {
            // SAFETY: i + 8 <= n <= both lengths.
            unsafe {
                let h = _mm_loadu_si128(ps.add(i) as *const __m128i);
                _mm256_storeu_ps(pd.add(i), _mm256_cvtph_ps(h));
            }
            i += 8;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn row_conversion_matches_the_scalar_one_for_every_half() {
        let src: Vec<u16> = (0..=u16::MAX).collect();
        let mut fast = vec![0.0f32; src.len()];
        super::f16_to_f32_row(&src, &mut fast);
        for (&h, &f) in src.iter().zip(&fast) {
            let want = super::f16_to_f32(h);
            // NaNs may differ in payload; every other half must give the same bits
            assert!(
                (want.is_nan() && f.is_nan()) || want.to_bits() == f.to_bits(),
                "{h:#06x}: {f} != {want}"
            );
        }
    }
}
