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
    /// a fused attn_qkv weight (output rows) or bias: Q, K and V segments
    QkvFused {
        bias: bool,
    },
    KvCache {
        v: bool,
    },
    AttnOut,
    /// ffn_up/ffn_gate(_exps) weights; an ffn_up of twice the FFN width is phi3's fused
    /// gate and up halves
    FfnUpGate {
        up: bool,
    },
    FfnUpGateBias {
        up: bool,
    },
    /// ffn_gate_up(_exps): the fused gate and up halves
    FfnGateUp,
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
                (
                    r(r"^blk\.\d+\.attn_qkv\.weight$"),
                    Kind::QkvFused { bias: false },
                ),
                (
                    r(r"^blk\.\d+\.attn_qkv\.bias$"),
                    Kind::QkvFused { bias: true },
                ),
                (r(r"^cache_k_l\d+$"), Kind::KvCache { v: false }),
                (r(r"^cache_v_l\d+$"), Kind::KvCache { v: true }),
                (r(r"^blk\.\d+\.attn_output\.weight$"), Kind::AttnOut),
                (
                    r(r"^blk\.\d+\.ffn_up(_exps)?\.weight$"),
                    Kind::FfnUpGate { up: true },
                ),
                (
                    r(r"^blk\.\d+\.ffn_gate(_exps)?\.weight$"),
                    Kind::FfnUpGate { up: false },
                ),
                (
                    r(r"^blk\.\d+\.ffn_up(_exps)?\.bias$"),
                    Kind::FfnUpGateBias { up: true },
                ),
                (
                    r(r"^blk\.\d+\.ffn_gate(_exps)?\.bias$"),
                    Kind::FfnUpGateBias { up: false },
                ),
                (
                    r(r"^blk\.\d+\.ffn_gate_up(_exps)?\.weight$"),
                    Kind::FfnGateUp,
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
    /// the FFN width of each layer (a fused up/gate weight is twice it)
    n_ff: Vec<i64>,
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
            (0..nl).map(|il| hp.n_ff(il) as i64).collect(),
            types,
        )
    }

    /// From the numbers themselves: head sizes and per-layer head counts and FFN widths.
    #[allow(clippy::too_many_arguments)]
    pub fn from_parts(
        n: usize,
        tensor_split: &[f32],
        head_k: i64,
        head_v: i64,
        n_head: Vec<i64>,
        n_head_kv: Vec<i64>,
        n_ff: Vec<i64>,
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
            n_ff,
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

    /// Elements per unit of the split for segment `seg` of a tensor of this kind in layer il.
    /// `perf`: llama.cpp's, which rounds blocks up for faster kernels (FFN shares in 128s,
    /// attention blocks doubled up to 128); without it, the least that keeps whole KV groups
    /// and whole quant blocks.
    fn granularity(&self, kind: Kind, il: usize, t: &Tensor, seg: usize, perf: bool) -> i64 {
        let prefix = format!("blk.{il}.");
        // the row-parallel weight's blocks: ffn_down, or the experts' stack in a MoE layer
        let down = format!("{prefix}ffn_down.weight");
        let down = if self.types.contains_key(&down) {
            down
        } else {
            format!("{prefix}ffn_down_exps.weight")
        };
        let ffn_blck = || {
            let b = self.blck(&down, t);
            if perf {
                lcm(b, 128)
            } else {
                b
            }
        };
        match kind {
            Kind::FfnUpGate { .. }
            | Kind::FfnUpGateBias { .. }
            | Kind::FfnGateUp
            | Kind::FfnDown => lcm(self.blck(&t.name, t), ffn_blck()),
            Kind::Output | Kind::OutputBias | Kind::Mirrored | Kind::FfnDownExpsBias => 1,
            _ => {
                let n_head = self.n_head.get(il).copied().unwrap_or(1).max(1);
                let n_kv = self.n_head_kv.get(il).copied().unwrap_or(1).max(1);
                let n_gqa = (n_head / n_kv).max(1);
                let n_embd_q = n_gqa * self.head_k;
                let blck = self.blck(&format!("{prefix}attn_output.weight"), t);
                let mut blck_perf = blck;
                while perf && blck_perf < 128 && blck_perf * (self.n as i64) < n_embd_q {
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
                    // Q, then K (and V with it when they are the same size), then V
                    Kind::QkvFused { .. } => [g_q, g_kv, g_v][seg.min(2)],
                    _ => g_kv,
                }
            }
        }
    }

    /// get_split_segments: the parts of the split dimension that are each split over the
    /// devices on their own, with how often each repeats. A fused QKV is Q, then K and V: two
    /// segments with the K/V one repeated when K and V rows are the same size, else three, so
    /// each device gets whole heads of all three; fused gate/up halves are one segment
    /// repeated twice. None where a fused tensor's size does not match the heads (the loader
    /// checks the shapes, so only a caller's own tensor can): mirrored is right, only not
    /// parallel.
    fn segments(&self, kind: Kind, il: usize, total: i64) -> Option<Vec<(i64, u32)>> {
        match kind {
            Kind::QkvFused { .. } => {
                let n_head = self.n_head.get(il).copied().unwrap_or(0);
                let n_kv = self.n_head_kv.get(il).copied().unwrap_or(0);
                let (n_q, n_k, n_v) =
                    (n_head * self.head_k, n_kv * self.head_k, n_kv * self.head_v);
                if n_head == 0 || total != n_q + n_k + n_v {
                    return None;
                }
                Some(if n_k == n_v {
                    vec![(n_q, 1), (n_k, 2)]
                } else {
                    vec![(n_q, 1), (n_k, 1), (n_v, 1)]
                })
            }
            // llama.cpp: "some models such as Phi 3 have fused up + gate tensors named up"
            Kind::FfnUpGate { up: true } | Kind::FfnUpGateBias { up: true }
                if self.n_ff.get(il).is_some_and(|&f| f > 0 && total == 2 * f) =>
            {
                Some(vec![(total / 2, 2)])
            }
            Kind::FfnGateUp if total % 2 == 0 => Some(vec![(total / 2, 2)]),
            Kind::FfnGateUp => None,
            _ => Some(vec![(total, 1)]),
        }
    }

    pub fn state(&self, t: &Tensor) -> SplitState {
        let kind = self.patterns.kind(&t.name);
        let axis = match kind {
            Kind::QkvWeight { .. }
            | Kind::QkvFused { bias: false }
            | Kind::FfnUpGate { .. }
            | Kind::FfnGateUp
            | Kind::Output => 1,
            Kind::QkvBias { .. }
            | Kind::QkvFused { bias: true }
            | Kind::KvCache { .. }
            | Kind::AttnOut
            | Kind::FfnUpGateBias { .. }
            | Kind::FfnDown
            | Kind::OutputBias => 0,
            Kind::FfnDownExpsBias => return SplitState::partial(),
            Kind::Mirrored => return SplitState::mirrored(),
        };
        let (il, rotation) = match layer_of(&t.name) {
            Some(il) => (il, il % self.n),
            None => (0, self.n_layer % self.n),
        };
        let Some(segments) = self.segments(kind, il, t.ne[axis]) else {
            return SplitState::mirrored();
        };
        let parts: Vec<(Vec<i64>, u32)> = segments
            .iter()
            .enumerate()
            .map(|(seg, &(total, nr))| {
                // Where llama.cpp's granularity does not divide the dimension, its boundaries
                // still fall on multiples of it and the last device in rotated order takes
                // the rest: SmolLM2's 3 KV groups of 192 Q rows in units of 384 give one
                // device all 9 heads over 2 devices. The least granularity that keeps whole
                // groups and blocks divides it (1 : 2 groups here), as every layer's tensors
                // alike (their totals and units scale together), so take that instead.
                let g = self.granularity(kind, il, t, seg, true);
                let g = if total % g == 0 {
                    g
                } else {
                    self.granularity(kind, il, t, seg, false)
                };
                (split_counts(total, &self.tensor_split, g, rotation), nr)
            })
            .collect();
        SplitState::segmented(axis, &parts)
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
        MetaSplit::from_parts(n, ts, 32, 32, vec![6, 6], vec![3, 3], vec![256, 256], types)
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

    #[test]
    fn a_fused_qkv_splits_q_k_and_v_each_on_whole_heads() {
        // 3 KV groups of 2 heads over 2 devices: the same shares as the separate matrices
        let m = table(2, &[], Type::F32);
        let qkv = m.state(&t("blk.0.attn_qkv.weight", Type::F32, &[192, 384]));
        assert_eq!(
            qkv,
            SplitState::segmented(1, &[(vec![64, 128], 1), (vec![32, 64], 2)])
        );
        assert_eq!((qkv.count(0), qkv.count(1)), (128, 256));
        let q = m.state(&t("blk.0.attn_q.weight", Type::F32, &[192, 192]));
        let k = m.state(&t("blk.0.attn_k.weight", Type::F32, &[192, 96]));
        assert_eq!(
            (qkv.seg_count(0, 0), qkv.seg_count(0, 1)),
            (q.ne[0], q.ne[1])
        );
        assert_eq!(
            (qkv.seg_count(1, 0), qkv.seg_count(1, 1)),
            (k.ne[0], k.ne[1])
        );
        // layer 1 rotates the short share, the bias follows its weight along axis 0
        let b1 = m.state(&t("blk.1.attn_qkv.bias", Type::F32, &[384]));
        assert_eq!(
            b1,
            SplitState::segmented(0, &[(vec![128, 64], 1), (vec![64, 32], 2)])
        );
        // over 4 devices one holds no KV group at all, in Q, K and V alike
        let m = table(4, &[], Type::F32);
        let qkv = m.state(&t("blk.0.attn_qkv.weight", Type::F32, &[192, 384]));
        assert_eq!(
            qkv,
            SplitState::segmented(1, &[(vec![0, 64, 64, 64], 1), (vec![0, 32, 32, 32], 2)])
        );
        // over 3 each device one group
        let m = table(3, &[], Type::F32);
        let qkv = m.state(&t("blk.1.attn_qkv.weight", Type::F32, &[192, 384]));
        assert_eq!(
            qkv,
            SplitState::segmented(1, &[(vec![64, 64, 64], 1), (vec![32, 32, 32], 2)])
        );
    }

    #[test]
    fn a_fused_qkv_with_smaller_v_heads_is_three_segments() {
        // K heads of 32, V heads of 16: V rows cannot repeat the K segment
        let types = HashMap::new();
        let m = MetaSplit::from_parts(2, &[], 32, 16, vec![6], vec![3], vec![256], types);
        let qkv = m.state(&t(
            "blk.0.attn_qkv.weight",
            Type::F32,
            &[192, 192 + 96 + 48],
        ));
        assert_eq!(
            qkv,
            SplitState::segmented(
                1,
                &[(vec![64, 128], 1), (vec![32, 64], 1), (vec![16, 32], 1)]
            )
        );
        // a size that does not match the heads is left whole rather than cut wrongly
        let odd = m.state(&t("blk.0.attn_qkv.weight", Type::F32, &[192, 300]));
        assert!(odd.is_mirrored());
    }

    #[test]
    fn fused_up_and_gate_halves_split_alike() {
        let m = table(3, &[], Type::F32);
        // phi3: ffn_up of twice the FFN width holds the gate half, then the up half
        let up = m.state(&t("blk.0.ffn_up.weight", Type::F32, &[192, 512]));
        assert_eq!(up, SplitState::segmented(1, &[(vec![0, 128, 128], 2)]));
        // each device's halves match its ffn_down columns
        let down = m.state(&t("blk.0.ffn_down.weight", Type::F32, &[256, 192]));
        assert_eq!(down.ne, vec![0, 128, 128]);
        // a plain up of the FFN width stays one segment
        let plain = m.state(&t("blk.0.ffn_up.weight", Type::F32, &[192, 256]));
        assert_eq!(plain, SplitState::axis(1, vec![0, 128, 128]));
        // ffn_gate_up_exps: gate and up halves of each expert, n_ff_exp 256
        let gu = m.state(&t(
            "blk.1.ffn_gate_up_exps.weight",
            Type::F32,
            &[192, 512, 4],
        ));
        assert_eq!(gu, SplitState::segmented(1, &[(vec![128, 0, 128], 2)]));
    }

    #[test]
    fn heads_stay_whole_where_the_performance_unit_does_not_divide() {
        // SmolLM2-135M: 9 heads of 64 over 3 KV heads, Q4_1 (blocks of 32). llama.cpp's unit
        // of 384 Q rows (lcm of a group's 192 and 128) does not divide 576: whole groups of
        // 192 instead, never a cut inside a head
        let mut types = HashMap::new();
        for il in 0..2 {
            types.insert(format!("blk.{il}.attn_output.weight"), Type::Q4_1);
            types.insert(format!("blk.{il}.ffn_down.weight"), Type::Q4_1);
        }
        let m = MetaSplit::from_parts(
            2,
            &[],
            64,
            64,
            vec![9, 9],
            vec![3, 3],
            vec![1536, 1536],
            types,
        );
        let q = m.state(&t("blk.0.attn_q.weight", Type::Q4_1, &[576, 576]));
        assert_eq!(q.ne, vec![192, 384]);
        let k = m.state(&t("blk.0.attn_k.weight", Type::Q4_1, &[576, 192]));
        assert_eq!(k.ne, vec![64, 128]);
        let o = m.state(&t("blk.0.attn_output.weight", Type::Q4_1, &[576, 576]));
        assert_eq!((o.axis, o.ne), (SplitAxis::Axis(0), vec![192, 384]));
        let kc = m.state(&t("cache_k_l1", Type::F16, &[192, 256]));
        assert_eq!(kc.ne, vec![128, 64]);
        // the FFN's 1536 columns divide into units of 128
        let down = m.state(&t("blk.0.ffn_down.weight", Type::Q4_1, &[1536, 576]));
        assert_eq!(down.ne, vec![768, 768]);
    }
}
