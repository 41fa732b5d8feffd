//! An f64 scalar reference for every op, written from the ops' definitions with plain loops
//! (independent of any backend's kernels). Works on dense ne-ordered arrays from the shadow.

use crate::shadow::{at, ne, Shadow};
use ggml::op::rope_mode;
use ggml::{Context, GluOp, Op, SortOrder, TensorId, UnaryOp};
use std::f64::consts::PI;

struct Arr {
    v: Vec<f64>,
    ne: [usize; 4],
}

impl Arr {
    fn get(&self, i0: usize, i1: usize, i2: usize, i3: usize) -> f64 {
        self.v[at(&self.ne, i0, i1, i2, i3)]
    }
}

fn arr(ctx: &Context, sh: &mut Shadow, id: TensorId) -> Arr {
    Arr {
        v: sh.dense(ctx, id),
        ne: ne(&ctx[id]),
    }
}

fn for_each(ne: [usize; 4], mut f: impl FnMut(usize, usize, usize, usize)) {
    for i3 in 0..ne[3] {
        for i2 in 0..ne[2] {
            for i1 in 0..ne[1] {
                for i0 in 0..ne[0] {
                    f(i0, i1, i2, i3)
                }
            }
        }
    }
}

fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
}
fn gelu_quick(x: f64) -> f64 {
    x / (1.0 + (-1.702 * x).exp())
}
fn gelu_erf(x: f64) -> f64 {
    0.5 * x * (1.0 + libm::erf(x / 2f64.sqrt()))
}
fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

fn unary(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sgn => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }
        }
        UnaryOp::Neg => -x,
        UnaryOp::Step => (x > 0.0) as i32 as f64,
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Elu => {
            if x > 0.0 {
                x
            } else {
                x.exp() - 1.0
            }
        }
        UnaryOp::Relu => x.max(0.0),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Gelu => gelu(x),
        UnaryOp::GeluQuick => gelu_quick(x),
        UnaryOp::Silu => silu(x),
        UnaryOp::HardSwish => x * ((x + 3.0) / 6.0).clamp(0.0, 1.0),
        UnaryOp::HardSigmoid => ((x + 3.0) / 6.0).clamp(0.0, 1.0),
        UnaryOp::Exp => x.exp(),
        UnaryOp::GeluErf => gelu_erf(x),
    }
}

fn glu(op: GluOp, x: f64, g: f64) -> f64 {
    match op {
        GluOp::Reglu => x.max(0.0) * g,
        GluOp::Geglu => gelu(x) * g,
        GluOp::Swiglu => silu(x) * g,
        GluOp::GegluErf => gelu_erf(x) * g,
        GluOp::GegluQuick => gelu_quick(x) * g,
    }
}

fn alibi(max_bias: f32, n_head: usize, h: usize) -> f64 {
    if max_bias <= 0.0 {
        return 1.0;
    }
    let n_log2 = 1usize << (n_head as f64).log2().floor() as u32;
    let m0 = 2f64.powf(-(max_bias as f64) / n_log2 as f64);
    let m1 = 2f64.powf(-(max_bias as f64) / 2.0 / n_log2 as f64);
    if h < n_log2 {
        m0.powi(h as i32 + 1)
    } else {
        m1.powi(2 * (h - n_log2) as i32 + 1)
    }
}

/// Evaluates one node into the shadow.
pub fn eval(ctx: &Context, sh: &mut Shadow, id: TensorId) {
    let t = &ctx[id];
    let on = ne(t);
    let n_out: usize = on.iter().product();
    let s = |i: usize| t.src[i];
    let src = |sh: &mut Shadow, i: usize| s(i).map(|x| arr(ctx, sh, x));
    let mut out = vec![0.0f64; n_out];
    match t.op {
        Op::None | Op::Reshape | Op::View | Op::Permute { .. } | Op::Transpose => return,
        Op::Dup | Op::Cont | Op::Cpy => {
            let a = src(sh, 0).expect("src");
            out.copy_from_slice(&a.v[..n_out]);
        }
        Op::Add | Op::Sub | Op::Mul | Op::Div => {
            let (a, b) = (src(sh, 0).expect("a"), src(sh, 1).expect("b"));
            let mut k = 0;
            for_each(on, |i0, i1, i2, i3| {
                let x = a.get(i0, i1, i2, i3);
                let y = b.get(i0 % b.ne[0], i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3]);
                out[k] = match t.op {
                    Op::Add => x + y,
                    Op::Sub => x - y,
                    Op::Mul => x * y,
                    _ => x / y,
                };
                k += 1;
            });
        }
        Op::AddId => {
            let (a, b, ids) = (
                src(sh, 0).expect("a"),
                src(sh, 1).expect("b"),
                src(sh, 2).expect("ids"),
            );
            let mut k = 0;
            for_each(on, |i0, i1, i2, i3| {
                let e = ids.get(i1, i2, 0, 0) as usize;
                out[k] = a.get(i0, i1, i2, i3) + b.get(i0, e, 0, 0);
                k += 1;
            });
        }
        Op::Sqr | Op::Sqrt | Op::Scale { .. } | Op::Clamp { .. } | Op::Unary(_) => {
            let a = src(sh, 0).expect("a");
            for (o, &x) in out.iter_mut().zip(&a.v) {
                *o = match t.op {
                    Op::Sqr => x * x,
                    Op::Sqrt => x.sqrt(),
                    Op::Scale { s, b } => x * s as f64 + b as f64,
                    Op::Clamp { min, max } => x.clamp(min as f64, max as f64),
                    Op::Unary(u) => unary(u, x),
                    _ => unreachable!(),
                };
            }
        }
        Op::Fill { c } => out.fill(c as f64),
        Op::Glu { op, swapped } => {
            let a = src(sh, 0).expect("a");
            let b = src(sh, 1);
            let nc = on[0];
            let mut k = 0;
            for_each(on, |i0, i1, i2, i3| {
                let (x, g) = match &b {
                    Some(b) => (a.get(i0, i1, i2, i3), b.get(i0, i1, i2, i3)),
                    None if swapped => (a.get(i0 + nc, i1, i2, i3), a.get(i0, i1, i2, i3)),
                    None => (a.get(i0, i1, i2, i3), a.get(i0 + nc, i1, i2, i3)),
                };
                out[k] = glu(op, x, g);
                k += 1;
            });
        }
        Op::Sum => out[0] = src(sh, 0).expect("a").v.iter().sum(),
        Op::SumRows | Op::Mean => {
            let a = src(sh, 0).expect("a");
            for (r, row) in a.v.chunks(a.ne[0]).enumerate() {
                let sum: f64 = row.iter().sum();
                out[r] = if matches!(t.op, Op::Mean) {
                    sum / a.ne[0] as f64
                } else {
                    sum
                };
            }
        }
        Op::Argmax => {
            let a = src(sh, 0).expect("a");
            for (r, row) in a.v.chunks(a.ne[0]).enumerate() {
                // ties go to the last maximum, as ggml_vec_argmax_f32
                let mut best = 0;
                for (i, &v) in row.iter().enumerate() {
                    if v >= row[best] {
                        best = i;
                    }
                }
                out[r] = best as f64;
            }
        }
        Op::Argsort { .. } | Op::TopK { .. } => {
            let a = src(sh, 0).expect("a");
            let desc = !matches!(
                t.op,
                Op::Argsort {
                    order: SortOrder::Asc
                }
            );
            for (r, row) in a.v.chunks(a.ne[0]).enumerate() {
                let mut idx: Vec<usize> = (0..row.len()).collect();
                idx.sort_by(|&x, &y| {
                    let o = row[x]
                        .partial_cmp(&row[y])
                        .unwrap_or(std::cmp::Ordering::Equal);
                    if desc {
                        o.reverse()
                    } else {
                        o
                    }
                });
                for i in 0..on[0] {
                    out[r * on[0] + i] = idx[i] as f64;
                }
            }
        }
        Op::Repeat => {
            let a = src(sh, 0).expect("a");
            let mut k = 0;
            for_each(on, |i0, i1, i2, i3| {
                out[k] = a.get(i0 % a.ne[0], i1 % a.ne[1], i2 % a.ne[2], i3 % a.ne[3]);
                k += 1;
            });
        }
        Op::Concat { dim } => {
            let (a, b) = (src(sh, 0).expect("a"), src(sh, 1).expect("b"));
            let d = dim as usize;
            let mut k = 0;
            for_each(on, |i0, i1, i2, i3| {
                let mut i = [i0, i1, i2, i3];
                out[k] = if i[d] < a.ne[d] {
                    a.get(i[0], i[1], i[2], i[3])
                } else {
                    i[d] -= a.ne[d];
                    b.get(i[0], i[1], i[2], i[3])
                };
                k += 1;
            });
        }
        Op::Norm { eps } | Op::RmsNorm { eps } => {
            let a = src(sh, 0).expect("a");
            let n = a.ne[0] as f64;
            for (r, row) in a.v.chunks(a.ne[0]).enumerate() {
                let mean = if matches!(t.op, Op::Norm { .. }) {
                    row.iter().sum::<f64>() / n
                } else {
                    0.0
                };
                let var = row.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
                let sc = 1.0 / (var + eps as f64).sqrt();
                for (i, x) in row.iter().enumerate() {
                    out[r * a.ne[0] + i] = (x - mean) * sc;
                }
            }
        }
        Op::MulMat { .. } => {
            let (a, b) = (src(sh, 0).expect("a"), src(sh, 1).expect("b"));
            let (r2, r3) = (b.ne[2] / a.ne[2], b.ne[3] / a.ne[3]);
            let mut k = 0;
            for_each(on, |m, n, i2, i3| {
                let mut acc = 0.0;
                for kk in 0..a.ne[0] {
                    acc += a.get(kk, m, i2 / r2, i3 / r3) * b.get(kk, n, i2, i3);
                }
                out[k] = acc;
                k += 1;
            });
        }
        Op::MulMatId => {
            let (a, b, ids) = (
                src(sh, 0).expect("as"),
                src(sh, 1).expect("b"),
                src(sh, 2).expect("ids"),
            );
            let mut k = 0;
            for_each(on, |m, id, tok, _| {
                let e = ids.get(id, tok, 0, 0) as usize;
                let mut acc = 0.0;
                for kk in 0..a.ne[0] {
                    acc += a.get(kk, m, e, 0) * b.get(kk, id % b.ne[1], tok, 0);
                }
                out[k] = acc;
                k += 1;
            });
        }
        Op::GetRows => {
            let (a, b) = (src(sh, 0).expect("a"), src(sh, 1).expect("idx"));
            let mut k = 0;
            for_each(on, |i0, i10, i11, i12| {
                let r = b.get(i10, i11, i12, 0) as usize;
                out[k] = a.get(i0, r, i11, i12);
                k += 1;
            });
        }
        Op::SetRows => {
            let (b, c) = (src(sh, 0).expect("rows"), src(sh, 1).expect("idx"));
            out = sh.dense(ctx, id);
            for_each(b.ne, |i0, i01, i02, i03| {
                let r = c.get(i01, i02 % c.ne[1], i03 % c.ne[2], 0) as usize;
                out[at(&on, i0, r, i02, i03)] = b.get(i0, i01, i02, i03);
            });
        }
        Op::SoftMax { scale, max_bias } => {
            let a = src(sh, 0).expect("a");
            let mask = src(sh, 1);
            let sinks = src(sh, 2);
            for_each([1, on[1], on[2], on[3]], |_, i1, i2, i3| {
                let slope = alibi(max_bias, on[2], i2);
                let w: Vec<f64> = (0..on[0])
                    .map(|i0| {
                        let m = mask
                            .as_ref()
                            .map_or(0.0, |m| m.get(i0, i1, i2 % m.ne[2], i3 % m.ne[3]));
                        a.get(i0, i1, i2, i3) * scale as f64 + slope * m
                    })
                    .collect();
                let sink = sinks.as_ref().map(|s| s.get(i2, 0, 0, 0));
                let mx = w
                    .iter()
                    .cloned()
                    .chain(sink)
                    .fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = w.iter().map(|x| (x - mx).exp()).sum::<f64>()
                    + sink.map_or(0.0, |s| (s - mx).exp());
                for i0 in 0..on[0] {
                    out[at(&on, i0, i1, i2, i3)] = (w[i0] - mx).exp() / sum;
                }
            });
        }
        Op::Rope(rp) => {
            let (a, pos) = (src(sh, 0).expect("a"), src(sh, 1).expect("pos"));
            let ff = src(sh, 2);
            let nd = rp.n_dims as usize;
            let neox = rp.mode & rope_mode::NEOX != 0;
            let corr = |beta: f64| {
                nd as f64 * (rp.n_ctx_orig as f64 / (beta * 2.0 * PI)).ln()
                    / (2.0 * (rp.freq_base as f64).ln())
            };
            let low = corr(rp.beta_fast as f64).floor().max(0.0);
            let high = corr(rp.beta_slow as f64).ceil().min(nd as f64 - 1.0);
            out.copy_from_slice(&a.v);
            for_each([1, on[1], on[2], on[3]], |_, i1, i2, i3| {
                let p = pos.get(i2, 0, 0, 0);
                for i in 0..nd / 2 {
                    let f = ff.as_ref().map_or(1.0, |f| f.get(i, 0, 0, 0));
                    let extrap = p * (rp.freq_base as f64).powf(-2.0 * i as f64 / nd as f64) / f;
                    let interp = rp.freq_scale as f64 * extrap;
                    let mut mscale = rp.attn_factor as f64;
                    let theta = if rp.ext_factor != 0.0 {
                        let y = (i as f64 - low) / (high - low).max(0.001);
                        let mix = (1.0 - y.clamp(0.0, 1.0)) * rp.ext_factor as f64;
                        mscale *= 1.0 + 0.1 * (1.0 / rp.freq_scale as f64).ln();
                        interp * (1.0 - mix) + extrap * mix
                    } else {
                        interp
                    };
                    let (c, s) = (theta.cos() * mscale, theta.sin() * mscale);
                    let off = rp.n_offs as usize;
                    let (j0, j1) = if neox {
                        (off + i, off + i + nd / 2)
                    } else {
                        (off + 2 * i, off + 2 * i + 1)
                    };
                    let (x0, x1) = (a.get(j0, i1, i2, i3), a.get(j1, i1, i2, i3));
                    out[at(&on, j0, i1, i2, i3)] = x0 * c - x1 * s;
                    out[at(&on, j1, i1, i2, i3)] = x0 * s + x1 * c;
                }
            });
        }
        Op::FlashAttnExt {
            scale,
            max_bias,
            logit_softcap,
            ..
        } => {
            let (q, k, v) = (
                src(sh, 0).expect("q"),
                src(sh, 1).expect("k"),
                src(sh, 2).expect("v"),
            );
            let mask = src(sh, 3);
            let sinks = src(sh, 4);
            let (dk, dv, nkv) = (q.ne[0], v.ne[0], k.ne[1]);
            for iq3 in 0..q.ne[3] {
                for iq2 in 0..q.ne[2] {
                    for iq1 in 0..q.ne[1] {
                        let (hk, hv) = (iq2 / (q.ne[2] / k.ne[2]), iq2 / (q.ne[2] / v.ne[2]));
                        let (k3, v3) = (iq3 / (q.ne[3] / k.ne[3]), iq3 / (q.ne[3] / v.ne[3]));
                        let slope = alibi(max_bias, q.ne[2], iq2);
                        let sc: Vec<f64> = (0..nkv)
                            .map(|j| {
                                let mut s: f64 = (0..dk)
                                    .map(|d| q.get(d, iq1, iq2, iq3) * k.get(d, j, hk, k3))
                                    .sum();
                                s *= scale as f64;
                                if logit_softcap != 0.0 {
                                    s = logit_softcap as f64 * (s / logit_softcap as f64).tanh();
                                }
                                s + mask.as_ref().map_or(0.0, |m| {
                                    slope * m.get(j, iq1, iq2 % m.ne[2], iq3 % m.ne[3])
                                })
                            })
                            .collect();
                        let sink = sinks.as_ref().map(|s| s.get(iq2, 0, 0, 0));
                        let mx = sc
                            .iter()
                            .cloned()
                            .chain(sink)
                            .fold(f64::NEG_INFINITY, f64::max);
                        let w: Vec<f64> = sc
                            .iter()
                            .map(|&x| {
                                if x == f64::NEG_INFINITY {
                                    0.0
                                } else {
                                    (x - mx).exp()
                                }
                            })
                            .collect();
                        let sum: f64 = w.iter().sum::<f64>() + sink.map_or(0.0, |s| (s - mx).exp());
                        for d in 0..dv {
                            let acc: f64 = (0..nkv).map(|j| w[j] * v.get(d, j, hv, v3)).sum();
                            out[at(&on, d, iq2, iq1, iq3)] =
                                if sum == 0.0 { 0.0 } else { acc / sum };
                        }
                    }
                }
            }
        }
    }
    sh.store(ctx, id, &out);
}
