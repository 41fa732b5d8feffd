//! SOFT_MAX (scale, broadcast f16/f32 mask, ALiBi, sinks) and FLASH_ATTN_EXT with ggml's CPU
//! algorithm: one pass of online softmax per query row, the query converted to the type K's dot
//! product wants, and an f16 accumulator when V is f16 (as ggml, rounding at every step).

use super::{alibi_slope, Node, Params};
use crate::quant::mm_traits;
use crate::tref::{load_scalar, split, TRef};
use crate::{fp, simd};
use ggml::{Context, Tensor, Type};

mod block;
mod tiled;

pub(crate) fn soft_max(p: &mut Params, n: &Node, scale: f32, max_bias: f32) {
    let (a, d) = (n.s(0), n.dst);
    let (mask, sinks) = (n.src[1], n.src[2]);
    let ne0 = a.ne[0];
    let n_head = a.ne[2];
    let (r0, r1) = split(a.nrows(), p.ith, p.nth);
    let buf = p.scratch(ne0 * 2);
    let (buf, mbuf) = buf.split_at_mut(ne0);
    for r in r0..r1 {
        let (i1, i2, i3) = a.unflat_row(r);
        let slope = alibi_slope(max_bias, n_head, i2);
        // SAFETY: dst has a's shape and this thread owns row r; the mask row (i1, i2 % ne12,
        // i3 % ne13) exists (mask.ne1 >= a.ne1, checked by the constructor); sinks hold one
        // value per head.
        unsafe {
            a.load_row(i1, i2, i3, buf);
            for v in buf.iter_mut() {
                *v *= scale;
            }
            if let Some(m) = mask {
                load_mask_row(&m, i1, i2, i3, 0, slope, mbuf);
                for (v, &mv) in buf.iter_mut().zip(mbuf.iter()) {
                    *v += mv;
                }
            }
            let mut max = buf.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            let sink = sinks.map(|s| s.get_f32(i2, 0, 0, 0));
            if let Some(s) = sink {
                max = max.max(s);
            }
            let mut sum = simd::exp_sub_sum(buf, max);
            if let Some(s) = sink {
                sum += (s - max).exp() as f64;
            }
            let inv = (1.0 / sum) as f32;
            for v in buf.iter_mut() {
                *v *= inv;
            }
            d.store_row(i1, i2, i3, buf);
        }
    }
}

/// Bytes per thread: the converted query row, padded to a cache line.
fn q_bytes(ctx: &Context, t: &Tensor) -> usize {
    let (Some(q), Some(k)) = (t.src[0], t.src[1]) else {
        return 0;
    };
    let dk = ctx[q].ne[0];
    let vdt = mm_traits(ctx[k].ty).map_or(Type::F32, |tr| tr.vec_dot_type);
    vdt.row_size(dk).div_ceil(64) * 64
}

pub(crate) fn work_size(ctx: &Context, t: &Tensor, nth: usize) -> usize {
    q_bytes(ctx, t) * nth
}

pub(crate) fn flash_attn_ext(p: &mut Params, n: &Node, scale: f32, max_bias: f32, softcap: f32) {
    let (q, k, v, d) = (n.s(0), n.s(1), n.s(2), n.dst);
    let (mask, sinks) = (n.src[3], n.src[4]);
    if tiled::applies(&q, &k, &v) {
        let (r0, r1) = split(q.ne[1] * q.ne[2] * q.ne[3], p.ith, p.nth);
        let buf = p.scratch(tiled::scratch_len(q.ne[0], v.ne[0], k.ne[1]));
        let pr = tiled::Params {
            scale,
            max_bias,
            softcap,
        };
        let ops = tiled::Operands {
            q: &q,
            k: &k,
            v: &v,
            mask,
            sinks,
            d: &d,
        };
        // SAFETY: shapes checked by the constructor; split gives this thread its own rows;
        // buf has scratch_len floats.
        unsafe { tiled::rows(&ops, &pr, r0, r1, buf) };
        return;
    }
    let ktr = match mm_traits(k.ty) {
        Some(t) => t,
        None => panic!("flash_attn_ext: no dot product for K type {}", k.ty),
    };
    let (dk, dv, n_kv) = (q.ne[0], v.ne[0], k.ne[1]);
    let (nq1, nq2, nq3) = (q.ne[1], q.ne[2], q.ne[3]);
    let (rk2, rk3) = (nq2 / k.ne[2], nq3 / k.ne[3]);
    let (rv2, rv3) = (nq2 / v.ne[2], nq3 / v.ne[3]);
    let krow = k.ty.row_size(dk as i64);
    let qrow = ktr.vec_dot_type.row_size(dk as i64);
    let qb = qrow.div_ceil(64) * 64;
    let v_f16 = v.ty == Type::F16 && v.rows_contiguous();
    let softcap_on = softcap != 0.0;
    let scale = if softcap_on { scale / softcap } else { scale };

    // SAFETY: wdata holds qb bytes per thread (work_size).
    let q_q = unsafe { std::slice::from_raw_parts_mut(p.wdata.add(qb * p.ith), qrow) };
    let (r0, r1) = split(nq1 * nq2 * nq3, p.ith, p.nth);
    let n_mask = if mask.is_some() { n_kv } else { 0 };
    let buf = p.scratch(dk + dv * 3 + n_mask);
    let (qf, rest) = buf.split_at_mut(dk);
    let (acc32, rest) = rest.split_at_mut(dv);
    let (v32, rest) = rest.split_at_mut(dv);
    let (acc16f, mrow) = rest.split_at_mut(dv);
    // the f16 accumulator lives in the scratch floats' memory as u16s
    // SAFETY: acc16f has dv f32s = 2 * dv u16s of writable, aligned memory.
    let acc16 = unsafe { std::slice::from_raw_parts_mut(acc16f.as_mut_ptr() as *mut u16, dv) };

    for ir in r0..r1 {
        let iq3 = ir / (nq2 * nq1);
        let iq2 = (ir - iq3 * nq2 * nq1) / nq1;
        let iq1 = ir - iq3 * nq2 * nq1 - iq2 * nq1;
        let (ik2, ik3) = (iq2 / rk2, iq3 / rk3);
        let (iv2, iv3) = (iq2 / rv2, iq3 / rv3);
        let slope = alibi_slope(max_bias, nq2, iq2);

        let mut s_sum = 0.0f32;
        let mut m_max = f32::NEG_INFINITY;
        acc32.fill(0.0);
        acc16.fill(0);
        // SAFETY: every row index below is inside its tensor (shapes checked by the
        // constructor); this thread owns dst row (iq2, iq1, iq3).
        unsafe {
            q.load_row(iq1, iq2, iq3, qf);
            (ktr.from_float)(qf, q_q);
            // the mask row as slope * m, converted once per query row (not once per key)
            if let Some(m) = mask {
                load_mask_row(&m, iq1, iq2, iq3, 0, slope, mrow);
            }
            for ic in 0..n_kv {
                // without a mask the row is empty
                let mv = mrow.get(ic).copied().unwrap_or(0.0);
                if mv == f32::NEG_INFINITY {
                    continue;
                }
                let kx = std::slice::from_raw_parts(k.row_ptr(ic, ik2, ik3), krow);
                let mut s = (ktr.vec_dot)(dk, kx, q_q);
                s *= scale;
                if softcap_on {
                    s = softcap * s.tanh();
                }
                s += mv;
                let m_old = m_max;
                let mut ms = 1.0f32;
                let mut vs = 1.0f32;
                if s > m_max {
                    m_max = s;
                    ms = (m_old - m_max).exp();
                    if v_f16 {
                        simd::scale_f16(acc16, ms);
                    } else {
                        for x in acc32.iter_mut() {
                            *x *= ms;
                        }
                    }
                } else {
                    vs = (s - m_max).exp();
                }
                if v_f16 {
                    let vx = std::slice::from_raw_parts(v.row_ptr(ic, iv2, iv3) as *const u16, dv);
                    simd::mad_f16(acc16, vx, vs);
                } else {
                    v.load_row(ic, iv2, iv3, v32);
                    // ggml_vec_mad_f32 fuses (its SIMD FMA, and GCC contracts the tail)
                    for (a, &x) in acc32.iter_mut().zip(v32.iter()) {
                        *a = x.mul_add(vs, *a);
                    }
                }
                // GCC contracts ggml's `S = S*ms + vs` into one FMA (seen in libggml-cpu's
                // code); the sinks' update below stays two roundings there
                s_sum = s_sum.mul_add(ms, vs);
            }
            if v_f16 {
                for (a, &h) in acc32.iter_mut().zip(acc16.iter()) {
                    *a = fp::f16_to_f32(h);
                }
            }
            if let Some(sk) = sinks {
                let s = sk.get_f32(iq2, 0, 0, 0);
                let mut ms = 1.0f32;
                let mut vs = 1.0f32;
                if s > m_max {
                    ms = (m_max - s).exp();
                    for x in acc32.iter_mut() {
                        *x *= ms;
                    }
                } else {
                    vs = (s - m_max).exp();
                }
                s_sum = s_sum * ms + vs;
            }
            let inv = if s_sum == 0.0 { 0.0 } else { 1.0 / s_sum };
            for x in acc32.iter_mut() {
                *x *= inv;
            }
            d.store_row(iq2, iq1, iq3, acc32);
        }
    }
}

/// out[i] = slope * mask[c0 + i] for the mask row (i1, i2 % ne2, i3 % ne3), the same products
/// the per-element loads gave; F16 and F32 rows are converted in bulk.
///
/// # Safety
/// The row exists in `m` and c0 + out.len() <= `m.ne[0]`.
unsafe fn load_mask_row(
    m: &TRef,
    i1: usize,
    i2: usize,
    i3: usize,
    c0: usize,
    slope: f32,
    out: &mut [f32],
) {
    let n = out.len();
    // SAFETY: the caller guarantees the row; elements c0..c0 + n of it are read.
    unsafe {
        let mp = (m.row_ptr(i1, i2 % m.ne[2], i3 % m.ne[3]) as *const u8).add(c0 * m.nb[0]);
        match m.ty {
            Type::F16 if m.nb[0] == 2 => {
                fp::f16_to_f32_row(std::slice::from_raw_parts(mp as *const u16, n), out)
            }
            Type::F32 if m.nb[0] == 4 => {
                out.copy_from_slice(std::slice::from_raw_parts(mp as *const f32, n))
            }
            _ => {
                for (i, v) in out.iter_mut().enumerate() {
                    *v = load_scalar(m.ty, mp.add(i * m.nb[0]));
                }
            }
        }
    }
    if slope != 1.0 {
        for v in out.iter_mut() {
            *v *= slope;
        }
    }
}
