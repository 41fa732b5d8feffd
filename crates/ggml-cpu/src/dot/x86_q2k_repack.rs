//! Q2_K times Q8_K in the float orders of llama.cpp's q2_K_8x8_q8_K kernels (x86, chosen where
//! llama.cpp has AVX-512): the weight held in CPU_REPACK in Q2_K panels
//! (`repack::Layout::Q2KPanels`), 16 rows a pass (8 for a weight's last panel when rows % 16
//! == 8).
//!
//! The orders (per weight row and activation column, dx / dmin the row's block scales, dy the
//! column's): S = sum over a range of subblocks of scale * (codes . activations), M = sum of
//! min * (the subblock's activation sum), both exact integers (no i16 saturation for these code
//! ranges in llama.cpp's kernels either).
//! - gemm (ggml_gemm_q2_K_8x8_q8_K, AVX-512BW/DQ and AVX2 paths alike): per 128 values,
//!   acc = fma(f32(S), dx * dy, acc) and acc_min = fma(f32(M), dmin * dy, acc_min);
//! - gemv (ggml_gemv_q2_K_8x8_q8_K, AVX2): the same once per 256-value block;
//! - the cell is acc - acc_min.
//!
//! `dot_ref` is the scalar reference of both; `panel` computes them with one row per 32-bit
//! lane: one register holds the same qs dword of every row of the panel, so a vpdpbusd with
//! one broadcast activation dword sums 4 values of all rows and no horizontal sums are needed.

// the kernels' loops index per-column register arrays and block offsets together
#![allow(clippy::needless_range_loop)]

use crate::repack::{Q2K_BLOCK, Q2K_DMIN, Q2K_QS, Q2K_SC};
use std::arch::x86_64::*;

/// Rows of a full panel.
pub(crate) const ROWS: usize = 16;
/// Bytes of one Q8_K block: d (f32), 256 i8, 16 i16 sums of 16 values.
const Q8K: usize = 292;
const Q8K_BSUMS: usize = 260;

/// Whether `panel` runs on this CPU.
pub(crate) fn available() -> bool {
    crate::simd::features::cpu().avx512_dot()
}

fn half(b: &[u8], o: usize) -> f32 {
    crate::fp::f16_to_f32(u16::from_le_bytes([b[o], b[o + 1]]))
}

/// One Q2_K block `x` (GGUF bytes) times one Q8_K block `y`: per 128 values (h = 0, 1) the
/// exact sums S[h] = sum scale_j * (codes_j . y_j) and M[h] = sum min_j * bsum_j over its 8
/// subblocks j of 16 values.
pub(crate) fn block_sums_ref(x: &[u8], y: &[u8]) -> ([i32; 2], [i32; 2]) {
    let (sc, qs) = (&x[..16], &x[16..80]);
    let mut dots = [0i32; 16];
    for l in 0..256 {
        let (h, j) = (l / 128, l % 128);
        let q = (qs[32 * h + j % 32] >> (2 * (j / 32))) & 3;
        dots[l / 16] += q as i32 * y[4 + l] as i8 as i32;
    }
    let bsum = |j: usize| i16::from_le_bytes([y[Q8K_BSUMS + 2 * j], y[Q8K_BSUMS + 2 * j + 1]]);
    let (mut s, mut m) = ([0i32; 2], [0i32; 2]);
    for j in 0..16 {
        s[j / 8] += (sc[j] & 15) as i32 * dots[j];
        m[j / 8] += (sc[j] >> 4) as i32 * bsum(j) as i32;
    }
    (s, m)
}

/// One weight row `x` (nb Q2_K blocks, GGUF bytes) times one Q8_K column `y` in the gemm's
/// order (`gemm`) or the gemv's.
pub(crate) fn dot_ref(gemm: bool, nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (mut acc, mut acc_min) = (0.0f32, 0.0f32);
    for ib in 0..nb {
        let (xb, yb) = (&x[ib * Q2K_BLOCK..], &y[ib * Q8K..]);
        let (dx, dmin) = (half(xb, 80), half(xb, 82));
        let dy = f32::from_le_bytes([yb[0], yb[1], yb[2], yb[3]]);
        let (s, m) = block_sums_ref(xb, yb);
        if gemm {
            for h in 0..2 {
                acc = (s[h] as f32).mul_add(dx * dy, acc);
                acc_min = (m[h] as f32).mul_add(dmin * dy, acc_min);
            }
        } else {
            acc = ((s[0] + s[1]) as f32).mul_add(dx * dy, acc);
            acc_min = ((m[0] + m[1]) as f32).mul_add(dmin * dy, acc_min);
        }
    }
    acc - acc_min
}

/// The `n` rows (16, or 8 for a last panel) of one Q2_K panel at `x` (nb blocks in
/// `repack::Layout::Q2KPanels`) times C Q8_K columns: out[c][r] is bit for bit
/// `dot_ref(GEMM, ..)` of row r and column c; lanes r >= n are zero.
///
/// # Safety
/// `available()`; x holds nb panel blocks of n rows (n * 84 bytes each); each y[c] points at
/// nb Q8_K blocks.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn panel<const C: usize, const GEMM: bool>(
    nb: usize,
    n: usize,
    x: *const u8,
    y: &[*const u8; C],
    out: &mut [[f32; ROWS]; C],
) {
    // rows past n: masked loads give zero codes, scales and d
    let mask: __mmask16 = if n == ROWS { 0xFFFF } else { 0x00FF };
    let m3 = _mm512_set1_epi8(3);
    let m15 = _mm512_set1_epi32(15);
    let n4 = _mm512_set1_epi8(0x0F);
    // a dword's bytes 0, 1 (lo) or 2, 3 (hi) zero-extended to its two words
    let z = -128i8;
    let lo_idx = _mm512_broadcast_i32x4(_mm_setr_epi8(
        0, z, 1, z, 4, z, 5, z, 8, z, 9, z, 12, z, 13, z,
    ));
    let hi_idx = _mm512_broadcast_i32x4(_mm_setr_epi8(
        2, z, 3, z, 6, z, 7, z, 10, z, 11, z, 14, z, 15, z,
    ));
    let mut acc = [_mm512_setzero_ps(); C];
    let mut acc_min = [_mm512_setzero_ps(); C];
    for ib in 0..nb {
        // SAFETY: block ib of the panel (n * 84 bytes) and of every column (292 bytes) lies
        // within the nb blocks the caller vouches for; every offset below stays in its block,
        // and the masked loads touch only the n rows' bytes.
        unsafe {
            let b = x.add(ib * n * Q2K_BLOCK);
            let ld = |o: usize| _mm512_maskz_loadu_epi32(mask, b.add(o) as *const i32);
            let dx = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, b as *const i16));
            let dmin = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(
                mask,
                b.add(Q2K_DMIN * n) as *const i16,
            ));
            // scale dword g (subblocks 4g..4g + 4) and qs dword g of every row
            let sc = |g: usize| ld(Q2K_SC * n + 4 * n * g);
            let qs = |g: usize| ld(Q2K_QS * n + 4 * n * g);
            let by: [*const u8; C] = std::array::from_fn(|c| y[c].add(Q8K * ib));
            let bcast = |c: usize, o: usize| {
                _mm512_set1_epi32((by[c].add(o) as *const i32).read_unaligned())
            };
            let mut s_blk = [_mm512_setzero_si512(); C];
            let mut m_blk = [_mm512_setzero_si512(); C];
            for h in 0..2 {
                let mut s = [_mm512_setzero_si512(); C];
                let mut m = [_mm512_setzero_si512(); C];
                // qs byte i of half h holds values h*128 + 32*sh + i (shift 2*sh), subblock
                // 8h + 2*sh + i / 16: dwords 4t..4t + 4 of the half make subblock 8h + 2*sh + t
                for t in 0..2 {
                    for sh in 0..4 {
                        let j = 8 * h + 2 * sh + t;
                        let scale = _mm512_and_si512(
                            _mm512_srl_epi32(sc(j / 4), _mm_cvtsi32_si128(8 * (j % 4) as i32)),
                            m15,
                        );
                        let count = _mm_cvtsi32_si128(2 * sh as i32);
                        let mut dot = [_mm512_setzero_si512(); C];
                        for u in 0..4 {
                            let k = 4 * t + u;
                            let code = _mm512_and_si512(_mm512_srl_epi32(qs(8 * h + k), count), m3);
                            for c in 0..C {
                                let a = bcast(c, 4 + 128 * h + 32 * sh + 4 * k);
                                dot[c] = _mm512_dpbusd_epi32(dot[c], code, a);
                            }
                        }
                        // |dot| <= 16 * 3 * 128: its low word is the value, the scale's high
                        // word is zero
                        for c in 0..C {
                            s[c] = _mm512_add_epi32(s[c], _mm512_madd_epi16(dot[c], scale));
                        }
                    }
                }
                for g in 2 * h..2 * h + 2 {
                    let mins = _mm512_and_si512(_mm512_srli_epi32::<4>(sc(g)), n4);
                    let (lo, hi) = (
                        _mm512_shuffle_epi8(mins, lo_idx),
                        _mm512_shuffle_epi8(mins, hi_idx),
                    );
                    for c in 0..C {
                        // activation sums of subblocks 4g, 4g + 1 and 4g + 2, 4g + 3
                        m[c] = _mm512_dpwssd_epi32(m[c], lo, bcast(c, Q8K_BSUMS + 8 * g));
                        m[c] = _mm512_dpwssd_epi32(m[c], hi, bcast(c, Q8K_BSUMS + 8 * g + 4));
                    }
                }
                for c in 0..C {
                    if GEMM {
                        let dy = _mm512_set1_ps((by[c] as *const f32).read_unaligned());
                        acc[c] = _mm512_fmadd_ps(
                            _mm512_cvtepi32_ps(s[c]),
                            _mm512_mul_ps(dx, dy),
                            acc[c],
                        );
                        acc_min[c] = _mm512_fmadd_ps(
                            _mm512_cvtepi32_ps(m[c]),
                            _mm512_mul_ps(dmin, dy),
                            acc_min[c],
                        );
                    } else {
                        s_blk[c] = _mm512_add_epi32(s_blk[c], s[c]);
                        m_blk[c] = _mm512_add_epi32(m_blk[c], m[c]);
                    }
                }
            }
            if !GEMM {
                for c in 0..C {
                    let dy = _mm512_set1_ps((by[c] as *const f32).read_unaligned());
                    acc[c] = _mm512_fmadd_ps(
                        _mm512_cvtepi32_ps(s_blk[c]),
                        _mm512_mul_ps(dx, dy),
                        acc[c],
                    );
                    acc_min[c] = _mm512_fmadd_ps(
                        _mm512_cvtepi32_ps(m_blk[c]),
                        _mm512_mul_ps(dmin, dy),
                        acc_min[c],
                    );
                }
            }
        }
    }
    for c in 0..C {
        // SAFETY: out[c] holds 16 floats.
        unsafe { _mm512_storeu_ps(out[c].as_mut_ptr(), _mm512_sub_ps(acc[c], acc_min[c])) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::ktile::quant_rows;
    use crate::repack::tests::bytes;
    use crate::repack::{pack, Layout};
    use ggml::Type;

    /// `rows` Q2_K rows of k values: quantized ones, or (`extreme`) random codes and nibbles
    /// with scales 15 / mins 15 in places and finite block scales.
    fn weight(k: usize, rows: usize, seed: usize, extreme: bool) -> Vec<u8> {
        if !extreme {
            return quant_rows(Type::Q2K, k, rows, seed).concat();
        }
        let mut w = bytes(rows * k / 256 * Q2K_BLOCK, seed as u32);
        for (i, b) in w.chunks_exact_mut(Q2K_BLOCK).enumerate() {
            if i % 3 == 0 {
                b[..16].fill(0xFF);
                b[16..80].fill(0xFF);
            }
            let d = crate::fp::f32_to_f16(0.01 + (i % 7) as f32 * 0.37);
            let dmin = crate::fp::f32_to_f16(0.02 + (i % 5) as f32 * 0.11);
            b[80..82].copy_from_slice(&d.to_le_bytes());
            b[82..84].copy_from_slice(&dmin.to_le_bytes());
        }
        w
    }

    /// `cols` Q8_K columns: quantized ones, or (`extreme`) codes -128 / 127 in places.
    fn columns(k: usize, cols: usize, seed: usize, extreme: bool) -> Vec<Vec<u8>> {
        let mut v = quant_rows(Type::Q8K, k, cols, seed);
        if extreme {
            for (c, col) in v.iter_mut().enumerate() {
                for (ib, b) in col.chunks_exact_mut(Q8K).enumerate() {
                    if (ib + c) % 2 == 0 {
                        let fill = if c % 2 == 0 { 0x80 } else { 0x7F };
                        b[4..260].fill(fill);
                        let sum = 16 * (fill as i8) as i16;
                        for j in 0..16 {
                            b[260 + 2 * j..262 + 2 * j].copy_from_slice(&sum.to_le_bytes());
                        }
                    }
                }
            }
        }
        v
    }

    fn check<const C: usize, const GEMM: bool>(k: usize, rows: usize, seed: usize, extreme: bool) {
        let nb = k / 256;
        let plain = weight(k, rows, seed, extreme);
        let mut packed = vec![0u8; plain.len()];
        let ne = [k as i64, rows as i64, 1, 1];
        pack(Layout::Q2KPanels, ne, &plain, &mut packed);
        let cols = columns(k, C, seed + 5, extreme);
        let y: [*const u8; C] = std::array::from_fn(|c| cols[c].as_ptr());
        let row = nb * Q2K_BLOCK;
        for (r0, n) in crate::repack::panels(rows) {
            let mut out = [[f32::NAN; ROWS]; C];
            // SAFETY: available(); the panel at r0 holds n rows of nb blocks; columns nb blocks.
            unsafe { panel::<C, GEMM>(nb, n, packed[r0 * row..].as_ptr(), &y, &mut out) };
            for c in 0..C {
                for r in 0..n {
                    let x = &plain[(r0 + r) * row..(r0 + r + 1) * row];
                    let want = dot_ref(GEMM, nb, x, &cols[c]);
                    assert_eq!(
                        out[c][r].to_bits(),
                        want.to_bits(),
                        "k {k} rows {rows} gemm {GEMM}: row {} col {c}: {} vs {want}",
                        r0 + r,
                        out[c][r]
                    );
                }
                assert!(out[c][n..].iter().all(|v| *v == 0.0), "padding lanes");
            }
        }
    }

    #[test]
    fn q2_k_panels_equal_the_repacked_orders_bit_for_bit() {
        if !available() {
            eprintln!("skipped: no AVX-512 VNNI");
            return;
        }
        for extreme in [false, true] {
            check::<1, false>(256, 16, 1, extreme);
            check::<1, true>(512, 24, 2, extreme);
            check::<2, true>(256 * 3, 8, 3, extreme);
            check::<4, true>(256 * 9, 40, 4, extreme);
            check::<4, false>(256 * 4, 16, 6, extreme);
            check::<2, false>(256 * 2, 8, 7, extreme);
        }
    }

    /// The gemm and gemv orders differ (so the test above tells them apart) and both stay
    /// close to the dequantized product.
    #[test]
    fn the_orders_differ_and_approximate_the_product() {
        let (k, nb) = (256 * 8, 8);
        let w = weight(k, 8, 11, false);
        let cols = columns(k, 1, 12, false);
        let mut differ = 0;
        for r in 0..8 {
            let x = &w[r * nb * Q2K_BLOCK..(r + 1) * nb * Q2K_BLOCK];
            let (a, b) = (
                dot_ref(true, nb, x, &cols[0]),
                dot_ref(false, nb, x, &cols[0]),
            );
            differ += (a.to_bits() != b.to_bits()) as usize;
            let mut xf = vec![0f32; k];
            let mut yf = vec![0f32; k];
            ggml::quants::dequantize_row(Type::Q2K, x, &mut xf);
            ggml::quants::dequantize_row(Type::Q8K, &cols[0], &mut yf);
            let exact: f64 = xf.iter().zip(&yf).map(|(a, b)| *a as f64 * *b as f64).sum();
            let scale: f64 = xf
                .iter()
                .zip(&yf)
                .map(|(a, b)| (*a as f64 * *b as f64).abs())
                .sum();
            assert!(((a as f64) - exact).abs() <= 1e-4 * scale, "{a} vs {exact}");
        }
        assert!(
            differ > 0,
            "gemm and gemv orders gave the same bits on every row"
        );
    }
}
