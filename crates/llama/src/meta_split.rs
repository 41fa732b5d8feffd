//! `-sm tensor`: the split state of every statically allocated tensor, over GGUF tensor names
//! (llama_meta_device_get_split_state). Column-parallel projections (attn_q/k/v, ffn_up/gate,
//! the output) split by output rows, row-parallel ones (attn_output, ffn_down) by input
//! columns, the KV cache by heads, everything else is mirrored. Boundaries fall on whole KV
//! groups (and quant blocks); a per-layer rotation makes a count that does not divide the
//! devices short-change a different device in each layer.

use crate::hparams::HParams;
use ggml::meta::{split_counts, SplitState, StaticSplitFn};
use ggml::{Tensor, Type};
use regex::Regex;
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// attn_q, attn_k, attn_v weights: output rows
    QkvWeight {
        v: bool,
        q: bool,
    },
    /// their biases: one value per output row
    QkvBias {
        v: bool,
        q: bool,
    },
    KvCache {
        v: bool,
    },
    AttnOut,
    FfnUpGate,
    FfnUpGateBias,
    FfnDown,
    FfnDownExpsBias,
    Output,
    OutputBias,
    Mirrored,
}

struct Patterns {
    table: Vec<(Regex, Kind)>,
}

impl Patterns {
    fn new() -> Patterns {
        let r = |s: &str| Regex::new(s).expect("a valid pattern");
        Patterns {
            table: vec![
                (
                    r(r"^blk\.\d+\.attn_q\.weight$"),
                    Kind::QkvWeight { v: false, q: true },
                ),
                (
                    r(r"^blk\.\d+\.attn_k\.weight$"),
                    Kind::QkvWeight { v: false, q: false },
                ),
                (
                    r(r"^blk\.\d+\.attn_v\.weight$"),
                    Kind::QkvWeight { v: true, q: false },
                ),
                (
                    r(r"^blk\.\d+\.attn_q\.bias$"),
                    Kind::QkvBias { v: false, q: true },
                ),
                (
                    r(r"^blk\.\d+\.attn_k\.bias$"),
                    Kind::QkvBias { v: false, q: false },
                ),
                (
                    r(r"^blk\.\d+\.attn_v\.bias$"),
                    Kind::QkvBias { v: true, q: false },
                ),
                (r(r"^cache_k_l\d+$"), Kind::KvCache { v: false }),
                (r(r"^cache_v_l\d+$"), Kind::KvCache { v: true }),
                (r(r"^blk\.\d+\.attn_output\.weight$"), Kind::AttnOut),
                (
                    r(r"^blk\.\d+\.ffn_(up|gate)(_exps)?\.weight$"),
                    Kind::FfnUpGate,
                ),
                (
                    r(r"^blk\.\d+\.ffn_(up|gate)(_exps)?\.bias$"),
                    Kind::FfnUpGateBias,
                ),
                (r(r"^blk\.\d+\.ffn_down(_exps)?\.weight$"), Kind::FfnDown),
                (r(r"^blk\.\d+\.ffn_down_exps\.bias$"), Kind::FfnDownExpsBias),
                (r(r"^output\.weight$"), Kind::Output),
                (r(r"^output\.bias$"), Kind::OutputBias),
            ],
        }
    }
    fn kind(&self, name: &str) -> Kind {
        self.table
            .iter()
            .find(|(re, _)| re.is_match(name))
            .map_or(Kind::Mirrored, |(_, k)| *k)
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
fn lcm(a: i64, b: i64) -> i64 {
    a / gcd(a, b) * b
}

/// The layer a tensor belongs to: blk.N.* and cache_*_lN.
fn layer_of(name: &str) -> Option<usize> {
    if let Some(rest) = name.strip_prefix("blk.") {
        return rest.split('.').next()?.parse().ok();
    }
    if name.starts_with("cache_") {
        return name.rsplit("_l").next()?.parse().ok();
    }
    None
}

/// The model facts the table needs, copied so that the callback outlives the loader.
pub struct MetaSplit {
    n: usize,
    tensor_split: Vec<f32>,
    n_layer: usize,
    head_k: i64,
    head_v: i64,
    n_head: Vec<i64>,
    n_head_kv: Vec<i64>,
    /// the type of each file tensor (granularity follows the row-parallel weight's blocks)
    types: HashMap<String, Type>,
    patterns: Patterns,
}

impl MetaSplit {
    pub fn new(
        n: usize,
        tensor_split: &[f32],
        hp: &HParams,
        types: HashMap<String, Type>,
    ) -> MetaSplit {
        let nl = hp.n_layer as usize;
        MetaSplit::from_parts(
            n,
            tensor_split,
            hp.n_embd_head_k as i64,
            hp.n_embd_head_v as i64,
            (0..nl).map(|il| hp.n_head(il) as i64).collect(),
            (0..nl).map(|il| hp.n_head_kv(il) as i64).collect(),
            types,
        )
    }

    /// From the numbers themselves: head sizes and per-layer head counts.
    pub fn from_parts(
        n: usize,
        tensor_split: &[f32],
        head_k: i64,
        head_v: i64,
        n_head: Vec<i64>,
        n_head_kv: Vec<i64>,
        types: HashMap<String, Type>,
    ) -> MetaSplit {
        MetaSplit {
            n,
            tensor_split: (0..n)
                .map(|j| tensor_split.get(j).copied().unwrap_or(0.0))
                .collect(),
            n_layer: n_head.len(),
            head_k,
            head_v,
            n_head,
            n_head_kv,
            types,
            patterns: Patterns::new(),
        }
    }

    fn blck(&self, name: &str, fallback: &Tensor) -> i64 {
        self.types
            .get(name)
            .copied()
            .unwrap_or(fallback.ty)
            .block_size() as i64
    }

    /// Elements per unit of the split for a tensor of this kind in layer il.
    fn granularity(&self, kind: Kind, il: usize, t: &Tensor) -> i64 {
        let prefix = format!("blk.{il}.");
        let ffn_blck = || lcm(self.blck(&format!("{prefix}ffn_down.weight"), t), 128);
        match kind {
            Kind::FfnUpGate | Kind::FfnUpGateBias | Kind::FfnDown => {
                lcm(self.blck(&t.name, t), ffn_blck())
            }
            Kind::Output | Kind::OutputBias | Kind::Mirrored | Kind::FfnDownExpsBias => 1,
            _ => {
                let n_head = self.n_head.get(il).copied().unwrap_or(1).max(1);
                let n_kv = self.n_head_kv.get(il).copied().unwrap_or(1).max(1);
                let n_gqa = (n_head / n_kv).max(1);
                let n_embd_q = n_gqa * self.head_k;
                let blck = self.blck(&format!("{prefix}attn_output.weight"), t);
                let mut blck_perf = blck;
                while blck_perf < 128 && blck_perf * (self.n as i64) < n_embd_q {
                    blck_perf *= 2;
                }
                let g_q = lcm(n_embd_q, blck_perf);
                let g_head = g_q / self.head_k;
                let g_kv = g_q / n_gqa;
                let g_v = (g_kv / self.head_k) * self.head_v;
                match kind {
                    Kind::QkvWeight { q: true, .. } | Kind::QkvBias { q: true, .. } => g_q,
                    Kind::QkvWeight { v: true, .. }
                    | Kind::QkvBias { v: true, .. }
                    | Kind::KvCache { v: true } => g_v,
                    Kind::AttnOut => g_head * self.head_v,
                    _ => g_kv,
                }
            }
        }
    }

    pub fn state(&self, t: &Tensor) -> SplitState {
        let kind = self.patterns.kind(&t.name);
        let axis = match kind {
            Kind::QkvWeight { .. } | Kind::FfnUpGate | Kind::Output => 1,
            Kind::QkvBias { .. }
            | Kind::KvCache { .. }
            | Kind::AttnOut
            | Kind::FfnUpGateBias
            | Kind::FfnDown
            | Kind::OutputBias => 0,
            Kind::FfnDownExpsBias => return SplitState::partial(),
            Kind::Mirrored => return SplitState::mirrored(),
        };
        let (il, rotation) = match layer_of(&t.name) {
            Some(il) => (il, il % self.n),
            None => (0, self.n_layer % self.n),
        };
        let g = self.granularity(kind, il, t);
        let total = t.ne[axis];
        // a dimension the granularity does not divide cannot be cut on its boundaries
        let g = if total % g == 0 { g } else { 1 };
        SplitState::axis(axis, split_counts(total, &self.tensor_split, g, rotation))
    }

    pub fn into_fn(self) -> Arc<StaticSplitFn> {
        Arc::new(move |t: &Tensor| self.state(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ggml::meta::SplitAxis;

    fn t(name: &str, ty: Type, ne: &[i64]) -> Tensor {
        let mut ne4 = [1i64; 4];
        ne4[..ne.len()].copy_from_slice(ne);
        let mut x = Tensor::new(ty, ne4);
        x.name = name.to_string();
        x
    }

    /// 2 layers, 6 heads of 32 over 3 KV heads (n_gqa 2), n_embd 192, FFN 256.
    fn table(n: usize, ts: &[f32], ty: Type) -> MetaSplit {
        let mut types = HashMap::new();
        for il in 0..2 {
            types.insert(format!("blk.{il}.attn_output.weight"), ty);
            types.insert(format!("blk.{il}.ffn_down.weight"), ty);
        }
        MetaSplit::from_parts(n, ts, 32, 32, vec![6, 6], vec![3, 3], types)
    }

    #[test]
    fn projections_split_by_rows_or_columns_and_norms_mirror() {
        let m = table(2, &[], Type::F32);
        let q = m.state(&t("blk.0.attn_q.weight", Type::F32, &[192, 192]));
        assert_eq!(q.axis, SplitAxis::Axis(1));
        // whole KV groups: 2 heads of 32 per group, 3 groups over 2 devices
        assert_eq!(q.ne, vec![64, 128]);
        let k = m.state(&t("blk.0.attn_k.weight", Type::F32, &[192, 96]));
        assert_eq!((k.axis, k.ne.clone()), (SplitAxis::Axis(1), vec![32, 64]));
        let o = m.state(&t("blk.0.attn_output.weight", Type::F32, &[192, 192]));
        assert_eq!((o.axis, o.ne.clone()), (SplitAxis::Axis(0), vec![64, 128]));
        let kc = m.state(&t("cache_k_l0", Type::F16, &[96, 256]));
        assert_eq!((kc.axis, kc.ne.clone()), (SplitAxis::Axis(0), vec![32, 64]));
        let up = m.state(&t("blk.0.ffn_up.weight", Type::F32, &[192, 256]));
        assert_eq!(
            (up.axis, up.ne.clone()),
            (SplitAxis::Axis(1), vec![128, 128])
        );
        let down = m.state(&t("blk.0.ffn_down.weight", Type::F32, &[256, 192]));
        assert_eq!((down.axis, down.ne), (SplitAxis::Axis(0), vec![128, 128]));
        let out = m.state(&t("output.weight", Type::F32, &[192, 512]));
        assert_eq!(out.axis, SplitAxis::Axis(1));
        for name in [
            "blk.0.attn_norm.weight",
            "token_embd.weight",
            "output_norm.weight",
        ] {
            assert!(m.state(&t(name, Type::F32, &[192])).is_mirrored(), "{name}");
        }
        assert!(m
            .state(&t("blk.0.ffn_down_exps.bias", Type::F32, &[192]))
            .is_partial());
    }

    #[test]
    fn the_rotation_moves_the_short_share_between_layers() {
        let m = table(2, &[], Type::F32);
        let q0 = m.state(&t("blk.0.attn_q.weight", Type::F32, &[192, 192]));
        let q1 = m.state(&t("blk.1.attn_q.weight", Type::F32, &[192, 192]));
        assert_eq!(q0.ne, vec![64, 128]);
        assert_eq!(q1.ne, vec![128, 64]);
        // the cache of a layer follows its projections
        let v1 = m.state(&t("cache_v_l1", Type::F16, &[96, 256]));
        assert_eq!(v1.ne, vec![64, 32]);
    }

    #[test]
    fn proportions_and_blocks_bound_the_shares() {
        // -ts 1,3: a quarter of 3 groups rounds down to none
        let m = table(2, &[1.0, 3.0], Type::F32);
        let q = m.state(&t("blk.0.attn_q.weight", Type::F32, &[192, 192]));
        assert_eq!(q.ne, vec![0, 192]);
        // quantized row-parallel weights: column shares in whole blocks of 32
        let m = table(3, &[], Type::Q4_0);
        let down = m.state(&t("blk.0.ffn_down.weight", Type::Q4_0, &[256, 192]));
        assert!(down.ne.iter().all(|&x| x % 32 == 0), "{:?}", down.ne);
        assert_eq!(down.ne.iter().sum::<i64>(), 256);
        let o = m.state(&t("blk.0.attn_output.weight", Type::Q4_0, &[192, 192]));
        assert!(o.ne.iter().all(|&x| x % 32 == 0), "{:?}", o.ne);
    }
}
