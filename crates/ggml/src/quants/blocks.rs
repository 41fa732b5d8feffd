//! Block layouts of ggml-common.h. Each struct is `#[repr(C)]` with ggml's field order, and its
//! size is asserted at compile time; bytes are read and written little-endian field by field,
//! so no `unsafe` transmutes are needed.

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

use std::mem::size_of;

pub const QK4_0: usize = 32;
pub const QK4_1: usize = 32;
pub const QK5_0: usize = 32;
pub const QK5_1: usize = 32;
pub const QK8_0: usize = 32;
pub const QK8_1: usize = 32;
pub const QK4_NL: usize = 32;
pub const QK_K: usize = 256;
pub const K_SCALE_SIZE: usize = 12;

/// The 16 non-linear levels of IQ4_NL.
pub const KVALUES_IQ4NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// A block type: its byte size in a tensor, elements per block, and its (de)serialisation.
pub trait Block: Sized + Copy + Default {
    const QK: usize;
    const SIZE: usize;
    fn read(b: &[u8]) -> Self;
    fn write(&self, out: &mut [u8]);
}

#[inline]
fn rd16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

#[inline]
fn wr16(b: &mut [u8], o: usize, v: u16) {
    b[o..o + 2].copy_from_slice(&v.to_le_bytes());
}

#[inline]
fn arr<const N: usize>(b: &[u8], o: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[o..o + N]);
    a
}

#[inline]
fn arr_i8<const N: usize>(b: &[u8], o: usize) -> [i8; N] {
    let mut a = [0i8; N];
    for (d, s) in a.iter_mut().zip(&b[o..o + N]) {
        *d = *s as i8;
    }
    a
}

#[inline]
fn put_i8(b: &mut [u8], o: usize, v: &[i8]) {
    for (d, s) in b[o..o + v.len()].iter_mut().zip(v) {
        *d = *s as u8;
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct BlockQ4_0 {
    pub d: u16,
    pub qs: [u8; QK4_0 / 2],
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct BlockQ4_1 {
    pub d: u16,
    pub m: u16,
    pub qs: [u8; QK4_1 / 2],
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct BlockQ5_0 {
    pub d: u16,
    pub qh: [u8; 4],
    pub qs: [u8; QK5_0 / 2],
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct BlockQ5_1 {
    pub d: u16,
    pub m: u16,
    pub qh: [u8; 4],
    pub qs: [u8; QK5_1 / 2],
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct BlockQ8_0 {
    pub d: u16,
    pub qs: [i8; QK8_0],
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct BlockQ8_1 {
    pub d: u16,
    /// d * sum(qs)
    pub s: u16,
    pub qs: [i8; QK8_1],
}

#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ2K {
    pub scales: [u8; QK_K / 16],
    pub qs: [u8; QK_K / 4],
    pub d: u16,
    pub dmin: u16,
}

#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ3K {
    pub hmask: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 4],
    pub scales: [u8; 12],
    pub d: u16,
}

#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ4K {
    pub d: u16,
    pub dmin: u16,
    pub scales: [u8; K_SCALE_SIZE],
    pub qs: [u8; QK_K / 2],
}

#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ5K {
    pub d: u16,
    pub dmin: u16,
    pub scales: [u8; K_SCALE_SIZE],
    pub qh: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 2],
}

#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ6K {
    pub ql: [u8; QK_K / 2],
    pub qh: [u8; QK_K / 4],
    pub scales: [i8; QK_K / 16],
    pub d: u16,
}

#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ8K {
    pub d: f32,
    pub qs: [i8; QK_K],
    /// sums of the quants in groups of 16
    pub bsums: [i16; QK_K / 16],
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct BlockIq4Nl {
    pub d: u16,
    pub qs: [u8; QK4_NL / 2],
}

const _: () = assert!(size_of::<BlockQ4_0>() == 18);
const _: () = assert!(size_of::<BlockQ4_1>() == 20);
const _: () = assert!(size_of::<BlockQ5_0>() == 22);
const _: () = assert!(size_of::<BlockQ5_1>() == 24);
const _: () = assert!(size_of::<BlockQ8_0>() == 34);
const _: () = assert!(size_of::<BlockQ8_1>() == 36);
const _: () = assert!(size_of::<BlockQ2K>() == 84);
const _: () = assert!(size_of::<BlockQ3K>() == 110);
const _: () = assert!(size_of::<BlockQ4K>() == 144);
const _: () = assert!(size_of::<BlockQ5K>() == 176);
const _: () = assert!(size_of::<BlockQ6K>() == 210);
const _: () = assert!(size_of::<BlockQ8K>() == 292);
const _: () = assert!(size_of::<BlockIq4Nl>() == 18);

// Default cannot be derived for arrays longer than 32.
impl Default for BlockQ2K {
    fn default() -> Self {
        Self {
            scales: [0; 16],
            qs: [0; 64],
            d: 0,
            dmin: 0,
        }
    }
}
impl Default for BlockQ3K {
    fn default() -> Self {
        Self {
            hmask: [0; 32],
            qs: [0; 64],
            scales: [0; 12],
            d: 0,
        }
    }
}
impl Default for BlockQ4K {
    fn default() -> Self {
        Self {
            d: 0,
            dmin: 0,
            scales: [0; 12],
            qs: [0; 128],
        }
    }
}
impl Default for BlockQ5K {
    fn default() -> Self {
        Self {
            d: 0,
            dmin: 0,
            scales: [0; 12],
            qh: [0; 32],
            qs: [0; 128],
        }
    }
}
impl Default for BlockQ6K {
    fn default() -> Self {
        Self {
            ql: [0; 128],
            qh: [0; 64],
            scales: [0; 16],
            d: 0,
        }
    }
}
impl Default for BlockQ8K {
    fn default() -> Self {
        Self {
            d: 0.0,
            qs: [0; 256],
            bsums: [0; 16],
        }
    }
}

impl Block for BlockQ4_0 {
    const QK: usize = QK4_0;
    const SIZE: usize = 18;
    fn read(b: &[u8]) -> Self {
        Self {
            d: rd16(b, 0),
            qs: arr(b, 2),
        }
    }
    fn write(&self, out: &mut [u8]) {
        wr16(out, 0, self.d);
        out[2..18].copy_from_slice(&self.qs);
    }
}

impl Block for BlockIq4Nl {
    const QK: usize = QK4_NL;
    const SIZE: usize = 18;
    fn read(b: &[u8]) -> Self {
        Self {
            d: rd16(b, 0),
            qs: arr(b, 2),
        }
    }
    fn write(&self, out: &mut [u8]) {
        wr16(out, 0, self.d);
        out[2..18].copy_from_slice(&self.qs);
    }
}

impl Block for BlockQ4_1 {
    const QK: usize = QK4_1;
    const SIZE: usize = 20;
    fn read(b: &[u8]) -> Self {
        Self {
            d: rd16(b, 0),
            m: rd16(b, 2),
            qs: arr(b, 4),
        }
    }
    fn write(&self, out: &mut [u8]) {
        wr16(out, 0, self.d);
        wr16(out, 2, self.m);
        out[4..20].copy_from_slice(&self.qs);
    }
}

impl Block for BlockQ5_0 {
    const QK: usize = QK5_0;
    const SIZE: usize = 22;
    fn read(b: &[u8]) -> Self {
        Self {
            d: rd16(b, 0),
            qh: arr(b, 2),
            qs: arr(b, 6),
        }
    }
    fn write(&self, out: &mut [u8]) {
        wr16(out, 0, self.d);
        out[2..6].copy_from_slice(&self.qh);
        out[6..22].copy_from_slice(&self.qs);
    }
}

impl Block for BlockQ5_1 {
    const QK: usize = QK5_1;
    const SIZE: usize = 24;
    fn read(b: &[u8]) -> Self {
        Self {
            d: rd16(b, 0),
            m: rd16(b, 2),
            qh: arr(b, 4),
            qs: arr(b, 8),
        }
    }
    fn write(&self, out: &mut [u8]) {
        wr16(out, 0, self.d);
        wr16(out, 2, self.m);
        out[4..8].copy_from_slice(&self.qh);
        out[8..24].copy_from_slice(&self.qs);
    }
}

impl Block for BlockQ8_0 {
    const QK: usize = QK8_0;
    const SIZE: usize = 34;
    fn read(b: &[u8]) -> Self {
        Self {
            d: rd16(b, 0),
            qs: arr_i8(b, 2),
        }
    }
    fn write(&self, out: &mut [u8]) {
        wr16(out, 0, self.d);
        put_i8(out, 2, &self.qs);
    }
}

impl Block for BlockQ8_1 {
    const QK: usize = QK8_1;
    const SIZE: usize = 36;
    fn read(b: &[u8]) -> Self {
        Self {
            d: rd16(b, 0),
            s: rd16(b, 2),
            qs: arr_i8(b, 4),
        }
    }
    fn write(&self, out: &mut [u8]) {
        wr16(out, 0, self.d);
        wr16(out, 2, self.s);
        put_i8(out, 4, &self.qs);
    }
}

impl Block for BlockQ2K {
    const QK: usize = QK_K;
    const SIZE: usize = 84;
    fn read(b: &[u8]) -> Self {
        Self {
            scales: arr(b, 0),
            qs: arr(b, 16),
            d: rd16(b, 80),
            dmin: rd16(b, 82),
        }
    }
    fn write(&self, out: &mut [u8]) {
        out[0..16].copy_from_slice(&self.scales);
        out[16..80].copy_from_slice(&self.qs);
        wr16(out, 80, self.d);
        wr16(out, 82, self.dmin);
    }
}

impl Block for BlockQ3K {
    const QK: usize = QK_K;
    const SIZE: usize = 110;
    fn read(b: &[u8]) -> Self {
        Self {
            hmask: arr(b, 0),
            qs: arr(b, 32),
            scales: arr(b, 96),
            d: rd16(b, 108),
        }
    }
    fn write(&self, out: &mut [u8]) {
        out[0..32].copy_from_slice(&self.hmask);
        out[32..96].copy_from_slice(&self.qs);
        out[96..108].copy_from_slice(&self.scales);
        wr16(out, 108, self.d);
    }
}

impl Block for BlockQ4K {
    const QK: usize = QK_K;
    const SIZE: usize = 144;
    fn read(b: &[u8]) -> Self {
        Self {
            d: rd16(b, 0),
            dmin: rd16(b, 2),
            scales: arr(b, 4),
            qs: arr(b, 16),
        }
    }
    fn write(&self, out: &mut [u8]) {
        wr16(out, 0, self.d);
        wr16(out, 2, self.dmin);
        out[4..16].copy_from_slice(&self.scales);
        out[16..144].copy_from_slice(&self.qs);
    }
}

impl Block for BlockQ5K {
    const QK: usize = QK_K;
    const SIZE: usize = 176;
    fn read(b: &[u8]) -> Self {
        Self {
            d: rd16(b, 0),
            dmin: rd16(b, 2),
            scales: arr(b, 4),
            qh: arr(b, 16),
            qs: arr(b, 48),
        }
    }
    fn write(&self, out: &mut [u8]) {
        wr16(out, 0, self.d);
        wr16(out, 2, self.dmin);
        out[4..16].copy_from_slice(&self.scales);
        out[16..48].copy_from_slice(&self.qh);
        out[48..176].copy_from_slice(&self.qs);
    }
}

impl Block for BlockQ6K {
    const QK: usize = QK_K;
    const SIZE: usize = 210;
    fn read(b: &[u8]) -> Self {
        Self {
            ql: arr(b, 0),
            qh: arr(b, 128),
            scales: arr_i8(b, 192),
            d: rd16(b, 208),
        }
    }
    fn write(&self, out: &mut [u8]) {
        out[0..128].copy_from_slice(&self.ql);
        out[128..192].copy_from_slice(&self.qh);
        put_i8(out, 192, &self.scales);
        wr16(out, 208, self.d);
    }
}

impl Block for BlockQ8K {
    const QK: usize = QK_K;
    const SIZE: usize = 292;
    fn read(b: &[u8]) -> Self {
        let mut bsums = [0i16; 16];
        for (j, s) in bsums.iter_mut().enumerate() {
            *s = rd16(b, 260 + 2 * j) as i16;
        }
        Self {
            d: f32::from_le_bytes(arr(b, 0)),
            qs: arr_i8(b, 4),
            bsums,
        }
    }
    fn write(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&self.d.to_le_bytes());
        put_i8(out, 4, &self.qs);
        for (j, s) in self.bsums.iter().enumerate() {
            wr16(out, 260 + 2 * j, *s as u16);
        }
    }
}

/// Quantizes `src` block by block with `f` and writes the blocks to `dst`.
pub(crate) fn quantize_blocks<B: Block>(
    src: &[f32],
    dst: &mut [u8],
    mut f: impl FnMut(&[f32]) -> B,
) {
    assert_eq!(
        src.len() % B::QK,
        0,
        "row length must be a multiple of the block size"
    );
    let nb = src.len() / B::QK;
    assert!(dst.len() >= nb * B::SIZE, "destination too small");
    for (x, out) in src.chunks_exact(B::QK).zip(dst.chunks_exact_mut(B::SIZE)) {
        f(x).write(out);
    }
}

/// Reads `src` block by block and expands each block into `dst` with `f`.
pub(crate) fn dequantize_blocks<B: Block>(
    src: &[u8],
    dst: &mut [f32],
    mut f: impl FnMut(&B, &mut [f32]),
) {
    assert_eq!(
        dst.len() % B::QK,
        0,
        "row length must be a multiple of the block size"
    );
    let nb = dst.len() / B::QK;
    assert!(src.len() >= nb * B::SIZE, "source too small");
    for (b, y) in src.chunks_exact(B::SIZE).zip(dst.chunks_exact_mut(B::QK)) {
        f(&B::read(b), y);
    }
}
