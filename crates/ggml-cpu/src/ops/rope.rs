//! ROPE, normal (adjacent pairs) and NeoX (halves), with ggml's YaRN: the rotation angle mixes
//! interpolated and extrapolated frequencies by a ramp over the correction dims.

use super::{Node, Params};
use crate::tref::{load_index, split};
use ggml::op::rope_mode;
use ggml::RopeParams;

/// ggml_rope_yarn_corr_dim
fn corr_dim(n_dims: i32, n_ctx_orig: i32, n_rot: f32, base: f32) -> f32 {
    n_dims as f32 * (n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln()
        / (2.0 * base.ln())
}

/// ggml_rope_yarn_corr_dims
pub(crate) fn corr_dims(
    n_dims: i32,
    n_ctx_orig: i32,
    freq_base: f32,
    beta_fast: f32,
    beta_slow: f32,
) -> [f32; 2] {
    let start = corr_dim(n_dims, n_ctx_orig, beta_fast, freq_base).floor();
    let end = corr_dim(n_dims, n_ctx_orig, beta_slow, freq_base).ceil();
    [start.max(0.0), end.min((n_dims - 1) as f32)]
}

fn yarn_ramp(low: f32, high: f32, i0: usize) -> f32 {
    let y = ((i0 / 2) as f32 - low) / (high - low).max(0.001);
    1.0 - y.clamp(0.0, 1.0).min(1.0)
}

/// (cos, sin) of one pair, scaled by mscale (ggml's rope_yarn).
fn yarn(
    theta_extrap: f32,
    freq_scale: f32,
    corr: [f32; 2],
    i0: usize,
    ext_factor: f32,
    mut mscale: f32,
) -> (f32, f32) {
    let theta_interp = freq_scale * theta_extrap;
    let mut theta = theta_interp;
    if ext_factor != 0.0 {
        let ramp_mix = yarn_ramp(corr[0], corr[1], i0) * ext_factor;
        theta = theta_interp * (1.0 - ramp_mix) + theta_extrap * ramp_mix;
        mscale *= 1.0 + 0.1 * (1.0 / freq_scale).ln();
    }
    let (sin, cos) = sin_cos(theta);
    (cos * mscale, sin * mscale)
}

/// sinf and cosf of one angle in one call: llama.cpp's build calls glibc's sincosf there (GCC
/// merges the pair), which gives sinf's and cosf's bits (checked on 22 million angles) at
/// about the cost of one of them.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn sin_cos(x: f32) -> (f32, f32) {
    unsafe extern "C" {
        fn sincosf(x: f32, sin: *mut f32, cos: *mut f32);
    }
    let (mut s, mut c) = (0.0f32, 0.0f32);
    // SAFETY: glibc's sincosf writes the two floats it is given and nothing else.
    unsafe { sincosf(x, &mut s, &mut c) };
    (s, c)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn sin_cos(x: f32) -> (f32, f32) {
    (x.sin(), x.cos())
}

/// The (cos, sin) rows of the positions one thread has met in one graph's computation, per
/// set of angle parameters: the ROPE nodes of a graph with the same parameters (the query and
/// key of every layer) take a position's row from here instead of calling sincosf for it
/// again. A row is a function of the position's value and the parameters alone (the same
/// calls in the same order), so the bits are the same; made per computation
/// (`backend::compute`), so it holds one batch's positions.
#[derive(Default)]
pub(crate) struct RopeCache {
    sets: Vec<CacheSet>,
}

/// The rows of one set of parameters.
struct CacheSet {
    /// n_dims, n_ctx_orig and the bits of the float parameters and freq factors
    key: Vec<u32>,
    /// position bits -> start of its n_dims values in `vals`
    rows: std::collections::HashMap<u32, usize>,
    vals: Vec<f32>,
}

/// Parameter sets kept at once (Gemma 3 alternates two); a new one past these starts over.
const CACHE_SETS: usize = 4;

impl RopeCache {
    fn set(&mut self, key: Vec<u32>) -> &mut CacheSet {
        let at = match self.sets.iter().position(|s| s.key == key) {
            Some(i) => i,
            None => {
                if self.sets.len() >= CACHE_SETS {
                    self.sets.clear();
                }
                self.sets.push(CacheSet {
                    key,
                    rows: Default::default(),
                    vals: Vec::new(),
                });
                self.sets.len() - 1
            }
        };
        &mut self.sets[at]
    }
}

impl CacheSet {
    /// The start of `position`'s row of `n` values, filled by `fill` the first time.
    fn row(&mut self, position: f32, n: usize, fill: impl FnOnce(&mut [f32])) -> usize {
        if let Some(&at) = self.rows.get(&position.to_bits()) {
            return at;
        }
        let at = self.vals.len();
        self.vals.resize(at + n, 0.0);
        fill(&mut self.vals[at..]);
        self.rows.insert(position.to_bits(), at);
        at
    }
}

pub(crate) fn rope(p: &mut Params, n: &Node, rp: &RopeParams) {
    let (a, pos, d) = (n.s(0), n.s(1), n.dst);
    let ff = n.src[2];
    let ne0 = a.ne[0];
    // the rotated values start at n_offs (ggml_rope_set_offset); support checks the bounds
    let off = (rp.n_offs.max(0) as usize).min(ne0);
    let n_dims = (rp.n_dims.max(0) as usize).min(ne0 - off);
    let theta_scale = rp.freq_base.powf(-2.0 / rp.n_dims as f32);
    let corr = corr_dims(
        rp.n_dims,
        rp.n_ctx_orig,
        rp.freq_base,
        rp.beta_fast,
        rp.beta_slow,
    );
    let neox = rp.mode & rope_mode::NEOX != 0;
    let (r0, r1) = split(a.nrows(), p.ith, p.nth);
    // SAFETY: freq factors hold n_dims / 2 values (checked by the constructor).
    let factor = |i: usize| ff.map_or(1.0, |f| unsafe { f.get_f32(i, 0, 0, 0) });
    let mut key = vec![rp.n_dims as u32, rp.n_ctx_orig as u32, n_dims as u32];
    key.extend(
        [
            rp.freq_base,
            rp.freq_scale,
            rp.ext_factor,
            rp.attn_factor,
            rp.beta_fast,
            rp.beta_slow,
        ]
        .map(f32::to_bits),
    );
    if ff.is_some() {
        key.extend((0..n_dims / 2).map(|i| factor(i).to_bits()));
    }
    let (buf, cache) = p.scratch_and_rope(ne0 * 2);
    let set = cache.set(key);
    let (x, y) = buf.split_at_mut(ne0);
    // F32 rows of adjacent elements in and out: rotated in place of the copies
    let direct = a.ty == ggml::Type::F32 && d.ty == ggml::Type::F32 && a.nb[0] == 4 && d.nb[0] == 4;
    let mut cached: Option<(usize, usize)> = None;
    let mut row = 0;
    // the row's indices, stepped rather than divided out of r every row
    let (mut i1, mut i2, mut i3) = a.unflat_row(r0);
    for _ in r0..r1 {
        if cached != Some((i2, i3)) {
            // SAFETY: positions has ne2 entries (checked by the constructor).
            let position = unsafe { load_index(pos.ty, pos.ptr(i2, 0, 0, 0)) } as f32;
            row = set.row(position, n_dims, |cache| {
                let mut theta = position;
                for i0 in (0..n_dims).step_by(2) {
                    let (c, s) = yarn(
                        theta / factor(i0 / 2),
                        rp.freq_scale,
                        corr,
                        i0,
                        rp.ext_factor,
                        rp.attn_factor,
                    );
                    cache[i0] = c;
                    cache[i0 + 1] = s;
                    theta *= theta_scale;
                }
            });
            cached = Some((i2, i3));
        }
        let cache = &set.vals[row..row + n_dims];
        // SAFETY: dst has a's shape; this thread owns row r. A direct row holds ne0 adjacent
        // f32 in a and in dst (an in-place ROPE reads each pair before writing it).
        unsafe {
            if direct {
                let src = a.row_ptr(i1, i2, i3) as *const f32;
                let dst = d.row_ptr(i1, i2, i3) as *mut f32;
                if !std::ptr::eq(src, dst) {
                    std::ptr::copy_nonoverlapping(src, dst, off);
                    std::ptr::copy_nonoverlapping(
                        src.add(off + n_dims),
                        dst.add(off + n_dims),
                        ne0 - off - n_dims,
                    );
                }
                x[..n_dims].copy_from_slice(std::slice::from_raw_parts(src.add(off), n_dims));
                let out = std::slice::from_raw_parts_mut(dst.add(off), n_dims);
                rotate(&x[..n_dims], out, cache, n_dims, neox);
            } else {
                a.load_row(i1, i2, i3, x);
                y.copy_from_slice(x);
                rotate(&x[off..], &mut y[off..], cache, n_dims, neox);
                d.store_row(i1, i2, i3, y);
            }
        }
        (i1, i2, i3) = a.next_row((i1, i2, i3));
    }
}

/// Rotates the first n_dims values of x into y by the cached (cos, sin) pairs.
fn rotate(x: &[f32], y: &mut [f32], cache: &[f32], n_dims: usize, neox: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        let lanes_fit = if neox {
            n_dims.is_multiple_of(32)
        } else {
            n_dims.is_multiple_of(16)
        };
        if lanes_fit && crate::simd::features::cpu().avx512f {
            // SAFETY: AVX-512F is available; x, y and cache hold n_dims values (the caller).
            unsafe { rotate_512(x, y, cache, n_dims, neox) };
            return;
        }
        if crate::simd::has_avx2_fma() {
            // SAFETY: FMA is available.
            unsafe { rotate_fma(x, y, cache, n_dims, neox) };
            return;
        }
    }
    rotate_impl(x, y, cache, n_dims, neox)
}

/// `rotate` with hardware FMA (mul_add is otherwise a libm call per element).
///
/// # Safety
/// FMA is available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn rotate_fma(x: &[f32], y: &mut [f32], cache: &[f32], n_dims: usize, neox: bool) {
    rotate_impl(x, y, cache, n_dims, neox)
}

/// `rotate_impl` sixteen values at a time: each value the same fused multiply-add of the same
/// rounded product (the negated one's sign flipped as a bit, as `-(x1 * s)` does).
///
/// # Safety
/// AVX-512F is available; x, y and cache hold n_dims values, n_dims a multiple of 16 (of 32
/// for `neox`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn rotate_512(x: &[f32], y: &mut [f32], cache: &[f32], n_dims: usize, neox: bool) {
    use std::arch::x86_64::*;
    assert!(x.len() >= n_dims && y.len() >= n_dims && cache.len() >= n_dims);
    let (px, py, pc) = (x.as_ptr(), y.as_mut_ptr(), cache.as_ptr());
    let neg =
        |v: __m512, m: __m512i| _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), m));
    // SAFETY (every load and store below): offsets stay below n_dims (asserted above).
    unsafe {
        if neox {
            let half = n_dims / 2;
            let sign = _mm512_set1_epi32(i32::MIN);
            let even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
            let odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
            for i in (0..half).step_by(16) {
                let (lo, hi) = (
                    _mm512_loadu_ps(pc.add(2 * i)),
                    _mm512_loadu_ps(pc.add(2 * i + 16)),
                );
                let c = _mm512_permutex2var_ps(lo, even, hi);
                let s = _mm512_permutex2var_ps(lo, odd, hi);
                let (x0, x1) = (
                    _mm512_loadu_ps(px.add(i)),
                    _mm512_loadu_ps(px.add(i + half)),
                );
                let y0 = _mm512_fmadd_ps(x0, c, neg(_mm512_mul_ps(x1, s), sign));
                let y1 = _mm512_fmadd_ps(x0, s, _mm512_mul_ps(x1, c));
                _mm512_storeu_ps(py.add(i), y0);
                _mm512_storeu_ps(py.add(i + half), y1);
            }
        } else {
            // even lanes: x0 c - x1 s, odd lanes: x0 s + x1 c, with cache = [c, s] pairs
            let sign = _mm512_set_epi32(
                0,
                i32::MIN,
                0,
                i32::MIN,
                0,
                i32::MIN,
                0,
                i32::MIN,
                0,
                i32::MIN,
                0,
                i32::MIN,
                0,
                i32::MIN,
                0,
                i32::MIN,
            );
            for i in (0..n_dims).step_by(16) {
                let (xv, cs) = (_mm512_loadu_ps(px.add(i)), _mm512_loadu_ps(pc.add(i)));
                let xe = _mm512_permute_ps::<0xA0>(xv);
                let xo = _mm512_permute_ps::<0xF5>(xv);
                let sc = _mm512_permute_ps::<0xB1>(cs);
                let p = neg(_mm512_mul_ps(xo, sc), sign);
                _mm512_storeu_ps(py.add(i), _mm512_fmadd_ps(xe, cs, p));
            }
        }
    }
}

#[inline(always)]
fn rotate_impl(x: &[f32], y: &mut [f32], cache: &[f32], n_dims: usize, neox: bool) {
    let half = n_dims / 2;
    for i0 in (0..n_dims).step_by(2) {
        let (c, s) = (cache[i0], cache[i0 + 1]);
        let (j0, j1) = if neox {
            (i0 / 2, i0 / 2 + half)
        } else {
            (i0, i0 + 1)
        };
        let (x0, x1) = (x[j0], x[j1]);
        // ggml's build contracts these into one fused multiply-add each (GCC's default
        // -ffp-contract=fast): the first product fused, the second rounded
        y[j0] = x0.mul_add(c, -(x1 * s));
        y[j1] = x0.mul_add(s, x1 * c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sixteen-lane rotation gives the scalar one's bits, both modes, with signed zeros.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn rotate_512_equals_the_scalar_rotation() {
        if !crate::simd::features::cpu().avx512f || !crate::simd::has_avx2_fma() {
            eprintln!("skipped: this CPU lacks AVX-512F");
            return;
        }
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
        };
        for n_dims in [32, 64, 128, 256] {
            for neox in [false, true] {
                let mut x: Vec<f32> = (0..n_dims).map(|_| next()).collect();
                let mut cache: Vec<f32> = (0..n_dims).map(|_| next()).collect();
                (x[3], x[5], cache[0], cache[7]) = (0.0, -0.0, -0.0, 0.0);
                let mut want = vec![0.0f32; n_dims];
                // SAFETY: FMA is available (checked above).
                unsafe { rotate_fma(&x, &mut want, &cache, n_dims, neox) };
                let mut got = vec![0.0f32; n_dims];
                // SAFETY: AVX-512F is available; every slice holds n_dims values.
                unsafe { rotate_512(&x, &mut got, &cache, n_dims, neox) };
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "n_dims {n_dims}, neox {neox}");
            }
        }
    }
}
