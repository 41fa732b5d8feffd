//! IQ weights in the float order of llama.cpp's tiled matmul (ggml-cpu/tiled), which its
//! x86 build runs for IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S and IQ1_M weights
//! times batches of 8 or more columns (instead of the dot product): per 256-value block the
//! exact integer sum S of codes times activations (IQ1 codes as 8 * grid + delta), then
//! r = f32(S) * dx with dx the block's d times the type's constant (1/8 for IQ2 and IQ1, 1/4
//! for IQ3_XXS), and acc = fma(r, dy, acc) in block order. The integer parts come from the
//! same AVX2 code as the dot products (x86_iq*).

use super::scalar::check;
use super::x86::{h2f_f16c, hsum_epi32};
use super::x86_iq2::rdf32;
use super::{x86_iq as i4, x86_iq1 as i1, x86_iq2 as i2, x86_iq3 as i3, VecDotFn};
use ggml::Type;

/// The tiled-order function of `ty` (same arguments as its dot product), or None for a type
/// llama.cpp's tiled path does not take.
pub(crate) fn kernel(ty: Type) -> Option<VecDotFn> {
    if !super::x86::has_avx2() {
        return None;
    }
    Some(match ty {
        Type::Iq4Xs if crate::simd::features::cpu().avx512_iq4_xs() => iq4_xs_512,
        Type::Iq4Xs => iq4_xs,
        Type::Iq2Xxs => iq2_xxs,
        Type::Iq2Xs => iq2_xs,
        Type::Iq2S => iq2_s,
        Type::Iq3Xxs => iq3_xxs,
        Type::Iq3S => iq3_s,
        Type::Iq1S => iq1_s,
        Type::Iq1M => iq1_m,
        _ => return None,
    })
}

/// (S, dx) of one block.
type Part = unsafe fn(*const u8, *const u8) -> (i32, f32);

/// # Safety
/// AVX2, FMA and F16C must be available; `x` holds nb blocks of `xs` bytes, `y` nb Q8_K
/// blocks, and `part` reads one block of each.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn run(nb: usize, x: &[u8], xs: usize, y: &[u8], part: Part) -> f32 {
    let (px, py) = (x.as_ptr(), y.as_ptr());
    let mut acc = 0.0f32;
    for i in 0..nb {
        // SAFETY: block i of both operands is within the nb blocks the caller checked.
        unsafe {
            let (bx, by) = (px.add(xs * i), py.add(292 * i));
            let (s, dx) = part(bx, by);
            let r = s as f32 * dx;
            acc = r.mul_add(rdf32(by), acc);
        }
    }
    acc
}

macro_rules! tiled {
    ($name:ident, $xs:expr, |$bx:ident, $by:ident| $body:expr) => {
        fn $name(n: usize, x: &[u8], y: &[u8]) -> f32 {
            /// # Safety
            /// AVX2, FMA and F16C must be available; both pointers cover one block.
            #[target_feature(enable = "avx2,fma,f16c")]
            unsafe fn part($bx: *const u8, $by: *const u8) -> (i32, f32) {
                // SAFETY: the caller's promise.
                unsafe { $body }
            }
            let nb = check(n, 256, x, $xs, y, 292);
            // SAFETY: `kernel` hands this out only after AVX2/FMA/F16C were detected, and
            // `check` proved that x and y hold nb blocks.
            unsafe { run(nb, x, $xs, y, part) }
        }
    };
}

tiled!(iq4_xs, 136, |bx, by| (
    hsum_epi32(i4::iq4_xs_lanes(bx, by)),
    h2f_f16c(bx)
));
// the same integers by the AVX-512 kernel's block sums (1.1B IQ4_XS pp128 -t 1 14.0-17.2 ->
// 17.8-19.1 t/s in three alternated rounds; llama.cpp's tiled kernels reuse each decoded block
// across columns and run about five times as fast: not done here)
tiled!(iq4_xs_512, 136, |bx, by| (
    super::x86_iq4_xs::block_sum(bx, by),
    h2f_f16c(bx)
));
tiled!(iq2_xxs, 66, |bx, by| (
    hsum_epi32(i2::iq2_xxs_lanes(bx, by)),
    h2f_f16c(bx) * 0.125
));
tiled!(iq2_xs, 74, |bx, by| (
    hsum_epi32(i2::iq2_xs_lanes(bx, by)),
    h2f_f16c(bx) * 0.125
));
tiled!(iq2_s, 82, |bx, by| (
    hsum_epi32(i2::iq2_s_lanes(bx, by)),
    h2f_f16c(bx) * 0.125
));
tiled!(iq3_xxs, 98, |bx, by| (
    hsum_epi32(i3::iq3_xxs_lanes(bx, by)),
    h2f_f16c(bx) * 0.25
));
tiled!(iq3_s, 110, |bx, by| (
    hsum_epi32(i3::iq3_s_lanes(bx, by)),
    h2f_f16c(bx)
));
tiled!(iq1_s, 50, |bx, by| {
    let (lanes, delta) = i1::iq1_s_lanes(bx, by);
    (8 * hsum_epi32(lanes) + delta, h2f_f16c(bx) * 0.125)
});
tiled!(iq1_m, 56, |bx, by| {
    let (grid, delta, bits) = i1::iq1_m_lanes(bx, by);
    let d = bits.to_le_bytes();
    (
        8 * hsum_epi32(grid) + hsum_epi32(delta),
        h2f_f16c(d.as_ptr()) * 0.125,
    )
});
