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

/// Q8_K activations (`quantize_row_q8_K`) with AVX-512, byte for byte `q8_k_from_float`:
/// the block's largest |x| (its first occurrence gives the sign), codes rounded half to even
/// from one product each and capped at 127, and the 16 sums of 16 codes through one 16 x 16
/// transpose of the codes' dwords.
///
/// # Safety
/// AVX-512 F/BW/VL are available; src holds a multiple of 256 values and dst 292 bytes per
/// 256 of them.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(crate) unsafe fn q8_k_blocks(src: &[f32], dst: &mut [u8]) {
    let abs_mask = _mm512_set1_epi32(0x7fff_ffff);
    let cap = _mm512_set1_epi32(127);
    for (x, out) in src.chunks_exact(256).zip(dst.chunks_exact_mut(292)) {
        // SAFETY: x holds 256 floats, out 292 bytes (d, 256 codes, 16 sums).
        unsafe {
            let v: [__m512; 16] = std::array::from_fn(|i| _mm512_loadu_ps(x.as_ptr().add(16 * i)));
            let abs =
                v.map(|r| _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(r), abs_mask)));
            let amax = _mm512_reduce_max_ps(
                abs.iter()
                    .fold(_mm512_setzero_ps(), |m, &a| _mm512_max_ps(m, a)),
            );
            if amax == 0.0 {
                out.fill(0);
                continue;
            }
            let am = _mm512_set1_ps(amax);
            let mut max = amax;
            for (i, a) in abs.iter().enumerate() {
                let hit = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(*a, am);
                if hit != 0 {
                    max = x[16 * i + hit.trailing_zeros() as usize];
                    break;
                }
            }
            let iscale = -127.0f32 / max;
            let m = _mm512_set1_ps(iscale);
            let q = v.map(|r| _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(r, m)), cap));
            out[0..4].copy_from_slice(&(1.0 / iscale).to_le_bytes());
            let qs = out.as_mut_ptr().add(4);
            for (i, r) in q.iter().enumerate() {
                _mm_storeu_si128(qs.add(16 * i) as *mut __m128i, _mm512_cvtepi32_epi8(*r));
            }
            // lane j of row d of the transpose is code d of group j: the rows' sum is the
            // 16 groups' sums (integers: any order)
            let t = crate::simd::transpose::transpose16(q.map(|r| _mm512_castsi512_ps(r)));
            let sums = t.iter().fold(_mm512_setzero_si512(), |acc, r| {
                _mm512_add_epi32(acc, _mm512_castps_si512(*r))
            });
            _mm256_storeu_si256(
                out.as_mut_ptr().add(260) as *mut __m256i,
                _mm512_cvtepi32_epi16(sums),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::dot::{q8_blocks as scalar, q8_k_scalar, quantize_row_q8_0, quantize_row_q8_1};

    #[test]
    fn avx512_q8_k_blocks_equal_the_scalar_loop() {
        if !crate::simd::features::cpu().avx512bw_vl() {
            return;
        }
        let mut x: Vec<f32> = (0..256 * 9)
            .map(|i| ((i as f32 * 0.3731).sin() * 5.3).powi(3))
            .collect();
        x[256..512].fill(0.0);
        // a negative largest value, then one that appears twice with both signs
        x[600] = -1000.0;
        x[800] = 900.0;
        x[790] = -900.0;
        for (i, v) in x[1024..1280].iter_mut().enumerate() {
            *v = i as f32 * 0.5 - 64.0;
        }
        let mut got = vec![0u8; 9 * 292];
        // SAFETY: AVX-512 F/BW/VL are available; sizes match.
        unsafe { super::q8_k_blocks(&x, &mut got) };
        let mut want = vec![0u8; 9 * 292];
        q8_k_scalar(&x, &mut want);
        assert_eq!(got, want);
    }

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
