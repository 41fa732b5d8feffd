//! A meta tensor's slice on one device: its shape, strides and where its bytes are.

use super::split::SplitState;
use crate::tensor::{Tensor, MAX_DIMS};

/// The shape and strides of device j's slice of `t` under split `s`: the split dimension
/// shrinks to the device's count and every stride above it shrinks in proportion.
pub fn slice_shape(t: &Tensor, s: &SplitState, j: usize) -> ([i64; MAX_DIMS], [usize; MAX_DIMS]) {
    let (mut ne, mut nb) = (t.ne, t.nb);
    if let Some(d) = s.axis.dim() {
        let nj = s.count(j);
        ne[d] = nj;
        for (x, &full) in nb.iter_mut().zip(&t.nb) {
            if full > t.nb[d] && t.ne[d] != 0 {
                *x = full * nj as usize / t.ne[d] as usize;
            }
        }
    }
    (ne, nb)
}

/// Bytes of device j's slice of a contiguous tensor.
pub fn slice_nbytes(t: &Tensor, s: &SplitState, j: usize) -> usize {
    let (ne, nb) = slice_shape(t, s, j);
    let mut x = t.clone();
    x.ne = ne;
    x.nb = nb;
    x.nbytes()
}

/// A view's byte offset into its source, on device j: an offset inside one split unit stays,
/// a larger one scales with the device's share (llama.cpp's split_internal_offset test).
pub fn slice_view_offs(
    t: &Tensor,
    s: &SplitState,
    view_src: &Tensor,
    src_state: &SplitState,
    j: usize,
) -> usize {
    let offs = t.view_offs;
    let (Some(d), Some(ds)) = (s.axis.dim(), src_state.axis.dim()) else {
        return offs;
    };
    if offs == 0 || t.ne[d] == 0 {
        return offs;
    }
    let mut internal = offs <= view_src.nb[ds];
    for i in 0..MAX_DIMS {
        let dim_size = t.ne[i] as usize * t.nb[i];
        if offs <= dim_size && dim_size < t.nb[d] {
            internal = true;
            break;
        }
    }
    if internal {
        offs
    } else {
        offs * s.count(j) as usize / t.ne[d] as usize
    }
}

/// The byte ranges of a contiguous tensor that belong to each device under a real-axis split:
/// `visit(j, full_offset, slice_offset, len)` for every run, in order. Along the axis the whole
/// tensor holds, segment by segment and repetition by repetition, each device's piece in device
/// order, and device j's slice the same pieces back to back (ggml's segmented set/get_tensor,
/// which this extends to every axis and any outer dimensions). Returns false when the layout is
/// not one this can walk (non-contiguous, counts that do not cover the dimension or cut a block).
pub fn for_each_run(
    t: &Tensor,
    s: &SplitState,
    n: usize,
    mut visit: impl FnMut(usize, usize, usize, usize),
) -> bool {
    let Some(d) = s.axis.dim() else {
        return false;
    };
    if !t.is_contiguous() || s.n_devices() != n || s.ne.len() != n * s.n_segments() {
        return false;
    }
    let bs = t.ty.block_size() as i64;
    // bytes per index along d, and the elements of one such index
    let (unit, count_div) = if d == 0 {
        (t.ty.type_size(), bs)
    } else {
        (t.nb[d], 1)
    };
    if s.ne.iter().any(|&c| c < 0 || c % count_div != 0)
        || (0..n).map(|j| s.count(j)).sum::<i64>() != t.ne[d]
    {
        return false;
    }
    // how many times the whole split dimension repeats above it
    let outer: i64 = t.ne[d + 1..].iter().product();
    let mut full = 0usize;
    let mut slice_off = vec![0usize; n];
    for _ in 0..outer {
        for (seg, &nr) in s.nr.iter().enumerate() {
            for _ in 0..nr {
                for (j, so) in slice_off.iter_mut().enumerate() {
                    let len = (s.seg_count(seg, j) / count_div) as usize * unit;
                    if len > 0 {
                        visit(j, full, *so, len);
                    }
                    full += len;
                    *so += len;
                }
            }
        }
    }
    true
}
