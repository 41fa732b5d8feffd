//! The tensor record: shape (`ne`), byte strides (`nb`), the op that produces it and where its
//! bytes live. Layout rules are ggml's (Example 2 of the architecture seed).

use crate::op::Op;
use crate::types::Type;
use std::sync::Arc;

pub const MAX_DIMS: usize = 4;
pub const MAX_SRC: usize = 10;
pub const MAX_NAME: usize = 64;

/// Index of a tensor inside its [`crate::Context`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId(pub u32);

impl TensorId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

pub mod flags {
    pub const INPUT: u32 = 1;
    pub const OUTPUT: u32 = 2;
    pub const PARAM: u32 = 4;
    pub const LOSS: u32 = 8;
    /// Set by build_forward_expand on nodes that must be computed (ggml's COMPUTE flag).
    pub const COMPUTE: u32 = 16;
}

/// Where a tensor's bytes are: a backend buffer and the absolute address inside it.
/// `addr` is a host pointer for host buffers and a device address otherwise, as ggml's `data`.
#[derive(Clone)]
pub struct TensorData {
    pub buffer: Arc<crate::backend::Buffer>,
    pub addr: usize,
}

impl std::fmt::Debug for TensorData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{:#x}", self.buffer.name(), self.addr)
    }
}

#[derive(Clone, Debug)]
pub struct Tensor {
    pub ty: Type,
    pub ne: [i64; MAX_DIMS],
    pub nb: [usize; MAX_DIMS],
    pub op: Op,
    pub src: [Option<TensorId>; MAX_SRC],
    pub view_src: Option<TensorId>,
    pub view_offs: usize,
    pub flags: u32,
    pub name: String,
    pub data: Option<TensorData>,
}

/// Contiguous strides for a shape (the ne/nb rule).
pub fn contiguous_strides(ty: Type, ne: &[i64; MAX_DIMS]) -> [usize; MAX_DIMS] {
    let mut nb = [0usize; MAX_DIMS];
    nb[0] = ty.type_size();
    nb[1] = nb[0] * (ne[0] as usize / ty.block_size());
    for i in 2..MAX_DIMS {
        nb[i] = nb[i - 1] * ne[i - 1] as usize;
    }
    nb
}

impl Tensor {
    pub fn new(ty: Type, ne: [i64; MAX_DIMS]) -> Tensor {
        Tensor {
            ty,
            ne,
            nb: contiguous_strides(ty, &ne),
            op: Op::None,
            src: [None; MAX_SRC],
            view_src: None,
            view_offs: 0,
            flags: 0,
            name: String::new(),
            data: None,
        }
    }

    pub fn nelements(&self) -> i64 {
        self.ne.iter().product()
    }

    pub fn nrows(&self) -> i64 {
        self.ne[1] * self.ne[2] * self.ne[3]
    }

    /// ggml_nbytes: the span from the first to one past the last byte addressed.
    pub fn nbytes(&self) -> usize {
        if self.ne.iter().any(|&n| n <= 0) {
            return 0;
        }
        let bs = self.ty.block_size();
        let mut n;
        if bs == 1 {
            n = self.ty.type_size();
            for i in 0..MAX_DIMS {
                n += (self.ne[i] as usize - 1) * self.nb[i];
            }
        } else {
            n = self.ne[0] as usize * self.nb[0] / bs;
            for i in 1..MAX_DIMS {
                n += (self.ne[i] as usize - 1) * self.nb[i];
            }
        }
        n
    }

    pub fn row_size(&self) -> usize {
        self.ty.row_size(self.ne[0])
    }

    pub fn n_dims(&self) -> usize {
        for i in (1..MAX_DIMS).rev() {
            if self.ne[i] > 1 {
                return i + 1;
            }
        }
        1
    }

    fn is_contiguous_n(&self, n: usize) -> bool {
        let mut next_nb = self.ty.type_size();
        if self.ne[0] != self.ty.block_size() as i64 && self.nb[0] != next_nb {
            return false;
        }
        next_nb *= self.ne[0] as usize / self.ty.block_size();
        for i in 1..MAX_DIMS {
            if self.ne[i] != 1 {
                if i > n {
                    if self.nb[i] != next_nb {
                        return false;
                    }
                    next_nb *= self.ne[i] as usize;
                } else {
                    next_nb = self.ne[i] as usize * self.nb[i];
                }
            }
        }
        true
    }

    /// ggml_is_contiguous: elements in index order with no gaps.
    pub fn is_contiguous(&self) -> bool {
        self.is_contiguous_n(0)
    }
    /// Contiguous for dims >= 1 (rows may have gaps between them).
    pub fn is_contiguous_1(&self) -> bool {
        self.is_contiguous_n(1)
    }
    pub fn is_contiguous_2(&self) -> bool {
        self.is_contiguous_n(2)
    }
    /// Each row's elements are adjacent (ggml_is_contiguous_rows).
    pub fn is_contiguous_rows(&self) -> bool {
        self.ne[0] == self.ty.block_size() as i64 || self.nb[0] == self.ty.type_size()
    }
    pub fn is_transposed(&self) -> bool {
        self.nb[0] > self.nb[1]
    }
    pub fn is_permuted(&self) -> bool {
        self.nb[0] > self.nb[1] || self.nb[1] > self.nb[2] || self.nb[2] > self.nb[3]
    }
    pub fn is_empty(&self) -> bool {
        self.ne.contains(&0)
    }
    pub fn is_scalar(&self) -> bool {
        self.ne.iter().all(|&n| n == 1)
    }
    pub fn is_vector(&self) -> bool {
        self.ne[1] == 1 && self.ne[2] == 1 && self.ne[3] == 1
    }
    pub fn is_matrix(&self) -> bool {
        self.ne[2] == 1 && self.ne[3] == 1
    }
    pub fn same_shape(&self, o: &Tensor) -> bool {
        self.ne == o.ne
    }
    pub fn same_stride(&self, o: &Tensor) -> bool {
        self.nb == o.nb
    }
    /// b can be broadcast (repeated) to a's shape.
    pub fn can_repeat_to(&self, a: &Tensor) -> bool {
        self.is_empty() && a.is_empty()
            || (0..MAX_DIMS).all(|i| self.ne[i] > 0 && a.ne[i] % self.ne[i] == 0)
    }
    pub fn is_view(&self) -> bool {
        self.view_src.is_some()
    }
    pub fn has_flag(&self, f: u32) -> bool {
        self.flags & f != 0
    }
    /// The address of this tensor's bytes (host pointer for host buffers); 0 when unallocated.
    pub fn addr(&self) -> usize {
        self.data.as_ref().map_or(0, |d| d.addr)
    }
    pub fn buffer(&self) -> Option<&Arc<crate::backend::Buffer>> {
        self.data.as_ref().map(|d| &d.buffer)
    }
    pub fn set_name(&mut self, name: &str) {
        // ggml truncates names to GGML_MAX_NAME - 1 bytes
        let mut end = name.len().min(MAX_NAME - 1);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        self.name = name[..end].to_string();
    }
    pub fn srcs(&self) -> impl Iterator<Item = TensorId> + '_ {
        self.src.iter().filter_map(|s| *s)
    }
}
