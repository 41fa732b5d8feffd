//! A raw view of one tensor's bytes for the kernels: the shape, the byte strides and the host
//! address. Kernels run on many threads that write disjoint parts of the destination, which
//! shared Rust references cannot express, so element access goes through raw pointers here.
//!
//! The graph computer checks before any kernel runs that every tensor a node touches lies
//! inside its (host) buffer (`Backend::graph_compute` -> `check_node`), which makes the
//! in-bounds index arithmetic below safe.

use crate::fp;
use ggml::{Tensor, Type};

#[derive(Clone, Copy, Debug)]
pub(crate) struct TRef {
    pub ty: Type,
    pub ne: [usize; 4],
    pub nb: [usize; 4],
    pub data: *mut u8,
    /// The bytes are in CPU_REPACK's layout (`repack::Layout`), not GGUF's.
    pub repacked: bool,
}

// SAFETY: TRef is a plain address plus shape; the threads that share it write disjoint rows
// (each kernel splits its work so) and synchronise on the pool's barrier between nodes.
unsafe impl Send for TRef {}
unsafe impl Sync for TRef {}

impl TRef {
    pub fn new(t: &Tensor) -> TRef {
        TRef {
            ty: t.ty,
            ne: t.ne.map(|n| n.max(0) as usize),
            nb: t.nb,
            data: t.addr() as *mut u8,
            repacked: crate::repack::holds(t),
        }
    }

    pub fn nrows(&self) -> usize {
        self.ne[1] * self.ne[2] * self.ne[3]
    }

    pub fn nelements(&self) -> usize {
        self.ne.iter().product()
    }

    pub fn is_contiguous(&self) -> bool {
        let bs = self.ty.block_size();
        let mut next = self.ty.type_size();
        if self.ne[0] != bs && self.nb[0] != next {
            return false;
        }
        next *= self.ne[0] / bs;
        for i in 1..4 {
            if self.ne[i] != 1 {
                if self.nb[i] != next {
                    return false;
                }
                next *= self.ne[i];
            }
        }
        true
    }

    /// Elements of a row are adjacent.
    pub fn rows_contiguous(&self) -> bool {
        self.ne[0] == self.ty.block_size() || self.nb[0] == self.ty.type_size()
    }

    #[inline(always)]
    pub fn offset(&self, i0: usize, i1: usize, i2: usize, i3: usize) -> usize {
        i0 * self.nb[0] + i1 * self.nb[1] + i2 * self.nb[2] + i3 * self.nb[3]
    }

    #[inline(always)]
    pub fn ptr(&self, i0: usize, i1: usize, i2: usize, i3: usize) -> *mut u8 {
        self.data.wrapping_add(self.offset(i0, i1, i2, i3))
    }

    #[inline(always)]
    pub fn row_ptr(&self, i1: usize, i2: usize, i3: usize) -> *mut u8 {
        self.ptr(0, i1, i2, i3)
    }

    /// Row `r` in flat row order (i1 fastest).
    #[inline(always)]
    pub fn flat_row_ptr(&self, r: usize) -> *mut u8 {
        let (i1, i2, i3) = self.unflat_row(r);
        self.row_ptr(i1, i2, i3)
    }

    #[inline(always)]
    pub fn unflat_row(&self, r: usize) -> (usize, usize, usize) {
        let i1 = r % self.ne[1];
        let i2 = (r / self.ne[1]) % self.ne[2];
        let i3 = r / (self.ne[1] * self.ne[2]);
        (i1, i2, i3)
    }

    /// Steps (i1, i2, i3) to the next row in `unflat_row`'s order (no divisions).
    #[inline(always)]
    pub fn next_row(&self, (i1, i2, i3): (usize, usize, usize)) -> (usize, usize, usize) {
        if i1 + 1 < self.ne[1] {
            (i1 + 1, i2, i3)
        } else if i2 + 1 < self.ne[2] {
            (0, i2 + 1, i3)
        } else {
            (0, 0, i3 + 1)
        }
    }

    /// The bytes of a row whose elements are adjacent (or whole blocks for quantized types).
    ///
    /// # Safety
    /// The row must exist and the caller must not hold a mutable view of the same bytes.
    #[inline(always)]
    pub unsafe fn row_bytes<'a>(&self, i1: usize, i2: usize, i3: usize) -> &'a [u8] {
        std::slice::from_raw_parts(
            self.row_ptr(i1, i2, i3),
            self.ty.row_size(self.ne[0] as i64),
        )
    }

    /// Reads element (i0..) as f32 from any non-quantized type.
    ///
    /// # Safety
    /// The element must exist.
    #[inline(always)]
    pub unsafe fn get_f32(&self, i0: usize, i1: usize, i2: usize, i3: usize) -> f32 {
        load_scalar(self.ty, self.ptr(i0, i1, i2, i3))
    }

    /// # Safety
    /// The element must exist and belong to the calling thread's share of the output.
    #[inline(always)]
    pub unsafe fn set_f32(&self, i0: usize, i1: usize, i2: usize, i3: usize, v: f32) {
        store_scalar(self.ty, self.ptr(i0, i1, i2, i3), v)
    }

    /// Reads row (i1, i2, i3) as f32 (any float-like type, any nb[0]; quantized rows are
    /// dequantized).
    ///
    /// # Safety
    /// The row must exist; `out` has ne[0] elements.
    pub unsafe fn load_row(&self, i1: usize, i2: usize, i3: usize, out: &mut [f32]) {
        let n = self.ne[0];
        debug_assert_eq!(out.len(), n);
        let p = self.row_ptr(i1, i2, i3);
        if self.ty.is_quantized() {
            crate::quant::dequantize_row(self.ty, self.row_bytes(i1, i2, i3), out);
            return;
        }
        let step = self.nb[0];
        match self.ty {
            Type::F32 if step == 4 => {
                out.copy_from_slice(std::slice::from_raw_parts(p as *const f32, n))
            }
            Type::F16 if step == 2 => {
                fp::f16_to_f32_row(std::slice::from_raw_parts(p as *const u16, n), out)
            }
            _ => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = load_scalar(self.ty, p.add(i * step));
                }
            }
        }
    }

    /// Writes row (i1, i2, i3) from f32 (float-like or quantized types).
    ///
    /// # Safety
    /// The row must exist and belong to the calling thread; `src` has ne[0] elements.
    pub unsafe fn store_row(&self, i1: usize, i2: usize, i3: usize, src: &[f32]) {
        let n = self.ne[0];
        debug_assert_eq!(src.len(), n);
        let p = self.row_ptr(i1, i2, i3);
        if self.ty.is_quantized() {
            let out = std::slice::from_raw_parts_mut(p, self.ty.row_size(n as i64));
            crate::quant::quantize_row(self.ty, src, out);
            return;
        }
        let step = self.nb[0];
        match self.ty {
            Type::F32 if step == 4 => {
                std::slice::from_raw_parts_mut(p as *mut f32, n).copy_from_slice(src)
            }
            Type::F16 if step == 2 => {
                fp::f32_to_f16_row(src, std::slice::from_raw_parts_mut(p as *mut u16, n))
            }
            _ => {
                for (i, &v) in src.iter().enumerate() {
                    store_scalar(self.ty, p.add(i * step), v);
                }
            }
        }
    }
}

/// # Safety
/// `p` points at a readable element of type `ty` (non-quantized).
#[inline(always)]
pub(crate) unsafe fn load_scalar(ty: Type, p: *const u8) -> f32 {
    match ty {
        Type::F32 => (p as *const f32).read_unaligned(),
        Type::F16 => fp::f16_to_f32((p as *const u16).read_unaligned()),
        Type::Bf16 => fp::bf16_to_f32((p as *const u16).read_unaligned()),
        Type::I32 => (p as *const i32).read_unaligned() as f32,
        Type::I16 => (p as *const i16).read_unaligned() as f32,
        Type::I8 => (p as *const i8).read_unaligned() as f32,
        Type::I64 => (p as *const i64).read_unaligned() as f32,
        Type::F64 => (p as *const f64).read_unaligned() as f32,
        _ => f32::NAN,
    }
}

/// # Safety
/// `p` points at a writable element of type `ty` (non-quantized).
#[inline(always)]
pub(crate) unsafe fn store_scalar(ty: Type, p: *mut u8, v: f32) {
    match ty {
        Type::F32 => (p as *mut f32).write_unaligned(v),
        Type::F16 => (p as *mut u16).write_unaligned(fp::f32_to_f16(v)),
        Type::Bf16 => (p as *mut u16).write_unaligned(fp::f32_to_bf16(v)),
        Type::I32 => (p as *mut i32).write_unaligned(v as i32),
        Type::I16 => (p as *mut i16).write_unaligned(v as i16),
        Type::I8 => (p as *mut i8).write_unaligned(v as i8),
        Type::I64 => (p as *mut i64).write_unaligned(v as i64),
        Type::F64 => (p as *mut f64).write_unaligned(v as f64),
        _ => {}
    }
}

/// Reads an integer index (i32 or i64).
///
/// # Safety
/// `p` points at a readable element of type `ty`.
#[inline(always)]
pub(crate) unsafe fn load_index(ty: Type, p: *const u8) -> i64 {
    match ty {
        Type::I64 => (p as *const i64).read_unaligned(),
        _ => (p as *const i32).read_unaligned() as i64,
    }
}

/// The [start, end) share of `n` items for thread `ith` of `nth`.
#[inline(always)]
pub(crate) fn split(n: usize, ith: usize, nth: usize) -> (usize, usize) {
    let per = n.div_ceil(nth);
    let s = (per * ith).min(n);
    (s, (s + per).min(n))
}
