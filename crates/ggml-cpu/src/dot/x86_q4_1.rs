//! AVX-512 VNNI register tile for Q4_1 / Q5_1 weights times Q8_1 activations and Q5_0 weights
//! times Q8_0 activations (prompt processing): four weight rows by several columns per pass,
//! each weight block unpacked once for all columns and each activation block loaded once for
//! the four rows.
//!
//! Every cell keeps the float chain of ggml's AVX2 q4_1 / q5_1 dot product (`x86::q4_1_k2`,
//! `x86::q5_1_k2`): per block, acc = fma(f32(dx) * f32(dy), f32(8 lanes of integer sums), acc)
//! with lane l summing values 4l..4l + 4 of the block, summs += f32(m) * f32(s) (a product,
//! then a sum), and at the end hsum_ps(acc) + summs. A 64-byte register holds the 8 lanes of
//! two cells (rows 2i and 2i + 1 of one column), so vpdpbusd computes both cells' lane sums
//! (exact, as maddubs + madd) at once.
//!
//! Q5_0 keeps the chain of ggml's AVX2 q5_0 dot product (`x86::q5_0_k2`): per block
//! acc = fma(f32(dx) * f32(dy), f32(8 lane sums), acc), hsum_ps(acc) at the end. Its values
//! are code - 16 for the unsigned 5-bit code: vpdpbusd takes the codes, and each lane starts
//! at -16 x (the sum of its four activations), the column's own term.

use super::x86::{h2f_f16c, hsum_ps};
use std::arch::x86_64::*;

/// Whether this CPU runs the kernel below (the AVX-512 dot-product set).
pub(crate) fn available() -> bool {
    crate::simd::features::cpu().avx512_dot()
}

/// Columns the tile keeps in registers at once (two accumulators each).
const CHUNK: usize = 6;

/// The weight kinds of `cols`.
const Q4_1: u8 = 0;
const Q5_1: u8 = 1;
const Q5_0: u8 = 2;

/// Four Q4_1 (`Q5`: Q5_1) rows times C Q8_1 columns: out[r * C + c] is bit for bit the AVX2
/// dot product of row a[r] and column b[c] (and so `dot::rows4_kernel`'s).
///
/// # Safety
/// `available()`; each a[r] points at `nb` Q4_1 (Q5_1) blocks, each b[c] at nb Q8_1 blocks;
/// out holds 4 * C floats.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn q4_1_tile<const C: usize, const Q5: bool>(
    nb: usize,
    a: &[*const u8; 4],
    b: &[*const u8; C],
    out: &mut [f32],
) {
    // SAFETY: the caller's promise.
    unsafe {
        if Q5 {
            chunks::<C, Q5_1>(nb, a, b, out)
        } else {
            chunks::<C, Q4_1>(nb, a, b, out)
        }
    }
}

/// Four Q5_0 rows times C Q8_0 columns: out[r * C + c] is bit for bit the AVX2 dot product
/// of row a[r] and column b[c] (and so `ops::qtile`'s 256-bit Q5_0 tile's).
///
/// # Safety
/// `available()`; each a[r] points at `nb` Q5_0 blocks, each b[c] at nb Q8_0 blocks; out
/// holds 4 * C floats.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn q5_0_tile<const C: usize>(
    nb: usize,
    a: &[*const u8; 4],
    b: &[*const u8; C],
    out: &mut [f32],
) {
    // SAFETY: the caller's promise.
    unsafe { chunks::<C, Q5_0>(nb, a, b, out) }
}

/// The columns of a tile in chunks of at most CHUNK.
///
/// # Safety
/// As for `q4_1_tile` / `q5_0_tile` with weights of kind K.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn chunks<const C: usize, const K: u8>(
    nb: usize,
    a: &[*const u8; 4],
    b: &[*const u8; C],
    out: &mut [f32],
) {
    let mut c0 = 0;
    // SAFETY (all calls): the caller's promise; each chunk covers columns c0..c0 + N < C.
    unsafe {
        while c0 + CHUNK <= C {
            cols::<CHUNK, K>(nb, a, &b[c0..], out, C, c0);
            c0 += CHUNK;
        }
        match C - c0 {
            0 => {}
            1 => cols::<1, K>(nb, a, &b[c0..], out, C, c0),
            2 => cols::<2, K>(nb, a, &b[c0..], out, C, c0),
            3 => cols::<3, K>(nb, a, &b[c0..], out, C, c0),
            4 => cols::<4, K>(nb, a, &b[c0..], out, C, c0),
            _ => cols::<5, K>(nb, a, &b[c0..], out, C, c0),
        }
    }
}

/// Rows 2i and 2i + 1 of a block of kind K as one register of unsigned codes: bytes 0..32
/// row 2i's values in order, bytes 32..64 row 2i + 1's.
///
/// # Safety
/// AVX-512F/BW; both pointers at a whole block.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx2")]
unsafe fn codes2<const K: u8>(x0: *const u8, x1: *const u8) -> __m512i {
    let (qh, qs) = match K {
        Q4_1 => (0, 4),
        Q5_1 => (4, 8),
        _ => (2, 6),
    };
    // SAFETY: a block holds its 16 quant bytes at qs (and Q5_1 / Q5_0 their 4 qh bytes at
    // qh).
    unsafe {
        let b = _mm256_set_m128i(
            _mm_loadu_si128(x1.add(qs) as *const __m128i),
            _mm_loadu_si128(x0.add(qs) as *const __m128i),
        );
        let b = _mm512_castsi256_si512(b);
        // lanes b0, b0, b1, b1: low nibbles of the first copy, high of the second
        let v = _mm512_shuffle_i32x4::<0b0101_0000>(b, b);
        let counts = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
        let v = _mm512_and_si512(_mm512_srlv_epi64(v, counts), _mm512_set1_epi8(0x0F));
        if K != Q4_1 {
            // fifth bit: bit i of qh for value i
            let h0 = (x0.add(qh) as *const u32).read_unaligned() as u64;
            let h1 = (x1.add(qh) as *const u32).read_unaligned() as u64;
            _mm512_or_si512(
                v,
                _mm512_maskz_mov_epi8(h0 | h1 << 32, _mm512_set1_epi8(0x10)),
            )
        } else {
            v
        }
    }
}

/// Columns b[..N] of the tile, written to out[r * stride + c0 + c].
///
/// # Safety
/// As for `q4_1_tile` / `q5_0_tile`, with b holding at least N columns.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn cols<const N: usize, const K: u8>(
    nb: usize,
    a: &[*const u8; 4],
    b: &[*const u8],
    out: &mut [f32],
    stride: usize,
    c0: usize,
) {
    let (xs, ys, yq) = match K {
        Q4_1 => (20, 36, 4),
        Q5_1 => (24, 36, 4),
        _ => (22, 34, 2),
    };
    let ones = _mm512_set1_epi8(1);
    let mut acc = [[_mm512_setzero_ps(); N]; 2];
    let mut summs = [_mm_setzero_ps(); N];
    for ib in 0..nb {
        // SAFETY: block ib of every operand lies within the nb blocks the caller vouches for;
        // every offset below stays inside its weight or activation block.
        unsafe {
            let bx: [*const u8; 4] = std::array::from_fn(|r| a[r].add(xs * ib));
            let w = [codes2::<K>(bx[0], bx[1]), codes2::<K>(bx[2], bx[3])];
            let dx: [f32; 4] = std::array::from_fn(|r| h2f_f16c(bx[r]));
            let mx: [f32; 4] = if K == Q5_0 {
                [0.0; 4]
            } else {
                std::array::from_fn(|r| h2f_f16c(bx[r].add(2)))
            };
            let mxv = _mm_loadu_ps(mx.as_ptr());
            // lanes 0..8: dx of row 2i, lanes 8..16: of row 2i + 1
            let dxp: [__m512; 2] = std::array::from_fn(|i| {
                let lo = _mm512_castps_pd(_mm512_set1_ps(dx[2 * i]));
                let hi = _mm256_castps_pd(_mm256_set1_ps(dx[2 * i + 1]));
                _mm512_castpd_ps(_mm512_insertf64x4::<1>(lo, hi))
            });
            for c in 0..N {
                let by = b[c].add(ys * ib);
                let dy = _mm512_set1_ps(h2f_f16c(by));
                let y = _mm512_broadcast_i64x4(_mm256_loadu_si256(by.add(yq) as *const __m256i));
                let start = if K == Q5_0 {
                    // -16 x the sum of each lane's four activations
                    let ysum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, y);
                    _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32::<4>(ysum))
                } else {
                    let sy = _mm_set1_ps(h2f_f16c(by.add(2)));
                    summs[c] = _mm_add_ps(summs[c], _mm_mul_ps(mxv, sy));
                    _mm512_setzero_si512()
                };
                for i in 0..2 {
                    // (u4/u5 x i8, four per lane, in i32: exact)
                    let s = _mm512_dpbusd_epi32(start, w[i], y);
                    let d = _mm512_mul_ps(dxp[i], dy);
                    acc[i][c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(s), acc[i][c]);
                }
            }
        }
    }
    for c in 0..N {
        let mut sm = [0.0f32; 4];
        // SAFETY: sm holds 4 floats.
        unsafe { _mm_storeu_ps(sm.as_mut_ptr(), summs[c]) };
        for i in 0..2 {
            let v = acc[i][c];
            let (lo, hi) = (
                _mm512_castps512_ps256(v),
                _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v))),
            );
            let (s0, s1) = (hsum_ps(lo), hsum_ps(hi));
            // (Q5_0 has no min term: its dot product ends at hsum_ps)
            let (s0, s1) = if K == Q5_0 {
                (s0, s1)
            } else {
                (s0 + sm[2 * i], s1 + sm[2 * i + 1])
            };
            out[(2 * i) * stride + c0 + c] = s0;
            out[(2 * i + 1) * stride + c0 + c] = s1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ggml::Type;

    /// Raw random blocks: `nb` blocks of `bytes` bytes (no quant byte 0x80), each with its
    /// f16 scales (at 0, and at 2 but for Q5_0 / Q8_0) in a small range of both signs.
    fn blocks(next: &mut dyn FnMut() -> u64, nb: usize, bytes: usize) -> Vec<u8> {
        let mut v: Vec<u8> = (0..bytes * nb).map(|_| next() as u8).collect();
        // activations -127..127 (what quantization makes: the AVX2 q5_0 dot product's sign
        // trick wraps -128)
        v.iter_mut().filter(|q| **q == 0x80).for_each(|q| *q = 0x81);
        // Q5_0 / Q8_0 blocks (22, 34 bytes) have one f16, Q4_1 / Q5_1 / Q8_1 two
        let halves: &[usize] = if bytes % 4 == 2 { &[0] } else { &[0, 2] };
        for ib in 0..nb {
            for &o in halves {
                let f = ((next() % 2001) as f32 - 1000.0) / 3000.0;
                let h = crate::fp::f32_to_f16(f).to_le_bytes();
                v[bytes * ib + o..bytes * ib + o + 2].copy_from_slice(&h);
            }
        }
        v
    }

    fn check<const C: usize>(ty: Type, nb: usize, next: &mut dyn FnMut() -> u64) {
        let (xs, ys) = match ty {
            Type::Q4_1 => (20, 36),
            Type::Q5_1 => (24, 36),
            _ => (22, 34),
        };
        let rows: Vec<Vec<u8>> = (0..4).map(|_| blocks(next, nb, xs)).collect();
        let cols: Vec<Vec<u8>> = (0..C).map(|_| blocks(next, nb, ys)).collect();
        let a: [*const u8; 4] = std::array::from_fn(|r| rows[r].as_ptr());
        let b: [*const u8; C] = std::array::from_fn(|c| cols[c].as_ptr());
        let mut out = vec![0.0f32; 4 * C];
        // SAFETY: available() holds (checked by the caller); every pointer covers nb blocks.
        unsafe {
            match ty {
                Type::Q4_1 => q4_1_tile::<C, false>(nb, &a, &b, &mut out),
                Type::Q5_1 => q4_1_tile::<C, true>(nb, &a, &b, &mut out),
                _ => q5_0_tile::<C>(nb, &a, &b, &mut out),
            }
        }
        let dot = super::super::x86::avx2_kernel(ty).expect("AVX2 kernel");
        for c in 0..C {
            let mut four = [0.0f32; 4];
            if let Some((rows4, _)) = crate::dot::rows4_kernel(ty, rows[0].len()) {
                // SAFETY: as above (AVX2 comes with AVX-512 here).
                unsafe { rows4(nb, &a, b[c], &mut four) };
            } else {
                four = std::array::from_fn(|r| dot(32 * nb, &rows[r], &cols[c]));
            }
            for r in 0..4 {
                let want = dot(32 * nb, &rows[r], &cols[c]);
                let got = out[r * C + c];
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{ty} nb {nb} C {C} r {r} c {c}"
                );
                assert_eq!(
                    got.to_bits(),
                    four[r].to_bits(),
                    "{ty} rows4 nb {nb} r {r} c {c}"
                );
            }
        }
    }

    #[test]
    fn q4_1_q5_1_q5_0_tiles_equal_the_avx2_dot_product_bit_for_bit() {
        if !available() {
            eprintln!("skipped: no AVX-512 VNNI");
            return;
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for ty in [Type::Q4_1, Type::Q5_1, Type::Q5_0] {
            for nb in [1usize, 5, 18, 64] {
                check::<1>(ty, nb, &mut next);
                check::<3>(ty, nb, &mut next);
                check::<8>(ty, nb, &mut next);
                check::<18>(ty, nb, &mut next);
            }
        }
    }
}
