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
    let buf = p.scratch(ne0 * 2 + n_dims);
    let (x, rest) = buf.split_at_mut(ne0);
    let (y, cache) = rest.split_at_mut(ne0);
    // F32 rows of adjacent elements in and out: rotated in place of the copies
    let direct = a.ty == ggml::Type::F32 && d.ty == ggml::Type::F32 && a.nb[0] == 4 && d.nb[0] == 4;
    let mut cached: Option<(usize, usize)> = None;
    // the row's indices, stepped rather than divided out of r every row
    let (mut i1, mut i2, mut i3) = a.unflat_row(r0);
    for _ in r0..r1 {
        if cached != Some((i2, i3)) {
            // SAFETY: positions has ne2 entries (checked by the constructor).
            let position = unsafe { load_index(pos.ty, pos.ptr(i2, 0, 0, 0)) } as f32;
            let mut theta = position;
            for i0 in (0..n_dims).step_by(2) {
                // SAFETY: freq factors hold n_dims / 2 values (checked by the constructor).
                let f = ff.map_or(1.0, |f| unsafe { f.get_f32(i0 / 2, 0, 0, 0) });
                let (c, s) = yarn(
                    theta / f,
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
            cached = Some((i2, i3));
        }
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
