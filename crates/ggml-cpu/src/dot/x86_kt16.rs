//! Q2_K / Q3_K / Q4_K / Q5_K / Q6_K times Q8_K in the tiled K-quant order (`ktile::Order::Tiled`),
//! 16 weight rows a pass: prompt processing of K-quant weights in plain memory.
//!
//! As in `x86_k4x16`, the rows are laid out once per block (`prep16`): register d holds codes
//! 4d..4d + 4 of every row, one row per 32-bit lane, so a vpdpbusd with one broadcast
//! activation dword sums 4 values of all 16 rows. The codes go in unsigned (as stored, bias
//! included); the bias comes off afterwards through the activation sums Q8_K keeps per 16
//! values: sum (q - bias) y = sum q y - bias * bsum.
//!
//! The integer parts are exact (|S| < 2^31 for every type's code and scale range), and the
//! float steps are the tiled order's: r = f32(S) * dx; r = fma(-dmin, f32(M), r) for the
//! types with mins; acc = fma(r, dy, acc).

// the kernels' loops index per-column register arrays and block offsets together
#![allow(clippy::needless_range_loop)]

use ggml::Type;
use std::arch::x86_64::*;

/// Rows of one pass.
pub(crate) const ROWS: usize = 16;

// One prepared block of 16 rows: 64 registers of codes, then per 16 values the scale (i32),
// per pair of 16-value subblocks their scales as one i16 pair and their mins as one i16 pair
// (Q4_K / Q5_K: the min of the 32 values twice), and the rows' d and dmin as f32; 16 lanes
// each.
const QS: usize = 0;
const SC: usize = 64 * 64;
const SCP: usize = SC + 16 * 64;
const MNP: usize = SCP + 8 * 64;
const DX: usize = MNP + 8 * 64;
const DMIN: usize = DX + 64;
/// Bytes of one prepared block.
pub(crate) const PREP_BLOCK: usize = DMIN + 64;

/// Writes `nb` prepared blocks of rows x[0..n] of `ty` (row r's block ib at x[r] + stride *
/// ib) to `dst`; rows past n are zero (their results are zero and not used).
///
/// # Safety
/// x[r] for r < n points at nb blocks of `ty` `stride` bytes apart; dst holds nb * PREP_BLOCK
/// bytes.
pub(crate) unsafe fn prep16(
    ty: Type,
    nb: usize,
    stride: usize,
    x: &[*const u8; ROWS],
    n: usize,
    dst: *mut u8,
) {
    let bytes = crate::ops::ktile::block_bytes(ty);
    // SAFETY: the caller's promise on dst.
    let dst = unsafe { std::slice::from_raw_parts_mut(dst, nb * PREP_BLOCK) };
    if n < ROWS {
        dst.fill(0);
    }
    let put = |o: &mut [u8], at: usize, v: [u8; 4]| o[at..at + 4].copy_from_slice(&v);
    let pair = |a: i32, b: i32| {
        let (a, b) = ((a as i16).to_le_bytes(), (b as i16).to_le_bytes());
        [a[0], a[1], b[0], b[1]]
    };
    for (ib, o) in dst.chunks_exact_mut(PREP_BLOCK).enumerate() {
        for (r, &row) in x.iter().enumerate().take(n) {
            // SAFETY: the caller's promise: block ib of row r is readable.
            let b = unsafe { std::slice::from_raw_parts(row.add(stride * ib), bytes) };
            let (q, sc16, mins, _) = crate::ops::ktile::codes_ref(ty, b);
            let (dx, dmin) = crate::ops::ktile::block_scales(ty, b);
            for d in 0..64 {
                put(
                    o,
                    QS + 64 * d + 4 * r,
                    [q[4 * d], q[4 * d + 1], q[4 * d + 2], q[4 * d + 3]],
                );
            }
            for (j, s) in sc16.iter().enumerate() {
                put(o, SC + 64 * j + 4 * r, s.to_le_bytes());
            }
            for t in 0..8 {
                put(o, SCP + 64 * t + 4 * r, pair(sc16[2 * t], sc16[2 * t + 1]));
                put(o, MNP + 64 * t + 4 * r, pair(mins[2 * t], mins[2 * t + 1]));
            }
            put(o, DX + 4 * r, dx.to_le_bytes());
            put(o, DMIN + 4 * r, dmin.to_le_bytes());
        }
    }
}

/// The 16 prepared rows of `ty` at `prep` (`prep16`, nb blocks) times C Q8_K columns:
/// out[c][r] is bit for bit `ktile::dot_ref(ty, Tiled, ..)` of row r and column c.
///
/// # Safety
/// `x86_k512::available()`; prep holds nb prepared blocks of `ty`, each b[c] points at nb
/// Q8_K blocks.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
pub(crate) unsafe fn gemm16<const C: usize>(
    ty: Type,
    nb: usize,
    prep: *const u8,
    b: &[*const u8; C],
    out: &mut [[f32; ROWS]; C],
) {
    let has_min = crate::ops::ktile::has_min(ty);
    let bias = _mm512_set1_epi32(match ty {
        Type::Q6K => 32,
        Type::Q3K => 4,
        _ => 0,
    });
    let mut acc = [_mm512_setzero_ps(); C];
    for ib in 0..nb {
        // SAFETY: block ib of the prepared rows and of every column lies within the nb blocks
        // the caller vouches for; every offset below stays inside its block.
        unsafe {
            let w = prep.add(ib * PREP_BLOCK);
            let by: [*const u8; C] = std::array::from_fn(|c| b[c].add(292 * ib));
            let mut s = [_mm512_setzero_si512(); C];
            for j in 0..16 {
                let mut t = [_mm512_setzero_si512(); C];
                for k in 0..4 {
                    let q = _mm512_loadu_si512(w.add(QS + 64 * (4 * j + k)) as *const __m512i);
                    for c in 0..C {
                        let y = by[c].add(4 + 16 * j + 4 * k) as *const i32;
                        t[c] = _mm512_dpbusd_epi32(t[c], q, _mm512_set1_epi32(y.read_unaligned()));
                    }
                }
                let sc = _mm512_loadu_si512(w.add(SC + 64 * j) as *const __m512i);
                for c in 0..C {
                    s[c] = _mm512_add_epi32(s[c], _mm512_mullo_epi32(t[c], sc));
                }
            }
            // per column: sum of scale x activation sum per 16 values, and of min x activation
            // sum per 16 (from Q8_K's bsums, i16 pairs 2t, 2t + 1)
            let mut corr = [_mm512_setzero_si512(); C];
            let mut mm = [_mm512_setzero_si512(); C];
            for t in 0..8 {
                let scp = _mm512_loadu_si512(w.add(SCP + 64 * t) as *const __m512i);
                let mnp = _mm512_loadu_si512(w.add(MNP + 64 * t) as *const __m512i);
                for c in 0..C {
                    let bs =
                        _mm512_set1_epi32((by[c].add(260 + 4 * t) as *const i32).read_unaligned());
                    corr[c] = _mm512_dpwssd_epi32(corr[c], scp, bs);
                    if has_min {
                        mm[c] = _mm512_dpwssd_epi32(mm[c], mnp, bs);
                    }
                }
            }
            let dx = _mm512_loadu_ps(w.add(DX) as *const f32);
            let dmin = _mm512_loadu_ps(w.add(DMIN) as *const f32);
            for c in 0..C {
                let st = _mm512_sub_epi32(s[c], _mm512_mullo_epi32(corr[c], bias));
                let mut r = _mm512_mul_ps(_mm512_cvtepi32_ps(st), dx);
                if has_min {
                    r = _mm512_fnmadd_ps(dmin, _mm512_cvtepi32_ps(mm[c]), r);
                }
                let dy = _mm512_set1_ps((by[c] as *const f32).read_unaligned());
                acc[c] = _mm512_fmadd_ps(r, dy, acc[c]);
            }
        }
    }
    for c in 0..C {
        // SAFETY: out[c] holds 16 floats.
        unsafe { _mm512_storeu_ps(out[c].as_mut_ptr(), acc[c]) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::ktile::{dot_ref, quant_rows, Order};

    fn check<const C: usize>(ty: Type, k: usize, n: usize, seed: usize) {
        let nb = k / 256;
        let rows = quant_rows(ty, k, n, seed);
        let cols = quant_rows(Type::Q8K, k, C, seed + 7);
        let x: [*const u8; ROWS] =
            std::array::from_fn(|r| rows.get(r).map_or(std::ptr::null(), |v| v.as_ptr()));
        let mut prep = vec![0u8; nb * PREP_BLOCK];
        let b: [*const u8; C] = std::array::from_fn(|c| cols[c].as_ptr());
        let mut out = [[f32::NAN; ROWS]; C];
        let stride = crate::ops::ktile::block_bytes(ty);
        // SAFETY: rows r < n hold nb blocks stride bytes apart; prep nb blocks; available().
        unsafe {
            prep16(ty, nb, stride, &x, n, prep.as_mut_ptr());
            gemm16::<C>(ty, nb, prep.as_ptr(), &b, &mut out);
        }
        for c in 0..C {
            for r in 0..n {
                let want = dot_ref(ty, Order::Tiled, nb, &rows[r], &cols[c]);
                assert_eq!(
                    out[c][r].to_bits(),
                    want.to_bits(),
                    "{ty} k {k} row {r} col {c}"
                );
            }
            for r in n..ROWS {
                assert_eq!(out[c][r], 0.0, "{ty}: padding row {r}");
            }
        }
    }

    #[test]
    fn gemm16_equals_the_tiled_order_bit_for_bit() {
        if !crate::dot::x86_k512::available() {
            eprintln!("skipped: no AVX-512 VNNI");
            return;
        }
        for ty in [Type::Q2K, Type::Q3K, Type::Q4K, Type::Q5K, Type::Q6K] {
            check::<1>(ty, 256, 16, 1);
            check::<3>(ty, 256 * 3, 5, 2);
            check::<4>(ty, 256 * 9, 16, 3);
            check::<4>(ty, 256 * 22, 13, 5);
        }
    }
}
