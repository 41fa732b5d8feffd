//! Random weights, generated in parallel chunks from a seed so that the same seed always gives
//! the same file (whatever the thread count), and converted to the tensor's type.

use rayon::prelude::*;

/// Elements generated from one seed; the unit of parallel work.
const CHUNK: usize = 1 << 16;

/// How a tensor's values are drawn.
#[derive(Clone, Copy, Debug)]
pub enum Init {
    /// Normal with mean 0 and this standard deviation.
    Normal(f32),
    /// 1 + 0.1 * normal, like the norms of make-tiny-model.py.
    Norm,
}

/// SplitMix64: tiny, fast and good enough for weights that only need to look random.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// An approximately standard normal number from one 64-bit draw: the sum of four 16-bit
/// uniforms (Irwin-Hall), centred and scaled to unit variance. Several times faster than
/// Box-Muller, which matters for multi-gigabyte models.
fn normal(bits: u64) -> f32 {
    const MEAN: f32 = 2.0 * 65535.0;
    // sqrt(4 * (65536^2 - 1) / 12)
    const STD: f32 = 37837.23;
    let sum = (bits & 0xFFFF) + ((bits >> 16) & 0xFFFF) + ((bits >> 32) & 0xFFFF) + (bits >> 48);
    (sum as f32 - MEAN) / STD
}

/// Fill `out` with the values of elements `start..start + out.len()` of tensor `tensor`;
/// `start` must be a multiple of CHUNK.
pub fn fill(seed: u64, tensor: u64, init: Init, start: u64, out: &mut [f32]) {
    debug_assert_eq!(start % CHUNK as u64, 0);
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(i, chunk)| {
            let chunk_index = start / CHUNK as u64 + i as u64;
            let mut key = SplitMix64(seed ^ tensor.wrapping_mul(0xD1B5_4A32_D192_ED03));
            let mut rng = SplitMix64(key.next() ^ chunk_index.wrapping_mul(0x8CB9_2BA7_2F3D_8DD7));
            match init {
                Init::Normal(std) => chunk.iter_mut().for_each(|x| *x = normal(rng.next()) * std),
                Init::Norm => chunk
                    .iter_mut()
                    .for_each(|x| *x = 1.0 + 0.1 * normal(rng.next())),
            }
        });
}

/// Elements generated per step when streaming a tensor (a multiple of CHUNK).
pub const STEP: usize = CHUNK * 64;

/// The one place that knows how values become bytes of a type: float types directly, the
/// others through ggml's quantizers (as `ggml_quantize_chunk` without an importance matrix).
/// `src` holds whole rows of `n_per_row` elements.
pub fn convert(ty: ggml::Type, src: &[f32], n_per_row: usize) -> Result<Vec<u8>, String> {
    fn each<const N: usize>(src: &[f32], f: impl Fn(f32) -> [u8; N] + Sync) -> Vec<u8> {
        let mut out = vec![0u8; src.len() * N];
        out.par_chunks_mut(CHUNK * N)
            .zip(src.par_chunks(CHUNK))
            .for_each(|(o, s)| {
                for (d, &x) in o.chunks_exact_mut(N).zip(s) {
                    d.copy_from_slice(&f(x));
                }
            });
        out
    }
    match ty {
        ggml::Type::F32 => Ok(each(src, f32::to_le_bytes)),
        ggml::Type::F16 => Ok(each(src, |x| half::f16::from_f32(x).to_le_bytes())),
        ggml::Type::Bf16 => Ok(each(src, |x| half::bf16::from_f32(x).to_le_bytes())),
        ty if ty.is_quantized() && ggml::quants::is_supported(ty) => {
            if n_per_row == 0
                || !n_per_row.is_multiple_of(ty.block_size())
                || !src.len().is_multiple_of(n_per_row)
            {
                return Err(format!(
                    "rows of {n_per_row} elements cannot be stored as {} (blocks of {})",
                    ty.name(),
                    ty.block_size()
                ));
            }
            let row_size = ggml::quants::bytes_for(ty, n_per_row);
            let mut out = vec![0u8; src.len() / n_per_row * row_size];
            // Whole rows per task; each row's bytes depend on that row only.
            let rows_per_task = (CHUNK / n_per_row).max(1);
            out.par_chunks_mut(rows_per_task * row_size)
                .zip(src.par_chunks(rows_per_task * n_per_row))
                .for_each(|(o, s)| {
                    let nrows = s.len() / n_per_row;
                    ggml::quants::quantize_chunk(ty, s, o, 0, nrows, n_per_row, None);
                });
            Ok(out)
        }
        other => Err(format!("type {} cannot hold weights", other.name())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_has_unit_variance() {
        let mut v = vec![0f32; 1 << 18];
        fill(7, 3, Init::Normal(1.0), 0, &mut v);
        let n = v.len() as f64;
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
        let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.02, "var {var}");
    }

    #[test]
    fn values_depend_on_seed_and_tensor_only() {
        let mut whole = vec![0f32; CHUNK * 3];
        fill(1, 2, Init::Norm, 0, &mut whole);
        let mut tail = vec![0f32; CHUNK * 2];
        fill(1, 2, Init::Norm, CHUNK as u64, &mut tail);
        assert_eq!(&whole[CHUNK..], &tail[..]);
        let mut other = vec![0f32; CHUNK];
        fill(1, 3, Init::Norm, 0, &mut other);
        assert_ne!(&whole[..CHUNK], &other[..]);
        fill(2, 2, Init::Norm, 0, &mut other);
        assert_ne!(&whole[..CHUNK], &other[..]);
    }

    #[test]
    fn converts_to_each_float_type() {
        assert_eq!(
            convert(ggml::Type::F32, &[1.0], 1).unwrap(),
            1.0f32.to_le_bytes()
        );
        assert_eq!(
            convert(ggml::Type::F16, &[1.0, -2.0], 2).unwrap(),
            [0x00, 0x3C, 0x00, 0xC0]
        );
        assert_eq!(convert(ggml::Type::Bf16, &[1.0], 1).unwrap(), [0x80, 0x3F]);
        assert!(convert(ggml::Type::Q4_0, &[0.0; 16], 16).is_err());
        assert!(convert(ggml::Type::I64, &[0.0; 4], 4).is_err());
    }

    #[test]
    fn quantizes_like_ggml_row_by_row() {
        let mut src = vec![0f32; 3 * 256];
        fill(9, 0, Init::Normal(1.0), 0, &mut src);
        for ty in [ggml::Type::Q8_0, ggml::Type::Q4K, ggml::Type::Iq4Nl] {
            let ours = convert(ty, &src, 256).unwrap();
            let mut want = vec![0u8; ggml::quants::bytes_for(ty, src.len())];
            ggml::quants::quantize_chunk(ty, &src, &mut want, 0, 3, 256, None);
            assert_eq!(ours, want, "{ty}");
            let mut back = vec![0f32; src.len()];
            ggml::quants::dequantize_row(ty, &ours, &mut back);
            let err = src
                .iter()
                .zip(&back)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(err < 0.6, "{ty}: max error {err}");
        }
    }
}
