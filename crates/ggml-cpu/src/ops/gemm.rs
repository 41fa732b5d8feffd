//! A register-blocked matrix-multiply tile for float weights (F32, or F16 with F16C): RM rows
//! of the weight times RN activation columns at once, so each loaded vector feeds several
//! FMAs instead of one (the dot-product-per-cell path loads two vectors per FMA). Used by
//! MUL_MAT for batches; results equal the dot products up to summation order.

/// Values per step of the BF16 tiles (`gemm_bf16`, tinyBLAS's KN for BF16): their k must be a
/// multiple of it.
pub(crate) const BF16_KN: usize = 32;

/// Rows and columns of one register tile.
pub(crate) const RM: usize = 4;
pub(crate) const RN: usize = 3;
// the kernels load exactly three columns per step
const _: () = assert!(RN == 3);

/// Element type of both operands of a tile.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Elem {
    F32,
    F16,
    /// BF16 weights and columns, where AVX512_BF16 is present (`gemm_bf16`).
    Bf16,
}

#[cfg(target_arch = "x86_64")]
fn has_avx512() -> bool {
    crate::simd::features::cpu().avx512f
}

/// Float lanes of one accumulator (llamafile's KN): 16 with AVX-512, else 8.
pub(crate) fn lanes() -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512() {
            return 16;
        }
    }
    8
}

/// Whether llamafile's tinyBLAS takes a float product of an m-row weight, k-long rows and n
/// columns per matrix (llamafile_sgemm: n >= 2, k % KN == 0, m % 4 == 0); ggml's dot products
/// do otherwise. The tiles sum each cell in tinyBLAS's order, so they serve exactly these.
pub(crate) fn tinyblas_shape(m: usize, k: usize, n: usize) -> bool {
    n >= 2 && k.is_multiple_of(lanes()) && m.is_multiple_of(4)
}

/// Columns of one tinyBLAS job for n columns (BLOCK_SIZE<RN>, then gemm's rounding to about
/// BN register tiles): RN 3 and BN 24 on 16 vector registers, RN 6 and BN 12 on AVX-512's 32.
pub(crate) fn float_block_cols(e: Elem, n: usize) -> usize {
    let (rn, bn) = if wide_available(e) {
        (RN_WIDE, 12)
    } else {
        (RN, 24)
    };
    let blocks = n.div_ceil(rn);
    let size_n = n.div_ceil(blocks);
    let xtiles = n.div_ceil(size_n);
    let nb = if xtiles < bn {
        1
    } else {
        (xtiles + bn / 2) / bn
    };
    xtiles.div_ceil(nb) * size_n
}

/// Whether tiles can run on this CPU for `e`.
pub(crate) fn available(e: Elem) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let f = crate::simd::features::cpu();
        match e {
            Elem::F32 => f.avx2_fma(),
            Elem::F16 => f.avx2_fma() && f.f16c,
            Elem::Bf16 => super::gemm_bf16::available(),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = e;
        false
    }
}

/// out[r * RN + c] = dot(a[r], b[c]) over k elements, for a full RM x RN tile.
///
/// # Safety
/// `available(e)` must hold; every a[r] and b[c] points at k readable elements of `e`.
pub(crate) unsafe fn tile(
    e: Elem,
    k: usize,
    a: &[*const u8; RM],
    b: &[*const u8; RN],
    out: &mut [f32; RM * RN],
) {
    #[cfg(target_arch = "x86_64")]
    {
        match (e, has_avx512()) {
            (Elem::Bf16, _) => super::gemm_bf16::tile(k, a, b, out),
            (Elem::F32, true) => x86::tile_f32_avx512(k, a, b, out),
            (Elem::F16, true) => x86::tile_f16_avx512(k, a, b, out),
            (Elem::F32, false) => x86::tile_f32(k, a, b, out),
            (Elem::F16, false) => x86::tile_f16(k, a, b, out),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (e, k, a, b, out);
        unreachable!("gemm tiles are x86-only");
    }
}

/// Columns of the wide AVX-512 tile: RM x RN_WIDE accumulators (24 of the 32 registers), so
/// each converted F16 vector feeds more FMAs than in the RM x RN tile.
pub(crate) const RN_WIDE: usize = 6;

/// Whether `tile_wide` runs for `e` on this CPU.
pub(crate) fn wide_available(e: Elem) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        available(e) && has_avx512()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = e;
        false
    }
}

/// As `tile` for RN_WIDE columns (every cell's bits those `tile` gives it: each cell is its
/// own chain of FMAs and its own final sum, whatever the tile's shape), but column by column:
/// cell (r, c) at out[c * RM + r], so each column's RM rows leave as one store.
///
/// # Safety
/// `wide_available(e)` must hold; every a[r] and b[c] points at k readable elements of `e`.
pub(crate) unsafe fn tile_wide(
    e: Elem,
    k: usize,
    a: &[*const u8; RM],
    b: &[*const u8; RN_WIDE],
    out: &mut [f32; RM * RN_WIDE],
) {
    #[cfg(target_arch = "x86_64")]
    {
        match e {
            Elem::F16 => x86::tile_f16_avx512_wide(k, a, b, out),
            Elem::F32 => x86::tile_f32_avx512_wide(k, a, b, out),
            Elem::Bf16 => x86::tile_bf16_avx512_wide(k, a, b, out),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (e, k, a, b, out);
        unreachable!("gemm tiles are x86-only");
    }
}

/// `tile_wide` for F16 weights and columns already widened to f32 (exactly: every half is a
/// float), so the tile converts only the weight's vectors; each cell's bits are `tile`'s
/// (cell (r, c) at out[c * RM + r], as `tile_wide`).
///
/// # Safety
/// `wide_available(Elem::F16)` must hold; every a[r] points at k readable halves and every
/// b[c] at k floats.
pub(crate) unsafe fn tile_wide_b32(
    k: usize,
    a: &[*const u8; RM],
    b: &[*const f32; RN_WIDE],
    out: &mut [f32; RM * RN_WIDE],
) {
    #[cfg(target_arch = "x86_64")]
    {
        x86::tile_f16_avx512_wide_b32(k, a, &b.map(|p| p as *const u8), out)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (k, a, b, out);
        unreachable!("gemm tiles are x86-only");
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{RM, RN};
    use crate::dot::x86::hsum_ps as hsum;
    use std::arch::x86_64::*;

    macro_rules! tile_impl {
        ($name:ident, $feat:literal, $load:expr, $scalar:expr) => {
            /// # Safety
            /// The CPU supports the target features; pointers cover k elements.
            #[target_feature(enable = $feat)]
            pub unsafe fn $name(
                k: usize,
                a: &[*const u8; RM],
                b: &[*const u8; RN],
                out: &mut [f32; RM * RN],
            ) {
                let mut acc = [_mm256_setzero_ps(); RM * RN];
                let mut i = 0;
                while i + 8 <= k {
                    let bv = [$load(b[0], i), $load(b[1], i), $load(b[2], i)];
                    for r in 0..RM {
                        let av = $load(a[r], i);
                        for c in 0..RN {
                            acc[r * RN + c] = _mm256_fmadd_ps(av, bv[c], acc[r * RN + c]);
                        }
                    }
                    i += 8;
                }
                for r in 0..RM {
                    for c in 0..RN {
                        let mut s = hsum(acc[r * RN + c]);
                        for j in i..k {
                            s += $scalar(a[r], j) * $scalar(b[c], j);
                        }
                        out[r * RN + c] = s;
                    }
                }
            }
        };
    }

    #[inline(always)]
    unsafe fn load_f32(p: *const u8, i: usize) -> __m256 {
        _mm256_loadu_ps((p as *const f32).add(i))
    }
    #[inline(always)]
    unsafe fn scalar_f32(p: *const u8, i: usize) -> f32 {
        (p as *const f32).add(i).read_unaligned()
    }
    #[cfg(test)]
    #[inline(always)]
    unsafe fn load_f16(p: *const u8, i: usize) -> __m256 {
        _mm256_cvtph_ps(_mm_loadu_si128((p as *const u16).add(i) as *const __m128i))
    }
    #[inline(always)]
    unsafe fn scalar_f16(p: *const u8, i: usize) -> f32 {
        crate::fp::f16_to_f32((p as *const u16).add(i).read_unaligned())
    }

    tile_impl!(tile_f32, "avx2,fma", load_f32, scalar_f32);
    // the reference tile_f16's assembly loop is tested against
    #[cfg(test)]
    tile_impl!(tile_f16_intrinsics, "avx2,fma,f16c", load_f16, scalar_f16);

    /// tile_f16's cells (the same FMA chains and sums) with its loop in assembly: the tile
    /// needs all 16 vector registers (12 sums, 3 columns, one row), and LLVM schedules the
    /// intrinsics' loop with one sum spilled to the stack, which puts a store and a load in
    /// that chain every step and halves the tile's rate.
    ///
    /// # Safety
    /// The CPU supports AVX2, FMA and F16C; pointers cover k halves.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn tile_f16(
        k: usize,
        a: &[*const u8; RM],
        b: &[*const u8; RN],
        out: &mut [f32; RM * RN],
    ) {
        let mut acc = [_mm256_setzero_ps(); RM * RN];
        let steps = k / 8;
        if steps > 0 {
            let [mut c0, mut c1, mut c2, mut c3, mut c4, mut c5] = [acc[0]; 6];
            let [mut c6, mut c7, mut c8, mut c9, mut c10, mut c11] = [acc[0]; 6];
            // SAFETY: every pointer covers k >= 8 * steps halves, read 16 bytes at a time at
            // byte offsets 0, 16, .., 16 * (steps - 1); the loop touches only the named
            // registers and flags, and no memory but those reads.
            std::arch::asm!(
                "2:",
                "vcvtph2ps ymm12, xmmword ptr [{b0} + {i}]",
                "vcvtph2ps ymm13, xmmword ptr [{b1} + {i}]",
                "vcvtph2ps ymm14, xmmword ptr [{b2} + {i}]",
                "vcvtph2ps ymm15, xmmword ptr [{a0} + {i}]",
                "vfmadd231ps ymm0, ymm15, ymm12",
                "vfmadd231ps ymm1, ymm15, ymm13",
                "vfmadd231ps ymm2, ymm15, ymm14",
                "vcvtph2ps ymm15, xmmword ptr [{a1} + {i}]",
                "vfmadd231ps ymm3, ymm15, ymm12",
                "vfmadd231ps ymm4, ymm15, ymm13",
                "vfmadd231ps ymm5, ymm15, ymm14",
                "vcvtph2ps ymm15, xmmword ptr [{a2} + {i}]",
                "vfmadd231ps ymm6, ymm15, ymm12",
                "vfmadd231ps ymm7, ymm15, ymm13",
                "vfmadd231ps ymm8, ymm15, ymm14",
                "vcvtph2ps ymm15, xmmword ptr [{a3} + {i}]",
                "vfmadd231ps ymm9, ymm15, ymm12",
                "vfmadd231ps ymm10, ymm15, ymm13",
                "vfmadd231ps ymm11, ymm15, ymm14",
                "add {i}, 16",
                "cmp {i}, {end}",
                "jb 2b",
                a0 = in(reg) a[0],
                a1 = in(reg) a[1],
                a2 = in(reg) a[2],
                a3 = in(reg) a[3],
                b0 = in(reg) b[0],
                b1 = in(reg) b[1],
                b2 = in(reg) b[2],
                i = inout(reg) 0usize => _,
                end = in(reg) steps * 16,
                inout("ymm0") c0,
                inout("ymm1") c1,
                inout("ymm2") c2,
                inout("ymm3") c3,
                inout("ymm4") c4,
                inout("ymm5") c5,
                inout("ymm6") c6,
                inout("ymm7") c7,
                inout("ymm8") c8,
                inout("ymm9") c9,
                inout("ymm10") c10,
                inout("ymm11") c11,
                out("ymm12") _,
                out("ymm13") _,
                out("ymm14") _,
                out("ymm15") _,
                options(nostack, readonly),
            );
            acc = [c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11];
        }
        for r in 0..RM {
            for c in 0..RN {
                let mut s = hsum(acc[r * RN + c]);
                for j in steps * 8..k {
                    s += scalar_f16(a[r], j) * scalar_f16(b[c], j);
                }
                out[r * RN + c] = s;
            }
        }
    }

    macro_rules! tile_impl_512 {
        ($name:ident, $feat:literal, $load:expr, $scalar:expr) => {
            /// # Safety
            /// The CPU supports the target features; pointers cover k elements.
            #[target_feature(enable = $feat)]
            pub unsafe fn $name(
                k: usize,
                a: &[*const u8; RM],
                b: &[*const u8; RN],
                out: &mut [f32; RM * RN],
            ) {
                let mut acc = [_mm512_setzero_ps(); RM * RN];
                let mut i = 0;
                while i + 16 <= k {
                    let bv = [$load(b[0], i), $load(b[1], i), $load(b[2], i)];
                    for r in 0..RM {
                        let av = $load(a[r], i);
                        for c in 0..RN {
                            acc[r * RN + c] = _mm512_fmadd_ps(av, bv[c], acc[r * RN + c]);
                        }
                    }
                    i += 16;
                }
                for r in 0..RM {
                    for c in 0..RN {
                        let mut s = _mm512_reduce_add_ps(acc[r * RN + c]);
                        for j in i..k {
                            s += $scalar(a[r], j) * $scalar(b[c], j);
                        }
                        out[r * RN + c] = s;
                    }
                }
            }
        };
    }

    #[inline(always)]
    unsafe fn load_f32_512(p: *const u8, i: usize) -> __m512 {
        _mm512_loadu_ps((p as *const f32).add(i))
    }
    #[inline(always)]
    unsafe fn load_f16_512(p: *const u8, i: usize) -> __m512 {
        _mm512_cvtph_ps(_mm256_loadu_si256(
            (p as *const u16).add(i) as *const __m256i
        ))
    }

    macro_rules! tile_wide_512 {
        ($name:ident, $load_a:expr, $scalar_a:expr, $load_b:expr, $scalar_b:expr, $asm_steps:expr) => {
            /// The RM x RN tile for RN_WIDE columns (a's and b's elements read by their own
            /// loads): each cell the same FMA chain and final sum.
            ///
            /// # Safety
            /// The CPU supports AVX-512 F; pointers cover k elements of their types.
            #[target_feature(enable = "avx512f")]
            pub unsafe fn $name(
                k: usize,
                a: &[*const u8; RM],
                b: &[*const u8; super::RN_WIDE],
                out: &mut [f32; RM * super::RN_WIDE],
            ) {
                const N: usize = super::RN_WIDE;
                let mut acc = [_mm512_setzero_ps(); RM * N];
                let mut i = 0;
                if let Some(steps) = $asm_steps {
                    // SAFETY: the caller's promise: every pointer covers k >= 16 * (k / 16)
                    // elements.
                    unsafe { steps(k / 16, a, b, &mut acc) };
                    i = k / 16 * 16;
                }
                while i + 16 <= k {
                    let av: [__m512; RM] = std::array::from_fn(|r| $load_a(a[r], i));
                    for c in 0..N {
                        let bv = $load_b(b[c], i);
                        for r in 0..RM {
                            acc[r * N + c] = _mm512_fmadd_ps(av[r], bv, acc[r * N + c]);
                        }
                    }
                    i += 16;
                }
                if i == k {
                    // SAFETY: out holds RM * N = 24 floats.
                    unsafe { reduce24(&acc, out.as_mut_ptr()) };
                    return;
                }
                for r in 0..RM {
                    for c in 0..N {
                        let mut s = _mm512_reduce_add_ps(acc[r * N + c]);
                        for j in i..k {
                            s += $scalar_a(a[r], j) * $scalar_b(b[c], j);
                        }
                        out[c * RM + r] = s;
                    }
                }
            }
        };
    }

    /// Sixteen `_mm512_reduce_add_ps` at once, in one vector: lane c is the sum of v[c]'s
    /// lanes with every addition of that reduction (lane i + lane i + 8, then i + 4, i + 2,
    /// i + 1 of the partial sums), so the bits are the same. Each step adds two shuffles of a
    /// pair of vectors and serves twice the sums, where one reduction per cell leaves most
    /// lanes idle (a K = 256 tile spent a fifth of its time there).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn reduce16(v: &[__m512; 16]) -> __m512 {
        // v[c]'s reduction ends in lane 4 * (c % 4) + c / 4 (the last two steps transpose
        // 4 x 4): feed the vectors in that transposed order to get lane c = cell c
        let t = |c: usize| v[4 * (c % 4) + c / 4];
        // lanes i + 8: [a.q0 + a.q2, a.q1 + a.q3, b.q0 + b.q2, b.q1 + b.q3] (q: 128-bit quarter)
        let s8: [__m512; 8] = std::array::from_fn(|j| {
            let (a, b) = (t(2 * j), t(2 * j + 1));
            _mm512_add_ps(
                _mm512_shuffle_f32x4::<0b01_00_01_00>(a, b),
                _mm512_shuffle_f32x4::<0b11_10_11_10>(a, b),
            )
        });
        // lanes i + 4: quarter j of the result is cell j's four partial sums
        let s4: [__m512; 4] = std::array::from_fn(|j| {
            let (a, b) = (s8[2 * j], s8[2 * j + 1]);
            _mm512_add_ps(
                _mm512_shuffle_f32x4::<0b10_00_10_00>(a, b),
                _mm512_shuffle_f32x4::<0b11_01_11_01>(a, b),
            )
        });
        // lanes i + 2, within each quarter: [a0 + a2, a1 + a3, b0 + b2, b1 + b3]
        let s2: [__m512; 2] = std::array::from_fn(|j| {
            let (a, b) = (s4[2 * j], s4[2 * j + 1]);
            _mm512_add_ps(
                _mm512_shuffle_ps::<0b01_00_01_00>(a, b),
                _mm512_shuffle_ps::<0b11_10_11_10>(a, b),
            )
        });
        // lanes i + 1: [a0 + a1, a2 + a3, b0 + b1, b2 + b3]
        _mm512_add_ps(
            _mm512_shuffle_ps::<0b10_00_10_00>(s2[0], s2[1]),
            _mm512_shuffle_ps::<0b11_01_11_01>(s2[0], s2[1]),
        )
    }

    /// The 24 cells of a wide tile (acc[r * RN_WIDE + c]) column by column: out[c * RM + r] =
    /// `_mm512_reduce_add_ps(acc[r * RN_WIDE + c])` bit for bit.
    ///
    /// # Safety
    /// AVX-512 F; out points at 24 writable floats.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn reduce24(acc: &[__m512; 24], out: *mut f32) {
        const N: usize = super::RN_WIDE;
        let cell = |j: usize| acc[(j % RM) * N + j / RM];
        let lo: [__m512; 16] = std::array::from_fn(cell);
        let hi: [__m512; 16] = std::array::from_fn(|j| cell(16 + j % 8));
        // SAFETY: out covers 24 floats: 16, then the first 8 of the second vector.
        unsafe {
            _mm512_storeu_ps(out, reduce16(&lo));
            _mm256_storeu_ps(out.add(16), _mm512_castps512_ps256(reduce16(&hi)));
        }
    }

    /// The FMA steps of a wide tile (16 elements each), written as `asm!` with 24 sums.
    type WideSteps =
        unsafe fn(usize, &[*const u8; RM], &[*const u8; super::RN_WIDE], &mut [__m512; 24]);

    /// A wide tile's steps in assembly, its loads and product given: `$aload` of a row's
    /// `$step` values into zmm24-27 (element offset {i}, two bytes each), `$bload` of a
    /// column's into zmm28 ({i} times `$bscale` bytes), then `$op` sum, row, column for the 24
    /// sums. The intrinsics' loop needs 29 of the 32 vector registers (24 sums, 4 weight
    /// vectors, a column) and LLVM scheduled it with some sums on the stack, a store and a load
    /// in their chains every step (F16: four; BF16: eight, 124-133 GFLOP/s a core on the 1.1B
    /// bf16's prompt against tinyBLAS's 175). Each sum is the intrinsics' chain in k order.
    macro_rules! wide_steps {
        ($name:ident, $feat:literal, $step:literal, $aload:literal, $bload:literal,
         $bscale:literal, $op:literal) => {
            /// # Safety
            /// The CPU features; every a[r] and b[c] covers `$step` * steps elements.
            #[target_feature(enable = $feat)]
            unsafe fn $name(
                steps: usize,
                a: &[*const u8; RM],
                b: &[*const u8; super::RN_WIDE],
                acc: &mut [__m512; 24],
            ) {
                if steps == 0 {
                    return;
                }
                // (the sums go on from acc's, whatever the caller started them at)
                let [
                    mut c0, mut c1, mut c2, mut c3, mut c4, mut c5,
                    mut c6, mut c7, mut c8, mut c9, mut c10, mut c11,
                    mut c12, mut c13, mut c14, mut c15, mut c16, mut c17,
                    mut c18, mut c19, mut c20, mut c21, mut c22, mut c23,
                ] = *acc;
                // SAFETY: the loop reads 32 bytes of each a[r] and 16 elements of each b[c]
                // at element offsets 0, 16, .., 16 * (steps - 1), within the caller's promise;
                // it touches only the named registers and flags.
                unsafe {
                    std::arch::asm!(
                        "2:",
                        concat!($aload, " zmm24, ", "[{a0} + {i}*2]"),
                        concat!($aload, " zmm25, ", "[{a1} + {i}*2]"),
                        concat!($aload, " zmm26, ", "[{a2} + {i}*2]"),
                        concat!($aload, " zmm27, ", "[{a3} + {i}*2]"),
                        concat!($bload, " zmm28, ", "[{b0} + {i}*", $bscale, "]"),
                        concat!($op, " zmm0, zmm24, zmm28"),
                        concat!($op, " zmm6, zmm25, zmm28"),
                        concat!($op, " zmm12, zmm26, zmm28"),
                        concat!($op, " zmm18, zmm27, zmm28"),
                        concat!($bload, " zmm28, ", "[{b1} + {i}*", $bscale, "]"),
                        concat!($op, " zmm1, zmm24, zmm28"),
                        concat!($op, " zmm7, zmm25, zmm28"),
                        concat!($op, " zmm13, zmm26, zmm28"),
                        concat!($op, " zmm19, zmm27, zmm28"),
                        concat!($bload, " zmm28, ", "[{b2} + {i}*", $bscale, "]"),
                        concat!($op, " zmm2, zmm24, zmm28"),
                        concat!($op, " zmm8, zmm25, zmm28"),
                        concat!($op, " zmm14, zmm26, zmm28"),
                        concat!($op, " zmm20, zmm27, zmm28"),
                        concat!($bload, " zmm28, ", "[{b3} + {i}*", $bscale, "]"),
                        concat!($op, " zmm3, zmm24, zmm28"),
                        concat!($op, " zmm9, zmm25, zmm28"),
                        concat!($op, " zmm15, zmm26, zmm28"),
                        concat!($op, " zmm21, zmm27, zmm28"),
                        concat!($bload, " zmm28, ", "[{b4} + {i}*", $bscale, "]"),
                        concat!($op, " zmm4, zmm24, zmm28"),
                        concat!($op, " zmm10, zmm25, zmm28"),
                        concat!($op, " zmm16, zmm26, zmm28"),
                        concat!($op, " zmm22, zmm27, zmm28"),
                        concat!($bload, " zmm28, ", "[{b5} + {i}*", $bscale, "]"),
                        concat!($op, " zmm5, zmm24, zmm28"),
                        concat!($op, " zmm11, zmm25, zmm28"),
                        concat!($op, " zmm17, zmm26, zmm28"),
                        concat!($op, " zmm23, zmm27, zmm28"),
                        concat!("add {i}, ", $step),
                        "cmp {i}, {end}",
                        "jb 2b",
                        a0 = in(reg) a[0],
                        a1 = in(reg) a[1],
                        a2 = in(reg) a[2],
                        a3 = in(reg) a[3],
                        b0 = in(reg) b[0],
                        b1 = in(reg) b[1],
                        b2 = in(reg) b[2],
                        b3 = in(reg) b[3],
                        b4 = in(reg) b[4],
                        b5 = in(reg) b[5],
                        i = inout(reg) 0usize => _,
                        end = in(reg) steps * $step,
                        inout("zmm0") c0,
                        inout("zmm1") c1,
                        inout("zmm2") c2,
                        inout("zmm3") c3,
                        inout("zmm4") c4,
                        inout("zmm5") c5,
                        inout("zmm6") c6,
                        inout("zmm7") c7,
                        inout("zmm8") c8,
                        inout("zmm9") c9,
                        inout("zmm10") c10,
                        inout("zmm11") c11,
                        inout("zmm12") c12,
                        inout("zmm13") c13,
                        inout("zmm14") c14,
                        inout("zmm15") c15,
                        inout("zmm16") c16,
                        inout("zmm17") c17,
                        inout("zmm18") c18,
                        inout("zmm19") c19,
                        inout("zmm20") c20,
                        inout("zmm21") c21,
                        inout("zmm22") c22,
                        inout("zmm23") c23,
                        out("zmm24") _,
                        out("zmm25") _,
                        out("zmm26") _,
                        out("zmm27") _,
                        out("zmm28") _,
                        options(nostack, readonly),
                    );
                }
                *acc = [
                    c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16,
                    c17, c18, c19, c20, c21, c22, c23,
                ];
            }
        };
    }
    wide_steps!(
        wide_steps_f16,
        "avx512f",
        16,
        "vcvtph2ps",
        "vcvtph2ps",
        "2",
        "vfmadd231ps"
    );
    wide_steps!(
        wide_steps_f16_b32,
        "avx512f",
        16,
        "vcvtph2ps",
        "vmovups",
        "4",
        "vfmadd231ps"
    );
    // (vdpbf16ps adds each lane's two products to the sum: 32 values a step)
    wide_steps!(
        wide_steps_bf16,
        "avx512f,avx512bf16",
        32,
        "vmovdqu16",
        "vmovdqu16",
        "2",
        "vdpbf16ps"
    );

    /// The wide BF16 tile (cell (r, c) at out[c * RM + r]): each cell tinyBLAS's chain of
    /// vdpbf16ps over 32 values a step, then `_mm512_reduce_add_ps`'s sum.
    ///
    /// # Safety
    /// AVX-512F and AVX512_BF16; k % 32 == 0; pointers cover k values.
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub unsafe fn tile_bf16_avx512_wide(
        k: usize,
        a: &[*const u8; RM],
        b: &[*const u8; super::RN_WIDE],
        out: &mut [f32; RM * super::RN_WIDE],
    ) {
        let mut acc = [_mm512_setzero_ps(); RM * super::RN_WIDE];
        // SAFETY: the caller's promise; out holds 24 floats.
        unsafe {
            wide_steps_bf16(k / 32, a, b, &mut acc);
            reduce24(&acc, out.as_mut_ptr());
        }
    }

    tile_wide_512!(
        tile_f16_avx512_wide,
        load_f16_512,
        scalar_f16,
        load_f16_512,
        scalar_f16,
        Some(wide_steps_f16 as WideSteps)
    );
    tile_wide_512!(
        tile_f32_avx512_wide,
        load_f32_512,
        scalar_f32,
        load_f32_512,
        scalar_f32,
        None::<WideSteps>
    );
    // F16 weights times columns already widened to f32: only the weight is converted
    tile_wide_512!(
        tile_f16_avx512_wide_b32,
        load_f16_512,
        scalar_f16,
        load_f32_512,
        scalar_f32,
        Some(wide_steps_f16_b32 as WideSteps)
    );

    tile_impl_512!(tile_f32_avx512, "avx512f", load_f32_512, scalar_f32);
    tile_impl_512!(tile_f16_avx512, "avx512f", load_f16_512, scalar_f16);
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// llamafile's tinyBLAS<8> cell: one 8-lane accumulator fused over k, then its hsum
    /// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
    fn tinyblas8(a: &[f32], b: &[f32]) -> f32 {
        let mut acc = [0.0f32; 8];
        for (ca, cb) in a.chunks(8).zip(b.chunks(8)) {
            for l in 0..8 {
                acc[l] = ca[l].mul_add(cb[l], acc[l]);
            }
        }
        let s: [f32; 4] = std::array::from_fn(|l| acc[l] + acc[l + 4]);
        (s[0] + s[2]) + (s[1] + s[3])
    }

    #[test]
    fn each_cell_sums_in_tinyblas_order_whatever_its_neighbours() {
        if !available(Elem::F32) || lanes() != 8 {
            return;
        }
        let k = 8 * 37;
        let v = |seed: usize| -> Vec<f32> {
            (0..k)
                .map(|i| ((i * 7919 + seed * 104729) % 2003) as f32 / 1001.0 - 1.0)
                .collect()
        };
        let rows: Vec<Vec<f32>> = (0..RM).map(v).collect();
        let cols: Vec<Vec<f32>> = (0..RN).map(|c| v(100 + c)).collect();
        let ap: [*const u8; RM] = std::array::from_fn(|r| rows[r].as_ptr() as *const u8);
        let bp: [*const u8; RN] = std::array::from_fn(|c| cols[c].as_ptr() as *const u8);
        let mut full = [0.0f32; RM * RN];
        // SAFETY: available() holds; every pointer covers k floats.
        unsafe { tile(Elem::F32, k, &ap, &bp, &mut full) };
        for c in 0..RN {
            let mut single = [0.0f32; RM * RN];
            // SAFETY: as above (a leftover column fills every slot, as matmul does).
            unsafe { tile(Elem::F32, k, &ap, &[bp[c]; RN], &mut single) };
            for r in 0..RM {
                let want = tinyblas8(&rows[r], &cols[c]);
                assert_eq!(full[r * RN + c].to_bits(), want.to_bits(), "r {r} c {c}");
                assert_eq!(
                    single[r * RN].to_bits(),
                    want.to_bits(),
                    "r {r} c {c} alone"
                );
            }
        }
    }

    #[test]
    fn sums_of_24_vectors_at_once_equal_their_reductions_one_by_one() {
        if !wide_available(Elem::F32) {
            return;
        }
        use std::arch::x86_64::*;
        // magnitudes from 1e-6 to 1e6, so a different order of additions shows in the bits
        let lanes: Vec<f32> = (0..24 * 16usize)
            .map(|i| {
                let x = ((i * 7919) % 2003) as f32 / 1001.0 - 1.0;
                x * 10f32.powi((i * 31 % 13) as i32 - 6)
            })
            .collect();
        // SAFETY: AVX-512 F (wide_available); every load reads 16 of the 384 floats and the
        // store 24 floats of `got`.
        unsafe {
            let acc: [__m512; 24] =
                std::array::from_fn(|c| _mm512_loadu_ps(lanes.as_ptr().add(16 * c)));
            let mut got = [0.0f32; 24];
            x86::reduce24(&acc, got.as_mut_ptr());
            for r in 0..RM {
                for c in 0..RN_WIDE {
                    let want = _mm512_reduce_add_ps(acc[r * RN_WIDE + c]);
                    let got = got[c * RM + r];
                    assert_eq!(got.to_bits(), want.to_bits(), "cell ({r}, {c})");
                }
            }
        }
    }

    #[test]
    fn wide_f32_tiles_equal_the_narrow_ones() {
        if !wide_available(Elem::F32) {
            return;
        }
        for k in [16usize, 16 * 37, 16 * 5 + 7] {
            let v = |seed: usize| -> Vec<f32> {
                (0..k)
                    .map(|i| ((i * 7919 + seed * 104729) % 2003) as f32 / 1001.0 - 1.0)
                    .collect()
            };
            let rows: Vec<Vec<f32>> = (0..RM).map(v).collect();
            let cols: Vec<Vec<f32>> = (0..RN_WIDE).map(|c| v(100 + c)).collect();
            let ap: [*const u8; RM] = std::array::from_fn(|r| rows[r].as_ptr() as *const u8);
            let bp: [*const u8; RN_WIDE] = std::array::from_fn(|c| cols[c].as_ptr() as *const u8);
            // SAFETY: every pointer covers k floats.
            unsafe { wide_equals_narrow(Elem::F32, k, &ap, &bp) };
        }
    }

    /// The wide tile of `e` against the narrow one, column by column, bit for bit; returns the
    /// wide tile's cells.
    ///
    /// # Safety
    /// `wide_available(e)`; every pointer covers k elements of `e`.
    unsafe fn wide_equals_narrow(
        e: Elem,
        k: usize,
        ap: &[*const u8; RM],
        bp: &[*const u8; RN_WIDE],
    ) -> [f32; RM * RN_WIDE] {
        let mut wide = [0.0f32; RM * RN_WIDE];
        // SAFETY: the caller's promise.
        unsafe { tile_wide(e, k, ap, bp, &mut wide) };
        for c in 0..RN_WIDE {
            let mut narrow = [0.0f32; RM * RN];
            // SAFETY: as above (available(e) holds where wide_available does).
            unsafe { tile(e, k, ap, &[bp[c]; RN], &mut narrow) };
            for r in 0..RM {
                let (got, want) = (wide[c * RM + r], narrow[r * RN]);
                assert_eq!(got.to_bits(), want.to_bits(), "k {k} r {r} c {c}");
            }
        }
        wide
    }

    /// k halves in [-1, 1], a different run for each seed.
    fn halves(k: usize, seed: usize) -> Vec<u16> {
        (0..k)
            .map(|i| {
                let x = ((i * 7919 + seed * 104729) % 2003) as f32 / 1001.0 - 1.0;
                crate::fp::f32_to_f16(x)
            })
            .collect()
    }

    #[test]
    fn wide_f16_tiles_equal_the_narrow_ones() {
        if !wide_available(Elem::F16) {
            return;
        }
        // k with a tail past the last 16 (the scalar steps too)
        for k in [16usize, 16 * 37, 16 * 5 + 7] {
            let v = |seed: usize| halves(k, seed);
            let rows: Vec<Vec<u16>> = (0..RM).map(v).collect();
            let cols: Vec<Vec<u16>> = (0..RN_WIDE).map(|c| v(100 + c)).collect();
            let ap: [*const u8; RM] = std::array::from_fn(|r| rows[r].as_ptr() as *const u8);
            let bp: [*const u8; RN_WIDE] = std::array::from_fn(|c| cols[c].as_ptr() as *const u8);
            // SAFETY: wide_available() holds; every pointer covers k halves.
            let wide = unsafe { wide_equals_narrow(Elem::F16, k, &ap, &bp) };
            let cols32: Vec<Vec<f32>> = cols
                .iter()
                .map(|c| c.iter().map(|&h| crate::fp::f16_to_f32(h)).collect())
                .collect();
            let bp32: [*const f32; RN_WIDE] = std::array::from_fn(|c| cols32[c].as_ptr());
            let mut wide32 = [0.0f32; RM * RN_WIDE];
            // SAFETY: as above; every f32 column covers k floats.
            unsafe { tile_wide_b32(k, &ap, &bp32, &mut wide32) };
            assert_eq!(
                wide32.map(f32::to_bits),
                wide.map(f32::to_bits),
                "k {k} b32"
            );
        }
    }

    #[test]
    fn avx2_f16_tile_equals_its_intrinsics() {
        if !available(Elem::F16) {
            return;
        }
        // k with no whole step, one step, many, and a tail past the last 8
        for k in [0usize, 5, 8, 8 * 37, 8 * 5 + 7, 2048] {
            let v = |seed: usize| halves(k, seed);
            let rows: Vec<Vec<u16>> = (0..RM).map(v).collect();
            let cols: Vec<Vec<u16>> = (0..RN).map(|c| v(100 + c)).collect();
            let ap: [*const u8; RM] = std::array::from_fn(|r| rows[r].as_ptr() as *const u8);
            let bp: [*const u8; RN] = std::array::from_fn(|c| cols[c].as_ptr() as *const u8);
            let (mut got, mut want) = ([0.0f32; RM * RN], [0.0f32; RM * RN]);
            // SAFETY: available() holds; every pointer covers k halves.
            unsafe {
                x86::tile_f16(k, &ap, &bp, &mut got);
                x86::tile_f16_intrinsics(k, &ap, &bp, &mut want);
            }
            assert_eq!(got.map(f32::to_bits), want.map(f32::to_bits), "k {k}");
        }
    }

    #[test]
    fn tinyblas_takes_what_llamafile_sgemm_takes() {
        let kn = lanes();
        assert!(tinyblas_shape(256, 4 * kn, 2));
        assert!(!tinyblas_shape(256, 4 * kn, 1), "one column: ggml's dot");
        assert!(!tinyblas_shape(256, 4 * kn + 1, 8), "k % KN != 0");
        assert!(!tinyblas_shape(258, 4 * kn, 8), "m % 4 != 0");
    }
}
