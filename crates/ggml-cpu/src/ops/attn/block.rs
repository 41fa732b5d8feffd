//! The two products of a flash-attention tile, blocked over query rows: the scores
//! (rows x keys = Q x K^T) and the value update (acc += P x V). Every output element is one
//! chain of fused multiply-adds in the inner dimension's order, as ggml's simd_gemm makes it,
//! so blocking rows and columns into registers changes the speed and not the bits: each query
//! row broadcast is shared by a register row of keys (or value columns), and each key (value)
//! load by up to four query rows.

/// `kq[t * ldk + c] = Σ_j q[t * dk + j] · kt[j * ldk + c]`, one fused chain per element in j
/// order from 0, for rows `t < nrows` and keys `c < ldk` (`ldk` a multiple of 16).
///
/// # Safety
/// `q` holds `nrows * dk` floats, `kt` `dk * ldk`, `kq` `nrows * ldk`; with `FMA`, AVX2 and
/// FMA are available, with `ZMM` also AVX-512F.
#[inline(always)]
pub(super) unsafe fn scores<const FMA: bool, const ZMM: bool>(
    kq: &mut [f32],
    q: &[f32],
    kt: &[f32],
    nrows: usize,
    dk: usize,
    ldk: usize,
) {
    assert!(q.len() >= nrows * dk && kt.len() >= dk * ldk && kq.len() >= nrows * ldk);
    assert!(ldk.is_multiple_of(16));
    #[cfg(target_arch = "x86_64")]
    {
        if ZMM {
            // SAFETY: the caller's promise; sizes asserted above.
            unsafe { x86::scores_zmm(kq, q, kt, nrows, dk, ldk) };
            return;
        }
        if FMA {
            // SAFETY: as above.
            unsafe { x86::scores_ymm(kq, q, kt, nrows, dk, ldk) };
            return;
        }
    }
    scores_ref(kq, q, kt, nrows, dk, ldk);
}

/// The scalar reference of `scores`.
pub(super) fn scores_ref(
    kq: &mut [f32],
    q: &[f32],
    kt: &[f32],
    nrows: usize,
    dk: usize,
    ldk: usize,
) {
    for t in 0..nrows {
        let row = &mut kq[t * ldk..(t + 1) * ldk];
        row.fill(0.0);
        for (j, &qd) in q[t * dk..(t + 1) * dk].iter().enumerate() {
            for (s, &kx) in row.iter_mut().zip(&kt[j * ldk..(j + 1) * ldk]) {
                *s = qd.mul_add(kx, *s);
            }
        }
    }
}

/// `acc[t * dv + c] += Σ_k p[t * ldp + k] · v[k * dv + c]`, one fused chain per element in k
/// order continuing from acc, for rows `t < nrows`, keys `k < nk` and columns `c < dv`.
///
/// # Safety
/// `acc` holds `nrows * dv` floats, `p` `nrows * ldp` (`nk <= ldp`), `v` `nk * dv`; with
/// `FMA`, AVX2 and FMA are available, with `ZMM` also AVX-512F.
#[inline(always)]
pub(super) unsafe fn accumulate<const FMA: bool, const ZMM: bool>(
    acc: &mut [f32],
    p: &[f32],
    v: &[f32],
    nrows: usize,
    nk: usize,
    ldp: usize,
    dv: usize,
) {
    assert!(nk <= ldp && acc.len() >= nrows * dv && p.len() >= nrows * ldp);
    assert!(v.len() >= nk * dv);
    #[cfg(target_arch = "x86_64")]
    {
        if ZMM {
            // SAFETY: the caller's promise; sizes asserted above.
            unsafe { x86::accumulate_zmm(acc, p, v, nrows, nk, ldp, dv) };
            return;
        }
        if FMA {
            // SAFETY: as above.
            unsafe { x86::accumulate_ymm(acc, p, v, nrows, nk, ldp, dv) };
            return;
        }
    }
    accumulate_ref(acc, p, v, nrows, nk, ldp, dv);
}

/// The scalar reference of `accumulate`.
pub(super) fn accumulate_ref(
    acc: &mut [f32],
    p: &[f32],
    v: &[f32],
    nrows: usize,
    nk: usize,
    ldp: usize,
    dv: usize,
) {
    for t in 0..nrows {
        let arow = &mut acc[t * dv..(t + 1) * dv];
        for (k, &w) in p[t * ldp..t * ldp + nk].iter().enumerate() {
            for (a, &x) in arow.iter_mut().zip(&v[k * dv..(k + 1) * dv]) {
                *a = w.mul_add(x, *a);
            }
        }
    }
}

/// Keys `c0..c0 + 16` of a transposed K tile from 16 key rows: `kt[j * ldk + c0 + i] =
/// rows[i * dk + j]` for `i < 16`, `j < dk` (a copy: the bits are the rows').
///
/// # Safety
/// `rows` holds `16 * dk` floats, `kt` `dk * ldk` with `c0 + 16 <= ldk`; with `ZMM`,
/// AVX-512F is available.
#[inline(always)]
pub(super) unsafe fn pack_keys<const ZMM: bool>(
    kt: &mut [f32],
    rows: &[f32],
    dk: usize,
    ldk: usize,
    c0: usize,
) {
    assert!(rows.len() >= 16 * dk && kt.len() >= dk * ldk && c0 + 16 <= ldk);
    let mut j = 0;
    #[cfg(target_arch = "x86_64")]
    if ZMM {
        while j + 16 <= dk {
            // SAFETY: rows i < 16 at columns j..j + 16 and kt rows j..j + 16 at columns
            // c0..c0 + 16 exist (asserted); AVX-512F is the caller's promise.
            unsafe {
                x86::transpose16(
                    rows.as_ptr().add(j),
                    dk,
                    kt.as_mut_ptr().add(j * ldk + c0),
                    ldk,
                )
            };
            j += 16;
        }
    }
    for jj in j..dk {
        for i in 0..16 {
            kt[jj * ldk + c0 + i] = rows[i * dk + jj];
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Query rows per register block.
    const RM: usize = 4;

    /// `$f::<M, ..>(args)` for M = `$m` (1 to RM): the register block's query rows.
    macro_rules! by_rows {
        ($m:expr, $f:ident $(, $n:literal)?; $($a:expr),*) => {
            match $m {
                4 => $f::<4 $(, $n)?>($($a),*),
                3 => $f::<3 $(, $n)?>($($a),*),
                2 => $f::<2 $(, $n)?>($($a),*),
                _ => $f::<1 $(, $n)?>($($a),*),
            }
        };
    }

    /// The 16 x 16 block at `src` (row stride `ss`) written transposed at `dst` (row stride
    /// `ds`).
    ///
    /// # Safety
    /// AVX-512F is available; 16 rows of 16 floats exist at both.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn transpose16(src: *const f32, ss: usize, dst: *mut f32, ds: usize) {
        // SAFETY: the caller's promise.
        unsafe {
            let r: [__m512; 16] = std::array::from_fn(|i| _mm512_loadu_ps(src.add(i * ss)));
            for (i, v) in crate::simd::transpose::transpose16(r).iter().enumerate() {
                _mm512_storeu_ps(dst.add(i * ds), *v);
            }
        }
    }

    /// `scores` in 16-lane registers: blocks of up to 4 rows x 64 keys (16 accumulators).
    ///
    /// # Safety
    /// AVX-512F is available; sizes as `scores` asserts.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub unsafe fn scores_zmm(
        kq: &mut [f32],
        q: &[f32],
        kt: &[f32],
        nrows: usize,
        dk: usize,
        ldk: usize,
    ) {
        let (pq, pk, pc) = (q.as_ptr(), kt.as_ptr(), kq.as_mut_ptr());
        let mut t = 0;
        // SAFETY: every block reads rows t..t + M of q, columns c..c + 16N of kt's dk rows
        // and writes the same cells of kq, all inside the sizes the caller asserted.
        unsafe {
            while t < nrows {
                let m = RM.min(nrows - t);
                let mut c = 0;
                while c + 64 <= ldk {
                    by_rows!(m, score_block, 4; pc, pq, pk, t, c, dk, ldk);
                    c += 64;
                }
                while c < ldk {
                    by_rows!(m, score_block, 1; pc, pq, pk, t, c, dk, ldk);
                    c += 16;
                }
                t += m;
            }
        }
    }

    /// Rows t..t + M, keys c..c + 16N of the scores.
    ///
    /// # Safety
    /// AVX-512F; the cells exist (see `scores_zmm`).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn score_block<const M: usize, const N: usize>(
        pc: *mut f32,
        pq: *const f32,
        pk: *const f32,
        t: usize,
        c: usize,
        dk: usize,
        ldk: usize,
    ) {
        // SAFETY: the caller's promise.
        unsafe {
            let mut a = [[_mm512_setzero_ps(); N]; M];
            for j in 0..dk {
                let kr = pk.add(j * ldk + c);
                let b: [__m512; N] = std::array::from_fn(|r| _mm512_loadu_ps(kr.add(16 * r)));
                for (i, ai) in a.iter_mut().enumerate() {
                    let x = _mm512_set1_ps(*pq.add((t + i) * dk + j));
                    for (r, air) in ai.iter_mut().enumerate() {
                        *air = _mm512_fmadd_ps(x, b[r], *air);
                    }
                }
            }
            for (i, ai) in a.iter().enumerate() {
                for (r, air) in ai.iter().enumerate() {
                    _mm512_storeu_ps(pc.add((t + i) * ldk + c + 16 * r), *air);
                }
            }
        }
    }

    /// `scores` in 8-lane registers: blocks of up to 4 rows x 16 keys (8 accumulators).
    ///
    /// # Safety
    /// AVX2 and FMA are available; sizes as `scores` asserts.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn scores_ymm(
        kq: &mut [f32],
        q: &[f32],
        kt: &[f32],
        nrows: usize,
        dk: usize,
        ldk: usize,
    ) {
        let (pq, pk, pc) = (q.as_ptr(), kt.as_ptr(), kq.as_mut_ptr());
        let mut t = 0;
        // SAFETY: as in scores_zmm, with 8-lane cells.
        unsafe {
            while t < nrows {
                let m = RM.min(nrows - t);
                for c in (0..ldk).step_by(16) {
                    by_rows!(m, score_block_ymm; pc, pq, pk, t, c, dk, ldk);
                }
                t += m;
            }
        }
    }

    /// Rows t..t + M, keys c..c + 16 of the scores in two 8-lane registers per row.
    ///
    /// # Safety
    /// AVX2 and FMA; the cells exist.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn score_block_ymm<const M: usize>(
        pc: *mut f32,
        pq: *const f32,
        pk: *const f32,
        t: usize,
        c: usize,
        dk: usize,
        ldk: usize,
    ) {
        // SAFETY: the caller's promise.
        unsafe {
            let mut a = [[_mm256_setzero_ps(); 2]; M];
            for j in 0..dk {
                let kr = pk.add(j * ldk + c);
                let b = [_mm256_loadu_ps(kr), _mm256_loadu_ps(kr.add(8))];
                for (i, ai) in a.iter_mut().enumerate() {
                    let x = _mm256_set1_ps(*pq.add((t + i) * dk + j));
                    for (r, air) in ai.iter_mut().enumerate() {
                        *air = _mm256_fmadd_ps(x, b[r], *air);
                    }
                }
            }
            for (i, ai) in a.iter().enumerate() {
                for (r, air) in ai.iter().enumerate() {
                    _mm256_storeu_ps(pc.add((t + i) * ldk + c + 8 * r), *air);
                }
            }
        }
    }

    /// `accumulate` in 16-lane registers: blocks of up to 4 rows x 64 columns, then 32, 16,
    /// then a masked tail.
    ///
    /// # Safety
    /// AVX-512F is available; sizes as `accumulate` asserts.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub unsafe fn accumulate_zmm(
        acc: &mut [f32],
        p: &[f32],
        v: &[f32],
        nrows: usize,
        nk: usize,
        ldp: usize,
        dv: usize,
    ) {
        let (pa, pp, pv) = (acc.as_mut_ptr(), p.as_ptr(), v.as_ptr());
        let g = Geom { nk, ldp, dv };
        let mut t = 0;
        // SAFETY: every block touches rows t..t + M of acc and p and columns of v's nk rows
        // inside the sizes the caller asserted; the tail's mask covers only columns < dv.
        unsafe {
            while t < nrows {
                let m = RM.min(nrows - t);
                let mut c = 0;
                while c + 64 <= dv {
                    by_rows!(m, acc_block, 4; pa, pp, pv, t, c, u16::MAX, &g);
                    c += 64;
                }
                if c + 32 <= dv {
                    by_rows!(m, acc_block, 2; pa, pp, pv, t, c, u16::MAX, &g);
                    c += 32;
                }
                while c < dv {
                    let mask = if dv - c >= 16 {
                        u16::MAX
                    } else {
                        (1u16 << (dv - c)) - 1
                    };
                    by_rows!(m, acc_block, 1; pa, pp, pv, t, c, mask, &g);
                    c += 16;
                }
                t += m;
            }
        }
    }

    /// Keys, the stride of p's rows and the width of acc / v rows.
    struct Geom {
        nk: usize,
        ldp: usize,
        dv: usize,
    }

    /// Rows t..t + M, columns c..c + 16N of acc (the last register masked by `mask` when
    /// N is 1).
    ///
    /// # Safety
    /// AVX-512F; the cells under the mask exist.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn acc_block<const M: usize, const N: usize>(
        pa: *mut f32,
        pp: *const f32,
        pv: *const f32,
        t: usize,
        c: usize,
        mask: u16,
        g: &Geom,
    ) {
        // SAFETY: the caller's promise; masked lanes are neither read nor written.
        unsafe {
            let mut a: [[__m512; N]; M] = std::array::from_fn(|i| {
                std::array::from_fn(|r| {
                    _mm512_maskz_loadu_ps(mask, pa.add((t + i) * g.dv + c + 16 * r))
                })
            });
            for k in 0..g.nk {
                let vr = pv.add(k * g.dv + c);
                let b: [__m512; N] =
                    std::array::from_fn(|r| _mm512_maskz_loadu_ps(mask, vr.add(16 * r)));
                for (i, ai) in a.iter_mut().enumerate() {
                    let x = _mm512_set1_ps(*pp.add((t + i) * g.ldp + k));
                    for (r, air) in ai.iter_mut().enumerate() {
                        *air = _mm512_fmadd_ps(x, b[r], *air);
                    }
                }
            }
            for (i, ai) in a.iter().enumerate() {
                for (r, air) in ai.iter().enumerate() {
                    _mm512_mask_storeu_ps(pa.add((t + i) * g.dv + c + 16 * r), mask, *air);
                }
            }
        }
    }

    /// `accumulate` in 8-lane registers: blocks of up to 4 rows x 16 columns, then 8, then
    /// scalar columns.
    ///
    /// # Safety
    /// AVX2 and FMA are available; sizes as `accumulate` asserts.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn accumulate_ymm(
        acc: &mut [f32],
        p: &[f32],
        v: &[f32],
        nrows: usize,
        nk: usize,
        ldp: usize,
        dv: usize,
    ) {
        let (pa, pp, pv) = (acc.as_mut_ptr(), p.as_ptr(), v.as_ptr());
        let g = Geom { nk, ldp, dv };
        let mut t = 0;
        // SAFETY: as in accumulate_zmm, with whole 8-lane registers.
        unsafe {
            while t < nrows {
                let m = RM.min(nrows - t);
                let mut c = 0;
                while c + 16 <= dv {
                    by_rows!(m, acc_block_ymm, 2; pa, pp, pv, t, c, &g);
                    c += 16;
                }
                while c + 8 <= dv {
                    by_rows!(m, acc_block_ymm, 1; pa, pp, pv, t, c, &g);
                    c += 8;
                }
                for i in t..t + m {
                    for cc in c..dv {
                        let a = pa.add(i * dv + cc);
                        for k in 0..nk {
                            *a = (*pp.add(i * ldp + k)).mul_add(*pv.add(k * dv + cc), *a);
                        }
                    }
                }
                t += m;
            }
        }
    }

    /// Rows t..t + M, columns c..c + 8N of acc.
    ///
    /// # Safety
    /// AVX2 and FMA; the cells exist.
    #[inline(always)]
    unsafe fn acc_block_ymm<const M: usize, const N: usize>(
        pa: *mut f32,
        pp: *const f32,
        pv: *const f32,
        t: usize,
        c: usize,
        g: &Geom,
    ) {
        // SAFETY: the caller's promise.
        unsafe {
            let mut a: [[__m256; N]; M] = std::array::from_fn(|i| {
                std::array::from_fn(|r| _mm256_loadu_ps(pa.add((t + i) * g.dv + c + 8 * r)))
            });
            for k in 0..g.nk {
                let vr = pv.add(k * g.dv + c);
                let b: [__m256; N] = std::array::from_fn(|r| _mm256_loadu_ps(vr.add(8 * r)));
                for (i, ai) in a.iter_mut().enumerate() {
                    let x = _mm256_set1_ps(*pp.add((t + i) * g.ldp + k));
                    for (r, air) in ai.iter_mut().enumerate() {
                        *air = _mm256_fmadd_ps(x, b[r], *air);
                    }
                }
            }
            for (i, ai) in a.iter().enumerate() {
                for (r, air) in ai.iter().enumerate() {
                    _mm256_storeu_ps(pa.add((t + i) * g.dv + c + 8 * r), *air);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, seed: f32) -> Vec<f32> {
        (0..n)
            .map(|i| ((i as f32 + seed) * 0.731).sin() * 2.5)
            .collect()
    }

    /// Both blocked products against their scalar references, bit for bit, over row counts
    /// that leave every register-block tail and widths that leave every column tail.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn blocked_products_equal_the_scalar_reference_bit_for_bit() {
        let have_fma = crate::simd::has_avx2_fma();
        let have_zmm = crate::simd::features::cpu().avx512_dot();
        for nrows in [1, 2, 3, 4, 5, 7, 64] {
            for (dk, ldk) in [(64, 64), (80, 64), (256, 64), (7, 16), (64, 48)] {
                let q = data(nrows * dk, 1.0);
                let kt = data(dk * ldk, 2.0);
                let mut want = vec![0.0; nrows * ldk];
                scores_ref(&mut want, &q, &kt, nrows, dk, ldk);
                if have_fma {
                    let mut got = vec![f32::NAN; nrows * ldk];
                    // SAFETY: AVX2 and FMA are available; sizes match.
                    unsafe { scores::<true, false>(&mut got, &q, &kt, nrows, dk, ldk) };
                    assert_eq!(got, want, "ymm scores {nrows} {dk} {ldk}");
                }
                if have_zmm {
                    let mut got = vec![f32::NAN; nrows * ldk];
                    // SAFETY: AVX-512F, AVX2 and FMA are available; sizes match.
                    unsafe { scores::<true, true>(&mut got, &q, &kt, nrows, dk, ldk) };
                    assert_eq!(got, want, "zmm scores {nrows} {dk} {ldk}");
                }
            }
            for dk in [16, 32, 64, 80, 7, 256] {
                let rows = data(16 * dk, 6.0);
                let mut want = vec![0.0; dk * 64];
                for i in 0..16 {
                    for j in 0..dk {
                        want[j * 64 + 16 + i] = rows[i * dk + j];
                    }
                }
                let mut got = vec![0.0; dk * 64];
                // SAFETY: sizes match; ZMM only where AVX-512F is available.
                unsafe {
                    if have_zmm {
                        pack_keys::<true>(&mut got, &rows, dk, 64, 16);
                    } else {
                        pack_keys::<false>(&mut got, &rows, dk, 64, 16);
                    }
                }
                assert_eq!(got, want, "pack_keys {dk}");
            }
            for (nk, ldp, dv) in [
                (64, 64, 64),
                (13, 64, 109),
                (64, 64, 256),
                (1, 64, 7),
                (40, 64, 24),
            ] {
                let p = data(nrows * ldp, 3.0);
                let v = data(nk * dv, 4.0);
                let acc0 = data(nrows * dv, 5.0);
                let mut want = acc0.clone();
                accumulate_ref(&mut want, &p, &v, nrows, nk, ldp, dv);
                if have_fma {
                    let mut got = acc0.clone();
                    // SAFETY: AVX2 and FMA are available; sizes match.
                    unsafe { accumulate::<true, false>(&mut got, &p, &v, nrows, nk, ldp, dv) };
                    assert_eq!(got, want, "ymm accumulate {nrows} {nk} {dv}");
                }
                if have_zmm {
                    let mut got = acc0.clone();
                    // SAFETY: AVX-512F, AVX2 and FMA are available; sizes match.
                    unsafe { accumulate::<true, true>(&mut got, &p, &v, nrows, nk, ldp, dv) };
                    assert_eq!(got, want, "zmm accumulate {nrows} {nk} {dv}");
                }
            }
        }
    }
}
