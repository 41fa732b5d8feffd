//! AVX2 dot products for Q2_K and Q3_K against Q8_K, on AVX-512 CPUs too. They sum exact
//! integers per super-block, then follow ggml's AVX2 lane order (8 float lanes fused per
//! block). They are shaped as ggml's: the block's scales widened into 16-bit lanes once and
//! broadcast pair by pair with `pshufb`, Q3_K's +4 code bias taken off in 16-bit lanes before
//! the scales (the integer lanes are exact, so they equal ggml's whatever the order). (The
//! AVX-512 VNNI variants they replaced, vpdpbusd + vpmulld per sub-block pair and each scale
//! unpacked in scalar code, ran at half their speed on Zen 4: the 1.1B Q3_K_M tg16 -t 1 13.3
//! -> 22.4 t/s, Q2_K 17-20 -> 40.7.)

use std::arch::x86_64::*;

use super::scalar::check;
use super::x86::{h2f_f16c, hsum_ps, load32};
use super::x86_k512::dpwssd;
use super::x86_prepared as prepared;

pub(super) fn q2_k_avx2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 84, y, 292);
    // SAFETY: handed out only after AVX2/FMA/F16C were detected; `check` proved the sizes.
    unsafe { q2_k_k2(nb, x, y) }
}

pub(super) fn q3_k_avx2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 110, y, 292);
    // SAFETY: as for Q2_K.
    unsafe { q3_k_k2(nb, x, y) }
}

pub(super) fn q3_k_avx512(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let nb = check(n, 256, x, 110, y, 292);
    // SAFETY: handed out only after the AVX-512 dot-product set and GFNI were detected;
    // `check` proved the sizes.
    unsafe {
        let y = y.as_ptr();
        hsum_ps(q3_k_rows_n::<1>(nb, &[x.as_ptr()], y, |ib| q3_k_column(y, ib))[0])
    }
}

/// Block ib of a Q8_K column as `q3_k_rows_n` takes it: register s holds chunk (0, s)'s 32
/// activations then chunk (1, s)'s, and its bias -4 x each dword's four activations.
///
/// # Safety
/// The AVX-512 dot-product set; y holds more than ib Q8_K blocks.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2")]
unsafe fn q3_k_column(y: *const u8, ib: usize) -> ([__m512i; 4], [__m512i; 4]) {
    let z = _mm512_setzero_si512();
    let four = _mm512_set1_epi8(4);
    // SAFETY: block ib of y is readable (the caller's promise).
    let yv: [__m512i; 4] = std::array::from_fn(|s| unsafe {
        let by = y.add(292 * ib);
        let lo = _mm256_loadu_si256(by.add(4 + 32 * s) as *const __m256i);
        let hi = _mm256_loadu_si256(by.add(4 + 128 + 32 * s) as *const __m256i);
        _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
    });
    let bias = std::array::from_fn(|s| _mm512_sub_epi32(z, _mm512_dpbusd_epi32(z, four, yv[s])));
    (yv, bias)
}

/// Fills `prep` (`x86_prepared::PREP_SLOTS` * nb slots) with the nb blocks of column `y` as
/// `q3_k_column` gives them, once for all the rows of a one-column product.
///
/// # Safety
/// The AVX-512 dot-product set; y holds nb Q8_K blocks.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2")]
pub(crate) unsafe fn q3_k_prep(nb: usize, y: *const u8, prep: &mut [f32]) {
    // SAFETY: the caller's promise.
    unsafe { prepared::fill(nb, prep, |ib| q3_k_column(y, ib)) }
}

prepared::rows_fn!(
    /// out[i] = the Q3_K dot product (the bits of `q3_k_avx512`) of row i and column y, the
    /// column prepared by `q3_k_prep` (see `x86_prepared::rows_fn`).
    ///
    /// # Safety
    /// The AVX-512 dot-product set and GFNI; each of the out.len() rows holds nb Q3_K blocks,
    /// y nb Q8_K blocks and prep their prepared blocks.
    q3_k_rows,
    q3_k_rows_n,
    "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,gfni"
);

#[inline]
#[target_feature(enable = "avx2")]
fn shr16(v: __m256i, shift: usize) -> __m256i {
    match shift {
        0 => v,
        1 => _mm256_srli_epi16(v, 1),
        2 => _mm256_srli_epi16(v, 2),
        3 => _mm256_srli_epi16(v, 3),
        4 => _mm256_srli_epi16(v, 4),
        5 => _mm256_srli_epi16(v, 5),
        6 => _mm256_srli_epi16(v, 6),
        _ => _mm256_srli_epi16(v, 7),
    }
}

/// `pshufb` control giving 16-bit scale 2s in every lane of the low 128 bits and 2s + 1 in the
/// high 128 bits, from a vector holding eight 16-bit scales in both halves (ggml's
/// get_scale_shuffle_q3k).
#[inline]
#[target_feature(enable = "avx2")]
fn pair_shuffle(s: i32) -> __m256i {
    let lane = |i: i32| _mm_set1_epi16((((2 * i + 1) << 8) | (2 * i)) as i16);
    _mm256_set_m128i(lane(2 * s + 1), lane(2 * s))
}

/// Eight 16-bit values, lanes 0..8 of `v`, in both halves / lanes 8..16 in both halves.
#[inline]
#[target_feature(enable = "avx2")]
fn halves(v: __m256i) -> [__m256i; 2] {
    [
        _mm256_permute2x128_si256::<0x00>(v, v),
        _mm256_permute2x128_si256::<0x11>(v, v),
    ]
}

/// [yd * d, -yd * dmin] from a block's adjacent f16 d and dmin at `p` and the column's f32
/// scale at `py` (each the scalar product's bits: the conversion and the sign are exact).
///
/// # Safety
/// `p` has 4 readable bytes, `py` 4.
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn scales_times(p: *const u8, py: *const u8) -> __m128 {
    // SAFETY: guaranteed by the caller.
    let (h, yd) = unsafe {
        (
            (p as *const i32).read_unaligned(),
            _mm_broadcast_ss(&*(py as *const f32)),
        )
    };
    let dm = _mm_cvtph_ps(_mm_cvtsi32_si128(h));
    _mm_mul_ps(_mm_xor_ps(yd, _mm_setr_ps(0.0, -0.0, 0.0, 0.0)), dm)
}

/// # Safety
/// The CPU has AVX2, FMA and F16C; `x`, `y` hold `nb` Q2_K / Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q2_k_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let m3 = _mm256_set1_epi8(3);
    let m4 = _mm_set1_epi8(0xF);
    let (px, py) = (x.as_ptr(), y.as_ptr());
    // ggml's AVX2 order: one 8-lane float accumulator, per block first fused with -dmin times
    // the 8 lanes of mins * bsums, then with d times the 8 lanes of the scaled quant sums
    let mut accf = _mm256_setzero_ps();
    for i in 0..nb {
        // SAFETY: block i of both operands is within the nb blocks the caller checked; every
        // offset below stays inside its 84- or 292-byte block.
        unsafe {
            let (bx, by) = (px.add(84 * i), py.add(292 * i));
            let dd = scales_times(bx.add(80), by);
            let raw = _mm_loadu_si128(bx as *const __m128i);
            let mins = _mm256_cvtepi8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), m4));
            let bsums = _mm256_loadu_si256(by.add(260) as *const __m256i);
            let prod = _mm256_madd_epi16(mins, bsums);
            let dmin = _mm256_broadcastss_ps(_mm_movehdup_ps(dd));
            accf = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(prod), accf);
            let sc = halves(_mm256_cvtepi8_epi16(_mm_and_si128(raw, m4)));
            let mut acc = _mm256_setzero_si256();
            for (k, sck) in sc.iter().enumerate() {
                let q2 = load32(bx.add(16 + 32 * k));
                for s in 0..4 {
                    let q = _mm256_and_si256(shr16(q2, 2 * s), m3);
                    let q8 = load32(by.add(4 + 128 * k + 32 * s));
                    let scale = _mm256_shuffle_epi8(*sck, pair_shuffle(s as i32));
                    acc = _mm256_add_epi32(
                        acc,
                        _mm256_madd_epi16(scale, _mm256_maddubs_epi16(q, q8)),
                    );
                }
            }
            let dall = _mm256_broadcastss_ps(dd);
            accf = _mm256_fmadd_ps(dall, _mm256_cvtepi32_ps(acc), accf);
        }
    }
    hsum_ps(accf)
}

/// Q3_K's sixteen signed 6-bit scales as bytes (ggml's aux unpacking, less 32).
///
/// # Safety
/// `p` points at the block's 12 scale bytes.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn q3k_scales8(p: *const u8) -> __m128i {
    // SAFETY: guaranteed by the caller.
    let a = |i: usize| unsafe { (p.add(4 * i) as *const u32).read_unaligned() };
    let (a0, a1, a2) = (a(0), a(1), a(2));
    const K1: u32 = 0x0303_0303;
    const K2: u32 = 0x0f0f_0f0f;
    let s0 = (a0 & K2) | ((a2 & K1) << 4);
    let s1 = (a1 & K2) | (((a2 >> 2) & K1) << 4);
    let s2 = ((a0 >> 4) & K2) | (((a2 >> 4) & K1) << 4);
    let s3 = ((a1 >> 4) & K2) | (((a2 >> 6) & K1) << 4);
    let v = _mm_setr_epi32(s0 as i32, s1 as i32, s2 as i32, s3 as i32);
    _mm_sub_epi8(v, _mm_set1_epi8(32))
}

/// `q3k_scales8` widened to 16-bit lanes.
///
/// # Safety
/// As for `q3k_scales8`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn q3k_scales16(p: *const u8) -> __m256i {
    // SAFETY: the caller's promise.
    _mm256_cvtepi8_epi16(unsafe { q3k_scales8(p) })
}

/// The 8-lane float sums (before `hsum_ps`) of R Q3_K rows times one Q8_K column, lane for
/// lane `q3_k_k2`'s (ggml's AVX2 lanes: lane l sums, over the block's eight 32-value chunks,
/// scale x (q - 4) x q8 of the chunk's values 4l..4l + 4, then d fused in per block).
///
/// One 64-byte register holds chunk (0, s) in its low half and (1, s) in its high half, so the
/// block's codes are four registers, each the OR of two vgf2p8affineqb (the code's two low bits
/// moved down, its hmask bit moved to bit 2: 8% faster than shifts, masks and a masked add, 20%
/// faster than the AVX2 kernel, from L2). vpdpbusd sums four (code, activation) products per dword,
/// started from -4 x the four activations' sum (the code's bias, shared by the R rows); two
/// registers' dword sums (|sum| <= 2048) go as the two words of a dword into vpdpwssd, whose scale
/// words are scale x 256 (the byte picked into the high half by vpshufb, so no sign extension): the
/// dword then holds 256 x the lane's exact sum, shifted back at the block's end (|256 x sum| <
/// 2^28).
///
/// # Safety
/// The AVX-512 dot-product set and GFNI; each x[r] holds `nb` Q3_K blocks, `y` nb Q8_K blocks.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,gfni")]
unsafe fn q3_k_rows_n<const R: usize>(
    nb: usize,
    x: &[*const u8; R],
    y: *const u8,
    column: impl Fn(usize) -> ([__m512i; 4], [__m512i; 4]),
) -> [__m256; R] {
    // vpshufb picks of the 16 scale bytes (in every 128-bit lane): dword j of 128-bit lane q
    // takes chunk (q / 2, s)'s values 16 (q % 2)..; its scale is 8 (q / 2) + 2s + q % 2. Words
    // (s = 0, s = 1) for the first pair of registers, (2, 3) for the second.
    let pick = |first: i32| {
        let idx: [i8; 64] = std::array::from_fn(|b| {
            let (q, w) = ((b / 16) as i32, b % 4);
            let i = 8 * (q / 2) + q % 2 + first + if w == 3 { 2 } else { 0 };
            if w % 2 == 1 {
                i as i8
            } else {
                -128
            }
        });
        // SAFETY: 64 bytes read as one 512-bit value.
        unsafe { _mm512_loadu_si512(idx.as_ptr() as *const __m512i) }
    };
    let (pick01, pick23) = (pick(0), pick(4));
    // GF(2) affine matrices: byte 7 - i of the qword picks output bit i's input bits.
    // gl[s]: bits 2s, 2s + 1 to bits 0, 1; gh[s]: bit s (low half) / 4 + s (high half) to bit 2
    let gl: [__m512i; 4] = std::array::from_fn(|s| {
        _mm512_set1_epi64((((1u64 << (2 * s)) << 56) | ((1u64 << (2 * s + 1)) << 48)) as i64)
    });
    let gh: [__m512i; 4] = std::array::from_fn(|s| {
        _mm512_inserti64x4::<1>(
            _mm512_set1_epi64(((1u64 << s) << 40) as i64),
            _mm256_set1_epi64x(((1u64 << (4 + s)) << 40) as i64),
        )
    });
    let z = _mm512_setzero_si512();
    // the column's scale of block ib
    // SAFETY: block ib of y is within the nb blocks the caller vouches for.
    let yd = |ib: usize| unsafe { (y.add(292 * ib) as *const f32).read_unaligned() };
    // row r's 8 exact lane sums of block ib, and the block's d (times the column's)
    let lanes = |r: usize, ib: usize, yv: &[__m512i; 4], bias: &[__m512i; 4], yd: f32| {
        // SAFETY: block ib of row r is within its nb blocks; every offset below stays inside
        // the 110-byte block.
        unsafe {
            let bx = x[r].add(110 * ib);
            let q3 = _mm512_loadu_si512(bx.add(32) as *const __m512i);
            // hmask in both halves: the high bits of chunk (0, s) are its bits s, of chunk
            // (1, s) its bits 4 + s (gh[s] picks them)
            let hm = _mm512_broadcast_i64x4(_mm256_loadu_si256(bx as *const __m256i));
            let t: [__m512i; 4] = std::array::from_fn(|s| {
                let low = _mm512_gf2p8affine_epi64_epi8::<0>(q3, gl[s]);
                let code = _mm512_or_si512(low, _mm512_gf2p8affine_epi64_epi8::<0>(hm, gh[s]));
                _mm512_dpbusd_epi32(bias[s], code, yv[s])
            });
            let sc = _mm512_broadcast_i32x4(q3k_scales8(bx.add(96)));
            let words = |a: __m512i, b: __m512i| {
                _mm512_mask_blend_epi16(0xAAAA_AAAA, a, _mm512_slli_epi32::<16>(b))
            };
            let a = dpwssd(z, words(t[0], t[1]), _mm512_shuffle_epi8(sc, pick01));
            let a = dpwssd(a, words(t[2], t[3]), _mm512_shuffle_epi8(sc, pick23));
            let l = _mm256_srai_epi32::<8>(_mm256_add_epi32(
                _mm512_castsi512_si256(a),
                _mm512_extracti64x4_epi64::<1>(a),
            ));
            (
                _mm256_set1_ps(yd * h2f_f16c(bx.add(108))),
                _mm256_cvtepi32_ps(l),
            )
        }
    };
    let mut accf = [_mm256_setzero_ps(); R];
    // two blocks a pass: their chains are independent until the fused adds, which stay in
    // block order (one block's chain is about 30 cycles long; alone it left the core idle)
    let mut ib = 0;
    while ib + 2 <= nb {
        let ((y0, b0), d0) = (column(ib), yd(ib));
        let ((y1, b1), d1) = (column(ib + 1), yd(ib + 1));
        for (r, acc) in accf.iter_mut().enumerate() {
            let (da, la) = lanes(r, ib, &y0, &b0, d0);
            let (db, lb) = lanes(r, ib + 1, &y1, &b1, d1);
            *acc = _mm256_fmadd_ps(db, lb, _mm256_fmadd_ps(da, la, *acc));
        }
        ib += 2;
    }
    if ib < nb {
        let ((y0, b0), d0) = (column(ib), yd(ib));
        for (r, acc) in accf.iter_mut().enumerate() {
            let (da, la) = lanes(r, ib, &y0, &b0, d0);
            *acc = _mm256_fmadd_ps(da, la, *acc);
        }
    }
    accf
}

/// # Safety
/// The CPU has AVX2, FMA and F16C; `x`, `y` hold `nb` Q3_K / Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q3_k_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let m3 = _mm256_set1_epi8(3);
    let one = _mm256_set1_epi8(1);
    let (px, py) = (x.as_ptr(), y.as_ptr());
    // ggml's float order: per block, 8 lanes of exact sums of scale x (q - 4) x q8 fused times
    // d into 8 float lanes, summed last
    let mut accf = _mm256_setzero_ps();
    for i in 0..nb {
        // SAFETY: block i of both operands is within the nb blocks the caller checked; every
        // offset below stays inside its 110- or 292-byte block.
        unsafe {
            let (bx, by) = (px.add(110 * i), py.add(292 * i));
            let sc = halves(q3k_scales16(bx.add(96)));
            // a clear high bit means the code is 4 less (its bias), a set one adds nothing
            let low_hm = _mm256_xor_si256(load32(bx), _mm256_set1_epi8(-1));
            let mut acc = _mm256_setzero_si256();
            for (k, sck) in sc.iter().enumerate() {
                let q3 = load32(bx.add(32 + 32 * k));
                for s in 0..4 {
                    let low = _mm256_and_si256(shr16(q3, 2 * s), m3);
                    let bias =
                        _mm256_slli_epi16(_mm256_and_si256(shr16(low_hm, 4 * k + s), one), 2);
                    let q8 = load32(by.add(4 + 128 * k + 32 * s));
                    let p16 = _mm256_sub_epi16(
                        _mm256_maddubs_epi16(low, q8),
                        _mm256_maddubs_epi16(bias, q8),
                    );
                    let scale = _mm256_shuffle_epi8(*sck, pair_shuffle(s as i32));
                    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(scale, p16));
                }
            }
            let d = std::ptr::read_unaligned(by as *const f32) * h2f_f16c(bx.add(108));
            accf = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(acc), accf);
        }
    }
    hsum_ps(accf)
}

#[cfg(test)]
mod tests {
    /// One column's rows in one call equal the one-row kernel (`x86_prepared::check_rows`).
    #[test]
    fn rows_equal_the_one_row_kernel() {
        if !crate::simd::features::cpu().avx512_q3_k() {
            eprintln!("skipped: this CPU lacks the AVX-512 dot-product set or GFNI");
            return;
        }
        // SAFETY: the features are present.
        unsafe {
            super::prepared::check_rows(
                110,
                108,
                super::q3_k_avx512,
                super::q3_k_prep,
                super::q3_k_rows,
            )
        };
    }
}
