//! AVX2 (+FMA, F16C) and AVX-512 (F, BW, VL, VNNI) dot products for the hot types.
//! Each public wrapper checks the operand sizes, then calls a `#[target_feature]` kernel that
//! reads whole blocks through unaligned loads inside those bounds. The Q8_0/Q4_0 kernels keep
//! one f32 accumulator in block order, which ops::qtile reproduces bit for bit.

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;

use super::scalar::check;
use ggml::quants::fp16_to_fp32 as h2f;
use ggml::Type;

pub(super) fn has_avx2() -> bool {
    crate::simd::features::cpu().avx2_dot()
}

pub(super) fn has_avx512() -> bool {
    crate::simd::features::cpu().avx512_dot()
}

type Kernel = super::VecDotFn;

pub(super) fn avx2_kernel(ty: Type) -> Option<Kernel> {
    Some(match ty {
        Type::F32 => f32_avx2,
        Type::F16 => f16_avx2,
        Type::Bf16 => bf16_avx2,
        Type::Q8_0 => q8_0_avx2,
        Type::Q4_0 => q4_0_avx2,
        Type::Q4_1 => q4_1_avx2,
        Type::Q5_0 => q5_0_avx2,
        Type::Q5_1 => q5_1_avx2,
        Type::Q4K => q4_k_avx2,
        Type::Q2K => super::x86_k23::q2_k_avx2,
        Type::Q3K => super::x86_k23::q3_k_avx2,
        Type::Iq4Nl => iq4_nl_avx2,
        Type::Q5K => q5_k_avx2,
        Type::Q6K => super::x86_q6_k::q6_k_avx2,
        _ => return None,
    })
}

pub(super) fn avx512_kernel(ty: Type) -> Option<Kernel> {
    Some(match ty {
        Type::F32 => f32_avx512,
        Type::F16 => f16_avx512,
        Type::Bf16 => super::x86_bf16::kernel(),
        Type::Q8_0 => q8_0_avx512,
        Type::Q4_0 => q4_0_avx512,
        Type::Q4_1 => q4_1_avx512,
        Type::Q5_0 => q5_0_avx512,
        Type::Q5_1 => q5_1_avx512,
        Type::Q4K => q4_k_avx512,
        Type::Q2K => super::x86_k23::q2_k_avx2,
        Type::Q3K if crate::simd::features::cpu().avx512_q3_k() => super::x86_k23::q3_k_avx512,
        Type::Q3K => super::x86_k23::q3_k_avx2,
        Type::Iq4Nl => iq4_nl_avx2,
        Type::Iq4Xs if crate::simd::features::cpu().avx512_iq4_xs() => {
            super::x86_iq4_xs::iq4_xs_avx512
        }
        Type::Q5K => q5_k_avx512,
        Type::Q6K => super::x86_q6_k::q6_k_avx512,
        Type::Q2_0 => super::q1q2::q2_0_q8_0_fused,
        _ => return None,
    })
}

/// Declares a safe wrapper `$name` that checks sizes and runs `$kernel` with `$feat`.
macro_rules! wrapper {
    ($name:ident, $kernel:ident, $qk:expr, $xs:expr, $ys:expr) => {
        fn $name(n: usize, x: &[u8], y: &[u8]) -> f32 {
            let nb = check(n, $qk, x, $xs, y, $ys);
            // SAFETY: the table only hands out this kernel after the CPU features it is
            // compiled for were detected, and `check` proved x and y hold nb blocks.
            unsafe { $kernel(nb, x, y) }
        }
    };
}

wrapper!(f32_avx2, f32_k2, 1, 4, 4);
wrapper!(f16_avx2, f16_k2, 1, 2, 2);
wrapper!(bf16_avx2, bf16_k2, 1, 2, 2);
wrapper!(q8_0_avx2, q8_0_k2, 32, 34, 34);
wrapper!(q4_0_avx2, q4_0_k2, 32, 18, 34);
wrapper!(q4_1_avx2, q4_1_k2, 32, 20, 36);
wrapper!(q5_0_avx2, q5_0_k2, 32, 22, 34);
wrapper!(q4_1_avx512, q4_1_k512, 32, 20, 36);
wrapper!(q5_0_avx512, q5_0_k512, 32, 22, 34);
wrapper!(q5_k_avx2, q5_k_k2, 256, 176, 292);
wrapper!(q5_k_avx512, q5_k_k512, 256, 176, 292);
wrapper!(iq4_nl_avx2, iq4_nl_k2, 32, 18, 34);
wrapper!(q5_1_avx2, q5_1_k2, 32, 24, 36);
wrapper!(q5_1_avx512, q5_1_k512, 32, 24, 36);
wrapper!(q4_k_avx2, q4_k_k2, 256, 144, 292);
wrapper!(f32_avx512, f32_k512, 1, 4, 4);
wrapper!(f16_avx512, f16_k512, 1, 2, 2);
wrapper!(q8_0_avx512, q8_0_k512, 32, 34, 34);
wrapper!(q4_0_avx512, q4_0_k512, 32, 18, 34);
wrapper!(q4_k_avx512, q4_k_k512, 256, 144, 292);

/// The 8 lanes' sum in ggml's `hsum_float_8` order (lo + hi, then pairs): every AVX2 kernel's
/// last step, so every one takes it from here.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(crate) fn hsum_ps(v: __m256) -> f32 {
    let lo = _mm256_castps256_ps128(v);
    let hi = _mm256_extractf128_ps(v, 1);
    let s = _mm_add_ps(lo, hi);
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// Eight rows' horizontal sums, row r in lane r, each as `hsum_ps` adds it: (lo + hi), then
/// lane i + lane i + 2, then lane 0 + lane 1.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn hsum8(a: &[__m256; 8]) -> __m256 {
    let half = |x: __m256, y: __m256| {
        _mm256_add_ps(
            _mm256_permute2f128_ps::<0x20>(x, y),
            _mm256_permute2f128_ps::<0x31>(x, y),
        )
    };
    // [r0 | r1], [r2 | r3], ... four lanes each
    let (p0, p1) = (half(a[0], a[1]), half(a[2], a[3]));
    let (p2, p3) = (half(a[4], a[5]), half(a[6], a[7]));
    let pairs = |x: __m256, y: __m256| {
        _mm256_add_ps(
            _mm256_shuffle_ps::<0x44>(x, y),
            _mm256_shuffle_ps::<0xEE>(x, y),
        )
    };
    // [r0 r0 r2 r2 | r1 r1 r3 r3], [r4 r4 r6 r6 | r5 r5 r7 r7]
    let (q0, q1) = (pairs(p0, p1), pairs(p2, p3));
    // [r0 r2 r4 r6 | r1 r3 r5 r7]
    let t = _mm256_add_ps(
        _mm256_shuffle_ps::<0x88>(q0, q1),
        _mm256_shuffle_ps::<0xDD>(q0, q1),
    );
    _mm256_permutevar8x32_ps(t, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
}

/// out[i] for a run of one column's rows, eight at a time: `eight(r)` gives rows r..r + 8's
/// 8-lane sums (added by `hsum8`), `one(r)` row r's for the rows left (added by `hsum_ps`).
/// Inlined into its callers, whose target features the closures share.
///
/// # Safety
/// AVX2 is available; the closures' own promises hold for every r they get.
#[inline(always)]
pub(crate) unsafe fn by_eight(
    out: &mut [f32],
    mut eight: impl FnMut(usize) -> [__m256; 8],
    mut one: impl FnMut(usize) -> __m256,
) {
    let mut groups = out.chunks_exact_mut(8);
    let mut r = 0;
    for g in &mut groups {
        // SAFETY: AVX2 (the caller's promise); g holds 8 floats.
        unsafe { _mm256_storeu_ps(g.as_mut_ptr(), hsum8(&eight(r))) };
        r += 8;
    }
    for o in groups.into_remainder() {
        // SAFETY: AVX2 (the caller's promise).
        *o = unsafe { hsum_ps(one(r)) };
        r += 1;
    }
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn hsum_epi32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s)
}

#[inline]
fn rd16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

/// # Safety
/// AVX2 and FMA must be available; `x` and `y` must hold `n` f32.
#[target_feature(enable = "avx2,fma")]
unsafe fn f32_k2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr() as *const f32, y.as_ptr() as *const f32);
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            // SAFETY: i + 8k + 8 <= n elements are in bounds.
            let (vx, vy) = unsafe {
                (
                    _mm256_loadu_ps(px.add(i + 8 * k)),
                    _mm256_loadu_ps(py.add(i + 8 * k)),
                )
            };
            *a = _mm256_fmadd_ps(vx, vy, *a);
        }
        i += 32;
    }
    let mut sum = reduce_f32x8(&acc);
    while i < n {
        // SAFETY: i < n. (GCC fuses ggml's `sumf += x[i]*y[i]`.)
        sum = unsafe { (*px.add(i)).mul_add(*py.add(i), sum) };
        i += 1;
    }
    sum
}

/// # Safety
/// AVX2, FMA and F16C must be available; `x` and `y` must hold `n` halves.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_k2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            let o = 2 * (i + 8 * k);
            // SAFETY: 8 halves from element i + 8k are within the n checked by the caller.
            let (vx, vy) = unsafe {
                (
                    _mm256_cvtph_ps(_mm_loadu_si128(px.add(o) as *const __m128i)),
                    _mm256_cvtph_ps(_mm_loadu_si128(py.add(o) as *const __m128i)),
                )
            };
            *a = _mm256_fmadd_ps(vx, vy, *a);
        }
        i += 32;
    }
    // ggml_vec_dot_f16 reduces with GGML_F32x8_REDUCE (as ggml_vec_dot_f32) into a double,
    // to which the tail's f32 products are added
    // SAFETY: x and y hold n halves (checked by the caller).
    unsafe { f16_tail(reduce_f32x8(&acc) as f64, px, py, i, n) as f32 }
}

/// Four F16 rows times one F16 column, each row in `f16_k2`'s order, as two passes of two
/// rows: a pass converts the column's values once for both rows, and its 8 sums, a column
/// vector and a row vector fit AVX2's 16 registers (four rows' 16 sums would not).
///
/// # Safety
/// AVX2, FMA and F16C must be available; each a[r] and y hold n halves.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn f16_rows4_k2(n: usize, a: &[*const u8; 4], y: *const u8, out: &mut [f32; 4]) {
    for pair in 0..2 {
        let rows = [a[2 * pair], a[2 * pair + 1]];
        let mut acc = [[_mm256_setzero_ps(); 4]; 2];
        let mut i = 0;
        while i + 32 <= n {
            for k in 0..4 {
                let o = 2 * (i + 8 * k);
                // SAFETY: 8 halves from element i + 8k are in bounds of y and of both rows.
                unsafe {
                    let vy = _mm256_cvtph_ps(_mm_loadu_si128(y.add(o) as *const __m128i));
                    for (r, ar) in acc.iter_mut().enumerate() {
                        let vx = _mm256_cvtph_ps(_mm_loadu_si128(rows[r].add(o) as *const __m128i));
                        ar[k] = _mm256_fmadd_ps(vx, vy, ar[k]);
                    }
                }
            }
            i += 32;
        }
        for r in 0..2 {
            // SAFETY: row r and y hold n halves.
            let sum = unsafe { f16_tail(reduce_f32x8(&acc[r]) as f64, rows[r], y, i, n) };
            out[2 * pair + r] = sum as f32;
        }
    }
}

/// `sum` plus the products of halves i..n of x and y, added one by one in order (ggml's F16
/// dot product's tail, onto the vector part's sum as a double).
///
/// # Safety
/// x and y hold n halves.
pub(super) unsafe fn f16_tail(mut sum: f64, x: *const u8, y: *const u8, i: usize, n: usize) -> f64 {
    for j in i..n {
        // SAFETY: element j < n of x and of y.
        let (a, b) = unsafe {
            (
                (x.add(2 * j) as *const u16).read_unaligned(),
                (y.add(2 * j) as *const u16).read_unaligned(),
            )
        };
        sum += (crate::fp::f16_to_f32(a) * crate::fp::f16_to_f32(b)) as f64;
    }
    sum
}

/// GGML_F32x8_REDUCE of four accumulators: 0+2 and 1+3, then those two, then the halves and
/// two horizontal adds.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn reduce_f32x8(acc: &[__m256; 4]) -> f32 {
    let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
    let t0 = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    let t1 = _mm_hadd_ps(t0, t0);
    _mm_cvtss_f32(_mm_hadd_ps(t1, t1))
}

#[inline]
#[target_feature(enable = "avx2")]
fn bf16x8_to_ps(v: __m128i) -> __m256 {
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16))
}

/// # Safety
/// AVX2 and FMA must be available; `x` and `y` must hold `n` bf16.
#[target_feature(enable = "avx2,fma")]
unsafe fn bf16_k2(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            let o = 2 * (i + 8 * k);
            // SAFETY: 8 bf16 from element i + 8k are in bounds.
            let (vx, vy) = unsafe {
                (
                    bf16x8_to_ps(_mm_loadu_si128(px.add(o) as *const __m128i)),
                    bf16x8_to_ps(_mm_loadu_si128(py.add(o) as *const __m128i)),
                )
            };
            *a = _mm256_fmadd_ps(vx, vy, *a);
        }
        i += 32;
    }
    // ggml's reduction: (c1 + c3) + (c2 + c4), then the lanes
    let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
    // ggml sums in a double (ggml_float): the vector part, then each tail product
    let mut sum = hsum_ps(s) as f64;
    while i < n {
        let (a, b) = (rd16(x, 2 * i), rd16(y, 2 * i));
        sum += (f32::from_bits((a as u32) << 16) * f32::from_bits((b as u32) << 16)) as f64;
        i += 1;
    }
    sum as f32
}

/// Sum over 32 lanes of x*y as 8 i32 (pairs of i16 products; |x|,|y| <= 127 cannot saturate).
#[inline]
#[target_feature(enable = "avx2")]
fn mul_sum_i8(x: __m256i, y: __m256i) -> __m256i {
    let ax = _mm256_sign_epi8(x, x);
    let sy = _mm256_sign_epi8(y, x);
    _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1))
}

/// Same sum with VNNI, which accumulates in i32 without any saturation.
#[inline]
#[target_feature(enable = "avx2,avx512vnni,avx512vl")]
fn mul_sum_i8_vnni(x: __m256i, y: __m256i) -> __m256i {
    let ax = _mm256_sign_epi8(x, x);
    let sy = _mm256_sign_epi8(y, x);
    _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax, sy)
}

#[inline]
#[target_feature(enable = "avx2")]
fn unpack_q4_0(p: *const u8) -> __m256i {
    // SAFETY: the caller passes a pointer to the 16 quant bytes of a block in bounds.
    let b = unsafe { _mm_loadu_si128(p as *const __m128i) };
    let both = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
    _mm256_sub_epi8(
        _mm256_and_si256(both, _mm256_set1_epi8(0x0F)),
        _mm256_set1_epi8(8),
    )
}

/// fp16 -> f32 with F16C, for block scales (ggml's GGML_CPU_FP16_TO_FP32 on x86).
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn h2f_f16c(p: *const u8) -> f32 {
    // SAFETY: F16C is enabled for this function; the caller passes 2 readable bytes.
    unsafe { crate::fp::f16c_at(p) }
}

macro_rules! q8_0_like {
    ($name:ident, $feat:literal, $xs:expr, $load_x:ident, $mul:ident) => {
        /// # Safety
        /// The CPU features must be available; `x`, `y` must hold `nb` blocks.
        #[target_feature(enable = $feat)]
        unsafe fn $name(nb: usize, x: &[u8], y: &[u8]) -> f32 {
            let (px, py) = (x.as_ptr(), y.as_ptr());
            // One accumulator in block order: ops::qtile reproduces exactly this sum.
            let mut acc = _mm256_setzero_ps();
            for ib in 0..nb {
                // SAFETY: block ib lies within the nb blocks the caller checked.
                let (bx, by) = unsafe { (px.add($xs * ib), py.add(34 * ib)) };
                // SAFETY: both blocks start with their fp16 scale, then the quants.
                let (d, qx, qy) = unsafe {
                    (
                        _mm256_set1_ps(h2f_f16c(bx) * h2f_f16c(by)),
                        $load_x(bx.add(2)),
                        _mm256_loadu_si256(by.add(2) as *const __m256i),
                    )
                };
                acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps($mul(qx, qy)), acc);
            }
            hsum_ps(acc)
        }
    };
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn load32(p: *const u8) -> __m256i {
    // SAFETY: the caller passes a pointer with 32 readable bytes.
    unsafe { _mm256_loadu_si256(p as *const __m256i) }
}

/// Byte i is 0xFF iff bit i of the little-endian u32 at `p` is set.
#[inline]
#[target_feature(enable = "avx2")]
fn bits_to_bytes(p: *const u8) -> __m256i {
    // SAFETY: the caller passes a pointer to 4 readable bytes.
    let bits = unsafe { std::ptr::read_unaligned(p as *const u32) };
    let shuf = _mm256_set_epi64x(
        0x0303_0303_0303_0303,
        0x0202_0202_0202_0202,
        0x0101_0101_0101_0101,
        0,
    );
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(bits as i32), shuf);
    _mm256_cmpeq_epi8(
        _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe)),
        _mm256_set1_epi64x(-1),
    )
}

/// Q5_0's 32 signed values: the nibble, minus 16 where the fifth bit (qh) is clear.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn unpack_q5_0(p: *const u8) -> __m256i {
    // SAFETY: `p` points at the block's 4 qh bytes followed by its 16 quant bytes.
    let (set, nibbles) = unsafe { (bits_to_bytes(p), unpack_nibbles(p.add(4))) };
    // 0xF0 | nibble is nibble - 16 as a signed byte.
    _mm256_or_si256(
        nibbles,
        _mm256_andnot_si256(set, _mm256_set1_epi8(0xF0u8 as i8)),
    )
}

/// Q5_1's 32 unsigned values: the nibble plus 16 where the fifth bit (qh) is set.
#[inline]
#[target_feature(enable = "avx2")]
fn unpack_q5_1(p: *const u8) -> __m256i {
    // SAFETY: `p` points at the block's 4 qh bytes followed by its 16 quant bytes.
    let (set, nibbles) = unsafe { (bits_to_bytes(p), unpack_nibbles(p.add(4))) };
    _mm256_or_si256(nibbles, _mm256_and_si256(set, _mm256_set1_epi8(0x10)))
}

/// The 32 nibbles of 16 bytes: low nibbles in lanes 0..16, high nibbles in lanes 16..32.
#[inline]
#[target_feature(enable = "avx2")]
fn unpack_nibbles(p: *const u8) -> __m256i {
    // SAFETY: the caller passes a pointer to 16 readable bytes.
    let b = unsafe { _mm_loadu_si128(p as *const __m128i) };
    _mm256_and_si256(
        _mm256_set_m128i(_mm_srli_epi16(b, 4), b),
        _mm256_set1_epi8(0x0F),
    )
}

/// u8 x i8 products of 32 lanes summed to 8 i32 (|u| <= 15 cannot saturate).
#[inline]
#[target_feature(enable = "avx2")]
fn mul_sum_u8_i8(x: __m256i, y: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1))
}

#[inline]
#[target_feature(enable = "avx2,avx512vnni,avx512vl")]
fn mul_sum_u8_i8_vnni(x: __m256i, y: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(_mm256_setzero_si256(), x, y)
}

macro_rules! q4_1_kernel {
    ($name:ident, $feat:literal, $xs:expr, $load_x:ident, $mul:ident) => {
        /// # Safety
        /// The CPU features must be available; `x` must hold `nb` Q4_1 blocks, `y` nb Q8_1.
        #[target_feature(enable = $feat)]
        unsafe fn $name(nb: usize, x: &[u8], y: &[u8]) -> f32 {
            let (px, py) = (x.as_ptr(), y.as_ptr());
            let mut acc = _mm256_setzero_ps();
            let mut summs = 0.0f32;
            for ib in 0..nb {
                // SAFETY: block ib of both operands is within the nb blocks the caller checked.
                unsafe {
                    let (bx, by) = (px.add($xs * ib), py.add(36 * ib));
                    // the block's (d, m) and the column's (d, s) are adjacent halves: one
                    // conversion widens [dx, mx, dy, sy], one product gives dx * dy and
                    // mx * sy (each the scalar's bits: the conversion is exact)
                    let hx = (bx as *const i32).read_unaligned();
                    let hy = (by as *const i32).read_unaligned();
                    let s4 = _mm_cvtph_ps(_mm_insert_epi32::<1>(_mm_cvtsi32_si128(hx), hy));
                    let p = _mm_mul_ps(s4, _mm_permute_ps::<0b01_00_11_10>(s4));
                    summs += _mm_cvtss_f32(_mm_movehdup_ps(p));
                    let d = _mm256_broadcastss_ps(p);
                    let qx = $load_x(bx.add(4));
                    let qy = _mm256_loadu_si256(by.add(4) as *const __m256i);
                    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps($mul(qx, qy)), acc);
                }
            }
            hsum_ps(acc) + summs
        }
    };
}

/// Four rows of one Q8_1 column at once: out[r] = the kernel above on row x[r], in its order
/// (four independent chains, so a mat-vec product is not bound by one chain's latency).
macro_rules! q4_1_rows4 {
    ($name:ident, $feat:literal, $xs:expr, $load_x:ident, $mul:ident) => {
        /// # Safety
        /// The CPU features must be available; each x[r] must point at `nb` blocks of the
        /// weight type, `y` at nb Q8_1 blocks.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn $name(
            nb: usize,
            x: &[*const u8; 4],
            y: *const u8,
            out: &mut [f32; 4],
        ) {
            // The four rows' scales go through F16C together: each row's d and m (adjacent
            // halves) as one dword, the column's d and s likewise, so one conversion and two
            // 4-lane products give every row's d * dy and m * sy, each the scalar's bits.
            let mut acc = [_mm256_setzero_ps(); 4];
            let mut summs = _mm_setzero_ps();
            // dword r of the widened rows: d_r (even lanes), m_r (odd lanes)
            let evens_odds = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
            for ib in 0..nb {
                // SAFETY: block ib of every operand is within the nb blocks the caller vouches for.
                unsafe {
                    let by = y.add(36 * ib);
                    let hy = (by as *const i32).read_unaligned();
                    let ys = _mm_cvtph_ps(_mm_cvtsi32_si128(hy));
                    let (dy, sy) = (_mm_broadcastss_ps(ys), _mm_permute_ps::<0x55>(ys));
                    let qy = _mm256_loadu_si256(by.add(4) as *const __m256i);
                    let bx: [*const u8; 4] = std::array::from_fn(|r| x[r].add($xs * ib));
                    let h = |r: usize| (bx[r] as *const i32).read_unaligned();
                    let dm = _mm256_cvtph_ps(_mm_setr_epi32(h(0), h(1), h(2), h(3)));
                    let dm = _mm256_permutevar8x32_ps(dm, evens_odds);
                    let d4 = _mm_mul_ps(_mm256_castps256_ps128(dm), dy);
                    summs = _mm_add_ps(summs, _mm_mul_ps(_mm256_extractf128_ps::<1>(dm), sy));
                    let dv = _mm256_set_m128(d4, d4);
                    macro_rules! row {
                        ($r:literal, $imm:literal) => {
                            let qx = $load_x(bx[$r].add(4));
                            let d = _mm256_permute_ps::<$imm>(dv);
                            acc[$r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps($mul(qx, qy)), acc[$r]);
                        };
                    }
                    row!(0, 0x00);
                    row!(1, 0x55);
                    row!(2, 0xAA);
                    row!(3, 0xFF);
                }
            }
            let mut sm = [0.0f32; 4];
            // SAFETY: sm holds 4 floats.
            unsafe { _mm_storeu_ps(sm.as_mut_ptr(), summs) };
            for r in 0..4 {
                out[r] = hsum_ps(acc[r]) + sm[r];
            }
        }
    };
}

q4_1_rows4!(
    q4_1_rows4_k2,
    "avx2,fma,f16c",
    20,
    unpack_nibbles,
    mul_sum_u8_i8
);
q4_1_rows4!(
    q5_1_rows4_k2,
    "avx2,fma,f16c",
    24,
    unpack_q5_1,
    mul_sum_u8_i8
);

/// Four rows times C Q8_1 columns: out[r * C + c] = the dot kernel above on row x[r] and
/// column y[c], in its order (each weight block unpacked once for the C columns): the
/// prompt-processing tile of Q4_1 / Q5_1 on AVX2 without VNNI.
macro_rules! q4_1_tile {
    ($name:ident, $feat:literal, $xs:expr, $load_x:ident, $mul:ident) => {
        /// # Safety
        /// The CPU features must be available; each x[r] must point at `nb` blocks of the
        /// weight type, each y[c] at nb Q8_1 blocks; out holds 4 * C floats.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn $name<const C: usize>(
            nb: usize,
            x: &[*const u8; 4],
            y: &[*const u8; C],
            out: &mut [f32],
        ) {
            let mut acc = [[_mm256_setzero_ps(); C]; 4];
            let mut summs = [[0.0f32; C]; 4];
            for ib in 0..nb {
                // SAFETY: block ib of every operand is within the nb blocks the caller vouches for.
                unsafe {
                    let mut dy = [0.0f32; C];
                    let mut sy = [0.0f32; C];
                    let mut qy = [_mm256_setzero_si256(); C];
                    for c in 0..C {
                        let by = y[c].add(36 * ib);
                        (dy[c], sy[c]) = (h2f_f16c(by), h2f_f16c(by.add(2)));
                        qy[c] = _mm256_loadu_si256(by.add(4) as *const __m256i);
                    }
                    for r in 0..4 {
                        let bx = x[r].add($xs * ib);
                        let (dx, mx) = (h2f_f16c(bx), h2f_f16c(bx.add(2)));
                        let qx = $load_x(bx.add(4));
                        for c in 0..C {
                            summs[r][c] += mx * sy[c];
                            let d = _mm256_set1_ps(dx * dy[c]);
                            let s = _mm256_cvtepi32_ps($mul(qx, qy[c]));
                            acc[r][c] = _mm256_fmadd_ps(d, s, acc[r][c]);
                        }
                    }
                }
            }
            for r in 0..4 {
                for c in 0..C {
                    out[r * C + c] = hsum_ps(acc[r][c]) + summs[r][c];
                }
            }
        }
    };
}

q4_1_tile!(
    q4_1_tile_k2,
    "avx2,fma,f16c",
    20,
    unpack_nibbles,
    mul_sum_u8_i8
);
q4_1_tile!(
    q5_1_tile_k2,
    "avx2,fma,f16c",
    24,
    unpack_q5_1,
    mul_sum_u8_i8
);

/// Four-row kernels of one activation column, for the types that have them: the same bits as
/// four calls of the AVX2 (or AVX-512: the integer sums are exact either way) dot product.
pub(crate) type Rows4Fn = unsafe fn(usize, &[*const u8; 4], *const u8, &mut [f32; 4]);

/// The kernel and its block length, for weight rows of `row_bytes` each (F16's four-row
/// kernels only where `simd::features`' f16_rows4 says they pay).
pub(crate) fn rows4_kernel(ty: Type, row_bytes: usize) -> Option<(Rows4Fn, usize)> {
    if !has_avx2() {
        return None;
    }
    match ty {
        Type::F16 if !crate::simd::features::cpu().f16_rows4(row_bytes) => None,
        Type::F16 if has_avx512() => Some((f16_rows4_k512 as Rows4Fn, 1)),
        Type::F16 => Some((f16_rows4_k2 as Rows4Fn, 1)),
        Type::Q4_1 => Some((q4_1_rows4_k2 as Rows4Fn, 32)),
        Type::Q5_1 => Some((q5_1_rows4_k2 as Rows4Fn, 32)),
        // (the AVX2 dot product's bits, so also what an AVX2-only CPU would give)
        Type::Q6K if super::x86_k512::available() => {
            Some((super::x86_k512::q6_k_rows4 as Rows4Fn, 256))
        }
        _ => None,
    }
}

q4_1_kernel!(q4_1_k2, "avx2,fma,f16c", 20, unpack_nibbles, mul_sum_u8_i8);
q4_1_kernel!(q5_1_k2, "avx2,fma,f16c", 24, unpack_q5_1, mul_sum_u8_i8);
q4_1_kernel!(
    q4_1_k512,
    "avx2,fma,f16c,avx512vnni,avx512vl",
    20,
    unpack_nibbles,
    mul_sum_u8_i8_vnni
);
q4_1_kernel!(
    q5_1_k512,
    "avx2,fma,f16c,avx512vnni,avx512vl",
    24,
    unpack_q5_1,
    mul_sum_u8_i8_vnni
);
q8_0_like!(q5_0_k2, "avx2,fma,f16c", 22, unpack_q5_0, mul_sum_i8);
q8_0_like!(
    q5_0_k512,
    "avx2,fma,f16c,avx512vnni,avx512vl",
    22,
    unpack_q5_0,
    mul_sum_i8_vnni
);
/// IQ4_NL's 32 values: each nibble looked up in the 16 non-linear levels.
#[inline]
#[target_feature(enable = "avx2")]
fn unpack_iq4_nl(p: *const u8) -> __m256i {
    // SAFETY: the table has 16 bytes.
    let table = unsafe { _mm_loadu_si128(ggml::quants::KVALUES_IQ4NL.as_ptr() as *const __m128i) };
    _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(table), unpack_nibbles(p))
}

/// # Safety
/// AVX2, FMA and F16C must be available; `x`, `y` must hold `nb` blocks.
///
/// ggml's AVX2 ggml_vec_dot_iq4_nl_q8_0 (its AVX-512 build runs the same code, VNNI unused):
/// pairs of blocks into two accumulators, fused; the hsum of their sum; an odd last block in
/// scalar code, `sumf += d * sumi` fused by GCC.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn iq4_nl_k2(nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let mut acc = [_mm256_setzero_ps(); 2];
    let mut ib = 0;
    while ib + 1 < nb {
        for (k, a) in acc.iter_mut().enumerate() {
            // SAFETY: blocks ib and ib + 1 lie within the nb blocks the caller checked; both
            // start with their fp16 scale, then the quants.
            let (d, qx, qy) = unsafe {
                let (bx, by) = (px.add(18 * (ib + k)), py.add(34 * (ib + k)));
                (
                    _mm256_set1_ps(h2f_f16c(by) * h2f_f16c(bx)),
                    unpack_iq4_nl(bx.add(2)),
                    _mm256_loadu_si256(by.add(2) as *const __m256i),
                )
            };
            *a = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(mul_sum_i8(qx, qy)), *a);
        }
        ib += 2;
    }
    let mut sumf = hsum_ps(_mm256_add_ps(acc[0], acc[1]));
    if ib < nb {
        let (bx, by) = (&x[18 * ib..18 * ib + 18], &y[34 * ib..34 * ib + 34]);
        let d = h2f(rd16(by, 0)) * h2f(rd16(bx, 0));
        let mut sumi = 0i32;
        for j in 0..16 {
            let q = |v: u8| ggml::quants::KVALUES_IQ4NL[v as usize] as i32;
            sumi += q(bx[2 + j] & 0xF) * by[2 + j] as i8 as i32
                + q(bx[2 + j] >> 4) * by[18 + j] as i8 as i32;
        }
        sumf = d.mul_add(sumi as f32, sumf);
    }
    sumf
}
q8_0_like!(q8_0_k2, "avx2,fma,f16c", 34, load32, mul_sum_i8);
q8_0_like!(q4_0_k2, "avx2,fma,f16c", 18, unpack_q4_0, mul_sum_i8);
q8_0_like!(
    q8_0_k512,
    "avx2,fma,f16c,avx512vnni,avx512vl",
    34,
    load32,
    mul_sum_i8_vnni
);
q8_0_like!(
    q4_0_k512,
    "avx2,fma,f16c,avx512vnni,avx512vl",
    18,
    unpack_q4_0,
    mul_sum_i8_vnni
);

/// u8 x i8 products of 32 lanes summed to 8 i32, then each lane scaled.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn dot_u8_i8_scaled(q: __m256i, q8: __m256i, scale16: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(q, q8), scale16)
}

#[inline]
#[target_feature(enable = "avx2,avx512vnni,avx512vl")]
pub(super) fn dot_u8_i8_scaled_vnni(q: __m256i, q8: __m256i, scale32: __m256i) -> __m256i {
    _mm256_mullo_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), q, q8), scale32)
}

macro_rules! q4_k_kernel {
    ($name:ident, $feat:literal, $dot:ident, $scale:ident) => {
        /// # Safety
        /// The CPU features must be available; `x`, `y` must hold `nb` blocks.
        #[target_feature(enable = $feat)]
        unsafe fn $name(nb: usize, x: &[u8], y: &[u8]) -> f32 {
            let m4 = _mm256_set1_epi8(0x0F);
            // flips the sign of lane 1: -yd there
            let neg1 = _mm_setr_ps(0.0, -0.0, 0.0, 0.0);
            let (px, py) = (x.as_ptr(), y.as_ptr());
            // ggml's float order: 8 lanes of d * (scaled code sums) fused per block, 4 lanes of
            // -dmin * (mins x activation sums, pairs of subblocks) likewise, lanes summed last
            let mut accf = _mm256_setzero_ps();
            let mut acc_m = _mm_setzero_ps();
            for i in 0..nb {
                // SAFETY: block i of both operands is within the nb blocks the caller checked;
                // every offset below stays inside its 144- or 292-byte block.
                unsafe {
                    let (bx, by) = (px.add(144 * i), py.add(292 * i));
                    // [yd * d, -yd * dmin]: d and dmin widened together (each product the
                    // scalar's bits: the conversion is exact, and so is the sign)
                    let yd = _mm_broadcast_ss(&*(by as *const f32));
                    let dm = _mm_cvtph_ps(_mm_cvtsi32_si128((bx as *const i32).read_unaligned()));
                    let dd = _mm_mul_ps(_mm_xor_ps(yd, neg1), dm);
                    let sm = k4_scales_mins(bx.add(4));
                    acc_m = _mm_fmadd_ps(
                        _mm_permute_ps::<0x55>(dd),
                        _mm_cvtepi32_ps(min_pairs(sm, by)),
                        acc_m,
                    );
                    let sc = _mm256_permute2x128_si256::<0x00>(sm, sm);
                    let mut acc = _mm256_setzero_si256();
                    for g in 0..4 {
                        let q4 = load32(bx.add(16 + 32 * g));
                        let lo = _mm256_and_si256(q4, m4);
                        let hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), m4);
                        let y0 = load32(by.add(4 + 64 * g));
                        let y1 = load32(by.add(4 + 64 * g + 32));
                        acc = _mm256_add_epi32(acc, $dot(lo, y0, $scale(sc, 2 * g as i32)));
                        acc = _mm256_add_epi32(acc, $dot(hi, y1, $scale(sc, 2 * g as i32 + 1)));
                    }
                    let d = _mm256_broadcastss_ps(dd);
                    accf = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(acc), accf);
                }
            }
            let m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
            let m = _mm_add_ss(m, _mm_movehdup_ps(m));
            hsum_ps(accf) + _mm_cvtss_f32(m)
        }
    };
}

/// A Q4_K / Q5_K block's 12 packed scale bytes as 16-bit lanes: the eight scales in lanes 0..8,
/// the eight mins in lanes 8..16 (ggml's utmp unpacking, widened as its AVX2 kernel does).
///
/// # Safety
/// `sc` points at 12 readable bytes.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn k4_scales_mins(sc: *const u8) -> __m256i {
    // SAFETY: guaranteed by the caller.
    let (s, m) = super::x86_k512::k4_unpack(unsafe { &*(sc as *const [u8; 12]) });
    _mm256_cvtepu8_epi16(_mm_set_epi64x(m as i64, s as i64))
}

/// Lane l: mins[2l] * (sums of subblock 2l's activations) + the same for subblock 2l + 1,
/// from `k4_scales_mins`' lanes (exact: the pair sums fit i16, the products i32).
///
/// # Safety
/// `by` points at a Q8_K block.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn min_pairs(scales_mins: __m256i, by: *const u8) -> __m128i {
    // SAFETY: the 16 bsums lie inside the block.
    let bsums = unsafe { _mm256_loadu_si256(by.add(260) as *const __m256i) };
    let sub = _mm_hadd_epi16(
        _mm256_castsi256_si128(bsums),
        _mm256_extracti128_si256::<1>(bsums),
    );
    _mm_madd_epi16(_mm256_extracti128_si256::<1>(scales_mins), sub)
}

/// Scale `i` of the eight 16-bit scales held in both halves of `sc`, in every 16-bit lane.
#[inline]
#[target_feature(enable = "avx2")]
fn scale16(sc: __m256i, i: i32) -> __m256i {
    _mm256_shuffle_epi8(sc, _mm256_set1_epi16((((2 * i + 1) << 8) | (2 * i)) as i16))
}

/// The same in every 32-bit lane (the upper halves zeroed), for `vpdpbusd`'s sums.
#[inline]
#[target_feature(enable = "avx2")]
fn scale32(sc: __m256i, i: i32) -> __m256i {
    let ctrl = (0x8080_0000u32 as i32) | ((2 * i + 1) << 8) | (2 * i);
    _mm256_shuffle_epi8(sc, _mm256_set1_epi32(ctrl))
}

macro_rules! q5_k_kernel {
    ($name:ident, $feat:literal, $dot:ident, $scale:ident) => {
        /// # Safety
        /// The CPU features must be available; `x`, `y` must hold `nb` blocks.
        #[target_feature(enable = $feat)]
        unsafe fn $name(nb: usize, x: &[u8], y: &[u8]) -> f32 {
            let m4 = _mm256_set1_epi8(0x0F);
            let neg1 = _mm_setr_ps(0.0, -0.0, 0.0, 0.0);
            let one = _mm256_set1_epi8(1);
            let (px, py) = (x.as_ptr(), y.as_ptr());
            // ggml's float order: 8 lanes of d * (scaled code sums) fused per block, the mins
            // term fused into one scalar, lanes summed last
            let mut accf = _mm256_setzero_ps();
            let mut summs = 0.0f32;
            for i in 0..nb {
                // SAFETY: block i of both operands is within the nb blocks the caller checked;
                // every offset below stays inside its 176- or 292-byte block.
                unsafe {
                    let (bx, by) = (px.add(176 * i), py.add(292 * i));
                    // [yd * d, -yd * dmin] as in the Q4_K kernel
                    let yd = _mm_broadcast_ss(&*(by as *const f32));
                    let dm = _mm_cvtph_ps(_mm_cvtsi32_si128((bx as *const i32).read_unaligned()));
                    let dd = _mm_mul_ps(_mm_xor_ps(yd, neg1), dm);
                    let sm = k4_scales_mins(bx.add(4));
                    // the exact integer sum of mins x subblock sums
                    let mp = min_pairs(sm, by);
                    let mp = _mm_add_epi32(mp, _mm_unpackhi_epi64(mp, mp));
                    let summ = _mm_cvtsi128_si32(_mm_add_epi32(mp, _mm_shuffle_epi32::<1>(mp)));
                    let sc = _mm256_permute2x128_si256::<0x00>(sm, sm);
                    let qh = load32(bx.add(16));
                    let mut acc = _mm256_setzero_si256();
                    for g in 0..4 {
                        let q4 = load32(bx.add(48 + 32 * g));
                        // Bit 2g of qh is the fifth bit of the low nibbles, bit 2g+1 of the high.
                        let (h_lo, h_hi) = match g {
                            0 => (qh, _mm256_srli_epi16(qh, 1)),
                            1 => (_mm256_srli_epi16(qh, 2), _mm256_srli_epi16(qh, 3)),
                            2 => (_mm256_srli_epi16(qh, 4), _mm256_srli_epi16(qh, 5)),
                            _ => (_mm256_srli_epi16(qh, 6), _mm256_srli_epi16(qh, 7)),
                        };
                        let lo = _mm256_or_si256(
                            _mm256_and_si256(q4, m4),
                            _mm256_slli_epi16(_mm256_and_si256(h_lo, one), 4),
                        );
                        let hi = _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16(q4, 4), m4),
                            _mm256_slli_epi16(_mm256_and_si256(h_hi, one), 4),
                        );
                        let y0 = load32(by.add(4 + 64 * g));
                        let y1 = load32(by.add(4 + 64 * g + 32));
                        acc = _mm256_add_epi32(acc, $dot(lo, y0, $scale(sc, 2 * g as i32)));
                        acc = _mm256_add_epi32(acc, $dot(hi, y1, $scale(sc, 2 * g as i32 + 1)));
                    }
                    let dmin = _mm_cvtss_f32(_mm_movehdup_ps(dd));
                    summs = (summ as f32).mul_add(dmin, summs);
                    let d = _mm256_broadcastss_ps(dd);
                    accf = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(acc), accf);
                }
            }
            hsum_ps(accf) + summs
        }
    };
}

q5_k_kernel!(q5_k_k2, "avx2,fma,f16c", dot_u8_i8_scaled, scale16);
q5_k_kernel!(
    q5_k_k512,
    "avx2,fma,f16c,avx512vnni,avx512vl",
    dot_u8_i8_scaled_vnni,
    scale32
);

q4_k_kernel!(q4_k_k2, "avx2,fma,f16c", dot_u8_i8_scaled, scale16);
q4_k_kernel!(
    q4_k_k512,
    "avx2,fma,f16c,avx512vnni,avx512vl",
    dot_u8_i8_scaled_vnni,
    scale32
);

/// out[i] = the F32 dot product (`f32_k512`, same bits) of the row of `n` values at
/// `x + i * stride` and `y`: one column's rows in one call, without a call, a size check and
/// a store through mul_mat's row loop per row, touching pages ahead as
/// `Features::rows_page_ahead` says.
///
/// # Safety
/// AVX-512F must be available; `y` and each of the out.len() rows hold `n` f32.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn f32_rows_k512(
    n: usize,
    x: *const u8,
    stride: usize,
    y: *const u8,
    out: &mut [f32],
) {
    // SAFETY: the caller's promise.
    let y = unsafe { std::slice::from_raw_parts(y, 4 * n) };
    let ahead = crate::simd::features::cpu().rows_page_ahead(ggml::Type::F32);
    for (i, o) in out.iter_mut().enumerate() {
        if ahead > 0 {
            crate::simd::prefetch_page_ahead(x.wrapping_add(i * stride), 4 * n, ahead);
        }
        // SAFETY: the caller's promise: row i holds n f32.
        *o = unsafe { f32_k512(n, std::slice::from_raw_parts(x.add(i * stride), 4 * n), y) };
    }
}

/// # Safety
/// AVX-512F must be available; `x` and `y` must hold `n` f32.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn f32_k512(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr() as *const f32, y.as_ptr() as *const f32);
    let mut acc = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    while i + 64 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            // SAFETY: 16 floats from i + 16k are in bounds.
            let (vx, vy) = unsafe {
                (
                    _mm512_loadu_ps(px.add(i + 16 * k)),
                    _mm512_loadu_ps(py.add(i + 16 * k)),
                )
            };
            *a = _mm512_fmadd_ps(vx, vy, *a);
        }
        i += 64;
    }
    let mut sum = reduce_f32x16(&acc);
    // ggml's leftover loop `sumf += x[i]*y[i]` as GCC compiles it for AVX-512: the products
    // of all but the last (n - i) % 4 elements are rounded apart (its vmulps over 8 or 4
    // lanes) and added one by one, the last ones fused
    let fused_from = n - (n - i) % 4;
    while i < n {
        // SAFETY: i < n.
        let (a, b) = unsafe { (*px.add(i), *py.add(i)) };
        sum = if i < fused_from {
            sum + a * b
        } else {
            a.mul_add(b, sum)
        };
        i += 1;
    }
    sum
}

/// # Safety
/// AVX-512F must be available; `x` and `y` must hold `n` halves.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn f16_k512(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    // ggml_vec_dot_f16 on AVX-512: four 16-lane f32 accumulators over 64 values per step,
    // GGML_F32Cx16_REDUCE, then the tail's products added in double
    let mut acc = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    while i + 64 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            let o = 2 * (i + 16 * k);
            // SAFETY: 16 halves from element i + 16k are in bounds.
            let (vx, vy) = unsafe {
                (
                    _mm512_cvtph_ps(_mm256_loadu_si256(px.add(o) as *const __m256i)),
                    _mm512_cvtph_ps(_mm256_loadu_si256(py.add(o) as *const __m256i)),
                )
            };
            *a = _mm512_fmadd_ps(vx, vy, *a);
        }
        i += 64;
    }
    let head = reduce_f32x16(&acc);
    if i == n {
        // no tail: ggml's double sum is the head itself (rows a multiple of 64 wide skip the
        // tail's staging: two empty copies and four zeroed vectors per row)
        return head;
    }
    // SAFETY: elements i..n of x and y are in bounds.
    if let Some(s) = unsafe { f16_tail_exact(head, px.add(2 * i), py.add(2 * i), n - i) } {
        return s;
    }
    let mut sum = head as f64;
    while i < n {
        sum += (h2f(rd16(x, 2 * i)) * h2f(rd16(y, 2 * i))) as f64;
        i += 1;
    }
    sum as f32
}

/// ggml_vec_dot_f16's tail, `head` plus the t < 64 products x[j] * y[j] added one by one in
/// double, when that sum is exact: the products of two halves are exact in f32, and when the
/// nonzero terms' exponents lie within 22 of each other every partial sum is a multiple of the
/// smallest term's unit below 2^53 of them, so the double sum is exact in any order and the
/// terms can be added as vectors. None (the caller adds them one by one) otherwise, for an
/// infinite or NaN term, or for a zero sum (whose sign the order decides).
///
/// # Safety
/// AVX-512F; x and y hold t halves; t < 64.
#[target_feature(enable = "avx512f")]
unsafe fn f16_tail_exact(head: f32, x: *const u8, y: *const u8, t: usize) -> Option<f32> {
    debug_assert!(t < 64);
    let (mut bx, mut by) = ([0u16; 64], [0u16; 64]);
    // SAFETY: the caller's promise: t halves at x and y; the buffers hold 64.
    unsafe {
        std::ptr::copy_nonoverlapping(x, bx.as_mut_ptr() as *mut u8, 2 * t);
        std::ptr::copy_nonoverlapping(y, by.as_mut_ptr() as *mut u8, 2 * t);
    }
    let abs = _mm512_set1_epi32(0x7FFF_FFFF);
    let (mut emax, mut emin) = (_mm512_set1_epi32(-1), _mm512_set1_epi32(256));
    let mut sum = _mm512_setzero_pd();
    for c in 0..t.div_ceil(16) {
        // SAFETY: 16 halves from 16c are inside the 64-element buffers.
        let p = unsafe {
            _mm512_mul_ps(
                _mm512_cvtph_ps(_mm256_loadu_si256(bx.as_ptr().add(16 * c) as *const __m256i)),
                _mm512_cvtph_ps(_mm256_loadu_si256(by.as_ptr().add(16 * c) as *const __m256i)),
            )
        };
        let bits = _mm512_castps_si512(p);
        let nz = _mm512_test_epi32_mask(bits, abs);
        let e = _mm512_srli_epi32::<23>(_mm512_and_si512(bits, abs));
        emax = _mm512_mask_max_epi32(emax, nz, emax, e);
        emin = _mm512_mask_min_epi32(emin, nz, emin, e);
        sum = _mm512_add_pd(sum, _mm512_cvtps_pd(_mm512_castps512_ps256(p)));
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(p)));
        sum = _mm512_add_pd(sum, _mm512_cvtps_pd(hi));
    }
    let (mut hi, mut lo) = (_mm512_reduce_max_epi32(emax), _mm512_reduce_min_epi32(emin));
    if head != 0.0 {
        let e = ((head.to_bits() >> 23) & 0xFF) as i32;
        (hi, lo) = (hi.max(e), lo.min(e));
    }
    if hi < 0 || hi == 255 || hi - lo > 22 {
        return None;
    }
    let s = _mm512_reduce_add_pd(sum) + head as f64;
    (s != 0.0).then_some(s as f32)
}

/// Four F16 rows times one F16 column, each row in `f16_k512`'s order (four 16-lane chains
/// over 64 values per step, the same reduction, the tail in double): the column's values are
/// converted once for the four rows (`x86_f16_rows::rows_n`).
///
/// # Safety
/// AVX-512F must be available; each a[r] and y hold n halves.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn f16_rows4_k512(
    n: usize,
    a: &[*const u8; 4],
    y: *const u8,
    out: &mut [f32; 4],
) {
    // SAFETY: the caller's promise.
    *out = unsafe { super::x86_f16_rows::rows_n::<4>(n, a, y, 0) };
}

/// GGML_F32x16_REDUCE of four accumulators: 0+2 and 1+3, then those two, then
/// _mm512_reduce_add_ps as GCC expands it (halves, quarters, then pairs).
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn reduce_f32x16(acc: &[__m512; 4]) -> f32 {
    let v = _mm512_add_ps(_mm512_add_ps(acc[0], acc[2]), _mm512_add_ps(acc[1], acc[3]));
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
    let h8 = _mm256_add_ps(hi, _mm512_castps512_ps256(v));
    let h = _mm_add_ps(_mm256_extractf128_ps::<1>(h8), _mm256_castps256_ps128(h8));
    let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)))
}

#[cfg(test)]
mod order_tests {
    use super::*;

    /// The K-quant scale broadcasts by `pshufb` (scale16 for the AVX2 kernels, scale32 for the
    /// VNNI ones, which only an AVX-512 CPU runs) equal plain broadcasts of each scale.
    #[test]
    fn pshufb_scale_broadcasts_equal_set1() {
        if !is_x86_feature_detected!("avx2") {
            return;
        }
        #[target_feature(enable = "avx2")]
        fn check() {
            let sc: [i16; 8] = [0, 1, 17, 31, 63, 5, 40, 62];
            let mut both = [0i16; 16];
            both[..8].copy_from_slice(&sc);
            both[8..].copy_from_slice(&sc);
            // SAFETY: both holds 32 bytes.
            let v = unsafe { _mm256_loadu_si256(both.as_ptr() as *const __m256i) };
            let bytes = |x: __m256i| {
                let mut b = [0u8; 32];
                // SAFETY: b holds 32 bytes.
                unsafe { _mm256_storeu_si256(b.as_mut_ptr() as *mut __m256i, x) };
                b
            };
            for (i, &s) in sc.iter().enumerate() {
                let i = i as i32;
                assert_eq!(
                    bytes(scale16(v, i)),
                    bytes(_mm256_set1_epi16(s)),
                    "scale16 {i}"
                );
                assert_eq!(
                    bytes(scale32(v, i)),
                    bytes(_mm256_set1_epi32(s as i32)),
                    "scale32 {i}"
                );
            }
        }
        // SAFETY: AVX2 was detected above.
        unsafe { check() }
    }

    /// ggml_vec_dot_f16's AVX2 order written out lane by lane: four 8-lane accumulators fused
    /// over 32 values a step, GGML_F32x8_REDUCE, then the tail added in double.
    fn f16_dot_in_ggml_order(x: &[u16], y: &[u16]) -> f32 {
        let n = x.len();
        let np = n / 32 * 32;
        let mut acc = [[0f32; 8]; 4];
        for i in (0..np).step_by(32) {
            for (j, a) in acc.iter_mut().enumerate() {
                for (l, v) in a.iter_mut().enumerate() {
                    let e = i + 8 * j + l;
                    *v = h2f(x[e]).mul_add(h2f(y[e]), *v);
                }
            }
        }
        let s: [f32; 8] =
            std::array::from_fn(|l| (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]));
        let t0: [f32; 4] = std::array::from_fn(|l| s[l] + s[l + 4]);
        let mut sum = ((t0[0] + t0[1]) + (t0[2] + t0[3])) as f64;
        for e in np..n {
            sum += (h2f(x[e]) * h2f(y[e])) as f64;
        }
        sum as f32
    }

    /// ggml_vec_dot_f16's AVX-512 order: four 16-lane accumulators fused over 64 values a
    /// step, GGML_F32x16_REDUCE (0+2, 1+3, those two, then halves, quarters, pairs), then the
    /// tail added one by one in double.
    fn f16_dot_in_ggml_order_512(x: &[u16], y: &[u16]) -> f32 {
        let n = x.len();
        let np = n / 64 * 64;
        let mut acc = [[0f32; 16]; 4];
        for i in (0..np).step_by(64) {
            for (j, a) in acc.iter_mut().enumerate() {
                for (l, v) in a.iter_mut().enumerate() {
                    let e = i + 16 * j + l;
                    *v = h2f(x[e]).mul_add(h2f(y[e]), *v);
                }
            }
        }
        let v: [f32; 16] =
            std::array::from_fn(|l| (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]));
        let h8: [f32; 8] = std::array::from_fn(|l| v[l + 8] + v[l]);
        let h4: [f32; 4] = std::array::from_fn(|l| h8[l + 4] + h8[l]);
        let mut sum = ((h4[0] + h4[2]) + (h4[1] + h4[3])) as f64;
        for e in np..n {
            sum += (h2f(x[e]) * h2f(y[e])) as f64;
        }
        sum as f32
    }

    /// The AVX-512 F16 dot product, whose tail is added as vectors where that sum is exact,
    /// gives ggml's bits on values of every scale, zeros of both signs and infinities, and takes
    /// both ways of adding the tail.
    #[test]
    fn f16_dot_512_sums_in_ggml_order() {
        if !crate::simd::features::cpu().avx512_f16() {
            eprintln!("skipped: no AVX-512F / F16C");
            return;
        }
        let mut s = 0x9e37_79b9u32;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            s
        };
        let (mut exact, mut one_by_one) = (0, 0);
        for regime in 0..5 {
            for n in [1usize, 7, 16, 31, 32, 33, 63, 64, 65, 96, 100, 127, 200] {
                for _ in 0..50 {
                    let mut half = || -> u16 {
                        let r = next();
                        let v = match regime {
                            // values in [-1, 1)
                            0 => (r >> 8) as f32 / (1u32 << 23) as f32 - 1.0,
                            // exponents from 2^-20 to 2^12
                            1 => {
                                let m = 1.0 + (r & 0xFFFF) as f32 / 65536.0;
                                let sign = if r & 0x10000 != 0 { -1.0 } else { 1.0 };
                                sign * m * 2f32.powi(((r >> 17) % 33) as i32 - 20)
                            }
                            // large and small values of both signs, whose products
                            // cancel and round: the order of the tail's sum shows
                            4 => {
                                let m = 1.0 + (r & 0x3FF) as f32 / 1024.0;
                                let sign = if r & 0x400 != 0 { -1.0 } else { 1.0 };
                                sign * m * if r & 0x800 != 0 { 2048.0 } else { 1.0 / 4096.0 }
                            }
                            // mostly zeros of both signs
                            2 => match r % 4 {
                                0 => 0.0,
                                1 => -0.0,
                                _ => (r >> 8) as f32 / (1u32 << 23) as f32 - 1.0,
                            },
                            // now and then an infinity
                            3 if r % 97 == 0 => f32::INFINITY,
                            _ => (r >> 8) as f32 / (1u32 << 22) as f32 - 2.0,
                        };
                        ggml::quants::fp32_to_fp16(v)
                    };
                    let mut x: Vec<u16> = (0..n).map(|_| half()).collect();
                    let mut y: Vec<u16> = (0..n).map(|_| half()).collect();
                    if regime == 4 {
                        // the tail's second half cancels its first but for the small
                        // products, so the rounding of large partial sums shows in the result
                        let (t0, t) = (n / 64 * 64, n % 64);
                        for j in 0..t / 2 {
                            let (a, b) = (t0 + j, t0 + t / 2 + j);
                            if h2f(x[a]).abs() > 1.0 {
                                x[b] = x[a];
                                y[b] = y[a] ^ 0x8000;
                            }
                        }
                    }
                    let bytes =
                        |v: &[u16]| v.iter().flat_map(|h| h.to_le_bytes()).collect::<Vec<u8>>();
                    let (bx, by) = (bytes(&x), bytes(&y));
                    let want = f16_dot_in_ggml_order_512(&x, &y);
                    let got = f16_avx512(n, &bx, &by);
                    assert!(
                        got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                        "regime {regime} n={n}: {got} vs {want}"
                    );
                    let t = n % 64;
                    let at = 2 * (n - t);
                    // SAFETY: AVX-512F is present; t < 64 halves at `at` in both.
                    let tail =
                        unsafe { f16_tail_exact(0.5, bx[at..].as_ptr(), by[at..].as_ptr(), t) };
                    if tail.is_some() {
                        exact += 1;
                    } else {
                        one_by_one += 1;
                    }
                }
            }
        }
        assert!(
            exact > 100 && one_by_one > 100,
            "{exact} exact, {one_by_one} one by one"
        );
    }

    #[test]
    fn f16_dot_sums_in_ggml_order() {
        if !has_avx2() {
            eprintln!("skipped: no AVX2/FMA/F16C");
            return;
        }
        let mut s = 0x1234_5678u32;
        let mut half = || {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            ggml::quants::fp32_to_fp16((s >> 8) as f32 / (1u32 << 23) as f32 - 1.0)
        };
        for n in [64usize, 100, 4096 + 7] {
            let x: Vec<u16> = (0..n).map(|_| half()).collect();
            let y: Vec<u16> = (0..n).map(|_| half()).collect();
            let bytes = |v: &[u16]| v.iter().flat_map(|h| h.to_le_bytes()).collect::<Vec<u8>>();
            let got = f16_avx2(n, &bytes(&x), &bytes(&y));
            assert_eq!(
                got.to_bits(),
                f16_dot_in_ggml_order(&x, &y).to_bits(),
                "n={n}"
            );
        }
    }
}
