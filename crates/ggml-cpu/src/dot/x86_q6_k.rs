//! AVX2 and AVX-512 VNNI dot products of Q6_K against Q8_K, one row at a time.
//! Per block the integer sums are exact (any order gives the same lanes); the floats follow
//! ggml's AVX2 order: 8 lanes of (sums minus the +32 code bias) fused times d per block, summed
//! across lanes last. (A four-row AVX2 kernel sharing the activation block measured slower than
//! row after row on an AMD EPYC, in cache (76 against 58 us for 640 rows of 2048) and more so
//! streaming from memory, so there is none; AVX-512 has `x86_k512::q6_k_rows4`.)

use std::arch::x86_64::*;

use super::scalar::check;
use super::x86::{dot_u8_i8_scaled, dot_u8_i8_scaled_vnni, h2f_f16c, hsum_ps, load32};

pub(super) fn q6_k_avx2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 210, y, 292);
    // SAFETY: handed out only after AVX2/FMA/F16C were detected; `check` proved the sizes.
    unsafe { q6_k_k2(nb, x, y) }
}

pub(super) fn q6_k_avx512(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 210, y, 292);
    // SAFETY: handed out only after AVX-512 VNNI/VL were detected; `check` proved the sizes.
    unsafe { q6_k_k512(nb, x, y) }
}

/// Scale vector of ggml's 32-byte vector using scales `a` (low 16 bytes) and `a + 1` (high 16),
/// as 16-bit lanes for `pmaddwd` after `pmaddubsw`.
#[inline]
#[target_feature(enable = "avx2")]
fn scales16(sc8: __m128i, a: i64) -> __m256i {
    let ctrl = _mm_set_epi64x((a + 1) * 0x0101_0101_0101_0101, a * 0x0101_0101_0101_0101);
    _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, ctrl))
}

/// The same as 32-bit lanes, for `vpdpbusd`'s four-byte sums.
#[inline]
#[target_feature(enable = "avx2")]
fn scales32(sc8: __m128i, a: i64) -> __m256i {
    let ctrl = _mm_set_epi64x(0, (((a + 1) * 0x0101_0101) << 32) | (a * 0x0101_0101));
    _mm256_cvtepi8_epi32(_mm_shuffle_epi8(sc8, ctrl))
}

macro_rules! q6_k_kernels {
    ($block:ident, $one:ident, $feat:literal, $dot:ident, $scales:ident) => {
        /// The 8 integer lanes of one block's dot product, less the +32 code bias.
        ///
        /// # Safety
        /// The CPU features must be available; `bx` points at a 210-byte Q6_K block, `by` at a
        /// 292-byte Q8_K block.
        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn $block(bx: *const u8, by: *const u8) -> __m256i {
            let m4 = _mm256_set1_epi8(0x0F);
            let m3 = _mm256_set1_epi8(0x03);
            // SAFETY: every offset below stays inside its 210- or 292-byte block.
            unsafe {
                let sc8 = _mm_loadu_si128(bx.add(192) as *const __m128i);
                // The quants are stored +32: lane l loses 32 * (scale x activation sum) of
                // subblocks 2l and 2l + 1 (ggml's q8sclsub)
                let bsums = _mm256_loadu_si256(by.add(260) as *const __m256i);
                let bias =
                    _mm256_slli_epi32::<5>(_mm256_madd_epi16(bsums, _mm256_cvtepi8_epi16(sc8)));
                let mut acc = _mm256_setzero_si256();
                for g in 0..2 {
                    let ql0 = load32(bx.add(64 * g));
                    let ql1 = load32(bx.add(64 * g + 32));
                    let qh = load32(bx.add(128 + 32 * g));
                    let hi = |h: __m256i| _mm256_slli_epi16::<4>(_mm256_and_si256(h, m3));
                    let q = [
                        _mm256_or_si256(_mm256_and_si256(ql0, m4), hi(qh)),
                        _mm256_or_si256(_mm256_and_si256(ql1, m4), hi(_mm256_srli_epi16::<2>(qh))),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4),
                            hi(_mm256_srli_epi16::<4>(qh)),
                        ),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4),
                            hi(_mm256_srli_epi16::<6>(qh)),
                        ),
                    ];
                    for (k, qk) in q.iter().enumerate() {
                        let q8 = load32(by.add(4 + 128 * g + 32 * k));
                        let s = $scales(sc8, (8 * g + 2 * k) as i64);
                        acc = _mm256_add_epi32(acc, $dot(*qk, q8, s));
                    }
                }
                _mm256_sub_epi32(acc, bias)
            }
        }

        /// # Safety
        /// The CPU features must be available; `x`, `y` must hold `nb` blocks.
        #[target_feature(enable = $feat)]
        unsafe fn $one(nb: usize, x: &[u8], y: &[u8]) -> f32 {
            let (px, py) = (x.as_ptr(), y.as_ptr());
            let mut accf = _mm256_setzero_ps();
            for i in 0..nb {
                // SAFETY: block i of both operands is within the nb blocks the caller checked.
                unsafe {
                    let (bx, by) = (px.add(210 * i), py.add(292 * i));
                    let sum = $block(bx, by);
                    let d = std::ptr::read_unaligned(by as *const f32) * h2f_f16c(bx.add(208));
                    accf = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum), accf);
                }
            }
            hsum_ps(accf)
        }
    };
}

q6_k_kernels!(
    block_k2,
    q6_k_k2,
    "avx2,fma,f16c",
    dot_u8_i8_scaled,
    scales16
);
q6_k_kernels!(
    block_k512,
    q6_k_k512,
    "avx2,fma,f16c,avx512vnni,avx512vl",
    dot_u8_i8_scaled_vnni,
    scales32
);
