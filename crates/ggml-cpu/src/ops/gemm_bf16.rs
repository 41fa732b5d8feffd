//! BF16 weights times BF16 columns in llamafile's tinyBLAS order, as llama.cpp's AVX-512 build
//! with `__AVX512BF16__` runs them for batches (tinyBLAS<32, __m512, __m512bh>): each cell one
//! chain of vdpbf16ps over 32 values a step from zero, then GCC's _mm512_reduce_add_ps. The
//! tile shape does not change a cell's bits; RM x N accumulators share each loaded vector.

use std::arch::x86_64::*;

use super::gemm::RM;

/// Values per step (tinyBLAS's KN for BF16).
const KN: usize = super::gemm::BF16_KN;

/// Whether the tiles run here: AVX-512F and AVX512_BF16.
pub(crate) fn available() -> bool {
    let f = crate::simd::features::cpu();
    f.avx512f && f.avx512bf16
}

/// The RM x N cells of rows a[r] times columns b[c] over k values (a multiple of KN): with
/// `by_column` cell (r, c) at out[c * RM + r], else at out[r * N + c].
///
/// # Safety
/// `available()`; k % KN == 0; every a[r] and b[c] points at k readable BF16 values; out holds
/// RM * N floats.
#[target_feature(enable = "avx512f,avx512bf16")]
pub(crate) unsafe fn tile<const N: usize>(
    k: usize,
    a: &[*const u8; RM],
    b: &[*const u8; N],
    out: &mut [f32],
    by_column: bool,
) {
    assert!(out.len() >= RM * N);
    // __m512bh and __m512i are both 64 plain bytes
    let load = |p: *const u8| {
        // SAFETY: the callers below read 64 bytes inside a row (the caller's promise).
        unsafe { std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(p as *const __m512i)) }
    };
    let mut acc = [[_mm512_setzero_ps(); RM]; N];
    if N == 6 {
        // SAFETY: the caller's promise (N is 6, so both casts keep the arrays' sizes).
        unsafe {
            wide_steps(
                k / KN,
                a,
                &*(b as *const [*const u8; N] as *const [*const u8; 6]),
                &mut *(&mut acc as *mut [[__m512; RM]; N] as *mut [[__m512; RM]; 6]),
            )
        };
    } else {
        let mut l = 0;
        while l + KN <= k {
            let av: [__m512bh; RM] = std::array::from_fn(|r| load(a[r].wrapping_add(2 * l)));
            for (accj, bj) in acc.iter_mut().zip(b) {
                let bv = load(bj.wrapping_add(2 * l));
                for (c, ar) in accj.iter_mut().zip(&av) {
                    *c = _mm512_dpbf16_ps(*c, *ar, bv);
                }
            }
            l += KN;
        }
    }
    for (j, accj) in acc.iter().enumerate() {
        for (r, c) in accj.iter().enumerate() {
            let at = if by_column { j * RM + r } else { r * N + j };
            out[at] = crate::dot::x86_bf16::reduce_add(*c);
        }
    }
}

/// The 4 x 6 tile's steps (acc[c][r] += row r's 32 values . column c's, `steps` times) in
/// assembly: the intrinsics' loop needs 29 of the 32 vector registers, and LLVM kept a third
/// of the sums on the stack (a store and a load in their chains every step: 124-133 GFLOP/s a
/// core on the 1.1B bf16's prompt, llama.cpp's tinyBLAS about 175). Each sum is the
/// intrinsics' chain.
///
/// # Safety
/// AVX-512F and AVX512_BF16; every a[r] and b[c] covers 32 * steps values.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn wide_steps(
    steps: usize,
    a: &[*const u8; RM],
    b: &[*const u8; 6],
    acc: &mut [[__m512; RM]; 6],
) {
    if steps == 0 {
        return;
    }
    let [[mut c0, mut c1, mut c2, mut c3], [mut c4, mut c5, mut c6, mut c7], [mut c8, mut c9, mut c10, mut c11], [mut c12, mut c13, mut c14, mut c15], [mut c16, mut c17, mut c18, mut c19], [mut c20, mut c21, mut c22, mut c23]] =
        *acc;
    // SAFETY: the loop reads 64 bytes of each a[r] and b[c] at byte offsets 0, 64, ..,
    // 64 * (steps - 1), within the caller's promise; it touches only the named registers and
    // flags.
    unsafe {
        std::arch::asm!(
            "2:",
            "vmovdqu64 zmm24, [{a0} + {i}]",
            "vmovdqu64 zmm25, [{a1} + {i}]",
            "vmovdqu64 zmm26, [{a2} + {i}]",
            "vmovdqu64 zmm27, [{a3} + {i}]",
            "vmovdqu64 zmm28, [{b0} + {i}]",
            "vdpbf16ps zmm0, zmm24, zmm28",
            "vdpbf16ps zmm1, zmm25, zmm28",
            "vdpbf16ps zmm2, zmm26, zmm28",
            "vdpbf16ps zmm3, zmm27, zmm28",
            "vmovdqu64 zmm28, [{b1} + {i}]",
            "vdpbf16ps zmm4, zmm24, zmm28",
            "vdpbf16ps zmm5, zmm25, zmm28",
            "vdpbf16ps zmm6, zmm26, zmm28",
            "vdpbf16ps zmm7, zmm27, zmm28",
            "vmovdqu64 zmm28, [{b2} + {i}]",
            "vdpbf16ps zmm8, zmm24, zmm28",
            "vdpbf16ps zmm9, zmm25, zmm28",
            "vdpbf16ps zmm10, zmm26, zmm28",
            "vdpbf16ps zmm11, zmm27, zmm28",
            "vmovdqu64 zmm28, [{b3} + {i}]",
            "vdpbf16ps zmm12, zmm24, zmm28",
            "vdpbf16ps zmm13, zmm25, zmm28",
            "vdpbf16ps zmm14, zmm26, zmm28",
            "vdpbf16ps zmm15, zmm27, zmm28",
            "vmovdqu64 zmm28, [{b4} + {i}]",
            "vdpbf16ps zmm16, zmm24, zmm28",
            "vdpbf16ps zmm17, zmm25, zmm28",
            "vdpbf16ps zmm18, zmm26, zmm28",
            "vdpbf16ps zmm19, zmm27, zmm28",
            "vmovdqu64 zmm28, [{b5} + {i}]",
            "vdpbf16ps zmm20, zmm24, zmm28",
            "vdpbf16ps zmm21, zmm25, zmm28",
            "vdpbf16ps zmm22, zmm26, zmm28",
            "vdpbf16ps zmm23, zmm27, zmm28",
            "add {i}, 64",
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
            end = in(reg) steps * 64,
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
        [c0, c1, c2, c3],
        [c4, c5, c6, c7],
        [c8, c9, c10, c11],
        [c12, c13, c14, c15],
        [c16, c17, c18, c19],
        [c20, c21, c22, c23],
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every cell of the 4 x 6 and 4 x 3 tiles, in both layouts, equals one vdpbf16ps chain
    /// over its row and column alone (tinyBLAS's cell), reduced as GCC reduces.
    #[test]
    fn tile_cells_are_single_chains() {
        if !available() {
            eprintln!("skipped: this CPU lacks AVX-512F / AVX512_BF16");
            return;
        }
        let k = 3 * KN;
        let mut s = 0x2545_F491_4F6C_DD1Du64;
        let mut vals = |n: usize| -> Vec<u8> {
            (0..n)
                .flat_map(|_| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    let v = ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0;
                    ((v.to_bits() >> 16) as u16).to_le_bytes()
                })
                .collect()
        };
        let rows: Vec<Vec<u8>> = (0..RM).map(|_| vals(k)).collect();
        let cols: Vec<Vec<u8>> = (0..6).map(|_| vals(k)).collect();
        let cell = |r: usize, c: usize| {
            // SAFETY: the features are present; both hold k values.
            unsafe { single(k, rows[r].as_ptr(), cols[c].as_ptr()) }.to_bits()
        };
        let a: [*const u8; RM] = std::array::from_fn(|r| rows[r].as_ptr());
        let b6: [*const u8; 6] = std::array::from_fn(|c| cols[c].as_ptr());
        let b3: [*const u8; 3] = std::array::from_fn(|c| cols[c].as_ptr());
        for by_column in [false, true] {
            let mut out = [0f32; RM * 6];
            // SAFETY: as above.
            unsafe { tile::<6>(k, &a, &b6, &mut out, by_column) };
            let mut o3 = [0f32; RM * 3];
            // SAFETY: as above.
            unsafe { tile::<3>(k, &a, &b3, &mut o3, by_column) };
            for r in 0..RM {
                for c in 0..6 {
                    let at = if by_column { c * RM + r } else { r * 6 + c };
                    assert_eq!(out[at].to_bits(), cell(r, c), "4 x 6 cell ({r}, {c})");
                }
                for c in 0..3 {
                    let at = if by_column { c * RM + r } else { r * 3 + c };
                    assert_eq!(o3[at].to_bits(), cell(r, c), "4 x 3 cell ({r}, {c})");
                }
            }
        }
    }

    /// One cell as tinyBLAS computes it.
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn single(k: usize, x: *const u8, y: *const u8) -> f32 {
        let mut acc = _mm512_setzero_ps();
        for l in (0..k).step_by(KN) {
            // SAFETY: the caller's promise.
            unsafe {
                let a = std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(
                    x.add(2 * l) as *const __m512i
                ));
                let b = std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(
                    y.add(2 * l) as *const __m512i
                ));
                acc = _mm512_dpbf16_ps(acc, a, b);
            }
        }
        crate::dot::x86_bf16::reduce_add(acc)
    }
}
