//! How one tensor is distributed over the N devices of a meta device
//! (ggml_backend_meta_split_state): an axis plus, for real axes, the exact per-device counts.

use std::fmt;

/// ggml_backend_meta_split_axis: a tensor dimension, or one of the two non-axis states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SplitAxis {
    /// Each device holds a slice along this dimension (0..=3).
    Axis(usize),
    /// Every device holds all values.
    Mirrored,
    /// Every device holds the full shape, and the true value is the sum over devices.
    Partial,
}

impl SplitAxis {
    /// ggml_backend_meta_split_axis_name
    pub fn name(self) -> &'static str {
        match self {
            SplitAxis::Axis(0) => "0",
            SplitAxis::Axis(1) => "1",
            SplitAxis::Axis(2) => "2",
            SplitAxis::Axis(_) => "3",
            SplitAxis::Mirrored => "MIRRORED",
            SplitAxis::Partial => "PARTIAL",
        }
    }
    pub fn dim(self) -> Option<usize> {
        match self {
            SplitAxis::Axis(d) => Some(d),
            _ => None,
        }
    }
}

/// The split of one tensor. For a real axis the dimension is cut into segments, each split over
/// the devices on its own and repeated `nr[s]` times (ggml_backend_meta_split_state's
/// n_segments/ne/nr): along the axis the whole tensor is laid out
/// `seg0: [r0: dev0, dev1, ..], [r1: dev0, dev1, ..], seg1: ..`, and device j's slice holds its
/// pieces in that order. A fused QKV weight is three segments (Q, K and V rows, or Q and a K/V
/// segment repeated twice), so that every device gets whole heads of each; a fused up/gate
/// weight one segment repeated twice; a reshape that folds a split dimension into a larger one
/// gives one segment repeated once per row. `ne[s * n + j]` is device j's count in segment s.
/// For MIRRORED, `ne` is unused; for PARTIAL it may carry the contraction split it came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SplitState {
    pub axis: SplitAxis,
    pub ne: Vec<i64>,
    /// repetitions of each segment (at least one segment)
    pub nr: Vec<u32>,
}

impl SplitState {
    pub fn mirrored() -> SplitState {
        SplitState {
            axis: SplitAxis::Mirrored,
            ne: Vec::new(),
            nr: vec![1],
        }
    }
    pub fn partial() -> SplitState {
        SplitState {
            axis: SplitAxis::Partial,
            ne: Vec::new(),
            nr: vec![1],
        }
    }
    /// A split along `dim` with these per-device counts (one segment, one repetition).
    pub fn axis(dim: usize, ne: Vec<i64>) -> SplitState {
        SplitState {
            axis: SplitAxis::Axis(dim),
            ne,
            nr: vec![1],
        }
    }
    /// A split along `dim` in segments: each its per-device counts (all of one length) and how
    /// often it repeats.
    pub fn segmented(dim: usize, segments: &[(Vec<i64>, u32)]) -> SplitState {
        SplitState {
            axis: SplitAxis::Axis(dim),
            ne: segments.iter().flat_map(|(ne, _)| ne.clone()).collect(),
            nr: segments.iter().map(|&(_, nr)| nr).collect(),
        }
    }
    /// A split along `dim` whose counts are filled in later from the sources.
    pub(crate) fn axis_nr(dim: usize, nr: u32) -> SplitState {
        SplitState {
            axis: SplitAxis::Axis(dim),
            ne: Vec::new(),
            nr: vec![nr],
        }
    }
    pub fn is_mirrored(&self) -> bool {
        self.axis == SplitAxis::Mirrored
    }
    pub fn is_partial(&self) -> bool {
        self.axis == SplitAxis::Partial
    }
    pub fn n_segments(&self) -> usize {
        self.nr.len()
    }
    /// The repetitions of the first segment (the only one of a compute tensor's state).
    pub fn nr0(&self) -> u32 {
        self.nr.first().copied().unwrap_or(1)
    }
    /// One segment repeated once: device j's slice is one contiguous run of the dimension.
    pub fn is_simple(&self) -> bool {
        self.nr.len() <= 1 && self.nr0() == 1
    }
    /// The number of devices the counts are for (0 while they are not filled in).
    pub fn n_devices(&self) -> usize {
        self.ne.len() / self.nr.len().max(1)
    }
    /// Device j's count in segment s (one repetition).
    pub fn seg_count(&self, s: usize, j: usize) -> i64 {
        let n = self.n_devices();
        if j >= n {
            return 0;
        }
        self.ne.get(s * n + j).copied().unwrap_or(0)
    }
    /// Elements along the split axis on device j (the whole dimension when not split).
    pub fn count(&self, j: usize) -> i64 {
        (0..self.nr.len())
            .map(|s| self.seg_count(s, j) * self.nr[s] as i64)
            .sum()
    }
    /// Whether device j's slice is empty (only possible for a real axis).
    pub fn is_empty_on(&self, j: usize) -> bool {
        self.axis.dim().is_some() && self.count(j) == 0
    }
    /// ggml's split_states_equal: the same axis and the same per-device element totals.
    pub fn equal(&self, o: &SplitState, n: usize) -> bool {
        self.axis == o.axis
            && (self.axis.dim().is_none() || (0..n).all(|j| self.count(j) == o.count(j)))
    }
    /// For each device, the index along the split axis of every element of its slice, in the
    /// slice's order: where the segments and repetitions put them in the whole tensor.
    pub fn index_map(&self) -> Vec<Vec<i64>> {
        let n = self.n_devices();
        let mut map: Vec<Vec<i64>> = (0..n)
            .map(|j| Vec::with_capacity(self.count(j).max(0) as usize))
            .collect();
        let mut at = 0i64;
        for (s, &nr) in self.nr.iter().enumerate() {
            for _ in 0..nr {
                for (j, m) in map.iter_mut().enumerate() {
                    let c = self.seg_count(s, j);
                    m.extend(at..at + c);
                    at += c;
                }
            }
        }
        map
    }
}

impl fmt::Display for SplitState {
    /// As GGML_META_DEBUG prints it: `AXIS, {ne0xnr, ne1xnr, ...}`, segments separated by `; `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.n_devices();
        let segs: Vec<String> = (0..self.nr.len())
            .map(|s| {
                let ne: Vec<String> = (0..n)
                    .map(|j| format!("{}x{}", self.seg_count(s, j), self.nr[s]))
                    .collect();
                ne.join(", ")
            })
            .collect();
        write!(f, "{}, {{{}}}", self.axis.name(), segs.join("; "))
    }
}

/// Divide `total` elements over devices in proportion to `weights` (all zero: evenly), each
/// boundary rounded down to a multiple of `granularity`, the remainder to the last device in
/// rotated order. Device `(k + rotation) % n` gets the k-th share, so that layers with different
/// rotations short-change different devices when the count does not divide (llama.cpp's
/// rotation term in llama_meta_device_get_split_state).
pub fn split_counts(total: i64, weights: &[f32], granularity: i64, rotation: usize) -> Vec<i64> {
    let n = weights.len().max(1);
    let g = granularity.max(1);
    let mut scan = Vec::with_capacity(n);
    let mut acc = 0.0f32;
    for k in 0..n {
        acc += weights.get((k + rotation) % n).copied().unwrap_or(0.0);
        scan.push(acc);
    }
    let sum = acc;
    let mut ne = vec![0i64; n];
    let mut low = 0i64;
    for k in 0..n - 1 {
        let mut high = if sum == 0.0 {
            total * (k as i64 + 1) / n as i64
        } else {
            (total as f64 * scan[k] as f64 / sum as f64) as i64
        };
        high -= high % g;
        high = high.max(low);
        ne[(k + rotation) % n] = high - low;
        low = high;
    }
    ne[(n - 1 + rotation) % n] = total - low;
    ne
}
