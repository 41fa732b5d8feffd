//! The KV cache (llama_kv_cache): one K and one V tensor per layer in backend memory, the cells
//! that say which position of which sequence each slot holds, slot search for a ubatch, the
//! graph inputs that address it (k/v indices, attention mask) and the sequence operations.

use crate::batch::Ubatch;
use crate::error::{LlamaError, Result};
use crate::hparams::{is_masked_swa, SwaType};
use crate::kv_cells::KvCells;
use crate::model::Model;
use ggml::backend::{Buffer, BufferUsage, DeviceRef};
use ggml::{Context, TensorId, Type};
use std::sync::Arc;

const MIB: f64 = 1024.0 * 1024.0;
/// n_kv is padded to this so that graphs keep their shape across steps (and can be reused).
pub const N_PAD: usize = 256;

/// Which layers a cache holds and how its cells are masked: all layers, or (for the two
/// caches of llama_kv_cache_iswa) the dense or the sliding-window ones with their window.
#[derive(Clone, Copy, Debug)]
pub struct CacheLayers {
    /// None: every layer; Some(swa): the layers whose is_swa equals swa
    pub swa_only: Option<bool>,
    pub n_swa: u32,
    pub swa_type: SwaType,
}

impl CacheLayers {
    pub const ALL: CacheLayers = CacheLayers {
        swa_only: None,
        n_swa: 0,
        swa_type: SwaType::None,
    };
    fn holds(&self, model: &Model, il: usize) -> bool {
        self.swa_only
            .is_none_or(|swa| model.hparams.is_swa(il) == swa)
    }
}

pub struct KvCache {
    pub(crate) ctx: Context,
    /// (K, V) tensor of each layer the cache holds, in layer order; no V with absorbed MLA,
    /// whose values are a view of the cached K rows
    pub(crate) layers: Vec<(TensorId, Option<TensorId>)>,
    /// model layer -> index into `layers`
    layer_ids: Vec<Option<usize>>,
    n_swa: u32,
    swa_type: SwaType,
    pub(crate) buffers: Vec<Arc<Buffer>>,
    /// (buffer type name, bytes), also when nothing was allocated
    sizes: Vec<(String, usize)>,
    pub(crate) type_k: Type,
    pub(crate) type_v: Type,
    /// V stored transposed (one row per channel), used without flash attention
    pub(crate) v_trans: bool,
    pub(crate) cells: KvCells,
    pub(crate) head: usize,
}

/// Where the tokens of one ubatch go.
#[derive(Clone, Debug, Default)]
pub struct SlotInfo {
    pub idxs: Vec<u32>,
}

impl KvCache {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        model: &Model,
        type_k: Type,
        type_v: Type,
        v_trans: bool,
        offload: bool,
        kv_size: u32,
        n_seq_max: u32,
        cpu: &DeviceRef,
        which: CacheLayers,
    ) -> Result<KvCache> {
        let hp = &model.hparams;
        let mut ctx = Context::new();
        let mut layers = Vec::new();
        let mut layer_ids = vec![None; hp.n_layer as usize];
        let mut by_buft: Vec<(ggml::backend::BufferTypeRef, Vec<TensorId>)> = Vec::new();
        for (il, id) in layer_ids.iter_mut().enumerate() {
            if !which.holds(model, il) {
                ggml::log_debug!("llama_kv_cache: layer {:3}: filtered\n", il);
                continue;
            }
            let dev = if offload {
                model.dev_layer(il).cloned().unwrap_or(cpu.clone())
            } else {
                cpu.clone()
            };
            ggml::log_debug!("llama_kv_cache: layer {:3}: dev = {}\n", il, dev.name());
            let k = ctx.new_tensor_3d(type_k, hp.n_embd_k_gqa(il) as i64, kv_size as i64, 1);
            ctx.set_name(k, &format!("cache_k_l{il}"));
            let v = (!hp.mla.is_mla()).then(|| {
                let v = ctx.new_tensor_3d(type_v, hp.n_embd_v_gqa(il) as i64, kv_size as i64, 1);
                ctx.set_name(v, &format!("cache_v_l{il}"));
                v
            });
            *id = Some(layers.len());
            layers.push((k, v));
            let buft = dev.buffer_type();
            let ids = std::iter::once(k).chain(v);
            match by_buft
                .iter_mut()
                .find(|(b, _)| ggml::backend::same_buft(b, &buft))
            {
                Some((_, have)) => have.extend(ids),
                None => by_buft.push((buft, ids.collect())),
            }
        }
        let mut buffers = Vec::new();
        let mut sizes = Vec::new();
        for (buft, ids) in &by_buft {
            if model.no_alloc {
                sizes.push((
                    buft.name().to_string(),
                    crate::buffers::place_tensors(&mut ctx, ids, buft),
                ));
                ggml::log_info!(
                    "llama_kv_cache: {:>10} KV buffer size = {:8.2} MiB\n",
                    buft.name(),
                    0.0
                );
                continue;
            }
            let meta = ggml::meta::as_meta_buft(buft).is_some();
            // a device's buffers are at most its max size, as ggml allocates a context's tensors
            let bufs = if meta {
                crate::buffers::alloc_tensors(&mut ctx, ids, buft, "kv cache").map(|b| vec![b])
            } else {
                crate::buffers::alloc_tensors_split(&mut ctx, ids, buft, "kv cache")
            }
            .map_err(|_| LlamaError::BufferAlloc("kv cache".into()))?;
            let total: usize = bufs.iter().map(|b| ggml::meta::reported_size(b)).sum();
            for buf in &bufs {
                // empty cells are masked, but NaN garbage would still poison 0 * x in the kernels
                buf.clear(0)?;
                buf.set_usage(BufferUsage::Any);
            }
            ggml::log_info!(
                "llama_kv_cache: {:>10} KV buffer size = {:8.2} MiB\n",
                buft.name(),
                total as f64 / MIB
            );
            // the heads each device of a meta buffer holds
            if let (true, Some(buf)) = (meta, bufs.first()) {
                for (name, size) in ggml::meta::device_buffer_sizes(buf).unwrap_or_default() {
                    ggml::log_info!(
                        "llama_kv_cache: {:>10} KV buffer size = {:8.2} MiB\n",
                        name,
                        size as f64 / MIB
                    );
                }
            }
            sizes.push((buft.name().to_string(), total));
            buffers.extend(bufs);
        }
        let size_k: usize = layers.iter().map(|&(k, _)| ctx[k].nbytes()).sum();
        let size_v: usize = layers
            .iter()
            .filter_map(|&(_, v)| v.map(|v| ctx[v].nbytes()))
            .sum();
        ggml::log_info!(
            "llama_kv_cache: size = {:7.2} MiB ({:6} cells, {:3} layers, {:2}/{} seqs), K ({}): {:7.2} MiB, V ({}): {:7.2} MiB\n",
            (size_k + size_v) as f64 / MIB,
            kv_size,
            layers.len(),
            n_seq_max,
            1,
            type_k.name(),
            size_k as f64 / MIB,
            type_v.name(),
            size_v as f64 / MIB
        );
        // the Hadamard rotation of quantized caches is not implemented: report it off
        ggml::log_info!(
            "llama_kv_cache: attn_rot_k = 0, n_embd_head_k_all = {}\n",
            hp.n_embd_head_k
        );
        // an MLA cache has no V heads to count
        let head_v_all = if hp.mla.is_mla() { 0 } else { hp.n_embd_head_v };
        ggml::log_info!(
            "llama_kv_cache: attn_rot_v = 0, n_embd_head_k_all = {}\n",
            head_v_all
        );
        Ok(KvCache {
            ctx,
            layers,
            layer_ids,
            n_swa: which.n_swa,
            swa_type: which.swa_type,
            buffers,
            sizes,
            type_k,
            type_v,
            v_trans,
            cells: KvCells::new(kv_size as usize),
            head: 0,
        })
    }

    pub fn size(&self) -> usize {
        self.cells.size()
    }
    /// The (K, V) tensors of model layer `il`, if this cache holds it.
    pub(crate) fn layer(&self, il: usize) -> Option<(TensorId, Option<TensorId>)> {
        self.layer_ids
            .get(il)
            .copied()
            .flatten()
            .map(|i| self.layers[i])
    }
    /// The model layers this cache holds.
    pub(crate) fn layer_indices(&self) -> Vec<usize> {
        (0..self.layer_ids.len())
            .filter(|&il| self.layer_ids[il].is_some())
            .collect()
    }
    /// (buffer type name, bytes) of each KV buffer.
    pub fn buffer_sizes(&self) -> Vec<(String, usize)> {
        self.sizes.clone()
    }

    /// The number of cells a graph attends over for the current contents.
    pub fn n_kv(&self) -> usize {
        let used = self.cells.used_max_p1().div_ceil(N_PAD) * N_PAD;
        self.size().min(N_PAD.max(used))
    }

    /// find_slot: free cells for each token, scanning from the head.
    pub fn find_slot(&self, ub: &Ubatch) -> Option<SlotInfo> {
        let n_tokens = ub.n_tokens();
        let size = self.size();
        if n_tokens > size {
            ggml::log_error!("find_slot: n_tokens = {} > size = {}\n", n_tokens, size);
            return None;
        }
        let mut head = self.head;
        // plenty of free cells before the head: fill the cache from its start
        if head > self.cells.used() + 2 * n_tokens {
            head = 0;
        }
        let mut idxs = Vec::with_capacity(n_tokens);
        let mut n_tested = 0usize;
        let mut pos_max = std::collections::HashMap::new();
        while idxs.len() < n_tokens {
            if head >= size {
                head = 0;
                continue;
            }
            if self.can_use(head, &mut pos_max) {
                idxs.push(head as u32);
            }
            head += 1;
            n_tested += 1;
            if idxs.len() < n_tokens && n_tested >= size {
                return None;
            }
        }
        Some(SlotInfo { idxs })
    }

    /// A free cell, or one of a single sequence that its sliding window no longer sees.
    fn can_use(&self, i: usize, pos_max: &mut std::collections::HashMap<i32, i32>) -> bool {
        if self.cells.is_empty(i) {
            return true;
        }
        if self.swa_type == SwaType::None {
            return false;
        }
        let Some(seq) = self.cells.seqs(i).single() else {
            return false;
        };
        let max = *pos_max
            .entry(seq)
            .or_insert_with(|| self.cells.seq_pos_max(seq));
        is_masked_swa(self.n_swa, self.swa_type, self.cells.pos(i), max + 1)
    }

    /// apply_ubatch: write the ubatch's positions and sequences into its cells.
    pub fn apply(&mut self, slot: &SlotInfo, ub: &Ubatch) {
        // the highest position overwritten per sequence (only sliding-window caches reuse cells)
        let mut pos_max_rm: std::collections::BTreeMap<i32, i32> = Default::default();
        for (i, &idx) in slot.idxs.iter().enumerate() {
            let idx = idx as usize;
            if !self.cells.is_empty(idx) {
                if let Some(seq) = self.cells.seqs(idx).single() {
                    let e = pos_max_rm.entry(seq).or_insert(-1);
                    *e = (*e).max(self.cells.pos(idx));
                }
                self.cells.rm(idx);
            }
            self.cells.set(idx, ub.pos[i], &ub.seq_id[i]);
        }
        // a sequence keeps every position between its min and max: purge the older ones too
        for (seq, max_rm) in pos_max_rm {
            let min = self.cells.seq_pos_min(seq);
            if min >= 0 && min <= max_rm {
                self.seq_rm(seq, min, max_rm + 1);
            }
        }
        if let Some(&last) = slot.idxs.last() {
            self.head = last as usize + 1;
        }
    }

    /// Finds slots for all ubatches of a batch without changing the cache (prepare).
    pub fn prepare(&mut self, ubatches: &[Ubatch]) -> Option<Vec<SlotInfo>> {
        let saved_cells = self.cells.clone();
        let saved_head = self.head;
        let mut out = Vec::new();
        let mut ok = true;
        for ub in ubatches {
            match self.find_slot(ub) {
                Some(s) => {
                    self.apply(&s, ub);
                    out.push(s);
                }
                None => {
                    ok = false;
                    break;
                }
            }
        }
        self.cells = saved_cells;
        self.head = saved_head;
        ok.then_some(out)
    }

    pub fn k_idxs(&self, slot: &SlotInfo) -> Vec<i64> {
        slot.idxs.iter().map(|&i| i as i64).collect()
    }

    /// V indices: per token, or per token and channel for the transposed layout.
    pub fn v_idxs(&self, slot: &SlotInfo, n_embd_v_gqa: usize) -> Vec<i64> {
        if !self.v_trans {
            return self.k_idxs(slot);
        }
        let size = self.size() as i64;
        let mut out = Vec::with_capacity(slot.idxs.len() * n_embd_v_gqa);
        for &idx in &slot.idxs {
            for j in 0..n_embd_v_gqa as i64 {
                out.push(j * size + idx as i64);
            }
        }
        out
    }

    /// The attention mask {n_kv, n_tokens}: 0 where token i may attend cell j, -inf elsewhere.
    pub fn kq_mask(&self, ub: &Ubatch, n_kv: usize, causal: bool, alibi: bool) -> Vec<f32> {
        let n_tokens = ub.n_tokens();
        let mut data = vec![f32::NEG_INFINITY; n_kv * n_tokens];
        for i in 0..n_tokens {
            let s1 = ub.seq_id[i][0];
            let p1 = ub.pos[i];
            let row = &mut data[i * n_kv..(i + 1) * n_kv];
            for (j, m) in row.iter_mut().enumerate() {
                if self.cells.is_empty(j) || !self.cells.seqs(j).has(s1) {
                    continue;
                }
                let p0 = self.cells.pos(j);
                if causal && p0 > p1 {
                    continue;
                }
                if is_masked_swa(self.n_swa, self.swa_type, p0, p1) {
                    continue;
                }
                *m = if alibi {
                    -((p0 - p1).abs() as f32)
                } else {
                    0.0
                };
            }
        }
        data
    }

    // ---- sequence operations ----

    pub fn clear(&mut self, data: bool) {
        self.cells.clear();
        self.head = 0;
        if data {
            for b in &self.buffers {
                // llama_memory_clear has no error path: the cause is logged
                if let Err(e) = b.clear(0) {
                    ggml::log_error!("llama_kv_cache: clearing {} failed: {}\n", b.name(), e);
                }
            }
        }
    }

    fn range(p0: i32, p1: i32) -> (i32, i32) {
        (
            if p0 < 0 { 0 } else { p0 },
            if p1 < 0 { i32::MAX } else { p1 },
        )
    }

    pub fn seq_rm(&mut self, seq: i32, p0: i32, p1: i32) -> bool {
        let (p0, p1) = Self::range(p0, p1);
        let mut new_head = usize::MAX;
        for i in 0..self.size() {
            let p = self.cells.pos(i);
            if p < p0 || p >= p1 || p == -1 {
                continue;
            }
            let emptied = if seq < 0 {
                self.cells.rm(i);
                true
            } else if self.cells.seqs(i).has(seq) {
                self.cells.seq_rm(i, seq)
            } else {
                false
            };
            if emptied && new_head == usize::MAX {
                new_head = i;
            }
        }
        // a freed slot before the head is where the next search should start
        if new_head != usize::MAX && new_head < self.head {
            self.head = new_head;
        }
        true
    }

    pub fn seq_cp(&mut self, src: i32, dst: i32, p0: i32, p1: i32) {
        if src == dst {
            return;
        }
        let (p0, p1) = Self::range(p0, p1);
        for i in 0..self.size() {
            let p = self.cells.pos(i);
            if p >= p0 && p < p1 && self.cells.seqs(i).has(src) {
                self.cells.seq_add(i, dst);
            }
        }
    }

    pub fn seq_keep(&mut self, seq: i32) {
        let mut new_head = usize::MAX;
        for i in 0..self.size() {
            if self.cells.is_empty(i) {
                continue;
            }
            if !self.cells.seqs(i).has(seq) {
                self.cells.rm(i);
                if new_head == usize::MAX {
                    new_head = i;
                }
            } else {
                let only = *self.cells.seqs(i);
                let keep = only.has(seq);
                let pos = self.cells.pos(i);
                if keep {
                    self.cells.set(i, pos, &[seq]);
                }
            }
        }
        if new_head != usize::MAX && new_head < self.head {
            self.head = new_head;
        }
    }

    /// Shifts the positions of `seq` in [p0, p1) by delta; K is re-roped before the next decode.
    pub fn seq_add(&mut self, seq: i32, p0: i32, p1: i32, delta: i32) {
        if delta == 0 {
            return;
        }
        let (p0, p1) = Self::range(p0, p1);
        if p0 == p1 {
            return;
        }
        let mut new_head = usize::MAX;
        for i in 0..self.size() {
            let p = self.cells.pos(i);
            if p == -1 || p < p0 || p >= p1 || !self.cells.seqs(i).has(seq) {
                continue;
            }
            if self.cells.pos_add(i, delta) && new_head == usize::MAX {
                new_head = i;
            }
        }
        self.head = if new_head != usize::MAX { new_head } else { 0 };
    }

    pub fn seq_div(&mut self, seq: i32, p0: i32, p1: i32, d: i32) {
        if d == 1 || d == 0 {
            return;
        }
        let (p0, p1) = Self::range(p0, p1);
        for i in 0..self.size() {
            let p = self.cells.pos(i);
            if p == -1 || p < p0 || p >= p1 || !self.cells.seqs(i).has(seq) {
                continue;
            }
            self.cells.pos_div(i, d);
        }
    }

    pub fn seq_pos_max(&self, seq: i32) -> i32 {
        self.cells.seq_pos_max(seq)
    }
    pub fn seq_pos_min(&self, seq: i32) -> i32 {
        self.cells.seq_pos_min(seq)
    }

    pub(crate) fn check_types(type_k: Type, type_v: Type, head_k: u32, head_v: u32) -> Result<()> {
        let allowed = [
            Type::F32,
            Type::F16,
            Type::Bf16,
            Type::Q8_0,
            Type::Q4_0,
            Type::Q4_1,
            Type::Q5_0,
            Type::Q5_1,
            Type::Iq4Nl,
        ];
        for (what, ty, head) in [("K", type_k, head_k), ("V", type_v, head_v)] {
            if !allowed.contains(&ty) {
                return Err(LlamaError::BadParams(format!(
                    "unsupported {what} cache type {}",
                    ty.name()
                )));
            }
            if !(head as usize).is_multiple_of(ty.block_size()) {
                return Err(LlamaError::BadParams(format!(
                    "{what} cache type {} with block size {} does not divide n_embd_head_{}={}",
                    ty.name(),
                    ty.block_size(),
                    what.to_lowercase(),
                    head
                )));
            }
        }
        Ok(())
    }
}
