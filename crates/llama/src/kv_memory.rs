//! The context's memory: one KV cache for every layer (llama_kv_cache), or, for models with
//! sliding-window layers, two (llama_kv_cache_iswa): the dense layers' cache of n_ctx cells and
//! the sliding-window layers' cache sized to the window. Sequence operations apply to both.

use crate::batch::Ubatch;
use crate::error::Result;
use crate::hparams::SwaType;
use crate::kv_cache::{CacheLayers, KvCache, SlotInfo, N_PAD};
use crate::model::Model;
use ggml::backend::DeviceRef;
use ggml::Type;

pub struct KvMemory {
    pub(crate) base: KvCache,
    /// the sliding-window layers' cache (iSWA models only)
    pub(crate) swa: Option<KvCache>,
}

/// Where one ubatch goes in each cache.
#[derive(Clone, Debug, Default)]
pub struct MemSlot {
    pub base: SlotInfo,
    pub swa: Option<SlotInfo>,
}

/// What the caches are made of.
pub struct KvSpec<'a> {
    pub type_k: Type,
    pub type_v: Type,
    pub v_trans: bool,
    pub offload: bool,
    pub kv_size: u32,
    pub n_seq_max: u32,
    pub n_ubatch: u32,
    pub swa_full: bool,
    pub unified: bool,
    pub cpu: &'a DeviceRef,
}

/// The cells of the sliding-window cache of one stream: the window of every sequence it holds
/// plus one ubatch, at most the stream's dense cache, padded to 256 (llama_kv_cache_iswa).
pub fn swa_cache_size(n_swa: u32, kv_size_seq: u32, n_seq: u32, n_ubatch: u32) -> u32 {
    let want = n_swa.saturating_mul(n_seq).saturating_add(n_ubatch);
    (kv_size_seq.min(want) as usize).div_ceil(N_PAD) as u32 * N_PAD as u32
}

/// (cells per stream, streams) of the sliding-window cache. llama.cpp keeps one stream per
/// sequence unless the cache is unified; this cache keeps them side by side in one, so its
/// size is the streams' sum.
pub fn swa_cells(s: &KvSpec, n_swa: u32) -> (u32, u32) {
    let n_stream = if s.unified { 1 } else { s.n_seq_max.max(1) };
    let per_stream = s.kv_size / n_stream;
    if s.swa_full {
        return (per_stream, n_stream);
    }
    let n_seq = if s.unified { s.n_seq_max } else { 1 };
    (
        swa_cache_size(n_swa, per_stream, n_seq, s.n_ubatch),
        n_stream,
    )
}

impl KvMemory {
    pub fn new(model: &Model, s: &KvSpec) -> Result<KvMemory> {
        let hp = &model.hparams;
        let make = |size: u32, which: CacheLayers| {
            KvCache::new(
                model,
                s.type_k,
                s.type_v,
                s.v_trans,
                s.offload,
                size,
                s.n_seq_max,
                s.cpu,
                which,
            )
        };
        if hp.swa_type == SwaType::None {
            return Ok(KvMemory {
                base: make(s.kv_size, CacheLayers::ALL)?,
                swa: None,
            });
        }
        let (size_swa, n_stream) = swa_cells(s, hp.n_swa);
        if s.swa_full {
            ggml::log_warn!(
                "llama_kv_cache_iswa: using full-size SWA cache (ref: {})\n",
                "https://github.com/ggml-org/llama.cpp/pull/13194#issuecomment-2868343055"
            );
        }
        ggml::log_info!(
            "llama_kv_cache_iswa: creating non-SWA KV cache, size = {} cells\n",
            s.kv_size / n_stream
        );
        let base = make(
            s.kv_size,
            CacheLayers {
                swa_only: Some(false),
                n_swa: 0,
                swa_type: SwaType::None,
            },
        )?;
        ggml::log_info!(
            "llama_kv_cache_iswa: creating     SWA KV cache, size = {} cells\n",
            size_swa
        );
        let swa = make(
            size_swa * n_stream,
            CacheLayers {
                swa_only: Some(true),
                n_swa: hp.n_swa,
                swa_type: hp.swa_type,
            },
        )?;
        Ok(KvMemory {
            base,
            swa: Some(swa),
        })
    }

    /// The caches, the dense one first.
    pub fn caches(&self) -> impl Iterator<Item = &KvCache> {
        std::iter::once(&self.base).chain(self.swa.as_ref())
    }
    fn caches_mut(&mut self) -> impl Iterator<Item = &mut KvCache> {
        std::iter::once(&mut self.base).chain(self.swa.as_mut())
    }

    /// The cache that holds layer `il`.
    pub(crate) fn cache_of(&self, il: usize) -> &KvCache {
        match &self.swa {
            Some(swa) if swa.layer(il).is_some() => swa,
            _ => &self.base,
        }
    }

    pub fn type_k(&self) -> Type {
        self.base.type_k
    }
    pub fn type_v(&self) -> Type {
        self.base.type_v
    }
    pub fn v_trans(&self) -> bool {
        self.base.v_trans
    }

    /// (buffer type name, bytes) of every KV buffer, summed by buffer type.
    pub fn buffer_sizes(&self) -> Vec<(String, usize)> {
        let mut out: Vec<(String, usize)> = Vec::new();
        for (name, size) in self.caches().flat_map(|c| c.buffer_sizes()) {
            match out.iter_mut().find(|(n, _)| *n == name) {
                Some((_, s)) => *s += size,
                None => out.push((name, size)),
            }
        }
        out
    }

    pub fn has_shift(&self) -> bool {
        self.caches().any(|c| c.cells.has_shift())
    }

    /// Slots for every ubatch in both caches, or None when one of them is full.
    pub fn prepare(&mut self, ubatches: &[Ubatch]) -> Option<Vec<MemSlot>> {
        let base = self.base.prepare(ubatches)?;
        let swa = match self.swa.as_mut() {
            Some(c) => Some(c.prepare(ubatches)?),
            None => None,
        };
        Some(match swa {
            Some(swa) => base
                .into_iter()
                .zip(swa)
                .map(|(b, s)| MemSlot {
                    base: b,
                    swa: Some(s),
                })
                .collect(),
            None => base
                .into_iter()
                .map(|b| MemSlot { base: b, swa: None })
                .collect(),
        })
    }

    pub fn apply(&mut self, slot: &MemSlot, ub: &Ubatch) {
        self.base.apply(&slot.base, ub);
        if let (Some(c), Some(s)) = (self.swa.as_mut(), slot.swa.as_ref()) {
            c.apply(s, ub);
        }
    }

    pub fn clear(&mut self, data: bool) {
        self.caches_mut().for_each(|c| c.clear(data));
    }
    pub fn seq_rm(&mut self, seq: i32, p0: i32, p1: i32) -> bool {
        let mut ok = true;
        for c in self.caches_mut() {
            ok &= c.seq_rm(seq, p0, p1);
        }
        ok
    }
    pub fn seq_cp(&mut self, src: i32, dst: i32, p0: i32, p1: i32) {
        self.caches_mut().for_each(|c| c.seq_cp(src, dst, p0, p1));
    }
    pub fn seq_keep(&mut self, seq: i32) {
        self.caches_mut().for_each(|c| c.seq_keep(seq));
    }
    pub fn seq_add(&mut self, seq: i32, p0: i32, p1: i32, delta: i32) {
        self.caches_mut()
            .for_each(|c| c.seq_add(seq, p0, p1, delta));
    }
    pub fn seq_div(&mut self, seq: i32, p0: i32, p1: i32, d: i32) {
        self.caches_mut().for_each(|c| c.seq_div(seq, p0, p1, d));
    }
    /// The state of both caches, the dense one first (llama_kv_cache_iswa::state_write).
    pub(crate) fn state_write(&self, model: &Model, n_seq_max: u32, out: &mut Vec<u8>) {
        for c in self.caches() {
            c.state_write(model, n_seq_max, out);
        }
    }

    pub(crate) fn state_read<R: std::io::Read>(
        &mut self,
        model: &Model,
        n_seq_max: u32,
        r: &mut crate::kv_state::StateReader<R>,
    ) -> Result<()> {
        self.base.state_read(model, n_seq_max, r)?;
        if let Some(swa) = self.swa.as_mut() {
            swa.state_read(model, n_seq_max, r)?;
        }
        Ok(())
    }

    /// The sliding-window cache holds the latest positions of a sequence, so it answers for
    /// both (the dense cache holds a superset).
    pub fn seq_pos_max(&self, seq: i32) -> i32 {
        self.swa.as_ref().unwrap_or(&self.base).seq_pos_max(seq)
    }
    pub fn seq_pos_min(&self, seq: i32) -> i32 {
        self.swa.as_ref().unwrap_or(&self.base).seq_pos_min(seq)
    }
}
