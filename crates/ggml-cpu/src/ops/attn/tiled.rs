//! FLASH_ATTN_EXT for batches, as ggml's CPU backend computes it when a batch has at least
//! `Q_TILE` query rows with an f32 query and f16 or f32 K and V of one type
//! (`ggml_compute_forward_flash_attn_ext_tiled`): the query stays f32, keys and values are
//! widened to f32, scores come in tiles of `KV_TILE` keys with one softmax rescale per tile,
//! and V is accumulated in f32. The single-row algorithm (query converted to f16, one
//! rescale per key, f16 accumulator) rounds differently, and the difference grows large
//! once quantized weights re-round the attention output, so batches must take this path.
//!
//! ggml processes up to `Q_TILE` rows together, but every row's arithmetic is independent of
//! its neighbours (a key tile skipped for the whole group is all -inf for each row too), so
//! rows are computed one at a time here with the same operations in the same order.

use super::super::alibi_slope;
use super::load_mask_row;
use crate::simd;
use crate::tref::TRef;
use ggml::Type;

/// Query rows ggml gathers per tile; fewer rows take the single-row path.
pub(crate) const Q_TILE: usize = 64;
/// Keys per score tile (one max / rescale per tile).
const KV_TILE: usize = 64;

/// Whether ggml would take the tiled path for these operands.
pub(crate) fn applies(q: &TRef, k: &TRef, v: &TRef) -> bool {
    q.ty == Type::F32 && matches!(k.ty, Type::F32 | Type::F16) && k.ty == v.ty && q.ne[1] >= Q_TILE
}

/// Floats of per-thread scratch `rows` needs.
pub(crate) fn scratch_len(dk: usize, dv: usize, n_kv: usize) -> usize {
    dk + dv + KV_TILE * dv + KV_TILE * dk + KV_TILE + n_kv
}

/// Scalars of one FLASH_ATTN_EXT node.
pub(crate) struct Params {
    pub scale: f32,
    pub max_bias: f32,
    pub softcap: f32,
}

/// Computes query rows `r0..r1` (flat over ne1, ne2, ne3) into `d`.
///
/// # Safety
/// The operands have the shapes FLASH_ATTN_EXT checks; this thread owns rows r0..r1 of dst;
/// `buf` holds `scratch_len` floats.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn rows(
    q: &TRef,
    k: &TRef,
    v: &TRef,
    mask: Option<TRef>,
    sinks: Option<TRef>,
    d: &TRef,
    pr: &Params,
    r0: usize,
    r1: usize,
    buf: &mut [f32],
) {
    let (dk, dv, n_kv) = (q.ne[0], v.ne[0], k.ne[1]);
    let (nq1, nq2, nq3) = (q.ne[1], q.ne[2], q.ne[3]);
    let (rk2, rk3) = (nq2 / k.ne[2], nq3 / k.ne[3]);
    let (rv2, rv3) = (nq2 / v.ne[2], nq3 / v.ne[3]);
    let softcap_on = pr.softcap != 0.0;
    let scale = if softcap_on {
        pr.scale / pr.softcap
    } else {
        pr.scale
    };
    let (qf, rest) = buf.split_at_mut(dk);
    let (acc, rest) = rest.split_at_mut(dv);
    let (v32, rest) = rest.split_at_mut(KV_TILE * dv);
    let (k32, rest) = rest.split_at_mut(KV_TILE * dk);
    let (kq, rest) = rest.split_at_mut(KV_TILE);
    let mrow = &mut rest[..if mask.is_some() { n_kv } else { 0 }];

    for ir in r0..r1 {
        let iq3 = ir / (nq2 * nq1);
        let iq2 = (ir - iq3 * nq2 * nq1) / nq1;
        let iq1 = ir - iq3 * nq2 * nq1 - iq2 * nq1;
        let (ik2, ik3) = (iq2 / rk2, iq3 / rk3);
        let (iv2, iv3) = (iq2 / rv2, iq3 / rv3);
        let slope = alibi_slope(pr.max_bias, nq2, iq2);

        // SAFETY: (caller) every row read below exists; dst row (iq2, iq1, iq3) is ours.
        unsafe {
            q.load_row(iq1, iq2, iq3, qf);
            if let Some(m) = &mask {
                load_mask_row(m, iq1, iq2, iq3, slope, mrow);
            }
            let mut s_sum = 0.0f32;
            let mut m_max = f32::NEG_INFINITY;
            acc.fill(0.0);
            let mut ic = 0;
            while ic < n_kv {
                let kv_tile = KV_TILE.min(n_kv - ic);
                let mtile = mrow.get(ic..ic + kv_tile);
                if mtile.is_some_and(|t| t.iter().all(|&x| x == f32::NEG_INFINITY)) {
                    ic += KV_TILE;
                    continue;
                }
                for tk in 0..kv_tile {
                    k.load_row(ic + tk, ik2, ik3, &mut k32[tk * dk..(tk + 1) * dk]);
                }
                // scores: one fused multiply-add per element in K order (ggml's simd_gemm),
                // then scale, softcap, padding and mask as separate roundings
                for (tk, o) in kq.iter_mut().enumerate() {
                    if tk >= kv_tile {
                        *o = f32::NEG_INFINITY;
                        continue;
                    }
                    let kr = &k32[tk * dk..(tk + 1) * dk];
                    let mut s = 0.0f32;
                    for (&a, &b) in qf.iter().zip(kr) {
                        s = a.mul_add(b, s);
                    }
                    s *= scale;
                    if softcap_on {
                        s = s.tanh() * pr.softcap;
                    }
                    if let Some(mt) = mtile {
                        s += mt[tk];
                    }
                    *o = s;
                }
                let tile_max = kq
                    .iter()
                    .fold(f32::NEG_INFINITY, |m, &x| if m > x { m } else { x });
                if tile_max == f32::NEG_INFINITY {
                    ic += KV_TILE;
                    continue;
                }
                let m_new = m_max.max(tile_max);
                if m_new > m_max {
                    let ms = (m_max - m_new).exp();
                    for a in acc.iter_mut() {
                        *a *= ms;
                    }
                    s_sum *= ms;
                }
                m_max = m_new;
                s_sum = (s_sum as f64 + exp_sum(kq, m_new)) as f32;

                for tk in 0..kv_tile {
                    v.load_row(ic + tk, iv2, iv3, &mut v32[tk * dv..(tk + 1) * dv]);
                }
                for tk in 0..kv_tile {
                    let w = kq[tk];
                    for (a, &x) in acc.iter_mut().zip(&v32[tk * dv..(tk + 1) * dv]) {
                        *a = w.mul_add(x, *a);
                    }
                }
                ic += KV_TILE;
            }
            if let Some(sk) = &sinks {
                let s = sk.get_f32(iq2, 0, 0, 0);
                let (mut ms, mut vs) = (1.0f32, 1.0f32);
                if s > m_max {
                    ms = (m_max - s).exp();
                    for a in acc.iter_mut() {
                        *a *= ms;
                    }
                } else {
                    vs = (s - m_max).exp();
                }
                s_sum = s_sum * ms + vs;
            }
            let inv = if s_sum == 0.0 { 0.0 } else { 1.0 / s_sum };
            for a in acc.iter_mut() {
                *a *= inv;
            }
            d.store_row(iq2, iq1, iq3, acc);
        }
    }
}

/// x[i] = exp(x[i] - max) with ggml's vectorised expf, returning the sum as ggml's
/// `ggml_vec_soft_max_f32` forms it: per vector a horizontal sum in f32, added in f64. Where
/// the reference build has AVX-512 (F and DQ) that is the sixteen-lane `ggml_v_expf` (which
/// rounds differently from the eight-lane one) and `_mm512_reduce_add_ps`.
fn exp_sum(x: &mut [f32], max: f32) -> f64 {
    if !wide_sum() || !x.len().is_multiple_of(16) {
        return simd::exp_sub_sum(x, max);
    }
    let mut sum = 0.0f64;
    for c in x.chunks_exact_mut(16) {
        for v in c.iter_mut() {
            *v = v_expf_512(*v - max);
        }
        let t1: [f32; 8] = std::array::from_fn(|i| c[i + 8] + c[i]);
        let t2: [f32; 4] = std::array::from_fn(|i| t1[i + 4] + t1[i]);
        let (a, b) = (t2[0] + t2[2], t2[1] + t2[3]);
        sum += (a + b) as f64;
    }
    sum
}

/// One lane of ggml's AVX-512 `ggml_v_expf`, operation for operation (each fused
/// multiply-add rounds once; `_mm512_scalef_ps` scales by 2^n with a single rounding).
fn v_expf_512(x: f32) -> f32 {
    let r = f32::from_bits(0x4b40_0000); // 0x1.8p23
    let z = x.mul_add(f32::from_bits(0x3fb8_aa3b), r); // 0x1.715476p+0
    let n = z - r;
    let b = (-n).mul_add(
        f32::from_bits(0x35bf_be8e),                  // 0x1.7f7d1cp-20
        (-n).mul_add(f32::from_bits(0x3f31_7200), x), // 0x1.62e4p-1
    );
    if n.abs() > 192.0 {
        return if n <= 0.0 { 0.0 } else { f32::INFINITY };
    }
    let u = b * b;
    let j = f32::from_bits(0x3c07_2010) // 0x1.0e4020p-7
        .mul_add(b, f32::from_bits(0x3d2b_9f17)) // 0x1.573e2ep-5
        .mul_add(
            u,
            f32::from_bits(0x3e2a_af33).mul_add(b, f32::from_bits(0x3eff_fedb)), // 0x1.555e66p-3, 0x1.fffdb6p-2
        )
        .mul_add(u, f32::from_bits(0x3f7f_fff6).mul_add(b, 1.0)); // 0x1.ffffecp-1
                                                                  // j has 24 significant bits and 2^n is exact in f64: the f64 product is exact and the
                                                                  // one rounding to f32 is scalef's
    (j as f64 * 2f64.powi(n as i32)) as f32
}

/// Whether ggml's soft_max sum uses sixteen lanes on this CPU (AVX512F and AVX512DQ).
fn wide_sum() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        static W: OnceLock<bool> = OnceLock::new();
        *W.get_or_init(|| {
            is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512dq")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avx512_expf_lane_is_exp_within_two_ulp_and_saturates() {
        for i in -2000..=800 {
            let x = i as f32 * 0.1;
            let got = v_expf_512(x);
            let want = (x as f64).exp();
            if want < f32::MIN_POSITIVE as f64 || want > f32::MAX as f64 {
                continue;
            }
            let ulp = f32::EPSILON as f64 * want;
            assert!(
                (got as f64 - want).abs() <= 2.0 * ulp,
                "exp({x}) = {got}, want {want}"
            );
        }
        assert_eq!(v_expf_512(f32::NEG_INFINITY), 0.0);
        assert_eq!(v_expf_512(-1000.0), 0.0);
        assert_eq!(v_expf_512(1000.0), f32::INFINITY);
    }

    #[test]
    fn softmax_sum_matches_the_exponentials() {
        let mut x: Vec<f32> = (0..KV_TILE)
            .map(|i| (i as f32 * 0.37).sin() * 5.0)
            .collect();
        x[KV_TILE - 1] = f32::NEG_INFINITY;
        let max = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        let want: f64 = x.iter().map(|&v| ((v - max) as f64).exp()).sum();
        let got = exp_sum(&mut x, max);
        assert!((got - want).abs() < 1e-5 * want, "{got} vs {want}");
        assert_eq!(x[KV_TILE - 1], 0.0);
    }
}
