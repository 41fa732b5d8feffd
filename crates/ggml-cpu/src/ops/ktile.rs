//! K-quant weights (Q2_K to Q6_K) times Q8_K activations in the float order of the kernels
//! llama.cpp runs for them on x86, so results (and perplexities) agree to the last bit:
//!
//! - 2-D Q4_K weights with rows % 8 == 0 are repacked at load (q4_K_8x8_q8_K); the first
//!   ne11 - ne11 % 4 activation columns of a plane go through its gemm, which fuses the exact
//!   integer sums of every 64 values into two accumulators (codes x scales, and mins x
//!   activation sums), the other columns through its gemv, which does the same once per
//!   256-value block; the result is their difference.
//! - Other K-quant weights times batches of >= 8 columns go through the tiled K-quant path:
//!   per block r = f32(S) * dx, minus dmin * f32(M) in one rounding (Q2_K/Q4_K/Q5_K), fused
//!   times dy into the output (llama.cpp's tiled/tiled-kernel.cpp: S and M are the exact sums
//!   over the block's subblocks of scale x code sum and min x activation sum; Q2_K is its
//!   SUBBLK = 16, HAS_MIN, BIAS = 0 instance, with a scale and a min per 16 values).
//!
//! The integer parts are exact in every kernel (no i16 saturation for these code ranges), so
//! only the float steps above decide the result; `block_sums_ref` is their scalar reference.

use super::gemm::RM;
#[cfg(test)]
use super::gemm::RN;
use ggml::Type;

/// How one output cell accumulates, after the llama.cpp kernel that computes it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Order {
    /// q4_K_8x8 gemm: per 64 values, fma(f32(S), dx*dy, acc) and fma(f32(M), dmin*dy, acc_min).
    RepackGemm,
    /// q4_K_8x8 gemv: the same once per block of 256 values.
    RepackGemv,
    /// Tiled path: per block r = f32(S)*dx; r = fma(-dmin, f32(M), r); acc = fma(r, dy, acc).
    Tiled,
}

/// A matmul whose weight follows one of the orders above.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Plan {
    pub ty: Type,
    repack: bool,
}

impl Plan {
    /// The order of activation column `i11` of a plane of `ne11` columns.
    pub(crate) fn order(&self, i11: usize, ne11: usize) -> Order {
        match self.repack {
            true if i11 < ne11 - ne11 % 4 => Order::RepackGemm,
            true => Order::RepackGemv,
            false => Order::Tiled,
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn available() -> bool {
    // F16C converts the block scales (`half`)
    let f = crate::simd::features::cpu();
    f.avx2_fma() && f.f16c()
}

#[cfg(not(target_arch = "x86_64"))]
fn available() -> bool {
    false
}

/// Which order llama.cpp (x86, AVX2) uses for a weight of type `ty` with `rows` rows
/// (`repacked`: held in CPU_REPACK) times `ne11` activation columns per plane of type
/// `src1`; None: the plain dot product, as everywhere else.
pub(crate) fn plan(ty: Type, rows: usize, repacked: bool, ne11: usize, src1: Type) -> Option<Plan> {
    let kquant = matches!(
        ty,
        Type::Q2K | Type::Q3K | Type::Q4K | Type::Q5K | Type::Q6K
    );
    if !available() || !kquant {
        return None;
    }
    if ty == Type::Q4K && rows.is_multiple_of(8) && repacked && src1 == Type::F32 {
        return Some(Plan { ty, repack: true });
    }
    let tiled = ne11 >= 8 && matches!(src1, Type::F32 | Type::Q8K);
    tiled.then_some(Plan { ty, repack: false })
}

/// Bytes of one block of `ty`.
pub(crate) fn block_bytes(ty: Type) -> usize {
    match ty {
        Type::Q2K => 84,
        Type::Q3K => 110,
        Type::Q4K => 144,
        Type::Q5K => 176,
        _ => 210,
    }
}

const Q8K_BYTES: usize = 292;

/// One output cell's accumulators: the scalar reference of the kernels' float steps.
#[cfg(test)]
#[derive(Clone, Copy, Default)]
struct Cell {
    acc: f32,
    acc_min: f32,
}

#[cfg(test)]
impl Cell {
    /// Adds one block: `s`/`m` are the exact integer sums per 64 values; `has_min`: the type
    /// has mins (Q2_K, Q4_K, Q5_K).
    #[allow(clippy::too_many_arguments)]
    fn step(
        &mut self,
        o: Order,
        has_min: bool,
        s: &[i32; 4],
        m: &[i32; 4],
        dx: f32,
        dmin: f32,
        dy: f32,
    ) {
        match o {
            Order::RepackGemm => {
                let (ds, dm) = (dx * dy, dmin * dy);
                for p in 0..4 {
                    self.acc = (s[p] as f32).mul_add(ds, self.acc);
                    self.acc_min = (m[p] as f32).mul_add(dm, self.acc_min);
                }
            }
            Order::RepackGemv => {
                let (ss, mm) = (s.iter().sum::<i32>(), m.iter().sum::<i32>());
                self.acc = (ss as f32).mul_add(dx * dy, self.acc);
                self.acc_min = (mm as f32).mul_add(dmin * dy, self.acc_min);
            }
            Order::Tiled => {
                let mut r = s.iter().sum::<i32>() as f32 * dx;
                if has_min {
                    r = (-dmin).mul_add(m.iter().sum::<i32>() as f32, r);
                }
                self.acc = r.mul_add(dy, self.acc);
            }
        }
    }

    fn result(&self) -> f32 {
        self.acc - self.acc_min
    }
}

fn half(p: &[u8], o: usize) -> f32 {
    crate::fp::f16_to_f32(u16::from_le_bytes([p[o], p[o + 1]]))
}

/// Scales and mins of a Q4_K/Q5_K block from its 12 packed bytes.
pub(crate) fn k4_scales(sc: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut scales = [0u8; 8];
    let mut mins = [0u8; 8];
    for j in 0..4 {
        scales[j] = sc[j] & 63;
        mins[j] = sc[j + 4] & 63;
        scales[j + 4] = (sc[j + 8] & 0x0F) | ((sc[j] >> 6) << 4);
        mins[j + 4] = (sc[j + 8] >> 4) | ((sc[j + 4] >> 6) << 4);
    }
    (scales, mins)
}

/// Q3_K's 16 signed 6-bit scales from its 12 packed bytes (ggml's aux decode, minus 32).
fn k3_scales(s: &[u8]) -> [i32; 16] {
    std::array::from_fn(|j| {
        let lo = if j < 8 { s[j] & 0x0F } else { s[j - 8] >> 4 };
        let hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        (lo | (hi << 4)) as i32 - 32
    })
}

/// Types without mins store their codes biased: Q6_K by 32, Q3_K by 4 (log2 of it here).
fn bias_shift(ty: Type) -> i32 {
    if ty == Type::Q3K {
        2
    } else {
        5
    }
}

/// Whether blocks of `ty` carry mins (a dmin and a min per subblock).
pub(crate) fn has_min(ty: Type) -> bool {
    matches!(ty, Type::Q2K | Type::Q4K | Type::Q5K)
}

/// The 256 unsigned codes of a block and its scales and mins per 16 values (Q4_K/Q5_K repeat
/// each of their 8 scales and mins twice) and the code bias subtracted from every code (32 for
/// Q6_K, 4 for Q3_K).
pub(crate) fn codes_ref(ty: Type, x: &[u8]) -> ([u8; 256], [i32; 16], [i32; 16], i32) {
    let mut q = [0u8; 256];
    let mut sc16 = [0i32; 16];
    let mut mins = [0i32; 16];
    match ty {
        Type::Q2K => {
            // element 128h + 32g + l: bits 2g..2g + 2 of qs[32h + l]; scale byte j holds the
            // scale (low nibble) and the min (high nibble) of values 16j..16j + 16
            let qs = &x[16..80];
            for h in 0..2 {
                for g in 0..4 {
                    for l in 0..32 {
                        q[128 * h + 32 * g + l] = (qs[32 * h + l] >> (2 * g)) & 3;
                    }
                }
            }
            for j in 0..16 {
                sc16[j] = (x[j] & 0x0F) as i32;
                mins[j] = (x[j] >> 4) as i32;
            }
            (q, sc16, mins, 0)
        }
        Type::Q4K | Type::Q5K => {
            let (s, m) = k4_scales(&x[4..16]);
            let (qs, qh) = if ty == Type::Q4K {
                (&x[16..144], None)
            } else {
                (&x[48..176], Some(&x[16..48]))
            };
            for g in 0..4 {
                for l in 0..32 {
                    let b = qs[32 * g + l];
                    let (mut lo, mut hi) = (b & 0x0F, b >> 4);
                    if let Some(qh) = qh {
                        lo |= ((qh[l] >> (2 * g)) & 1) << 4;
                        hi |= ((qh[l] >> (2 * g + 1)) & 1) << 4;
                    }
                    q[64 * g + l] = lo;
                    q[64 * g + 32 + l] = hi;
                }
            }
            for j in 0..8 {
                sc16[2 * j] = s[j] as i32;
                sc16[2 * j + 1] = s[j] as i32;
                mins[2 * j] = m[j] as i32;
                mins[2 * j + 1] = m[j] as i32;
            }
            (q, sc16, mins, 0)
        }
        Type::Q3K => {
            let (hm, qs) = (&x[0..32], &x[32..96]);
            for h in 0..2 {
                for g in 0..4 {
                    for l in 0..32 {
                        let low2 = (qs[32 * h + l] >> (2 * g)) & 3;
                        let high = (hm[l] >> (4 * h + g)) & 1;
                        q[128 * h + 32 * g + l] = low2 | (high << 2);
                    }
                }
            }
            sc16 = k3_scales(&x[96..108]);
            (q, sc16, mins, 4)
        }
        _ => {
            let (ql, qh) = (&x[0..128], &x[128..192]);
            for n in 0..2 {
                for l in 0..32 {
                    let h = qh[32 * n + l];
                    let (a, b) = (ql[64 * n + l], ql[64 * n + 32 + l]);
                    q[128 * n + l] = (a & 0x0F) | ((h & 3) << 4);
                    q[128 * n + 32 + l] = (b & 0x0F) | (((h >> 2) & 3) << 4);
                    q[128 * n + 64 + l] = (a >> 4) | (((h >> 4) & 3) << 4);
                    q[128 * n + 96 + l] = (b >> 4) | (((h >> 6) & 3) << 4);
                }
            }
            for (j, s) in sc16.iter_mut().enumerate() {
                *s = x[192 + j] as i8 as i32;
            }
            (q, sc16, mins, 32)
        }
    }
}

#[cfg(test)]
/// Exact integer parts of one block of `ty` times one Q8_K block, per 64 values: the codes
/// times the activations with the subblock scales applied (S), and the subblock mins times
/// the activation sums (M, zero for Q3_K and Q6_K).
pub(crate) fn block_sums_ref(ty: Type, x: &[u8], y: &[u8]) -> ([i32; 4], [i32; 4]) {
    let (q, sc16, mins, bias) = codes_ref(ty, x);
    let yq = |i: usize| y[4 + i] as i8 as i32;
    let bsum = |j: usize| i16::from_le_bytes([y[260 + 2 * j], y[261 + 2 * j]]) as i32;
    let mut s = [0i32; 4];
    let mut m = [0i32; 4];
    for j in 0..16 {
        let raw: i32 = (16 * j..16 * j + 16)
            .map(|i| (q[i] as i32 - bias) * yq(i))
            .sum();
        s[j / 4] += sc16[j] * raw;
    }
    for j in 0..16 {
        m[j / 4] += mins[j] * bsum(j);
    }
    (s, m)
}

/// (dx, dmin) of a block of `ty`.
pub(crate) fn block_scales(ty: Type, x: &[u8]) -> (f32, f32) {
    match ty {
        Type::Q2K => (half(x, 80), half(x, 82)),
        Type::Q4K | Type::Q5K => (half(x, 0), half(x, 2)),
        Type::Q3K => (half(x, 108), 0.0),
        _ => (half(x, 208), 0.0),
    }
}

#[cfg(test)]
/// One weight row times one Q8_K column over `nb` blocks in `order` (scalar reference).
pub(crate) fn dot_ref(ty: Type, order: Order, nb: usize, x: &[u8], y: &[u8]) -> f32 {
    let (bx, by) = (block_bytes(ty), Q8K_BYTES);
    let mut cell = Cell::default();
    for ib in 0..nb {
        let (xb, yb) = (&x[bx * ib..bx * (ib + 1)], &y[by * ib..by * (ib + 1)]);
        let (s, m) = block_sums_ref(ty, xb, yb);
        let (dx, dmin) = block_scales(ty, xb);
        let dy = f32::from_le_bytes([yb[0], yb[1], yb[2], yb[3]]);
        cell.step(order, has_min(ty), &s, &m, dx, dmin, dy);
    }
    cell.result()
}

/// Columns per K-quant tile: each unpacked weight block serves this many columns.
pub(crate) const COLS: usize = 6;

/// out[r * C + c] = row a[r] times column b[c] over `nb` blocks, column c in `orders[c]`.
///
/// # Safety
/// `plan` came from `plan()`; each a[r] points at nb blocks of `plan.ty`, each b[c] at nb
/// Q8_K blocks; out holds RM * C floats.
pub(crate) unsafe fn tile<const C: usize>(
    plan: Plan,
    nb: usize,
    a: &[*const u8; RM],
    b: &[*const u8; C],
    orders: &[Order; C],
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    {
        // Q3_K / Q5_K / Q6_K columns all in the tiled order: the AVX-512 VNNI tiles (same bits)
        if orders.iter().all(|o| *o == Order::Tiled) && crate::dot::x86_k512::available() {
            use crate::dot::x86_k512 as k512;
            let kernel = match plan.ty {
                Type::Q3K => Some(k512::q3_k_gemm4::<C> as unsafe fn(_, _, _, _)),
                Type::Q5K => Some(k512::q5_k_gemm4::<C> as unsafe fn(_, _, _, _)),
                Type::Q6K => Some(k512::q6_k_gemm4::<C> as unsafe fn(_, _, _, _)),
                _ => None,
            };
            if let Some(kernel) = kernel {
                // SAFETY: as above.
                unsafe { kernel(nb, a, b, out) };
                return;
            }
        }
        // SAFETY: plan() checked the CPU features; the caller vouches for the pointers.
        unsafe { x86::run::<RM, C>(plan.ty, nb, a, b, orders, out) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (plan, nb, a, b, orders, out);
        unreachable!("plan() is None off x86");
    }
}

/// One weight row times one Q8_K column over `nb` blocks in `order`.
///
/// # Safety
/// As for `tile`, with one row and one column.
pub(crate) unsafe fn dot(plan: Plan, order: Order, nb: usize, x: *const u8, y: *const u8) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        let mut out = [0.0f32; 1];
        // SAFETY: as for tile.
        unsafe { x86::run::<1, 1>(plan.ty, nb, &[x], &[y], &[order], &mut out) };
        out[0]
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (plan, order, nb, x, y);
        unreachable!("plan() is None off x86");
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{bias_shift, block_bytes, has_min, k3_scales, k4_scales, Order, Q8K_BYTES};
    use ggml::Type;
    use std::arch::x86_64::*;

    #[inline(always)]
    unsafe fn load(p: *const u8) -> __m256i {
        _mm256_loadu_si256(p as *const __m256i)
    }

    #[inline(always)]
    unsafe fn half(p: *const u8) -> f32 {
        // (`available` found F16C)
        crate::fp::f16c_at(p)
    }

    /// A Q8_K block's scale and activation sums per 16 values (16 x i16).
    struct Col {
        p: *const u8,
        dy: f32,
        bs16: __m256i,
    }

    #[inline(always)]
    unsafe fn col(y: *const u8) -> Col {
        Col {
            p: y,
            dy: (y as *const f32).read_unaligned(),
            bs16: load(y.add(260)),
        }
    }

    /// A block unpacked once for several columns: 8 vectors of 32 unsigned codes (values
    /// 32v..32v+32) with a 16-bit scale per vector half; Q2_K/Q4_K/Q5_K mins per 16 values as
    /// 16 x i16, Q6_K and Q3_K scales as 16 x i16 (their codes carry a +32 / +4 bias).
    struct Row {
        codes: [__m256i; 8],
        scales: [__m256i; 8],
        mins16: __m256i,
        sc16: __m256i,
        dx: f32,
        dmin: f32,
    }

    #[inline(always)]
    unsafe fn unpack(ty: Type, x: *const u8) -> Row {
        let m4 = _mm256_set1_epi8(0x0F);
        let mut codes = [_mm256_setzero_si256(); 8];
        let mut scales = [_mm256_setzero_si256(); 8];
        match ty {
            Type::Q4K | Type::Q5K => {
                let (s, m) = k4_scales(std::slice::from_raw_parts(x.add(4), 12));
                let (qs, qh) = if ty == Type::Q4K {
                    (x.add(16), None)
                } else {
                    (x.add(48), Some(load(x.add(16))))
                };
                let one = _mm256_set1_epi8(1);
                for g in 0..4 {
                    let q = load(qs.add(32 * g));
                    let mut lo = _mm256_and_si256(q, m4);
                    let mut hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                    if let Some(h) = qh {
                        let sh = |n: i32| _mm256_srl_epi16(h, _mm_cvtsi32_si128(n));
                        let bit = |v: __m256i| _mm256_slli_epi16(_mm256_and_si256(v, one), 4);
                        lo = _mm256_or_si256(lo, bit(sh(2 * g as i32)));
                        hi = _mm256_or_si256(hi, bit(sh(2 * g as i32 + 1)));
                    }
                    codes[2 * g] = lo;
                    codes[2 * g + 1] = hi;
                }
                for j in 0..8 {
                    scales[j] = _mm256_set1_epi16(s[j] as i16);
                }
                let m2: [u8; 16] = std::array::from_fn(|j| m[j / 2]);
                let mins16 = _mm256_cvtepu8_epi16(_mm_loadu_si128(m2.as_ptr() as *const __m128i));
                Row {
                    codes,
                    scales,
                    mins16,
                    sc16: _mm256_setzero_si256(),
                    dx: half(x),
                    dmin: half(x.add(2)),
                }
            }
            Type::Q2K => {
                let m3 = _mm256_set1_epi8(0x03);
                for h in 0..2 {
                    let qs = load(x.add(16 + 32 * h));
                    for g in 0..4 {
                        let sh = _mm_cvtsi32_si128(2 * g as i32);
                        codes[4 * h + g] = _mm256_and_si256(_mm256_srl_epi16(qs, sh), m3);
                    }
                }
                let sm = _mm_loadu_si128(x as *const __m128i);
                let mn8 = _mm_and_si128(_mm_srli_epi16(sm, 4), _mm_set1_epi8(0x0F));
                for (v, sv) in scales.iter_mut().enumerate() {
                    let (a, b) = (*x.add(2 * v) & 0x0F, *x.add(2 * v + 1) & 0x0F);
                    *sv = _mm256_set_m128i(_mm_set1_epi16(b as i16), _mm_set1_epi16(a as i16));
                }
                Row {
                    codes,
                    scales,
                    mins16: _mm256_cvtepu8_epi16(mn8),
                    sc16: _mm256_setzero_si256(),
                    dx: half(x.add(80)),
                    dmin: half(x.add(82)),
                }
            }
            Type::Q3K => {
                let m3 = _mm256_set1_epi8(0x03);
                let one = _mm256_set1_epi8(1);
                let hm = load(x);
                for h in 0..2 {
                    let qs = load(x.add(32 + 32 * h));
                    for g in 0..4 {
                        let sh = |v: __m256i, n: i32| _mm256_srl_epi16(v, _mm_cvtsi32_si128(n));
                        let low2 = _mm256_and_si256(sh(qs, 2 * g as i32), m3);
                        let high = _mm256_and_si256(sh(hm, (4 * h + g) as i32), one);
                        codes[4 * h + g] = _mm256_or_si256(low2, _mm256_slli_epi16(high, 2));
                    }
                }
                let sc = k3_scales(std::slice::from_raw_parts(x.add(96), 12));
                let sc8: [i8; 16] = std::array::from_fn(|j| sc[j] as i8);
                let sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(sc8.as_ptr() as *const __m128i));
                for (v, sv) in scales.iter_mut().enumerate() {
                    let (a, b) = (sc[2 * v] as i16, sc[2 * v + 1] as i16);
                    *sv = _mm256_set_m128i(_mm_set1_epi16(b), _mm_set1_epi16(a));
                }
                Row {
                    codes,
                    scales,
                    mins16: _mm256_setzero_si256(),
                    sc16,
                    dx: half(x.add(108)),
                    dmin: 0.0,
                }
            }
            _ => {
                let m3 = _mm256_set1_epi8(0x03);
                for n in 0..2 {
                    let ql0 = load(x.add(64 * n));
                    let ql1 = load(x.add(64 * n + 32));
                    let qh = load(x.add(128 + 32 * n));
                    let hi = |s: i32| {
                        let h = _mm256_srl_epi16(qh, _mm_cvtsi32_si128(s));
                        _mm256_slli_epi16(_mm256_and_si256(h, m3), 4)
                    };
                    codes[4 * n] = _mm256_or_si256(_mm256_and_si256(ql0, m4), hi(0));
                    codes[4 * n + 1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), hi(2));
                    codes[4 * n + 2] =
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), hi(4));
                    codes[4 * n + 3] =
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), hi(6));
                }
                let sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(x.add(192) as *const __m128i));
                for (v, sv) in scales.iter_mut().enumerate() {
                    let (a, b) = (*x.add(192 + 2 * v) as i8, *x.add(193 + 2 * v) as i8);
                    *sv = _mm256_set_m128i(_mm_set1_epi16(b as i16), _mm_set1_epi16(a as i16));
                }
                Row {
                    codes,
                    scales,
                    mins16: _mm256_setzero_si256(),
                    sc16,
                    dx: half(x.add(208)),
                    dmin: 0.0,
                }
            }
        }
    }

    /// The scaled code sums of an unpacked block times a Q8_K block, one 8-lane vector per 64
    /// values (the Q6_K / Q3_K code bias not yet taken off).
    #[inline(always)]
    unsafe fn pair_vectors(row: &Row, y: &Col) -> [__m256i; 4] {
        let mut p = [_mm256_setzero_si256(); 4];
        for (c, pc) in p.iter_mut().enumerate() {
            let v0 = _mm256_maddubs_epi16(row.codes[2 * c], load(y.p.add(4 + 64 * c)));
            let v1 = _mm256_maddubs_epi16(row.codes[2 * c + 1], load(y.p.add(36 + 64 * c)));
            *pc = _mm256_add_epi32(
                _mm256_madd_epi16(v0, row.scales[2 * c]),
                _mm256_madd_epi16(v1, row.scales[2 * c + 1]),
            );
        }
        p
    }

    /// Four rows' 4-lane vectors transposed: out[j] lane r = v[r] lane j.
    #[inline(always)]
    unsafe fn transpose4(v: &[__m128i; 4]) -> [__m128i; 4] {
        let t0 = _mm_unpacklo_epi32(v[0], v[1]);
        let t1 = _mm_unpacklo_epi32(v[2], v[3]);
        let t2 = _mm_unpackhi_epi32(v[0], v[1]);
        let t3 = _mm_unpackhi_epi32(v[2], v[3]);
        [
            _mm_unpacklo_epi64(t0, t1),
            _mm_unpackhi_epi64(t0, t1),
            _mm_unpacklo_epi64(t2, t3),
            _mm_unpackhi_epi64(t2, t3),
        ]
    }

    /// Up to four rows times C columns: each column's cells sit in the lanes (one per row) of
    /// 4-lane float accumulators, so every float step of a row's chain is one vector op and
    /// the integer sums of four rows are reduced together. Lane r does exactly the scalar
    /// steps of `Cell::step` for row r.
    ///
    /// # Safety
    /// AVX2 and FMA are available; each a[r] covers nb blocks of `ty`, each b[c] nb Q8_K
    /// blocks; R <= 4.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn run<const R: usize, const C: usize>(
        ty: Type,
        nb: usize,
        a: &[*const u8; R],
        b: &[*const u8; C],
        orders: &[Order; C],
        out: &mut [f32],
    ) {
        assert!(R <= 4);
        let bx = block_bytes(ty);
        let has_min = has_min(ty);
        let shift = _mm_cvtsi32_si128(bias_shift(ty));
        let mut acc = [_mm_setzero_ps(); C];
        let mut acc_min = [_mm_setzero_ps(); C];
        let zero = _mm256_setzero_si256();
        for ib in 0..nb {
            let cols: [Col; C] = std::array::from_fn(|c| col(b[c].add(Q8K_BYTES * ib)));
            let rows: [Row; R] = std::array::from_fn(|r| unpack(ty, a[r].add(bx * ib)));
            let lanes = |f: &dyn Fn(&Row) -> f32| {
                let mut v = [0.0f32; 4];
                for (o, row) in v.iter_mut().zip(&rows) {
                    *o = f(row);
                }
                _mm_loadu_ps(v.as_ptr())
            };
            let (dx, dmin) = (lanes(&|r| r.dx), lanes(&|r| r.dmin));
            for c in 0..C {
                let y = &cols[c];
                let dy = _mm_set1_ps(y.dy);
                let mut p = [[zero; 4]; 4];
                let mut m4 = [_mm_setzero_si128(); 4];
                for r in 0..R {
                    p[r] = pair_vectors(&rows[r], y);
                    // lane l: the mins term of values 64l..64l + 64 (min x activation sum per
                    // 16 values, four of them)
                    m4[r] = sum4(_mm256_madd_epi16(rows[r].mins16, y.bs16));
                }
                // Q6_K / Q3_K store codes +32 / +4: bias x (scale x activation sum) per 16
                // values comes off
                let mut bias = [zero; 4];
                if !has_min {
                    for r in 0..R {
                        bias[r] = _mm256_madd_epi16(rows[r].sc16, y.bs16);
                    }
                }
                if orders[c] == Order::RepackGemm {
                    let (ds, dm) = (_mm_mul_ps(dx, dy), _mm_mul_ps(dmin, dy));
                    let mt = transpose4(&m4);
                    // lane pair (2p, 2p + 1) of the bias vectors covers values 64p..64p + 64
                    let bt = if has_min {
                        [_mm_setzero_si128(); 4]
                    } else {
                        transpose4(&bias.map(|v| sum4(v)))
                    };
                    for pi in 0..4 {
                        let mut sp = store4_v(&[p[0][pi], p[1][pi], p[2][pi], p[3][pi]]);
                        if !has_min {
                            sp = _mm_sub_epi32(sp, _mm_sll_epi32(bt[pi], shift));
                        }
                        acc[c] = _mm_fmadd_ps(_mm_cvtepi32_ps(sp), ds, acc[c]);
                        acc_min[c] = _mm_fmadd_ps(_mm_cvtepi32_ps(mt[pi]), dm, acc_min[c]);
                    }
                    continue;
                }
                let t: [__m256i; 4] = std::array::from_fn(|r| {
                    let s = _mm256_add_epi32(
                        _mm256_add_epi32(p[r][0], p[r][1]),
                        _mm256_add_epi32(p[r][2], p[r][3]),
                    );
                    _mm256_sub_epi32(s, _mm256_sll_epi32(bias[r], shift))
                });
                let st = _mm_cvtepi32_ps(store4_v(&t));
                let mt = _mm_cvtepi32_ps(_mm_hadd_epi32(
                    _mm_hadd_epi32(m4[0], m4[1]),
                    _mm_hadd_epi32(m4[2], m4[3]),
                ));
                if orders[c] == Order::RepackGemv {
                    acc[c] = _mm_fmadd_ps(st, _mm_mul_ps(dx, dy), acc[c]);
                    acc_min[c] = _mm_fmadd_ps(mt, _mm_mul_ps(dmin, dy), acc_min[c]);
                } else {
                    let mut rv = _mm_mul_ps(st, dx);
                    if has_min {
                        rv = _mm_fnmadd_ps(dmin, mt, rv);
                    }
                    acc[c] = _mm_fmadd_ps(rv, dy, acc[c]);
                }
            }
        }
        for c in 0..C {
            let mut v = [0.0f32; 4];
            _mm_storeu_ps(v.as_mut_ptr(), _mm_sub_ps(acc[c], acc_min[c]));
            for r in 0..R {
                out[r * C + c] = v[r];
            }
        }
    }

    /// Lane pairs (2l, 2l + 1) of an 8-lane vector summed into lane l.
    #[inline(always)]
    unsafe fn sum4(v: __m256i) -> __m128i {
        let h = _mm256_hadd_epi32(v, v);
        _mm256_castsi256_si128(_mm256_permute4x64_epi64::<0b1000>(h))
    }

    /// The four 8-lane vectors' totals as one 4-lane vector.
    #[inline(always)]
    unsafe fn store4_v(p: &[__m256i; 4]) -> __m128i {
        let h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
        _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1))
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
/// `n` rows of `ty`, k values each, quantized from a hash of (value, row + seed): test data
/// for the K-quant kernels.
pub(crate) fn quant_rows(ty: Type, k: usize, n: usize, seed: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|r| {
            let v: Vec<f32> = (0..k)
                .map(|i| {
                    let h = (i * 2654435761 + (r + seed) * 40503) % 1000;
                    (h as f32 - 500.0) / 97.0
                })
                .collect();
            let mut out = vec![0u8; ty.row_size(k as i64)];
            ggml::quants::quantize_row_ref(ty, &v, &mut out);
            out
        })
        .collect()
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn tiles_and_dots_equal_the_scalar_reference_bit_for_bit() {
        if !available() {
            return;
        }
        let k = 256 * 3;
        let nb = k / 256;
        for ty in [Type::Q2K, Type::Q3K, Type::Q4K, Type::Q5K, Type::Q6K] {
            let rows = quant_rows(ty, k, RM, 1);
            let cols = quant_rows(Type::Q8K, k, RN, 7);
            let a: [*const u8; RM] = std::array::from_fn(|r| rows[r].as_ptr());
            let b: [*const u8; RN] = std::array::from_fn(|c| cols[c].as_ptr());
            let plan = Plan { ty, repack: false };
            for orders in [
                [Order::Tiled; RN],
                [Order::RepackGemm, Order::RepackGemv, Order::RepackGemm],
            ] {
                let mut out = [0.0f32; RM * RN];
                // SAFETY: available() holds; pointers cover nb blocks.
                unsafe { tile(plan, nb, &a, &b, &orders, &mut out) };
                for r in 0..RM {
                    for c in 0..RN {
                        let want = dot_ref(ty, orders[c], nb, &rows[r], &cols[c]);
                        assert_eq!(out[r * RN + c].to_bits(), want.to_bits(), "{ty} {r} {c}");
                        // SAFETY: as above.
                        let one = unsafe { dot(plan, orders[c], nb, a[r], b[c]) };
                        assert_eq!(one.to_bits(), want.to_bits(), "{ty} dot {r} {c}");
                    }
                }
            }
        }
    }

    #[test]
    fn q4_k_gemv8_equals_the_repacked_gemv_order_bit_for_bit() {
        if !crate::dot::x86_k512::available() {
            eprintln!("skipped: no AVX-512 VNNI");
            return;
        }
        let plan = Plan {
            ty: Type::Q4K,
            repack: true,
        };
        for (k, seed) in [(256, 1), (256 * 11, 5)] {
            let nb = k / 256;
            let rows = quant_rows(Type::Q4K, k, 8, seed);
            let col = &quant_rows(Type::Q8K, k, 1, seed + 7)[0];
            let a: [*const u8; 8] = std::array::from_fn(|r| rows[r].as_ptr());
            let mut out = [0.0f32; 8];
            // SAFETY: available() holds; every row covers nb blocks, col nb Q8_K blocks.
            unsafe { crate::dot::x86_k512::q4_k_gemv8(nb, &a, col.as_ptr(), &mut out) };
            for r in 0..8 {
                let want = dot_ref(Type::Q4K, Order::RepackGemv, nb, &rows[r], col);
                assert_eq!(out[r].to_bits(), want.to_bits(), "row {r} k {k}");
                // SAFETY: as above.
                let one = unsafe { dot(plan, Order::RepackGemv, nb, a[r], col.as_ptr()) };
                assert_eq!(out[r].to_bits(), one.to_bits(), "row {r} k {k} (dot)");
            }
        }
    }

    /// The AVX-512 tile of `ty` (Q3_K, Q5_K, Q6_K) against the 256-bit tile and the scalar
    /// reference of the tiled order, bit for bit, on random data of several sizes.
    fn tiled_k512_equals_the_tiled_order(ty: Type) {
        if !crate::dot::x86_k512::available() {
            eprintln!("skipped: no AVX-512 VNNI");
            return;
        }
        const C: usize = 6;
        for (k, seed) in [(256, 3), (256 * 3, 8), (256 * 9, 6)] {
            let nb = k / 256;
            let rows = quant_rows(ty, k, RM, seed);
            let cols = quant_rows(Type::Q8K, k, C, seed + 13);
            let a: [*const u8; RM] = std::array::from_fn(|r| rows[r].as_ptr());
            let b: [*const u8; C] = std::array::from_fn(|c| cols[c].as_ptr());
            let mut out = [0.0f32; RM * C];
            let kernel = match ty {
                Type::Q3K => crate::dot::x86_k512::q3_k_gemm4::<C>,
                Type::Q5K => crate::dot::x86_k512::q5_k_gemm4::<C>,
                _ => crate::dot::x86_k512::q6_k_gemm4::<C>,
            };
            // SAFETY: available() holds; pointers cover nb blocks; out holds RM * C floats.
            unsafe { kernel(nb, &a, &b, &mut out) };
            let mut old = [0.0f32; RM * C];
            // SAFETY: as above (AVX2 and FMA come with AVX-512 here).
            unsafe { x86::run::<RM, C>(ty, nb, &a, &b, &[Order::Tiled; C], &mut old) };
            for r in 0..RM {
                for c in 0..C {
                    let want = dot_ref(ty, Order::Tiled, nb, &rows[r], &cols[c]);
                    let got = out[r * C + c].to_bits();
                    assert_eq!(got, want.to_bits(), "{ty} {r} {c} k {k}");
                    assert_eq!(got, old[r * C + c].to_bits(), "{ty} {r} {c} k {k}");
                }
            }
        }
    }

    #[test]
    fn q6_k_gemm4_equals_the_tiled_order_bit_for_bit() {
        tiled_k512_equals_the_tiled_order(Type::Q6K);
    }

    #[test]
    fn q5_k_gemm4_equals_the_tiled_order_bit_for_bit() {
        tiled_k512_equals_the_tiled_order(Type::Q5K);
    }

    #[test]
    fn q3_k_gemm4_equals_the_tiled_order_bit_for_bit() {
        tiled_k512_equals_the_tiled_order(Type::Q3K);
    }

    /// Single-thread speed of the AVX-512 K-quant tiles on a 1.1B-model-like shape (256 rows,
    /// k = 2048, 18 columns): `cargo test --release -p ggml-cpu ktile_speed -- --ignored
    /// --nocapture`.
    #[test]
    #[ignore]
    fn ktile_speed() {
        if !crate::dot::x86_k512::available() {
            eprintln!("skipped: no AVX-512 VNNI");
            return;
        }
        const C: usize = 18;
        let (k, n) = (2048, 256);
        let nb = k / 256;
        let cols = quant_rows(Type::Q8K, k, C, 5);
        let b: [*const u8; C] = std::array::from_fn(|c| cols[c].as_ptr());
        for ty in [Type::Q2K, Type::Q3K, Type::Q4K, Type::Q5K, Type::Q6K] {
            let rows = quant_rows(ty, k, n, 1);
            let order = if ty == Type::Q4K {
                Order::RepackGemm
            } else {
                Order::Tiled
            };
            let plan = Plan {
                ty,
                repack: ty == Type::Q4K,
            };
            let mut out = [0.0f32; RM * C];
            let reps = 40;
            let t = std::time::Instant::now();
            for _ in 0..reps {
                for r0 in (0..n).step_by(RM) {
                    let a: [*const u8; RM] = std::array::from_fn(|r| rows[r0 + r].as_ptr());
                    // SAFETY: available() holds; pointers cover nb blocks.
                    unsafe { tile(plan, nb, &a, &b, &[order; C], &mut out) };
                }
            }
            let s = t.elapsed().as_secs_f64();
            let gf = 2.0 * (k * n * C * reps) as f64 / s / 1e9;
            eprintln!("{ty}: {gf:.1} GFLOP/s ({})", out[0]);
        }
    }

    #[test]
    fn reference_sums_equal_the_dequantized_product() {
        // S and M scaled by the block scales give the float dot product of the dequantized
        // rows (up to rounding): checks the code, scale and min layouts of each type
        let k = 256;
        for ty in [Type::Q2K, Type::Q3K, Type::Q4K, Type::Q5K, Type::Q6K] {
            let x = &quant_rows(ty, k, 1, 3)[0];
            let y = &quant_rows(Type::Q8K, k, 1, 5)[0];
            let mut xf = vec![0.0f32; k];
            let mut yf = vec![0.0f32; k];
            ggml::quants::dequantize_row(ty, x, &mut xf);
            ggml::quants::dequantize_row(Type::Q8K, y, &mut yf);
            let want: f64 = xf.iter().zip(&yf).map(|(a, b)| *a as f64 * *b as f64).sum();
            let (s, m) = block_sums_ref(ty, x, y);
            let (dx, dmin) = block_scales(ty, x);
            let dy = f32::from_le_bytes([y[0], y[1], y[2], y[3]]) as f64;
            let got = dy
                * (dx as f64 * s.iter().sum::<i32>() as f64
                    - dmin as f64 * m.iter().sum::<i32>() as f64);
            assert!(
                (got - want).abs() <= 1e-3 * want.abs().max(1.0),
                "{ty}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn plans_follow_llama_cpp_dispatch() {
        if !available() {
            return;
        }
        let p = plan(Type::Q4K, 64, true, 5, Type::F32).expect("repacked");
        assert_eq!(p.order(3, 5), Order::RepackGemm);
        assert_eq!(p.order(4, 5), Order::RepackGemv);
        assert_eq!(p.order(0, 1), Order::RepackGemv);
        // rows % 8 != 0: the tiled path, only for batches of 8 or more
        assert_eq!(plan(Type::Q4K, 12, true, 7, Type::F32), None);
        assert_eq!(
            plan(Type::Q4K, 12, true, 8, Type::F32).map(|p| p.order(0, 8)),
            Some(Order::Tiled)
        );
        assert_eq!(plan(Type::Q6K, 64, true, 7, Type::F32), None);
        assert!(plan(Type::Q6K, 64, true, 128, Type::F32).is_some());
        assert_eq!(plan(Type::Q8_0, 64, true, 128, Type::F32), None);
        // Q2_K in plain memory: the tiled path from 8 columns on (a CPU_REPACK Q2_K weight
        // never gets here: mm_repacked computes it)
        assert_eq!(plan(Type::Q2K, 64, false, 7, Type::F32), None);
        assert_eq!(
            plan(Type::Q2K, 64, false, 8, Type::F32).map(|p| p.order(0, 8)),
            Some(Order::Tiled)
        );
    }
}
