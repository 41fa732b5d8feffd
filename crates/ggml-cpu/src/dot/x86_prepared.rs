//! A Q8_K column prepared once for all the rows of a one-column product, for the AVX-512
//! kernels that rearrange its activations (`x86_k23`'s Q3_K, `x86_iq4_xs`): per block four
//! activation registers, then four bias registers (512 bytes), as the kernel's own `column`
//! gives them.

use std::arch::x86_64::*;

/// f32 slots per block of a prepared column.
pub(crate) const PREP_SLOTS: usize = 128;

/// One block of a prepared column: its activation registers and their biases.
pub(super) type Block = ([__m512i; 4], [__m512i; 4]);

/// Fills `prep` (PREP_SLOTS * nb slots) with `column(ib)` for the nb blocks.
///
/// # Safety
/// AVX-512F; `column` may be called for every ib < nb.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn fill(nb: usize, prep: &mut [f32], column: impl Fn(usize) -> Block) {
    assert!(prep.len() >= PREP_SLOTS * nb);
    for (ib, slots) in prep.chunks_exact_mut(PREP_SLOTS).take(nb).enumerate() {
        let (yv, bias) = column(ib);
        let at = slots.as_mut_ptr() as *mut __m512i;
        for v in 0..4 {
            // SAFETY: slots holds 8 registers (512 bytes).
            unsafe {
                _mm512_storeu_si512(at.add(v), yv[v]);
                _mm512_storeu_si512(at.add(4 + v), bias[v]);
            }
        }
    }
}

/// Block ib of a prepared column.
///
/// # Safety
/// AVX-512F; prep holds more than ib blocks.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn block(prep: &[f32], ib: usize) -> Block {
    debug_assert!(prep.len() >= PREP_SLOTS * (ib + 1));
    // SAFETY: the caller's promise: 8 registers at block ib.
    unsafe {
        let at = prep.as_ptr().add(PREP_SLOTS * ib) as *const __m512i;
        (
            std::array::from_fn(|v| _mm512_loadu_si512(at.add(v))),
            std::array::from_fn(|v| _mm512_loadu_si512(at.add(4 + v))),
        )
    }
}
