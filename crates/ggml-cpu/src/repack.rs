//! The CPU_REPACK buffer type (ggml-cpu/repack.cpp): weights that a matmul kernel reads in
//! an interleaved layout are rearranged once, when they are loaded, instead of at every
//! matmul. Only MUL_MAT of a whole 2-D weight reads them (`support::supports_op`); the bytes
//! come back in GGUF order through `get_tensor`, so copies to other devices and dumps see
//! the file's data.
//!
//! Which weights go here follows llama.cpp's choice on x86 (ggml_repack_get_optimal_repack_type)
//! for the types whose repacked kernels this backend has: Q4_0, IQ4_NL and Q4_K with a
//! multiple of 8 rows, on a CPU with AVX2 (llama.cpp's q4_0_8x8 / iq4_nl_8x8 / q4_K_8x8). A
//! weight placed here also takes llama.cpp's repacked float order
//! (`qtile::QElem::Q4_0Repacked`, `ktile::Order::RepackGemm` / `RepackGemv`); the same weight
//! in a plain buffer (`-nr`) takes its dot product's (or tiled) order, as llama.cpp's does.
//! Not here yet: llama.cpp's AVX-512 Q2_K and AVX2 MXFP4 repacks and its repacked MUL_MAT_ID
//! of 3-D experts; those weights stay in plain memory with their plain orders.
//!
//! Q4_K's layout: groups of 8 rows with their blocks interleaved (`Layout::Q4KRows8`).
//! Q4_0 / IQ4_NL's, "nibble panels": the rows in panels of 16 (the last one 8 when rows % 16 == 8),
//! each panel `rows * row_size` bytes where its rows were, block by block: the R row scales
//! (f16), then 4 groups of R dwords, dword r of group j holding quant bytes 4j..4j+4 of row
//! r's block. One 64-byte load then gives a VNNI kernel the same four bytes of 16 rows. The
//! size of every tensor is unchanged (llama.cpp's buffer sizes).

use ggml::backend::{
    same_buft, BackendError, Buffer, BufferImpl, BufferType, BufferTypeRef, HostBuffer, TensorIo,
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
}

/// Rows of a Q4_K group.
pub(crate) const K_GROUP: usize = 8;
/// Bytes of one Q4_K block.
pub(crate) const K_BLOCK: usize = 144;

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
        let mem = HostBuffer::alloc(size).ok_or_else(|| BackendError::Alloc {
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

    fn write_plain(&self, t: &Tensor, plain: &[u8]) -> Result<(), BackendError> {
        let layout = plain_layout(t)?;
        let mut packed = vec![0u8; plain.len()];
        pack(layout, t.ne, plain, &mut packed);
        self.mem.set(t.addr(), &packed)
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

/// GGUF-order rows (`plain`) to `layout` (`packed`), both `ne`'s whole tensor.
pub(crate) fn pack(layout: Layout, ne: [i64; 4], plain: &[u8], packed: &mut [u8]) {
    if layout == Layout::Q4KRows8 {
        return k_groups(ne, plain, packed, true);
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

/// The inverse of `pack`.
pub(crate) fn unpack(layout: Layout, ne: [i64; 4], packed: &[u8], plain: &mut [u8]) {
    if layout == Layout::Q4KRows8 {
        return k_groups(ne, packed, plain, false);
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
mod tests {
    use super::*;

    fn bytes(n: usize, seed: u32) -> Vec<u8> {
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
