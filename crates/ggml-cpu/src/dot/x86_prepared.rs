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

/// Defines `$name(nb, x, stride, y, prep, out, halves)`, one column's rows in one call for a
/// kernel `$kernel::<R>(nb, rows, y, column)` that returns R rows' 8-lane float sums: out[i] =
/// the dot product of the row at `x + i * stride` and column `y`, whose blocks `prep` holds
/// prepared, row after row or, with `halves`, row r of the first half of out beside row r of
/// the second (`x86_f16_rows::drive`).
macro_rules! rows_fn {
    ($(#[$attr:meta])* $name:ident, $kernel:ident, $feat:literal) => {
        $(#[$attr])*
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn $name(
            nb: usize,
            x: *const u8,
            stride: usize,
            y: *const u8,
            prep: &[f32],
            out: &mut [f32],
            halves: bool,
        ) {
            use super::x86::hsum_ps;
            use super::x86_prepared as prepared;
            assert!(prep.len() >= prepared::PREP_SLOTS * nb);
            // SAFETY: prep holds nb blocks.
            let col = |ib: usize| unsafe { prepared::block(prep, ib) };
            super::x86_f16_rows::drive(
                out,
                halves,
                |i| x.wrapping_add(i * stride),
                // SAFETY: every row the driver names exists (the caller's promise).
                |r| unsafe { hsum_ps($kernel::<1>(nb, &[r], y, col)[0]) },
                // SAFETY: as above.
                |r| unsafe {
                    let [a, b] = $kernel::<2>(nb, &r, y, col);
                    [hsum_ps(a), hsum_ps(b)]
                },
            );
        }
    };
}
pub(super) use rows_fn;

/// A prepared kernel's rows entry (`x86_k23::q3_k_rows`, `x86_iq4_xs::rows`).
pub(crate) type RowsFn = unsafe fn(usize, *const u8, usize, *const u8, &[f32], &mut [f32], bool);

/// A weight type's prepared kernel: `prep(nb, y, buf)` fills a column's PREP_SLOTS * nb slots
/// once per product, `rows` takes the chunks of rows.
#[derive(Clone, Copy)]
pub(crate) struct Kernel {
    pub prep: unsafe fn(usize, *const u8, &mut [f32]),
    pub rows: RowsFn,
}

/// The prepared kernel of `ty` on this CPU, if it has one: Q3_K (the AVX-512 dot-product set
/// and GFNI) and IQ4_XS (and BMI2).
pub(crate) fn kernel(ty: ggml::Type) -> Option<Kernel> {
    let cpu = crate::simd::features::cpu();
    match ty {
        ggml::Type::Q3K if cpu.avx512_q3_k() => Some(Kernel {
            prep: super::x86_k23::q3_k_prep,
            rows: super::x86_k23::q3_k_rows,
        }),
        ggml::Type::Iq4Xs if cpu.avx512_iq4_xs() => Some(Kernel {
            prep: super::x86_iq4_xs::prep,
            rows: super::x86_iq4_xs::rows,
        }),
        _ => None,
    }
}

/// The test of a prepared kernel: on random blocks (`block` bytes, the f16 d at byte `d_at`)
/// every row of a chunk, one by one and by halves (odd and even row counts), equals the one-row
/// dot product `one` to the bit (whose bits `tests_ggml` checks against llama.cpp's).
///
/// # Safety
/// The kernels' CPU features are present.
#[cfg(test)]
pub(super) unsafe fn check_rows(
    block: usize,
    d_at: usize,
    one: fn(usize, &[u8], &[u8]) -> f32,
    prep: unsafe fn(usize, *const u8, &mut [f32]),
    rows: RowsFn,
) {
    let mut rng = super::test_rows::Rng(0x5851_F42D_4C95_7F2D);
    for nb in [1usize, 2, 3, 8] {
        for nrows in [1usize, 2, 7, 16] {
            let mut x = vec![0u8; block * nb * nrows];
            for (i, b) in x.iter_mut().enumerate() {
                // random codes and scales; d a small positive half
                *b = match i % block {
                    o if o == d_at => 0x66,
                    o if o == d_at + 1 => 0x1a,
                    _ => rng.byte(),
                };
            }
            let mut y = vec![0u8; 292 * nb];
            for (i, b) in y.iter_mut().enumerate() {
                *b = match i % 292 {
                    0..4 => [0x00, 0x00, 0x80, 0x3c][i % 292],
                    // Q8_K codes stay within -127..=127
                    4..260 => (rng.byte() as i8).max(-127) as u8,
                    _ => 0,
                };
            }
            let row_bytes = block * nb;
            let want: Vec<u32> = (0..nrows)
                .map(|r| one(256 * nb, &x[r * row_bytes..(r + 1) * row_bytes], &y).to_bits())
                .collect();
            let mut buf = vec![0f32; PREP_SLOTS * nb];
            // SAFETY: the caller's promise; y holds nb blocks.
            unsafe { prep(nb, y.as_ptr(), &mut buf) };
            for halves in [false, true] {
                let mut out = vec![0f32; nrows];
                // SAFETY: as above; nrows rows of nb blocks, row_bytes apart.
                unsafe {
                    rows(
                        nb,
                        x.as_ptr(),
                        row_bytes,
                        y.as_ptr(),
                        &buf,
                        &mut out,
                        halves,
                    )
                };
                let got: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
                assert_eq!(got, want, "{nb} blocks, {nrows} rows, halves {halves}");
            }
        }
    }
}
