//! Q8_0 / Q8_1 activations (`quantize_row_q8_0` / `_q8_1`) with AVX-512: one block of 32
//! values in two registers. The result is the scalar loop's to the bit: the largest |x| does
//! not depend on the order it is found in, the scale and its inverse are the same scalar
//! divisions, each code is one product rounded half to even (cvtps2dq under the default
//! rounding mode, as the 1.5 * 2^23 trick rounds), and |code| <= 127 so narrowing it to a byte
//! keeps it.

use std::arch::x86_64::*;

/// Quantizes `src` (a multiple of 32 values) into blocks of `bs` bytes (34: Q8_0, 36: Q8_1)
/// with the 32 codes last; returns nothing itself but calls `head(d, sum of codes, out)` per
/// block for the block's header.
///
/// # Safety
/// AVX-512 F/BW/VL are available; `dst` holds src.len() / 32 blocks of `bs` >= 32 bytes.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(crate) unsafe fn q8_blocks(
    src: &[f32],
    dst: &mut [u8],
    bs: usize,
    head: &impl Fn(f32, i32, &mut [u8]),
) {
    let abs_mask = _mm512_set1_epi32(0x7fff_ffff);
    for (x, out) in src.chunks_exact(32).zip(dst.chunks_exact_mut(bs)) {
        // SAFETY: x holds 32 floats; out's last 32 bytes take the codes.
        unsafe {
            let v0 = _mm512_loadu_ps(x.as_ptr());
            let v1 = _mm512_loadu_ps(x.as_ptr().add(16));
            let a0 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v0), abs_mask));
            let a1 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v1), abs_mask));
            let amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
            let d = amax / 127.0;
            let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
            let m = _mm512_set1_ps(id);
            let q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, m));
            let q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, m));
            let sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
            let qs = out.as_mut_ptr().add(bs - 32);
            _mm_storeu_si128(qs as *mut __m128i, _mm512_cvtepi32_epi8(q0));
            _mm_storeu_si128(qs.add(16) as *mut __m128i, _mm512_cvtepi32_epi8(q1));
            head(d, sum, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::dot::{q8_blocks as scalar, quantize_row_q8_0, quantize_row_q8_1};

    /// Both quantizers against the scalar loop, byte for byte: random blocks, an all-zero
    /// block, halfway codes and a block whose largest value is negative.
    #[test]
    fn avx512_q8_blocks_equal_the_scalar_loop() {
        if !crate::simd::features::cpu().avx512bw_vl() {
            return;
        }
        let mut x: Vec<f32> = (0..32 * 40)
            .map(|i| ((i as f32 * 0.7311).sin() * 3.7).powi(3))
            .collect();
        x[32..64].fill(0.0);
        for (i, v) in x[64..96].iter_mut().enumerate() {
            *v = i as f32 + 0.5 - 16.0;
        }
        x[96] = -127.0;
        x[97] = 2.5;
        for (bs, f) in [
            (34usize, quantize_row_q8_0 as fn(&[f32], &mut [u8])),
            (36, quantize_row_q8_1),
        ] {
            let mut got = vec![0u8; x.len() / 32 * bs];
            f(&x, &mut got);
            let mut want = vec![0u8; x.len() / 32 * bs];
            scalar(&x, &mut want, bs, |d, sum| {
                let dh = crate::dot::fp32_to_fp16(d);
                let sh = (bs == 36).then(|| crate::dot::fp32_to_fp16(d * sum as f32));
                (dh, sh)
            });
            assert_eq!(got, want, "block size {bs}");
        }
    }
}
