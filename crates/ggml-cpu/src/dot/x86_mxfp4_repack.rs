//! MXFP4 times Q8_0 in the float order of llama.cpp's mxfp4_8x8_q8_0 kernels (x86, chosen where
//! llama.cpp has AVX2): the weight held in CPU_REPACK in MXFP4 panels
//! (`repack::Layout::Mxfp4Panels`), 16 rows a pass (8 for a weight's last panel when rows % 16
//! == 8).
//!
//! The order (per weight row and activation column; llama.cpp's gemm_q4_b32_8x8_q8_0_lut_avx,
//! AVX-512BW/DQ and AVX2 paths, and gemv_q4_b32_8x8_q8_0_lut_avx alike): per 32-value block,
//! S = the block's exact integer sum of code x activation (codes from kvalues_mxfp4, no i16
//! saturation for codes up to 12), then acc = fma(f32(S), e8m0_half(e) * dy, acc) from acc = 0,
//! the block's scale product rounded to f32 first. The gemm and the gemv take the same steps,
//! so a cell's bits do not depend on which of the two llama.cpp runs for its column.
//!
//! `dot_ref` is the scalar reference; `panel` computes it with one row per 32-bit lane: one
//! register holds the same qs dword of every row of the panel, its nibbles looked up as codes
//! + 12 (unsigned, for vpdpbusd), and 12 * (the block's activation sum) taken off again.
//!
//! `panel_avx2` (CPUs with AVX2 but no AVX-512 VNNI, where llama.cpp repacks too) takes the
//! same steps on 8 rows a register: vpmaddubsw of the biased codes and the signed activations
//! (two products of at most 24 * 128 per i16 lane), four such sums added in i16 (at most
//! 24576 in magnitude, no saturation), vpmaddwd by ones to i32, so the same exact S.

// the kernel's loops index per-column register arrays and block offsets together
#![allow(clippy::needless_range_loop)]

use crate::repack::MXFP4_BLOCK;
use ggml::quants::{e8m0_to_fp32_half, KVALUES_MXFP4};
use std::arch::x86_64::*;

/// Rows of a full panel.
pub(crate) const ROWS: usize = 16;
/// Bytes of one Q8_0 block: d (f16), 32 i8.
const Q8: usize = 34;
/// What `panel` adds to every code so that it is unsigned (0..=24).
const BIAS: i32 = 12;

/// Whether `panel` runs on this CPU.
pub(crate) fn available() -> bool {
    crate::simd::features::cpu().avx512_dot()
}

/// Whether `panel_avx2` runs on this CPU (AVX2, FMA, F16C: the set of the other AVX2 kernels
/// and of `ops::qtile`, which CPU_REPACK's layouts need anyway).
pub(crate) fn avx2_available() -> bool {
    crate::simd::features::cpu().avx2_dot()
}

fn half(b: &[u8], o: usize) -> f32 {
    crate::fp::f16_to_f32(u16::from_le_bytes([b[o], b[o + 1]]))
}

/// One MXFP4 block `x` (GGUF bytes: e, 16 qs) times one Q8_0 block `y`: the exact sum of its
/// 32 code x activation products.
pub(crate) fn block_sum_ref(x: &[u8], y: &[u8]) -> i32 {
    (0..16)
        .map(|j| {
            let (lo, hi) = (x[1 + j] & 15, x[1 + j] >> 4);
            KVALUES_MXFP4[lo as usize] as i32 * y[2 + j] as i8 as i32
                + KVALUES_MXFP4[hi as usize] as i32 * y[18 + j] as i8 as i32
        })
        .sum()
}

/// One weight row `x` (nb MXFP4 blocks, GGUF bytes) times one Q8_0 column `y` in llama.cpp's
/// repacked order (gemm and gemv alike).
pub(crate) fn dot_ref(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut acc = 0.0f32;
    for ib in 0..nb {
        let (xb, yb) = (&x[ib * MXFP4_BLOCK..], &y[ib * Q8..]);
        let scale = e8m0_to_fp32_half(xb[0]) * half(yb, 0);
        acc = (block_sum_ref(xb, yb) as f32).mul_add(scale, acc);
    }
    acc
}

/// `BIAS` times the sum of each of the nb blocks' 32 activations of the Q8_0 column `y`: what
/// `panel` takes off each block's biased sum.
pub(crate) fn column_bias(nb: usize, y: &[u8], out: &mut [i32]) {
    for (ib, o) in out[..nb].iter_mut().enumerate() {
        let qs = &y[ib * Q8 + 2..ib * Q8 + Q8];
        *o = BIAS * qs.iter().map(|&v| v as i8 as i32).sum::<i32>();
    }
}

/// The `n` rows (16, or 8 for a last panel) of one MXFP4 panel at `x` (nb blocks in
/// `repack::Layout::Mxfp4Panels`) times C Q8_0 columns: out[c][r] is bit for bit `dot_ref` of
/// row r and column c; lanes r >= n are zero. bias[c] holds `column_bias` of column c.
///
/// # Safety
/// `available()`; x holds nb panel blocks of n rows (n * 17 bytes each); each y[c] points at
/// nb Q8_0 blocks and each bias[c] at nb i32.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn panel<const C: usize>(
    nb: usize,
    n: usize,
    x: *const u8,
    y: &[*const u8; C],
    bias: &[*const i32; C],
    out: &mut [[f32; ROWS]; C],
) {
    // rows past n: masked loads give code 0 (its biased code 12, taken off again) and e 0
    let mask: __mmask16 = if n == ROWS { 0xFFFF } else { 0x00FF };
    let lut_bytes: [u8; 16] = std::array::from_fn(|i| (KVALUES_MXFP4[i] as i32 + BIAS) as u8);
    // SAFETY: lut_bytes holds 16 bytes.
    let lut = _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(lut_bytes.as_ptr() as *const _) });
    let m4 = _mm512_set1_epi8(0x0F);
    let (one, two) = (_mm512_set1_epi32(1), _mm512_set1_epi32(2));
    let tiny = _mm512_set1_epi32(0x0020_0000);
    let mut acc = [_mm512_setzero_ps(); C];
    for ib in 0..nb {
        // SAFETY: block ib of the panel (n * 17 bytes), of every column (34 bytes) and of every
        // bias (one i32) lies within the nb blocks the caller vouches for; every offset below
        // stays in its block, and the masked loads touch only the n rows' bytes.
        unsafe {
            let b = x.add(ib * n * MXFP4_BLOCK);
            // e8m0_to_fp32_half of every row's e: (e - 1) << 23, or 0x00200000 << e for e < 2
            let e = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mask, b as *const i8));
            let small = _mm512_cmplt_epu32_mask(e, two);
            let dx = _mm512_castsi512_ps(_mm512_mask_blend_epi32(
                small,
                _mm512_slli_epi32::<23>(_mm512_sub_epi32(e, one)),
                _mm512_sllv_epi32(tiny, e),
            ));
            // qs dword j of every row: values 4j..4j + 4 (low nibbles), 16 + 4j.. (high)
            let mut lo = [_mm512_setzero_si512(); 4];
            let mut hi = [_mm512_setzero_si512(); 4];
            for j in 0..4 {
                let q = _mm512_maskz_loadu_epi32(mask, b.add(n + 4 * n * j) as *const i32);
                lo[j] = _mm512_shuffle_epi8(lut, _mm512_and_si512(q, m4));
                hi[j] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi32::<4>(q), m4));
            }
            for c in 0..C {
                let yb = y[c].add(Q8 * ib);
                let bcast =
                    |o: usize| _mm512_set1_epi32((yb.add(o) as *const i32).read_unaligned());
                let mut dot = _mm512_setzero_si512();
                for j in 0..4 {
                    dot = _mm512_dpbusd_epi32(dot, lo[j], bcast(2 + 4 * j));
                    dot = _mm512_dpbusd_epi32(dot, hi[j], bcast(18 + 4 * j));
                }
                let s = _mm512_sub_epi32(dot, _mm512_set1_epi32(bias[c].add(ib).read_unaligned()));
                let dy = _mm512_set1_ps(crate::fp::f16c_at(yb));
                acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dx, dy), acc[c]);
            }
        }
    }
    for c in 0..C {
        // lanes past n: zero codes and e 0 give 0 * tiny scale = 0
        // SAFETY: out[c] holds 16 floats.
        unsafe { _mm512_storeu_ps(out[c].as_mut_ptr(), acc[c]) };
    }
}

/// `panel` without AVX-512: the same arguments and the same bits (out[c][r] is `dot_ref` of row
/// r and column c; lanes r >= n are zero), one register per 8 rows of the panel.
///
/// # Safety
/// `avx2_available()`; x holds nb panel blocks of n rows (n = 16 or 8; n * 17 bytes each);
/// each y[c] points at nb Q8_0 blocks and each bias[c] at nb i32.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn panel_avx2<const C: usize>(
    nb: usize,
    n: usize,
    x: *const u8,
    y: &[*const u8; C],
    bias: &[*const i32; C],
    out: &mut [[f32; ROWS]; C],
) {
    debug_assert!(n == ROWS || n == ROWS / 2);
    let lut_bytes: [u8; 16] = std::array::from_fn(|i| (KVALUES_MXFP4[i] as i32 + BIAS) as u8);
    // SAFETY: lut_bytes holds 16 bytes.
    let lut =
        _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(lut_bytes.as_ptr() as *const _) });
    let m4 = _mm256_set1_epi8(0x0F);
    let ones = _mm256_set1_epi16(1);
    let (one, two) = (_mm256_set1_epi32(1), _mm256_set1_epi32(2));
    let tiny = _mm256_set1_epi32(0x0020_0000);
    // each 8 rows of the panel in turn: C accumulators and 8 code registers stay in registers
    for h in 0..n / 8 {
        let mut acc = [_mm256_setzero_ps(); C];
        for ib in 0..nb {
            // SAFETY: block ib of the panel (n * 17 bytes), of every column (34 bytes) and of
            // every bias (one i32) lies within the nb blocks the caller vouches for; rows
            // 8h..8h + 8 are rows of the panel (h < n / 8), so every load below stays in its
            // block.
            unsafe {
                let b = x.add(ib * n * MXFP4_BLOCK);
                // e8m0_to_fp32_half of the 8 rows' e: (e - 1) << 23, or 0x00200000 << e for e < 2
                let e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(b.add(8 * h) as *const __m128i));
                let dx = _mm256_castsi256_ps(_mm256_blendv_epi8(
                    _mm256_slli_epi32::<23>(_mm256_sub_epi32(e, one)),
                    _mm256_sllv_epi32(tiny, e),
                    _mm256_cmpgt_epi32(two, e),
                ));
                // qs dword j of the 8 rows: values 4j..4j + 4 (low nibbles), 16 + 4j.. (high)
                let mut lo = [_mm256_setzero_si256(); 4];
                let mut hi = [_mm256_setzero_si256(); 4];
                for j in 0..4 {
                    let q = _mm256_loadu_si256(b.add(n + 4 * n * j + 32 * h) as *const __m256i);
                    lo[j] = _mm256_shuffle_epi8(lut, _mm256_and_si256(q, m4));
                    hi[j] =
                        _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4));
                }
                for c in 0..C {
                    let yb = y[c].add(Q8 * ib);
                    let bcast =
                        |o: usize| _mm256_set1_epi32((yb.add(o) as *const i32).read_unaligned());
                    // i16 lanes: codes + 12 <= 24 times activations >= -128, two products per
                    // vpmaddubsw lane and four of those added: |sum| <= 24576, exact
                    let mut sl = _mm256_maddubs_epi16(lo[0], bcast(2));
                    let mut sh = _mm256_maddubs_epi16(hi[0], bcast(18));
                    for j in 1..4 {
                        sl = _mm256_add_epi16(sl, _mm256_maddubs_epi16(lo[j], bcast(2 + 4 * j)));
                        sh = _mm256_add_epi16(sh, _mm256_maddubs_epi16(hi[j], bcast(18 + 4 * j)));
                    }
                    let dot =
                        _mm256_add_epi32(_mm256_madd_epi16(sl, ones), _mm256_madd_epi16(sh, ones));
                    let s =
                        _mm256_sub_epi32(dot, _mm256_set1_epi32(bias[c].add(ib).read_unaligned()));
                    let dy = _mm256_set1_ps(crate::fp::f16c_at(yb));
                    acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dx, dy), acc[c]);
                }
            }
        }
        for c in 0..C {
            // SAFETY: out[c] holds 16 floats; 8h + 8 <= 16.
            unsafe { _mm256_storeu_ps(out[c].as_mut_ptr().add(8 * h), acc[c]) };
        }
    }
    for o in out.iter_mut() {
        o[n..].fill(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::ktile::quant_rows;
    use crate::repack::tests::bytes;
    use crate::repack::{pack, Layout};
    use ggml::Type;

    /// `rows` MXFP4 rows of k values: quantized ones, or (`extreme`) random codes with codes
    /// +-12 in places and exponents over the whole byte range (0, 1: the subnormal halves).
    fn weight(k: usize, rows: usize, seed: usize, extreme: bool) -> Vec<u8> {
        if !extreme {
            return quant_rows(Type::Mxfp4, k, rows, seed).concat();
        }
        let mut w = bytes(rows * k / 32 * MXFP4_BLOCK, seed as u32);
        for (i, b) in w.chunks_exact_mut(MXFP4_BLOCK).enumerate() {
            match i % 5 {
                0 => b[1..].fill(0x77),
                1 => b[1..].fill(0xFF),
                _ => {}
            }
            b[0] = [0u8, 1, 2, 100, 127, 130, 200][i % 7];
        }
        w
    }

    /// `cols` Q8_0 columns: quantized ones, or (`extreme`) codes -128 / 127 in places.
    fn columns(k: usize, cols: usize, seed: usize, extreme: bool) -> Vec<Vec<u8>> {
        let mut v = quant_rows(Type::Q8_0, k, cols, seed);
        if extreme {
            for (c, col) in v.iter_mut().enumerate() {
                for (ib, b) in col.chunks_exact_mut(Q8).enumerate() {
                    if (ib + c) % 2 == 0 {
                        b[2..].fill(if c % 2 == 0 { 0x80 } else { 0x7F });
                    }
                }
            }
        }
        v
    }

    /// Every panel of a `rows` x `k` weight times C columns through `panel` (or `panel_avx2`)
    /// against `dot_ref`, bit for bit, and the padding lanes zero.
    fn check<const C: usize>(k: usize, rows: usize, seed: usize, extreme: bool, avx2: bool) {
        let nb = k / 32;
        let plain = weight(k, rows, seed, extreme);
        let mut packed = vec![0u8; plain.len()];
        let ne = [k as i64, rows as i64, 1, 1];
        pack(Layout::Mxfp4Panels, ne, &plain, &mut packed);
        let cols = columns(k, C, seed + 5, extreme);
        let biases: Vec<Vec<i32>> = cols
            .iter()
            .map(|y| {
                let mut b = vec![0i32; nb];
                column_bias(nb, y, &mut b);
                b
            })
            .collect();
        let y: [*const u8; C] = std::array::from_fn(|c| cols[c].as_ptr());
        let bias: [*const i32; C] = std::array::from_fn(|c| biases[c].as_ptr());
        let row = nb * MXFP4_BLOCK;
        for (r0, n) in crate::repack::panels(rows) {
            let mut out = [[f32::NAN; ROWS]; C];
            let x = packed[r0 * row..].as_ptr();
            if avx2 {
                // SAFETY: avx2_available() (the caller checks); the panel at r0 holds n rows of
                // nb blocks; columns and biases nb blocks.
                unsafe { panel_avx2::<C>(nb, n, x, &y, &bias, &mut out) };
            } else {
                // SAFETY: available() (the caller checks); as above.
                unsafe { panel::<C>(nb, n, x, &y, &bias, &mut out) };
            }
            for c in 0..C {
                for r in 0..n {
                    let x = &plain[(r0 + r) * row..(r0 + r + 1) * row];
                    let want = dot_ref(nb, x, &cols[c]);
                    assert_eq!(
                        out[c][r].to_bits(),
                        want.to_bits(),
                        "k {k} rows {rows} (avx2 {avx2}): row {} col {c}: {} vs {want}",
                        r0 + r,
                        out[c][r]
                    );
                }
                assert!(out[c][n..].iter().all(|v| *v == 0.0), "padding lanes");
            }
        }
    }

    #[test]
    fn mxfp4_panels_equal_the_repacked_order_bit_for_bit() {
        if !available() {
            eprintln!("skipped: no AVX-512 VNNI");
            return;
        }
        for extreme in [false, true] {
            check::<1>(32, 16, 1, extreme, false);
            check::<1>(64, 24, 2, extreme, false);
            check::<2>(32 * 3, 8, 3, extreme, false);
            check::<4>(32 * 9, 40, 4, extreme, false);
            check::<8>(32 * 16, 16, 6, extreme, false);
            check::<2>(32 * 33, 8, 7, extreme, false);
        }
    }

    /// `panel_avx2` gives `dot_ref`'s bits for 1..=33 blocks, 1, 2, 3, 4 and 8 columns, full
    /// panels and 8-row last panels (8, 24, 40 rows), on quantized and on extreme blocks (codes
    /// +-12 against activations -128 / 127 in whole blocks: the i16 sums' largest magnitudes;
    /// exponents 0 and 1).
    #[test]
    fn mxfp4_avx2_panels_equal_the_repacked_order_bit_for_bit() {
        if !avx2_available() {
            eprintln!("skipped: no AVX2/FMA/F16C");
            return;
        }
        for extreme in [false, true] {
            for nb in 1..=33 {
                let (k, s) = (32 * nb, nb * 7);
                check::<1>(k, [16, 8, 24][nb % 3], s, extreme, true);
                check::<2>(k, [8, 40, 16][nb % 3], s + 1, extreme, true);
                check::<3>(k, [24, 16][nb % 2], s + 2, extreme, true);
                check::<4>(k, [40, 8][nb % 2], s + 3, extreme, true);
                check::<8>(k, [16, 24][nb % 2], s + 4, extreme, true);
            }
        }
    }

    /// Whole blocks at the i16 bound: every code +12 (biased 24) or -12 (biased 0) against every
    /// activation -128 or 127, through `panel_avx2`, equal `dot_ref` and the exact sums.
    #[test]
    fn mxfp4_avx2_sums_do_not_saturate() {
        if !avx2_available() {
            eprintln!("skipped: no AVX2/FMA/F16C");
            return;
        }
        for (code, act) in [(0x77u8, 0x80u8), (0x77, 0x7F), (0xFF, 0x80), (0xFF, 0x7F)] {
            let nb = 3;
            let mut w = vec![0u8; 16 * nb * MXFP4_BLOCK];
            for b in w.chunks_exact_mut(MXFP4_BLOCK) {
                b[0] = 128;
                b[1..].fill(code);
            }
            let mut packed = vec![0u8; w.len()];
            pack(
                Layout::Mxfp4Panels,
                [32 * nb as i64, 16, 1, 1],
                &w,
                &mut packed,
            );
            let mut col = vec![0u8; nb * Q8];
            for b in col.chunks_exact_mut(Q8) {
                b[..2].copy_from_slice(&0x3C00u16.to_le_bytes()); // 1.0
                b[2..].fill(act);
            }
            let mut bias = vec![0i32; nb];
            column_bias(nb, &col, &mut bias);
            let mut out = [[f32::NAN; ROWS]; 1];
            // SAFETY: avx2_available(); one full panel of nb blocks, one column and its sums.
            unsafe {
                panel_avx2::<1>(
                    nb,
                    16,
                    packed.as_ptr(),
                    &[col.as_ptr()],
                    &[bias.as_ptr()],
                    &mut out,
                )
            };
            let c = if code == 0x77 { 12.0 } else { -12.0 };
            let a = (act as i8) as f32;
            // e 128 gives a scale of 1 (e8m0_half); each block sums 32 * c * a exactly
            let want = nb as f32 * 32.0 * c * a * ggml::quants::e8m0_to_fp32_half(128);
            for r in 0..16 {
                let x = &w[r * nb * MXFP4_BLOCK..(r + 1) * nb * MXFP4_BLOCK];
                assert_eq!(out[0][r].to_bits(), dot_ref(nb, x, &col).to_bits());
                assert_eq!(out[0][r], want, "code {code:#x} act {act:#x}");
            }
        }
    }

    /// The reference is llama.cpp's order and not the plain dot product's (ggml_vec_dot_mxfp4_q8_0
    /// sums two blocks' products per lane pair and adds them up at the end), and stays close to
    /// the dequantized product.
    #[test]
    fn the_order_differs_from_the_dot_product_and_approximates_the_product() {
        let (k, nb) = (32 * 64, 64);
        let w = weight(k, 16, 11, false);
        let cols = columns(k, 1, 12, false);
        let mut differ = 0;
        for r in 0..16 {
            let x = &w[r * nb * MXFP4_BLOCK..(r + 1) * nb * MXFP4_BLOCK];
            let got = dot_ref(nb, x, &cols[0]);
            let plain = crate::dot::fp4::mxfp4_q8_0(k, x, &cols[0]);
            differ += (got.to_bits() != plain.to_bits()) as usize;
            let mut xf = vec![0f32; k];
            let mut yf = vec![0f32; k];
            ggml::quants::dequantize_row(Type::Mxfp4, x, &mut xf);
            ggml::quants::dequantize_row(Type::Q8_0, &cols[0], &mut yf);
            let exact: f64 = xf.iter().zip(&yf).map(|(a, b)| *a as f64 * *b as f64).sum();
            let scale: f64 = xf
                .iter()
                .zip(&yf)
                .map(|(a, b)| (*a as f64 * *b as f64).abs())
                .sum();
            assert!(
                ((got as f64) - exact).abs() <= 1e-4 * scale,
                "{got} vs {exact}"
            );
        }
        assert!(
            differ > 0,
            "the repacked order gave the dot product's bits on every row"
        );
    }
}
