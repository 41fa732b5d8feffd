//! The x86 register tiles of `ops::qtile`: AVX2 and AVX-512 VNNI kernels for Q8_0, Q4_0,
//! Q5_0 and the repacked Q4_0 / IQ4_NL panels, each cell in the dot product's order.

use crate::dot::x86::{hsum_ps as hsum, unpack_q5_0};
use std::arch::x86_64::*;

/// (ggml's bit conversion, which measured faster here than F16C's one-lane cvtph2ps)
#[inline(always)]
unsafe fn scale(p: *const u8) -> f32 {
    // (every kernel here runs only where `features` found F16C)
    crate::fp::f16c_at(p)
}

#[inline(always)]
unsafe fn load_q8(p: *const u8) -> __m256i {
    _mm256_loadu_si256(p as *const __m256i)
}

#[inline(always)]
unsafe fn unpack_q4(p: *const u8) -> __m256i {
    let b = _mm_loadu_si128(p as *const __m128i);
    let both = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
    _mm256_sub_epi8(
        _mm256_and_si256(both, _mm256_set1_epi8(0x0F)),
        _mm256_set1_epi8(8),
    )
}

/// IQ4_NL's 32 values of a block: the nibbles looked up in kvalues_iq4nl.
#[inline(always)]
unsafe fn unpack_iq4_nl(p: *const u8) -> __m256i {
    let table = _mm_loadu_si128(ggml::quants::KVALUES_IQ4NL.as_ptr() as *const __m128i);
    let b = _mm_loadu_si128(p as *const __m128i);
    let m = _mm_set1_epi8(0x0F);
    let lo = _mm_shuffle_epi8(table, _mm_and_si128(b, m));
    let hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(b, 4), m));
    _mm256_set_m128i(hi, lo)
}

/// |x| . sign(y, x) summed in pairs to 8 i32 (no saturation for |values| <= 127)
#[inline(always)]
unsafe fn dot_i8(ax: __m256i, x: __m256i, y: __m256i) -> __m256i {
    _mm256_madd_epi16(
        _mm256_maddubs_epi16(ax, _mm256_sign_epi8(y, x)),
        _mm256_set1_epi16(1),
    )
}

#[inline(always)]
unsafe fn dot_i8_vnni(ax: __m256i, x: __m256i, y: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax, _mm256_sign_epi8(y, x))
}

macro_rules! qtile {
    ($name:ident, $feat:literal, $xs:expr, $xoff:expr, $load_x:ident, $dot:ident) => {
        /// # Safety
        /// The CPU supports the target features; pointers cover nb blocks.
        #[target_feature(enable = $feat)]
        pub unsafe fn $name<const R: usize, const C: usize>(
            nb: usize,
            a: &[*const u8; R],
            b: &[*const u8; C],
            out: &mut [f32],
        ) {
            let mut acc = [[_mm256_setzero_ps(); C]; R];
            for ib in 0..nb {
                let mut qy = [_mm256_setzero_si256(); C];
                let mut dy = [0.0f32; C];
                for c in 0..C {
                    let yb = b[c].add(34 * ib);
                    qy[c] = load_q8(yb.add(2));
                    dy[c] = scale(yb);
                }
                for r in 0..R {
                    let xb = a[r].add($xs * ib);
                    let dx = scale(xb);
                    let qx = $load_x(xb.add($xoff));
                    let ax = _mm256_sign_epi8(qx, qx);
                    for c in 0..C {
                        let d = _mm256_set1_ps(dx * dy[c]);
                        let s = _mm256_cvtepi32_ps($dot(ax, qx, qy[c]));
                        acc[r][c] = _mm256_fmadd_ps(d, s, acc[r][c]);
                    }
                }
            }
            for (o, v) in out.iter_mut().zip(acc.iter().flatten()) {
                *o = hsum(*v);
            }
        }
    };
}

/// The repacked Q4_0 (`NL` false) or IQ4_NL (`NL` true) order.
///
/// # Safety
/// The CPU supports AVX2, FMA and F16C; pointers cover nb blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q4_b32_repacked<const R: usize, const C: usize, const NL: bool>(
    nb: usize,
    a: &[*const u8; R],
    b: &[*const u8; C],
    out: &mut [f32],
) {
    // each column's cells sit in the lanes (one per row) of a 4-lane accumulator: the
    // exact block sums of four rows are reduced together, then one fused multiply-add
    // per block does every row's scalar step at once
    assert!(R <= 4);
    let zero = _mm256_setzero_si256();
    let ones = _mm256_set1_epi16(1);
    let eights = _mm256_set1_epi8(8);
    let low = _mm256_set1_epi8(0x0F);
    let mut acc = [_mm_setzero_ps(); C];
    for ib in 0..nb {
        let mut qy = [zero; C];
        let mut dy = [0.0f32; C];
        // Q4_0: sum((n - 8) * y) = sum(n * y) - sum(8 * y), both exact in i32, so the
        // unsigned nibbles multiply y directly and 8 * sum(y) is taken once per column
        let mut y8 = [zero; C];
        for c in 0..C {
            let yb = b[c].add(34 * ib);
            qy[c] = load_q8(yb.add(2));
            dy[c] = scale(yb);
            if !NL {
                y8[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(eights, qy[c]), ones);
            }
        }
        let (mut qx, mut ax) = ([zero; 4], [zero; 4]);
        let mut h = [0i16; 4];
        for r in 0..R {
            let xb = a[r].add(18 * ib);
            h[r] = (xb as *const i16).read_unaligned();
            if NL {
                qx[r] = unpack_iq4_nl(xb.add(2));
                ax[r] = _mm256_sign_epi8(qx[r], qx[r]);
            } else {
                let q = _mm_loadu_si128(xb.add(2) as *const __m128i);
                qx[r] = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), low);
            }
        }
        // F16C converts the four row scales at once (exactly, as `scale` does one)
        let dxv = _mm_cvtph_ps(_mm_set_epi16(0, 0, 0, 0, h[3], h[2], h[1], h[0]));
        for c in 0..C {
            let p: [__m256i; 4] = std::array::from_fn(|r| {
                if r >= R {
                    zero
                } else if NL {
                    dot_i8(ax[r], qx[r], qy[c])
                } else {
                    let s = _mm256_madd_epi16(_mm256_maddubs_epi16(qx[r], qy[c]), ones);
                    _mm256_sub_epi32(s, y8[c])
                }
            });
            let h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
            let s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            let d = _mm_mul_ps(dxv, _mm_set1_ps(dy[c]));
            acc[c] = _mm_fmadd_ps(_mm_cvtepi32_ps(s), d, acc[c]);
        }
    }
    for (c, v) in acc.iter().enumerate() {
        let mut lanes = [0.0f32; 4];
        _mm_storeu_ps(lanes.as_mut_ptr(), *v);
        for r in 0..R {
            out[r * C + c] = lanes[r];
        }
    }
}

/// Eight Q4_0 rows times one Q8_0 column in the repacked order. Two rows share each
/// register (one row's 16 quant bytes per half), the low nibbles meet y's first 16 values
/// and the high nibbles its last 16, so a block of eight rows costs four multiply chains
/// and three horizontal adds; sum((n - 8) * y) = sum(n * y) - 8 * sum(y), exact in i32.
/// The lanes hold rows 0, 2, 4, 6, 1, 3, 5, 7.
///
/// # Safety
/// The CPU supports AVX2, FMA and F16C; pointers cover nb blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q4_0_repacked_col8(nb: usize, a: &[*const u8; 8], y: *const u8, out: &mut [f32; 8]) {
    let low = _mm256_set1_epi8(0x0F);
    let ones = _mm256_set1_epi16(1);
    let eights = _mm256_set1_epi8(8);
    let mut acc = _mm256_setzero_ps();
    for ib in 0..nb {
        let yb = y.add(34 * ib);
        let qy = load_q8(yb.add(2));
        let dy = scale(yb);
        let ylo = _mm256_permute2x128_si256(qy, qy, 0x00);
        let yhi = _mm256_permute2x128_si256(qy, qy, 0x11);
        let y8 = _mm256_madd_epi16(_mm256_maddubs_epi16(eights, qy), ones);
        let t = _mm_add_epi32(_mm256_castsi256_si128(y8), _mm256_extracti128_si256(y8, 1));
        let t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0b01_00_11_10));
        let t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0b10_11_00_01));
        let y8sum = _mm256_broadcastd_epi32(t);
        let mut v = [_mm256_setzero_si256(); 4];
        for (p, vp) in v.iter_mut().enumerate() {
            let (xa, xb) = (a[2 * p].add(18 * ib + 2), a[2 * p + 1].add(18 * ib + 2));
            let raw = _mm256_loadu2_m128i(xb as *const __m128i, xa as *const __m128i);
            let lo = _mm256_and_si256(raw, low);
            let hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
            let s16 =
                _mm256_add_epi16(_mm256_maddubs_epi16(lo, ylo), _mm256_maddubs_epi16(hi, yhi));
            *vp = _mm256_madd_epi16(s16, ones);
        }
        let h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
        let s = _mm256_sub_epi32(h, y8sum);
        let hx = |r: usize| (a[r].add(18 * ib) as *const i16).read_unaligned();
        let dx = _mm256_cvtph_ps(_mm_set_epi16(
            hx(7),
            hx(5),
            hx(3),
            hx(1),
            hx(6),
            hx(4),
            hx(2),
            hx(0),
        ));
        let d = _mm256_mul_ps(dx, _mm256_set1_ps(dy));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, acc);
    }
    let mut lanes = [0.0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), acc);
    for (l, &r) in [0usize, 2, 4, 6, 1, 3, 5, 7].iter().enumerate() {
        out[r] = lanes[l];
    }
}

/// # Safety
/// AVX-512 VL/VNNI and AVX2; as for `super::col_sums`; bias is 8 or 128.
#[target_feature(enable = "avx512f,avx512vl,avx512vnni,avx2,f16c")]
pub unsafe fn col_sums(bias: u8, nb: usize, y: *const u8, out: *mut u8) {
    let bias = _mm256_set1_epi8(bias as i8);
    for ib in 0..nb {
        let yb = y.add(34 * ib);
        // bias * y summed in fours (u8 bias times s8 y: exact, no saturation), then across
        let s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), bias, load_q8(yb.add(2)));
        let t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        let t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0b01_00_11_10));
        let t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0b10_11_00_01));
        let o = out.add(ib * super::COLSUM_BLOCK_BYTES);
        (o as *mut i32).write_unaligned(-_mm_cvtsi128_si32(t));
        (o.add(4) as *mut f32).write_unaligned(scale(yb));
    }
}

/// # Safety
/// AVX-512 F/BW/VL/VNNI, FMA and F16C; as for `super::packed_tile`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub unsafe fn packed_tile<const NL: bool, const C: usize>(
    nb: usize,
    panel: *const u8,
    b: &[*const u8; C],
    sums: &[*const u8; C],
    out: &mut [[f32; 16]; C],
) {
    let low = _mm512_set1_epi8(0x0F);
    // IQ4_NL: kvalues_iq4nl + 128 (1..241, unsigned) in every 128-bit lane, for vpshufb
    let kv: [u8; 16] = std::array::from_fn(|i| (ggml::quants::KVALUES_IQ4NL[i] as i16 + 128) as u8);
    let table = _mm512_broadcast_i32x4(_mm_loadu_si128(kv.as_ptr() as *const __m128i));
    let mut acc = [_mm512_setzero_ps(); C];
    for ib in 0..nb {
        let p = panel.add(ib * super::PACKED_BLOCK_BYTES);
        if C == 1 {
            // one column streams the weight: fetch ahead across page boundaries, which
            // the hardware prefetcher does not cross
            fetch_ahead(p);
        }
        // quant byte i holds element i (low nibble) and element i + 16 (high nibble):
        // dword j's low nibbles meet y's dword j, its high nibbles y's dword j + 4; the
        // values are stored + 8 (Q4_0) or + 128 (IQ4_NL) to be unsigned for vpdpbusd
        let mut w = [_mm512_setzero_si512(); 8];
        for j in 0..4 {
            let v = _mm512_loadu_si512(p.add(32 + 64 * j) as *const __m512i);
            let (mut lo, mut hi) = (
                _mm512_and_si512(v, low),
                _mm512_and_si512(_mm512_srli_epi16(v, 4), low),
            );
            if NL {
                lo = _mm512_shuffle_epi8(table, lo);
                hi = _mm512_shuffle_epi8(table, hi);
            }
            w[j] = lo;
            w[j + 4] = hi;
        }
        // (f16 to f32 is exact: the same values the scalar conversion gives)
        let dx = _mm512_cvtph_ps(_mm256_loadu_si256(p as *const __m256i));
        for c in 0..C {
            let sb = sums[c].add(ib * super::COLSUM_BLOCK_BYTES);
            let yq = b[c].add(34 * ib + 2);
            // every row's exact block sum: start from -bias * sum(y), add (value + bias) * y
            // in fours
            let mut s = _mm512_set1_epi32((sb as *const i32).read_unaligned());
            for (j, wj) in w.iter().enumerate() {
                let y4 = (yq.add(4 * j) as *const i32).read_unaligned();
                s = _mm512_dpbusd_epi32(s, *wj, _mm512_set1_epi32(y4));
            }
            // f32(dx) * f32(dy) rounded, then one fused step per block: the repacked order
            let dy = (sb.add(4) as *const f32).read_unaligned();
            let d = _mm512_mul_ps(dx, _mm512_set1_ps(dy));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), d, acc[c]);
        }
    }
    for (o, v) in out.iter_mut().zip(acc.iter()) {
        _mm512_storeu_ps(o.as_mut_ptr(), *v);
    }
}

/// One column times P full panels at once, each panel's rows in `packed_tile`'s order (the
/// same bits as `packed_tile::<_, 1>` panel by panel): P streams of the weight in flight
/// instead of one, and the column's broadcasts shared by the P panels.
///
/// # Safety
/// As for `packed_tile` with C = 1, for every panel.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub unsafe fn packed_gemv<const NL: bool, const P: usize>(
    nb: usize,
    panels: &[*const u8; P],
    y: *const u8,
    sums: *const u8,
    out: &mut [[f32; 16]; P],
    prefetch: bool,
) {
    let low = _mm512_set1_epi8(0x0F);
    let kv: [u8; 16] = std::array::from_fn(|i| (ggml::quants::KVALUES_IQ4NL[i] as i16 + 128) as u8);
    let table = _mm512_broadcast_i32x4(_mm_loadu_si128(kv.as_ptr() as *const __m128i));
    let mut acc = [_mm512_setzero_ps(); P];
    for ib in 0..nb {
        let sb = sums.add(ib * super::COLSUM_BLOCK_BYTES);
        let yq = y.add(34 * ib + 2);
        let y4: [__m512i; 8] = std::array::from_fn(|j| {
            _mm512_set1_epi32((yq.add(4 * j) as *const i32).read_unaligned())
        });
        let s0 = _mm512_set1_epi32((sb as *const i32).read_unaligned());
        let dy = _mm512_set1_ps((sb.add(4) as *const f32).read_unaligned());
        for (q, &panel) in panels.iter().enumerate() {
            let p = panel.add(ib * super::PACKED_BLOCK_BYTES);
            if prefetch {
                fetch_ahead(p);
            }
            // (the block sum is exact in i32, so the order of its steps does not matter)
            let mut s = s0;
            for j in 0..4 {
                let v = _mm512_loadu_si512(p.add(32 + 64 * j) as *const __m512i);
                let (mut lo, mut hi) = (
                    _mm512_and_si512(v, low),
                    _mm512_and_si512(_mm512_srli_epi16(v, 4), low),
                );
                if NL {
                    lo = _mm512_shuffle_epi8(table, lo);
                    hi = _mm512_shuffle_epi8(table, hi);
                }
                s = _mm512_dpbusd_epi32(s, lo, y4[j]);
                s = _mm512_dpbusd_epi32(s, hi, y4[j + 4]);
            }
            let dx = _mm512_cvtph_ps(_mm256_loadu_si256(p as *const __m256i));
            let d = _mm512_mul_ps(dx, dy);
            acc[q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), d, acc[q]);
        }
    }
    for (o, v) in out.iter_mut().zip(acc.iter()) {
        _mm512_storeu_ps(o.as_mut_ptr(), *v);
    }
}

/// How far ahead of its block the one-column kernel fetches the weight.
const PREFETCH: usize = 2048;

/// Fetches the panel block PREFETCH bytes on from the block at p (its 288 bytes in three
/// lines; a prefetch is a hint and never faults, whatever the address).
#[inline(always)]
fn fetch_ahead(p: *const u8) {
    for l in 0..3 {
        // SAFETY: SSE is part of x86-64; a prefetch reads nothing the program sees.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH + 128 * l) as *const i8) };
    }
}

/// # Safety
/// AVX2 and F16C; as for `super::col_sums`; bias is 8 or 128.
#[target_feature(enable = "avx2,f16c")]
pub unsafe fn col_sums_avx2(bias: u8, nb: usize, y: *const u8, out: *mut u8) {
    let bias = _mm256_set1_epi8(bias as i8);
    let ones = _mm256_set1_epi16(1);
    for ib in 0..nb {
        let yb = y.add(34 * ib);
        // u8 bias times s8 y in pairs: |2 * 128 * 128| fits i16 (no saturation)
        let s = _mm256_madd_epi16(_mm256_maddubs_epi16(bias, load_q8(yb.add(2))), ones);
        let t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        let t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0b01_00_11_10));
        let t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0b10_11_00_01));
        let o = out.add(ib * super::COLSUM_BLOCK_BYTES);
        (o as *mut i32).write_unaligned(-_mm_cvtsi128_si32(t));
        (o.add(4) as *mut f32).write_unaligned(scale(yb));
    }
}

/// Half h (rows 8h..8h + 8) of a panel block's values: element groups 0..4 (the low
/// nibbles of dwords 0..4) and 4..8 (their high nibbles), 8 rows x 4 values a register.
/// Q4_0 keeps the stored nibbles (value + 8, unsigned); IQ4_NL looks them up in
/// kvalues_iq4nl (signed).
#[inline(always)]
unsafe fn half_block<const NL: bool>(p: *const u8, h: usize, table: __m256i) -> [__m256i; 8] {
    let low = _mm256_set1_epi8(0x0F);
    let mut w = [_mm256_setzero_si256(); 8];
    for j in 0..4 {
        let v = _mm256_loadu_si256(p.add(32 + 64 * j + 32 * h) as *const __m256i);
        let (mut lo, mut hi) = (
            _mm256_and_si256(v, low),
            _mm256_and_si256(_mm256_srli_epi16(v, 4), low),
        );
        if NL {
            lo = _mm256_shuffle_epi8(table, lo);
            hi = _mm256_shuffle_epi8(table, hi);
        }
        w[j] = lo;
        w[j + 4] = hi;
    }
    w
}

/// Eight rows' exact block sums against one column (y's dword j broadcast in y4[j]).
/// Q4_0: the nibbles (0..15) times y in pairs, eight such pairs summed in i16
/// (|8 * 2 * 15 * 127| < 2^15), widened, plus -8 * sum(y) (s0); IQ4_NL: |w| . sign(y, w)
/// (pairs |2 * 127 * 127| < 2^15, Q8_0 quants are -127..127), widened per pair.
#[inline(always)]
unsafe fn half_sums<const NL: bool>(w: &[__m256i; 8], y4: &[__m256i; 8], s0: __m256i) -> __m256i {
    let ones = _mm256_set1_epi16(1);
    if NL {
        let mut s = _mm256_setzero_si256();
        for j in 0..8 {
            let m =
                _mm256_maddubs_epi16(_mm256_sign_epi8(w[j], w[j]), _mm256_sign_epi8(y4[j], w[j]));
            s = _mm256_add_epi32(s, _mm256_madd_epi16(m, ones));
        }
        s
    } else {
        let mut s16 = _mm256_maddubs_epi16(w[0], y4[0]);
        for j in 1..8 {
            s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(w[j], y4[j]));
        }
        _mm256_add_epi32(_mm256_madd_epi16(s16, ones), s0)
    }
}

/// The signed kvalues_iq4nl in both 128-bit lanes, for vpshufb.
#[inline(always)]
unsafe fn iq4nl_table() -> __m256i {
    _mm256_broadcastsi128_si256(_mm_loadu_si128(
        ggml::quants::KVALUES_IQ4NL.as_ptr() as *const __m128i
    ))
}

/// `packed_tile` on AVX2, C <= 4 columns: each half panel (8 rows, one i32 lane each) in
/// a pass of its own, its block unpacked once for the C columns.
///
/// # Safety
/// AVX2, FMA and F16C; as for `super::packed_tile` (sums from `col_sums_avx2`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn packed_tile_avx2<const NL: bool, const C: usize>(
    nb: usize,
    panel: *const u8,
    b: &[*const u8; C],
    sums: &[*const u8; C],
    out: &mut [[f32; 16]; C],
) {
    let table = iq4nl_table();
    for h in 0..2 {
        let mut acc = [_mm256_setzero_ps(); C];
        for ib in 0..nb {
            let p = panel.add(ib * super::PACKED_BLOCK_BYTES);
            let w = half_block::<NL>(p, h, table);
            // (f16 to f32 is exact: the same values the scalar conversion gives)
            let dx = _mm256_cvtph_ps(_mm_loadu_si128(p.add(16 * h) as *const __m128i));
            for c in 0..C {
                let sb = sums[c].add(ib * super::COLSUM_BLOCK_BYTES);
                let yq = b[c].add(34 * ib + 2);
                let y4: [__m256i; 8] = std::array::from_fn(|j| {
                    _mm256_set1_epi32((yq.add(4 * j) as *const i32).read_unaligned())
                });
                let s0 = _mm256_set1_epi32((sb as *const i32).read_unaligned());
                let s = half_sums::<NL>(&w, &y4, s0);
                let dy = (sb.add(4) as *const f32).read_unaligned();
                let d = _mm256_mul_ps(dx, _mm256_set1_ps(dy));
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, acc[c]);
            }
        }
        for (o, v) in out.iter_mut().zip(acc.iter()) {
            _mm256_storeu_ps(o.as_mut_ptr().add(8 * h), *v);
        }
    }
}

/// `packed_gemv` on AVX2: one column times P full panels read side by side.
///
/// # Safety
/// AVX2, FMA and F16C; as for `super::packed_gemv` (sums from `col_sums_avx2`).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn packed_gemv_avx2<const NL: bool, const P: usize>(
    nb: usize,
    panels: &[*const u8; P],
    y: *const u8,
    sums: *const u8,
    out: &mut [[f32; 16]; P],
    prefetch: bool,
) {
    let table = iq4nl_table();
    let mut acc = [[_mm256_setzero_ps(); 2]; P];
    for ib in 0..nb {
        let sb = sums.add(ib * super::COLSUM_BLOCK_BYTES);
        let yq = y.add(34 * ib + 2);
        let y4: [__m256i; 8] = std::array::from_fn(|j| {
            _mm256_set1_epi32((yq.add(4 * j) as *const i32).read_unaligned())
        });
        let s0 = _mm256_set1_epi32((sb as *const i32).read_unaligned());
        let dy = _mm256_set1_ps((sb.add(4) as *const f32).read_unaligned());
        for (q, &panel) in panels.iter().enumerate() {
            let p = panel.add(ib * super::PACKED_BLOCK_BYTES);
            if prefetch {
                fetch_ahead(p);
            }
            for (h, a) in acc[q].iter_mut().enumerate() {
                let w = half_block::<NL>(p, h, table);
                let s = half_sums::<NL>(&w, &y4, s0);
                let dx = _mm256_cvtph_ps(_mm_loadu_si128(p.add(16 * h) as *const __m128i));
                *a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dx, dy), *a);
            }
        }
    }
    for (o, v) in out.iter_mut().zip(acc.iter()) {
        _mm256_storeu_ps(o.as_mut_ptr(), v[0]);
        _mm256_storeu_ps(o.as_mut_ptr().add(8), v[1]);
    }
}

/// Q8_0 rows times C columns (C a multiple of 6) in the order of `q8_0_vnni`: each
/// 512-bit accumulator holds two cells of one row, the 8 lanes of column c in its low half
/// and those of column c + 1 in its high half, so one vpdpbusd, conversion, multiply and
/// FMA serve two cells. Every lane gets the same exact 4-product integer sum as the
/// 256-bit kernel's lane (computed as (x + 128) * y - 128 * y, all exact in i32, since
/// AVX-512 has no byte sign instruction), the same f32(dx) * f32(dy) product, the same
/// FMA per block and the same final 8-lane sum per cell.
///
/// # Safety
/// AVX-512 F/BW/VL/VNNI, AVX2, FMA and F16C; pointers cover nb blocks; out holds R * C.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub unsafe fn q8_0_zmm<const R: usize, const C: usize>(
    nb: usize,
    a: &[*const u8; R],
    b: &[*const u8; C],
    out: &mut [f32],
) {
    const P: usize = super::Q8_0_ZMM_COLS / 2;
    // (the scales of R rows and 2P columns go through one 8-lane conversion each)
    assert!(R <= 8 && 2 * P <= 8);
    // 0x80: as unsigned bytes, +128 (x ^ 0x80 = x + 128 for signed x)
    let bias = _mm512_set1_epi8(-128);
    let zero = _mm512_setzero_si512();
    // column groups one after the other: 4 x 3 accumulators, the x and dx of four rows
    // and a pair's y, correction and dy stay in registers
    for g in (0..C).step_by(2 * P) {
        let mut acc = [[_mm512_setzero_ps(); P]; R];
        for ib in 0..nb {
            let mut xu = [zero; R];
            let mut h = [0u16; 8];
            for r in 0..R {
                let xb = a[r].add(34 * ib);
                let x = _mm512_broadcast_i64x4(load_q8(xb.add(2)));
                xu[r] = _mm512_xor_si512(x, bias);
                h[r] = (xb as *const u16).read_unaligned();
            }
            // F16C converts the row scales together (exact: the scalar conversion's bits),
            // then each is spread over a register
            let dxs = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128(
                h.as_ptr() as *const __m128i
            )));
            let dx: [__m512; R] =
                std::array::from_fn(|r| _mm512_permutexvar_ps(_mm512_set1_epi32(r as i32), dxs));
            let mut hy = [0u16; 8];
            for (c, hc) in hy.iter_mut().take(2 * P).enumerate() {
                *hc = (b[g + c].add(34 * ib) as *const u16).read_unaligned();
            }
            let dys = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128(
                hy.as_ptr() as *const __m128i
            )));
            for p in 0..P {
                let (y0, y1) = (b[g + 2 * p].add(34 * ib), b[g + 2 * p + 1].add(34 * ib));
                let y = _mm512_inserti64x4::<1>(
                    _mm512_castsi256_si512(load_q8(y0.add(2))),
                    load_q8(y1.add(2)),
                );
                // -128 * y summed in fours, the start of every row's sums with this pair
                let corr = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, bias, y));
                // column 2p's scale in the low half, 2p + 1's in the high half
                let sel = _mm512_mask_blend_epi32(
                    0xFF00,
                    _mm512_set1_epi32(2 * p as i32),
                    _mm512_set1_epi32(2 * p as i32 + 1),
                );
                let dy = _mm512_permutexvar_ps(sel, dys);
                for r in 0..R {
                    let s = _mm512_dpbusd_epi32(corr, xu[r], y);
                    // lane-wise f32(dx) * f32(dy): the 256-bit kernel's scalar product
                    let d = _mm512_mul_ps(dx[r], dy);
                    acc[r][p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(s), acc[r][p]);
                }
            }
        }
        for (r, row) in acc.iter().enumerate() {
            for (p, v) in row.iter().enumerate() {
                let lo = _mm512_castps512_ps256(*v);
                let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(*v)));
                out[r * C + g + 2 * p] = hsum(lo);
                out[r * C + g + 2 * p + 1] = hsum(hi);
            }
        }
    }
}

qtile!(q8_0, "avx2,fma,f16c", 34, 2, load_q8, dot_i8);
qtile!(
    q8_0_vnni,
    "avx2,fma,f16c,avx512vnni,avx512vl",
    34,
    2,
    load_q8,
    dot_i8_vnni
);
qtile!(q4_0, "avx2,fma,f16c", 18, 2, unpack_q4, dot_i8);
qtile!(q5_0, "avx2,fma,f16c", 22, 2, unpack_q5_0, dot_i8);
qtile!(
    q5_0_vnni,
    "avx2,fma,f16c,avx512vnni,avx512vl",
    22,
    2,
    unpack_q5_0,
    dot_i8_vnni
);
qtile!(
    q4_0_vnni,
    "avx2,fma,f16c,avx512vnni,avx512vl",
    18,
    2,
    unpack_q4,
    dot_i8_vnni
);
