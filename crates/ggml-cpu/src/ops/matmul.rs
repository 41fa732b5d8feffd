//! MUL_MAT and MUL_MAT_ID. The activations (src 1) are converted once per node, by all
//! threads together, to the type the weight's dot product wants; then the result is cut into
//! chunks of weight rows x activation columns that threads take from a shared counter, each
//! chunk walked in 16 x 16 tiles so a weight row stays in cache across several columns.

use super::{gemm, ktile, qtile, Node, Params};
use crate::quant::{mm_traits, MmTraits};
use crate::tref::{split, TRef};
use ggml::{Context, Tensor, Type};
use std::sync::atomic::{AtomicUsize, Ordering};

const TILE: usize = 16;
/// How far ahead a matrix-vector product prefetches the weight.
const PREFETCH_BYTES: usize = 4096;
/// Chunks per thread of a one-column product (see mul_mat).
pub(crate) const STREAM_CHUNKS: usize = 4;
/// Stretches of its rows a one-column product reads side by side: one stream of the weight
/// stays under a core's memory rate (the hardware prefetcher does not cross pages), a few
/// reach it.
pub(crate) const STREAMS: usize = 4;

/// How a one-column chunk's rows `s..e` are walked as `STREAMS` stretches side by side:
/// positions go round the stretches (each holds (e - s) / STREAMS rows, one more for the first
/// (e - s) % STREAMS), so every STREAMS consecutive positions are one row of each. Positions
/// outside `s..e` are their own rows.
#[derive(Clone, Copy)]
pub(crate) struct Interleave {
    s: usize,
    e: usize,
    m: usize,
    x: usize,
}

impl Interleave {
    pub(crate) fn new(s: usize, e: usize, on: bool) -> Self {
        // (off: every position falls outside an empty range)
        let (s, e) = if on { (s, e) } else { (0, 0) };
        let len = e - s;
        Interleave {
            s,
            e,
            m: len / STREAMS,
            x: len % STREAMS,
        }
    }

    /// The weight row of walk position `i`.
    #[inline(always)]
    pub(crate) fn row(&self, i: usize) -> usize {
        if i < self.s || i >= self.e {
            return i;
        }
        let i = i - self.s;
        let start = |q: usize| self.s + q * self.m + q.min(self.x);
        if i < STREAMS * self.m {
            start(i % STREAMS) + i / STREAMS
        } else {
            start(i - STREAMS * self.m) + self.m
        }
    }
}

/// Asks for the cache lines of `len` bytes at `p` (a hint: never faults, even out of bounds).
#[inline(always)]
fn prefetch(p: *const u8, len: usize) {
    crate::simd::prefetch_lines(p, len, false);
}

/// The rows of one column's chunk that `passes` walks: `base..end` of `nr0` weight rows of
/// `arow` bytes, prefetched `ahead` rows on (none when 0).
struct RowWalk {
    base: usize,
    end: usize,
    nr0: usize,
    ahead: usize,
    arow: usize,
}

impl RowWalk {
    /// Walks the rows from `*ir0` `CR` at a time while a whole pass fits: prefetches, runs
    /// `pass` on the pass's row pointers and stores its results at `tmp[row - base]`. Rows left
    /// over stay for the caller.
    #[inline(always)]
    fn passes<const CR: usize>(
        &self,
        ir0: &mut usize,
        row: impl Fn(usize) -> *const u8,
        tmp: &mut [f32],
        mut pass: impl FnMut(&[*const u8; CR], &mut [f32; CR]),
    ) {
        while *ir0 + CR <= self.end {
            if self.ahead > 0 && *ir0 + self.ahead + CR <= self.nr0 {
                for r in 0..CR {
                    prefetch(row(*ir0 + self.ahead + r), self.arow);
                }
            }
            let ap: [*const u8; CR] = std::array::from_fn(|r| row(*ir0 + r));
            let mut out = [0.0f32; CR];
            pass(&ap, &mut out);
            tmp[*ir0 - self.base..*ir0 - self.base + CR].copy_from_slice(&out);
            *ir0 += CR;
        }
    }
}

/// Stores the first `rows` rows of a register tile: cell (r, c) = out[r * C + c] (or, for a
/// tile left column by column as the wide float tiles leave it, out[c * gemm::RM + r]) goes
/// to dst row ir0 + r of column cols[c] (b_row's (pointer, i11, i12, i13)), each column's
/// address taken once; a column's rows left together are one copy where dst's rows are
/// adjacent floats.
///
/// # Safety
/// Each (ir0 + r, cols[c]) is a cell of d that belongs to the caller's chunk; out holds
/// rows * C floats (gemm::RM * C by column, rows <= gemm::RM).
#[inline(always)]
unsafe fn store_tile<const C: usize>(
    d: &TRef,
    ir0: usize,
    rows: usize,
    cols: &[(*const u8, usize, usize, usize); C],
    out: &[f32],
    by_column: bool,
) {
    for (c, col) in cols.iter().enumerate() {
        let base = d.ptr(ir0, col.1, col.2, col.3);
        if by_column && d.nb[0] == 4 {
            let cell = &out[c * gemm::RM..c * gemm::RM + rows];
            // SAFETY: the caller's promise: rows ir0..ir0 + rows of this column are dst's
            // adjacent floats and belong to the caller's chunk.
            unsafe { std::ptr::copy_nonoverlapping(cell.as_ptr(), base as *mut f32, rows) };
            continue;
        }
        for r in 0..rows {
            let v = if by_column {
                out[c * gemm::RM + r]
            } else {
                out[r * C + c]
            };
            // SAFETY: the caller's promise; dst rows are nb[0] bytes apart.
            unsafe { (base.wrapping_add(r * d.nb[0]) as *mut f32).write_unaligned(v) };
        }
    }
}

/// Which register tile a matmul's chunks use for groups of columns.
#[derive(Clone, Copy)]
enum Tile {
    Float(gemm::Elem),
    Quant(qtile::QElem),
    KQuant(ktile::Plan),
}

/// Whether src 1 must be converted (its type differs from the dot type, or its rows have gaps).
fn needs_convert(b: &TRef, vdt: Type) -> bool {
    b.ty != vdt || !b.rows_contiguous()
}

fn traits_of(ty: Type) -> MmTraits {
    match mm_traits(ty) {
        Some(t) => t,
        None => panic!("mul_mat: no dot product for {ty} (supports_op should have said so)"),
    }
}

pub(crate) fn work_size(ctx: &Context, t: &Tensor) -> usize {
    let (Some(a), Some(b)) = (t.src[0], t.src[1]) else {
        return 0;
    };
    let (a, b) = (TRef::new(&ctx[a]), TRef::new(&ctx[b]));
    match mm_traits(a.ty) {
        Some(tr) if needs_convert(&b, tr.vec_dot_type) => {
            let conv = tr.vec_dot_type.row_size(b.ne[0] as i64) * b.nrows();
            conv + if widened_f16(&a, &b) {
                conv.div_ceil(64) * 64 - conv + b.ne[0] * 4 * b.nrows()
            } else {
                0
            }
        }
        _ => 0,
    }
}

/// Whether F16 columns are also kept widened to f32 for the wide AVX-512 tile: the F16 weight
/// takes the tiles (tinyBLAS's shape) on converted columns, and the tile then loads each
/// column vector without converting it again (f16 to f32 is exact, so the bits are the same).
fn widened_f16(a: &TRef, b: &TRef) -> bool {
    a.ty == Type::F16
        && !a.repacked
        && needs_convert(b, Type::F16)
        && b.ne[1] >= gemm::RN_WIDE
        && gemm::wide_available(gemm::Elem::F16)
        && gemm::tinyblas_shape(a.ne[1], a.ne[0], b.ne[1])
}

pub(crate) fn work_size_id(ctx: &Context, t: &Tensor, _nth: usize) -> usize {
    let conv = work_size(ctx, t);
    match t.src[0].map(|a| &ctx[a]) {
        // experts in CPU_REPACK: one work counter per expert after the converted rows (room to
        // align them)
        Some(a) if crate::repack::holds(a) => {
            let n_as = a.ne[2].max(1) as usize;
            conv + (n_as + 1) * std::mem::size_of::<AtomicUsize>()
        }
        _ => conv,
    }
}

/// Converts src 1's rows into wdata (all threads share the rows), then waits for all threads.
/// Returns the row stride of the converted rows, or None when src 1 is used in place.
fn convert_src1(p: &mut Params, b: &TRef, tr: &MmTraits, widen: bool) -> Option<usize> {
    let vdt = tr.vec_dot_type;
    if !needs_convert(b, vdt) {
        return None;
    }
    let rs = vdt.row_size(b.ne[0] as i64);
    assert!(p.wsize >= rs * b.nrows(), "mul_mat: work buffer too small");
    let wdata = p.wdata;
    let (r0, r1) = split(b.nrows(), p.ith, p.nth);
    let buf = p.scratch(b.ne[0]);
    // F32 rows with adjacent elements are quantized in place, others widened first
    let direct = b.ty == Type::F32 && b.nb[0] == 4;
    for r in r0..r1 {
        let (i1, i2, i3) = b.unflat_row(r);
        // SAFETY: wdata holds rs bytes per row of b (work_size); this thread owns rows r0..r1;
        // a direct row holds ne[0] adjacent f32.
        unsafe {
            let out = std::slice::from_raw_parts_mut(wdata.add(r * rs), rs);
            if direct {
                let row = b.row_ptr(i1, i2, i3) as *const f32;
                (tr.from_float)(std::slice::from_raw_parts(row, b.ne[0]), out);
            } else {
                b.load_row(i1, i2, i3, buf);
                (tr.from_float)(buf, out);
            }
        }
    }
    if widen {
        let k = b.ne[0];
        let off = (rs * b.nrows()).div_ceil(64) * 64;
        assert!(
            p.wsize >= off + k * 4 * b.nrows(),
            "mul_mat: work buffer too small"
        );
        for r in r0..r1 {
            // SAFETY: the f16 row r was written above by this thread; the f32 copies follow
            // the converted rows at `off` (work_size), row r owned by this thread.
            unsafe {
                let h = std::slice::from_raw_parts(wdata.add(r * rs) as *const u16, k);
                let w = std::slice::from_raw_parts_mut(wdata.add(off + r * k * 4) as *mut f32, k);
                crate::fp::f16_to_f32_row(h, w);
            }
        }
    }
    Some(rs)
}

pub(crate) fn mul_mat(p: &mut Params, n: &Node) {
    let (a, b, d) = (n.s(0), n.s(1), n.dst);
    let tr = traits_of(a.ty);
    let widen = widened_f16(&a, &b);
    let conv = convert_src1(p, &b, &tr, widen);
    if p.ith == 0 {
        p.counter.store(p.nth, Ordering::Relaxed);
    }
    p.barrier();

    let k = a.ne[0];
    let nr0 = a.ne[1];
    let nr1 = b.ne[1] * b.ne[2] * b.ne[3];
    let (r2, r3) = (b.ne[2] / a.ne[2], b.ne[3] / a.ne[3]);
    let arow = a.ty.row_size(k as i64);
    let brow = tr.vec_dot_type.row_size(k as i64);

    let wdata = p.wdata;
    // one matrix of columns (the usual case) needs no divisions per tile: at a few hundred
    // cycles a tile, a dozen of them weighed a tenth of an F32 tile's time
    let flat = b.ne[2] == 1 && b.ne[3] == 1;
    let same_matrix = |ir1: usize, w: usize| flat || ir1 / b.ne[1] == (ir1 + w - 1) / b.ne[1];
    let a_mat = |i12: usize, i13: usize| if flat { (0, 0) } else { (i12 / r2, i13 / r3) };
    let b_row = |ir1: usize| -> (*const u8, usize, usize, usize) {
        let (i11, i12, i13) = if flat {
            (ir1, 0, 0)
        } else {
            (
                ir1 % b.ne[1],
                (ir1 / b.ne[1]) % b.ne[2],
                ir1 / (b.ne[1] * b.ne[2]),
            )
        };
        let ptr = match conv {
            // SAFETY: the converted rows are laid out in flat row order.
            Some(rs) => unsafe { wdata.add(ir1 * rs) as *const u8 },
            None => b.row_ptr(i11, i12, i13) as *const u8,
        };
        (ptr, i11, i12, i13)
    };

    // a weight in CPU_REPACK: llama.cpp's repacked kernels (their layout and float order);
    // the same weight elsewhere takes the dot product's order below, as llama.cpp's does
    if a.repacked {
        super::mm_repacked::mul_mat(p, &a, &b, &d, &b_row);
        return;
    }

    // register tiles serve float weights whose partner has the same type, and Q8_0 / Q4_0 /
    // Q5_0 weights with Q8_0 activations
    // K-quant weights follow llama.cpp's tiled K-quant kernels (ne11 >= 8)
    let kplan = ktile::plan(a.ty, nr0, false, b.ne[1], b.ty);
    // ... through 16 rows a pass where AVX-512 VNNI is present
    #[cfg(target_arch = "x86_64")]
    if let Some(kp) = kplan.filter(|kp| super::mm_rows16::kquant_applies(*kp, &a)) {
        super::mm_rows16::kquant(p, kp, &a, &d, nr1, &b_row);
        return;
    }
    // Q8_0 / Q4_0 / Q5_0 weights times Q8_0 columns likewise (the dot product's order)
    #[cfg(target_arch = "x86_64")]
    if tr.vec_dot_type == Type::Q8_0 && super::mm_rows16::q0_applies(&a, nr1) {
        super::mm_rows16::q0(p, &a, &d, nr1, &b_row);
        return;
    }
    // IQ weights times >= 8 columns: llama.cpp's tiled path (ggml-cpu/tiled), not its dot
    let tiled_iq = (b.ne[1] >= 8 && matches!(b.ty, Type::F32 | Type::Q8K))
        .then(|| crate::dot::tiled_iq_kernel(a.ty))
        .flatten();
    let row_dot = tiled_iq.unwrap_or(tr.vec_dot);
    // types with a four-row kernel of the dot product's order (Q4_1, Q5_1)
    #[cfg(target_arch = "x86_64")]
    let rows4 = tiled_iq
        .is_none()
        .then(|| crate::dot::rows4_kernel(a.ty, arow))
        .flatten();
    #[cfg(not(target_arch = "x86_64"))]
    let rows4: Option<(
        unsafe fn(usize, &[*const u8; 4], *const u8, &mut [f32; 4]),
        usize,
    )> = None;
    // float weights: llamafile's tinyBLAS order where llama.cpp runs it, ggml's dot otherwise
    // (llamafile_sgemm runs on src 1 itself only when it is contiguous, and on its converted
    // copy when the type differed; a permuted F32 src 1 takes ggml's dot product)
    let float_tiles =
        gemm::tinyblas_shape(nr0, k, b.ne[1]) && (b.is_contiguous() || b.ty != tr.vec_dot_type);
    let tile_kind = match (a.ty, tr.vec_dot_type) {
        _ if kplan.is_some() => kplan.map(Tile::KQuant),
        (Type::F32, Type::F32) if gemm::available(gemm::Elem::F32) && float_tiles => {
            Some(Tile::Float(gemm::Elem::F32))
        }
        (Type::F16, Type::F16) if gemm::available(gemm::Elem::F16) && float_tiles => {
            Some(Tile::Float(gemm::Elem::F16))
        }
        // (tinyBLAS takes BF16 in steps of 32 values; without AVX512_BF16 llama.cpp's build
        // converts to f32 in steps of 16, a tile not written here: the dot product serves)
        (Type::Bf16, Type::Bf16)
            if gemm::available(gemm::Elem::Bf16)
                && float_tiles
                && k.is_multiple_of(gemm::BF16_KN) =>
        {
            Some(Tile::Float(gemm::Elem::Bf16))
        }
        (Type::Q8_0, Type::Q8_0) if qtile::available() => Some(Tile::Quant(qtile::QElem::Q8_0)),
        (Type::Q4_0, Type::Q8_0) if qtile::available() => Some(Tile::Quant(qtile::QElem::Q4_0)),
        (Type::Q5_0, Type::Q8_0) if qtile::available() => Some(Tile::Quant(qtile::QElem::Q5_0)),
        (Type::Q4_1, Type::Q8_1) if qtile::q4_1_available() => {
            Some(Tile::Quant(qtile::QElem::Q4_1))
        }
        (Type::Q5_1, Type::Q8_1) if qtile::q4_1_available() => {
            Some(Tile::Quant(qtile::QElem::Q5_1))
        }
        _ => None,
    };
    let chunk = if nr0 == 1 || nr1 == 1 { 64 } else { TILE };
    let (mut nc0, mut nc1) = (nr0.div_ceil(chunk), nr1.div_ceil(chunk));
    if nc0 * nc1 < p.nth * 4 {
        // too few chunks to balance: split only the longer dimension, one part per thread
        (nc0, nc1) = if nr0 > nr1 { (p.nth, 1) } else { (1, p.nth) };
    } else if nr1 == 1 {
        // one column (generation) streams the weight: long stretches of rows, so the row
        // prefetches mostly run on into the thread's own rows, but still a few per thread, so
        // a thread whose core is busy with another process hands its share to the others
        nc0 = nc0.min(STREAM_CHUNKS * p.nth);
    }
    let (mut dr0, mut dr1) = (nr0.div_ceil(nc0), nr1.div_ceil(nc1));
    // column blocks of whole register tiles: a leftover column costs a slow dot-product pass
    let mut tcols = match tile_kind {
        Some(Tile::KQuant(_) | Tile::Quant(_)) => 3 * ktile::COLS,
        Some(_) => 6 * gemm::RN,
        None => TILE,
    };
    // rows of the weight walked together down a column block
    let mut trows = TILE;
    if tile_kind.is_some() {
        dr1 = dr1.div_ceil(gemm::RN) * gemm::RN;
        nc1 = nr1.div_ceil(dr1);
    }
    if let Some(Tile::Float(el)) = tile_kind {
        // tinyBLAS's blocking: a job is 16 weight rows times a wide block of columns, walked
        // four rows (one tile's, which stay in L1) across the whole block (in L2), so each row
        // comes from memory once per block rather than once per 16 columns
        (dr0, nc0) = (TILE, nr0.div_ceil(TILE));
        dr1 = gemm::float_block_cols(el, nr1);
        nc1 = nr1.div_ceil(dr1);
        (trows, tcols) = (gemm::RM, dr1);
    }

    // one column streams the weight once: fetch rows ahead of the dot products (the hardware
    // prefetcher stops at page boundaries), about PREFETCH_BYTES ahead. The dot product row by
    // row reads STREAMS stretches of each chunk side by side (Interleave), each fetched so far
    // ahead; the several-row kernels measured no better so (Q8_0's, whose small weights stay
    // in the L3 cache, worse). Both only where the CPU's policy says they pay
    // (simd::features' prefetch_rows and stream_rows).
    let cpu = crate::simd::features::cpu();
    let pf = cpu.prefetch_rows(a.ty, arow);
    let streamed = pf && cpu.stream_rows() && nr1 == 1 && tile_kind.is_none() && rows4.is_none();
    let prefetch_rows = match (nr1, streamed) {
        (1, true) => PREFETCH_BYTES.div_ceil(arow.max(1)) * STREAMS,
        (1, false) if pf => PREFETCH_BYTES.div_ceil(arow.max(1)),
        _ => 0,
    };
    // quantized rows of one column: several a pass or one after another, as the CPU's policy
    // says (F16's four-row kernels have their own rule, simd::features' f16_rows4)
    let several = nr1 != 1 || a.ty == Type::F16 || cpu.several_rows(a.ty, arow);
    // one column's rows in one call per chunk where such a kernel exists (the same bits)
    #[cfg(target_arch = "x86_64")]
    if nr1 == 1 && prefetch_rows == 0 && d.nb[0] == 4 {
        if let Some(kind) = ColumnRows::of(a.ty, tr.vec_dot_type, several, arow) {
            column_rows(p, kind, &a, &d, b_row(0).0, nc0, dr0);
            return;
        }
    }
    let mut tmp = [0.0f32; TILE];
    let mut ch = p.ith;
    while ch < nc0 * nc1 {
        let (c0, c1) = (ch % nc0, ch / nc0);
        let (ir0s, ir0e) = (c0 * dr0, ((c0 + 1) * dr0).min(nr0));
        let (ir1s, ir1e) = (c1 * dr1, ((c1 + 1) * dr1).min(nr1));
        let walk_rows = Interleave::new(ir0s, ir0e, streamed);
        let row_at = |i: usize| walk_rows.row(i);
        let mut iir1 = ir1s;
        while iir1 < ir1e {
            let mut iir0 = ir0s;
            while iir0 < ir0e {
                let e0 = (iir0 + trows).min(ir0e);
                let e1 = (iir1 + tcols).min(ir1e);
                let mut ir1 = iir1;
                while ir1 < e1 {
                    // quantized weights take wider tiles: each unpacked block serves more columns
                    let wide = match tile_kind {
                        Some(Tile::KQuant(kp)) => Some(Wide::K(kp)),
                        // (Q8_0 blocks need no unpacking: wider tiles pay only where
                        // qtile::q8_0_wide says)
                        Some(Tile::Quant(q)) if q != qtile::QElem::Q8_0 || qtile::q8_0_wide() => {
                            Some(Wide::Q(q))
                        }
                        _ => None,
                    };
                    if let Some(kind) = wide {
                        let kt = WideTile {
                            kind,
                            k,
                            a: &a,
                            b_ne1: b.ne[1],
                            d: &d,
                            r2,
                            r3,
                        };
                        // SAFETY: as below.
                        let done = unsafe {
                            kt.cols::<{ 3 * ktile::COLS }>(ir1, e1, iir0, e0, &b_row)
                                .or_else(|| kt.cols::<{ ktile::COLS }>(ir1, e1, iir0, e0, &b_row))
                        };
                        if let Some(n) = done {
                            ir1 += n;
                            continue;
                        }
                    }
                    // AVX-512 F16: RN_WIDE columns of the same matrix in the wide tile
                    if let Some(Tile::Float(el)) = tile_kind {
                        const W: usize = gemm::RN_WIDE;
                        if gemm::wide_available(el) && ir1 + W <= e1 && same_matrix(ir1, W) {
                            let cols: [_; W] = std::array::from_fn(|c| b_row(ir1 + c));
                            let (i02, i03) = a_mat(cols[0].2, cols[0].3);
                            let bp = cols.map(|c| c.0);
                            // the columns widened to f32 (convert_src1), when they were
                            let b32 = widen.then(|| {
                                let off = (brow * nr1).div_ceil(64) * 64;
                                // SAFETY: the f32 copies follow the converted rows in wdata.
                                std::array::from_fn::<_, W, _>(|c| unsafe {
                                    wdata.add(off + (ir1 + c) * k * 4) as *const f32
                                })
                            });
                            let mut ir0 = iir0;
                            let mut out = [0.0f32; gemm::RM * W];
                            while ir0 < e0 {
                                let rows = (e0 - ir0).min(gemm::RM);
                                // SAFETY: as for the RN tiles below.
                                unsafe {
                                    let ap: [*const u8; gemm::RM] = std::array::from_fn(|r| {
                                        a.row_ptr(ir0 + r.min(rows - 1), i02, i03) as *const u8
                                    });
                                    match &b32 {
                                        Some(b32) => gemm::tile_wide_b32(k, &ap, b32, &mut out),
                                        None => gemm::tile_wide(el, k, &ap, &bp, &mut out),
                                    }
                                    store_tile(&d, ir0, rows, &cols, &out, true);
                                }
                                ir0 += rows;
                            }
                            ir1 += W;
                            continue;
                        }
                    }
                    // RN columns of the same matrix go through the register tile
                    if let Some(kind) = tile_kind {
                        if ir1 + gemm::RN <= e1 && same_matrix(ir1, gemm::RN) {
                            let cols = [b_row(ir1), b_row(ir1 + 1), b_row(ir1 + 2)];
                            let (i02, i03) = a_mat(cols[0].2, cols[0].3);
                            let bp = [cols[0].0, cols[1].0, cols[2].0];
                            let mut ir0 = iir0;
                            let mut out = [0.0f32; gemm::RM * gemm::RN];
                            while ir0 < e0 {
                                let rows = (e0 - ir0).min(gemm::RM);
                                // SAFETY: as below; a short last tile repeats its last row,
                                // whose extra results are not stored
                                unsafe {
                                    let ap: [*const u8; gemm::RM] = std::array::from_fn(|r| {
                                        a.row_ptr(ir0 + r.min(rows - 1), i02, i03) as *const u8
                                    });
                                    match kind {
                                        Tile::Float(el) => gemm::tile(el, k, &ap, &bp, &mut out),
                                        Tile::Quant(q) => {
                                            qtile::tile(q, k / 32, &ap, &bp, &mut out)
                                        }
                                        Tile::KQuant(kp) => {
                                            let orders = cols.map(|c| kp.order(c.1, b.ne[1]));
                                            ktile::tile(kp, k / 256, &ap, &bp, &orders, &mut out)
                                        }
                                    }
                                    store_tile(&d, ir0, rows, &cols, &out, false);
                                }
                                ir0 += rows;
                            }
                            ir1 += gemm::RN;
                            continue;
                        }
                    }
                    let (bp, i11, i12, i13) = b_row(ir1);
                    let (i02, i03) = a_mat(i12, i13);
                    // a column left over from the float tiles: the tile with that column in
                    // every slot, so its cells sum in the tiles' (tinyBLAS's) order too
                    if let Some(Tile::Float(el)) = tile_kind {
                        let mut ir0 = iir0;
                        let mut out = [0.0f32; gemm::RM * gemm::RN];
                        while ir0 < e0 {
                            let rows = (e0 - ir0).min(gemm::RM);
                            // SAFETY: as for the full tiles above.
                            unsafe {
                                let ap: [*const u8; gemm::RM] = std::array::from_fn(|r| {
                                    a.row_ptr(ir0 + r.min(rows - 1), i02, i03) as *const u8
                                });
                                gemm::tile(el, k, &ap, &[bp; gemm::RN], &mut out);
                                for r in 0..rows {
                                    (d.ptr(ir0 + r, i11, i12, i13) as *mut f32)
                                        .write_unaligned(out[r * gemm::RN]);
                                }
                            }
                            ir0 += rows;
                        }
                        ir1 += 1;
                        continue;
                    }
                    // SAFETY: rows of a and b exist (shapes checked by the constructor and the
                    // buffer bounds by graph_compute); each (ir0, ir1) cell of dst belongs to
                    // exactly one chunk.
                    unsafe {
                        let y = std::slice::from_raw_parts(bp, brow);
                        let mut ir0 = iir0;
                        let row = |i: usize| a.row_ptr(row_at(i), i02, i03) as *const u8;
                        let walk = RowWalk {
                            base: iir0,
                            end: if several { e0 } else { iir0 },
                            nr0,
                            ahead: prefetch_rows,
                            arow,
                        };
                        // Q8_0-type weights: several rows down the column at once (independent
                        // chains, each the dot product's own order)
                        // Q8_0 and Q4_1 with AVX-512 VNNI: eight rows a pass (same bits)
                        #[cfg(target_arch = "x86_64")]
                        if crate::dot::x86_k512::available() {
                            use crate::dot::x86_rows8::{q4_1_rows8, q8_0_rows8, ROWS};
                            match tile_kind {
                                Some(Tile::Quant(qtile::QElem::Q8_0)) => {
                                    walk.passes::<{ ROWS }>(&mut ir0, row, &mut tmp, |ap, out| {
                                        q8_0_rows8(k / 32, ap, bp, out);
                                    })
                                }
                                Some(Tile::Quant(qtile::QElem::Q4_1)) => {
                                    walk.passes::<{ ROWS }>(&mut ir0, row, &mut tmp, |ap, out| {
                                        q4_1_rows8(k / 32, ap, bp, out);
                                    })
                                }
                                _ => {}
                            }
                        }
                        if let Some(Tile::Quant(q)) = tile_kind {
                            const CR: usize = qtile::COLUMN_ROWS;
                            walk.passes::<{ CR }>(&mut ir0, row, &mut tmp, |ap, out| {
                                qtile::column(q, k / 32, ap, bp, out);
                            });
                        }
                        // types with a four-row kernel (dot::rows4_kernel) likewise (each row its
                        // own chain in the dot product's order)
                        if let (None, Some((f, qk))) = (tile_kind, rows4) {
                            walk.passes::<{ gemm::RM }>(&mut ir0, row, &mut tmp, |ap, out| {
                                f(k / qk, ap, bp, out);
                            });
                        }
                        // K-quant columns left over from the wide tiles: four rows per pass
                        // through the one-column tile (each cell in its column's order, as
                        // ktile::dot row by row)
                        if let Some(kp) = kplan {
                            let order = [kp.order(i11, b.ne[1])];
                            walk.passes::<{ gemm::RM }>(&mut ir0, row, &mut tmp, |ap, out| {
                                ktile::tile::<1>(kp, k / 256, ap, &[bp], &order, out);
                            });
                        }
                        for ir0 in ir0..e0 {
                            let x = std::slice::from_raw_parts(row(ir0), arow);
                            if prefetch_rows > 0 && ir0 + prefetch_rows < nr0 {
                                prefetch(row(ir0 + prefetch_rows), arow);
                            }
                            tmp[ir0 - iir0] = if let Some(kp) = kplan {
                                let order = kp.order(i11, b.ne[1]);
                                ktile::dot(kp, order, k / 256, x.as_ptr(), y.as_ptr())
                            } else {
                                row_dot(k, x, y)
                            };
                        }
                        for ir0 in iir0..e0 {
                            (d.ptr(row_at(ir0), i11, i12, i13) as *mut f32)
                                .write_unaligned(tmp[ir0 - iir0]);
                        }
                    }
                    ir1 += 1;
                }
                iir0 += trows;
            }
            iir1 += tcols;
        }
        ch = p.counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Kernels that take a chunk of one column's consecutive weight rows in one call: no call,
/// closure and store through mul_mat's row loop per row or pass, and eight rows' horizontal
/// sums together.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
enum ColumnRows {
    /// `dot::x86_q8_0_rows`: Q8_0 / Q5_0 / Q4_1 / Q5_1 rows where the CPU's policy takes them
    /// one by one: row after row, or two a pass from the two halves of the chunk (`halves`).
    Rows {
        w: crate::dot::x86_q8_0_rows::Weights,
        halves: bool,
    },
    /// `dot::x86_k512::q6_k_rows`: eight rows a pass, block by block (where the policy takes
    /// Q6_K rows several at a time: short rows).
    Q6K,
    /// `dot::x86::f32_rows_k512`: row after row.
    F32,
    /// `dot::x86_f16_rows::rows`: F16 rows where the policy takes them one by one (not
    /// `dot::rows4_kernel`'s four a pass), row after row or two a pass from the halves.
    F16 { halves: bool },
    /// `dot::x86_prepared::kernel`'s (Q3_K, IQ4_XS): the column prepared once per thread,
    /// the rows one after another or two a pass from the halves.
    Prepared {
        kernel: crate::dot::x86_prepared::Kernel,
        halves: bool,
    },
    /// `dot::x86_bf16::rows`: BF16 rows where the policy takes them so (`bf16_rows`), row
    /// after row or two a pass from the halves.
    Bf16 { halves: bool },
    /// `dot::x86_k512::q6_k_rows_halves`: two rows a pass from the two halves of the chunk
    /// (where the policy takes Q6_K rows one by one, and so).
    Q6KHalves,
}

#[cfg(target_arch = "x86_64")]
impl ColumnRows {
    fn of(ty: Type, vdt: Type, several: bool, row_bytes: usize) -> Option<Self> {
        if !crate::dot::x86_k512::available() {
            return None;
        }
        use crate::dot::x86_q8_0_rows::Weights;
        let cpu = crate::simd::features::cpu();
        let rows = |w| {
            Some(Self::Rows {
                w,
                halves: cpu.rows_in_halves(ty, row_bytes),
            })
        };
        match (ty, vdt) {
            (Type::Q8_0, Type::Q8_0) if !several => rows(Weights::Q8_0),
            (Type::Q5_0, Type::Q8_0) if !several => rows(Weights::Q5_0),
            (Type::Q4_1, Type::Q8_1) if !several => rows(Weights::Q4_1),
            (Type::Q5_1, Type::Q8_1) if !several => rows(Weights::Q5_1),
            (Type::Q6K, Type::Q8K) if several => Some(Self::Q6K),
            (Type::Q6K, Type::Q8K) if cpu.rows_in_halves(ty, row_bytes) => Some(Self::Q6KHalves),
            (Type::F32, Type::F32) if !several => Some(Self::F32),
            (Type::F16, Type::F16) if !cpu.f16_rows4(row_bytes) => Some(Self::F16 {
                halves: cpu.rows_in_halves(ty, row_bytes),
            }),
            (Type::Q3K | Type::Iq4Xs, Type::Q8K) if !several => {
                crate::dot::x86_prepared::kernel(ty).map(|kernel| Self::Prepared {
                    kernel,
                    halves: cpu.rows_in_halves(ty, row_bytes),
                })
            }
            (Type::Bf16, Type::Bf16) if cpu.bf16_rows() => Some(Self::Bf16 {
                halves: cpu.rows_in_halves(ty, row_bytes),
            }),
            _ => None,
        }
    }
}

/// One column (generation) times the weight rows of chunks of `dr0` rows, each chunk in one
/// call of `kind`'s kernel.
#[cfg(target_arch = "x86_64")]
fn column_rows(
    p: &mut Params,
    kind: ColumnRows,
    a: &TRef,
    d: &TRef,
    y: *const u8,
    nc0: usize,
    dr0: usize,
) {
    use crate::dot::x86_q8_0_rows as q8r;
    let (nr0, k) = (a.ne[1], a.ne[0]);
    let counter = p.counter;
    let mut ch = p.ith;
    // the column's scales, sums and start values, made once per thread
    let prep: &[f32] = match kind {
        ColumnRows::Rows { w, .. } => {
            let buf = p.scratch(q8r::PREP_SLOTS * (k / 32));
            // SAFETY: AVX-512 VNNI is present (ColumnRows::of); y is one row of k values of
            // the kernel's activation type (Q8_1 for Q4_1 / Q5_1, Q8_0 otherwise).
            unsafe { q8r::prep(w, k / 32, y, buf) };
            buf
        }
        ColumnRows::Prepared { kernel, .. } => {
            let nb = k / 256;
            let buf = p.scratch(crate::dot::x86_prepared::PREP_SLOTS * nb);
            // SAFETY: the kernel's CPU features are present (ColumnRows::of); y is one Q8_K
            // row of k values.
            unsafe { (kernel.prep)(nb, y, buf) };
            buf
        }
        ColumnRows::Q6K
        | ColumnRows::F32
        | ColumnRows::Q6KHalves
        | ColumnRows::F16 { .. }
        | ColumnRows::Bf16 { .. } => &[],
    };
    while ch < nc0 {
        let (s, e) = (ch * dr0, ((ch + 1) * dr0).min(nr0));
        if s < e {
            // SAFETY: rows s..e of matrix 0 of a exist, k values each, nb[1] bytes apart, and y
            // is one row of the kernel's activation type (mul_mat's conversion); their cells of
            // dst column 0 are adjacent f32 (nb[0] == 4, the caller checked) and belong to this
            // chunk alone.
            unsafe {
                let out = std::slice::from_raw_parts_mut(d.ptr(s, 0, 0, 0) as *mut f32, e - s);
                let x = a.row_ptr(s, 0, 0) as *const u8;
                match kind {
                    ColumnRows::Rows { w, halves } => {
                        q8r::rows(w, k / 32, x, a.nb[1], y, prep, out, halves)
                    }
                    ColumnRows::Q6K => crate::dot::x86_k512::q6_k_rows(k / 256, x, a.nb[1], y, out),
                    ColumnRows::Q6KHalves => {
                        crate::dot::x86_k512::q6_k_rows_halves(k / 256, x, a.nb[1], y, out)
                    }
                    ColumnRows::F32 => crate::dot::x86::f32_rows_k512(k, x, a.nb[1], y, out),
                    ColumnRows::F16 { halves } => {
                        crate::dot::x86_f16_rows::rows(k, x, a.nb[1], y, out, halves)
                    }
                    ColumnRows::Prepared { kernel, halves } => {
                        (kernel.rows)(k / 256, x, a.nb[1], y, prep, out, halves)
                    }
                    ColumnRows::Bf16 { halves } => {
                        crate::dot::x86_bf16::rows(k, x, a.nb[1], y, out, halves)
                    }
                }
            }
        }
        ch = counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Experts as {K, M, n_as}, b {K, ne11, ne12}, ids {n_ids, ne12}: dst[:, id, t] =
/// as[ids[id, t]] x b[:, id % ne11, t].
pub(crate) fn mul_mat_id(p: &mut Params, n: &Node) {
    let (a, b, ids, d) = (n.s(0), n.s(1), n.s(2), n.dst);
    let tr = traits_of(a.ty);
    let err = p.err();
    let conv = convert_src1(p, &b, &tr, false);
    if a.repacked {
        return mul_mat_id_repacked(p, &a, &b, &ids, &d, conv);
    }
    p.barrier();

    let k = a.ne[0];
    let nr0 = a.ne[1];
    let n_as = a.ne[2];
    let arow = a.ty.row_size(k as i64);
    let brow = tr.vec_dot_type.row_size(k as i64);

    let cols = route(&ids, n_as, err);
    let (ir0s, ir0e) = split(nr0, p.ith, p.nth);
    let wdata = p.wdata;
    for (e, list) in cols.iter().enumerate() {
        for tile in list.chunks(TILE) {
            let mut iir0 = ir0s;
            while iir0 < ir0e {
                let e0 = (iir0 + TILE).min(ir0e);
                for &(id, t) in tile {
                    let i11 = id % b.ne[1];
                    // SAFETY: as in mul_mat; each (row, id, t) of dst is written by one thread.
                    unsafe {
                        let bp = match conv {
                            Some(rs) => wdata.add((i11 + t * b.ne[1]) * rs) as *const u8,
                            None => b.row_ptr(i11, t, 0) as *const u8,
                        };
                        let y = std::slice::from_raw_parts(bp, brow);
                        for ir0 in iir0..e0 {
                            let x = std::slice::from_raw_parts(a.row_ptr(ir0, e, 0), arow);
                            (d.ptr(ir0, id, t, 0) as *mut f32)
                                .write_unaligned((tr.vec_dot)(k, x, y));
                        }
                    }
                }
                iir0 += TILE;
            }
        }
    }
}

/// Every thread builds the same (expert -> (id, token) columns) lists, tokens in order; they
/// are small. An id outside 0..n_as sets `err` and is skipped.
fn route(ids: &TRef, n_as: usize, err: &std::sync::atomic::AtomicBool) -> Vec<Vec<(usize, usize)>> {
    let mut cols: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n_as];
    for t in 0..ids.ne[1] {
        for id in 0..ids.ne[0] {
            // SAFETY: (id, t) is inside ids.
            let e = unsafe { crate::tref::load_index(ids.ty, ids.ptr(id, t, 0, 0)) };
            if e < 0 || e as usize >= n_as {
                err.store(true, Ordering::Relaxed);
                continue;
            }
            cols[e as usize].push((id, t));
        }
    }
    cols
}

/// MUL_MAT_ID of experts in CPU_REPACK (llama.cpp's repack forward_mul_mat_id): every (expert,
/// token) cell in the repacked gemv's float order, each expert's slice read in the layout of
/// a 2-D weight. Each expert's units come from its own counter in the work buffer, so no
/// thread waits for another between experts.
fn mul_mat_id_repacked(
    p: &mut Params,
    a: &TRef,
    b: &TRef,
    ids: &TRef,
    d: &TRef,
    conv: Option<usize>,
) {
    let Some(rs) = conv else {
        unreachable!("mul_mat_id: CPU_REPACK experts take F32 activations (supports_op)");
    };
    let n_as = a.ne[2];
    let err = p.err();
    let counters: &[AtomicUsize] = {
        let size = std::mem::size_of::<AtomicUsize>();
        let at = rs * b.nrows();
        assert!(
            p.wsize >= at + (n_as + 1) * size,
            "mul_mat_id: work buffer too small"
        );
        // SAFETY: work_size_id reserved (n_as + 1) counters' bytes after the converted rows,
        // enough for n_as aligned ones; thread 0 stores every counter before the barrier below,
        // and they are only used atomically.
        unsafe {
            let base = p.wdata.add(at);
            let base = base.add(base.align_offset(std::mem::align_of::<AtomicUsize>()));
            std::slice::from_raw_parts(base as *const AtomicUsize, n_as)
        }
    };
    if p.ith == 0 {
        for c in counters {
            c.store(p.nth, Ordering::Relaxed);
        }
    }
    p.barrier();

    let cols = route(ids, n_as, err);
    let wdata = p.wdata;
    let ne11 = b.ne[1];
    let saved = p.counter;
    for (e, list) in cols.iter().enumerate() {
        if list.is_empty() {
            continue;
        }
        // expert e's slice as a 2-D weight
        let ae = TRef {
            data: a.row_ptr(0, e, 0),
            ne: [a.ne[0], a.ne[1], 1, 1],
            ..*a
        };
        let b_row = |c: usize| -> (*const u8, usize, usize, usize) {
            let (id, t) = list[c];
            // SAFETY: the converted rows are laid out in flat row order (i11 + t * ne11).
            let ptr = unsafe { wdata.add((id % ne11 + t * ne11) * rs) as *const u8 };
            (ptr, id, t, 0)
        };
        p.counter = &counters[e];
        // ne11 = 1: every cell in the gemv's order
        super::mm_repacked::columns(p, &ae, 1, list.len(), d, &b_row);
    }
    p.counter = saved;
}

/// Quantized weights whose tiles span more than RN columns.
#[derive(Clone, Copy)]
enum Wide {
    K(ktile::Plan),
    Q(qtile::QElem),
}

/// One quantized matmul's wide tiles.
struct WideTile<'a> {
    kind: Wide,
    k: usize,
    a: &'a TRef,
    b_ne1: usize,
    d: &'a TRef,
    r2: usize,
    r3: usize,
}

impl WideTile<'_> {
    /// Columns ir1..ir1 + KC (when they exist before e1 and share a matrix) times weight rows
    /// iir0..e0; returns how many columns were done.
    ///
    /// # Safety
    /// As for mul_mat's tiles: the rows exist and the dst cells belong to this chunk.
    unsafe fn cols<const KC: usize>(
        &self,
        ir1: usize,
        e1: usize,
        iir0: usize,
        e0: usize,
        b_row: &dyn Fn(usize) -> (*const u8, usize, usize, usize),
    ) -> Option<usize> {
        if ir1 + KC > e1 || ir1 / self.b_ne1 != (ir1 + KC - 1) / self.b_ne1 {
            return None;
        }
        let cols: [_; KC] = std::array::from_fn(|c| b_row(ir1 + c));
        let (i02, i03) = (cols[0].2 / self.r2, cols[0].3 / self.r3);
        let bp = cols.map(|c| c.0);

        let mut buf = [0.0f32; gemm::RM * 3 * ktile::COLS];
        let out = &mut buf[..gemm::RM * KC];
        let mut ir0 = iir0;
        while ir0 < e0 {
            let rows = (e0 - ir0).min(gemm::RM);
            // SAFETY: the caller's promise; a short last tile repeats its last row, whose extra
            // results are not stored
            unsafe {
                let ap: [*const u8; gemm::RM] = std::array::from_fn(|r| {
                    self.a.row_ptr(ir0 + r.min(rows - 1), i02, i03) as *const u8
                });
                // Q8_0's passes store their cells into dst themselves (whole row groups of
                // contiguous f32 columns)
                if matches!(self.kind, Wide::Q(qtile::QElem::Q8_0))
                    && rows == gemm::RM
                    && self.d.nb[0] == 4
                {
                    let dst = cols.map(|c| self.d.ptr(ir0, c.1, c.2, c.3) as *mut f32);
                    if qtile::q8_0_to_dst::<KC>(self.k / 32, &ap, &bp, &dst) {
                        ir0 += rows;
                        continue;
                    }
                }
                match self.kind {
                    Wide::K(kp) => {
                        let orders = cols.map(|c| kp.order(c.1, self.b_ne1));
                        ktile::tile(kp, self.k / 256, &ap, &bp, &orders, out)
                    }
                    Wide::Q(q) => qtile::tile(q, self.k / 32, &ap, &bp, out),
                }
                store_tile(self.d, ir0, rows, &cols, out, false);
            }
            ir0 += rows;
        }
        Some(KC)
    }
}

#[cfg(test)]
mod tests {
    use super::{Interleave, STREAMS};
    use crate::quant::mm_traits;
    use ggml::backend::{set_tensor, tensor_set_f32, tensor_to_f32};
    use ggml::{Context, Graph, Type};

    /// Every row of a chunk is walked exactly once, in STREAMS stretches of lengths that
    /// differ by at most one, one row of each per STREAMS positions; rows outside stay.
    #[test]
    fn interleaved_walk_visits_every_row_once() {
        for (s, e) in [(0usize, 0usize), (3, 4), (10, 17), (64, 128), (5, 1036)] {
            let w = Interleave::new(s, e, true);
            let mut rows: Vec<usize> = (s..e).map(|i| w.row(i)).collect();
            if e - s >= STREAMS {
                let first: Vec<usize> = (s..s + STREAMS).map(|i| w.row(i)).collect();
                let len = (e - s) / STREAMS;
                assert_eq!(first[0], s);
                assert!(first
                    .windows(2)
                    .all(|p| p[1] - p[0] == len || p[1] - p[0] == len + 1));
            }
            rows.sort_unstable();
            assert_eq!(rows, (s..e).collect::<Vec<_>>(), "{s}..{e}");
            assert_eq!((w.row(s.wrapping_sub(1)), w.row(e)), (s.wrapping_sub(1), e));
            let off = Interleave::new(s, e, false);
            assert!((s..e).all(|i| off.row(i) == i));
        }
    }

    /// Float weights times many columns in tinyBLAS's shapes (the wide AVX-512 tiles where
    /// present, stored column by column, then the narrow ones for the columns left): every
    /// cell the bits of the narrow tile of its row and column.
    #[test]
    fn float_tile_cells_land_in_their_row_and_column() {
        use super::gemm;
        let (k, rows, cols) = (64usize, 44usize, 23usize);
        assert!(gemm::tinyblas_shape(rows, k, cols));
        for (ty, el) in [(Type::F32, gemm::Elem::F32), (Type::F16, gemm::Elem::F16)] {
            if !gemm::available(el) {
                eprintln!("skipped {ty}: no float tile on this CPU");
                continue;
            }
            for threads in [1, 2] {
                let mut ctx = Context::new();
                let w = ctx.new_tensor_2d(ty, k as i64, rows as i64);
                let b = ctx.new_tensor_2d(ty, k as i64, cols as i64);
                let out = ctx.mul_mat(w, b);
                let cpu = crate::device().buffer_type();
                let _buf = ggml::alloc::alloc_ctx_tensors(&mut ctx, &cpu).expect("alloc");
                let rb = ty.row_size(k as i64);
                let fill = |n: usize, seed: usize| -> Vec<u8> {
                    let mut v = vec![0u8; n * rb];
                    for r in 0..n {
                        let x: Vec<f32> = (0..k)
                            .map(|i| (((i * 7 + r * 13 + seed) % 29) as f32 - 14.0) / 9.0)
                            .collect();
                        ggml::quants::quantize_row_ref(ty, &x, &mut v[r * rb..(r + 1) * rb]);
                    }
                    v
                };
                let (wp, bp) = (fill(rows, 0), fill(cols, 5));
                set_tensor(&ctx[w], &wp, 0).expect("set w");
                set_tensor(&ctx[b], &bp, 0).expect("set b");
                let mut g = Graph::new(ctx);
                g.build_forward_expand(out);
                assert!(crate::compute_graph(&g, threads).is_success());
                let got = tensor_to_f32(&g.ctx[out]).expect("out");
                for r in 0..rows {
                    for c in 0..cols {
                        let ap = [wp[r * rb..].as_ptr(); gemm::RM];
                        let col = [bp[c * rb..].as_ptr(); gemm::RN];
                        let mut cell = [0.0f32; gemm::RM * gemm::RN];
                        // SAFETY: available(el) holds; every pointer covers k elements.
                        unsafe { gemm::tile(el, k, &ap, &col, &mut cell) };
                        assert_eq!(
                            got[c * rows + r].to_bits(),
                            cell[0].to_bits(),
                            "{ty}, {threads} threads: cell ({r}, {c})"
                        );
                    }
                }
            }
        }
    }

    /// One column times weights of many row counts, on 1 and 2 threads: each cell is the dot
    /// product of its own row (the rows walked in stretches side by side land where they
    /// belong).
    #[test]
    fn one_column_cells_are_their_rows_dot_products() {
        let k = 256;
        for ty in [Type::F32, Type::Q6K, Type::Q8_0, Type::F16] {
            let tr = mm_traits(ty).expect("traits");
            for rows in [1usize, 5, 67, 300, 1031] {
                for threads in [1, 2] {
                    let mut ctx = Context::new();
                    let w = ctx.new_tensor_2d(ty, k as i64, rows as i64);
                    let b = ctx.new_tensor_2d(Type::F32, k as i64, 1);
                    let out = ctx.mul_mat(w, b);
                    let cpu = crate::device().buffer_type();
                    let _buf = ggml::alloc::alloc_ctx_tensors(&mut ctx, &cpu).expect("alloc");
                    let rb = ty.row_size(k as i64);
                    let mut plain = vec![0u8; rows * rb];
                    for r in 0..rows {
                        let v: Vec<f32> = (0..k)
                            .map(|i| (((i * 7 + r * 13) % 29) as f32 - 14.0) / 9.0)
                            .collect();
                        ggml::quants::quantize_row_ref(ty, &v, &mut plain[r * rb..(r + 1) * rb]);
                    }
                    set_tensor(&ctx[w], &plain, 0).expect("set");
                    let col: Vec<f32> = (0..k).map(|i| ((i % 11) as f32 - 5.0) / 3.0).collect();
                    tensor_set_f32(&ctx[b], &col).expect("set b");
                    let mut g = Graph::new(ctx);
                    g.build_forward_expand(out);
                    assert!(crate::compute_graph(&g, threads).is_success());
                    let got = tensor_to_f32(&g.ctx[out]).expect("out");
                    let mut y = vec![0u8; tr.vec_dot_type.row_size(k as i64)];
                    (tr.from_float)(&col, &mut y);
                    for r in 0..rows {
                        let want = (tr.vec_dot)(k, &plain[r * rb..(r + 1) * rb], &y);
                        assert_eq!(
                            got[r].to_bits(),
                            want.to_bits(),
                            "{ty} {rows} rows, {threads} threads: row {r}"
                        );
                    }
                }
            }
        }
    }
}
