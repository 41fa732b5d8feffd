//! MUL_MAT of a weight held in CPU_REPACK (`repack`): Q4_0 / IQ4_NL in nibble panels times
//! Q8_0 columns, every cell in llama.cpp's repacked gemm/gemv order (`qtile::repacked_dot`),
//! Q4_K in interleaved 8-row groups times Q8_K columns (q4_K_8x8's orders, `q4_k`), Q2_K
//! in dword panels times Q8_K columns (q2_K_8x8's orders, `q2_k`), and MXFP4 in dword panels
//! times Q8_0 columns (mxfp4_8x8_q8_0's order, `mxfp4`).
//!
//! Work units are (panel, column group), panel-major within a group, taken from the shared
//! counter, so a thread computes a group's column sums once and one column (generation)
//! spreads its panels over the threads. The panels are read as they are (`qtile::packed_tile`,
//! 8 columns per pass with AVX-512 VNNI, 4 with AVX2, fewer for the last); only where a test
//! forces it is a panel put back in GGUF order in scratch memory for the row kernels of that
//! order (every CPU with CPU_REPACK has the AVX2 panel kernels).

use super::ktile;
use super::qtile::{
    self, PanelIsa, QElem, COLSUM_BLOCK_BYTES, PACKED_BLOCK_BYTES, PANEL_COLS, PANEL_ROWS,
};
use super::Params;
use crate::repack;
use crate::tref::TRef;
use ggml::Type;
use std::sync::atomic::Ordering;

/// Columns whose activation sums one thread keeps while it walks the weight's panels (their
/// Q8_0 rows, ~2 KiB each at K = 2048, stay in L2 while the group's panels stream past).
const GROUP: usize = 128;

/// How `b_row(c)` gives activation column c: its converted row and its (i11, i12, i13).
pub(crate) type BRow<'a> = &'a dyn Fn(usize) -> (*const u8, usize, usize, usize);

/// dst = a x b for `a` in CPU_REPACK; `b_row` gives b's columns in the weight's activation
/// type (Q8_0, or Q8_K for Q4_K).
pub(crate) fn mul_mat(p: &mut Params, a: &TRef, b: &TRef, d: &TRef, b_row: BRow) {
    let nr1 = d.ne[1] * d.ne[2] * d.ne[3];
    columns(p, a, b.ne[1], nr1, d, b_row);
}

/// The rows of the 2-D weight `a` (in CPU_REPACK) times the `nr1` columns `b_row(0..nr1)`, each
/// result stored at dst cell (row, b_row's (i11, i12, i13)); a column c takes the gemm's order
/// where c % ne11 is in the whole fours of ne11, else the gemv's (ne11 = 1: the gemv's for
/// all, as llama.cpp's repacked MUL_MAT_ID). Takes its units from `p.counter`, which must
/// hold `p.nth` when the threads enter.
pub(crate) fn columns(p: &mut Params, a: &TRef, ne11: usize, nr1: usize, d: &TRef, b_row: BRow) {
    match a.ty {
        Type::Q4K => q4_k(p, a, ne11, nr1, d, b_row),
        #[cfg(target_arch = "x86_64")]
        Type::Q2K => q2_k(p, a, ne11, nr1, d, b_row),
        #[cfg(target_arch = "x86_64")]
        Type::Mxfp4 => mxfp4(p, a, nr1, d, b_row),
        Type::Q4_0 => nibble_panels(p, QElem::Q4_0Repacked, a, nr1, d, b_row),
        _ => nibble_panels(p, QElem::Iq4NlRepacked, a, nr1, d, b_row),
    }
}

/// Q4_0 / IQ4_NL in nibble panels (`e` their repacked kind, nb blocks per row).
fn nibble_panels(p: &mut Params, e: QElem, a: &TRef, nr1: usize, d: &TRef, b_row: BRow) {
    let (nr0, nb) = (a.ne[1], a.ne[0] / 32);
    let row_bytes = nb * 18;
    let panels: Vec<(usize, usize)> = repack::panels(nr0).collect();
    let units = panels.len() * nr1.div_ceil(GROUP);
    let isa = nibble_isa();
    let counter = p.counter;
    let mut ch = p.ith;
    // scratch: a widened 8-row panel (or a panel in GGUF order) and one group's column sums
    let (panel_bytes, col_bytes) = (nb * PACKED_BLOCK_BYTES, nb * COLSUM_BLOCK_BYTES);
    let buf = p.scratch((panel_bytes + GROUP * col_bytes).div_ceil(4));
    let tmp = buf.as_mut_ptr() as *mut u8;
    // SAFETY: buf holds panel_bytes + GROUP * col_bytes bytes.
    let sums = unsafe { tmp.add(panel_bytes) };
    if let (1, Some(isa)) = (nr1, isa) {
        // SAFETY: as below; sums has room for one column.
        unsafe { panels_gemv(p, isa, e, a, d, b_row, &panels, tmp, sums) };
        return;
    }
    let mut group = usize::MAX;
    while ch < units {
        let (pi, g) = (ch % panels.len(), ch / panels.len());
        let (c0, c1) = (g * GROUP, ((g + 1) * GROUP).min(nr1));
        let (r0, n) = panels[pi];
        // the panel's bytes: its rows' place in the tensor (2-D: i02 = i03 = 0)
        let src = a.row_ptr(r0, 0, 0) as *const u8;
        let store = |c: usize, out: &[f32]| {
            let (_, i11, i12, i13) = b_row(c);
            for (r, v) in out.iter().enumerate().take(n) {
                // SAFETY: (r0 + r, c) is a cell of dst, which belongs to this unit only.
                unsafe { (d.ptr(r0 + r, i11, i12, i13) as *mut f32).write_unaligned(*v) };
            }
        };
        if let Some(isa) = isa {
            // SAFETY: isa is one this CPU runs; the weight is nr0 rows of nb blocks in the
            // layout of repack::pack, so the panel at r0 has n rows of nb blocks; every column
            // has nb Q8_0 blocks; sums has room for GROUP columns and tmp for one panel.
            unsafe {
                if g != group {
                    for c in c0..c1 {
                        qtile::col_sums(isa, e, nb, b_row(c).0, sums.add((c - c0) * col_bytes));
                    }
                    group = g;
                }
                let panel = if n == PANEL_ROWS {
                    src
                } else {
                    widen(src, nb, tmp);
                    tmp as *const u8
                };
                let mut c = c0;
                while c < c1 {
                    let left = c1 - c;
                    let col = |j: usize| b_row(c + j).0;
                    let sum = |j: usize| sums.add((c + j - c0) * col_bytes) as *const u8;
                    macro_rules! pass {
                        ($w:expr) => {{
                            let b: [*const u8; $w] = std::array::from_fn(col);
                            let s: [*const u8; $w] = std::array::from_fn(sum);
                            let mut out = [[0.0f32; PANEL_ROWS]; $w];
                            qtile::packed_tile(isa, e, nb, panel, &b, &s, &mut out);
                            for (j, o) in out.iter().enumerate() {
                                store(c + j, o);
                            }
                            $w
                        }};
                    }
                    c += match left {
                        PANEL_COLS.. => pass!(PANEL_COLS),
                        4..=7 => pass!(4),
                        2..=3 => pass!(2),
                        _ => pass!(1),
                    };
                }
            }
        } else {
            // SAFETY: as above for the panel and the columns; tmp has room for n <= 16 rows in
            // GGUF order (panel_bytes = 16 rows of nb blocks of 18 bytes).
            unsafe {
                let packed = std::slice::from_raw_parts(src, n * row_bytes);
                let rows = std::slice::from_raw_parts_mut(tmp, n * row_bytes);
                repack::unpack_panel(packed, n, nb, rows);
                const R8: usize = qtile::COLUMN8_ROWS;
                for c in c0..c1 {
                    let y = b_row(c).0;
                    let mut out = [0.0f32; PANEL_ROWS];
                    for h in 0..n / R8 {
                        let row = |r: usize| tmp.add((h * R8 + r) * row_bytes) as *const u8;
                        let o = &mut out[h * R8..(h + 1) * R8];
                        if e == QElem::Q4_0Repacked {
                            let ap: [*const u8; R8] = std::array::from_fn(row);
                            let o: &mut [f32; R8] = o.try_into().expect("8 rows");
                            qtile::column8_q4_0(nb, &ap, y, o);
                        } else {
                            for (r, v) in o.iter_mut().enumerate() {
                                *v = qtile::repacked_dot(e, nb, row(r), y);
                            }
                        }
                    }
                    store(c, &out);
                }
            }
        }
        ch = counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Q4_K in groups of 8 interleaved rows (`repack::Layout::Q4KRows8`) times Q8_K columns, each
/// column in llama.cpp's q4_K_8x8 order for its place: the gemm's for columns in whole
/// fours of a plane, the gemv's for the rest (`ktile::Plan::order`). Work units are (group,
/// column group) from the shared counter.
fn q4_k(p: &mut Params, a: &TRef, ne11: usize, nr1: usize, d: &TRef, b_row: BRow) {
    use repack::{K_BLOCK, K_GROUP};
    let (nr0, nb) = (a.ne[1], a.ne[0] / 256);
    let Some(plan) = ktile::plan(Type::Q4K, nr0, true, ne11, Type::F32) else {
        unreachable!("CPU_REPACK holds Q4_K only where its kernels run");
    };
    #[cfg(target_arch = "x86_64")]
    let avx512 = forced() == Force::None && crate::dot::x86_k512::available();
    #[cfg(not(target_arch = "x86_64"))]
    let avx512 = false;
    // a unit's rows: two groups where the 16-row gemm runs, else one
    let span = if avx512 { 2 * K_GROUP } else { K_GROUP };
    let spans = nr0.div_ceil(span);
    let units = spans * nr1.div_ceil(GROUP);
    #[cfg(target_arch = "x86_64")]
    let prep_bytes = nb * crate::dot::x86_k4x16::PREP_BLOCK.max(crate::dot::x86_k4x8::PREP_BLOCK);
    #[cfg(not(target_arch = "x86_64"))]
    let prep_bytes = 0usize;
    // scratch: a prepared span
    let buf = p.scratch(prep_bytes.div_ceil(4));
    let prep = buf.as_mut_ptr() as *mut u8;
    // the span whose rows tmp holds prepared
    let mut prepped = usize::MAX;
    for_units(p, units, nr1, |ch| {
        let (si, g) = (ch % spans, ch / spans);
        let (c0, c1) = (g * GROUP, ((g + 1) * GROUP).min(nr1));
        let r0 = si * span;
        let n = span.min(nr0 - r0);
        let src = a.row_ptr(r0, 0, 0) as *const u8;
        // column c's results for rows r0 + at..
        let store = |c: usize, at: usize, out: &[f32]| {
            let (_, i11, i12, i13) = b_row(c);
            for (r, v) in out.iter().enumerate() {
                // SAFETY: (r0 + at + r, c) is a cell of dst, which belongs to this unit only.
                unsafe { (d.ptr(r0 + at + r, i11, i12, i13) as *mut f32).write_unaligned(*v) };
            }
        };
        // the unit's columns by order: the gemm's first, then the gemv's
        let mut gemm = [0usize; GROUP];
        let mut gemv = [0usize; GROUP];
        let (mut ng, mut nv) = (0, 0);
        for c in c0..c1 {
            if plan.order(c % ne11, ne11) == ktile::Order::RepackGemm {
                gemm[ng] = c;
                ng += 1;
            } else {
                gemv[nv] = c;
                nv += 1;
            }
        }
        // a group's row r has block ib at its first block + bs * ib
        let bs = K_GROUP * K_BLOCK;
        let row0 = |r: usize| src.wrapping_add((r / K_GROUP) * nb * bs + (r % K_GROUP) * K_BLOCK);
        if avx512 {
            #[cfg(target_arch = "x86_64")]
            {
                use crate::dot::x86_k4x16::{gemm16, prep16, ROWS};
                if ng > 0 && prepped != si {
                    let x: [*const u8; ROWS] = std::array::from_fn(row0);
                    // SAFETY: rows r < n are in this weight (n is 8 or 16, whole groups), each
                    // nb blocks bs apart; prep holds prep_bytes.
                    unsafe { prep16(nb, bs, &x, n, prep) };
                    prepped = si;
                }
                let mut i = 0;
                while i < ng {
                    macro_rules! pass {
                        ($w:expr) => {{
                            let b: [*const u8; $w] = std::array::from_fn(|j| b_row(gemm[i + j]).0);
                            let mut out = [[0.0f32; ROWS]; $w];
                            // SAFETY: AVX-512 VNNI is present; prep holds the span prepared;
                            // each column has nb Q8_K blocks.
                            unsafe { gemm16::<$w>(nb, prep, &b, &mut out) };
                            for (j, o) in out.iter().enumerate() {
                                store(gemm[i + j], 0, &o[..n]);
                            }
                            $w
                        }};
                    }
                    i += match ng - i {
                        6.. => pass!(6),
                        4..=5 => pass!(4),
                        3 => pass!(3),
                        2 => pass!(2),
                        _ => pass!(1),
                    };
                }
                for h in 0..n / K_GROUP {
                    let x8: [*const u8; K_GROUP] = std::array::from_fn(|r| row0(h * K_GROUP + r));
                    for &c in &gemv[..nv] {
                        let mut out = [0.0f32; K_GROUP];
                        // SAFETY: as above, one column.
                        unsafe {
                            crate::dot::x86_k512::q4_k_gemv8_strided(
                                nb,
                                bs,
                                &x8,
                                b_row(c).0,
                                &mut out,
                            )
                        };
                        store(c, h * K_GROUP, &out);
                    }
                }
            }
        } else {
            // AVX2 (every CPU with CPU_REPACK has it): the gemm's columns through the 8-row
            // kernel on the group prepared once, the gemv's through the 8-row gemv, read
            // where the rows lie (x86_k4x8)
            #[cfg(target_arch = "x86_64")]
            {
                use crate::dot::x86_k4x8::{gemm8, gemv8, prep8, ROWS};
                // (repack::layout_for asks for the same features: AVX2, FMA, F16C)
                debug_assert!(crate::dot::x86_k4x8::available());
                let x: [*const u8; ROWS] = std::array::from_fn(row0);
                if ng > 0 && prepped != si {
                    // SAFETY: the span is one group of 8 rows, each nb blocks bs apart;
                    // prep holds prep_bytes.
                    unsafe { prep8(nb, bs, &x, prep) };
                    prepped = si;
                }
                let mut i = 0;
                while i < ng {
                    macro_rules! pass {
                        ($w:expr) => {{
                            let b: [*const u8; $w] = std::array::from_fn(|j| b_row(gemm[i + j]).0);
                            let mut out = [[0.0f32; ROWS]; $w];
                            // SAFETY: available() holds; prep holds the group prepared;
                            // each column has nb Q8_K blocks.
                            unsafe { gemm8::<$w>(nb, prep, &b, &mut out) };
                            for (j, o) in out.iter().enumerate() {
                                store(gemm[i + j], 0, o);
                            }
                            $w
                        }};
                    }
                    i += match ng - i {
                        4.. => pass!(4),
                        3 => pass!(3),
                        2 => pass!(2),
                        _ => pass!(1),
                    };
                }
                for &c in &gemv[..nv] {
                    let mut out = [0.0f32; ROWS];
                    // SAFETY: available() holds; the group's 8 rows have nb blocks bs
                    // apart; the column has nb Q8_K blocks.
                    unsafe { gemv8(nb, bs, &x, b_row(c).0, &mut out) };
                    store(c, 0, &out);
                }
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                let _ = (&gemm, &gemv, ng, nv, row0, &mut prepped, prep);
                unreachable!("CPU_REPACK holds Q4_K only where its kernels run");
            }
        }
    });
}

/// Takes this thread's work units from the shared counter (its first is `p.ith`) and runs
/// `unit` on each. For one column (generation) a counter value stands for a run of
/// consecutive units, a few runs per thread, so each thread streams long stretches of the
/// weight and its gemv's prefetches run on into its own next unit (Q2_K's panels one a value
/// read at 13-14 GB/s at -t 2 against 22 at -t 1); otherwise one unit a value.
fn for_units(p: &Params, units: usize, nr1: usize, mut unit: impl FnMut(usize)) {
    let run = if nr1 == 1 {
        units.div_ceil(super::matmul::STREAM_CHUNKS * p.nth)
    } else {
        1
    };
    let mut k = p.ith;
    while k * run < units {
        for ch in k * run..((k + 1) * run).min(units) {
            unit(ch);
        }
        k = p.counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// A path tests make `q2_k` and `mxfp4` take on a CPU that has faster kernels (every path
/// gives the same bits, so a test running beside it sees no difference).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[cfg_attr(not(test), allow(dead_code))]
enum Force {
    /// The best kernel this CPU has.
    None = 0,
    /// The scalar references.
    Ref = 1,
    /// No AVX-512 kernels (as on a CPU with AVX2 alone): the AVX2 kernels of `mxfp4`,
    /// `nibble_panels` and `q4_k`, `q2_k`'s scalar reference.
    Avx2 = 2,
}

/// The forced path (`Force`); set through `tests::forcing`.
#[cfg(all(test, target_arch = "x86_64"))]
static FORCE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(Force::None as u8);

/// The path tests force; `Force::None` (a constant) outside tests.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn forced() -> Force {
    #[cfg(test)]
    {
        match FORCE.load(Ordering::Relaxed) {
            1 => Force::Ref,
            2 => Force::Avx2,
            _ => Force::None,
        }
    }
    #[cfg(not(test))]
    {
        Force::None
    }
}

/// Q2_K in panels (`repack::Layout::Q2KPanels`) times Q8_K columns, each column in llama.cpp's
/// q2_K_8x8 order for its place: the gemm's for columns in whole fours of a plane, the gemv's
/// for the rest (as `ktile::Plan::order`). Work units are (panel, column group) from the
/// shared counter. Without AVX-512 VNNI (llama.cpp repacks on AVX-512F alone) a panel is put
/// back in GGUF order and each cell takes the scalar reference of the same order.
#[cfg(target_arch = "x86_64")]
fn q2_k(p: &mut Params, a: &TRef, ne11: usize, nr1: usize, d: &TRef, b_row: BRow) {
    use crate::dot::x86_q2k_repack::{self as q2, ROWS};
    let (nr0, nb) = (a.ne[1], a.ne[0] / 256);
    let row_bytes = nb * repack::Q2K_BLOCK;
    let panels: Vec<(usize, usize)> = repack::panels(nr0).collect();
    let units = panels.len() * nr1.div_ceil(GROUP);
    let fast = q2::available() && forced() == Force::None;
    let buf = p.scratch(if fast {
        0
    } else {
        (ROWS * row_bytes).div_ceil(4)
    });
    let tmp = buf.as_mut_ptr() as *mut u8;
    let gemm_col = |c: usize| c % ne11 < ne11 - ne11 % 4;
    for_units(p, units, nr1, |ch| {
        let (pi, g) = (ch % panels.len(), ch / panels.len());
        let (c0, c1) = (g * GROUP, ((g + 1) * GROUP).min(nr1));
        let (r0, n) = panels[pi];
        let src = a.row_ptr(r0, 0, 0) as *const u8;
        let store = |c: usize, out: &[f32]| {
            let (_, i11, i12, i13) = b_row(c);
            for (r, v) in out.iter().enumerate().take(n) {
                // SAFETY: (r0 + r, c) is a cell of dst, which belongs to this unit only.
                unsafe { (d.ptr(r0 + r, i11, i12, i13) as *mut f32).write_unaligned(*v) };
            }
        };
        if fast {
            // the unit's columns by order: the gemm's, then the gemv's
            let mut gemm = [0usize; GROUP];
            let mut gemv = [0usize; GROUP];
            let (mut ng, mut nv) = (0, 0);
            for c in c0..c1 {
                if gemm_col(c) {
                    gemm[ng] = c;
                    ng += 1;
                } else {
                    gemv[nv] = c;
                    nv += 1;
                }
            }
            macro_rules! pass {
                ($cols:expr, $i:expr, $w:expr, $gemm:expr) => {{
                    let y: [*const u8; $w] = std::array::from_fn(|j| b_row($cols[$i + j]).0);
                    let mut out = [[0.0f32; ROWS]; $w];
                    // SAFETY: available() holds; the panel at r0 has n rows of nb blocks in
                    // the layout of repack::pack; every column has nb Q8_K blocks.
                    unsafe { q2::panel::<$w, $gemm>(nb, n, src, &y, &mut out) };
                    for (j, o) in out.iter().enumerate() {
                        store($cols[$i + j], o);
                    }
                    $w
                }};
            }
            let mut i = 0;
            while i < ng {
                i += match ng - i {
                    4.. => pass!(gemm, i, 4, true),
                    2..=3 => pass!(gemm, i, 2, true),
                    _ => pass!(gemm, i, 1, true),
                };
            }
            let mut i = 0;
            while i < nv {
                i += match nv - i {
                    2.. => pass!(gemv, i, 2, false),
                    _ => pass!(gemv, i, 1, false),
                };
            }
        } else {
            // SAFETY: the panel holds n rows of nb blocks at src; tmp has room for 16 rows.
            let rows = unsafe {
                let packed = std::slice::from_raw_parts(src, n * row_bytes);
                let rows = std::slice::from_raw_parts_mut(tmp, n * row_bytes);
                let ne = [a.ne[0] as i64, n as i64, 1, 1];
                repack::unpack(repack::Layout::Q2KPanels, ne, packed, rows);
                &*rows
            };
            let y_bytes = nb * 292;
            for c in c0..c1 {
                // SAFETY: every column has nb Q8_K blocks.
                let y = unsafe { std::slice::from_raw_parts(b_row(c).0, y_bytes) };
                let out: Vec<f32> = (0..n)
                    .map(|r| {
                        let x = &rows[r * row_bytes..(r + 1) * row_bytes];
                        q2::dot_ref(gemm_col(c), nb, x, y)
                    })
                    .collect();
                store(c, &out);
            }
        }
    });
}

/// MXFP4 in panels (`repack::Layout::Mxfp4Panels`) times Q8_0 columns, each cell in llama.cpp's
/// mxfp4_8x8_q8_0 order (its gemm and gemv take the same steps per cell, so the column's place
/// does not matter). Work units are (panel, column group) from the shared counter; a thread
/// computes a group's activation sums (`x86_mxfp4_repack::column_bias`) once. The panel
/// kernel is AVX-512 VNNI's (`panel`) where the CPU has it, AVX2's (`panel_avx2`, llama.cpp
/// repacks on AVX2) otherwise; without either (outside tests not reached: the layout needs
/// AVX2, FMA and F16C) a panel is put back in GGUF order and each cell takes the scalar
/// reference.
#[cfg(target_arch = "x86_64")]
fn mxfp4(p: &mut Params, a: &TRef, nr1: usize, d: &TRef, b_row: BRow) {
    use crate::dot::x86_mxfp4_repack::{self as mx, ROWS};
    let (nr0, nb) = (a.ne[1], a.ne[0] / 32);
    let row_bytes = nb * repack::MXFP4_BLOCK;
    let panels: Vec<(usize, usize)> = repack::panels(nr0).collect();
    let units = panels.len() * nr1.div_ceil(GROUP);
    let force = forced();
    let vnni = force == Force::None && mx::available();
    let fast = vnni || (force != Force::Ref && mx::avx2_available());
    // scratch: one group's column sums, or 16 rows in GGUF order
    let buf = p.scratch(if fast {
        GROUP * nb
    } else {
        (ROWS * row_bytes).div_ceil(4)
    });
    let tmp = buf.as_mut_ptr();
    let counter = p.counter;
    let y_bytes = nb * 34;
    let mut group = usize::MAX;
    let mut ch = p.ith;
    while ch < units {
        let (pi, g) = (ch % panels.len(), ch / panels.len());
        let (c0, c1) = (g * GROUP, ((g + 1) * GROUP).min(nr1));
        let (r0, n) = panels[pi];
        let src = a.row_ptr(r0, 0, 0) as *const u8;
        let store = |c: usize, out: &[f32]| {
            let (_, i11, i12, i13) = b_row(c);
            for (r, v) in out.iter().enumerate().take(n) {
                // SAFETY: (r0 + r, c) is a cell of dst, which belongs to this unit only.
                unsafe { (d.ptr(r0 + r, i11, i12, i13) as *mut f32).write_unaligned(*v) };
            }
        };
        // SAFETY: every column has nb Q8_0 blocks.
        let col = |c: usize| unsafe { std::slice::from_raw_parts(b_row(c).0, y_bytes) };
        if fast {
            let bias = tmp as *mut i32;
            if g != group {
                for c in c0..c1 {
                    // SAFETY: the scratch holds GROUP * nb i32; c - c0 < GROUP.
                    let out =
                        unsafe { std::slice::from_raw_parts_mut(bias.add((c - c0) * nb), nb) };
                    mx::column_bias(nb, col(c), out);
                }
                group = g;
            }
            let mut c = c0;
            while c < c1 {
                macro_rules! pass {
                    ($w:expr) => {{
                        let y: [*const u8; $w] = std::array::from_fn(|j| b_row(c + j).0);
                        let s: [*const i32; $w] =
                            std::array::from_fn(|j| bias.wrapping_add((c + j - c0) * nb) as _);
                        let mut out = [[0.0f32; ROWS]; $w];
                        // SAFETY: available() holds (vnni), else avx2_available() (fast); the
                        // panel at r0 has n rows of nb blocks in the layout of repack::pack;
                        // every column has nb Q8_0 blocks and its nb sums in the scratch
                        // (computed above for this group).
                        unsafe {
                            if vnni {
                                mx::panel::<$w>(nb, n, src, &y, &s, &mut out)
                            } else {
                                mx::panel_avx2::<$w>(nb, n, src, &y, &s, &mut out)
                            }
                        };
                        for (j, o) in out.iter().enumerate() {
                            store(c + j, o);
                        }
                        $w
                    }};
                }
                c += match c1 - c {
                    8.. => pass!(8),
                    4..=7 => pass!(4),
                    2..=3 => pass!(2),
                    _ => pass!(1),
                };
            }
        } else {
            // SAFETY: the panel holds n rows of nb blocks at src; tmp has room for 16 rows.
            let rows = unsafe {
                let packed = std::slice::from_raw_parts(src, n * row_bytes);
                let rows = std::slice::from_raw_parts_mut(tmp as *mut u8, n * row_bytes);
                let ne = [a.ne[0] as i64, n as i64, 1, 1];
                repack::unpack(repack::Layout::Mxfp4Panels, ne, packed, rows);
                &*rows
            };
            for c in c0..c1 {
                let y = col(c);
                let out: Vec<f32> = (0..n)
                    .map(|r| mx::dot_ref(nb, &rows[r * row_bytes..(r + 1) * row_bytes], y))
                    .collect();
                store(c, &out);
            }
        }
        ch = counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The panel kernels `nibble_panels` takes: the best this CPU has, AVX2's or none (the
/// GGUF-order fallback) where a test forces them (`Force`).
fn nibble_isa() -> Option<PanelIsa> {
    #[cfg(target_arch = "x86_64")]
    {
        match forced() {
            Force::None => qtile::panel_isa(),
            Force::Avx2 => qtile::panel_isas()
                .into_iter()
                .find(|&i| i == PanelIsa::Avx2),
            Force::Ref => None,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        qtile::panel_isa()
    }
}

/// Weight streams one thread reads side by side in a one-column product.
const STREAMS: usize = 4;

/// One column (generation) times nibble panels: a thread takes a run of consecutive panels
/// and reads `STREAMS` stretches of it side by side, so that several streams of the weight
/// are in flight on each core (one stream stays well under a core's memory rate); a last
/// 8-row panel is a unit of its own. Each cell is still `packed_tile`'s.
///
/// # Safety
/// isa is one this CPU runs; a is nibble panels of e (`repack::pack`) listed by `panels`;
/// tmp holds one widened panel and sums one column's sums.
#[allow(clippy::too_many_arguments)]
unsafe fn panels_gemv(
    p: &mut Params,
    isa: PanelIsa,
    e: QElem,
    a: &TRef,
    d: &TRef,
    b_row: BRow,
    panels: &[(usize, usize)],
    tmp: *mut u8,
    sums: *mut u8,
) {
    let nb = a.ne[0] / 32;
    let (y, i11, i12, i13) = b_row(0);
    // SAFETY: the caller's promise (each thread its own scratch).
    unsafe { qtile::col_sums(isa, e, nb, y, sums) };
    let full = panels.iter().take_while(|pn| pn.1 == PANEL_ROWS).count();
    let run = full
        .div_ceil(super::matmul::STREAM_CHUNKS * p.nth)
        .max(STREAMS);
    let runs = full.div_ceil(run);
    let units = runs + usize::from(full < panels.len());
    let store = |pi: usize, out: &[f32]| {
        let (r0, n) = panels[pi];
        for (r, v) in out.iter().enumerate().take(n) {
            // SAFETY: (r0 + r, 0) is a cell of dst, and panel pi belongs to one unit.
            unsafe { (d.ptr(r0 + r, i11, i12, i13) as *mut f32).write_unaligned(*v) };
        }
    };
    let panel = |pi: usize| a.row_ptr(panels[pi].0, 0, 0) as *const u8;
    let mut u = p.ith;
    while u < units {
        if u == runs {
            // the 8-row panel left at the end
            let pi = full;
            // SAFETY: the caller's promise; tmp holds a widened panel.
            unsafe {
                widen(panel(pi), nb, tmp);
                let mut out = [[0.0f32; PANEL_ROWS]; 1];
                qtile::packed_tile(isa, e, nb, tmp, &[y], &[sums as *const u8], &mut out);
                store(pi, &out[0]);
            }
        } else {
            let (u0, u1) = (u * run, ((u + 1) * run).min(full));
            let l = (u1 - u0).div_ceil(STREAMS);
            for j in 0..l {
                let idx: [usize; STREAMS] = std::array::from_fn(|q| u0 + j + q * l);
                if idx[STREAMS - 1] < u1 {
                    let mut out = [[0.0f32; PANEL_ROWS]; STREAMS];
                    // SAFETY: full panels of this weight; y and sums as above.
                    unsafe { qtile::packed_gemv(isa, e, nb, &idx.map(panel), y, sums, &mut out) };
                    for (q, o) in out.iter().enumerate() {
                        store(idx[q], o);
                    }
                } else {
                    for &pi in idx.iter().filter(|&&pi| pi < u1) {
                        let mut out = [[0.0f32; PANEL_ROWS]; 1];
                        // SAFETY: as above.
                        unsafe { qtile::packed_gemv(isa, e, nb, &[panel(pi)], y, sums, &mut out) };
                        store(pi, &out[0]);
                    }
                }
            }
        }
        u = p.counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// An 8-row panel (nb blocks at src) as a 16-row one at dst, rows 8..16 zero.
///
/// # Safety
/// src holds nb blocks of an 8-row panel, dst nb * PACKED_BLOCK_BYTES writable bytes.
unsafe fn widen(src: *const u8, nb: usize, dst: *mut u8) {
    // SAFETY: the caller's promise on both ranges.
    let (s, o) = unsafe {
        (
            std::slice::from_raw_parts(src, nb * PACKED_BLOCK_BYTES / 2),
            std::slice::from_raw_parts_mut(dst, nb * PACKED_BLOCK_BYTES),
        )
    };
    let mut block = [0u8; PACKED_BLOCK_BYTES];
    for ib in 0..nb {
        repack::widen_block(s, ib, &mut block);
        o[ib * PACKED_BLOCK_BYTES..(ib + 1) * PACKED_BLOCK_BYTES].copy_from_slice(&block);
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "x86_64")]
    use super::Force;
    use crate::dot::quantize_row_q8_0;
    use ggml::backend::{get_tensor, set_tensor, tensor_set_f32, tensor_to_f32};
    use ggml::{Context, Graph, Type};

    /// Holds the forced path (`super::FORCE`) until dropped, and with it a lock, so the tests
    /// that force paths take turns and each runs on the path it names.
    #[cfg(target_arch = "x86_64")]
    struct Forcing(#[allow(dead_code)] std::sync::MutexGuard<'static, ()>);

    #[cfg(target_arch = "x86_64")]
    fn forcing(force: Force) -> Forcing {
        static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        super::FORCE.store(force as u8, std::sync::atomic::Ordering::Relaxed);
        Forcing(guard)
    }

    #[cfg(target_arch = "x86_64")]
    impl Drop for Forcing {
        fn drop(&mut self) {
            super::FORCE.store(Force::None as u8, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn vals(n: usize, seed: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (((i * 37 + seed * 11) % 101) as f32 - 50.0) / 7.0)
            .collect()
    }

    /// A `ty` weight of `rows` x `k` held in CPU_REPACK (set through set_tensor) times `cols`
    /// F32 columns on the CPU: (its GGUF rows, the columns, the product). Checks that the
    /// weight reads back in GGUF order.
    fn repacked_product(
        ty: Type,
        k: usize,
        rows: usize,
        cols: usize,
    ) -> (Vec<u8>, Vec<f32>, Vec<f32>) {
        let mut ctx = Context::new();
        let w = ctx.new_tensor_2d(ty, k as i64, rows as i64);
        let buft = crate::repack::buffer_type();
        let _wbuf = ggml::alloc::alloc_ctx_tensors(&mut ctx, &buft).expect("alloc");
        let b = ctx.new_tensor_2d(Type::F32, k as i64, cols as i64);
        let out = ctx.mul_mat(w, b);
        let cpu = crate::device().buffer_type();
        let _buf = ggml::alloc::alloc_ctx_tensors(&mut ctx, &cpu).expect("alloc");
        let row_bytes = ty.row_size(k as i64);
        let mut plain = vec![0u8; rows * row_bytes];
        for r in 0..rows {
            ggml::quants::quantize_row_ref(
                ty,
                &vals(k, r),
                &mut plain[r * row_bytes..(r + 1) * row_bytes],
            );
        }
        set_tensor(&ctx[w], &plain, 0).expect("set");
        let mut back = vec![0u8; plain.len()];
        get_tensor(&ctx[w], &mut back, 0).expect("get");
        assert_eq!(back, plain, "{ty}: read back in GGUF order");
        let bv: Vec<f32> = (0..cols).flat_map(|c| vals(k, 1000 + c)).collect();
        tensor_set_f32(&ctx[b], &bv).expect("set b");
        let mut g = Graph::new(ctx);
        g.build_forward_expand(out);
        assert!(crate::compute_graph(&g, 2).is_success());
        let got = tensor_to_f32(&g.ctx[out]).expect("out");
        (plain, bv, got)
    }

    /// A Q4_K weight in CPU_REPACK gives every cell of llama.cpp's q4_K_8x8 orders (the gemm's
    /// for whole fours of columns, the gemv's for the rest: `ktile::dot_ref`), whatever the
    /// column count, and reads back as given.
    #[test]
    fn a_q4_k_weight_in_cpu_repack_gives_the_repacked_orders() {
        let Some(plan) = super::ktile::plan(Type::Q4K, 8, true, 1, Type::F32) else {
            eprintln!("skipped: this CPU lacks AVX2/FMA (no CPU_REPACK kernels)");
            return;
        };
        let _ = plan;
        #[cfg(target_arch = "x86_64")]
        let forces = [Force::None, Force::Avx2];
        #[cfg(not(target_arch = "x86_64"))]
        let forces = [()];
        for (_force, &(k, rows)) in forces
            .into_iter()
            .flat_map(|f| [(256usize, 8usize), (512, 24)].iter().map(move |s| (f, s)))
        {
            #[cfg(target_arch = "x86_64")]
            let _f = forcing(_force);
            for cols in [1usize, 3, 4, 7, 8, 22, 41] {
                let (plain, bv, got) = repacked_product(Type::Q4K, k, rows, cols);
                let row_bytes = Type::Q4K.row_size(k as i64);
                let plan =
                    super::ktile::plan(Type::Q4K, rows, true, cols, Type::F32).expect("plan");
                for c in 0..cols {
                    let mut y = vec![0u8; Type::Q8K.row_size(k as i64)];
                    ggml::quants::quantize_row_ref(Type::Q8K, &bv[c * k..(c + 1) * k], &mut y);
                    for r in 0..rows {
                        let x = &plain[r * row_bytes..(r + 1) * row_bytes];
                        let want =
                            super::ktile::dot_ref(Type::Q4K, plan.order(c, cols), k / 256, x, &y);
                        assert_eq!(
                            got[c * rows + r].to_bits(),
                            want.to_bits(),
                            "Q4_K {k}x{rows}, {cols} columns ({_force:?}): cell ({r}, {c})"
                        );
                    }
                }
            }
        }
    }

    /// A Q2_K weight in CPU_REPACK (where this CPU has llama.cpp's AVX-512 repack) gives every
    /// cell of llama.cpp's q2_K_8x8 orders (the gemm's for whole fours of columns, the gemv's
    /// for the rest: `x86_q2k_repack::dot_ref`), whatever the column count, and reads back as
    /// given.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_q2_k_weight_in_cpu_repack_gives_the_repacked_orders() {
        if crate::repack::layout_for(Type::Q2K, [256, 8, 1, 1]).is_none() {
            eprintln!("skipped: llama.cpp does not repack Q2_K on this CPU (no AVX-512F)");
            return;
        }
        // the kernel's path, then the scalar one (CPUs with AVX-512F but no VNNI)
        for force in [Force::None, Force::Ref] {
            let _f = forcing(force);
            q2_k_cases();
        }
    }

    #[cfg(target_arch = "x86_64")]
    fn q2_k_cases() {
        for &(k, rows) in &[(256usize, 8usize), (512, 24), (768, 32)] {
            for cols in [1usize, 3, 4, 6, 8, 22, 41] {
                let (plain, bv, got) = repacked_product(Type::Q2K, k, rows, cols);
                let row_bytes = Type::Q2K.row_size(k as i64);
                for c in 0..cols {
                    let mut y = vec![0u8; Type::Q8K.row_size(k as i64)];
                    ggml::quants::quantize_row_ref(Type::Q8K, &bv[c * k..(c + 1) * k], &mut y);
                    let gemm = c < cols - cols % 4;
                    for r in 0..rows {
                        let x = &plain[r * row_bytes..(r + 1) * row_bytes];
                        let want = crate::dot::x86_q2k_repack::dot_ref(gemm, k / 256, x, &y);
                        assert_eq!(
                            got[c * rows + r].to_bits(),
                            want.to_bits(),
                            "Q2_K {k}x{rows}, {cols} columns: cell ({r}, {c})"
                        );
                    }
                }
            }
        }
    }

    /// An MXFP4 weight in CPU_REPACK (where this CPU has llama.cpp's AVX2 repack) gives every
    /// cell of llama.cpp's mxfp4_8x8_q8_0 order (`x86_mxfp4_repack::dot_ref`; its gemm, for
    /// columns in whole fours, and its gemv take the same steps), whatever the column count, on
    /// the best kernel's path (AVX-512 VNNI where present), the AVX2 kernel's and the scalar
    /// one, and reads back as given. This is the 2-D MUL_MAT check (the end-to-end MXFP4 test's
    /// model has MXFP4 experts only).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn an_mxfp4_weight_in_cpu_repack_gives_the_repacked_order() {
        if crate::repack::layout_for(Type::Mxfp4, [32, 8, 1, 1]).is_none() {
            eprintln!("skipped: llama.cpp does not repack MXFP4 on this CPU (no AVX2)");
            return;
        }
        for force in [Force::None, Force::Avx2, Force::Ref] {
            let _f = forcing(force);
            for &(k, rows) in &[(32usize, 8usize), (96, 24), (256, 40), (64, 216)] {
                for cols in [1usize, 3, 4, 8, 13, 22, 41] {
                    let (plain, bv, got) = repacked_product(Type::Mxfp4, k, rows, cols);
                    let row_bytes = Type::Mxfp4.row_size(k as i64);
                    for c in 0..cols {
                        let mut y = vec![0u8; Type::Q8_0.row_size(k as i64)];
                        quantize_row_q8_0(&bv[c * k..(c + 1) * k], &mut y);
                        for r in 0..rows {
                            let x = &plain[r * row_bytes..(r + 1) * row_bytes];
                            let want = crate::dot::x86_mxfp4_repack::dot_ref(k / 32, x, &y);
                            assert_eq!(
                                got[c * rows + r].to_bits(),
                                want.to_bits(),
                                "MXFP4 {k}x{rows}, {cols} columns ({force:?}): cell ({r}, {c})"
                            );
                        }
                    }
                }
            }
        }
    }

    /// A weight placed in CPU_REPACK through set_tensor, times 1..=19 columns, gives every
    /// cell of llama.cpp's repacked order (`qtile::repacked_dot` on the GGUF rows) and reads
    /// back as the bytes it was given, on the best panel kernels' path (AVX-512 VNNI where
    /// present), AVX2's and the GGUF-order fallback.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_weight_in_cpu_repack_gives_the_repacked_order() {
        if !super::qtile::available() {
            eprintln!("skipped: this CPU lacks AVX2/FMA/F16C (no CPU_REPACK kernels)");
            return;
        }
        let cases = [
            (Type::Q4_0, super::QElem::Q4_0Repacked),
            (Type::Iq4Nl, super::QElem::Iq4NlRepacked),
        ];
        for (force, (ty, e)) in [Force::None, Force::Avx2, Force::Ref]
            .into_iter()
            .flat_map(|f| cases.map(|c| (f, c)))
        {
            let _f = forcing(force);
            // (216 and 808 rows: runs of several panels read side by side by one column,
            // with stretches of unequal length and a last 8-row panel)
            let shapes = [
                (64usize, 8usize),
                (96, 24),
                (256, 40),
                (32, 64),
                (64, 216),
                (32, 808),
            ];
            for &(k, rows) in &shapes {
                for cols in [1usize, 2, 5, 8, 19] {
                    let (plain, bv, got) = repacked_product(ty, k, rows, cols);
                    let row_bytes = ty.row_size(k as i64);
                    for c in 0..cols {
                        let mut y = vec![0u8; Type::Q8_0.row_size(k as i64)];
                        quantize_row_q8_0(&bv[c * k..(c + 1) * k], &mut y);
                        for r in 0..rows {
                            let x = plain[r * row_bytes..].as_ptr();
                            // SAFETY: available() holds; x and y cover k / 32 blocks.
                            let want =
                                unsafe { super::qtile::repacked_dot(e, k / 32, x, y.as_ptr()) };
                            assert_eq!(
                                got[c * rows + r].to_bits(),
                                want.to_bits(),
                                "{ty} {k}x{rows}, {cols} columns ({force:?}): cell ({r}, {c})"
                            );
                        }
                    }
                }
            }
        }
    }
    /// A 3-D `ty` expert stack (`n_as` experts of `rows` x `k`) held in CPU_REPACK, in
    /// MUL_MAT_ID with `tokens` tokens routed to `used` experts each (activations shared by
    /// the token's experts where `shared`): every (row, slot, token) cell equals `want(expert
    /// row's GGUF bytes, activation column)`, on 2 threads, and the stack reads back as given.
    fn repacked_experts(
        ty: Type,
        k: usize,
        rows: usize,
        shared: bool,
        want: &dyn Fn(&[u8], &[f32]) -> f32,
    ) {
        let (n_as, used, tokens) = (5usize, 2usize, 7usize);
        let mut ctx = Context::new();
        let w = ctx.new_tensor_3d(ty, k as i64, rows as i64, n_as as i64);
        let buft = crate::repack::buffer_type();
        let _wbuf = ggml::alloc::alloc_ctx_tensors(&mut ctx, &buft).expect("alloc");
        let ne11 = if shared { 1 } else { used };
        let b = ctx.new_tensor_3d(Type::F32, k as i64, ne11 as i64, tokens as i64);
        let ids = ctx.new_tensor_2d(Type::I32, used as i64, tokens as i64);
        let out = ctx.mul_mat_id(w, b, ids);
        let cpu = crate::device().buffer_type();
        let _buf = ggml::alloc::alloc_ctx_tensors(&mut ctx, &cpu).expect("alloc");
        let row_bytes = ty.row_size(k as i64);
        let mut plain = vec![0u8; n_as * rows * row_bytes];
        for (r, row) in plain.chunks_mut(row_bytes).enumerate() {
            ggml::quants::quantize_row_ref(ty, &vals(k, r), row);
        }
        set_tensor(&ctx[w], &plain, 0).expect("set");
        let mut back = vec![0u8; plain.len()];
        get_tensor(&ctx[w], &mut back, 0).expect("get");
        assert_eq!(back, plain, "{ty}: the experts read back in GGUF order");
        let bv: Vec<f32> = (0..ne11 * tokens).flat_map(|c| vals(k, 500 + c)).collect();
        tensor_set_f32(&ctx[b], &bv).expect("set b");
        // token t's slot s: expert (3t + 2s) % n_as (expert 4 of 5 never used by some tokens)
        let route = |s: usize, t: usize| (3 * t + 2 * s) % n_as;
        let idv: Vec<u8> = (0..tokens)
            .flat_map(|t| (0..used).map(move |s| route(s, t) as i32))
            .flat_map(|v| v.to_le_bytes())
            .collect();
        set_tensor(&ctx[ids], &idv, 0).expect("set ids");
        let mut g = Graph::new(ctx);
        g.build_forward_expand(out);
        assert!(crate::compute_graph(&g, 2).is_success());
        let got = tensor_to_f32(&g.ctx[out]).expect("out");
        for t in 0..tokens {
            for s in 0..used {
                let e = route(s, t);
                let col = &bv[(s % ne11 + t * ne11) * k..][..k];
                for r in 0..rows {
                    let x = &plain[(e * rows + r) * row_bytes..][..row_bytes];
                    assert_eq!(
                        got[(t * used + s) * rows + r].to_bits(),
                        want(x, col).to_bits(),
                        "{ty} {k}x{rows}: row {r}, slot {s}, token {t} (expert {e})"
                    );
                }
            }
        }
    }

    /// Experts in CPU_REPACK give every cell of llama.cpp's repacked gemv order, whatever the
    /// number of tokens routed to an expert (its forward_mul_mat_id runs the gemv per token).
    #[test]
    fn experts_in_cpu_repack_give_the_repacked_gemv_order() {
        if !super::qtile::available() {
            eprintln!("skipped: this CPU lacks AVX2/FMA/F16C (no CPU_REPACK kernels)");
            return;
        }
        for (ty, e) in [
            (Type::Q4_0, super::QElem::Q4_0Repacked),
            (Type::Iq4Nl, super::QElem::Iq4NlRepacked),
        ] {
            let want = |x: &[u8], col: &[f32]| {
                let mut y = vec![0u8; Type::Q8_0.row_size(col.len() as i64)];
                quantize_row_q8_0(col, &mut y);
                // SAFETY: available() holds; x and y cover k / 32 blocks.
                unsafe { super::qtile::repacked_dot(e, col.len() / 32, x.as_ptr(), y.as_ptr()) }
            };
            for &(k, rows) in &[(64usize, 8usize), (96, 24), (32, 48)] {
                for shared in [false, true] {
                    repacked_experts(ty, k, rows, shared, &want);
                }
            }
        }
        let q8k = |col: &[f32]| {
            let mut y = vec![0u8; Type::Q8K.row_size(col.len() as i64)];
            ggml::quants::quantize_row_ref(Type::Q8K, col, &mut y);
            y
        };
        let q4k = |x: &[u8], col: &[f32]| {
            let order = super::ktile::Order::RepackGemv;
            super::ktile::dot_ref(Type::Q4K, order, col.len() / 256, x, &q8k(col))
        };
        for &(k, rows) in &[(256usize, 8usize), (512, 24)] {
            for shared in [false, true] {
                repacked_experts(Type::Q4K, k, rows, shared, &q4k);
            }
        }
        #[cfg(target_arch = "x86_64")]
        if crate::repack::layout_for(Type::Q2K, [256, 8, 1, 1]).is_some() {
            let q2k = |x: &[u8], col: &[f32]| {
                crate::dot::x86_q2k_repack::dot_ref(false, col.len() / 256, x, &q8k(col))
            };
            for force in [Force::None, Force::Ref] {
                let _f = forcing(force);
                for &(k, rows) in &[(256usize, 8usize), (512, 24)] {
                    for shared in [false, true] {
                        repacked_experts(Type::Q2K, k, rows, shared, &q2k);
                    }
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        if crate::repack::layout_for(Type::Mxfp4, [32, 8, 1, 1]).is_some() {
            let mx = |x: &[u8], col: &[f32]| {
                let mut y = vec![0u8; Type::Q8_0.row_size(col.len() as i64)];
                quantize_row_q8_0(col, &mut y);
                crate::dot::x86_mxfp4_repack::dot_ref(col.len() / 32, x, &y)
            };
            for force in [Force::None, Force::Avx2, Force::Ref] {
                let _f = forcing(force);
                for &(k, rows) in &[(64usize, 8usize), (256, 24), (96, 48)] {
                    for shared in [false, true] {
                        repacked_experts(Type::Mxfp4, k, rows, shared, &mx);
                    }
                }
            }
        }
    }
}
