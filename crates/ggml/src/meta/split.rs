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

/// The split of one tensor. For a real axis, device j holds `ne[j] * nr` elements along it:
/// `nr` repetitions of a pattern in which device j owns `ne[j]` consecutive elements (a reshape
/// that folds a split dimension into a larger one makes nr > 1). For MIRRORED, `ne` is unused;
/// for PARTIAL it may carry the contraction split it came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SplitState {
    pub axis: SplitAxis,
    pub ne: Vec<i64>,
    pub nr: u32,
}

impl SplitState {
    pub fn mirrored() -> SplitState {
        SplitState {
            axis: SplitAxis::Mirrored,
            ne: Vec::new(),
            nr: 1,
        }
    }
    pub fn partial() -> SplitState {
        SplitState {
            axis: SplitAxis::Partial,
            ne: Vec::new(),
            nr: 1,
        }
    }
    /// A split along `dim` with these per-device counts (one repetition).
    pub fn axis(dim: usize, ne: Vec<i64>) -> SplitState {
        SplitState {
            axis: SplitAxis::Axis(dim),
            ne,
            nr: 1,
        }
    }
    /// A split along `dim` whose counts are filled in later from the sources.
    pub(crate) fn axis_nr(dim: usize, nr: u32) -> SplitState {
        SplitState {
            axis: SplitAxis::Axis(dim),
            ne: Vec::new(),
            nr,
        }
    }
    pub fn is_mirrored(&self) -> bool {
        self.axis == SplitAxis::Mirrored
    }
    pub fn is_partial(&self) -> bool {
        self.axis == SplitAxis::Partial
    }
    /// Elements along the split axis on device j (the whole dimension when not split).
    pub fn count(&self, j: usize) -> i64 {
        self.ne.get(j).copied().unwrap_or(0) * self.nr as i64
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
}

impl fmt::Display for SplitState {
    /// As GGML_META_DEBUG prints it: `AXIS, {ne0xnr, ne1xnr, ...}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ne: Vec<String> = self.ne.iter().map(|n| format!("{n}x{}", self.nr)).collect();
        write!(f, "{}, {{{}}}", self.axis.name(), ne.join(", "))
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
