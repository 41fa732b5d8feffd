//! The per-type conversion and dot-product functions the kernels use: which type a matmul's
//! other operand is converted to (`vec_dot_type`), the conversion into it, and the dot product.
//! Float types are handled here; quantized types come from the quantization modules.

use crate::fp;
use ggml::Type;

#[derive(Clone, Copy)]
pub(crate) struct MmTraits {
    pub vec_dot_type: Type,
    pub from_float: fn(&[f32], &mut [u8]),
    pub vec_dot: fn(usize, &[u8], &[u8]) -> f32,
}

fn f32_from_float(src: &[f32], dst: &mut [u8]) {
    for (d, s) in dst.chunks_exact_mut(4).zip(src) {
        d.copy_from_slice(&s.to_le_bytes());
    }
}

fn f16_from_float(src: &[f32], dst: &mut [u8]) {
    for (d, s) in dst.chunks_exact_mut(2).zip(src) {
        d.copy_from_slice(&fp::f32_to_f16(*s).to_le_bytes());
    }
}

fn bf16_from_float(src: &[f32], dst: &mut [u8]) {
    for (d, s) in dst.chunks_exact_mut(2).zip(src) {
        d.copy_from_slice(&fp::f32_to_bf16(*s).to_le_bytes());
    }
}

/// Reinterprets bytes as a slice of T when aligned; None otherwise.
fn cast<T: Copy>(b: &[u8]) -> Option<&[T]> {
    let sz = std::mem::size_of::<T>();
    if (b.as_ptr() as usize) % std::mem::align_of::<T>() != 0 || b.len() % sz != 0 {
        return None;
    }
    // SAFETY: alignment and length were checked; T is a plain number type.
    Some(unsafe { std::slice::from_raw_parts(b.as_ptr() as *const T, b.len() / sz) })
}

pub(crate) fn dot_f32(n: usize, x: &[u8], y: &[u8]) -> f32 {
    match (cast::<f32>(&x[..n * 4]), cast::<f32>(&y[..n * 4])) {
        (Some(a), Some(b)) => crate::simd::dot_f32(a, b),
        _ => {
            let mut s = 0.0f64;
            for i in 0..n {
                let a = f32::from_le_bytes(x[i * 4..i * 4 + 4].try_into().unwrap_or([0; 4]));
                let b = f32::from_le_bytes(y[i * 4..i * 4 + 4].try_into().unwrap_or([0; 4]));
                s += (a * b) as f64;
            }
            s as f32
        }
    }
}

fn dot_f16(n: usize, x: &[u8], y: &[u8]) -> f32 {
    match (cast::<u16>(&x[..n * 2]), cast::<u16>(&y[..n * 2])) {
        (Some(a), Some(b)) => crate::simd::dot_f16(a, b),
        _ => {
            let mut s = 0.0f64;
            for i in 0..n {
                let a = fp::f16_to_f32(u16::from_le_bytes([x[2 * i], x[2 * i + 1]]));
                let b = fp::f16_to_f32(u16::from_le_bytes([y[2 * i], y[2 * i + 1]]));
                s += (a * b) as f64;
            }
            s as f32
        }
    }
}

fn dot_bf16(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut s = 0.0f64;
    for i in 0..n {
        let a = fp::bf16_to_f32(u16::from_le_bytes([x[2 * i], x[2 * i + 1]]));
        let b = fp::bf16_to_f32(u16::from_le_bytes([y[2 * i], y[2 * i + 1]]));
        s += (a * b) as f64;
    }
    s as f32
}

/// A quantized weight row times an f32 row: the weight row is expanded to f32 first. This is
/// the path for types without a dedicated dot product.
fn dot_dequant<const T: u32>(n: usize, x: &[u8], y: &[u8]) -> f32 {
    thread_local! {
        static ROW: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let Some(ty) = Type::from_id(T) else {
        return f32::NAN;
    };
    ROW.with(|r| {
        let mut row = r.borrow_mut();
        row.resize(n, 0.0);
        ggml::quants::dequantize_row(ty, &x[..ty.row_size(n as i64)], &mut row);
        let yb = &y[..n * 4];
        match cast::<f32>(yb) {
            Some(yf) => crate::simd::dot_f32(&row, yf),
            None => {
                let yf: Vec<f32> = yb
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                crate::simd::dot_f32(&row, &yf)
            }
        }
    })
}

macro_rules! dequant_traits {
    ($ty:expr, $($t:ident),*) => {
        match $ty {
            $(Type::$t => Some(MmTraits {
                vec_dot_type: Type::F32,
                from_float: f32_from_float,
                vec_dot: dot_dequant::<{ Type::$t as u32 }>,
            }),)*
            _ => None,
        }
    };
}

pub(crate) fn mm_traits(ty: Type) -> Option<MmTraits> {
    match ty {
        Type::F32 => Some(MmTraits {
            vec_dot_type: Type::F32,
            from_float: f32_from_float,
            vec_dot: dot_f32,
        }),
        Type::F16 => Some(MmTraits {
            vec_dot_type: Type::F16,
            from_float: f16_from_float,
            vec_dot: dot_f16,
        }),
        Type::Bf16 => Some(MmTraits {
            vec_dot_type: Type::Bf16,
            from_float: bf16_from_float,
            vec_dot: dot_bf16,
        }),
        _ => dequant_traits!(
            ty, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2K, Q3K, Q4K, Q5K, Q6K, Q8K, Iq4Nl
        ),
    }
}

/// Whether rows of `ty` can be turned into f32.
pub(crate) fn can_dequantize(ty: Type) -> bool {
    ggml::quants::is_supported(ty)
}

/// Whether f32 rows can be written as `ty`.
pub(crate) fn can_quantize(ty: Type) -> bool {
    ggml::quants::is_supported(ty)
}

/// Converts one row of blocks to f32.
pub(crate) fn dequantize_row(ty: Type, src: &[u8], dst: &mut [f32]) {
    ggml::quants::dequantize_row(ty, src, dst)
}

/// Converts one f32 row to `ty` (the CPU backend's from_float, as used by CPY and SET_ROWS).
pub(crate) fn quantize_row(ty: Type, src: &[f32], dst: &mut [u8]) {
    ggml::quants::quantize_row_ref(ty, src, dst)
}
