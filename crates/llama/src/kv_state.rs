//! The KV cache's part of a context state (llama_kv_cache::state_write / state_read, whole
//! cache, seq_id = -1), in llama.cpp's byte layout so that session files move between the two:
//!
//! ```text
//! u32 n_stream
//! per stream: u32 cell_count, then (if cell_count > 0)
//!   per cell: i32 pos, u32 n_seq_id, n_seq_id x i32 seq_id
//!   u32 v_trans, u32 n_layer
//!   per layer: i32 k_type, u64 k_row_size, the K rows of the occupied cell ranges
//!   not v_trans: per layer i32 v_type, u64 v_row_size, the V rows of the ranges
//!   v_trans:     per layer i32 v_type, u32 v_elem_size, u32 n_embd_v_gqa, then per channel
//!                the elements of the ranges
//! ```
//!
//! Only occupied cells are written, as ranges; a restore puts them back from cell 0 on.

use crate::error::{LlamaError, Result};
use crate::kv_cache::KvCache;
use crate::model::Model;
use ggml::backend::{get_tensor, set_tensor};
use std::io::Read;

fn bad(why: impl Into<String>) -> LlamaError {
    LlamaError::Unsupported(why.into())
}

/// Reads little-endian fields from a stream and counts the bytes, as llama_io_read_i does.
pub(crate) struct StateReader<R: Read> {
    inner: R,
    pub(crate) n_read: usize,
}

impl<R: Read> StateReader<R> {
    pub(crate) fn new(inner: R) -> Self {
        StateReader { inner, n_read: 0 }
    }

    pub(crate) fn bytes(&mut self, out: &mut [u8]) -> Result<()> {
        self.inner.read_exact(out).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                bad("unexpectedly reached end of file")
            } else {
                bad(format!("read error: {e}"))
            }
        })?;
        self.n_read += out.len();
        Ok(())
    }

    pub(crate) fn u32(&mut self) -> Result<u32> {
        let mut b = [0u8; 4];
        self.bytes(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    pub(crate) fn i32(&mut self) -> Result<i32> {
        Ok(self.u32()? as i32)
    }

    pub(crate) fn u64(&mut self) -> Result<u64> {
        let mut b = [0u8; 8];
        self.bytes(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// A u32 length and that many bytes (read_string); the length is bounded by `max`.
    pub(crate) fn string(&mut self, max: usize) -> Result<String> {
        let n = self.u32()? as usize;
        if n > max {
            return Err(bad(format!("string of {n} bytes in the state data")));
        }
        let mut b = vec![0u8; n];
        self.bytes(&mut b)?;
        Ok(String::from_utf8_lossy(&b).into_owned())
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Half-open ranges of occupied cells, in cell order.
fn occupied_ranges(kv: &KvCache) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    let mut begin = None;
    for i in 0..kv.size() {
        match (kv.cells.is_empty(i), begin) {
            (false, None) => begin = Some(i),
            (true, Some(b)) => {
                ranges.push((b, i));
                begin = None;
            }
            _ => {}
        }
    }
    if let Some(b) = begin {
        ranges.push((b, kv.size()));
    }
    ranges
}

fn read_into(t: &ggml::Tensor, offset: usize, len: usize, out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + len, 0);
    // the state writer has no error path (llama.cpp aborts here): zeros and the cause logged
    if let Err(e) = get_tensor(t, &mut out[start..], offset) {
        ggml::log_error!("state_write_data: reading {} failed: {}\n", t.name, e);
        out[start..].fill(0);
    }
}

impl KvCache {
    /// Appends the whole cache's state (every sequence) to `out`.
    pub(crate) fn state_write(&self, model: &Model, n_seq_max: u32, out: &mut Vec<u8>) {
        let hp = &model.hparams;
        put_u32(out, 1); // n_stream: this cache is one unified stream
        let ranges = occupied_ranges(self);
        let cell_count: usize = ranges.iter().map(|(a, b)| b - a).sum();
        put_u32(out, cell_count as u32);
        if cell_count == 0 {
            return;
        }
        for &(a, b) in &ranges {
            for i in a..b {
                let seqs: Vec<i32> = (0..n_seq_max as i32)
                    .filter(|&s| self.cells.seqs(i).has(s))
                    .collect();
                put_u32(out, self.cells.pos(i) as u32);
                put_u32(out, seqs.len() as u32);
                for s in seqs {
                    put_u32(out, s as u32);
                }
            }
        }
        put_u32(out, self.v_trans as u32);
        put_u32(out, self.layers.len() as u32);
        for (il, &(k, _)) in self.layer_indices().into_iter().zip(self.layers.iter()) {
            let k = &self.ctx[k];
            let row = k.ty.row_size(hp.n_embd_k_gqa(il) as i64);
            put_u32(out, k.ty.id());
            out.extend_from_slice(&(row as u64).to_le_bytes());
            for &(a, b) in &ranges {
                read_into(k, a * row, (b - a) * row, out);
            }
        }
        for (il, &(_, v)) in self.layer_indices().into_iter().zip(self.layers.iter()) {
            // an MLA cache has no V (llama.cpp skips such layers too)
            let Some(v) = v else { continue };
            let v = &self.ctx[v];
            let n_embd_v = hp.n_embd_v_gqa(il) as usize;
            put_u32(out, v.ty.id());
            if !self.v_trans {
                let row = v.ty.row_size(n_embd_v as i64);
                out.extend_from_slice(&(row as u64).to_le_bytes());
                for &(a, b) in &ranges {
                    read_into(v, a * row, (b - a) * row, out);
                }
            } else {
                let el = v.ty.type_size();
                put_u32(out, el as u32);
                put_u32(out, n_embd_v as u32);
                let size = self.size();
                for j in 0..n_embd_v {
                    for &(a, b) in &ranges {
                        read_into(v, (a + j * size) * el, (b - a) * el, out);
                    }
                }
            }
        }
    }

    /// Replaces the cache's contents with a state written by `state_write` (or llama.cpp).
    pub(crate) fn state_read<R: Read>(
        &mut self,
        model: &Model,
        n_seq_max: u32,
        r: &mut StateReader<R>,
    ) -> Result<()> {
        let n_stream = r.u32()?;
        if n_stream != 1 {
            return Err(bad("n_stream mismatch"));
        }
        self.clear(true);
        let cell_count = r.u32()? as usize;
        if cell_count == 0 {
            return Ok(());
        }
        let res = self.read_cells(model, n_seq_max, cell_count, r);
        if res.is_err() {
            self.clear(true);
        }
        res
    }

    fn read_cells<R: Read>(
        &mut self,
        model: &Model,
        n_seq_max: u32,
        cell_count: usize,
        r: &mut StateReader<R>,
    ) -> Result<()> {
        let restore_failed = || bad("failed to restore kv cache");
        if cell_count > self.size() {
            ggml::log_error!("state_read_meta: not enough cells in kv cache\n");
            return Err(restore_failed());
        }
        let mut seqs = Vec::new();
        for i in 0..cell_count {
            let pos = r.i32()?;
            let n_seq_id = r.u32()?;
            seqs.clear();
            for _ in 0..n_seq_id {
                let s = r.i32()?;
                if s < 0 || s as u32 >= n_seq_max {
                    ggml::log_error!(
                        "state_read_meta: invalid seq_id, {} is out of range [0, {})\n",
                        s,
                        n_seq_max
                    );
                    return Err(restore_failed());
                }
                seqs.push(s);
            }
            self.cells.set(i, pos, &seqs);
        }
        self.head = 0;

        let hp = &model.hparams;
        let v_trans = r.u32()?;
        let n_layer = r.u32()? as usize;
        if n_layer != self.layers.len() {
            ggml::log_error!(
                "state_read_data: mismatched layer count ({} instead of {})\n",
                n_layer,
                self.layers.len()
            );
            return Err(restore_failed());
        }
        if self.v_trans != (v_trans != 0) {
            ggml::log_error!("state_read_data: incompatible V transposition\n");
            return Err(restore_failed());
        }
        let mut buf = Vec::new();
        for (il, &(k, _)) in self.layer_indices().into_iter().zip(self.layers.iter()) {
            let k = &self.ctx[k];
            let ty = r.i32()?;
            if ty != k.ty.id() as i32 {
                ggml::log_error!(
                    "state_read_data: mismatched key type ({} != {}, layer {})\n",
                    k.ty.id(),
                    ty,
                    il
                );
                return Err(restore_failed());
            }
            let row = k.ty.row_size(hp.n_embd_k_gqa(il) as i64);
            let row_ref = r.u64()?;
            if row as u64 != row_ref {
                ggml::log_error!(
                    "state_read_data: mismatched key row size ({} != {}, layer {})\n",
                    row,
                    row_ref,
                    il
                );
                return Err(restore_failed());
            }
            buf.resize(cell_count * row, 0);
            r.bytes(&mut buf)?;
            set_tensor(k, &buf, 0)?;
        }
        for (il, &(_, v)) in self.layer_indices().into_iter().zip(self.layers.iter()) {
            // an MLA cache has no V (llama.cpp skips such layers too)
            let Some(v) = v else { continue };
            let v = &self.ctx[v];
            let n_embd_v = hp.n_embd_v_gqa(il) as usize;
            let ty = r.i32()?;
            if ty != v.ty.id() as i32 {
                ggml::log_error!(
                    "state_read_data: mismatched value type ({} != {}, layer {})\n",
                    v.ty.id(),
                    ty,
                    il
                );
                return Err(restore_failed());
            }
            if !self.v_trans {
                let row = v.ty.row_size(n_embd_v as i64);
                let row_ref = r.u64()?;
                if row as u64 != row_ref {
                    ggml::log_error!(
                        "state_read_data: mismatched value row size ({} != {}, layer {})\n",
                        row,
                        row_ref,
                        il
                    );
                    return Err(restore_failed());
                }
                buf.resize(cell_count * row, 0);
                r.bytes(&mut buf)?;
                set_tensor(v, &buf, 0)?;
            } else {
                let el = v.ty.type_size();
                let el_ref = r.u32()? as usize;
                if el != el_ref {
                    ggml::log_error!(
                        "state_read_data: mismatched value element size ({} != {}, layer {})\n",
                        el,
                        el_ref,
                        il
                    );
                    return Err(restore_failed());
                }
                let n_ref = r.u32()? as usize;
                if n_ref != n_embd_v {
                    ggml::log_error!(
                        "state_read_data: mismatched GQA embedding size ({} != {}, layer {})\n",
                        n_embd_v,
                        n_ref,
                        il
                    );
                    return Err(restore_failed());
                }
                let size = self.size();
                buf.resize(cell_count * el, 0);
                for j in 0..n_embd_v {
                    r.bytes(&mut buf)?;
                    set_tensor(v, &buf, j * size * el)?;
                }
            }
        }
        Ok(())
    }
}
