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
pub(crate) fn scratch_len(dk: usize, dv: usize) -> usize {
    Q_TILE * (dk + dv + KV_TILE) + KV_TILE * (2 * dk + dv) + KV_TILE
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
    let (krow, rest) = rest.split_at_mut(dk);
    let (v32, rest) = rest.split_at_mut(KV_TILE * dv);
    let kq = &mut rest[..KV_TILE];
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
                        load_mask_row(m, iq1 + t, iq2, iq3, ic, slope, mt);
                        all_masked &= mt.iter().fold(true, |a, &x| a & (x == f32::NEG_INFINITY));
                    }
                    if all_masked {
                        ic += KV_TILE;
                        continue;
                    }
                }
                for tk in 0..kv_tile {
                    k.load_row(ic + tk, ik2, ik3, krow);
                    for (j, &x) in krow.iter().enumerate() {
                        kt[j * KV_TILE + tk] = x;
                    }
                }
                let mut v_loaded = false;
                for t in 0..nrows {
                    // scores: one fused multiply-add per element in K order (ggml's
                    // simd_gemm), then scale, softcap, padding and mask as separate roundings
                    let mut sc = [0.0f32; KV_TILE];
                    for (j, &qd) in qf[t * dk..(t + 1) * dk].iter().enumerate() {
                        let kcol = &kt[j * KV_TILE..(j + 1) * KV_TILE];
                        for (s, &kx) in sc.iter_mut().zip(kcol) {
                            *s = qd.mul_add(kx, *s);
                        }
                    }
                    for (o, &s0) in kq.iter_mut().zip(&sc) {
                        *o = s0 * scale;
                    }
                    if softcap_on {
                        for o in kq.iter_mut() {
                            *o = o.tanh() * pr.softcap;
                        }
                    }
                    kq[kv_tile..].fill(f32::NEG_INFINITY);
                    if mask.is_some() {
                        let mt = &mtile[t * KV_TILE..t * KV_TILE + kv_tile];
                        for (o, &m) in kq[..kv_tile].iter_mut().zip(mt) {
                            *o += m;
                        }
                    }
                    let tile_max = max_of(kq);
                    if tile_max == f32::NEG_INFINITY {
                        continue;
                    }
                    let arow = &mut acc[t * dv..(t + 1) * dv];
                    let m_new = m_max[t].max(tile_max);
                    if m_new > m_max[t] {
                        let ms = (m_max[t] - m_new).exp();
                        for a in arow.iter_mut() {
                            *a *= ms;
                        }
                        s_sum[t] *= ms;
                    }
                    m_max[t] = m_new;
                    s_sum[t] = (s_sum[t] as f64 + simd::exp_sub_sum(kq, m_new)) as f32;

                    if !v_loaded {
                        for tk in 0..kv_tile {
                            v.load_row(ic + tk, iv2, iv3, &mut v32[tk * dv..(tk + 1) * dv]);
                        }
                        v_loaded = true;
                    }
                    accumulate::<FMA, ZMM>(arow, &kq[..kv_tile], v32, dv);
                }
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

/// The largest of `x` (no NaN here: scores are finite or -inf); eight running lanes so the
/// loop vectorises.
#[inline(always)]
fn max_of(x: &[f32]) -> f32 {
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

/// acc[j] = fma(w[t], v[t * dv + j], acc[j]) for t = 0, 1, ... in order (ggml's simd_gemm of
/// the weights times the V tile), with the accumulators held in registers under FMA.
///
/// # Safety
/// With `FMA`, AVX2 and FMA are available; v holds w.len() rows of dv >= acc.len() floats.
#[inline(always)]
unsafe fn accumulate<const FMA: bool, const ZMM: bool>(
    acc: &mut [f32],
    w: &[f32],
    v: &[f32],
    dv: usize,
) {
    #[cfg(target_arch = "x86_64")]
    {
        if ZMM {
            // SAFETY: the caller's promise (AVX-512F with ZMM).
            unsafe { x86::accumulate_zmm(acc, w, v, dv) };
            return;
        }
        if FMA {
            // SAFETY: the caller's promise.
            unsafe { x86::accumulate(acc, w, v, dv) };
            return;
        }
    }
    for (t, &wt) in w.iter().enumerate() {
        for (a, &x) in acc.iter_mut().zip(&v[t * dv..(t + 1) * dv]) {
            *a = wt.mul_add(x, *a);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// `accumulate` 64 (then 32, 8, 1) columns at a time.
    ///
    /// # Safety
    /// AVX2 and FMA are available; v holds w.len() rows of dv >= acc.len() floats.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn accumulate(acc: &mut [f32], w: &[f32], v: &[f32], dv: usize) {
        let n = acc.len();
        assert!(n <= dv && v.len() >= w.len() * dv);
        let (pa, pv) = (acc.as_mut_ptr(), v.as_ptr());
        let mut j = 0;
        // SAFETY: each call covers columns j..j + 8V <= n of acc and of every v row.
        unsafe {
            // eight independent chains keep both FMA ports busy
            while j + 64 <= n {
                columns::<8>(pa.add(j), pv.add(j), w, dv);
                j += 64;
            }
            while j + 32 <= n {
                columns::<4>(pa.add(j), pv.add(j), w, dv);
                j += 32;
            }
            while j + 8 <= n {
                columns::<1>(pa.add(j), pv.add(j), w, dv);
                j += 8;
            }
        }
        for (jj, a) in acc.iter_mut().enumerate().skip(j) {
            for (t, &wt) in w.iter().enumerate() {
                *a = wt.mul_add(v[t * dv + jj], *a);
            }
        }
    }

    /// `accumulate` 128 (then 64, 16) columns at a time in 16-lane registers, the rest as
    /// the 8-lane version does (each column is its own chain either way).
    ///
    /// # Safety
    /// AVX-512F, AVX2 and FMA are available; v holds w.len() rows of dv >= acc.len() floats.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub unsafe fn accumulate_zmm(acc: &mut [f32], w: &[f32], v: &[f32], dv: usize) {
        let n = acc.len();
        assert!(n <= dv && v.len() >= w.len() * dv);
        let (pa, pv) = (acc.as_mut_ptr(), v.as_ptr());
        let mut j = 0;
        // SAFETY: each call covers columns j..j + 16V <= n of acc and of every v row.
        unsafe {
            while j + 128 <= n {
                columns_zmm::<8>(pa.add(j), pv.add(j), w, dv);
                j += 128;
            }
            while j + 64 <= n {
                columns_zmm::<4>(pa.add(j), pv.add(j), w, dv);
                j += 64;
            }
            while j + 16 <= n {
                columns_zmm::<1>(pa.add(j), pv.add(j), w, dv);
                j += 16;
            }
            while j + 8 <= n {
                columns::<1>(pa.add(j), pv.add(j), w, dv);
                j += 8;
            }
        }
        for (jj, a) in acc.iter_mut().enumerate().skip(j) {
            for (t, &wt) in w.iter().enumerate() {
                *a = wt.mul_add(v[t * dv + jj], *a);
            }
        }
    }

    /// 16V columns at `pa` / `pv` (row stride dv), as `columns`.
    ///
    /// # Safety
    /// AVX-512F is available; the 16V floats at pa and at pv + t * dv (t < w.len()) exist.
    #[inline(always)]
    unsafe fn columns_zmm<const V: usize>(pa: *mut f32, pv: *const f32, w: &[f32], dv: usize) {
        // SAFETY: the caller's promise.
        unsafe {
            let mut a: [__m512; V] = std::array::from_fn(|i| _mm512_loadu_ps(pa.add(16 * i)));
            for (t, &wt) in w.iter().enumerate() {
                let wb = _mm512_set1_ps(wt);
                let row = pv.add(t * dv);
                for (i, ai) in a.iter_mut().enumerate() {
                    *ai = _mm512_fmadd_ps(wb, _mm512_loadu_ps(row.add(16 * i)), *ai);
                }
            }
            for (i, ai) in a.iter().enumerate() {
                _mm512_storeu_ps(pa.add(16 * i), *ai);
            }
        }
    }

    /// 8V columns starting at `pa` / `pv` (row stride dv): acc = fma(w[t], v[t], acc) for each
    /// t in order, the accumulators in registers.
    ///
    /// # Safety
    /// AVX2 and FMA are available; the 8V floats at pa and at pv + t * dv (t < w.len()) exist.
    #[inline(always)]
    unsafe fn columns<const V: usize>(pa: *mut f32, pv: *const f32, w: &[f32], dv: usize) {
        // SAFETY: the caller's promise.
        unsafe {
            let mut a: [__m256; V] = std::array::from_fn(|i| _mm256_loadu_ps(pa.add(8 * i)));
            for (t, &wt) in w.iter().enumerate() {
                let wb = _mm256_set1_ps(wt);
                let row = pv.add(t * dv);
                for (i, ai) in a.iter_mut().enumerate() {
                    *ai = _mm256_fmadd_ps(wb, _mm256_loadu_ps(row.add(8 * i)), *ai);
                }
            }
            for (i, ai) in a.iter().enumerate() {
                _mm256_storeu_ps(pa.add(8 * i), *ai);
            }
        }
    }
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

    #[test]
    fn vector_accumulate_equals_the_fma_chain() {
        let (dv, n) = (109, 13);
        let w: Vec<f32> = (0..n).map(|i| (i as f32 * 0.61).cos()).collect();
        let v: Vec<f32> = (0..n * dv).map(|i| (i as f32 * 0.13).sin() * 3.0).collect();
        let acc0: Vec<f32> = (0..dv).map(|i| i as f32 * 0.01).collect();
        let mut want = acc0.clone();
        // SAFETY: FMA = false takes the portable path; v holds n rows of dv.
        unsafe { accumulate::<false, false>(&mut want, &w, &v, dv) };
        #[cfg(target_arch = "x86_64")]
        if crate::simd::has_avx2_fma() {
            let mut got = acc0.clone();
            // SAFETY: AVX2 and FMA are available.
            unsafe { accumulate::<true, false>(&mut got, &w, &v, dv) };
            assert_eq!(got, want);
        }
        #[cfg(target_arch = "x86_64")]
        if crate::simd::features::cpu().avx512_dot() {
            for dv in [109, 128, 200, 16, 7] {
                let v: Vec<f32> = (0..n * dv).map(|i| (i as f32 * 0.13).sin() * 3.0).collect();
                let acc0: Vec<f32> = (0..dv).map(|i| i as f32 * 0.01).collect();
                let mut want = acc0.clone();
                // SAFETY: the portable path; v holds n rows of dv.
                unsafe { accumulate::<false, false>(&mut want, &w, &v, dv) };
                let mut got = acc0.clone();
                // SAFETY: AVX-512F, AVX2 and FMA are available.
                unsafe { accumulate::<true, true>(&mut got, &w, &v, dv) };
                assert_eq!(got, want, "dv {dv}");
            }
        }
        assert_eq!(
            max_of(&w),
            w.iter().cloned().fold(f32::NEG_INFINITY, f32::max)
        );
    }
}
