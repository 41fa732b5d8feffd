//! Register tiles for Q8_0, Q4_0 and Q5_0 weights times Q8_0 activations: RM weight rows by RN
//! columns per pass, so each weight block is loaded (and for Q4_0 unpacked) once for RN
//! columns and each activation block once for RM rows. Every cell is accumulated exactly as
//! the AVX2 dot kernels do (per block: f32(dx) * f32(dy) times the exact integer block sum,
//! fused into 8 f32 lanes, summed across lanes at the end), so a tile's results equal the
//! dot products of those kernels. The exceptions are `QElem::Q4_0Repacked` and
//! `QElem::Iq4NlRepacked`, which follow llama.cpp's repacked q4_0_8x8 / iq4_nl_8x8 gemm/gemv
//! instead.

use super::gemm::RM;
#[cfg(test)]
use super::gemm::RN;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum QElem {
    Q8_0,
    Q4_0,
    Q5_0,
    /// Q4_0 weights that llama.cpp repacks at load (q4_0_8x8, rows % 8 == 0 on AVX2): its
    /// gemm/gemv take the exact integer sum of each block and fuse it, times f32(dx) * f32(dy),
    /// into one f32 accumulator per output in block order.
    Q4_0Repacked,
    /// IQ4_NL weights that llama.cpp repacks likewise (iq4_nl_8x8): the same gemm/gemv as
    /// Q4_0's (one template), the nibbles looked up in kvalues_iq4nl instead of less 8.
    Iq4NlRepacked,
    /// Q4_1 weights times Q8_1 activations (AVX-512 VNNI or AVX2: `q4_1_available`), in the
    /// order of the AVX2 dot product (`dot::x86_q4_1`).
    Q4_1,
    /// Q5_1 weights times Q8_1 activations, likewise.
    Q5_1,
}

/// Whether Q4_1 / Q5_1 weights take the register tiles (`QElem::Q4_1`, `QElem::Q5_1`).
pub(crate) fn q4_1_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // AVX-512 VNNI's tile (x86_q4_1), else AVX2's (dot::x86::q4_1_tile_k2)
        crate::dot::x86_q4_1::available() || available()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
fn features() -> (bool, bool) {
    let f = crate::simd::features::cpu();
    // F16C converts the block scales (exact, so the scalar conversion's bits)
    (f.avx2_fma() && f.f16c(), f.avx2_vnni() && f.f16c())
}

pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        features().0
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// out[r * C + c] = dot(a[r], b[c]) over `nb` blocks: RM weight rows by C columns.
///
/// # Safety
/// `available()` must hold; each a[r] points at nb blocks of `e`, each b[c] at nb Q8_0 blocks;
/// out holds RM * C floats.
pub(crate) unsafe fn tile<const C: usize>(
    e: QElem,
    nb: usize,
    a: &[*const u8; RM],
    b: &[*const u8; C],
    out: &mut [f32],
) {
    // SAFETY: the caller's promise.
    unsafe { run::<RM, C>(e, nb, a, b, out) }
}

/// Q8_0 on AVX2 without VNNI (the passes of two columns `run` takes there): the 4 x C tile's
/// cells stored straight into rows r..r + 4 of each column, `dst[c]`, each column's four as one
/// vector (the same bits as `tile`). False, doing nothing, where `tile` runs another kernel.
///
/// # Safety
/// As for `tile`; each dst[c] has 4 writable floats.
pub(crate) unsafe fn q8_0_to_dst<const C: usize>(
    nb: usize,
    a: &[*const u8; RM],
    b: &[*const u8; C],
    dst: &[*mut f32; C],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let (avx2, vnni) = features();
        if !avx2 || vnni || !C.is_multiple_of(2) || RM != 4 {
            return false;
        }
        let a: &[*const u8; 4] = a[..].try_into().expect("four rows");
        for c in (0..C).step_by(2) {
            // SAFETY: the caller's promise; the features were checked above.
            unsafe {
                crate::dot::x86_q8_0_tile::q8_0_4x2_to(
                    nb,
                    a,
                    &[b[c], b[c + 1]],
                    [dst[c], dst[c + 1]],
                )
            };
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (nb, a, b, dst);
        false
    }
}

/// Columns one pass of the AVX-512 Q8_0 tile takes (three registers of two cells per row).
pub(crate) const Q8_0_ZMM_COLS: usize = 6;

/// Whether Q8_0 tiles `Q8_0_ZMM_COLS` columns wide (or multiples) take the AVX-512 VNNI
/// kernel, whose cost per cell is half the 256-bit one's: then wider Q8_0 tiles pay.
pub(crate) fn q8_0_zmm_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::simd::features::cpu().avx512_dot()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether Q8_0 tiles wider than `RN` pay: with AVX-512 VNNI (two cells a register), and on
/// AVX2 without VNNI, whose tiles run as passes of the 4 x 2 kernel (`dot::x86_q8_0_tile`), so
/// an even width spares the one-column pass an odd one ends with.
pub(crate) fn q8_0_wide() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        q8_0_zmm_available() || !features().1
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Rows that go down one column together: their dot products are independent chains.
pub(crate) const COLUMN_ROWS: usize = 4;

/// out[r] = dot(a[r], y) over `nb` blocks: one activation column, several weight rows at once.
///
/// # Safety
/// As for `tile`, with one column.
pub(crate) unsafe fn column(
    e: QElem,
    nb: usize,
    a: &[*const u8; COLUMN_ROWS],
    y: *const u8,
    out: &mut [f32; COLUMN_ROWS],
) {
    // SAFETY: the caller's promise.
    unsafe { run::<COLUMN_ROWS, 1>(e, nb, a, &[y], out) }
}

/// A 4 x C tile as passes of `two` columns (and one of `one` for an odd last column),
/// out[r * C + c].
///
/// # Safety
/// As for `tile`; the kernels run on this CPU.
#[cfg(target_arch = "x86_64")]
unsafe fn in_pairs<const C: usize>(
    two: unsafe fn(usize, &[*const u8; 4], &[*const u8; 2], &mut [f32]),
    one: unsafe fn(usize, &[*const u8; 4], &[*const u8; 1], &mut [f32]),
    nb: usize,
    a: &[*const u8; 4],
    b: &[*const u8; C],
    out: &mut [f32],
) {
    let mut o = [0.0f32; 8];
    for c in (0..C).step_by(2) {
        let w = (C - c).min(2);
        // SAFETY: the caller's promise; o holds 8 floats.
        unsafe {
            if w == 2 {
                two(nb, a, &[b[c], b[c + 1]], &mut o);
            } else {
                one(nb, a, &[b[c]], &mut o[..4]);
            }
        }
        for r in 0..4 {
            for j in 0..w {
                out[r * C + c + j] = o[r * w + j];
            }
        }
    }
}

/// # Safety
/// As for `tile`; out holds R * C floats.
unsafe fn run<const R: usize, const C: usize>(
    e: QElem,
    nb: usize,
    a: &[*const u8; R],
    b: &[*const u8; C],
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    {
        let vnni = features().1;
        match (e, vnni) {
            // AVX-512 VNNI: two cells per register (same bits), for widths of whole groups
            (QElem::Q8_0, true) if C.is_multiple_of(Q8_0_ZMM_COLS) && q8_0_zmm_available() => {
                x86::q8_0_zmm(nb, a, b, out)
            }
            // AVX2's 16 registers: more than 4 x 2 accumulators and their operands spill, so
            // passes of two columns of gemm4xN's layout (dot::x86_q8_0_tile), same cells (Q4_0
            // and Q5_0 keep their wide tiles: unpacking their blocks once for many columns pays
            // for the spills)
            (QElem::Q8_0, false) if R == 4 => {
                let a: &[*const u8; 4] = a[..].try_into().expect("four rows");
                use crate::dot::x86_q8_0_tile::{q8_0_4x2, q8_0_4xc};
                in_pairs::<C>(q8_0_4x2, q8_0_4xc::<1>, nb, a, b, out)
            }
            (QElem::Q8_0, false) => x86::q8_0(nb, a, b, out),
            (QElem::Q8_0, true) => x86::q8_0_vnni(nb, a, b, out),
            (QElem::Q4_0, false) => x86::q4_0(nb, a, b, out),
            (QElem::Q4_0, true) => x86::q4_0_vnni(nb, a, b, out),
            // AVX-512 VNNI: two cells per register (same bits)
            (QElem::Q5_0, true) if R == 4 && crate::dot::x86_q4_1::available() => {
                let a: &[*const u8; 4] = a[..].try_into().expect("four rows");
                crate::dot::x86_q4_1::q5_0_tile::<C>(nb, a, b, out)
            }
            (QElem::Q5_0, false) => x86::q5_0(nb, a, b, out),
            (QElem::Q5_0, true) => x86::q5_0_vnni(nb, a, b, out),
            (QElem::Q4_0Repacked, _) => x86::q4_b32_repacked::<R, C, false>(nb, a, b, out),
            (QElem::Iq4NlRepacked, _) => x86::q4_b32_repacked::<R, C, true>(nb, a, b, out),
            (QElem::Q4_1 | QElem::Q5_1, _) if !crate::dot::x86_q4_1::available() => {
                assert!(R == 4 && available());
                let a: &[*const u8; 4] = a[..].try_into().expect("four rows");
                use crate::dot::x86::{q4_1_tile_k2, q5_1_tile_k2};
                // (the wide tiles, spilled or not, measured faster than passes of two columns)
                if e == QElem::Q4_1 {
                    q4_1_tile_k2::<C>(nb, a, b, out)
                } else {
                    q5_1_tile_k2::<C>(nb, a, b, out)
                }
            }
            (QElem::Q4_1 | QElem::Q5_1, _) => {
                assert!(R == 4 && q4_1_available());
                let a: &[*const u8; 4] = a[..].try_into().expect("four rows");
                if e == QElem::Q4_1 {
                    crate::dot::x86_q4_1::q4_1_tile::<C, false>(nb, a, b, out)
                } else {
                    crate::dot::x86_q4_1::q4_1_tile::<C, true>(nb, a, b, out)
                }
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (e, nb, a, b, out);
        unreachable!("quantized tiles are x86-only");
    }
}

/// One Q4_0 (or IQ4_NL) row times one Q8_0 column over `nb` blocks in the order of
/// `QElem::Q4_0Repacked` (`QElem::Iq4NlRepacked`): llama.cpp's gemv for repacked weights.
///
/// # Safety
/// `available()` must hold; x covers nb blocks of `e` and y nb Q8_0 blocks.
pub(crate) unsafe fn repacked_dot(e: QElem, nb: usize, x: *const u8, y: *const u8) -> f32 {
    let mut out = [0.0f32];
    // SAFETY: the caller's promise.
    unsafe { run::<1, 1>(e, nb, &[x], &[y], &mut out) };
    out[0]
}

/// Rows that `column8` takes at once.
pub(crate) const COLUMN8_ROWS: usize = 8;

/// out[r] = `repacked_dot(QElem::Q4_0Repacked, ..)` of row a[r] and column y, eight Q4_0 rows
/// at once (the same bits, in fewer instructions).
///
/// # Safety
/// `available()` must hold; each a[r] covers nb Q4_0 blocks and y nb Q8_0 blocks.
pub(crate) unsafe fn column8_q4_0(
    nb: usize,
    a: &[*const u8; COLUMN8_ROWS],
    y: *const u8,
    out: &mut [f32; COLUMN8_ROWS],
) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the caller's promise.
        unsafe { x86::q4_0_repacked_col8(nb, a, y, out) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (nb, a, y, out);
        unreachable!("quantized tiles are x86-only");
    }
}

/// Weight rows of one VNNI panel (one per i32 lane of a 512-bit register).
pub(crate) const PANEL_ROWS: usize = 16;
/// Activation columns one pass over a packed panel takes (one accumulator register each).
pub(crate) const PANEL_COLS: usize = 8;
/// Bytes of one block of a 16-row nibble panel (`repack`): the 16 row scales (f16), then
/// four vectors of 16 rows x 4 quant bytes.
pub(crate) const PACKED_BLOCK_BYTES: usize = 16 * 18;
/// Bytes of one block of a column's sums: -bias * sum(y) as i32, then f32(dy).
pub(crate) const COLSUM_BLOCK_BYTES: usize = 8;

/// The instruction set of the nibble-panel kernels (`col_sums`, `packed_tile`, `packed_gemv`):
/// AVX-512 VNNI's (16 rows a register) or AVX2's (8 rows a register, `vpmaddubsw`). Both take
/// the exact integer block sums and the same float steps, so they give the same bits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PanelIsa {
    Vnni,
    Avx2,
}

/// The fastest panel kernels this CPU runs, if any (CPU_REPACK needs AVX2, FMA and F16C, so
/// every repacked weight has one).
pub(crate) fn panel_isa() -> Option<PanelIsa> {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::simd::features::cpu().avx512_dot() {
            return Some(PanelIsa::Vnni);
        }
    }
    available().then_some(PanelIsa::Avx2)
}

/// Every panel kernel set this CPU runs, the fastest first.
pub(crate) fn panel_isas() -> Vec<PanelIsa> {
    let mut v: Vec<PanelIsa> = panel_isa().into_iter().collect();
    if v == [PanelIsa::Vnni] {
        v.push(PanelIsa::Avx2);
    }
    v
}

/// Per block of one Q8_0 column: -bias * sum(y) (the bias of the packed values for e: 8 or 128)
/// and f32(dy), for `packed_tile`.
///
/// # Safety
/// isa is one of `panel_isas()`; y covers nb Q8_0 blocks; out has nb * `COLSUM_BLOCK_BYTES`
/// writable bytes.
pub(crate) unsafe fn col_sums(isa: PanelIsa, e: QElem, nb: usize, y: *const u8, out: *mut u8) {
    #[cfg(target_arch = "x86_64")]
    {
        let bias = if e == QElem::Iq4NlRepacked { 128 } else { 8 };
        // SAFETY: the caller's promise.
        unsafe {
            match isa {
                PanelIsa::Vnni => x86::col_sums(bias, nb, y, out),
                PanelIsa::Avx2 => x86::col_sums_avx2(bias, nb, y, out),
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, e, nb, y, out);
        unreachable!("panel kernels are x86-only");
    }
}

/// Columns one pass of the AVX2 panel kernel takes: eight registers hold a half panel's
/// unpacked block, four accumulate.
#[cfg(target_arch = "x86_64")]
const AVX2_PANEL_COLS: usize = 4;

/// out[c][r] = `repacked_dot(e, ..)` of the panel's row r and column b[c] (the same bits:
/// exact integer block sums, then one FMA per block in block order), for C = 1..=8 columns.
///
/// # Safety
/// isa is one of `panel_isas()`; panel is nb blocks of a 16-row nibble panel of `e`
/// (`repack::pack`, `PACKED_BLOCK_BYTES` each); each b[c] covers nb Q8_0 blocks and sums[c]
/// that column's nb blocks from `col_sums(isa, e, ..)`.
pub(crate) unsafe fn packed_tile<const C: usize>(
    isa: PanelIsa,
    e: QElem,
    nb: usize,
    panel: *const u8,
    b: &[*const u8; C],
    sums: &[*const u8; C],
    out: &mut [[f32; PANEL_ROWS]; C],
) {
    #[cfg(target_arch = "x86_64")]
    {
        let nl = match e {
            QElem::Q4_0Repacked => false,
            QElem::Iq4NlRepacked => true,
            _ => unreachable!("panels are for the repacked 4-bit types"),
        };
        // SAFETY: the caller's promise.
        unsafe {
            match (isa, nl) {
                (PanelIsa::Vnni, false) => x86::packed_tile::<false, C>(nb, panel, b, sums, out),
                (PanelIsa::Vnni, true) => x86::packed_tile::<true, C>(nb, panel, b, sums, out),
                (PanelIsa::Avx2, _) => {
                    let mut k = 0;
                    while k < C {
                        macro_rules! pass {
                            ($w:expr) => {{
                                let bk: &[*const u8; $w] = b[k..k + $w].try_into().unwrap();
                                let sk: &[*const u8; $w] = sums[k..k + $w].try_into().unwrap();
                                let ok: &mut [[f32; PANEL_ROWS]; $w] =
                                    (&mut out[k..k + $w]).try_into().unwrap();
                                if nl {
                                    x86::packed_tile_avx2::<true, $w>(nb, panel, bk, sk, ok)
                                } else {
                                    x86::packed_tile_avx2::<false, $w>(nb, panel, bk, sk, ok)
                                }
                                $w
                            }};
                        }
                        k += match C - k {
                            AVX2_PANEL_COLS.. => pass!(AVX2_PANEL_COLS),
                            3 => pass!(3),
                            2 => pass!(2),
                            _ => pass!(1),
                        };
                    }
                }
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, e, nb, panel, b, sums, out);
        unreachable!("panel kernels are x86-only");
    }
}

/// One column times P full panels: out[q][r] = `packed_tile::<1>` of panels[q]'s row r (the
/// same bits), the P panels read side by side.
///
/// # Safety
/// As for `packed_tile` with C = 1, for each of the P panels (full, 16 rows).
pub(crate) unsafe fn packed_gemv<const P: usize>(
    isa: PanelIsa,
    e: QElem,
    nb: usize,
    panels: &[*const u8; P],
    y: *const u8,
    sums: *const u8,
    out: &mut [[f32; PANEL_ROWS]; P],
) {
    #[cfg(target_arch = "x86_64")]
    {
        // a panel is one stretch of nb * PACKED_BLOCK_BYTES bytes, streamed like a row that long
        let pf =
            crate::simd::features::cpu().prefetch_rows(ggml::Type::Q4_0, nb * PACKED_BLOCK_BYTES);
        // SAFETY: the caller's promise.
        unsafe {
            match (isa, e) {
                (PanelIsa::Vnni, QElem::Q4_0Repacked) => {
                    x86::packed_gemv::<false, P>(nb, panels, y, sums, out, pf)
                }
                (PanelIsa::Vnni, QElem::Iq4NlRepacked) => {
                    x86::packed_gemv::<true, P>(nb, panels, y, sums, out, pf)
                }
                (PanelIsa::Avx2, QElem::Q4_0Repacked) => {
                    x86::packed_gemv_avx2::<false, P>(nb, panels, y, sums, out, pf)
                }
                (PanelIsa::Avx2, QElem::Iq4NlRepacked) => {
                    x86::packed_gemv_avx2::<true, P>(nb, panels, y, sums, out, pf)
                }
                _ => unreachable!("panels are for the repacked 4-bit types"),
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, e, nb, panels, y, sums, out);
        unreachable!("panel kernels are x86-only");
    }
}

#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::dot::{traits_for, SimdLevel};
    use ggml::Type;

    #[test]
    fn repacked_q4_0_and_iq4_nl_sum_whole_blocks_into_one_accumulator() {
        if !available() {
            return;
        }
        let k = 32 * 9;
        let nb = k / 32;
        fn nl(q: u8) -> i32 {
            ggml::quants::KVALUES_IQ4NL[q as usize] as i32
        }
        fn q4(q: u8) -> i32 {
            q as i32 - 8
        }
        type Value = fn(u8) -> i32;
        let kinds: [(Type, QElem, Value); 2] = [
            (Type::Q4_0, QElem::Q4_0Repacked, q4),
            (Type::Iq4Nl, QElem::Iq4NlRepacked, nl),
        ];
        for (ty, elem, value) in kinds {
            let tr = traits_for(SimdLevel::Avx2, ty).expect("traits");
            let quant = |ty: Type, seed: usize| -> Vec<u8> {
                let v: Vec<f32> = (0..k)
                    .map(|i| (((i * 37 + seed * 11) % 101) as f32 - 50.0) / 7.0)
                    .collect();
                let mut out = vec![0u8; ty.row_size(k as i64)];
                if ty == Type::Q8_0 {
                    (tr.from_float)(&v, &mut out);
                } else {
                    ggml::quants::quantize_row_ref(ty, &v, &mut out);
                }
                out
            };
            let half = |p: &[u8]| crate::fp::f16_to_f32(u16::from_le_bytes([p[0], p[1]]));
            // llama.cpp's q4_0_8x8 / iq4_nl_8x8 order: exact integer block sum, then one FMA
            // per block
            let reference = |x: &[u8], y: &[u8]| -> f32 {
                let mut acc = 0.0f32;
                for ib in 0..nb {
                    let (xb, yb) = (&x[18 * ib..18 * ib + 18], &y[34 * ib..34 * ib + 34]);
                    let mut isum = 0i32;
                    for j in 0..16 {
                        let (lo, hi) = (value(xb[2 + j] & 0x0F), value(xb[2 + j] >> 4));
                        isum += lo * yb[2 + j] as i8 as i32 + hi * yb[18 + j] as i8 as i32;
                    }
                    acc = (isum as f32).mul_add(half(xb) * half(yb), acc);
                }
                acc
            };
            let rows: Vec<Vec<u8>> = (0..RM).map(|r| quant(ty, r)).collect();
            let cols: Vec<Vec<u8>> = (0..RN).map(|c| quant(Type::Q8_0, 20 + c)).collect();
            let a: [*const u8; RM] = std::array::from_fn(|r| rows[r].as_ptr());
            let b: [*const u8; RN] = std::array::from_fn(|c| cols[c].as_ptr());
            let mut out = [0.0f32; RM * RN];
            // SAFETY: available() holds and every pointer covers nb blocks.
            unsafe { tile(elem, nb, &a, &b, &mut out) };
            for r in 0..RM {
                for c in 0..RN {
                    let want = reference(&rows[r], &cols[c]);
                    assert_eq!(
                        out[r * RN + c].to_bits(),
                        want.to_bits(),
                        "{ty} row {r} col {c}"
                    );
                    // SAFETY: as above.
                    let one = unsafe { repacked_dot(elem, nb, rows[r].as_ptr(), cols[c].as_ptr()) };
                    assert_eq!(one.to_bits(), want.to_bits(), "{ty} gemv row {r} col {c}");
                }
            }
        }
    }

    #[test]
    fn packed_panels_equal_the_repacked_order() {
        if !available() || panel_isas().is_empty() {
            eprintln!("skipped: this CPU has no panel kernels (AVX2, FMA, F16C)");
            return;
        }
        for isa in panel_isas() {
            packed_panels_on(isa);
        }
    }

    fn packed_panels_on(isa: PanelIsa) {
        // random raw blocks (every nibble, y -127..127, scales of both signs), several
        // block counts; each cell against the scalar order and the AVX2 repacked gemv
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let half = |p: &[u8]| crate::fp::f16_to_f32(u16::from_le_bytes([p[0], p[1]]));
        fn nl(q: u8) -> i32 {
            ggml::quants::KVALUES_IQ4NL[q as usize] as i32
        }
        fn q4(q: u8) -> i32 {
            q as i32 - 8
        }
        type Value = fn(u8) -> i32;
        let kinds: [(QElem, Value); 2] = [(QElem::Q4_0Repacked, q4), (QElem::Iq4NlRepacked, nl)];
        for (elem, nb) in kinds
            .iter()
            .flat_map(|k| [1usize, 2, 7, 64].map(|nb| (*k, nb)))
        {
            let (elem, value) = elem;
            let mut block = |size: usize| -> Vec<u8> {
                let mut v: Vec<u8> = (0..size * nb).map(|_| next() as u8).collect();
                if size == 34 {
                    // Q8_0 quants are -127..127 (the AVX2 IQ4_NL gemv's sign trick wraps -128)
                    v.iter_mut().filter(|q| **q == 0x80).for_each(|q| *q = 0x81);
                }
                for ib in 0..nb {
                    let d = ((next() % 2001) as f32 - 1000.0) / 3000.0;
                    let h = crate::fp::f32_to_f16(d).to_le_bytes();
                    v[size * ib..size * ib + 2].copy_from_slice(&h);
                }
                v
            };
            let rows: Vec<Vec<u8>> = (0..PANEL_ROWS).map(|_| block(18)).collect();
            let cols: Vec<Vec<u8>> = (0..PANEL_COLS).map(|_| block(34)).collect();
            let reference = |x: &[u8], y: &[u8]| -> f32 {
                let mut acc = 0.0f32;
                for ib in 0..nb {
                    let (xb, yb) = (&x[18 * ib..18 * ib + 18], &y[34 * ib..34 * ib + 34]);
                    let mut isum = 0i32;
                    for j in 0..16 {
                        let (lo, hi) = (value(xb[2 + j] & 0x0F), value(xb[2 + j] >> 4));
                        isum += lo * yb[2 + j] as i8 as i32 + hi * yb[18 + j] as i8 as i32;
                    }
                    acc = (isum as f32).mul_add(half(xb) * half(yb), acc);
                }
                acc
            };
            let a: [*const u8; PANEL_ROWS] = std::array::from_fn(|r| rows[r].as_ptr());
            let b: [*const u8; PANEL_COLS] = std::array::from_fn(|c| cols[c].as_ptr());
            // the 16 rows in CPU_REPACK's layout
            let plain: Vec<u8> = rows.concat();
            let mut panel = vec![0u8; nb * PACKED_BLOCK_BYTES];
            let ne = [32 * nb as i64, PANEL_ROWS as i64, 1, 1];
            crate::repack::pack(crate::repack::Layout::NibblePanels, ne, &plain, &mut panel);
            // and the rows in reverse, for the several-panel gemv
            let reversed: Vec<u8> = rows.iter().rev().flatten().copied().collect();
            let mut panel_rev = vec![0u8; nb * PACKED_BLOCK_BYTES];
            let rev = &mut panel_rev;
            crate::repack::pack(crate::repack::Layout::NibblePanels, ne, &reversed, rev);
            let mut sums = vec![vec![0u8; nb * COLSUM_BLOCK_BYTES]; PANEL_COLS];
            let mut out = [[0.0f32; PANEL_ROWS]; PANEL_COLS];
            let mut one = [[0.0f32; PANEL_ROWS]; 1];
            let mut three = [[0.0f32; PANEL_ROWS]; 3];
            let mut gemv4 = [[0.0f32; PANEL_ROWS]; 4];
            let mut gemv1 = [[0.0f32; PANEL_ROWS]; 1];
            // SAFETY: isa is one this CPU runs; every pointer covers nb blocks and every
            // buffer the bytes its kernel writes.
            unsafe {
                for (c, s) in sums.iter_mut().enumerate() {
                    col_sums(isa, elem, nb, b[c], s.as_mut_ptr());
                }
                let sp: [*const u8; PANEL_COLS] = std::array::from_fn(|c| sums[c].as_ptr());
                packed_tile(isa, elem, nb, panel.as_ptr(), &b, &sp, &mut out);
                packed_tile(isa, elem, nb, panel.as_ptr(), &[b[5]], &[sp[5]], &mut one);
                let (b3, s3) = ([b[1], b[2], b[7]], [sp[1], sp[2], sp[7]]);
                packed_tile(isa, elem, nb, panel.as_ptr(), &b3, &s3, &mut three);
                let (p, q) = (panel.as_ptr(), panel_rev.as_ptr());
                packed_gemv(isa, elem, nb, &[p, q, q, p], b[5], sp[5], &mut gemv4);
                packed_gemv(isa, elem, nb, &[q], b[2], sp[2], &mut gemv1);
            }
            for r in 0..PANEL_ROWS {
                let (fwd, back) = (out[5][r].to_bits(), out[5][PANEL_ROWS - 1 - r].to_bits());
                let got = gemv4.map(|o| o[r].to_bits());
                assert_eq!(got, [fwd, back, back, fwd], "4-panel gemv, row {r}");
                let back2 = out[2][PANEL_ROWS - 1 - r].to_bits();
                assert_eq!(gemv1[0][r].to_bits(), back2, "1-panel gemv, row {r}");
            }
            for r in 0..PANEL_ROWS {
                assert_eq!(
                    one[0][r].to_bits(),
                    out[5][r].to_bits(),
                    "one column, row {r}"
                );
                for (k, c) in [1, 2, 7].into_iter().enumerate() {
                    assert_eq!(
                        three[k][r].to_bits(),
                        out[c][r].to_bits(),
                        "3 columns, row {r}"
                    );
                }
            }
            for r in 0..PANEL_ROWS {
                for c in 0..PANEL_COLS {
                    let want = reference(&rows[r], &cols[c]);
                    assert_eq!(
                        out[c][r].to_bits(),
                        want.to_bits(),
                        "{isa:?} {elem:?} nb {nb} row {r} col {c}"
                    );
                    // SAFETY: available() holds and both pointers cover nb blocks.
                    let gemv = unsafe { repacked_dot(elem, nb, a[r], b[c]) };
                    assert_eq!(
                        gemv.to_bits(),
                        want.to_bits(),
                        "{elem:?} nb {nb} gemv row {r} col {c}"
                    );
                }
            }
        }
    }

    #[test]
    fn column8_equals_the_repacked_gemv() {
        if !available() {
            return;
        }
        let k = 32 * 11;
        let nb = k / 32;
        let tr = traits_for(SimdLevel::Avx2, Type::Q4_0).expect("traits");
        let vals = |seed: usize| -> Vec<f32> {
            (0..k)
                .map(|i| (((i * 41 + seed * 13) % 103) as f32 - 51.0) / 9.0)
                .collect()
        };
        let rows: Vec<Vec<u8>> = (0..COLUMN8_ROWS)
            .map(|r| {
                let mut out = vec![0u8; Type::Q4_0.row_size(k as i64)];
                ggml::quants::quantize_row_ref(Type::Q4_0, &vals(r), &mut out);
                out
            })
            .collect();
        let mut y = vec![0u8; Type::Q8_0.row_size(k as i64)];
        (tr.from_float)(&vals(99), &mut y);
        let a: [*const u8; COLUMN8_ROWS] = std::array::from_fn(|r| rows[r].as_ptr());
        let mut out = [0.0f32; COLUMN8_ROWS];
        // SAFETY: available() holds and every pointer covers nb blocks.
        unsafe { column8_q4_0(nb, &a, y.as_ptr(), &mut out) };
        for r in 0..COLUMN8_ROWS {
            // SAFETY: as above.
            let want = unsafe { repacked_dot(QElem::Q4_0Repacked, nb, a[r], y.as_ptr()) };
            assert_eq!(out[r].to_bits(), want.to_bits(), "row {r}");
        }
    }

    #[test]
    fn avx512_q8_0_tiles_equal_the_256_bit_ones() {
        if !available() || !features().1 || !q8_0_zmm_available() {
            return;
        }
        // random raw blocks: quants -127..127 (what quantization makes), every sign of scale
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for nb in [1usize, 3, 64] {
            let mut block = || -> Vec<u8> {
                let mut v: Vec<u8> = (0..34 * nb).map(|_| next() as u8).collect();
                v.iter_mut().filter(|q| **q == 0x80).for_each(|q| *q = 0x81);
                for ib in 0..nb {
                    let d = ((next() % 2001) as f32 - 1000.0) / 3000.0;
                    let h = crate::fp::f32_to_f16(d).to_le_bytes();
                    v[34 * ib..34 * ib + 2].copy_from_slice(&h);
                }
                v
            };
            const C: usize = 3 * Q8_0_ZMM_COLS;
            let rows: Vec<Vec<u8>> = (0..RM).map(|_| block()).collect();
            let cols: Vec<Vec<u8>> = (0..C).map(|_| block()).collect();
            let a: [*const u8; RM] = std::array::from_fn(|r| rows[r].as_ptr());
            let b: [*const u8; C] = std::array::from_fn(|c| cols[c].as_ptr());
            let mut wide = [0.0f32; RM * C];
            let mut six = [0.0f32; RM * Q8_0_ZMM_COLS];
            // SAFETY: available() and q8_0_zmm_available() hold; every pointer covers nb blocks.
            unsafe {
                tile(QElem::Q8_0, nb, &a, &b, &mut wide);
                let b6: [*const u8; Q8_0_ZMM_COLS] = std::array::from_fn(|c| b[6 + c]);
                tile(QElem::Q8_0, nb, &a, &b6, &mut six);
            }
            for c in 0..C {
                let mut narrow = [0.0f32; RM * RN];
                // SAFETY: as above (the 256-bit kernel: RN columns, the same column thrice)
                unsafe { tile(QElem::Q8_0, nb, &a, &[b[c]; RN], &mut narrow) };
                for r in 0..RM {
                    let want = narrow[r * RN];
                    assert_eq!(
                        wide[r * C + c].to_bits(),
                        want.to_bits(),
                        "nb {nb} r {r} c {c}"
                    );
                    if (6..12).contains(&c) {
                        let got = six[r * Q8_0_ZMM_COLS + c - 6];
                        assert_eq!(got.to_bits(), want.to_bits(), "six: nb {nb} r {r} c {c}");
                    }
                }
            }
        }
    }

    #[test]
    fn tiles_equal_the_avx2_dot_products() {
        if !available() || !SimdLevel::available().contains(&SimdLevel::Avx2) {
            return;
        }
        let mut types = vec![
            (Type::Q8_0, QElem::Q8_0),
            (Type::Q4_0, QElem::Q4_0),
            (Type::Q5_0, QElem::Q5_0),
        ];
        if q4_1_available() {
            types.extend([(Type::Q4_1, QElem::Q4_1), (Type::Q5_1, QElem::Q5_1)]);
        }
        for (ty, q) in types {
            // the widths the matmul takes (RN, the wide tiles) and the paired passes' odd ones
            tile_equals_dot::<1>(ty, q);
            tile_equals_dot::<2>(ty, q);
            tile_equals_dot::<RN>(ty, q);
            tile_equals_dot::<5>(ty, q);
            tile_equals_dot::<18>(ty, q);
        }
    }

    fn tile_equals_dot<const C: usize>(ty: Type, q: QElem) {
        let k = 32 * 7;
        let vals = |seed: usize| -> Vec<f32> {
            (0..k)
                .map(|i| (((i * 31 + seed * 17) % 97) as f32 - 48.0) / 13.0)
                .collect()
        };
        let tr = traits_for(SimdLevel::Avx2, ty).expect("traits");
        let rows: Vec<Vec<u8>> = (0..RM)
            .map(|r| {
                let mut out = vec![0u8; ty.row_size(k as i64)];
                ggml::quants::quantize_row_ref(ty, &vals(r), &mut out);
                out
            })
            .collect();
        let cols: Vec<Vec<u8>> = (0..C)
            .map(|c| {
                let mut out = vec![0u8; tr.vec_dot_type.row_size(k as i64)];
                (tr.from_float)(&vals(10 + c), &mut out);
                out
            })
            .collect();
        let a: [*const u8; RM] = std::array::from_fn(|r| rows[r].as_ptr());
        let b: [*const u8; C] = std::array::from_fn(|c| cols[c].as_ptr());
        let mut out = vec![0.0f32; RM * C];
        // SAFETY: available() holds and every pointer covers k / 32 blocks.
        unsafe { tile(q, k / 32, &a, &b, &mut out) };
        for r in 0..RM {
            for c in 0..C {
                let want = (tr.vec_dot)(k, &rows[r], &cols[c]);
                assert_eq!(
                    out[r * C + c].to_bits(),
                    want.to_bits(),
                    "{ty} {C} columns: row {r} col {c}"
                );
            }
        }
    }
}
