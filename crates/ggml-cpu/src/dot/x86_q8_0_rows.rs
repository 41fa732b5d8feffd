//! Q8_0 or Q5_0 weight rows times one Q8_0 column, and Q4_1 or Q5_1 rows times one Q8_1
//! column (token generation), row after row, each result ggml's AVX2 dot product for the type
//! to the bit (per block fma(dx * dy, f32(sums of 4 products), lane) in 8 lanes, the lanes
//! added as `hsum_ps` adds them; for Q4_1 / Q5_1 plus the sum of min x column sum products,
//! each a product, then an add), in fewer instructions:
//!
//! - the column's parts that every row needs are made once (`prep`): each block's scale as f32
//!   and -offset x its sums of 4 codes;
//! - vpdpbusd multiplies unsigned by signed bytes: Q8_0 weights go in as x + 128 (one xor),
//!   Q5_0's as their unsigned 5-bit codes (the values + 16), and the column's -offset x (sum
//!   of 4 codes) is its start value, where ggml's sign trick takes two vpsignb (the same
//!   integer sums: codes lie in -127..=127); Q4_1 / Q5_1 codes are unsigned already;
//! - eight rows' horizontal sums are done together (`hsum8`), in each row's order.
//!
//! The rows go one after another (not block by block across rows): streaming from memory, the
//! hardware prefetcher keeps up with one ascending stream, not with eight interleaved ones (nor
//! with two adjacent rows side by side). It stops at each 4 KiB page, though: where the CPU's
//! policy says so (`simd::features::rows_page_ahead`), a row that ends on a new page asks
//! for a line of the page after it first; and where it says so (`rows_in_halves`), Q8_0
//! rows go two at a time from the two halves of the caller's rows, two streams far apart.

use std::arch::x86_64::*;

/// f32 slots of `prep` per block: the scale, the sum (Q8_1 columns), eight i32 start values.
pub(crate) const PREP_SLOTS: usize = 10;

/// The weight types of `rows`: Q8_0 (codes -127..=127, taken as x + 128) and Q5_0 (codes
/// 0..32 for the values x - 16) against a Q8_0 column; Q4_1 and Q5_1 (unsigned codes, a min
/// per block) against a Q8_1 column.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Weights {
    Q8_0,
    Q5_0,
    Q4_1,
    Q5_1,
}

/// `Weights` as the kernels' const argument (`weights` maps it back).
const Q8: u8 = 0;
const Q5: u8 = 1;
const Q41: u8 = 2;
const Q51: u8 = 3;

const fn weights(w: u8) -> Weights {
    match w {
        Q8 => Weights::Q8_0,
        Q5 => Weights::Q5_0,
        Q41 => Weights::Q4_1,
        _ => Weights::Q5_1,
    }
}

impl Weights {
    /// The offset of vpdpbusd's unsigned codes from the values.
    const fn offset(self) -> i8 {
        match self {
            Weights::Q8_0 => 0x80u8 as i8,
            Weights::Q5_0 => 16,
            Weights::Q4_1 | Weights::Q5_1 => 0,
        }
    }

    /// Whether the weights have a min per block and so the column is Q8_1 (36-byte blocks
    /// with their sum) rather than Q8_0: ggml adds the min x sum products apart.
    const fn q8_1(self) -> bool {
        matches!(self, Weights::Q4_1 | Weights::Q5_1)
    }

    /// The column's block bytes and where its codes start.
    const fn column_block(self) -> (usize, usize) {
        if self.q8_1() {
            (36, 4)
        } else {
            (34, 2)
        }
    }

    /// Bytes of a weight block.
    pub(crate) const fn bytes(self) -> usize {
        match self {
            Weights::Q8_0 => 34,
            Weights::Q5_0 => 22,
            Weights::Q4_1 => 20,
            Weights::Q5_1 => 24,
        }
    }

    fn ty(self) -> ggml::Type {
        match self {
            Weights::Q8_0 => ggml::Type::Q8_0,
            Weights::Q5_0 => ggml::Type::Q5_0,
            Weights::Q4_1 => ggml::Type::Q4_1,
            Weights::Q5_1 => ggml::Type::Q5_1,
        }
    }
}

/// Fills `prep` (PREP_SLOTS * nb slots) for column `y` and weights `w`: nb scales as f32, nb
/// sums as f32 (Q8_1 columns only), then per block the eight i32 lanes -offset x (sum of codes
/// 4l..4l + 4; Q8_0 columns only, the slots of the others are left as they were).
///
/// # Safety
/// `super::x86::has_avx512()`; `y` points at nb blocks of the column's type (Q8_1 for Q4_1
/// and Q5_1 weights, Q8_0 otherwise).
#[target_feature(enable = "avx2,f16c,avx512vnni,avx512vl")]
pub(crate) unsafe fn prep(w: Weights, nb: usize, y: *const u8, prep: &mut [f32]) {
    assert!(prep.len() >= PREP_SLOTS * nb);
    let (scales, rest) = prep.split_at_mut(nb);
    let (sums, starts) = rest.split_at_mut(nb);
    let (ys, yq) = w.column_block();
    let off = _mm256_set1_epi8(w.offset());
    for b in 0..nb {
        // SAFETY: block b of y is readable (the caller's promise); starts holds 8 * nb slots.
        unsafe {
            let by = y.add(ys * b);
            scales[b] = super::x86::h2f_f16c(by);
            if w.q8_1() {
                // unsigned codes start from zero (`rows_n`): no start values to make
                sums[b] = super::x86::h2f_f16c(by.add(2));
                continue;
            }
            let q = _mm256_loadu_si256(by.add(yq) as *const __m256i);
            // offset x (sum of 4 codes), negated
            let s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), off, q);
            let neg = _mm256_sub_epi32(_mm256_setzero_si256(), s);
            _mm256_storeu_si256(starts.as_mut_ptr().add(8 * b) as *mut __m256i, neg);
        }
    }
}

/// Block `bx`'s 32 codes as unsigned bytes (the values plus `W`'s offset).
///
/// # Safety
/// `bx` points at a whole block of `W`.
#[inline]
#[target_feature(enable = "avx2,avx512bw,avx512vl")]
unsafe fn codes<const W: u8>(bx: *const u8) -> __m256i {
    // SAFETY: the caller's promise: a Q8_0 block holds 32 codes at 2; a Q5_0 block its 4 qh
    // bytes at 2 and 16 nibble bytes at 6; Q4_1 its nibbles at 4; Q5_1 qh at 4, nibbles at 8.
    unsafe {
        if W == Q8 {
            let q = _mm256_loadu_si256(bx.add(2) as *const __m256i);
            return _mm256_xor_si256(q, _mm256_set1_epi8(0x80u8 as i8));
        }
        let (qh_at, qs_at) = match W {
            Q5 => (2, 6),
            Q41 => (0, 4),
            _ => (4, 8),
        };
        let qs = _mm_loadu_si128(bx.add(qs_at) as *const __m128i);
        // low nibbles are values 0..16, high nibbles 16..32; bit i of qh adds 16 to value i
        let v = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(qs), _mm_srli_epi16::<4>(qs));
        let v = _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
        if W == Q41 {
            return v;
        }
        let qh = (bx.add(qh_at) as *const u32).read_unaligned();
        _mm256_mask_add_epi8(v, qh, v, _mm256_set1_epi8(0x10))
    }
}

/// R rows' 8 lanes (per block fma(dx * dy, f32(integer sums), acc), as ggml's kernels) and,
/// for weights with a min, their sums of min x column sum (a product, then an add).
///
/// # Safety
/// Each x[r] points at nb blocks of `W`, `y` at the column's, `prep` is `prep`'s for it.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512bw,avx512vnni,avx512vl")]
unsafe fn rows_n<const W: u8, const R: usize>(
    nb: usize,
    x: [*const u8; R],
    y: *const u8,
    prep: &[f32],
) -> ([__m256; R], [f32; R]) {
    let w = const { weights(W) };
    let xs = w.bytes();
    let (ys, yq) = w.column_block();
    let (scales, rest) = prep.split_at(nb);
    let (sums, starts) = rest.split_at(nb);
    let mut acc = [_mm256_setzero_ps(); R];
    let mut summs = [0.0f32; R];
    for b in 0..nb {
        // SAFETY: block b of every row and of y is readable; starts holds 8 i32 per block.
        unsafe {
            let qy = _mm256_loadu_si256(y.add(ys * b + yq) as *const __m256i);
            let st = if w.q8_1() {
                _mm256_setzero_si256()
            } else {
                _mm256_loadu_si256(starts.as_ptr().add(8 * b) as *const __m256i)
            };
            for r in 0..R {
                let bx = x[r].add(xs * b);
                if w.q8_1() {
                    summs[r] += super::x86::h2f_f16c(bx.add(2)) * sums[b];
                }
                let d = _mm256_set1_ps(super::x86::h2f_f16c(bx) * scales[b]);
                let s = _mm256_dpbusd_epi32(st, codes::<W>(bx), qy);
                acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc[r]);
            }
        }
    }
    (acc, summs)
}

/// out[i] = the dot product (ggml's AVX2 one for `w`) of the row of `w` blocks at
/// `x + i * stride` and the column `y` (`prep`'s): the rows one after another, or (`halves`)
/// row r of the first half beside row r of the second.
///
/// # Safety
/// `super::x86::has_avx512()`; `y` holds nb blocks, `prep` is `prep(w, nb, y, ..)`'s, and each
/// of the out.len() rows holds nb blocks.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn rows(
    w: Weights,
    nb: usize,
    x: *const u8,
    stride: usize,
    y: *const u8,
    prep: &[f32],
    out: &mut [f32],
    halves: bool,
) {
    // SAFETY: the caller's promise.
    unsafe {
        match w {
            Weights::Q8_0 => rows_of::<Q8>(nb, x, stride, y, prep, out, halves),
            Weights::Q5_0 => rows_of::<Q5>(nb, x, stride, y, prep, out, halves),
            Weights::Q4_1 => rows_of::<Q41>(nb, x, stride, y, prep, out, halves),
            Weights::Q5_1 => rows_of::<Q51>(nb, x, stride, y, prep, out, halves),
        }
    }
}

/// Eight rows' results: their horizontal sums together (`hsum8`, each row's order), plus
/// their sums of min products where `W` has mins (ggml's hsum_float_8(acc) + summs).
///
/// # Safety
/// AVX2.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn finish8<const W: u8>(acc: &[__m256; 8], summs: &[f32; 8]) -> [f32; 8] {
    let mut v = super::x86::hsum8(acc);
    if weights(W).q8_1() {
        // SAFETY: summs holds 8 floats.
        v = _mm256_add_ps(v, unsafe { _mm256_loadu_ps(summs.as_ptr()) });
    }
    let mut o = [0.0f32; 8];
    // SAFETY: o holds 8 floats.
    unsafe { _mm256_storeu_ps(o.as_mut_ptr(), v) };
    o
}

/// One row's result from its lanes and sum of min products.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn finish1<const W: u8>(acc: __m256, summs: f32) -> f32 {
    let h = super::x86::hsum_ps(acc);
    if weights(W).q8_1() {
        h + summs
    } else {
        h
    }
}

/// `rows` for weights `W`.
///
/// # Safety
/// As for `rows`.
#[target_feature(enable = "avx2,fma,f16c,avx512bw,avx512vnni,avx512vl")]
unsafe fn rows_of<const W: u8>(
    nb: usize,
    x: *const u8,
    stride: usize,
    y: *const u8,
    prep: &[f32],
    out: &mut [f32],
    halves: bool,
) {
    assert!(prep.len() >= PREP_SLOTS * nb);
    let w = const { weights(W) };
    let ahead = crate::simd::features::cpu().rows_page_ahead(w.ty());
    let len = w.bytes() * nb;
    let at = |r: usize| {
        let p = x.wrapping_add(r * stride);
        if ahead > 0 {
            crate::simd::prefetch_page_ahead(p, len, ahead);
        }
        p
    };
    // SAFETY: AVX-512 is enabled here; every row r the loops ask for exists (the caller's
    // promise).
    let row1 = |r: usize| unsafe { rows_n::<W, 1>(nb, [at(r)], y, prep) };
    let one = |r: usize| {
        let (a, s) = row1(r);
        finish1::<W>(a[0], s[0])
    };
    if !halves {
        let mut groups = out.chunks_exact_mut(8);
        let mut r = 0;
        for g in &mut groups {
            let rows: [(__m256, f32); 8] = std::array::from_fn(|i| {
                let (a, s) = row1(r + i);
                (a[0], s[0])
            });
            // SAFETY: AVX2 is enabled here.
            let o = unsafe { finish8::<W>(&rows.map(|v| v.0), &rows.map(|v| v.1)) };
            g.copy_from_slice(&o);
            r += 8;
        }
        for o in groups.into_remainder() {
            *o = one(r);
            r += 1;
        }
        return;
    }
    // rows r and r + h side by side: two chains in flight, from two streams far apart (two
    // adjacent rows side by side measured half as fast: the prefetcher sees no stream)
    let h = out.len() / 2;
    // SAFETY: as for row1, for rows r and r + h.
    let two = |r: usize| unsafe { rows_n::<W, 2>(nb, [at(r), at(r + h)], y, prep) };
    let (lo, hi) = out.split_at_mut(h);
    let mut r = 0;
    while r + 4 <= h {
        let p: [([__m256; 2], [f32; 2]); 4] = std::array::from_fn(|i| two(r + i));
        let acc = std::array::from_fn(|i| p[i % 4].0[i / 4]);
        let summs = std::array::from_fn(|i| p[i % 4].1[i / 4]);
        // SAFETY: AVX2 is enabled here.
        let o = unsafe { finish8::<W>(&acc, &summs) };
        lo[r..r + 4].copy_from_slice(&o[..4]);
        hi[r..r + 4].copy_from_slice(&o[4..]);
        r += 4;
    }
    while r < h {
        let (a, s) = two(r);
        lo[r] = finish1::<W>(a[0], s[0]);
        hi[r] = finish1::<W>(a[1], s[1]);
        r += 1;
    }
    if hi.len() > h {
        hi[h] = one(2 * h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` blocks of `size` bytes: finite f16 values from 1e-4 to 1e2 at each offset of
    /// `halves` (scales, mins, sums), any bytes elsewhere (codes in -127..=127 where
    /// `codes_from` says a Q8 block's codes start, as quantize_row_q8_0 makes them).
    fn blocks(
        n: usize,
        size: usize,
        halves: &[usize],
        codes_from: Option<usize>,
        seed: u64,
    ) -> Vec<u8> {
        let mut s = seed;
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) as u32
        };
        let mut v = vec![0u8; size * n];
        for b in v.chunks_exact_mut(size) {
            for q in b.iter_mut() {
                *q = next() as u8;
            }
            if let Some(c) = codes_from {
                for q in &mut b[c..] {
                    *q = ((next() % 255) as i32 - 127) as i8 as u8;
                }
            }
            for &o in halves {
                let d = 10f32.powf((next() % 600) as f32 / 100.0 - 4.0);
                b[o..o + 2].copy_from_slice(&ggml::quants::fp32_to_fp16(d).to_le_bytes());
            }
        }
        v
    }

    #[test]
    fn rows_equal_the_one_row_kernel_bit_for_bit() {
        if !crate::dot::x86::has_avx512() {
            eprintln!("skipped: no AVX-512 VNNI on this CPU");
            return;
        }
        use ggml::Type;
        for (w, ty) in [
            (Weights::Q8_0, Type::Q8_0),
            (Weights::Q5_0, Type::Q5_0),
            (Weights::Q4_1, Type::Q4_1),
            (Weights::Q5_1, Type::Q5_1),
        ] {
            let kernel = crate::dot::cpu_traits(ty).vec_dot;
            let xs = w.bytes();
            for (nb, nrows) in [(1, 1), (1, 3), (8, 8), (8, 21), (7, 16), (20, 29), (64, 13)] {
                let seed = 1 + nb as u64;
                let (x, y) = match w {
                    Weights::Q8_0 => (
                        blocks(nb * nrows, 34, &[0], Some(2), seed),
                        blocks(nb, 34, &[0], Some(2), 99),
                    ),
                    Weights::Q5_0 => (
                        blocks(nb * nrows, 22, &[0], None, seed),
                        blocks(nb, 34, &[0], Some(2), 99),
                    ),
                    _ => (
                        blocks(nb * nrows, xs, &[0, 2], None, seed),
                        blocks(nb, 36, &[0, 2], Some(4), 99),
                    ),
                };
                let mut pre = vec![f32::NAN; PREP_SLOTS * nb];
                // SAFETY: AVX-512 VNNI checked; y holds nb blocks of the column's type.
                unsafe { prep(w, nb, y.as_ptr(), &mut pre) };
                for halves in [false, true] {
                    let mut out = vec![0.0f32; nrows];
                    let (px, py, st) = (x.as_ptr(), y.as_ptr(), xs * nb);
                    // SAFETY: AVX-512 VNNI checked; x holds nrows rows of nb blocks.
                    unsafe { rows(w, nb, px, st, py, &pre, &mut out, halves) };
                    for (r, o) in out.iter().enumerate() {
                        let want = kernel(32 * nb, &x[xs * nb * r..xs * nb * (r + 1)], &y);
                        assert_eq!(
                            o.to_bits(),
                            want.to_bits(),
                            "{w:?} halves {halves} nb {nb} row {r}: {o} vs {want}"
                        );
                    }
                }
            }
        }
    }
}
