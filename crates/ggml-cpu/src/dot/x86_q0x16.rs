//! Q8_0 / Q4_0 / Q5_0 weights times Q8_0 columns in the order of ggml's AVX2 dot products
//! (what `qtile::tile` computes), 16 weight rows a pass: prompt processing of these types in
//! plain memory.
//!
//! The order keeps 8 float lanes per cell, lane j summing values 4j..4j + 4 of every block
//! (fma(dx * dy, f32(exact lane sum), lane)), and adds the lanes at the end as `hsum_ps` does.
//! Here the 8 lanes of a cell live in 8 registers of 16 rows: register j of a prepared block
//! (`prep16`) holds values 4j..4j + 4 of every row, one row per 32-bit lane, so one vpdpbusd
//! with one broadcast activation dword gives lane j of 16 cells at once.
//!
//! vpdpbusd multiplies unsigned by signed bytes: the activations go in as y + 128 (`prep_cols`)
//! and the weights as signed codes; the extra 128 * (sum of the 4 codes) is a per-row constant
//! that `prep16` stores negated and each vpdpbusd starts from.

// the kernels' loops index per-column register arrays and block offsets together
#![allow(clippy::needless_range_loop)]

use ggml::Type;
use std::arch::x86_64::*;

/// Rows of one pass.
pub(crate) const ROWS: usize = 16;

// One prepared block of 16 rows: 8 registers of signed codes, 8 of -128 * (sum of their 4
// codes), then the rows' d as f32.
const QS: usize = 0;
const CORR: usize = 8 * 64;
const DX: usize = CORR + 8 * 64;
/// Bytes of one prepared block.
pub(crate) const PREP_BLOCK: usize = DX + 64;
/// Bytes of one prepared activation block: f32(dy), then the 32 values plus 128 as u8.
pub(crate) const COL_BLOCK: usize = 36;

/// Whether `ty` takes this kernel.
pub(crate) fn handles(ty: Type) -> bool {
    matches!(ty, Type::Q8_0 | Type::Q4_0 | Type::Q5_0)
}

/// Writes `nb` prepared blocks of rows 0..n of `ty` to `dst`: row r begins at x0 + r *
/// row_stride (blocks contiguous, GGUF order). Rows past n get d = 0 (their results are zero
/// and not used). Each block gathers dword t of the 16 rows' block at once.
///
/// # Safety
/// `x86_k512::available()`; rows 0..n (1 <= n <= 16) hold nb blocks of `ty` from x0 +
/// r * row_stride, and 16 * row_stride fits i32; dst holds nb * PREP_BLOCK bytes.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn prep16(
    ty: Type,
    nb: usize,
    x0: *const u8,
    row_stride: usize,
    n: usize,
    dst: *mut u8,
) {
    let bytes = ty.type_size();
    let idx: [i32; ROWS] = std::array::from_fn(|r| (r * row_stride) as i32);
    // SAFETY: idx holds 16 i32.
    let idx = unsafe { _mm512_loadu_si512(idx.as_ptr() as *const __m512i) };
    let mask: __mmask16 = if n >= ROWS { 0xFFFF } else { (1u16 << n) - 1 };
    let m4 = _mm512_set1_epi8(0x0F);
    let ones = _mm512_set1_epi8(1);
    let zero = _mm512_setzero_si512();
    for ib in 0..nb {
        // SAFETY: the gathers read, for the rows in mask only, bytes of block ib of that row;
        // the stores stay in prepared block ib.
        unsafe {
            let base = x0.add(bytes * ib);
            let o = dst.add(ib * PREP_BLOCK);
            let g = |off: usize| {
                _mm512_mask_i32gather_epi32::<1>(zero, mask, idx, base.add(off) as *const i32)
            };
            let d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g(0)));
            _mm512_storeu_ps(o.add(DX) as *mut f32, d);
            let mut q = [zero; 8];
            match ty {
                Type::Q8_0 => {
                    for (j, v) in q.iter_mut().enumerate() {
                        *v = g(2 + 4 * j);
                    }
                }
                Type::Q4_0 => {
                    let b8 = _mm512_set1_epi8(8);
                    for t in 0..4 {
                        let v = g(2 + 4 * t);
                        q[t] = _mm512_sub_epi8(_mm512_and_si512(v, m4), b8);
                        q[t + 4] =
                            _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16::<4>(v), m4), b8);
                    }
                }
                _ => {
                    let b16 = _mm512_set1_epi8(16);
                    let qh = g(2);
                    // 4 bits of qh to bit 4 of 4 bytes: copies at bits 0, 7, 14, 21 cannot
                    // overlap, so byte k's bit 0 is bit k
                    let spread = |bits: __m512i| {
                        let m = _mm512_mullo_epi32(
                            _mm512_and_si512(bits, _mm512_set1_epi32(0xF)),
                            _mm512_set1_epi32(0x0020_4081),
                        );
                        _mm512_slli_epi32::<4>(_mm512_and_si512(m, _mm512_set1_epi32(0x0101_0101)))
                    };
                    for t in 0..4 {
                        let v = g(6 + 4 * t);
                        let lo = _mm512_and_si512(v, m4);
                        let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(v), m4);
                        let hl = spread(_mm512_srlv_epi32(qh, _mm512_set1_epi32(4 * t as i32)));
                        let hh =
                            spread(_mm512_srlv_epi32(qh, _mm512_set1_epi32(16 + 4 * t as i32)));
                        q[t] = _mm512_sub_epi8(_mm512_or_si512(lo, hl), b16);
                        q[t + 4] = _mm512_sub_epi8(_mm512_or_si512(hi, hh), b16);
                    }
                }
            }
            for (j, v) in q.iter().enumerate() {
                let v = _mm512_maskz_mov_epi32(mask, *v);
                _mm512_storeu_si512(o.add(QS + 64 * j) as *mut __m512i, v);
                let sum = _mm512_dpbusd_epi32(zero, ones, v);
                let corr = _mm512_mullo_epi32(sum, _mm512_set1_epi32(-128));
                _mm512_storeu_si512(o.add(CORR + 64 * j) as *mut __m512i, corr);
            }
        }
    }
}

/// Writes one Q8_0 column's `nb` blocks at y as prepared activation blocks to dst.
///
/// # Safety
/// y points at nb Q8_0 blocks; dst holds nb * COL_BLOCK bytes.
pub(crate) unsafe fn prep_col(nb: usize, y: *const u8, dst: *mut u8) {
    for ib in 0..nb {
        // SAFETY: the caller's promise on both ranges.
        unsafe {
            let b = std::slice::from_raw_parts(y.add(34 * ib), 34);
            let o = std::slice::from_raw_parts_mut(dst.add(COL_BLOCK * ib), COL_BLOCK);
            let dy = crate::fp::f16_to_f32(u16::from_le_bytes([b[0], b[1]]));
            o[..4].copy_from_slice(&dy.to_le_bytes());
            for i in 0..32 {
                o[4 + i] = b[2 + i] ^ 0x80;
            }
        }
    }
}

/// The 16 prepared rows at `prep` (nb blocks) times C prepared columns: out[c][r] is bit for
/// bit ggml's AVX2 dot product of row r and column c.
///
/// # Safety
/// `x86_k512::available()`; prep holds nb prepared blocks, each b[c] nb prepared activation
/// blocks.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
pub(crate) unsafe fn gemm16<const C: usize>(
    nb: usize,
    prep: *const u8,
    b: &[*const u8; C],
    out: &mut [[f32; ROWS]; C],
) {
    let mut acc = [[_mm512_setzero_ps(); 8]; C];
    for ib in 0..nb {
        // SAFETY: block ib of the prepared rows and of every column lies within the nb blocks
        // the caller vouches for; every offset below stays inside its block.
        unsafe {
            let w = prep.add(ib * PREP_BLOCK);
            let dx = _mm512_loadu_ps(w.add(DX) as *const f32);
            let by: [*const u8; C] = std::array::from_fn(|c| b[c].add(COL_BLOCK * ib));
            let dd: [__m512; C] = std::array::from_fn(|c| {
                _mm512_mul_ps(dx, _mm512_set1_ps((by[c] as *const f32).read_unaligned()))
            });
            for j in 0..8 {
                let q = _mm512_loadu_si512(w.add(QS + 64 * j) as *const __m512i);
                let corr = _mm512_loadu_si512(w.add(CORR + 64 * j) as *const __m512i);
                for c in 0..C {
                    let y =
                        _mm512_set1_epi32((by[c].add(4 + 4 * j) as *const i32).read_unaligned());
                    let p = _mm512_dpbusd_epi32(corr, y, q);
                    acc[c][j] = _mm512_fmadd_ps(dd[c], _mm512_cvtepi32_ps(p), acc[c][j]);
                }
            }
        }
    }
    for c in 0..C {
        let a = &acc[c];
        // hsum_ps's order: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))
        let s = _mm512_add_ps(
            _mm512_add_ps(_mm512_add_ps(a[0], a[4]), _mm512_add_ps(a[2], a[6])),
            _mm512_add_ps(_mm512_add_ps(a[1], a[5]), _mm512_add_ps(a[3], a[7])),
        );
        // SAFETY: out[c] holds 16 floats.
        unsafe { _mm512_storeu_ps(out[c].as_mut_ptr(), s) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dot::{traits_for, SimdLevel};

    #[test]
    fn gemm16_equals_the_avx2_dot_products_bit_for_bit() {
        if !crate::dot::x86_k512::available() {
            eprintln!("skipped: no AVX-512 VNNI");
            return;
        }
        const C: usize = 3;
        for ty in [Type::Q8_0, Type::Q4_0, Type::Q5_0] {
            let tr = traits_for(SimdLevel::Avx2, ty).expect("traits");
            for (k, n) in [(32usize, 16usize), (640, 16), (32 * 7, 5)] {
                let nb = k / 32;
                let vals = |seed: usize| -> Vec<f32> {
                    (0..k)
                        .map(|i| ((i * 2654435761 + seed * 40503) % 1000) as f32 / 97.0 - 5.0)
                        .collect()
                };
                let rows: Vec<Vec<u8>> = (0..n)
                    .map(|r| {
                        let mut out = vec![0u8; ty.row_size(k as i64)];
                        ggml::quants::quantize_row_ref(ty, &vals(r), &mut out);
                        out
                    })
                    .collect();
                let cols: Vec<Vec<u8>> = (0..C)
                    .map(|c| {
                        let mut out = vec![0u8; Type::Q8_0.row_size(k as i64)];
                        (tr.from_float)(&vals(100 + c), &mut out);
                        out
                    })
                    .collect();
                let flat: Vec<u8> = rows.concat();
                let row_bytes = ty.row_size(k as i64);
                let mut prep = vec![0u8; nb * PREP_BLOCK];
                let mut pc = vec![0u8; C * nb * COL_BLOCK];
                let mut out = [[f32::NAN; ROWS]; C];
                // SAFETY: rows r < n and the columns hold nb blocks; the buffers are sized for
                // them; available() holds.
                unsafe {
                    prep16(ty, nb, flat.as_ptr(), row_bytes, n, prep.as_mut_ptr());
                    for c in 0..C {
                        prep_col(
                            nb,
                            cols[c].as_ptr(),
                            pc.as_mut_ptr().add(c * nb * COL_BLOCK),
                        );
                    }
                    let b: [*const u8; C] =
                        std::array::from_fn(|c| pc.as_ptr().add(c * nb * COL_BLOCK));
                    gemm16::<C>(nb, prep.as_ptr(), &b, &mut out);
                }
                for c in 0..C {
                    for r in 0..n {
                        let want = (tr.vec_dot)(k, &rows[r], &cols[c]);
                        assert_eq!(out[c][r].to_bits(), want.to_bits(), "{ty} k {k} ({r}, {c})");
                    }
                    for r in n..ROWS {
                        assert_eq!(out[c][r], 0.0, "{ty}: padding row {r}");
                    }
                }
            }
        }
    }
}
