//! The CPU_REPACK buffer type (ggml-cpu/repack.cpp): weights that a matmul kernel reads in
//! an interleaved layout are rearranged once, when they are loaded, instead of at every
//! matmul. Only MUL_MAT of a whole 2-D weight, or MUL_MAT_ID of a whole 3-D expert stack (each
//! expert's slice laid out as a 2-D weight), reads them (`support::supports_op`); the bytes
//! come back in GGUF order through `get_tensor`, so copies to other devices and dumps see
//! the file's data.
//!
//! Which weights go here follows llama.cpp's choice on x86 (ggml_repack_get_optimal_repack_type)
//! for the types whose repacked kernels this backend has: Q4_0, IQ4_NL and Q4_K with a
//! multiple of 8 rows, on a CPU with AVX2 (llama.cpp's q4_0_8x8 / iq4_nl_8x8 / q4_K_8x8), and
//! Q2_K with a multiple of 8 rows on a CPU with AVX-512F (q2_K_8x8), and MXFP4 with a multiple
//! of 8 rows on a CPU with AVX2 (mxfp4_8x8_q8_0). A weight placed here also takes llama.cpp's
//! repacked float order (`qtile::QElem::Q4_0Repacked`, `ktile::Order::RepackGemm` /
//! `RepackGemv`, `dot::x86_q2k_repack`, `dot::x86_mxfp4_repack`); the same weight in a plain
//! buffer (`-nr`) takes its dot product's (or tiled) order, as llama.cpp's does.
//! Experts in MUL_MAT_ID take the repacked gemv's order for every (expert, token) cell, as
//! llama.cpp's forward_mul_mat_id (`ops::matmul::mul_mat_id_repacked`).
//!
//! Q4_K's layout: groups of 8 rows with their blocks interleaved (`Layout::Q4KRows8`).
//! Q4_0 / IQ4_NL's, "nibble panels": the rows in panels of 16 (the last one 8 when rows % 16 == 8),
//! each panel `rows * row_size` bytes where its rows were, block by block: the R row scales
//! (f16), then 4 groups of R dwords, dword r of group j holding quant bytes 4j..4j+4 of row
//! r's block. One 64-byte load then gives a VNNI kernel the same four bytes of 16 rows.
//! Q2_K's (`Layout::Q2KPanels`): the same panels of 16 (or 8) rows, block by block: the R d
//! (f16), the R dmin, 4 groups of R dwords of scale bytes, 16 groups of R dwords of qs bytes.
//! MXFP4's (`Layout::Mxfp4Panels`): the same panels, block by block: the R exponent bytes, then
//! 4 groups of R dwords of qs bytes (as the nibble panels with one-byte scales).
//! The size of every tensor is unchanged (llama.cpp's buffer sizes).

use ggml::backend::{
    range_inside, same_buft, BackendError, Buffer, BufferImpl, BufferType, BufferTypeRef,
    HostBuffer, TensorIo,
};
use ggml::{Tensor, Type};
use std::sync::{Arc, OnceLock};

/// Rows of a full nibble panel.
pub(crate) const PANEL: usize = 16;
/// Bytes of one Q4_0 / IQ4_NL block (f16 scale + 16 quant bytes).
const BLOCK: usize = 18;

/// How a weight is laid out in a CPU_REPACK buffer.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Layout {
    /// Q4_0 or IQ4_NL in nibble panels.
    NibblePanels,
    /// Q4_K in groups of 8 rows, block-interleaved: a group's block ib of rows 0..8, then
    /// its block ib + 1, ... (each block as in GGUF), so the kernels that take 8 or 4 rows
    /// of a group read one stream.
    Q4KRows8,
    /// Q2_K in panels of 16 (or 8) rows, dword-interleaved (the header comment).
    Q2KPanels,
    /// MXFP4 in panels of 16 (or 8) rows, dword-interleaved (the header comment).
    Mxfp4Panels,
}

/// Rows of a Q4_K group.
pub(crate) const K_GROUP: usize = 8;
/// Bytes of one Q4_K block.
pub(crate) const K_BLOCK: usize = 144;

/// Bytes of one Q2_K block, and the offsets (in units of the panel's rows) of a Q2_K panel
/// block's parts: d (f16 each), dmin, 4 scale dwords, 16 qs dwords.
pub(crate) const Q2K_BLOCK: usize = 84;
pub(crate) const Q2K_DMIN: usize = 2;
pub(crate) const Q2K_SC: usize = 4;
pub(crate) const Q2K_QS: usize = 20;

/// Bytes of one MXFP4 block (E8M0 exponent + 16 quant bytes).
pub(crate) const MXFP4_BLOCK: usize = 17;

/// Whether llama.cpp would take its AVX-512 repack (ggml_cpu_has_avx512: AVX-512F).
fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::simd::features::cpu().avx512f
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The layout llama.cpp's repack would give a weight of `ty` and shape `ne` on this CPU, or
/// None where it keeps the weight as it is (the loader then places it in plain memory).
pub(crate) fn layout_for(ty: Type, ne: [i64; 4]) -> Option<Layout> {
    if !crate::ops::qtile::available() {
        return None;
    }
    match ty {
        Type::Q4_0 | Type::Iq4Nl if ne[1] > 0 && ne[1] % 8 == 0 && ne[0] % 32 == 0 => {
            Some(Layout::NibblePanels)
        }
        Type::Q4K if ne[1] > 0 && ne[1] % 8 == 0 && ne[0] % 256 == 0 => Some(Layout::Q4KRows8),
        Type::Q2K if ne[1] > 0 && ne[1] % 8 == 0 && ne[0] % 256 == 0 && has_avx512() => {
            Some(Layout::Q2KPanels)
        }
        Type::Mxfp4 if ne[1] > 0 && ne[1] % 8 == 0 && ne[0] % 32 == 0 => Some(Layout::Mxfp4Panels),
        _ => None,
    }
}

/// The process-wide CPU_REPACK buffer type.
pub(crate) fn buffer_type() -> BufferTypeRef {
    static BUFT: OnceLock<BufferTypeRef> = OnceLock::new();
    BUFT.get_or_init(|| Arc::new(RepackBufferType)).clone()
}

/// Whether `buft` is CPU_REPACK.
pub(crate) fn is_repack_buft(buft: &BufferTypeRef) -> bool {
    same_buft(buft, &buffer_type())
}

/// Whether tensor `t` lives in a CPU_REPACK buffer (its bytes are in `layout_for`'s layout).
pub(crate) fn holds(t: &Tensor) -> bool {
    t.buffer().is_some_and(|b| is_repack_buft(b.buft()))
}

struct RepackBufferType;

impl BufferType for RepackBufferType {
    fn name(&self) -> &str {
        "CPU_REPACK"
    }
    fn alloc_buffer(self: Arc<Self>, size: usize) -> Result<Arc<Buffer>, BackendError> {
        // every byte is written right after (the weights, repacked): pages faulted in from
        // all cores first
        let mem = HostBuffer::alloc_populated(size).ok_or_else(|| BackendError::Alloc {
            buft: "CPU_REPACK".into(),
            size,
            reason: "out of memory".into(),
        })?;
        Ok(Arc::new(Buffer::new(
            buffer_type(),
            Box::new(RepackBuffer { mem }),
        )))
    }
    fn alignment(&self) -> usize {
        crate::device::TENSOR_ALIGNMENT
    }
    /// Not host memory to other backends: its bytes are not the tensor's GGUF bytes.
    fn is_host(&self) -> bool {
        false
    }
}

struct RepackBuffer {
    mem: HostBuffer,
}

impl BufferImpl for RepackBuffer {
    fn base(&self) -> usize {
        self.mem.base()
    }
    fn size(&self) -> usize {
        self.mem.size()
    }
    fn set(&self, addr: usize, data: &[u8]) -> Result<(), BackendError> {
        self.mem.set(addr, data)
    }
    fn get(&self, addr: usize, out: &mut [u8]) -> Result<(), BackendError> {
        self.mem.get(addr, out)
    }
    fn memset(&self, addr: usize, value: u8, size: usize) -> Result<(), BackendError> {
        self.mem.memset(addr, value, size)
    }
    fn init_tensor(&self, t: &Tensor) -> Result<(), BackendError> {
        if t.view_src.is_none() && layout_for(t.ty, t.ne).is_none() {
            return Err(BackendError::Other(format!(
                "CPU_REPACK cannot hold '{}' ({} {:?})",
                t.name, t.ty, t.ne
            )));
        }
        Ok(())
    }
    fn tensor_io(&self) -> Option<&dyn TensorIo> {
        Some(self)
    }
}

impl RepackBuffer {
    /// The tensor's bytes in GGUF order.
    fn read_plain(&self, t: &Tensor) -> Result<Vec<u8>, BackendError> {
        let n = t.nbytes();
        let layout = plain_layout(t)?;
        let mut packed = vec![0u8; n];
        self.mem.get(t.addr(), &mut packed)?;
        let mut plain = vec![0u8; n];
        unpack(layout, t.ne, &packed, &mut plain);
        Ok(plain)
    }

    /// Packs straight into the buffer (`pack` writes every byte of its output): no copy
    /// through a fresh allocation, whose pages a load would fault in and zero once more per
    /// tensor.
    fn write_plain(&self, t: &Tensor, plain: &[u8]) -> Result<(), BackendError> {
        let layout = plain_layout(t)?;
        let at = t.addr();
        if !range_inside(self.mem.base(), self.mem.size(), at, plain.len()) {
            return Err(BackendError::Other(format!(
                "CPU_REPACK: '{}' lies outside its buffer",
                t.name
            )));
        }
        // SAFETY: at..at + plain.len() lies inside this buffer's writable memory (checked
        // above), which holds this tensor's bytes alone; `plain` is the caller's data, never
        // this buffer's memory.
        let packed = unsafe { std::slice::from_raw_parts_mut(at as *mut u8, plain.len()) };
        pack(layout, t.ne, plain, packed);
        Ok(())
    }
}

fn plain_layout(t: &Tensor) -> Result<Layout, BackendError> {
    match (t.view_src, layout_for(t.ty, t.ne)) {
        (None, Some(l)) => Ok(l),
        _ => Err(BackendError::Other(format!(
            "CPU_REPACK: '{}' is not a whole weight this buffer type holds",
            t.name
        ))),
    }
}

impl TensorIo for RepackBuffer {
    fn set_tensor(&self, t: &Tensor, data: &[u8], offset: usize) -> Result<(), BackendError> {
        if offset == 0 && data.len() == t.nbytes() {
            return self.write_plain(t, data);
        }
        // a part: rearranged through the whole tensor
        let mut plain = self.read_plain(t)?;
        plain[offset..offset + data.len()].copy_from_slice(data);
        self.write_plain(t, &plain)
    }
    fn get_tensor(&self, t: &Tensor, out: &mut [u8], offset: usize) -> Result<(), BackendError> {
        let plain = self.read_plain(t)?;
        out.copy_from_slice(&plain[offset..offset + out.len()]);
        Ok(())
    }
    fn memset_tensor(
        &self,
        t: &Tensor,
        value: u8,
        offset: usize,
        size: usize,
    ) -> Result<(), BackendError> {
        let mut plain = self.read_plain(t)?;
        plain[offset..offset + size].fill(value);
        self.write_plain(t, &plain)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// (first row, rows) of each panel of a weight with `rows` rows (a multiple of 8).
pub(crate) fn panels(rows: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..rows.div_ceil(PANEL)).map(move |p| (p * PANEL, PANEL.min(rows - p * PANEL)))
}

/// Byte offset of (row r, quant byte q of block ib's 16) within a panel of `n` rows, block ib.
#[inline]
fn panel_quant(n: usize, ib: usize, r: usize, q: usize) -> usize {
    ib * n * BLOCK + 2 * n + ((q / 4) * n + r) * 4 + q % 4
}

/// Q4_K rows in GGUF order to `Layout::Q4KRows8` (`to_groups`) or back.
fn k_groups(ne: [i64; 4], src: &[u8], dst: &mut [u8], to_groups: bool) {
    let (nb, rows) = (ne[0] as usize / 256, ne[1] as usize);
    let row = nb * K_BLOCK;
    for g in 0..rows / K_GROUP {
        let base = g * K_GROUP * row;
        for r in 0..K_GROUP {
            for ib in 0..nb {
                let plain = base + r * row + ib * K_BLOCK;
                let grouped = base + (ib * K_GROUP + r) * K_BLOCK;
                let (from, to) = if to_groups {
                    (plain, grouped)
                } else {
                    (grouped, plain)
                };
                dst[to..to + K_BLOCK].copy_from_slice(&src[from..from + K_BLOCK]);
            }
        }
    }
}

/// Q2_K rows in GGUF order to `Layout::Q2KPanels` (`to_panels`) or back.
fn q2k_panels(ne: [i64; 4], src: &[u8], dst: &mut [u8], to_panels: bool) {
    let (nb, rows) = (ne[0] as usize / 256, ne[1] as usize);
    let row = nb * Q2K_BLOCK;
    for (r0, n) in panels(rows) {
        for ib in 0..nb {
            let base = r0 * row + ib * n * Q2K_BLOCK;
            for r in 0..n {
                let plain = (r0 + r) * row + ib * Q2K_BLOCK;
                // (offset in the GGUF block, offset in the panel block, bytes)
                let d = [(80, 2 * r, 2), (82, Q2K_DMIN * n + 2 * r, 2)];
                let sc = (0..4).map(|g| (4 * g, Q2K_SC * n + 4 * (n * g + r), 4));
                let qs = (0..16).map(|g| (16 + 4 * g, Q2K_QS * n + 4 * (n * g + r), 4));
                for (p, q, len) in d.into_iter().chain(sc).chain(qs) {
                    let (from, to) = if to_panels {
                        (plain + p, base + q)
                    } else {
                        (base + q, plain + p)
                    };
                    dst[to..to + len].copy_from_slice(&src[from..from + len]);
                }
            }
        }
    }
}

/// MXFP4 rows in GGUF order to `Layout::Mxfp4Panels` (`to_panels`) or back.
fn mxfp4_panels(ne: [i64; 4], src: &[u8], dst: &mut [u8], to_panels: bool) {
    let (nb, rows) = (ne[0] as usize / 32, ne[1] as usize);
    let row = nb * MXFP4_BLOCK;
    for (r0, n) in panels(rows) {
        for ib in 0..nb {
            let base = r0 * row + ib * n * MXFP4_BLOCK;
            for r in 0..n {
                let plain = (r0 + r) * row + ib * MXFP4_BLOCK;
                // (offset in the GGUF block, offset in the panel block, bytes)
                let e = (0, r, 1);
                let qs = (0..4).map(|g| (1 + 4 * g, n + 4 * (n * g + r), 4));
                for (p, q, len) in std::iter::once(e).chain(qs) {
                    let (from, to) = if to_panels {
                        (plain + p, base + q)
                    } else {
                        (base + q, plain + p)
                    };
                    dst[to..to + len].copy_from_slice(&src[from..from + len]);
                }
            }
        }
    }
}

/// GGUF-order rows (`plain`) to `layout` (`packed`), both `ne`'s whole tensor: each 2-D
/// slice (one expert of a 3-D stack) in the layout of a 2-D weight of its shape.
pub(crate) fn pack(layout: Layout, ne: [i64; 4], plain: &[u8], packed: &mut [u8]) {
    let slice = plain.len() / slices(ne);
    for (src, dst) in plain.chunks(slice).zip(packed.chunks_mut(slice)) {
        pack_2d(layout, ne, src, dst);
    }
}

/// The inverse of `pack`.
pub(crate) fn unpack(layout: Layout, ne: [i64; 4], packed: &[u8], plain: &mut [u8]) {
    let slice = packed.len() / slices(ne);
    for (src, dst) in packed.chunks(slice).zip(plain.chunks_mut(slice)) {
        unpack_2d(layout, ne, src, dst);
    }
}

/// 2-D slices of a tensor of shape `ne` (at least one).
fn slices(ne: [i64; 4]) -> usize {
    (ne[2].max(1) * ne[3].max(1)) as usize
}

/// `pack` of one 2-D slice of ne[1] rows.
fn pack_2d(layout: Layout, ne: [i64; 4], plain: &[u8], packed: &mut [u8]) {
    match layout {
        Layout::Q4KRows8 => return k_groups(ne, plain, packed, true),
        Layout::Q2KPanels => return q2k_panels(ne, plain, packed, true),
        Layout::Mxfp4Panels => return mxfp4_panels(ne, plain, packed, true),
        Layout::NibblePanels => {}
    }
    let (nb, rows) = (ne[0] as usize / 32, ne[1] as usize);
    let row = nb * BLOCK;
    for (r0, n) in panels(rows) {
        let (src, dst) = (
            &plain[r0 * row..(r0 + n) * row],
            &mut packed[r0 * row..(r0 + n) * row],
        );
        for ib in 0..nb {
            for r in 0..n {
                let b = &src[r * row + ib * BLOCK..r * row + (ib + 1) * BLOCK];
                let o = ib * n * BLOCK + 2 * r;
                dst[o..o + 2].copy_from_slice(&b[..2]);
                for j in 0..4 {
                    let o = panel_quant(n, ib, r, 4 * j);
                    dst[o..o + 4].copy_from_slice(&b[2 + 4 * j..6 + 4 * j]);
                }
            }
        }
    }
}

/// The inverse of `pack_2d`.
fn unpack_2d(layout: Layout, ne: [i64; 4], packed: &[u8], plain: &mut [u8]) {
    match layout {
        Layout::Q4KRows8 => return k_groups(ne, packed, plain, false),
        Layout::Q2KPanels => return q2k_panels(ne, packed, plain, false),
        Layout::Mxfp4Panels => return mxfp4_panels(ne, packed, plain, false),
        Layout::NibblePanels => {}
    }
    let (nb, rows) = (ne[0] as usize / 32, ne[1] as usize);
    let row = nb * BLOCK;
    for (r0, n) in panels(rows) {
        let (src, dst) = (
            &packed[r0 * row..(r0 + n) * row],
            &mut plain[r0 * row..(r0 + n) * row],
        );
        unpack_panel(src, n, nb, dst);
    }
}

/// The `n` GGUF-order rows of one packed panel of `nb` blocks per row.
pub(crate) fn unpack_panel(src: &[u8], n: usize, nb: usize, dst: &mut [u8]) {
    let row = nb * BLOCK;
    for ib in 0..nb {
        for r in 0..n {
            let b = &mut dst[r * row + ib * BLOCK..r * row + (ib + 1) * BLOCK];
            let o = ib * n * BLOCK + 2 * r;
            b[..2].copy_from_slice(&src[o..o + 2]);
            for j in 0..4 {
                let o = panel_quant(n, ib, r, 4 * j);
                b[2 + 4 * j..6 + 4 * j].copy_from_slice(&src[o..o + 4]);
            }
        }
    }
}

/// An 8-row panel's block `ib` widened to the 16-row block of a full panel (rows 8..16 zero:
/// scale 0 and code 0), so the 16-row kernels take it.
pub(crate) fn widen_block(src: &[u8], ib: usize, dst: &mut [u8; PANEL * BLOCK]) {
    let half = PANEL / 2;
    let s = &src[ib * half * BLOCK..(ib + 1) * half * BLOCK];
    dst.fill(0);
    dst[..2 * half].copy_from_slice(&s[..2 * half]);
    for j in 0..4 {
        let (so, dof) = (2 * half + j * half * 4, 2 * PANEL + j * PANEL * 4);
        dst[dof..dof + 4 * half].copy_from_slice(&s[so..so + 4 * half]);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Bytes from a fixed generator.
    pub(crate) fn bytes(n: usize, seed: u32) -> Vec<u8> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1664525).wrapping_add(1013904223);
                (s >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn pack_and_unpack_are_inverse_and_keep_the_size() {
        for &(k, rows) in &[(32, 8), (64, 16), (96, 24), (256, 40), (32, 8 * 9)] {
            let ne = [k as i64, rows as i64, 1, 1];
            let n = rows * k / 32 * BLOCK;
            let plain = bytes(n, (k * rows) as u32);
            let mut packed = vec![0u8; n];
            pack(Layout::NibblePanels, ne, &plain, &mut packed);
            assert_ne!(packed, plain, "{k}x{rows}: the layout changes");
            let mut back = vec![0u8; n];
            unpack(Layout::NibblePanels, ne, &packed, &mut back);
            assert_eq!(back, plain, "{k}x{rows}");
        }
    }

    #[test]
    fn q4_k_groups_are_inverse_and_interleave_blocks() {
        let (k, rows) = (512usize, 16usize);
        let ne = [k as i64, rows as i64, 1, 1];
        let n = rows * k / 256 * K_BLOCK;
        let plain = bytes(n, 3);
        let mut packed = vec![0u8; n];
        pack(Layout::Q4KRows8, ne, &plain, &mut packed);
        let row = 2 * K_BLOCK;
        // group 1, block 1, row 3
        let at = 8 * row + (8 + 3) * K_BLOCK;
        assert_eq!(
            &packed[at..at + K_BLOCK],
            &plain[11 * row + K_BLOCK..12 * row]
        );
        let mut back = vec![0u8; n];
        unpack(Layout::Q4KRows8, ne, &packed, &mut back);
        assert_eq!(back, plain);
    }

    #[test]
    fn q2_k_panels_are_inverse_and_interleave_dwords() {
        for &(k, rows) in &[(256usize, 8usize), (512, 16), (768, 40)] {
            let ne = [k as i64, rows as i64, 1, 1];
            let n = rows * k / 256 * Q2K_BLOCK;
            let plain = bytes(n, (k + rows) as u32);
            let mut packed = vec![0u8; n];
            pack(Layout::Q2KPanels, ne, &plain, &mut packed);
            assert_ne!(packed, plain);
            let mut back = vec![0u8; n];
            unpack(Layout::Q2KPanels, ne, &packed, &mut back);
            assert_eq!(back, plain, "{k}x{rows}");
        }
        // 16 rows of 2 blocks: block 1's qs dword 5 of row 3, its d and its scale dword 2
        let (row, n) = (2 * Q2K_BLOCK, 16);
        let plain = bytes(16 * row, 9);
        let mut packed = vec![0u8; plain.len()];
        pack(Layout::Q2KPanels, [512, 16, 1, 1], &plain, &mut packed);
        let (b, src) = (n * Q2K_BLOCK, 3 * row + Q2K_BLOCK);
        let qs = b + Q2K_QS * n + 4 * (n * 5 + 3);
        assert_eq!(&packed[qs..qs + 4], &plain[src + 16 + 20..src + 16 + 24]);
        assert_eq!(&packed[b + 6..b + 8], &plain[src + 80..src + 82]);
        let sc = b + Q2K_SC * n + 4 * (n * 2 + 3);
        assert_eq!(&packed[sc..sc + 4], &plain[src + 8..src + 12]);
    }

    #[test]
    fn mxfp4_panels_are_inverse_and_interleave_dwords() {
        for &(k, rows) in &[(32usize, 8usize), (64, 16), (96, 24), (256, 40)] {
            let ne = [k as i64, rows as i64, 1, 1];
            let n = rows * k / 32 * MXFP4_BLOCK;
            let plain = bytes(n, (k + 3 * rows) as u32);
            let mut packed = vec![0u8; n];
            pack(Layout::Mxfp4Panels, ne, &plain, &mut packed);
            assert_ne!(packed, plain);
            let mut back = vec![0u8; n];
            unpack(Layout::Mxfp4Panels, ne, &packed, &mut back);
            assert_eq!(back, plain, "{k}x{rows}");
        }
        // 24 rows of 2 blocks: the last (8-row) panel's block 1, row 5: its e and qs dword 3
        let row = 2 * MXFP4_BLOCK;
        let plain = bytes(24 * row, 5);
        let mut packed = vec![0u8; plain.len()];
        pack(Layout::Mxfp4Panels, [64, 24, 1, 1], &plain, &mut packed);
        let (b, src) = (16 * row + 8 * MXFP4_BLOCK, 21 * row + MXFP4_BLOCK);
        assert_eq!(packed[b + 5], plain[src]);
        let qs = b + 8 + 4 * (8 * 3 + 5);
        assert_eq!(&packed[qs..qs + 4], &plain[src + 13..src + 17]);
    }

    /// `pack` writes every byte of its output (RepackBuffer packs straight into memory that
    /// may hold an earlier tensor's bytes): packing over zeros and over 0x5A gives the same.
    #[test]
    fn pack_writes_every_byte() {
        let cases = [
            (Layout::NibblePanels, [96i64, 24, 2, 1], BLOCK * 3),
            (Layout::Q4KRows8, [512, 16, 1, 2], K_BLOCK * 2),
            (Layout::Q2KPanels, [768, 40, 1, 1], Q2K_BLOCK * 3),
            (Layout::Mxfp4Panels, [256, 40, 3, 1], MXFP4_BLOCK * 8),
        ];
        for (i, (layout, ne, row)) in cases.into_iter().enumerate() {
            let n = row * (ne[1] * ne[2] * ne[3]) as usize;
            let plain = bytes(n, 11 + i as u32);
            let mut over_zero = vec![0u8; n];
            pack(layout, ne, &plain, &mut over_zero);
            let mut over_other = vec![0x5Au8; n];
            pack(layout, ne, &plain, &mut over_other);
            assert_eq!(over_zero, over_other, "case {i}");
        }
    }

    #[test]
    fn a_panel_holds_dword_j_of_every_row_together() {
        // 16 rows of one block: row r's bytes are r*18 .. r*18+18
        let plain: Vec<u8> = (0..16 * BLOCK).map(|i| i as u8).collect();
        let mut packed = vec![0u8; plain.len()];
        pack(Layout::NibblePanels, [32, 16, 1, 1], &plain, &mut packed);
        for r in 0..16 {
            assert_eq!(packed[2 * r], plain[r * BLOCK], "scale of row {r}");
            for j in 0..4 {
                let o = 32 + 64 * j + 4 * r;
                assert_eq!(&packed[o..o + 4], &plain[r * BLOCK + 2 + 4 * j..][..4]);
            }
        }
    }

    #[test]
    fn widened_tail_block_matches_a_full_panel_with_zero_rows() {
        let plain = bytes(8 * 2 * BLOCK, 7);
        let mut packed = vec![0u8; plain.len()];
        pack(Layout::NibblePanels, [64, 8, 1, 1], &plain, &mut packed);
        let mut full_plain = vec![0u8; 16 * 2 * BLOCK];
        full_plain[..plain.len()].copy_from_slice(&plain);
        let mut full = vec![0u8; full_plain.len()];
        pack(Layout::NibblePanels, [64, 16, 1, 1], &full_plain, &mut full);
        let mut w = [0u8; PANEL * BLOCK];
        for ib in 0..2 {
            widen_block(&packed, ib, &mut w);
            assert_eq!(&w[..], &full[ib * PANEL * BLOCK..(ib + 1) * PANEL * BLOCK]);
        }
    }
}
