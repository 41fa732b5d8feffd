//! BF16 weights times BF16 columns in llamafile's tinyBLAS order, as llama.cpp's AVX-512 build
//! with `__AVX512BF16__` runs them for batches (tinyBLAS<32, __m512, __m512bh>): each cell one
//! chain of vdpbf16ps over 32 values a step from zero, then GCC's _mm512_reduce_add_ps. The
//! tile shape does not change a cell's bits; RM x RN accumulators share each loaded vector.
//! This is the RM x RN tile (LLVM keeps its 12 sums in registers); the wide RM x RN_WIDE one
//! is `gemm`'s, its loop in assembly beside the F16 one.

use std::arch::x86_64::*;

use super::gemm::{RM, RN};

/// Values per step (tinyBLAS's KN for BF16).
const KN: usize = super::gemm::BF16_KN;

/// Whether the tiles run here: AVX-512F and AVX512_BF16.
pub(crate) fn available() -> bool {
    let f = crate::simd::features::cpu();
    f.avx512f && f.avx512bf16
}

/// The RM x RN cells of rows a[r] times columns b[c] over k values (a multiple of KN), cell
/// (r, c) at out[r * RN + c].
///
/// # Safety
/// `available()`; k % KN == 0; every a[r] and b[c] points at k readable BF16 values; out holds
/// RM * RN floats.
#[target_feature(enable = "avx512f,avx512bf16")]
pub(crate) unsafe fn tile(k: usize, a: &[*const u8; RM], b: &[*const u8; RN], out: &mut [f32]) {
    assert!(out.len() >= RM * RN);
    // __m512bh and __m512i are both 64 plain bytes
    let load = |p: *const u8| {
        // SAFETY: the callers below read 64 bytes inside a row (the caller's promise).
        unsafe { std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(p as *const __m512i)) }
    };
    let mut acc = [[_mm512_setzero_ps(); RM]; RN];
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
    for (j, accj) in acc.iter().enumerate() {
        for (r, c) in accj.iter().enumerate() {
            out[r * RN + j] = crate::dot::x86_bf16::reduce_add(*c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every cell of the wide 4 x 6 tile and of the 4 x 3 tile equals one vdpbf16ps chain over
    /// its row and column alone (tinyBLAS's cell), reduced as GCC reduces.
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
        let mut out = [0f32; RM * 6];
        // SAFETY: as above (the wide tile stores by column).
        unsafe {
            super::super::gemm::tile_wide(super::super::gemm::Elem::Bf16, k, &a, &b6, &mut out)
        };
        let mut o3 = [0f32; RM * 3];
        // SAFETY: as above.
        unsafe { tile(k, &a, &b3, &mut o3) };
        for r in 0..RM {
            for c in 0..6 {
                assert_eq!(
                    out[c * RM + r].to_bits(),
                    cell(r, c),
                    "4 x 6 cell ({r}, {c})"
                );
            }
            for c in 0..3 {
                assert_eq!(o3[r * 3 + c].to_bits(), cell(r, c), "4 x 3 cell ({r}, {c})");
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
