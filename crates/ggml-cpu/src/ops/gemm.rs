//! A register-blocked matrix-multiply tile for float weights (F32, or F16 with F16C): RM rows
//! of the weight times RN activation columns at once, so each loaded vector feeds several
//! FMAs instead of one (the dot-product-per-cell path loads two vectors per FMA). Used by
//! MUL_MAT for batches; results equal the dot products up to summation order.

/// Rows and columns of one register tile.
pub(crate) const RM: usize = 4;
pub(crate) const RN: usize = 3;
// the kernels load exactly three columns per step
const _: () = assert!(RN == 3);

/// Element type of both operands of a tile.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Elem {
    F32,
    F16,
}

#[cfg(target_arch = "x86_64")]
fn has_avx512() -> bool {
    crate::simd::features::cpu().avx512f
}

/// Whether tiles can run on this CPU for `e`.
pub(crate) fn available(e: Elem) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let f = crate::simd::features::cpu();
        match e {
            Elem::F32 => f.avx2_fma(),
            Elem::F16 => f.avx2_fma() && f.f16c,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = e;
        false
    }
}

/// out[r * RN + c] = dot(a[r], b[c]) over k elements, for a full RM x RN tile.
///
/// # Safety
/// `available(e)` must hold; every a[r] and b[c] points at k readable elements of `e`.
pub(crate) unsafe fn tile(
    e: Elem,
    k: usize,
    a: &[*const u8; RM],
    b: &[*const u8; RN],
    out: &mut [f32; RM * RN],
) {
    #[cfg(target_arch = "x86_64")]
    {
        match (e, has_avx512()) {
            (Elem::F32, true) => x86::tile_f32_avx512(k, a, b, out),
            (Elem::F16, true) => x86::tile_f16_avx512(k, a, b, out),
            (Elem::F32, false) => x86::tile_f32(k, a, b, out),
            (Elem::F16, false) => x86::tile_f16(k, a, b, out),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (e, k, a, b, out);
        unreachable!("gemm tiles are x86-only");
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{RM, RN};
    use std::arch::x86_64::*;

    #[inline(always)]
    unsafe fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }

    macro_rules! tile_impl {
        ($name:ident, $feat:literal, $load:expr, $scalar:expr) => {
            /// # Safety
            /// The CPU supports the target features; pointers cover k elements.
            #[target_feature(enable = $feat)]
            pub unsafe fn $name(
                k: usize,
                a: &[*const u8; RM],
                b: &[*const u8; RN],
                out: &mut [f32; RM * RN],
            ) {
                let mut acc = [_mm256_setzero_ps(); RM * RN];
                let mut i = 0;
                while i + 8 <= k {
                    let bv = [$load(b[0], i), $load(b[1], i), $load(b[2], i)];
                    for r in 0..RM {
                        let av = $load(a[r], i);
                        for c in 0..RN {
                            acc[r * RN + c] = _mm256_fmadd_ps(av, bv[c], acc[r * RN + c]);
                        }
                    }
                    i += 8;
                }
                for r in 0..RM {
                    for c in 0..RN {
                        let mut s = hsum(acc[r * RN + c]);
                        for j in i..k {
                            s += $scalar(a[r], j) * $scalar(b[c], j);
                        }
                        out[r * RN + c] = s;
                    }
                }
            }
        };
    }

    #[inline(always)]
    unsafe fn load_f32(p: *const u8, i: usize) -> __m256 {
        _mm256_loadu_ps((p as *const f32).add(i))
    }
    #[inline(always)]
    unsafe fn scalar_f32(p: *const u8, i: usize) -> f32 {
        (p as *const f32).add(i).read_unaligned()
    }
    #[inline(always)]
    unsafe fn load_f16(p: *const u8, i: usize) -> __m256 {
        _mm256_cvtph_ps(_mm_loadu_si128((p as *const u16).add(i) as *const __m128i))
    }
    #[inline(always)]
    unsafe fn scalar_f16(p: *const u8, i: usize) -> f32 {
        crate::fp::f16_to_f32((p as *const u16).add(i).read_unaligned())
    }

    tile_impl!(tile_f32, "avx2,fma", load_f32, scalar_f32);
    tile_impl!(tile_f16, "avx2,fma,f16c", load_f16, scalar_f16);

    macro_rules! tile_impl_512 {
        ($name:ident, $feat:literal, $load:expr, $scalar:expr) => {
            /// # Safety
            /// The CPU supports the target features; pointers cover k elements.
            #[target_feature(enable = $feat)]
            pub unsafe fn $name(
                k: usize,
                a: &[*const u8; RM],
                b: &[*const u8; RN],
                out: &mut [f32; RM * RN],
            ) {
                let mut acc = [_mm512_setzero_ps(); RM * RN];
                let mut i = 0;
                while i + 16 <= k {
                    let bv = [$load(b[0], i), $load(b[1], i), $load(b[2], i)];
                    for r in 0..RM {
                        let av = $load(a[r], i);
                        for c in 0..RN {
                            acc[r * RN + c] = _mm512_fmadd_ps(av, bv[c], acc[r * RN + c]);
                        }
                    }
                    i += 16;
                }
                for r in 0..RM {
                    for c in 0..RN {
                        let mut s = _mm512_reduce_add_ps(acc[r * RN + c]);
                        for j in i..k {
                            s += $scalar(a[r], j) * $scalar(b[c], j);
                        }
                        out[r * RN + c] = s;
                    }
                }
            }
        };
    }

    #[inline(always)]
    unsafe fn load_f32_512(p: *const u8, i: usize) -> __m512 {
        _mm512_loadu_ps((p as *const f32).add(i))
    }
    #[inline(always)]
    unsafe fn load_f16_512(p: *const u8, i: usize) -> __m512 {
        _mm512_cvtph_ps(_mm256_loadu_si256(
            (p as *const u16).add(i) as *const __m256i
        ))
    }

    tile_impl_512!(tile_f32_avx512, "avx512f", load_f32_512, scalar_f32);
    tile_impl_512!(tile_f16_avx512, "avx512f", load_f16_512, scalar_f16);
}
