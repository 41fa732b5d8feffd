//! FLASH_ATTN_EXT for batches, as ggml's CPU backend computes it when a batch has at least
//! `Q_TILE` query rows with an f32 query and f16 or f32 K and V of one type
//! (`ggml_compute_forward_flash_attn_ext_tiled`): the query stays f32, keys and values are
//! widened to f32, scores come in tiles of `KV_TILE` keys with one softmax rescale per tile,
//! and V is accumulated in f32. The single-row algorithm (query converted to f16, one
//! rescale per key, f16 accumulator) rounds differently, and the difference grows large
//! once quantized weights re-round the attention output, so batches must take this path.
//!
//! Like ggml, up to `Q_TILE` rows of one head share each widened K/V tile; every row's
//! arithmetic is independent of its neighbours (a key tile skipped for the whole group is all
//! -inf for each row too), so each row does the same operations in the same order as there.

use super::super::alibi_slope;
use super::block;
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

/// Floats of widened K and V tiles one thread keeps for a head at most (4 MiB): the query
/// groups of a head (and the heads sharing its K/V) take a tile widened once instead of
/// widening it again each.
const KV_KEEP_FLOATS: usize = 1 << 20;

/// The K/V tiles of `n_kv` keys kept widened, if they fit `KV_KEEP_FLOATS`: their floats.
fn kept_len(dk: usize, dv: usize, n_kv: usize) -> Option<usize> {
    let n = n_kv.div_ceil(KV_TILE) * KV_TILE * (dk + dv);
    (n <= KV_KEEP_FLOATS).then_some(n)
}

/// Floats of per-thread scratch `rows` needs.
pub(crate) fn scratch_len(dk: usize, dv: usize, n_kv: usize) -> usize {
    Q_TILE * (dk + dv + 2 * KV_TILE) + KV_TILE * (2 * dk + dv) + kept_len(dk, dv, n_kv).unwrap_or(0)
}

/// Scalars of one FLASH_ATTN_EXT node.
pub(crate) struct Params {
    pub scale: f32,
    pub max_bias: f32,
    pub softcap: f32,
}

/// The tensors of one FLASH_ATTN_EXT node.
pub(crate) struct Operands<'a> {
    pub q: &'a TRef,
    pub k: &'a TRef,
    pub v: &'a TRef,
    pub mask: Option<TRef>,
    pub sinks: Option<TRef>,
    pub d: &'a TRef,
}

/// Computes query rows `r0..r1` (flat over ne1, ne2, ne3) into `d`.
///
/// # Safety
/// The operands have the shapes FLASH_ATTN_EXT checks; this thread owns rows r0..r1 of dst;
/// `buf` holds `scratch_len` floats.
pub(crate) unsafe fn rows(ops: &Operands, pr: &Params, r0: usize, r1: usize, buf: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::simd::features::cpu().avx512_dot() {
            // SAFETY: AVX-512F, AVX2 and FMA are available; the rest is the caller's promise.
            unsafe { rows_avx512(ops, pr, r0, r1, buf) };
            return;
        }
        if crate::simd::has_avx2_fma() {
            // SAFETY: AVX2 and FMA are available; the rest is the caller's promise.
            unsafe { rows_fma(ops, pr, r0, r1, buf) };
            return;
        }
    }
    // SAFETY: the caller's promise.
    unsafe { rows_impl::<false, false>(ops, pr, r0, r1, buf) }
}

/// `rows` with 16-lane registers: every score and every accumulator is its own chain of
/// fused steps in key order whatever the register width, so the bits are the same.
///
/// # Safety
/// AVX-512F, AVX2 and FMA are available; as for `rows`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn rows_avx512(ops: &Operands, pr: &Params, r0: usize, r1: usize, buf: &mut [f32]) {
    // SAFETY: as for rows; AVX-512F and FMA are available.
    unsafe { rows_impl::<true, true>(ops, pr, r0, r1, buf) }
}

/// `rows` compiled with FMA: mul_add becomes one instruction and the lane loops vectorise.
///
/// # Safety
/// AVX2 and FMA are available; as for `rows`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_fma(ops: &Operands, pr: &Params, r0: usize, r1: usize, buf: &mut [f32]) {
    // SAFETY: as for rows; FMA is available.
    unsafe { rows_impl::<true, false>(ops, pr, r0, r1, buf) }
}

/// Query rows go in groups of up to `Q_TILE` rows of one head, so each K/V tile is widened
/// once per group; every row's arithmetic is the one ggml does for it.
/// `FMA`: AVX2 and FMA are available (the caller runs with them enabled); `ZMM`: AVX-512F too.
#[inline(always)]
unsafe fn rows_impl<const FMA: bool, const ZMM: bool>(
    ops: &Operands,
    pr: &Params,
    r0: usize,
    r1: usize,
    buf: &mut [f32],
) {
    let (q, k, v, d) = (ops.q, ops.k, ops.v, ops.d);
    let (mask, sinks) = (&ops.mask, &ops.sinks);
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
    let (qf, rest) = buf.split_at_mut(Q_TILE * dk);
    let (acc, rest) = rest.split_at_mut(Q_TILE * dv);
    let (mtile, rest) = rest.split_at_mut(Q_TILE * KV_TILE);
    // K tile transposed (kt[d * KV_TILE + key]) so the scores of a tile's keys are lanes
    let (kt, rest) = rest.split_at_mut(KV_TILE * dk);
    let (kstage, rest) = rest.split_at_mut(16 * dk);
    let (v32, rest) = rest.split_at_mut(KV_TILE * dv);
    let (kq, rest) = rest.split_at_mut(Q_TILE * KV_TILE);
    // every K/V tile of the current head widened once (where they fit), `kept[tile]` once done
    let n_tiles = n_kv.div_ceil(KV_TILE);
    let keep = kept_len(dk, dv, n_kv).is_some();
    let (kt_all, v_all) = if keep {
        rest[..n_tiles * KV_TILE * (dk + dv)].split_at_mut(n_tiles * KV_TILE * dk)
    } else {
        (&mut [][..], &mut [][..])
    };
    let mut kept = vec![false; if keep { n_tiles } else { 0 }];
    let mut kept_head = None;
    let mut s_sum = [0.0f32; Q_TILE];
    let mut m_max = [f32::NEG_INFINITY; Q_TILE];

    let mut ir = r0;
    while ir < r1 {
        let iq3 = ir / (nq2 * nq1);
        let iq2 = (ir - iq3 * nq2 * nq1) / nq1;
        let iq1 = ir - iq3 * nq2 * nq1 - iq2 * nq1;
        let nrows = Q_TILE.min(r1 - ir).min(nq1 - iq1);
        let (ik2, ik3) = (iq2 / rk2, iq3 / rk3);
        let (iv2, iv3) = (iq2 / rv2, iq3 / rv3);
        let slope = alibi_slope(pr.max_bias, nq2, iq2);
        if kept_head != Some((ik2, ik3, iv2, iv3)) {
            kept.fill(false);
            kept_head = Some((ik2, ik3, iv2, iv3));
        }

        // SAFETY: (caller) every row read below exists; dst rows (iq2, iq1.., iq3) are ours.
        unsafe {
            for t in 0..nrows {
                q.load_row(iq1 + t, iq2, iq3, &mut qf[t * dk..(t + 1) * dk]);
            }
            acc[..nrows * dv].fill(0.0);
            s_sum[..nrows].fill(0.0);
            m_max[..nrows].fill(f32::NEG_INFINITY);
            let mut ic = 0;
            while ic < n_kv {
                let kv_tile = KV_TILE.min(n_kv - ic);
                if let Some(m) = &mask {
                    let mut all_masked = true;
                    for t in 0..nrows {
                        let mt = &mut mtile[t * KV_TILE..t * KV_TILE + kv_tile];
                        all_masked &= mask_row::<ZMM>(m, iq1 + t, iq2, iq3, ic, slope, mt);
                    }
                    if all_masked {
                        ic += KV_TILE;
                        continue;
                    }
                }
                let ti = ic / KV_TILE;
                let (kt, v32) = if keep {
                    (
                        &mut kt_all[ti * KV_TILE * dk..(ti + 1) * KV_TILE * dk],
                        &mut v_all[ti * KV_TILE * dv..(ti + 1) * KV_TILE * dv],
                    )
                } else {
                    (&mut kt[..], &mut v32[..])
                };
                if !keep || !kept[ti] {
                    // the K tile transposed 16 keys at a time; padded keys are zeros (their
                    // scores become -inf below)
                    for c0 in (0..KV_TILE).step_by(16) {
                        for i in 0..16 {
                            let kr = &mut kstage[i * dk..(i + 1) * dk];
                            if c0 + i < kv_tile {
                                k.load_row(ic + c0 + i, ik2, ik3, kr);
                            } else {
                                kr.fill(0.0);
                            }
                        }
                        block::pack_keys::<ZMM>(kt, kstage, dk, KV_TILE, c0);
                    }
                    for tk in 0..kv_tile {
                        v.load_row(ic + tk, iv2, iv3, &mut v32[tk * dv..(tk + 1) * dv]);
                    }
                    if keep {
                        kept[ti] = true;
                    }
                }
                // scores: one fused multiply-add per element in K order (ggml's simd_gemm),
                // then scale, softcap, padding and mask as separate roundings
                block::scores::<FMA, ZMM>(kq, qf, kt, nrows, dk, KV_TILE);
                for t in 0..nrows {
                    let kr = &mut kq[t * KV_TILE..(t + 1) * KV_TILE];
                    let mt = mask
                        .as_ref()
                        .map(|_| &mtile[t * KV_TILE..t * KV_TILE + kv_tile]);
                    let tile_max = if ZMM && !softcap_on && kv_tile == KV_TILE {
                        scale_mask_max(kr, mt, scale)
                    } else {
                        for o in kr.iter_mut() {
                            *o *= scale;
                        }
                        if softcap_on {
                            for o in kr.iter_mut() {
                                *o = o.tanh() * pr.softcap;
                            }
                        }
                        kr[kv_tile..].fill(f32::NEG_INFINITY);
                        if let Some(mt) = mt {
                            for (o, &m) in kr[..kv_tile].iter_mut().zip(mt) {
                                *o += m;
                            }
                        }
                        max_of::<ZMM>(kr)
                    };
                    if tile_max == f32::NEG_INFINITY {
                        // as ggml: the row's weights are zeros, its state unchanged
                        kr.fill(0.0);
                        continue;
                    }
                    let m_new = m_max[t].max(tile_max);
                    if m_new > m_max[t] {
                        let ms = (m_max[t] - m_new).exp();
                        for a in acc[t * dv..(t + 1) * dv].iter_mut() {
                            *a *= ms;
                        }
                        s_sum[t] *= ms;
                    }
                    m_max[t] = m_new;
                    s_sum[t] = (s_sum[t] as f64 + simd::exp_sub_sum(kr, m_new)) as f32;
                }
                block::accumulate::<FMA, ZMM>(acc, kq, v32, nrows, kv_tile, KV_TILE, dv);
                ic += KV_TILE;
            }
            for t in 0..nrows {
                let arow = &mut acc[t * dv..(t + 1) * dv];
                if let Some(sk) = &sinks {
                    let s = sk.get_f32(iq2, 0, 0, 0);
                    let (mut ms, mut vs) = (1.0f32, 1.0f32);
                    if s > m_max[t] {
                        ms = (m_max[t] - s).exp();
                        for a in arow.iter_mut() {
                            *a *= ms;
                        }
                    } else {
                        vs = (s - m_max[t]).exp();
                    }
                    s_sum[t] = s_sum[t] * ms + vs;
                }
                let inv = if s_sum[t] == 0.0 { 0.0 } else { 1.0 / s_sum[t] };
                for a in arow.iter_mut() {
                    *a *= inv;
                }
                d.store_row(iq2, iq1 + t, iq3, arow);
            }
        }
        ir += nrows;
    }
}

/// `load_mask_row` into `out`, and whether every value is -inf. With `ZMM` an F16 mask row is
/// converted and checked in registers: checking the stored row afterwards would load what the
/// conversion has just stored, in other widths, and wait for it.
///
/// # Safety
/// As for `load_mask_row`; with `ZMM`, AVX-512F and F16C are available.
#[inline(always)]
unsafe fn mask_row<const ZMM: bool>(
    m: &TRef,
    i1: usize,
    i2: usize,
    i3: usize,
    c0: usize,
    slope: f32,
    out: &mut [f32],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if ZMM && m.ty == Type::F16 && m.nb[0] == 2 {
        use std::arch::x86_64::*;
        let n = out.len();
        // SAFETY: the caller guarantees the row and elements c0..c0 + n of it.
        unsafe {
            let mp = (m.row_ptr(i1, i2 % m.ne[2], i3 % m.ne[3]) as *const u16).add(c0);
            let (ninf, sl) = (_mm512_set1_ps(f32::NEG_INFINITY), _mm512_set1_ps(slope));
            let mut all = true;
            let mut i = 0;
            while i + 16 <= n {
                let mut v = _mm512_cvtph_ps(_mm256_loadu_si256(mp.add(i) as *const __m256i));
                if slope != 1.0 {
                    v = _mm512_mul_ps(v, sl);
                }
                all &= _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(v, ninf) == 0xFFFF;
                _mm512_storeu_ps(out.as_mut_ptr().add(i), v);
                i += 16;
            }
            for (j, o) in out.iter_mut().enumerate().skip(i) {
                let v = crate::fp::f16_to_f32(*mp.add(j));
                *o = if slope != 1.0 { v * slope } else { v };
                all &= *o == f32::NEG_INFINITY;
            }
            return all;
        }
    }
    // SAFETY: the caller's promise.
    unsafe { load_mask_row(m, i1, i2, i3, c0, slope, out) };
    out.iter().fold(true, |a, &x| a & (x == f32::NEG_INFINITY))
}

/// A full tile's scores scaled, the mask row added (two roundings, as the separate passes
/// make them) and their largest, in one pass over the 64 scores: the same values as the
/// scale, mask and `max_of` passes one after another.
#[inline(always)]
fn scale_mask_max(kr: &mut [f32], mt: Option<&[f32]>, scale: f32) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        assert!(kr.len() == KV_TILE && mt.is_none_or(|m| m.len() == KV_TILE));
        // SAFETY: the caller runs with AVX-512F (ZMM); kr and mt hold KV_TILE = 64 floats.
        unsafe {
            let sc = _mm512_set1_ps(scale);
            let mut mx = _mm512_set1_ps(f32::NEG_INFINITY);
            for i in (0..KV_TILE).step_by(16) {
                let p = kr.as_mut_ptr().add(i);
                let mut v = _mm512_mul_ps(_mm512_loadu_ps(p), sc);
                if let Some(m) = mt {
                    v = _mm512_add_ps(v, _mm512_loadu_ps(m.as_ptr().add(i)));
                }
                _mm512_storeu_ps(p, v);
                mx = _mm512_max_ps(mx, v);
            }
            _mm512_reduce_max_ps(mx)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (kr, mt, scale);
        unreachable!("ZMM is x86-only")
    }
}

/// The largest of `x` (no NaN here: scores are finite or -inf); eight running lanes so the
/// loop vectorises.
#[inline(always)]
fn max_of<const ZMM: bool>(x: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if ZMM && x.len() == 64 {
        use std::arch::x86_64::*;
        // SAFETY: x holds 64 floats; ZMM means the caller runs with AVX-512F.
        unsafe {
            let p = x.as_ptr();
            let a = _mm512_max_ps(_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(16)));
            let b = _mm512_max_ps(_mm512_loadu_ps(p.add(32)), _mm512_loadu_ps(p.add(48)));
            return _mm512_reduce_max_ps(_mm512_max_ps(a, b));
        }
    }
    let mut m = [f32::NEG_INFINITY; 8];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        for (a, &b) in m.iter_mut().zip(c) {
            *a = if *a > b { *a } else { b };
        }
    }
    let tail = chunks.remainder().iter();
    m.iter()
        .chain(tail)
        .fold(f32::NEG_INFINITY, |a, &b| if a > b { a } else { b })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_sum_matches_the_exponentials() {
        let mut x: Vec<f32> = (0..KV_TILE)
            .map(|i| (i as f32 * 0.37).sin() * 5.0)
            .collect();
        x[KV_TILE - 1] = f32::NEG_INFINITY;
        let max = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        let want: f64 = x.iter().map(|&v| ((v - max) as f64).exp()).sum();
        let got = simd::exp_sub_sum(&mut x, max);
        assert!((got - want).abs() < 1e-5 * want, "{got} vs {want}");
        assert_eq!(x[KV_TILE - 1], 0.0);
    }

    /// The fused pass gives the separate passes' scores and maximum, with and without a mask.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn scale_mask_max_equals_the_separate_passes() {
        if !crate::simd::features::cpu().avx512f {
            eprintln!("skipped: this CPU lacks AVX-512F");
            return;
        }
        let kr: Vec<f32> = (0..KV_TILE)
            .map(|i| (i as f32 * 0.73).sin() * 9.0)
            .collect();
        let mut mt: Vec<f32> = (0..KV_TILE).map(|i| (i as f32 * 0.31).cos()).collect();
        mt[40..].fill(f32::NEG_INFINITY);
        let scale = 0.176_776_7f32;
        for mask in [None, Some(&mt[..])] {
            let mut want = kr.clone();
            for (o, i) in want.iter_mut().zip(0..) {
                *o *= scale;
                if let Some(m) = mask {
                    *o += m[i];
                }
            }
            let want_max = max_of::<false>(&want);
            let mut got = kr.clone();
            let got_max = scale_mask_max(&mut got, mask, scale);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want));
            assert_eq!(got_max.to_bits(), want_max.to_bits());
        }
    }

    #[test]
    fn max_of_is_the_largest() {
        let w: Vec<f32> = (0..37).map(|i| (i as f32 * 0.61).cos()).collect();
        assert_eq!(
            max_of::<false>(&w),
            w.iter().cloned().fold(f32::NEG_INFINITY, f32::max)
        );
        #[cfg(target_arch = "x86_64")]
        if crate::simd::features::cpu().avx512f {
            let mut w: Vec<f32> = (0..64).map(|i| (i as f32 * 0.61).cos() - 3.0).collect();
            w[..20].fill(f32::NEG_INFINITY);
            let want = w.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            assert_eq!(max_of::<true>(&w), want);
            w.fill(f32::NEG_INFINITY);
            assert_eq!(max_of::<true>(&w), f32::NEG_INFINITY);
        }
    }
}
