//! Q8_0 or Q5_0 weight rows times one Q8_0 column (token generation), row after row, each
//! result ggml's AVX2 `ggml_vec_dot_q8_0_q8_0` / `ggml_vec_dot_q5_0_q8_0` to the bit (per block
//! fma(dx * dy, f32(sums of 4 products), lane) in 8 lanes, the lanes added as `hsum_ps` adds
//! them), in fewer instructions:
//!
//! - the column's parts that every row needs are made once (`prep`): each block's scale as f32
//!   and -offset x its sums of 4 codes;
//! - vpdpbusd multiplies unsigned by signed bytes: Q8_0 weights go in as x + 128 (one xor),
//!   Q5_0's as their unsigned 5-bit codes (the values + 16), and the column's -offset x (sum
//!   of 4 codes) is its start value, where ggml's sign trick takes two vpsignb (the same
//!   integer sums: codes lie in -127..=127);
//! - eight rows' horizontal sums are done together (`hsum8`), in each row's order.
//!
//! The rows go one after another (not block by block across rows): streaming from memory, the
//! hardware prefetcher keeps up with one ascending stream, not with eight interleaved ones (nor
//! with two adjacent rows side by side). It stops at each 4 KiB page, though: where the CPU's
//! policy says so (`simd::features::rows_page_ahead`), a row that ends on a new page asks
//! for a line of the page after it first; and where it says so (`rows_in_halves`), Q8_0
//! rows go two at a time from the two halves of the caller's rows, two streams far apart.

use std::arch::x86_64::*;

use super::x86::by_eight;

/// f32 slots of `prep` per block: the scale, then eight i32 start values.
pub(crate) const PREP_SLOTS: usize = 9;

/// The weight types of `rows`: Q8_0 (codes -127..=127, taken as x + 128) and Q5_0 (codes
/// 0..32 for the values x - 16).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Weights {
    Q8_0,
    Q5_0,
}

impl Weights {
    /// The offset of vpdpbusd's unsigned codes from the values.
    fn offset(self) -> i8 {
        match self {
            Weights::Q8_0 => 0x80u8 as i8,
            Weights::Q5_0 => 16,
        }
    }
}

/// Fills `prep` (PREP_SLOTS * nb slots) for column `y` and weights `w`: nb scales as f32, then
/// per block the eight i32 lanes -offset x (sum of codes 4l..4l + 4).
///
/// # Safety
/// `super::x86::has_avx512()`; `y` points at nb Q8_0 blocks.
#[target_feature(enable = "avx2,f16c,avx512vnni,avx512vl")]
pub(crate) unsafe fn prep(w: Weights, nb: usize, y: *const u8, prep: &mut [f32]) {
    assert!(prep.len() >= PREP_SLOTS * nb);
    let (scales, starts) = prep.split_at_mut(nb);
    let c80 = _mm256_set1_epi8(w.offset());
    for (b, scale) in scales.iter_mut().enumerate() {
        // SAFETY: block b of y is readable (the caller's promise); starts holds 8 * nb slots.
        unsafe {
            let by = y.add(34 * b);
            *scale = super::x86::h2f_f16c(by);
            let q = _mm256_loadu_si256(by.add(2) as *const __m256i);
            // offset x (sum of 4 codes), negated
            let s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), c80, q);
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
    // SAFETY: the caller's promise: a Q8_0 block holds 32 codes at 2, a Q5_0 block its 4 qh
    // bytes at 2 and 16 nibble bytes at 6.
    unsafe {
        if W == Q8 {
            let q = _mm256_loadu_si256(bx.add(2) as *const __m256i);
            return _mm256_xor_si256(q, _mm256_set1_epi8(0x80u8 as i8));
        }
        let qs = _mm_loadu_si128(bx.add(6) as *const __m128i);
        // low nibbles are values 0..16, high nibbles 16..32; bit i of qh adds 16 to value i
        let v = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(qs), _mm_srli_epi16::<4>(qs));
        let v = _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
        let qh = (bx.add(2) as *const u32).read_unaligned();
        _mm256_mask_add_epi8(v, qh, v, _mm256_set1_epi8(0x10))
    }
}

/// `codes`' const argument for each weight type.
const Q8: u8 = 0;
const Q5: u8 = 1;

/// One row's 8 lanes: per block fma(dx * dy, f32(integer sums), acc), as ggml's kernel.
///
/// # Safety
/// `x` points at nb blocks of `W`, `y` at the column's, `prep` is `prep`'s for that column.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512bw,avx512vnni,avx512vl")]
unsafe fn row<const W: u8>(nb: usize, x: *const u8, y: *const u8, prep: &[f32]) -> __m256 {
    let xs = if W == Q8 { 34 } else { 22 };
    let (scales, starts) = prep.split_at(nb);
    let mut acc = _mm256_setzero_ps();
    for (b, &dy) in scales.iter().enumerate() {
        // SAFETY: block b of x and y is readable; starts holds 8 i32 per block.
        unsafe {
            let bx = x.add(xs * b);
            let d = _mm256_set1_ps(super::x86::h2f_f16c(bx) * dy);
            let qx = codes::<W>(bx);
            let qy = _mm256_loadu_si256(y.add(34 * b + 2) as *const __m256i);
            let st = _mm256_loadu_si256(starts.as_ptr().add(8 * b) as *const __m256i);
            let s = _mm256_dpbusd_epi32(st, qx, qy);
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
        }
    }
    acc
}

/// out[i] = the dot product (ggml's AVX2 one for `w`) of the row of `w` blocks at
/// `x + i * stride` and the Q8_0 column `y` (`prep`'s).
///
/// # Safety
/// `super::x86::has_avx512()`; `y` holds nb blocks, `prep` is `prep(w, nb, y, ..)`'s, and each
/// of the out.len() rows holds nb blocks.
pub(crate) unsafe fn rows(
    w: Weights,
    nb: usize,
    x: *const u8,
    stride: usize,
    y: *const u8,
    prep: &[f32],
    out: &mut [f32],
) {
    let halves =
        w == Weights::Q8_0 && crate::simd::features::cpu().rows_in_halves(ggml::Type::Q8_0);
    // SAFETY: the caller's promise.
    unsafe {
        match w {
            Weights::Q8_0 => rows_of::<Q8>(nb, x, stride, y, prep, out, halves),
            Weights::Q5_0 => rows_of::<Q5>(nb, x, stride, y, prep, out, halves),
        }
    }
}

/// `rows` for weights `W`: the rows one after another, or (`halves`) row r of the first half
/// beside row r of the second.
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
    let ty = if W == Q8 {
        ggml::Type::Q8_0
    } else {
        ggml::Type::Q5_0
    };
    let ahead = crate::simd::features::cpu().rows_page_ahead(ty);
    let xs = if W == Q8 { 34 } else { 22 };
    let one = |r: usize| {
        let at = x.wrapping_add(r * stride);
        if ahead > 0 {
            crate::simd::prefetch_page_ahead(at, xs * nb, ahead);
        }
        // SAFETY: AVX2 is enabled here; every row r the loop asks for exists (the caller's
        // promise).
        unsafe { row::<W>(nb, at, y, prep) }
    };
    if !halves {
        // SAFETY: AVX2 is enabled here.
        unsafe { by_eight(out, |r| std::array::from_fn(|i| one(r + i)), one) };
        return;
    }
    // rows r and r + h side by side: two chains in flight, from two streams far apart (two
    // adjacent rows side by side measured half as fast: the prefetcher sees no stream)
    let h = out.len() / 2;
    let two = |r: usize| {
        let (a0, a1) = (x.wrapping_add(r * stride), x.wrapping_add((r + h) * stride));
        if ahead > 0 {
            crate::simd::prefetch_page_ahead(a0, xs * nb, ahead);
            crate::simd::prefetch_page_ahead(a1, xs * nb, ahead);
        }
        // SAFETY: as above, for rows r and r + h.
        unsafe { row2::<W>(nb, a0, a1, y, prep) }
    };
    let (lo, hi) = out.split_at_mut(h);
    let mut r = 0;
    while r + 4 <= h {
        let p: [[__m256; 2]; 4] = std::array::from_fn(|i| two(r + i));
        let v = std::array::from_fn(|i| p[i % 4][i / 4]);
        let mut s = [0.0f32; 8];
        // SAFETY: AVX2 is enabled here.
        unsafe { _mm256_storeu_ps(s.as_mut_ptr(), super::x86::hsum8(&v)) };
        lo[r..r + 4].copy_from_slice(&s[..4]);
        hi[r..r + 4].copy_from_slice(&s[4..]);
        r += 4;
    }
    while r < h {
        let [a, b] = two(r);
        lo[r] = super::x86::hsum_ps(a);
        hi[r] = super::x86::hsum_ps(b);
        r += 1;
    }
    if hi.len() > h {
        hi[h] = super::x86::hsum_ps(one(2 * h));
    }
}

/// Two rows' 8 lanes each, their chains interleaved.
///
/// # Safety
/// As for `row`, for x0 and x1.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512bw,avx512vnni,avx512vl")]
unsafe fn row2<const W: u8>(
    nb: usize,
    x0: *const u8,
    x1: *const u8,
    y: *const u8,
    prep: &[f32],
) -> [__m256; 2] {
    let xs = if W == Q8 { 34 } else { 22 };
    let (scales, starts) = prep.split_at(nb);
    let mut acc = [_mm256_setzero_ps(); 2];
    for (b, &dy) in scales.iter().enumerate() {
        // SAFETY: block b of x0, x1 and y is readable; starts holds 8 i32 per block.
        unsafe {
            let qy = _mm256_loadu_si256(y.add(34 * b + 2) as *const __m256i);
            let st = _mm256_loadu_si256(starts.as_ptr().add(8 * b) as *const __m256i);
            for (a, x) in acc.iter_mut().zip([x0, x1]) {
                let bx = x.add(xs * b);
                let d = _mm256_set1_ps(super::x86::h2f_f16c(bx) * dy);
                let s = _mm256_dpbusd_epi32(st, codes::<W>(bx), qy);
                *a = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), *a);
            }
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Q8_0 blocks with codes in -127..=127 (as quantize_row_q8_0 makes them) and scales
    /// from 1e-4 to 1e2.
    fn blocks(n: usize, seed: u64) -> Vec<u8> {
        let mut s = seed;
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) as u32
        };
        let mut v = vec![0u8; 34 * n];
        for b in v.chunks_exact_mut(34) {
            let d = 10f32.powf((next() % 600) as f32 / 100.0 - 4.0);
            b[..2].copy_from_slice(&ggml::quants::fp32_to_fp16(d).to_le_bytes());
            for q in &mut b[2..] {
                *q = ((next() % 255) as i32 - 127) as i8 as u8;
            }
        }
        v
    }

    /// Q5_0 blocks: scales from 1e-4 to 1e2, any fifth bits and nibbles.
    fn q5_0_blocks(n: usize, seed: u64) -> Vec<u8> {
        let mut v = blocks(n, seed);
        let mut q5 = Vec::with_capacity(22 * n);
        for b in v.chunks_exact_mut(34) {
            q5.extend_from_slice(&b[..22]);
        }
        q5
    }

    #[test]
    fn rows_equal_the_one_row_kernel_bit_for_bit() {
        if !crate::dot::x86::has_avx512() {
            eprintln!("skipped: no AVX-512 VNNI on this CPU");
            return;
        }
        for (w, ty, xs) in [
            (Weights::Q8_0, ggml::Type::Q8_0, 34),
            (Weights::Q5_0, ggml::Type::Q5_0, 22),
        ] {
            let kernel = crate::dot::cpu_traits(ty).vec_dot;
            for (nb, nrows) in [(1, 1), (1, 3), (8, 8), (8, 21), (7, 16), (20, 29), (64, 13)] {
                let x = match w {
                    Weights::Q8_0 => blocks(nb * nrows, 1 + nb as u64),
                    Weights::Q5_0 => q5_0_blocks(nb * nrows, 1 + nb as u64),
                };
                let y = blocks(nb, 99);
                let mut pre = vec![0.0f32; PREP_SLOTS * nb];
                // SAFETY: AVX-512 VNNI checked; y holds nb blocks.
                unsafe { prep(w, nb, y.as_ptr(), &mut pre) };
                for halves in [false, true] {
                    let mut out = vec![0.0f32; nrows];
                    let (px, py) = (x.as_ptr(), y.as_ptr());
                    // SAFETY: AVX-512 VNNI checked; x holds nrows rows of nb blocks.
                    unsafe {
                        match w {
                            Weights::Q8_0 => {
                                rows_of::<Q8>(nb, px, xs * nb, py, &pre, &mut out, halves)
                            }
                            Weights::Q5_0 => {
                                rows_of::<Q5>(nb, px, xs * nb, py, &pre, &mut out, halves)
                            }
                        }
                    }
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
