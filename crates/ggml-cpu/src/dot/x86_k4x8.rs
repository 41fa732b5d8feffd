//! Q4_K times Q8_K in llama.cpp's q4_K_8x8 gemm order (`ktile::Order::RepackGemm`), 8 weight
//! rows a pass on AVX2: the prompt-processing kernel of a Q4_K weight held in CPU_REPACK on a
//! CPU without AVX-512 VNNI (`x86_k4x16` is the 16-row one).
//!
//! As there, the weight side is laid out once per group of 8 rows (`prep8`): register d holds
//! dword d of every row's codes, one row per 32-bit lane, so one broadcast activation dword
//! meets 4 values of all 8 rows and each lane's total is its row's (no horizontal sums). The
//! codes (0..15) times the activations go through vpmaddubsw; the 8 pairs of one 32-value half
//! are summed in i16 (|8 * 2 * 15 * 128| < 2^15), then widened by vpmaddwd.
//!
//! Every float step is the gemm's, as in `x86_k4x16`: per 64 values, acc = fma(f32(S),
//! dx * dy, acc) and acc_min = fma(f32(M), dmin * dy, acc_min), the cell acc - acc_min, S formed
//! in f32 from its two halves times their scales (exact: below 2^24).

// the kernels' loops index per-column register arrays and block offsets together
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;

/// Rows of one pass.
pub(crate) const ROWS: usize = 8;

// One prepared block of 8 rows: dword d of every row's 128 code bytes (32 x 32 bytes), then
// the rows' d and dmin as f32, the 8 subblock scales as f32 (8 lanes each) and per 64 values
// the two mins as one i16 pair (8 lanes each).
const QS: usize = 0;
const DX: usize = 32 * 32;
const DMIN: usize = DX + 32;
const SC: usize = DMIN + 32;
const MN: usize = SC + 8 * 32;
/// Bytes of one prepared block.
pub(crate) const PREP_BLOCK: usize = MN + 4 * 32;

/// Writes `nb` prepared blocks of 8 rows to `dst`: row r's block ib is at x[r] + stride * ib.
///
/// # Safety
/// x[r] points at nb Q4_K blocks (144 bytes each) `stride` bytes apart; dst holds
/// nb * PREP_BLOCK bytes.
pub(crate) unsafe fn prep8(nb: usize, stride: usize, x: &[*const u8; ROWS], dst: *mut u8) {
    // SAFETY: the caller's promise on dst.
    let dst = unsafe { std::slice::from_raw_parts_mut(dst, nb * PREP_BLOCK) };
    for (ib, o) in dst.chunks_exact_mut(PREP_BLOCK).enumerate() {
        for (r, &row) in x.iter().enumerate() {
            // SAFETY: the caller's promise: block ib of row r is 144 readable bytes.
            let b = unsafe { std::slice::from_raw_parts(row.add(stride * ib), 144) };
            for d in 0..32 {
                let at = QS + 32 * d + 4 * r;
                o[at..at + 4].copy_from_slice(&b[16 + 4 * d..20 + 4 * d]);
            }
            super::x86_k4x16::put_row_scales(o, b, r, 32, [DX, DMIN, SC, MN]);
        }
    }
}

/// The 8 prepared rows at `prep` (`prep8`, nb blocks) times C Q8_K columns: out[c][r] is
/// bit for bit `ktile::dot_ref(Q4_K, RepackGemm, ..)` of row r and column c.
///
/// # Safety
/// AVX2 and FMA are available; prep holds nb prepared blocks, each b[c] points at nb Q8_K
/// blocks.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn gemm8<const C: usize>(
    nb: usize,
    prep: *const u8,
    b: &[*const u8; C],
    out: &mut [[f32; ROWS]; C],
) {
    let m4 = _mm256_set1_epi8(0x0F);
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); C];
    let mut acc_min = [_mm256_setzero_ps(); C];
    for ib in 0..nb {
        // SAFETY: block ib of the prepared rows and of every column lies within the nb blocks
        // the caller vouches for; every offset below stays inside its block.
        unsafe {
            let w = prep.add(ib * PREP_BLOCK);
            let dx = _mm256_loadu_ps(w.add(DX) as *const f32);
            let dmin = _mm256_loadu_ps(w.add(DMIN) as *const f32);
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
                let mut se = [_mm256_setzero_si256(); C];
                let mut so = [_mm256_setzero_si256(); C];
                for k in 0..8 {
                    let q = _mm256_loadu_si256(w.add(QS + 32 * (8 * p + k)) as *const __m256i);
                    // low nibbles: values 64p + 4k.. (subblock 2p); high: 32 further on
                    let lo = _mm256_and_si256(q, m4);
                    let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4);
                    for c in 0..C {
                        let y = by[c].add(4 + 64 * p + 4 * k) as *const i32;
                        let ye = _mm256_set1_epi32(y.read_unaligned());
                        let yo = _mm256_set1_epi32(y.add(8).read_unaligned());
                        se[c] = _mm256_add_epi16(se[c], _mm256_maddubs_epi16(lo, ye));
                        so[c] = _mm256_add_epi16(so[c], _mm256_maddubs_epi16(hi, yo));
                    }
                }
                let sce = _mm256_loadu_ps(w.add(SC + 32 * 2 * p) as *const f32);
                let sco = _mm256_loadu_ps(w.add(SC + 32 * (2 * p + 1)) as *const f32);
                let mn = _mm256_loadu_si256(w.add(MN + 32 * p) as *const __m256i);
                for c in 0..C {
                    let (e32, o32) = (
                        _mm256_madd_epi16(se[c], ones),
                        _mm256_madd_epi16(so[c], ones),
                    );
                    let s = _mm256_fmadd_ps(
                        _mm256_cvtepi32_ps(o32),
                        sco,
                        _mm256_mul_ps(_mm256_cvtepi32_ps(e32), sce),
                    );
                    let m = _mm256_madd_epi16(mn, _mm256_set1_epi32(bsp[c][p]));
                    let dy = _mm256_set1_ps((by[c] as *const f32).read_unaligned());
                    let (ds, dm) = (_mm256_mul_ps(dx, dy), _mm256_mul_ps(dmin, dy));
                    acc[c] = _mm256_fmadd_ps(s, ds, acc[c]);
                    acc_min[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), dm, acc_min[c]);
                }
            }
        }
    }
    for c in 0..C {
        // SAFETY: out[c] holds 8 floats.
        unsafe { _mm256_storeu_ps(out[c].as_mut_ptr(), _mm256_sub_ps(acc[c], acc_min[c])) };
    }
}

/// Blocks ahead that `gemv8` prefetches.
const PREFETCH_BLOCKS: usize = 4;

/// Eight Q4_K rows times one Q8_K column in llama.cpp's q4_K_8x8 gemv order
/// (`ktile::Order::RepackGemv`): per block, acc = fma(f32(S), dx * dy, acc) and acc_min =
/// fma(f32(M), dmin * dy, acc_min) with S and M the block's exact i32 sums; out[r] = acc -
/// acc_min. Row r's block ib is at x[r] + stride * ib (CPU_REPACK's groups: 8 * 144). Each
/// row's codes meet the activations through vpmaddubsw and its subblock scales through
/// vpmaddwd; the eight rows' lane sums are reduced together (`x86_k512::totals8`), so the
/// float steps run once for the eight. The rows' scales and mins are unpacked together in
/// vector registers, each scale word then picked by vpshufb (row by row in scalar registers
/// and broadcast one by one it took 6-12% longer: the 1.1B q4_k_m's Q4_K nodes through this
/// kernel on the Zen 4 EPYC, 15.1-15.5 -> 16.2-16.5 GB/s at -t 1).
///
/// # Safety
/// AVX2, FMA and F16C are available; each x[r] points at nb Q4_K blocks `stride` bytes apart,
/// y at nb Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn gemv8(
    nb: usize,
    stride: usize,
    x: &[*const u8; ROWS],
    y: *const u8,
    out: &mut [f32; ROWS],
) {
    use super::x86_k512::{k4_unpack8, totals8};
    let m4 = _mm256_set1_epi8(0x0F);
    // vpshufb controls: the scale byte of subblock j as every word of both lanes (zero-extended)
    let pick: [[i8; 32]; 8] =
        std::array::from_fn(|j| std::array::from_fn(|b| if b % 2 == 0 { j as i8 } else { -128 }));
    let mut acc = _mm256_setzero_ps();
    let mut acc_min = _mm256_setzero_ps();
    for ib in 0..nb {
        for row in x {
            let ahead = row.wrapping_add(stride * (ib + PREFETCH_BLOCKS));
            for off in (0..144).step_by(64) {
                // (a prefetch is a hint and never faults, whatever the address)
                _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(off) as *const i8);
            }
        }
        // SAFETY: block ib of every operand lies within the nb blocks the caller vouches for;
        // every offset below stays inside its 144- or 292-byte block (the scale loads read
        // bytes 4..20 of a row's block).
        unsafe {
            let off = stride * ib;
            let by = y.add(292 * ib);
            let dy = _mm256_set1_ps((by as *const f32).read_unaligned());
            let yv: [__m256i; 8] =
                std::array::from_fn(|j| _mm256_loadu_si256(by.add(4 + 32 * j) as *const __m256i));
            let bs = _mm256_loadu_si256(by.add(260) as *const __m256i);
            // activation sums per 32 values (subblock order)
            let bs32 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
            // The eight rows' scales and mins unpacked side by side: each row's 8 scale bytes
            // as one qword, rows (0, 1 | 4, 5) and (2, 3 | 6, 7); the rows' mins x activation sums
            let (sc01, sc23, mt) = k4_unpack8(x, off, bs32);
            // row r's scale bytes in every qword
            let scb: [__m256i; ROWS] = [
                _mm256_permute4x64_epi64::<0x00>(sc01),
                _mm256_permute4x64_epi64::<0x55>(sc01),
                _mm256_permute4x64_epi64::<0x00>(sc23),
                _mm256_permute4x64_epi64::<0x55>(sc23),
                _mm256_permute4x64_epi64::<0xAA>(sc01),
                _mm256_permute4x64_epi64::<0xFF>(sc01),
                _mm256_permute4x64_epi64::<0xAA>(sc23),
                _mm256_permute4x64_epi64::<0xFF>(sc23),
            ];
            let mut s = [_mm256_setzero_si256(); ROWS];
            let mut h16 = [[0i16; 8]; 2];
            for r in 0..ROWS {
                let bx = x[r].add(off);
                h16[0][r] = (bx as *const i16).read_unaligned();
                h16[1][r] = (bx.add(2) as *const i16).read_unaligned();
                let scale = |j: usize| {
                    _mm256_shuffle_epi8(
                        scb[r],
                        _mm256_loadu_si256(pick[j].as_ptr() as *const __m256i),
                    )
                };
                let mut a = _mm256_setzero_si256();
                for h in 0..4 {
                    let q = _mm256_loadu_si256(bx.add(16 + 32 * h) as *const __m256i);
                    let lo = _mm256_and_si256(q, m4);
                    let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4);
                    // (u4 x i8 pair sums fit i16: 2 * 15 * 128)
                    let plo = _mm256_maddubs_epi16(lo, yv[2 * h]);
                    let phi = _mm256_maddubs_epi16(hi, yv[2 * h + 1]);
                    a = _mm256_add_epi32(a, _mm256_madd_epi16(plo, scale(2 * h)));
                    a = _mm256_add_epi32(a, _mm256_madd_epi16(phi, scale(2 * h + 1)));
                }
                s[r] = a;
            }
            let st = totals8(&s);
            // (f16 to f32 is exact: the same values the scalar conversion gives)
            let half8 =
                |h: &[i16; 8]| _mm256_cvtph_ps(_mm_loadu_si128(h.as_ptr() as *const __m128i));
            let (dxv, dmv) = (half8(&h16[0]), half8(&h16[1]));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(st), _mm256_mul_ps(dxv, dy), acc);
            acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mt), _mm256_mul_ps(dmv, dy), acc_min);
        }
    }
    // SAFETY: out holds 8 floats.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), _mm256_sub_ps(acc, acc_min)) };
}

/// Whether this CPU runs `gemm8` and `gemv8` (AVX2, FMA and F16C).
pub(crate) fn available() -> bool {
    let f = crate::simd::features::cpu();
    f.avx2_fma() && f.f16c()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::ktile::{dot_ref, quant_rows, Order};
    use ggml::Type;

    fn check<const C: usize>(k: usize, seed: usize) {
        let nb = k / 256;
        let rows = quant_rows(Type::Q4K, k, ROWS, seed);
        let cols = quant_rows(Type::Q8K, k, C, seed + 7);
        let x: [*const u8; ROWS] = std::array::from_fn(|r| rows[r].as_ptr());
        let mut prep = vec![0u8; nb * PREP_BLOCK];
        let b: [*const u8; C] = std::array::from_fn(|c| cols[c].as_ptr());
        let mut out = [[f32::NAN; ROWS]; C];
        // SAFETY: every row holds nb blocks 144 bytes apart; prep nb blocks; available().
        unsafe {
            prep8(nb, 144, &x, prep.as_mut_ptr());
            gemm8::<C>(nb, prep.as_ptr(), &b, &mut out);
        }
        for c in 0..C {
            for r in 0..ROWS {
                let want = dot_ref(Type::Q4K, Order::RepackGemm, nb, &rows[r], &cols[c]);
                assert_eq!(out[c][r].to_bits(), want.to_bits(), "k {k} row {r} col {c}");
            }
        }
    }

    #[test]
    fn gemv8_equals_the_repacked_gemv_order_bit_for_bit() {
        if !available() {
            eprintln!("skipped: no AVX2/FMA/F16C");
            return;
        }
        for (k, seed) in [
            (256usize, 1usize),
            (256 * 3, 2),
            (256 * 9, 3),
            (256 * 22, 5),
        ] {
            let nb = k / 256;
            let rows = quant_rows(Type::Q4K, k, ROWS, seed);
            let col = quant_rows(Type::Q8K, k, 1, seed + 7);
            // the rows interleaved block by block, as CPU_REPACK holds a group
            let mut group = vec![0u8; ROWS * nb * 144];
            for ib in 0..nb {
                for r in 0..ROWS {
                    let at = (ib * ROWS + r) * 144;
                    group[at..at + 144].copy_from_slice(&rows[r][144 * ib..144 * (ib + 1)]);
                }
            }
            let x: [*const u8; ROWS] = std::array::from_fn(|r| group[144 * r..].as_ptr());
            let mut out = [f32::NAN; ROWS];
            // SAFETY: row r's nb blocks are 8 * 144 bytes apart in group; available().
            unsafe { gemv8(nb, ROWS * 144, &x, col[0].as_ptr(), &mut out) };
            for r in 0..ROWS {
                let want = dot_ref(Type::Q4K, Order::RepackGemv, nb, &rows[r], &col[0]);
                assert_eq!(out[r].to_bits(), want.to_bits(), "k {k} row {r}");
            }
        }
    }

    #[test]
    fn gemm8_equals_the_repacked_gemm_order_bit_for_bit() {
        if !available() {
            eprintln!("skipped: no AVX2/FMA");
            return;
        }
        check::<1>(256, 1);
        check::<2>(256 * 2, 4);
        check::<3>(256 * 3, 2);
        check::<4>(256 * 9, 3);
        check::<4>(256 * 22, 5);
    }
}
