//! AVX-512 VNNI kernels for the one-column K-quant products (token generation): several
//! weight rows per pass share the activation loads, and 64-byte registers with integer sums
//! times subblock scales in vpmaddwd / vpdpwssd (codes x activations first, by vpdpbusd or
//! maddubs) replace the 32-byte dpbusd + mullo sequence. Only the exact integer parts are
//! computed differently; every float step is the one of the kernel the results must match:
//!
//! - `q4_k_gemv8`: llama.cpp's repacked q4_K_8x8 gemv (`ktile::Order::RepackGemv`), per row
//!   acc = fma(f32(S), dx * dy, acc) and acc_min = fma(f32(M), dmin * dy, acc_min) per block.
//! - `q6_k_rows4`: ggml's AVX2 q6_K dot product (what `x86::q6_k_k512` computes): 8 lanes of
//!   integer sums per block, each lane fused times d into a float lane, lanes summed last.

use super::x86::hsum_ps;
use super::x86_rows8 as rows8;
use std::arch::x86_64::*;

/// Whether this CPU runs the kernels below (the AVX-512 dot-product set).
pub(crate) fn available() -> bool {
    crate::simd::features::cpu().avx512_dot()
}

/// A Q8_K block's i8 values `o..o + 32` and `o2..o2 + 32` as one register.
///
/// # Safety
/// AVX-512F; both ranges readable.
#[inline]
#[target_feature(enable = "avx512f,avx2")]
unsafe fn load2x32(p: *const u8, o: usize, o2: usize) -> __m512i {
    // SAFETY: guaranteed by the caller.
    unsafe {
        let a = _mm256_loadu_si256(p.add(o) as *const __m256i);
        let b = _mm256_loadu_si256(p.add(o2) as *const __m256i);
        _mm512_inserti64x4::<1>(_mm512_castsi256_si512(a), b)
    }
}

/// Q4_K's 8 scales and 8 mins from its 12 packed bytes (ggml's utmp unpacking).
#[inline(always)]
pub(crate) fn k4_unpack(sc: &[u8; 12]) -> (u64, u64) {
    let u = |i: usize| u32::from_le_bytes([sc[4 * i], sc[4 * i + 1], sc[4 * i + 2], sc[4 * i + 3]]);
    let (u0, u1, u2) = (u(0), u(1), u(2));
    const M1: u32 = 0x3f3f_3f3f;
    const M2: u32 = 0x0f0f_0f0f;
    const M3: u32 = 0x0303_0303;
    let s0 = u0 & M1;
    let s1 = (u2 & M2) | (((u0 >> 6) & M3) << 4);
    let m0 = u1 & M1;
    let m1 = ((u2 >> 4) & M2) | (((u1 >> 6) & M3) << 4);
    (s0 as u64 | (s1 as u64) << 32, m0 as u64 | (m1 as u64) << 32)
}

/// `k4_unpack` of eight rows' 12 scale / min bytes (at x[r] + at + 4) at once: each row's 8
/// scale bytes as one qword, rows (0, 1 | 4, 5) in the first register and (2, 3 | 6, 7) in the
/// second; and lane r of the third row r's mins times `bs32` (a Q8_K block's activation sums
/// per 32 values, as words), summed (exact integers, so in any order).
///
/// # Safety
/// AVX2; 16 bytes readable at x[r] + at + 4 for every r (inside a Q4_K / Q5_K block).
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn k4_unpack8(
    x: &[*const u8; 8],
    at: usize,
    bs32: __m128i,
) -> (__m256i, __m256i, __m256i) {
    let m1 = _mm256_set1_epi32(0x3f3f_3f3f);
    let m2 = _mm256_set1_epi32(0x0f0f_0f0f);
    let m3 = _mm256_set1_epi32(0x3030_3030);
    // the rows' bytes as dwords u0, u1, u2: lane q of a[q] holds row q, its high lane row q + 4
    let a: [__m256i; 4] = std::array::from_fn(|q| {
        // SAFETY: the caller's promise.
        let (lo, hi) = unsafe {
            (
                _mm_loadu_si128(x[q].add(at + 4) as *const __m128i),
                _mm_loadu_si128(x[q + 4].add(at + 4) as *const __m128i),
            )
        };
        _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(lo), hi)
    });
    let t0 = _mm256_unpacklo_epi32(a[0], a[1]);
    let t1 = _mm256_unpackhi_epi32(a[0], a[1]);
    let t2 = _mm256_unpacklo_epi32(a[2], a[3]);
    let t3 = _mm256_unpackhi_epi32(a[2], a[3]);
    // dword i of the low half: row i, of the high half: row i + 4
    let u0 = _mm256_unpacklo_epi64(t0, t2);
    let u1 = _mm256_unpackhi_epi64(t0, t2);
    let u2 = _mm256_unpacklo_epi64(t1, t3);
    // ggml's utmp steps on every row at once ((u >> 6 & 3) << 4 as u >> 2 & 0x30)
    let s0 = _mm256_and_si256(u0, m1);
    let s1 = _mm256_or_si256(
        _mm256_and_si256(u2, m2),
        _mm256_and_si256(_mm256_srli_epi32::<2>(u0), m3),
    );
    let n0 = _mm256_and_si256(u1, m1);
    let n1 = _mm256_or_si256(
        _mm256_and_si256(_mm256_srli_epi32::<4>(u2), m2),
        _mm256_and_si256(_mm256_srli_epi32::<2>(u1), m3),
    );
    // the mins the same way: rows (0, 1 | 4, 5) and (2, 3 | 6, 7), a row's 8 bytes a qword
    let (mn01, mn23) = (_mm256_unpacklo_epi32(n0, n1), _mm256_unpackhi_epi32(n0, n1));
    let bsb = _mm256_broadcastsi128_si256(bs32);
    // a row's 8 products as 4 pair sums in one 128-bit lane
    let prod = |v: __m128i| _mm256_madd_epi16(_mm256_cvtepu8_epi16(v), bsb);
    let p01 = prod(_mm256_castsi256_si128(mn01));
    let p45 = prod(_mm256_extracti128_si256::<1>(mn01));
    let p23 = prod(_mm256_castsi256_si128(mn23));
    let p67 = prod(_mm256_extracti128_si256::<1>(mn23));
    // lanes [r0 r2 r4 r6 | r1 r3 r5 r7], then in row order
    let h = _mm256_hadd_epi32(_mm256_hadd_epi32(p01, p23), _mm256_hadd_epi32(p45, p67));
    let mins = _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    (
        _mm256_unpacklo_epi32(s0, s1),
        _mm256_unpackhi_epi32(s0, s1),
        mins,
    )
}

/// Eight rows' 8-lane integer vectors reduced to one vector of their totals (lane r: row r).
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn totals8(t: &[__m256i; 8]) -> __m256i {
    let a = _mm256_hadd_epi32(_mm256_hadd_epi32(t[0], t[1]), _mm256_hadd_epi32(t[2], t[3]));
    let b = _mm256_hadd_epi32(_mm256_hadd_epi32(t[4], t[5]), _mm256_hadd_epi32(t[6], t[7]));
    // a holds rows 0-3 in each 128-bit half, b rows 4-7: add the halves
    _mm256_add_epi32(
        _mm256_permute2x128_si256::<0x20>(a, b),
        _mm256_permute2x128_si256::<0x31>(a, b),
    )
}

/// Eight Q4_K rows times one Q8_K column in the order of llama.cpp's q4_K_8x8 gemv: out[r]
/// is bit for bit `ktile::dot(.., Order::RepackGemv, ..)` of row x[r].
///
/// # Safety
/// `available()`; each x[r] points at `nb` Q4_K blocks (144 bytes), `y` at nb Q8_K blocks.
#[cfg(test)]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn q4_k_gemv8(nb: usize, x: &[*const u8; 8], y: *const u8, out: &mut [f32; 8]) {
    // SAFETY: the caller's promise; GGUF rows hold their blocks 144 bytes apart.
    unsafe { q4_k_gemv8_strided(nb, 144, x, y, out) }
}

/// vpshufb as written: LLVM turns a vpshufb of a 128-bit broadcast into vpermw of the
/// unbroadcast value, a slower cross-lane permute on AMD's Zen 4.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn pshufb(a: __m512i, b: __m512i) -> __m512i {
    let r: __m512i;
    // SAFETY: register-only AVX-512BW instruction; callers run with AVX-512BW enabled.
    unsafe {
        std::arch::asm!("vpshufb {r}, {a}, {b}", r = lateout(zmm_reg) r, a = in(zmm_reg) a,
            b = in(zmm_reg) b, options(pure, nomem, nostack));
    }
    r
}

/// vpdpwssd as written: LLVM splits it into vpmaddwd and vpaddd.
#[inline]
#[target_feature(enable = "avx512f,avx512vnni")]
pub(super) fn dpwssd(acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
    let mut r = acc;
    // SAFETY: register-only AVX-512 VNNI instruction; callers run with it enabled.
    unsafe {
        std::arch::asm!("vpdpwssd {r}, {a}, {b}", r = inout(zmm_reg) r, a = in(zmm_reg) a,
            b = in(zmm_reg) b, options(pure, nomem, nostack));
    }
    r
}

/// Broadcast 128-bit lane L of `w` (imm = L * 0x55) to all four.
#[inline]
#[target_feature(enable = "avx512f")]
fn lane<const IMM: i32>(w: __m512i) -> __m512i {
    _mm512_shuffle_i32x4::<IMM>(w, w)
}

/// `q4_k_gemv8` with row r's block ib at x[r] + stride * ib (CPU_REPACK's interleaved rows:
/// stride = 8 * 144).
///
/// # Safety
/// As for `q4_k_gemv8`, each row's nb blocks `stride` bytes apart.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn q4_k_gemv8_strided(
    nb: usize,
    stride: usize,
    x: &[*const u8; 8],
    y: *const u8,
    out: &mut [f32; 8],
) {
    let m4 = _mm512_set1_epi8(0x0F);
    // A 64-byte load of codes holds two 32-byte groups; its low nibbles are subblocks
    // (4h, 4h + 2), its high nibbles (4h + 1, 4h + 3). vpackssdw of the two vpdpbusd sums of
    // one load holds, per 128-bit lane, four words of one subblock then four of the next:
    // lanes 0-1 subblocks (4h, 4h + 1), lanes 2-3 (4h + 2, 4h + 3). vpshufb picks each word's
    // scale from every 128-bit lane of the broadcast scale words.
    let pick = |h: i8| {
        let w = |j: i8| {
            [
                2 * j,
                2 * j + 1,
                2 * j,
                2 * j + 1,
                2 * j,
                2 * j + 1,
                2 * j,
                2 * j + 1,
            ]
        };
        let mut b = [0i8; 64];
        for l in 0..4 {
            let j = 4 * h + 2 * (l as i8 / 2);
            b[16 * l..16 * l + 8].copy_from_slice(&w(j));
            b[16 * l + 8..16 * l + 16].copy_from_slice(&w(j + 1));
        }
        // SAFETY: 64 bytes read as one 512-bit value.
        unsafe { _mm512_loadu_si512(b.as_ptr() as *const __m512i) }
    };
    let sel = [pick(0), pick(1)];
    let offs = rows8::row_offsets(x);
    let mut acc = _mm256_setzero_ps();
    let mut acc_min = _mm256_setzero_ps();
    let ahead = crate::simd::features::cpu().q4_k_gemv_prefetch();
    for ib in 0..nb {
        // the blocks `ahead.blocks` on, as the one 8 * 144-byte stretch of a CPU_REPACK group
        // from row 0's (running on into the next group's, which the next call reads): the
        // hardware prefetcher alone left these loads stalling
        let at = x[0].wrapping_add(stride * (ib + ahead.blocks));
        crate::simd::prefetch_lines(at, 8 * 144, ahead.to_l2);
        // SAFETY: block ib of every operand lies within the nb blocks the caller vouches for;
        // every offset below stays inside its 144- or 292-byte block (the scale loads read
        // bytes 4..20 of a row's block).
        unsafe {
            let off = stride * ib;
            let by = y.add(292 * ib);
            let dy = _mm256_set1_ps((by as *const f32).read_unaligned());
            // the activations of register v: subblocks 4h + n and 4h + n + 2
            let yv: [__m512i; 4] = std::array::from_fn(|v| {
                let j = 4 * (v / 2) + v % 2;
                load2x32(by, 4 + 32 * j, 4 + 32 * (j + 2))
            });
            let bs = _mm256_loadu_si256(by.add(260) as *const __m256i);
            // activation sums per 32 values (subblock order)
            let bs32 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
            // The eight rows' scales and mins unpacked side by side (one row's, unpacked on its
            // own in scalar registers, took a third of the kernel's instructions: 1.1B q4_k_m
            // Q4_K nodes 22-23 -> 24-26 GB/s at -t 1); each row's 8 bytes then as words, one
            // row a 128-bit lane: rows (0, 1, 4, 5), (2, 3, 6, 7)
            let (sc01, sc23, mt) = k4_unpack8(x, off, bs32);
            let w01 = _mm512_cvtepu8_epi16(sc01);
            let w23 = _mm512_cvtepu8_epi16(sc23);
            let scs: [__m512i; 8] = [
                lane::<0x00>(w01),
                lane::<0x55>(w01),
                lane::<0x00>(w23),
                lane::<0x55>(w23),
                lane::<0xAA>(w01),
                lane::<0xFF>(w01),
                lane::<0xAA>(w23),
                lane::<0xFF>(w23),
            ];
            // per row: its 8 lanes of scaled sums
            let row = |r: usize| {
                let bx = x[r].add(off);
                let sc = scs[r];
                // vpdpbusd sums four codes x activations per dword (|sum| <= 4 * 15 * 128 fits
                // an i16); two such vectors packed to words take their scales in one vpmaddwd:
                // six multiplies a row where maddubs + dpwssd took eight (+10% from L1; the
                // integer sums are exact in any order)
                let q0 = _mm512_loadu_si512(bx.add(16) as *const __m512i);
                let q1 = _mm512_loadu_si512(bx.add(80) as *const __m512i);
                let z = _mm512_setzero_si512();
                let d0 = _mm512_dpbusd_epi32(z, _mm512_and_si512(q0, m4), yv[0]);
                let d1 =
                    _mm512_dpbusd_epi32(z, _mm512_and_si512(_mm512_srli_epi16::<4>(q0), m4), yv[1]);
                let d2 = _mm512_dpbusd_epi32(z, _mm512_and_si512(q1, m4), yv[2]);
                let d3 =
                    _mm512_dpbusd_epi32(z, _mm512_and_si512(_mm512_srli_epi16::<4>(q1), m4), yv[3]);
                let p01 = _mm512_packs_epi32(d0, d1);
                let p23 = _mm512_packs_epi32(d2, d3);
                let a = dpwssd(
                    _mm512_madd_epi16(p01, pshufb(sc, sel[0])),
                    p23,
                    pshufb(sc, sel[1]),
                );
                _mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64::<1>(a))
            };
            let s: [__m256i; 8] = std::array::from_fn(row);
            let st = totals8(&s);
            // d and dmin of each row: one dword (gathered, not stored and reloaded)
            let hd = rows8::heads(x, offs, off);
            let dxv = rows8::halves(hd);
            let dmv = rows8::halves(_mm256_srli_epi32::<16>(hd));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(st), _mm256_mul_ps(dxv, dy), acc);
            acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mt), _mm256_mul_ps(dmv, dy), acc_min);
        }
    }
    // SAFETY: out holds 8 floats.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), _mm256_sub_ps(acc, acc_min)) };
}

/// Four Q6_K rows times one Q8_K column: out[r] is bit for bit ggml's AVX2 q6_K dot product
/// of row x[r] (`x86::q6_k_k512`).
///
/// # Safety
/// `available()`; each x[r] points at `nb` Q6_K blocks (210 bytes), `y` at nb Q8_K blocks.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn q6_k_rows4(nb: usize, x: &[*const u8; 4], y: *const u8, out: &mut [f32; 4]) {
    // SAFETY: the caller's promise.
    let acc = unsafe { q6_k_rows_n::<4>(nb, x, y) };
    for r in 0..4 {
        out[r] = hsum_ps(acc[r]);
    }
}

/// out[i] = ggml's AVX2 q6_K dot product (bit for bit) of the row at `x + i * stride` and
/// column `y`: all the rows in one call, eight a pass (each block's activations loaded once
/// for the eight, their horizontal sums together), without a call and a store through the
/// caller's loop per pass.
///
/// # Safety
/// `available()`; each of the out.len() rows holds `nb` Q6_K blocks, `y` nb Q8_K blocks.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn q6_k_rows(
    nb: usize,
    x: *const u8,
    stride: usize,
    y: *const u8,
    out: &mut [f32],
) {
    // SAFETY: AVX2 is enabled here; every row r the loop asks for exists (the caller's promise).
    unsafe {
        super::x86::by_eight(
            out,
            |r| {
                let rows: [*const u8; 8] =
                    std::array::from_fn(|i| x.wrapping_add((r + i) * stride));
                q6_k_rows_n::<8>(nb, &rows, y)
            },
            |r| q6_k_rows_n::<1>(nb, &[x.wrapping_add(r * stride)], y)[0],
        )
    }
}

/// `q6_k_rows` with row r of the first half of out's rows beside row r of the second (two
/// streams far apart), rows one after another otherwise.
///
/// # Safety
/// As for `q6_k_rows`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn q6_k_rows_halves(
    nb: usize,
    x: *const u8,
    stride: usize,
    y: *const u8,
    out: &mut [f32],
) {
    let h = out.len() / 2;
    let (lo, hi) = out.split_at_mut(h);
    for r in 0..h {
        let rows = [x.wrapping_add(r * stride), x.wrapping_add((r + h) * stride)];
        // SAFETY: rows r and r + h exist (the caller's promise).
        let [a, b] = unsafe { q6_k_rows_n::<2>(nb, &rows, y) };
        lo[r] = hsum_ps(a);
        hi[r] = hsum_ps(b);
    }
    if hi.len() > h {
        // SAFETY: as above, for the last row.
        hi[h] = hsum_ps(unsafe { q6_k_rows_n::<1>(nb, &[x.wrapping_add(2 * h * stride)], y) }[0]);
    }
}

/// The 8-lane float sums of R Q6_K rows (before `hsum_ps`), in ggml's AVX2 order.
///
/// # Safety
/// As for `q6_k_rows4`, with R rows.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn q6_k_rows_n<const R: usize>(nb: usize, x: &[*const u8; R], y: *const u8) -> [__m256; R] {
    let m4 = _mm512_set1_epi8(0x0F);
    let m3 = _mm512_set1_epi8(0x03);
    // ggml's 32-byte vector k of half g takes scale 8g + 2k in its low 16 bytes and 8g + 2k + 1
    // in its high 16; two such vectors per 64-byte register, so 128-bit lane i of register p
    // (of half g) takes scale 8g + 4p + i: vpermw indices
    let idx: [__m512i; 4] = std::array::from_fn(|v| {
        let w: [i16; 32] = std::array::from_fn(|e| (4 * v + e / 8) as i16);
        // SAFETY: w holds 32 i16.
        unsafe { _mm512_loadu_si512(w.as_ptr() as *const __m512i) }
    });
    let mut accf = [_mm256_setzero_ps(); R];
    for ib in 0..nb {
        // SAFETY: block ib of every operand lies within the nb blocks the caller vouches for;
        // every offset below stays inside its 210- or 292-byte block.
        unsafe {
            let by = y.add(292 * ib);
            let yd = (by as *const f32).read_unaligned();
            // ggml's 32-byte vectors k = 0, 1 (and 2, 3) of half g are adjacent activations
            let yv: [__m512i; 4] =
                std::array::from_fn(|v| _mm512_loadu_si512(by.add(4 + 64 * v) as *const __m512i));
            let bsums = _mm256_loadu_si256(by.add(260) as *const __m256i);
            for r in 0..R {
                let bx = x[r].add(210 * ib);
                let sc8 = _mm_loadu_si128(bx.add(192) as *const __m128i);
                let sc16 = _mm256_cvtepi8_epi16(sc8);
                let scz = _mm512_castsi256_si512(sc16);
                // The quants are stored +32: lane l loses 32 * (scale x activation sum) of
                // subblocks 2l and 2l + 1 (ggml's q8sclsub)
                let bias = _mm256_slli_epi32::<5>(_mm256_madd_epi16(bsums, sc16));
                let mut a = _mm512_setzero_si512();
                for g in 0..2 {
                    let ql = _mm512_loadu_si512(bx.add(64 * g) as *const __m512i);
                    let qh = _mm256_loadu_si256(bx.add(128 + 32 * g) as *const __m256i);
                    // high bits of vectors 0, 1: qh bits 0-1, 2-3; of vectors 2, 3: bits 4-5, 6-7
                    let qh01 = _mm512_inserti64x4::<1>(
                        _mm512_castsi256_si512(qh),
                        _mm256_srli_epi16::<2>(qh),
                    );
                    let qh23 = _mm512_srli_epi16::<4>(qh01);
                    let c01 = _mm512_or_si512(
                        _mm512_and_si512(ql, m4),
                        _mm512_slli_epi16::<4>(_mm512_and_si512(qh01, m3)),
                    );
                    let c23 = _mm512_or_si512(
                        _mm512_and_si512(_mm512_srli_epi16::<4>(ql), m4),
                        _mm512_slli_epi16::<4>(_mm512_and_si512(qh23, m3)),
                    );
                    // (u6 x i8 pair sums fit i16: 2 * 63 * 127)
                    let p01 = _mm512_maddubs_epi16(c01, yv[2 * g]);
                    let p23 = _mm512_maddubs_epi16(c23, yv[2 * g + 1]);
                    let s01 = _mm512_permutexvar_epi16(idx[2 * g], scz);
                    let s23 = _mm512_permutexvar_epi16(idx[2 * g + 1], scz);
                    a = _mm512_dpwssd_epi32(a, p01, s01);
                    a = _mm512_dpwssd_epi32(a, p23, s23);
                }
                // lane l of ggml's 8-lane sum: lane l of both 256-bit halves
                let sum =
                    _mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64::<1>(a));
                let sum = _mm256_sub_epi32(sum, bias);
                let d = yd * super::x86::h2f_f16c(bx.add(208));
                accf[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum), accf[r]);
            }
        }
    }
    accf
}

/// The headers of four Q5_K blocks (one per row r; the type begins with d, dmin and the 12
/// packed scale / min bytes, as Q4_K does), as `q5_k_gemm4` uses them: `sce` / `sco` the scales of
/// the even and odd 32-value halves of 64-value group p at lane 4r + p, `mns` the eight mins
/// at 16-bit lane 8r + j, `dx` / `dmin` the rows' d and dmin.
struct K4Heads {
    sce: __m512i,
    sco: __m512i,
    mns: __m512i,
    dx: __m128,
    dmin: __m128,
}

/// # Safety
/// `available()`; each bx[r] points at a block of at least 16 bytes.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
#[inline]
unsafe fn k4_heads(bx: &[*const u8; 4]) -> K4Heads {
    let mut sc_e = [0i32; 16];
    let mut sc_o = [0i32; 16];
    let mut mins = [0i16; 32];
    let mut dx = [0.0f32; 4];
    let mut dmin = [0.0f32; 4];
    for (r, &b) in bx.iter().enumerate() {
        // SAFETY: the caller's promise: 16 header bytes at b.
        unsafe {
            dx[r] = super::x86::h2f_f16c(b);
            dmin[r] = super::x86::h2f_f16c(b.add(2));
            let (sc, mn) = k4_unpack(&*(b.add(4) as *const [u8; 12]));
            for p in 0..4 {
                sc_e[4 * r + p] = ((sc >> (16 * p)) & 0xFF) as i32;
                sc_o[4 * r + p] = ((sc >> (16 * p + 8)) & 0xFF) as i32;
            }
            for j in 0..8 {
                mins[8 * r + j] = ((mn >> (8 * j)) & 0xFF) as i16;
            }
        }
    }
    // SAFETY: each array holds the 64 or 16 bytes loaded.
    unsafe {
        K4Heads {
            sce: _mm512_loadu_si512(sc_e.as_ptr() as *const __m512i),
            sco: _mm512_loadu_si512(sc_o.as_ptr() as *const __m512i),
            mns: _mm512_loadu_si512(mins.as_ptr() as *const __m512i),
            dx: _mm_loadu_ps(dx.as_ptr()),
            dmin: _mm_loadu_ps(dmin.as_ptr()),
        }
    }
}

/// Four registers of 16 dwords: o[j] 128-bit lane L = dword 4L + j of v[0], v[1], v[2], v[3].
#[inline]
#[target_feature(enable = "avx512f")]
fn dword_transpose(v: &[__m512i; 4]) -> [__m512i; 4] {
    let a0 = _mm512_unpacklo_epi32(v[0], v[1]);
    let a1 = _mm512_unpackhi_epi32(v[0], v[1]);
    let a2 = _mm512_unpacklo_epi32(v[2], v[3]);
    let a3 = _mm512_unpackhi_epi32(v[2], v[3]);
    [
        _mm512_unpacklo_epi64(a0, a2),
        _mm512_unpackhi_epi64(a0, a2),
        _mm512_unpacklo_epi64(a1, a3),
        _mm512_unpackhi_epi64(a1, a3),
    ]
}

/// Four Q6_K rows times C Q8_K columns in the order of the tiled K-quant path: per block
/// r = f32(S) * dx, acc = fma(r, dy, acc); out[r * C + c] is bit for bit `ktile::tile` with
/// `Order::Tiled` in every column. The rows are interleaved once per block (lane 4r + p: row
/// r's values 64p.., register j: their dword j), so register
/// j's lanes all lie in subblock 4p + j / 4 and four vpdpbusd (j = 4q..4q + 4) sum each
/// 16-value subblock in its own lane; one vpmulld per q applies the scales.
///
/// The codes go in as signed (code - 32) and the activations as unsigned (y + 128): the sum
/// then carries 128 x (sum of the signed codes) too, a per-row constant of the block that
/// starts each accumulator negated, so the column's loop has no bias term. Each column's
/// activations are transposed once per block to a stack buffer, from which every register's
/// 16 bytes are broadcast by the load unit.
///
/// # Safety
/// `available()`; each a[r] points at `nb` Q6_K blocks, each b[c] at nb Q8_K blocks; out
/// holds 4 * C floats.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn q6_k_gemm4<const C: usize>(
    nb: usize,
    a: &[*const u8; 4],
    b: &[*const u8; C],
    out: &mut [f32],
) {
    // SAFETY: the caller's promise.
    unsafe { sb16_gemm4::<C, false>(nb, a, b, out) }
}

/// Four Q3_K rows times C Q8_K columns in the order of the tiled K-quant path (as
/// `q6_k_gemm4`: per block r = f32(S) * dx, acc = fma(r, dy, acc)); out[r * C + c] is bit for
/// bit `ktile::tile` with `Order::Tiled` in every column.
///
/// # Safety
/// `available()`; each a[r] points at `nb` Q3_K blocks (110 bytes), each b[c] at nb Q8_K
/// blocks; out holds 4 * C floats.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn q3_k_gemm4<const C: usize>(
    nb: usize,
    a: &[*const u8; 4],
    b: &[*const u8; C],
    out: &mut [f32],
) {
    // SAFETY: the caller's promise.
    unsafe { sb16_gemm4::<C, true>(nb, a, b, out) }
}

/// Q3_K's 16 scales (6 bits, minus 32) from its 12 packed bytes (ggml's aux decode).
#[inline(always)]
fn k3_scales(s: &[u8; 12]) -> [i8; 16] {
    std::array::from_fn(|j| {
        let lo = if j < 8 { s[j] & 0x0F } else { s[j - 8] >> 4 };
        let hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        (lo | (hi << 4)) as i8 - 32
    })
}

/// One Q3_K block's 256 codes (0..8, stored +4) as four 64-value parts.
///
/// # Safety
/// AVX-512F/BW; `bx` points at a 110-byte Q3_K block.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx2")]
unsafe fn q3_k_parts(bx: *const u8) -> [__m512i; 4] {
    // SAFETY: the block's hmask (0..32) and qs (32..96) are readable.
    unsafe {
        let both = |p: *const u8| {
            let v = _mm256_loadu_si256(p as *const __m256i);
            _mm512_inserti64x4::<1>(_mm512_castsi256_si512(v), v)
        };
        let hm = both(bx);
        let m3 = _mm512_set1_epi8(0x03);
        let one = _mm512_set1_epi8(0x01);
        // per 16-bit word: shift count c in the lower 256 bits, c + d in the upper
        let counts = |c: i16, d: i16| {
            _mm512_inserti64x4::<1>(_mm512_set1_epi16(c), _mm256_set1_epi16(c + d))
        };
        std::array::from_fn(|p| {
            // part p: values 128h + 64 (p % 2).. with h = p / 2; its 32-value groups g, g + 1
            let (h, g) = (p / 2, 2 * (p % 2));
            let qs = both(bx.add(32 + 32 * h));
            let low2 = _mm512_and_si512(_mm512_srlv_epi16(qs, counts(2 * g as i16, 2)), m3);
            let high = _mm512_and_si512(_mm512_srlv_epi16(hm, counts((4 * h + g) as i16, 1)), one);
            _mm512_or_si512(low2, _mm512_slli_epi16::<2>(high))
        })
    }
}

/// One Q6_K block's 256 codes (0..64, stored +32) as four 64-value parts.
///
/// # Safety
/// AVX-512F/BW; `bx` points at a 210-byte Q6_K block.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx2")]
unsafe fn q6_k_parts(bx: *const u8) -> [__m512i; 4] {
    let m4 = _mm512_set1_epi8(0x0F);
    let m3 = _mm512_set1_epi8(0x03);
    let mut parts = [_mm512_setzero_si512(); 4];
    for g in 0..2 {
        // SAFETY: ql (0..128) and qh (128..192) are readable.
        let (ql, qh) = unsafe {
            (
                _mm512_loadu_si512(bx.add(64 * g) as *const __m512i),
                _mm256_loadu_si256(bx.add(128 + 32 * g) as *const __m256i),
            )
        };
        let qh01 = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(qh), _mm256_srli_epi16::<2>(qh));
        let qh23 = _mm512_srli_epi16::<4>(qh01);
        parts[2 * g] = _mm512_or_si512(
            _mm512_and_si512(ql, m4),
            _mm512_slli_epi16::<4>(_mm512_and_si512(qh01, m3)),
        );
        parts[2 * g + 1] = _mm512_or_si512(
            _mm512_and_si512(_mm512_srli_epi16::<4>(ql), m4),
            _mm512_slli_epi16::<4>(_mm512_and_si512(qh23, m3)),
        );
    }
    parts
}

/// Four rows of a type with 16 signed scales per block and biased codes (Q6_K; Q3_K when
/// `Q3`) times C Q8_K columns: see `q6_k_gemm4`.
///
/// # Safety
/// As for `q6_k_gemm4` / `q3_k_gemm4`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn sb16_gemm4<const C: usize, const Q3: bool>(
    nb: usize,
    a: &[*const u8; 4],
    b: &[*const u8; C],
    out: &mut [f32],
) {
    let (block, bias) = if Q3 { (110, 4) } else { (210, 32) };
    let cbias = _mm512_set1_epi8(bias);
    let c128 = _mm512_set1_epi8(-128);
    // lanes 0, 4, 8, 12 (one per row) to lanes 0-3
    let gather: [i32; 16] = std::array::from_fn(|l| (4 * (l % 4)) as i32);
    // SAFETY: gather holds 16 i32.
    let gather = unsafe { _mm512_loadu_si512(gather.as_ptr() as *const __m512i) };
    // lane 4p + r to lane 4r + p
    let tr: [i32; 16] = std::array::from_fn(|l| (4 * (l % 4) + l / 4) as i32);
    // SAFETY: tr holds 16 i32.
    let tr = unsafe { _mm512_loadu_si512(tr.as_ptr() as *const __m512i) };
    let mut acc = [_mm_setzero_ps(); C];
    // the transposed activations of one column (64-byte row jj, 128-bit
    // lane L holds dword 4L + jj of the four 64-value parts)
    #[repr(align(64))]
    struct Buf([u8; 256]);
    let mut yt = Buf([0; 256]);
    for ib in 0..nb {
        // SAFETY: block ib of every operand lies within the nb blocks the caller vouches for;
        // every offset below stays inside its 210- or 292-byte block; yt holds 256 bytes.
        unsafe {
            let mut t = [[_mm512_setzero_si512(); 4]; 4];
            let mut z = [_mm512_setzero_si512(); 4];
            let mut dx = [0.0f32; 4];
            for r in 0..4 {
                let bx = a[r].add(block * ib);
                let parts = if Q3 {
                    dx[r] = super::x86::h2f_f16c(bx.add(108));
                    let sc = k3_scales(&*(bx.add(96) as *const [u8; 12]));
                    z[r] = _mm512_cvtepi8_epi32(_mm_loadu_si128(sc.as_ptr() as *const __m128i));
                    q3_k_parts(bx)
                } else {
                    dx[r] = super::x86::h2f_f16c(bx.add(208));
                    z[r] = _mm512_cvtepi8_epi32(_mm_loadu_si128(bx.add(192) as *const __m128i));
                    q6_k_parts(bx)
                };
                // t[r][jj] lane L: dword 4L + jj of row r's four parts
                t[r] = dword_transpose(&parts);
            }
            // w[4L + jj] 128-bit lane r = t[r][jj] lane L, as signed codes (code - bias)
            let mut w = [_mm512_setzero_si512(); 16];
            for jj in 0..4 {
                let t0 = _mm512_shuffle_i64x2::<0x44>(t[0][jj], t[1][jj]);
                let t1 = _mm512_shuffle_i64x2::<0xEE>(t[0][jj], t[1][jj]);
                let t2 = _mm512_shuffle_i64x2::<0x44>(t[2][jj], t[3][jj]);
                let t3 = _mm512_shuffle_i64x2::<0xEE>(t[2][jj], t[3][jj]);
                w[jj] = _mm512_sub_epi8(_mm512_shuffle_i64x2::<0x88>(t0, t2), cbias);
                w[4 + jj] = _mm512_sub_epi8(_mm512_shuffle_i64x2::<0xDD>(t0, t2), cbias);
                w[8 + jj] = _mm512_sub_epi8(_mm512_shuffle_i64x2::<0x88>(t1, t3), cbias);
                w[12 + jj] = _mm512_sub_epi8(_mm512_shuffle_i64x2::<0xDD>(t1, t3), cbias);
            }
            // scale of subblock 4p + q of row r in lane 4r + p of scv[q]
            let zt = dword_transpose(&z);
            let scv: [__m512i; 4] = std::array::from_fn(|q| _mm512_permutexvar_epi32(tr, zt[q]));
            // -128 x (sum of the signed codes) of subblock 4p + q in lane 4r + p of k0[q]
            let k0: [__m512i; 4] = std::array::from_fn(|q| {
                let mut s = _mm512_setzero_si512();
                for wj in &w[4 * q..4 * q + 4] {
                    s = _mm512_dpbusd_epi32(s, c128, *wj);
                }
                _mm512_sub_epi32(_mm512_setzero_si512(), s)
            });
            let dxv = _mm_loadu_ps(dx.as_ptr());
            for c in 0..C {
                let by = b[c].add(292 * ib);
                let dy = _mm_set1_ps((by as *const f32).read_unaligned());
                let yv: [__m512i; 4] = std::array::from_fn(|p| {
                    _mm512_xor_si512(
                        _mm512_loadu_si512(by.add(4 + 64 * p) as *const __m512i),
                        c128,
                    )
                });
                let o = dword_transpose(&yv);
                for (jj, v) in o.iter().enumerate() {
                    _mm512_store_si512(yt.0.as_mut_ptr().add(64 * jj) as *mut __m512i, *v);
                }
                let mut s = _mm512_setzero_si512();
                for q in 0..4 {
                    let mut sq = k0[q];
                    // registers j = 4q + jj
                    for (jj, wj) in w[4 * q..4 * q + 4].iter().enumerate() {
                        // ((y + 128) x (code - bias), four per lane, in i32: exact)
                        let yb = _mm512_broadcast_i32x4(_mm_load_si128(
                            yt.0.as_ptr().add(64 * jj + 16 * q) as *const __m128i,
                        ));
                        sq = _mm512_dpbusd_epi32(sq, yb, *wj);
                    }
                    s = _mm512_add_epi32(s, _mm512_mullo_epi32(sq, scv[q]));
                }
                // each row's four parts summed
                let s = _mm512_add_epi32(s, _mm512_shuffle_epi32::<0x4E>(s));
                let s = _mm512_add_epi32(s, _mm512_shuffle_epi32::<0xB1>(s));
                let st =
                    _mm_cvtepi32_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi32(gather, s)));
                acc[c] = _mm_fmadd_ps(_mm_mul_ps(st, dxv), dy, acc[c]);
            }
        }
    }
    for c in 0..C {
        let mut v = [0.0f32; 4];
        // SAFETY: v holds 4 floats.
        unsafe { _mm_storeu_ps(v.as_mut_ptr(), _mm_sub_ps(acc[c], _mm_setzero_ps())) };
        for r in 0..4 {
            out[r * C + c] = v[r];
        }
    }
}

/// Four Q5_K rows times C Q8_K columns in the order of the tiled K-quant path: per block
/// r = f32(S) * dx, r = fma(-dmin, f32(M), r), acc = fma(r, dy, acc); out[r * C + c] is bit
/// for bit `ktile::tile` with `Order::Tiled` in every column. The rows are interleaved once
/// per block as in `q6_k_gemm4` (lane 4r + p: row r's values 64p.., register j: their dword
/// j), so registers 0-7 hold the first 32-value subblock of each part and 8-15 the second:
/// two vpdpbusd chains (unsigned 5-bit codes x signed activations) and one vpmulld each by
/// the subblock scales give S per lane; the mins times the activation sums give M.
///
/// # Safety
/// `available()`; each a[r] points at `nb` Q5_K blocks (176 bytes), each b[c] at nb Q8_K
/// blocks; out holds 4 * C floats.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn q5_k_gemm4<const C: usize>(
    nb: usize,
    a: &[*const u8; 4],
    b: &[*const u8; C],
    out: &mut [f32],
) {
    let m4 = _mm512_set1_epi8(0x0F);
    let one = _mm512_set1_epi8(0x01);
    // lanes 0, 4, 8, 12 (one per row) to lanes 0-3
    let gather: [i32; 16] = std::array::from_fn(|l| (4 * (l % 4)) as i32);
    // SAFETY: gather holds 16 i32.
    let gather = unsafe { _mm512_loadu_si512(gather.as_ptr() as *const __m512i) };
    // per 16-bit word: shift count c in the lower 256 bits, c + 1 in the upper
    let counts = |c: i16| _mm512_inserti64x4::<1>(_mm512_set1_epi16(c), _mm256_set1_epi16(c + 1));
    let nib = _mm512_inserti64x4::<1>(_mm512_setzero_si512(), _mm256_set1_epi16(4));
    let mut acc = [_mm_setzero_ps(); C];
    // the transposed activations of one column (as in q6_k_gemm4)
    #[repr(align(64))]
    struct Buf([u8; 256]);
    let mut yt = Buf([0; 256]);
    for ib in 0..nb {
        // SAFETY: block ib of every operand lies within the nb blocks the caller vouches for;
        // every offset below stays inside its 176- or 292-byte block; yt holds 256 bytes.
        unsafe {
            let mut t = [[_mm512_setzero_si512(); 4]; 4];
            let bxs: [*const u8; 4] = std::array::from_fn(|r| a[r].add(176 * ib));
            let K4Heads {
                sce,
                sco,
                mns,
                dx: dxv,
                dmin: dmv,
            } = k4_heads(&bxs);
            for (r, &bx) in bxs.iter().enumerate() {
                let qh = _mm256_loadu_si256(bx.add(16) as *const __m256i);
                let qh = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(qh), qh);
                let parts: [__m512i; 4] = std::array::from_fn(|g| {
                    // part g: low nibbles of qs[32g..] (first 32 values), then high nibbles,
                    // each with its bit of qh (2g, 2g + 1)
                    let q = _mm256_loadu_si256(bx.add(48 + 32 * g) as *const __m256i);
                    let q = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q), q);
                    let lo = _mm512_and_si512(_mm512_srlv_epi16(q, nib), m4);
                    let hi = _mm512_and_si512(_mm512_srlv_epi16(qh, counts(2 * g as i16)), one);
                    _mm512_or_si512(lo, _mm512_slli_epi16::<4>(hi))
                });
                // t[r][jj] lane L: dword 4L + jj of row r's four parts
                t[r] = dword_transpose(&parts);
            }
            // w[4L + jj] 128-bit lane r = t[r][jj] lane L
            let mut w = [_mm512_setzero_si512(); 16];
            for jj in 0..4 {
                let t0 = _mm512_shuffle_i64x2::<0x44>(t[0][jj], t[1][jj]);
                let t1 = _mm512_shuffle_i64x2::<0xEE>(t[0][jj], t[1][jj]);
                let t2 = _mm512_shuffle_i64x2::<0x44>(t[2][jj], t[3][jj]);
                let t3 = _mm512_shuffle_i64x2::<0xEE>(t[2][jj], t[3][jj]);
                w[jj] = _mm512_shuffle_i64x2::<0x88>(t0, t2);
                w[4 + jj] = _mm512_shuffle_i64x2::<0xDD>(t0, t2);
                w[8 + jj] = _mm512_shuffle_i64x2::<0x88>(t1, t3);
                w[12 + jj] = _mm512_shuffle_i64x2::<0xDD>(t1, t3);
            }
            for c in 0..C {
                let by = b[c].add(292 * ib);
                let dy = _mm_set1_ps((by as *const f32).read_unaligned());
                let yv: [__m512i; 4] = std::array::from_fn(|p| {
                    _mm512_loadu_si512(by.add(4 + 64 * p) as *const __m512i)
                });
                let o = dword_transpose(&yv);
                for (jj, v) in o.iter().enumerate() {
                    _mm512_store_si512(yt.0.as_mut_ptr().add(64 * jj) as *mut __m512i, *v);
                }
                let mut se = _mm512_setzero_si512();
                let mut so = _mm512_setzero_si512();
                for j in 0..8 {
                    // (u5 x i8, four per lane, in i32: exact)
                    let ye = _mm512_broadcast_i32x4(_mm_load_si128(
                        yt.0.as_ptr().add(64 * (j % 4) + 16 * (j / 4)) as *const __m128i,
                    ));
                    let yo = _mm512_broadcast_i32x4(_mm_load_si128(
                        yt.0.as_ptr().add(64 * (j % 4) + 16 * (2 + j / 4)) as *const __m128i,
                    ));
                    se = _mm512_dpbusd_epi32(se, w[j], ye);
                    so = _mm512_dpbusd_epi32(so, w[8 + j], yo);
                }
                let s = _mm512_add_epi32(_mm512_mullo_epi32(se, sce), _mm512_mullo_epi32(so, sco));
                let bs = _mm256_loadu_si256(by.add(260) as *const __m256i);
                let bs32 =
                    _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
                let m = _mm512_madd_epi16(mns, _mm512_broadcast_i32x4(bs32));
                // each row's four parts summed
                let s = _mm512_add_epi32(s, _mm512_shuffle_epi32::<0x4E>(s));
                let s = _mm512_add_epi32(s, _mm512_shuffle_epi32::<0xB1>(s));
                let m = _mm512_add_epi32(m, _mm512_shuffle_epi32::<0x4E>(m));
                let m = _mm512_add_epi32(m, _mm512_shuffle_epi32::<0xB1>(m));
                let st =
                    _mm_cvtepi32_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi32(gather, s)));
                let mt =
                    _mm_cvtepi32_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi32(gather, m)));
                let rv = _mm_fnmadd_ps(dmv, mt, _mm_mul_ps(st, dxv));
                acc[c] = _mm_fmadd_ps(rv, dy, acc[c]);
            }
        }
    }
    for c in 0..C {
        let mut v = [0.0f32; 4];
        // SAFETY: v holds 4 floats.
        unsafe { _mm_storeu_ps(v.as_mut_ptr(), _mm_sub_ps(acc[c], _mm_setzero_ps())) };
        for r in 0..4 {
            out[r * C + c] = v[r];
        }
    }
}
