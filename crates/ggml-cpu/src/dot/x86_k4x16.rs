//! Q4_K times Q8_K in llama.cpp's q4_K_8x8 gemm order (`ktile::Order::RepackGemm`), 16 weight
//! rows a pass: the prompt-processing kernel of a Q4_K weight held in CPU_REPACK.
//!
//! Why this shape: a 4-row tile spends more instructions moving activations into place than
//! multiplying (lane broadcasts and transposes per column, all on one shuffle port). Here the
//! weight side is laid out once per block of 16 rows (`prep16`): register d holds dword d of
//! every row's codes, one row per 32-bit lane. One activation dword broadcast from memory
//! (a load, no shuffle) then feeds a vpdpbusd that sums 4 values of all 16 rows, and each
//! lane's total is already its row's: no horizontal sums.
//!
//! Every float step is the gemm's: per 64 values, acc = fma(f32(S), dx * dy, acc) and
//! acc_min = fma(f32(M), dmin * dy, acc_min), the cell acc - acc_min. S is formed in f32 from
//! its two 32-value halves times their scales; each product and the sum stay below 2^24 in
//! magnitude (32 * 15 * 128 * 63 * 2), so f32 holds them exactly and S equals the integer sum.

// the kernels' loops index per-column register arrays and block offsets together
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;

/// Rows of one pass.
pub(crate) const ROWS: usize = 16;

// One prepared block of 16 rows: dword d of every row's 128 code bytes (32 x 64 bytes), then
// the rows' d and dmin as f32, the 8 subblock scales as f32 (16 lanes each) and per 64 values
// the two mins as one i16 pair (16 lanes each).
const QS: usize = 0;
const DX: usize = 32 * 64;
const DMIN: usize = DX + 64;
const SC: usize = DMIN + 64;
const MN: usize = SC + 8 * 64;
/// Bytes of one prepared block.
pub(crate) const PREP_BLOCK: usize = MN + 4 * 64;

/// Writes `nb` prepared blocks of up to 16 rows to `dst`: row r's block ib is at x[r] +
/// stride * ib; rows past `n` are zero (their results are zero and not used).
///
/// The codes go through two 16 x 16 dword transposes in registers; the scales row by row.
///
/// # Safety
/// AVX-512F is available; x[r] for r < n points at nb Q4_K blocks (144 bytes each) `stride`
/// bytes apart; dst holds nb * PREP_BLOCK bytes.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn prep16(
    nb: usize,
    stride: usize,
    x: &[*const u8; ROWS],
    n: usize,
    dst: *mut u8,
) {
    // SAFETY: the caller's promise on dst.
    let dst = unsafe { std::slice::from_raw_parts_mut(dst, nb * PREP_BLOCK) };
    if n < ROWS {
        dst.fill(0);
    }
    for (ib, o) in dst.chunks_exact_mut(PREP_BLOCK).enumerate() {
        for h in 0..2 {
            // SAFETY: row r < n has 144 readable bytes at x[r] + stride * ib, of which the 64
            // at 16 + 64h are codes; o holds PREP_BLOCK bytes, QS + 64 * 32 of them codes.
            unsafe {
                let r: [__m512; ROWS] = std::array::from_fn(|r| {
                    if r < n {
                        _mm512_loadu_ps(x[r].add(stride * ib + 16 + 64 * h) as *const f32)
                    } else {
                        _mm512_setzero_ps()
                    }
                });
                let t = crate::simd::transpose::transpose16(r);
                for (d, v) in t.iter().enumerate() {
                    _mm512_storeu_ps(o.as_mut_ptr().add(QS + 64 * (16 * h + d)) as *mut f32, *v);
                }
            }
        }
        for (r, &row) in x.iter().enumerate().take(n) {
            // SAFETY: the caller's promise: block ib of row r is 144 readable bytes.
            let b = unsafe { std::slice::from_raw_parts(row.add(stride * ib), 144) };
            put_row_scales(o, b, r, 64, [DX, DMIN, SC, MN]);
        }
    }
}

/// Row r's lane (4 bytes at 4r of each vector of `vec` bytes) of a prepared block o, from its
/// Q4_K block b: d and dmin as f32 at at[0] and at[1], subblock scale j as f32 at at[2] +
/// vec * j, the mins of 64 values p as one i16 pair at at[3] + vec * p.
pub(crate) fn put_row_scales(o: &mut [u8], b: &[u8], r: usize, vec: usize, at: [usize; 4]) {
    let [dx, dmin, sc0, mn0] = at;
    let half = |i: usize| crate::fp::f16_to_f32(u16::from_le_bytes([b[i], b[i + 1]]));
    o[dx + 4 * r..dx + 4 * r + 4].copy_from_slice(&half(0).to_le_bytes());
    o[dmin + 4 * r..dmin + 4 * r + 4].copy_from_slice(&half(2).to_le_bytes());
    let (sc, mn) = crate::ops::ktile::k4_scales(&b[4..16]);
    for (j, s) in sc.iter().enumerate() {
        let at = sc0 + vec * j + 4 * r;
        o[at..at + 4].copy_from_slice(&(*s as f32).to_le_bytes());
    }
    for p in 0..4 {
        let at = mn0 + vec * p + 4 * r;
        o[at..at + 2].copy_from_slice(&(mn[2 * p] as u16).to_le_bytes());
        o[at + 2..at + 4].copy_from_slice(&(mn[2 * p + 1] as u16).to_le_bytes());
    }
}

/// The 16 prepared rows at `prep` (`prep16`, nb blocks) times C Q8_K columns: out[c][r] is
/// bit for bit `ktile::dot_ref(Q4_K, RepackGemm, ..)` of row r and column c.
///
/// # Safety
/// `x86_k512::available()`; prep holds nb prepared blocks, each b[c] points at nb Q8_K blocks.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
pub(crate) unsafe fn gemm16<const C: usize>(
    nb: usize,
    prep: *const u8,
    b: &[*const u8; C],
    out: &mut [[f32; ROWS]; C],
) {
    let m4 = _mm512_set1_epi8(0x0F);
    let mut acc = [_mm512_setzero_ps(); C];
    let mut acc_min = [_mm512_setzero_ps(); C];
    for ib in 0..nb {
        // SAFETY: block ib of the prepared rows and of every column lies within the nb blocks
        // the caller vouches for; every offset below stays inside its block.
        unsafe {
            let w = prep.add(ib * PREP_BLOCK);
            let dx = _mm512_loadu_ps(w.add(DX) as *const f32);
            let dmin = _mm512_loadu_ps(w.add(DMIN) as *const f32);
            let by: [*const u8; C] = std::array::from_fn(|c| b[c].add(292 * ib));
            // per column, activation sums per 32 values in pairs: dword p = sums 2p, 2p + 1
            let mut bsp = [[0i32; 4]; C];
            for c in 0..C {
                let bs = _mm256_loadu_si256(by[c].add(260) as *const __m256i);
                let bs32 =
                    _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
                _mm_storeu_si128(bsp[c].as_mut_ptr() as *mut __m128i, bs32);
            }
            for p in 0..4 {
                let mut se = [_mm512_setzero_si512(); C];
                let mut so = [_mm512_setzero_si512(); C];
                for k in 0..8 {
                    let q = _mm512_loadu_si512(w.add(QS + 64 * (8 * p + k)) as *const __m512i);
                    // low nibbles: values 64p + 4k.. (subblock 2p); high: 32 further on
                    let lo = _mm512_and_si512(q, m4);
                    let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(q), m4);
                    for c in 0..C {
                        let y = by[c].add(4 + 64 * p + 4 * k) as *const i32;
                        let ye = _mm512_set1_epi32(y.read_unaligned());
                        let yo = _mm512_set1_epi32(y.add(8).read_unaligned());
                        se[c] = _mm512_dpbusd_epi32(se[c], lo, ye);
                        so[c] = _mm512_dpbusd_epi32(so[c], hi, yo);
                    }
                }
                let sce = _mm512_loadu_ps(w.add(SC + 64 * 2 * p) as *const f32);
                let sco = _mm512_loadu_ps(w.add(SC + 64 * (2 * p + 1)) as *const f32);
                let mn = _mm512_loadu_si512(w.add(MN + 64 * p) as *const __m512i);
                for c in 0..C {
                    let s = _mm512_fmadd_ps(
                        _mm512_cvtepi32_ps(so[c]),
                        sco,
                        _mm512_mul_ps(_mm512_cvtepi32_ps(se[c]), sce),
                    );
                    let m = _mm512_madd_epi16(mn, _mm512_set1_epi32(bsp[c][p]));
                    let dy = _mm512_set1_ps((by[c] as *const f32).read_unaligned());
                    let (ds, dm) = (_mm512_mul_ps(dx, dy), _mm512_mul_ps(dmin, dy));
                    acc[c] = _mm512_fmadd_ps(s, ds, acc[c]);
                    acc_min[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), dm, acc_min[c]);
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
    use crate::ops::ktile::{dot_ref, quant_rows, Order};
    use ggml::Type;

    fn check<const C: usize>(k: usize, n: usize, seed: usize) {
        let nb = k / 256;
        let rows = quant_rows(Type::Q4K, k, n, seed);
        let cols = quant_rows(Type::Q8K, k, C, seed + 7);
        let x: [*const u8; ROWS] =
            std::array::from_fn(|r| rows.get(r).map_or(std::ptr::null(), |v| v.as_ptr()));
        let mut prep = vec![0u8; nb * PREP_BLOCK];
        let b: [*const u8; C] = std::array::from_fn(|c| cols[c].as_ptr());
        let mut out = [[f32::NAN; ROWS]; C];
        // SAFETY: rows r < n hold nb blocks 144 bytes apart; prep nb blocks; available().
        unsafe {
            prep16(nb, 144, &x, n, prep.as_mut_ptr());
            gemm16::<C>(nb, prep.as_ptr(), &b, &mut out);
        }
        for c in 0..C {
            for r in 0..n {
                let want = dot_ref(Type::Q4K, Order::RepackGemm, nb, &rows[r], &cols[c]);
                assert_eq!(out[c][r].to_bits(), want.to_bits(), "k {k} row {r} col {c}");
            }
            for r in n..ROWS {
                assert_eq!(out[c][r], 0.0, "padding row {r}");
            }
        }
    }

    #[test]
    fn gemm16_equals_the_repacked_gemm_order_bit_for_bit() {
        if !crate::dot::x86_k512::available() {
            eprintln!("skipped: no AVX-512 VNNI");
            return;
        }
        check::<1>(256, 16, 1);
        check::<3>(256 * 3, 8, 2);
        check::<4>(256 * 9, 16, 3);
        check::<4>(256 * 22, 16, 5);
    }
}
