//! A 16 x 16 transpose of 32-bit lanes in AVX-512 registers: pairs interleaved, then quads,
//! then 128-bit lanes twice (64 shuffles for 256 elements, against 256 scalar loads and
//! stores). Shuffles move bits, so it serves floats and integer dwords alike.

use std::arch::x86_64::*;

/// Row i of the result holds element i of every input row (lane r: row r).
///
/// # Safety
/// AVX-512F is available.
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) fn transpose16(r: [__m512; 16]) -> [__m512; 16] {
    let mut t = [_mm512_setzero_ps(); 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4g + k]: element k (and k + 4, + 8, + 12) of rows 4g..4g + 4
    let mut u = [_mm512_setzero_ps(); 16];
    for g in 0..4 {
        let (lo, hi) = (t[4 * g], t[4 * g + 1]);
        let (lo2, hi2) = (t[4 * g + 2], t[4 * g + 3]);
        u[4 * g] = _mm512_shuffle_ps::<0x44>(lo, lo2);
        u[4 * g + 1] = _mm512_shuffle_ps::<0xEE>(lo, lo2);
        u[4 * g + 2] = _mm512_shuffle_ps::<0x44>(hi, hi2);
        u[4 * g + 3] = _mm512_shuffle_ps::<0xEE>(hi, hi2);
    }
    // w: rows 0..8 (and 8..16) of elements k, k + 8 (and k + 4, k + 12)
    let mut w = [_mm512_setzero_ps(); 16];
    for h in 0..2 {
        for k in 0..4 {
            let (a, b) = (u[8 * h + k], u[8 * h + 4 + k]);
            w[8 * h + k] = _mm512_shuffle_f32x4::<0x88>(a, b);
            w[8 * h + 4 + k] = _mm512_shuffle_f32x4::<0xDD>(a, b);
        }
    }
    let mut out = [_mm512_setzero_ps(); 16];
    for k in 0..8 {
        let (a, b) = (w[k], w[8 + k]);
        out[k] = _mm512_shuffle_f32x4::<0x88>(a, b);
        out[k + 8] = _mm512_shuffle_f32x4::<0xDD>(a, b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposes() {
        if !crate::simd::features::cpu().avx512f {
            return;
        }
        let m: Vec<f32> = (0..256).map(|i| i as f32).collect();
        let mut got = [0f32; 256];
        // SAFETY: AVX-512F is available; m and got hold 256 floats.
        unsafe {
            let r: [__m512; 16] = std::array::from_fn(|i| _mm512_loadu_ps(m.as_ptr().add(16 * i)));
            for (i, v) in transpose16(r).iter().enumerate() {
                _mm512_storeu_ps(got.as_mut_ptr().add(16 * i), *v);
            }
        }
        for i in 0..16 {
            for j in 0..16 {
                assert_eq!(got[16 * i + j], m[16 * j + i]);
            }
        }
    }
}
