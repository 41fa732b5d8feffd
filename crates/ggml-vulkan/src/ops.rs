//! Which ops the Vulkan backend claims (`supports`) and how each becomes one shader dispatch
//! (`plan`): the shader, its four buffer bindings and its push constants.

use crate::buffer::device_mem;
use crate::gpu::Gpu;
use ash::vk;
use ggml::op::rope_mode;
use ggml::{Context, GluOp, Op, Tensor, TensorId, Type, UnaryOp};

/// The weight types of MUL_MAT, MUL_MAT_ID and GET_ROWS with their shader variants.
const WEIGHT_TYPES: &[(Type, [&str; 3])] = &[
    (Type::F32, ["mul_mat_f32", "mul_mat_id_f32", "get_rows_f32"]),
    (Type::F16, ["mul_mat_f16", "mul_mat_id_f16", "get_rows_f16"]),
    (
        Type::Bf16,
        ["mul_mat_bf16", "mul_mat_id_bf16", "get_rows_bf16"],
    ),
    (
        Type::Q4_0,
        ["mul_mat_q4_0", "mul_mat_id_q4_0", "get_rows_q4_0"],
    ),
    (
        Type::Q4_1,
        ["mul_mat_q4_1", "mul_mat_id_q4_1", "get_rows_q4_1"],
    ),
    (
        Type::Q5_0,
        ["mul_mat_q5_0", "mul_mat_id_q5_0", "get_rows_q5_0"],
    ),
    (
        Type::Q5_1,
        ["mul_mat_q5_1", "mul_mat_id_q5_1", "get_rows_q5_1"],
    ),
    (
        Type::Q8_0,
        ["mul_mat_q8_0", "mul_mat_id_q8_0", "get_rows_q8_0"],
    ),
    (
        Type::Q2K,
        ["mul_mat_q2_k", "mul_mat_id_q2_k", "get_rows_q2_k"],
    ),
    (
        Type::Q3K,
        ["mul_mat_q3_k", "mul_mat_id_q3_k", "get_rows_q3_k"],
    ),
    (
        Type::Q4K,
        ["mul_mat_q4_k", "mul_mat_id_q4_k", "get_rows_q4_k"],
    ),
    (
        Type::Q5K,
        ["mul_mat_q5_k", "mul_mat_id_q5_k", "get_rows_q5_k"],
    ),
    (
        Type::Q6K,
        ["mul_mat_q6_k", "mul_mat_id_q6_k", "get_rows_q6_k"],
    ),
    (
        Type::Iq4Nl,
        ["mul_mat_iq4_nl", "mul_mat_id_iq4_nl", "get_rows_iq4_nl"],
    ),
];

const MUL_MAT: usize = 0;
const MUL_MAT_ID: usize = 1;
const GET_ROWS: usize = 2;

/// The shader of `kind` (MUL_MAT, MUL_MAT_ID, GET_ROWS) for weights of type `ty`.
fn weight_shader(ty: Type, kind: usize) -> Option<&'static str> {
    WEIGHT_TYPES
        .iter()
        .find(|(t, _)| *t == ty)
        .map(|(_, s)| s[kind])
}

fn weight_suffix(ty: Type) -> Option<&'static str> {
    weight_shader(ty, MUL_MAT)
}

/// The float types the copy shaders convert between (their code in the shaders).
fn float_code(ty: Type) -> Option<u32> {
    match ty {
        Type::F32 => Some(0),
        Type::F16 => Some(1),
        Type::Bf16 => Some(2),
        _ => None,
    }
}

fn unary_code(u: UnaryOp) -> u32 {
    match u {
        UnaryOp::Abs => 0,
        UnaryOp::Sgn => 1,
        UnaryOp::Neg => 2,
        UnaryOp::Step => 3,
        UnaryOp::Tanh => 4,
        UnaryOp::Elu => 5,
        UnaryOp::Relu => 6,
        UnaryOp::Sigmoid => 7,
        UnaryOp::Gelu => 8,
        UnaryOp::GeluQuick => 9,
        UnaryOp::Silu => 10,
        UnaryOp::HardSwish => 11,
        UnaryOp::HardSigmoid => 12,
        UnaryOp::Exp => 13,
        UnaryOp::GeluErf => 14,
    }
}

fn glu_code(g: GluOp) -> u32 {
    match g {
        GluOp::Reglu => 0,
        GluOp::Geglu => 1,
        GluOp::Swiglu => 2,
        GluOp::GegluErf => 3,
        GluOp::GegluQuick => 4,
    }
}

/// Element strides exist: every byte stride is a multiple of the element size.
fn elem_strides(t: &Tensor) -> bool {
    let es = t.ty.type_size();
    t.ty.block_size() == 1 && t.nb.iter().all(|&n| n % es == 0)
}

fn src<'a>(ctx: &'a Context, t: &Tensor, i: usize) -> Option<&'a Tensor> {
    t.src[i].map(|s| &ctx[s])
}

/// ggml_backend_vk_device_supports_op for what this backend implements.
pub(crate) fn supports(gpu: &Gpu, ctx: &Context, id: TensorId) -> bool {
    let t = &ctx[id];
    let lim = gpu.limits;
    // tensors past the storage-buffer range or the largest allocation stay on the host, as in
    // ggml-vulkan (lavapipe: 128 MiB)
    let fits = |x: &Tensor| x.nbytes() <= lim.max_storage_range && x.nbytes() <= lim.max_buffer;
    if !fits(t) || t.srcs().any(|s| !fits(&ctx[s])) {
        return false;
    }
    let s0 = src(ctx, t, 0);
    let s1 = src(ctx, t, 1);
    let f32s = |x: Option<&Tensor>| x.is_some_and(|x| x.ty == Type::F32 && elem_strides(x));
    let is_f32 = t.ty == Type::F32 && elem_strides(t);
    match t.op {
        Op::None | Op::Reshape | Op::View | Op::Permute { .. } | Op::Transpose => true,
        Op::Add | Op::Sub | Op::Mul | Op::Div => {
            is_f32
                && f32s(s0)
                && f32s(s1)
                && s1.is_some_and(|b| s0.is_some_and(|a| b.can_repeat_to(a)))
        }
        Op::Unary(_) | Op::Sqr | Op::Sqrt | Op::Scale { .. } | Op::Clamp { .. } => {
            is_f32 && f32s(s0)
        }
        Op::Glu { .. } => is_f32 && f32s(s0) && (s1.is_none() || f32s(s1)),
        Op::Cpy | Op::Dup | Op::Cont => {
            s0.is_some_and(|a| float_code(a.ty).is_some() && elem_strides(a))
                && float_code(t.ty).is_some()
                && elem_strides(t)
        }
        Op::GetRows => {
            t.ty == Type::F32
                && elem_strides(t)
                && s0.is_some_and(|a| weight_suffix(a.ty).is_some() && a.nb[0] == a.ty.type_size())
                && s1.is_some_and(|i| i.ty == Type::I32 && elem_strides(i))
        }
        Op::SetRows => {
            float_code(t.ty).is_some()
                && elem_strides(t)
                && f32s(s0)
                && s1.is_some_and(|i| matches!(i.ty, Type::I32 | Type::I64) && elem_strides(i))
        }
        Op::RmsNorm { .. } | Op::Norm { .. } => is_f32 && f32s(s0),
        Op::SoftMax { .. } => {
            let mask_ok = src(ctx, t, 1).is_none_or(|m| {
                matches!(m.ty, Type::F16 | Type::F32)
                    && elem_strides(m)
                    && m.nb[0] == m.ty.type_size()
            });
            let sinks_ok = src(ctx, t, 2).is_none_or(|s| s.ty == Type::F32 && s.is_contiguous());
            is_f32
                && t.nb[0] == 4
                && s0.is_some_and(|a| a.ty == Type::F32 && a.nb[0] == 4 && elem_strides(a))
                && mask_ok
                && sinks_ok
        }
        Op::Rope(rp) => {
            // no shader takes ggml_rope_set_offset's offset
            let mode_ok =
                (rp.mode == rope_mode::NORMAL || rp.mode == rope_mode::NEOX) && rp.n_offs == 0;
            let pos_ok = s1.is_some_and(|p| p.ty == Type::I32 && p.is_contiguous());
            let ff_ok = src(ctx, t, 2).is_none_or(|f| f.ty == Type::F32 && f.is_contiguous());
            let ty_ok = |x: &Tensor| {
                matches!(x.ty, Type::F32 | Type::F16)
                    && x.nb[0] == x.ty.type_size()
                    && elem_strides(x)
            };
            mode_ok && pos_ok && ff_ok && ty_ok(t) && s0.is_some_and(ty_ok) && t.ne[0] % 2 == 0
        }
        Op::FlashAttnExt { .. } => {
            let (Some(q), Some(k), Some(v)) = (s0, s1, src(ctx, t, 2)) else {
                return false;
            };
            let kv_ok = |x: &Tensor| {
                matches!(x.ty, Type::F16 | Type::F32)
                    && x.nb[0] == x.ty.type_size()
                    && elem_strides(x)
            };
            let mask_ok =
                src(ctx, t, 3).is_none_or(|m| m.ty == Type::F16 && m.nb[0] == 2 && elem_strides(m));
            let sinks_ok = src(ctx, t, 4).is_none_or(|s| s.ty == Type::F32 && s.is_contiguous());
            q.ty == Type::F32
                && elem_strides(q)
                && q.nb[0] == 4
                && kv_ok(k)
                && kv_ok(v)
                && k.ty == v.ty
                && v.ne[0] <= 256
                && k.ne[2] > 0
                && q.ne[2] % k.ne[2] == 0
                && k.ne[2] == v.ne[2]
                && k.ne[3] == v.ne[3]
                && q.ne[3] % k.ne[3] == 0
                && t.ty == Type::F32
                && t.is_contiguous()
                && mask_ok
                && sinks_ok
        }
        Op::MulMatId => {
            let (Some(a), Some(ids)) = (s0, src(ctx, t, 2)) else {
                return false;
            };
            weight_suffix(a.ty).is_some()
                && a.nb[0] == a.ty.type_size()
                && a.ne[0] % a.ty.block_size() as i64 == 0
                && f32s(s1)
                && ids.ty == Type::I32
                && elem_strides(ids)
                && is_f32
                && t.nb[0] == 4
        }
        Op::SumRows | Op::Mean => is_f32 && f32s(s0),
        Op::Concat { dim } => {
            let ok = |x: &Tensor| matches!(x.ty, Type::F32 | Type::I32) && elem_strides(x);
            (0..4).contains(&dim) && ok(t) && s0.is_some_and(ok) && s1.is_some_and(ok)
        }
        Op::Argsort { .. } | Op::TopK { .. } => {
            t.ty == Type::I32 && elem_strides(t) && f32s(s0) && s0.is_some_and(|a| a.ne[0] <= 65536)
        }
        Op::AddId => {
            is_f32
                && f32s(s0)
                && f32s(s1)
                && src(ctx, t, 2).is_some_and(|i| i.ty == Type::I32 && elem_strides(i))
        }
        Op::MulMat { .. } => {
            let Some(a) = s0 else { return false };
            weight_suffix(a.ty).is_some()
                && a.nb[0] == a.ty.type_size()
                && a.ne[0] % a.ty.block_size() as i64 == 0
                && f32s(s1)
                && t.ty == Type::F32
                && t.nb[0] == 4
                && elem_strides(t)
                && s1.is_some_and(|b| b.ne[2] * b.ne[3] <= 65535)
        }
        _ => false,
    }
}

/// One storage-buffer binding: a range of a device buffer.
#[derive(Clone, Copy)]
pub(crate) struct Bind {
    pub buffer: vk::Buffer,
    pub offset: u64,
    pub range: u64,
}

pub(crate) struct Dispatch {
    pub shader: &'static str,
    /// src0, src1, src2, dst, src3, src4
    pub bind: [Bind; 6],
    pub push: [u32; 32],
    pub groups: [u32; 3],
}

/// The binding for tensor `t` (its buffer from an aligned offset on, within the storage range)
/// and the tensor's byte offset inside that binding.
fn bind(gpu: &Gpu, t: &Tensor) -> Result<(Bind, usize), String> {
    let (mem, off) = device_mem(t).ok_or_else(|| {
        format!(
            "tensor '{}' is not in {} memory (buffer {})",
            t.name,
            gpu.name,
            t.buffer().map_or("none", |b| b.name())
        )
    })?;
    let align = gpu.limits.min_storage_align.max(1);
    let start = off / align * align;
    let range = (mem.size - start).min(gpu.limits.max_storage_range);
    let residual = off - start;
    if residual + t.nbytes() > range {
        return Err(format!(
            "tensor '{}' is past the storage-buffer range",
            t.name
        ));
    }
    Ok((
        Bind {
            buffer: mem.buffer,
            offset: start as u64,
            range: range as u64,
        },
        residual,
    ))
}

/// Push-constant words in order.
struct Push {
    w: [u32; 32],
    n: usize,
}

impl Push {
    fn new() -> Push {
        Push { w: [0; 32], n: 0 }
    }
    fn u(&mut self, v: impl TryInto<u32>) -> &mut Push {
        self.w[self.n] = v.try_into().unwrap_or(u32::MAX);
        self.n += 1;
        self
    }
    fn f(&mut self, v: f32) -> &mut Push {
        self.u(v.to_bits())
    }
    /// ne[0..4] then the strides in elements
    fn shape(&mut self, t: &Tensor) -> &mut Push {
        for i in 0..4 {
            self.u(t.ne[i]);
        }
        let es = t.ty.type_size();
        for i in 0..4 {
            self.u(t.nb[i] / es);
        }
        self
    }
}

/// Workgroups for `n` items: x up to 65535, the rest in y (the shaders loop grid-stride).
fn grid(n: usize) -> [u32; 3] {
    let n = n.max(1);
    let x = n.min(65535);
    let y = n.div_ceil(x).min(65535);
    [x as u32, y as u32, 1]
}

fn elementwise_groups(n: usize) -> [u32; 3] {
    grid(n.div_ceil(256))
}

/// The dispatch that computes node `id`, or why it cannot.
pub(crate) fn plan(gpu: &Gpu, ctx: &Context, id: TensorId) -> Result<Dispatch, String> {
    let t = &ctx[id];
    let (bd, rd) = bind(gpu, t)?;
    let mut binds = [bd; 6];
    let mut resid = [0usize; 6];
    resid[3] = rd;
    for i in 0..5 {
        if let Some(s) = t.src[i] {
            let (b, r) = bind(gpu, &ctx[s])?;
            let slot = if i < 3 { i } else { i + 1 };
            binds[slot] = b;
            resid[slot] = r;
        }
    }
    let s = |i: usize| -> Result<&Tensor, String> {
        t.src[i]
            .map(|x| &ctx[x])
            .ok_or_else(|| format!("{} '{}' lacks source {i}", t.op.desc(), t.name))
    };
    let eoff = |i: usize, x: &Tensor| resid[i] / x.ty.type_size();
    let mut p = Push::new();
    let nel = t.nelements() as usize;
    let (shader, groups): (&'static str, [u32; 3]) = match t.op {
        Op::Add | Op::Sub | Op::Mul | Op::Div => {
            let (a, b) = (s(0)?, s(1)?);
            p.shape(a).shape(b).shape(t);
            p.u(eoff(0, a)).u(eoff(1, b)).u(eoff(3, t));
            p.u(match t.op {
                Op::Add => 0,
                Op::Sub => 1,
                Op::Mul => 2,
                _ => 3,
            });
            ("binary", elementwise_groups(nel))
        }
        Op::Unary(_) | Op::Sqr | Op::Sqrt | Op::Scale { .. } | Op::Clamp { .. } => {
            let a = s(0)?;
            p.shape(a).shape(a).shape(t);
            p.u(eoff(0, a)).u(0).u(eoff(3, t));
            let (code, f0, f1) = match t.op {
                Op::Unary(u) => (unary_code(u), 0.0, 0.0),
                Op::Sqr => (100, 0.0, 0.0),
                Op::Sqrt => (101, 0.0, 0.0),
                Op::Scale { s, b } => (102, s, b),
                Op::Clamp { min, max } => (103, min, max),
                _ => unreachable!("matched above"),
            };
            p.u(code).f(f0).f(f1);
            ("unary", elementwise_groups(nel))
        }
        Op::Glu { op, swapped } => {
            let a = s(0)?;
            let split = t.src[1].is_some();
            let b = if split { s(1)? } else { a };
            p.shape(a).shape(b).shape(t);
            p.u(eoff(0, a))
                .u(if split { eoff(1, b) } else { 0 })
                .u(eoff(3, t));
            p.u(glu_code(op) | host_exp_lanes() << 8)
                .f(0.0)
                .f(0.0)
                .u(split as u32)
                .u(swapped as u32);
            ("glu", elementwise_groups(nel))
        }
        Op::Cpy | Op::Dup | Op::Cont => {
            let a = s(0)?;
            p.shape(a).shape(a).shape(t);
            p.u(eoff(0, a)).u(0).u(eoff(3, t));
            let code = |x: &Tensor| float_code(x.ty).ok_or("copy of an unclaimed type");
            p.u(0).f(0.0).f(0.0).u(code(a)?).u(code(t)?);
            ("cpy", elementwise_groups(nel))
        }
        Op::SetRows => {
            let (a, idx) = (s(0)?, s(1)?);
            p.shape(a);
            // the index tensor's shape, strides in i32 words (an i64 index is read as its low
            // word)
            for i in 0..4 {
                p.u(idx.ne[i]);
            }
            for i in 0..4 {
                p.u(idx.nb[i] / 4);
            }
            p.shape(t);
            p.u(eoff(0, a)).u(resid[1] / 4).u(eoff(3, t));
            let code = float_code(t.ty).ok_or("set_rows into an unclaimed type")?;
            p.u(0).f(0.0).f(0.0).u((idx.ty == Type::I64) as u32).u(code);
            ("set_rows", elementwise_groups(a.nelements() as usize))
        }
        Op::RmsNorm { eps } | Op::Norm { eps } => {
            let a = s(0)?;
            p.shape(a).shape(a).shape(t);
            p.u(eoff(0, a)).u(0).u(eoff(3, t));
            p.u(matches!(t.op, Op::Norm { .. }) as u32).f(eps);
            ("norm", grid(a.nrows() as usize))
        }
        Op::SoftMax { scale, max_bias } => {
            let a = s(0)?;
            for i in 0..4 {
                p.u(a.ne[i]);
            }
            for i in 1..4 {
                p.u(a.nb[i] / 4);
            }
            let mask = t.src[1].map(|m| &ctx[m]);
            match mask {
                Some(m) => {
                    let es = m.ty.type_size();
                    p.u(m.ne[1]).u(m.ne[2]).u(m.ne[3]);
                    p.u(m.nb[1] / es).u(m.nb[2] / es).u(m.nb[3] / es);
                }
                None => {
                    p.u(1).u(1).u(1).u(0).u(0).u(0);
                }
            }
            for i in 1..4 {
                p.u(t.nb[i] / 4);
            }
            let moff = mask.map_or(0, |m| resid[1] / m.ty.type_size());
            p.u(eoff(0, a)).u(moff).u(resid[2] / 4).u(eoff(3, t));
            let n_head = a.ne[2] as u32;
            let n_head_log2 = 1u32 << (31 - n_head.max(1).leading_zeros());
            let m0 = 2f32.powf(-max_bias / n_head_log2 as f32);
            let m1 = 2f32.powf(-max_bias / 2.0 / n_head_log2 as f32);
            p.f(scale).f(max_bias).f(m0).f(m1).u(n_head_log2);
            let mcode = match mask.map(|m| m.ty) {
                None => 0,
                Some(Type::F16) => 1,
                Some(_) => 2,
            };
            p.u(mcode).u(t.src[2].is_some() as u32).u(host_exp_lanes());
            ("soft_max", grid(a.nrows() as usize))
        }
        Op::Rope(rp) => {
            let a = s(0)?;
            let es = a.ty.type_size();
            for i in 0..4 {
                p.u(a.ne[i]);
            }
            for i in 1..4 {
                p.u(a.nb[i] / es);
            }
            let ed = t.ty.type_size();
            for i in 1..4 {
                p.u(t.nb[i] / ed);
            }
            p.u(resid[0] / es)
                .u(resid[1] / 4)
                .u(resid[2] / 4)
                .u(resid[3] / ed);
            let n_dims = (rp.n_dims.max(0) as i64).min(a.ne[0]);
            let corr = corr_dims(
                rp.n_dims,
                rp.n_ctx_orig,
                rp.freq_base,
                rp.beta_fast,
                rp.beta_slow,
            );
            p.u(n_dims)
                .u((rp.mode & rope_mode::NEOX != 0) as u32)
                .u(t.src[2].is_some() as u32)
                .u((a.ty == Type::F16) as u32)
                .u((t.ty == Type::F16) as u32);
            p.f(rp.freq_base.powf(-2.0 / rp.n_dims as f32))
                .f(rp.freq_scale)
                .f(rp.ext_factor)
                .f(rp.attn_factor)
                .f(corr[0])
                .f(corr[1]);
            ("rope", elementwise_groups((t.nelements() / 2) as usize))
        }
        Op::FlashAttnExt {
            scale,
            max_bias,
            logit_softcap,
            ..
        } => {
            let (q, k, v) = (s(0)?, s(1)?, s(2)?);
            let mask = t.src[3].map(|m| &ctx[m]);
            if t.src[4].is_some() && resid[5] != 0 {
                return Err("sinks not at an aligned offset".into());
            }
            p.u(q.ne[0])
                .u(v.ne[0])
                .u(q.ne[1])
                .u(q.ne[2])
                .u(q.ne[3])
                .u(k.ne[1]);
            for x in [q, k, v] {
                let es = x.ty.type_size();
                p.u(x.nb[1] / es).u(x.nb[2] / es).u(x.nb[3] / es);
            }
            match mask {
                Some(m) => {
                    p.u(m.nb[1] / 2)
                        .u(m.ne[2])
                        .u(m.ne[3])
                        .u(m.nb[2] / 2)
                        .u(m.nb[3] / 2);
                }
                None => {
                    p.u(0).u(1).u(1).u(0).u(0);
                }
            }
            p.u(resid[0] / 4)
                .u(resid[1] / k.ty.type_size())
                .u(resid[2] / v.ty.type_size())
                .u(resid[4] / 2)
                .u(resid[3] / 4);
            let n_head = q.ne[2] as u32;
            let n_head_log2 = 1u32 << (31 - n_head.max(1).leading_zeros());
            p.f(scale).f(max_bias).f(logit_softcap).u(n_head_log2);
            let flags = (k.ty == Type::F16) as u32
                | ((v.ty == Type::F16) as u32) << 1
                | (mask.is_some() as u32) << 2
                | (t.src[4].is_some() as u32) << 3
                | (host_f16_dot_avx512() as u32) << 4;
            p.u(flags).u(k.ne[2]).u(k.ne[3]);
            (
                "flash_attn",
                grid(((q.ne[1] * q.ne[2] * q.ne[3]) as usize).div_ceil(32)),
            )
        }
        Op::MulMatId => {
            let (a, b, ids) = (s(0)?, s(1)?, s(2)?);
            let shader =
                weight_shader(a.ty, MUL_MAT_ID).ok_or("mul_mat_id of an unclaimed type")?;
            p.u(a.ne[0]).u(a.ne[1]).u(a.ne[2]).u(a.nb[1]).u(a.nb[2]);
            p.u(b.ne[1]).u(b.nb[0] / 4).u(b.nb[1] / 4).u(b.nb[2] / 4);
            p.u(ids.ne[0])
                .u(ids.ne[1])
                .u(ids.nb[0] / 4)
                .u(ids.nb[1] / 4);
            p.u(t.nb[1] / 4).u(t.nb[2] / 4);
            p.u(resid[0])
                .u(resid[1] / 4)
                .u(resid[2] / 4)
                .u(resid[3] / 4);
            (shader, grid(nel.div_ceil(64)))
        }
        Op::SumRows | Op::Mean => {
            let a = s(0)?;
            p.shape(a).shape(a).shape(t);
            p.u(eoff(0, a)).u(0).u(eoff(3, t));
            p.u(matches!(t.op, Op::Mean) as u32);
            ("sum_rows", grid((a.nrows() as usize).div_ceil(64)))
        }
        Op::Concat { dim } => {
            let (a, b) = (s(0)?, s(1)?);
            p.shape(a).shape(b).shape(t);
            p.u(eoff(0, a)).u(eoff(1, b)).u(eoff(3, t));
            p.u(0).f(0.0).f(0.0).u(dim);
            ("concat", elementwise_groups(nel))
        }
        Op::Argsort { .. } | Op::TopK { .. } => {
            let a = s(0)?;
            p.shape(a).shape(a).shape(t);
            p.u(eoff(0, a)).u(0).u(eoff(3, t));
            let (op, desc, k) = match t.op {
                Op::Argsort { order } => (0, (order == ggml::SortOrder::Desc) as u32, 0),
                Op::TopK { k } => (1, 1, k.max(0) as u32),
                _ => unreachable!("matched above"),
            };
            p.u(op).f(0.0).f(0.0).u(desc).u(k);
            ("argsort", grid((a.nelements() as usize).div_ceil(64)))
        }
        Op::AddId => {
            let (a, b, ids) = (s(0)?, s(1)?, s(2)?);
            p.shape(a).shape(b).shape(t);
            p.u(eoff(0, a)).u(eoff(1, b)).u(eoff(3, t));
            p.u(resid[2] / 4)
                .f(0.0)
                .f(0.0)
                .u(ids.nb[0] / 4)
                .u(ids.nb[1] / 4);
            ("add_id", elementwise_groups(nel))
        }
        Op::GetRows => {
            let (a, idx) = (s(0)?, s(1)?);
            let shader = weight_shader(a.ty, GET_ROWS).ok_or("get_rows of an unclaimed type")?;
            p.u(a.ne[0]).u(a.ne[1]).u(a.nb[1]).u(a.nb[2]).u(a.nb[3]);
            p.u(idx.ne[0]).u(idx.ne[1]).u(idx.ne[2]);
            p.u(idx.nb[0] / 4).u(idx.nb[1] / 4).u(idx.nb[2] / 4);
            p.u(t.nb[1] / 4).u(t.nb[2] / 4).u(t.nb[3] / 4);
            p.u(resid[0]).u(resid[1] / 4).u(resid[3] / 4);
            (shader, elementwise_groups(nel))
        }
        Op::MulMat { .. } => {
            let (a, b) = (s(0)?, s(1)?);
            let shader = weight_shader(a.ty, MUL_MAT).ok_or("mul_mat of an unclaimed type")?;
            for i in 0..4 {
                p.u(a.ne[i]);
            }
            p.u(a.nb[1]).u(a.nb[2]).u(a.nb[3]);
            p.u(b.ne[1]).u(b.ne[2]).u(b.ne[3]);
            for i in 0..4 {
                p.u(b.nb[i] / 4);
            }
            p.u(t.nb[1] / 4).u(t.nb[2] / 4).u(t.nb[3] / 4);
            p.u(resid[0]).u(resid[1] / 4).u(resid[3] / 4);
            p.u(b.ne[2] / a.ne[2]).u(b.ne[3] / a.ne[3]);
            p.u(k_order(a, b));
            let groups = [
                (a.ne[1] as u32).div_ceil(64).min(65535),
                (b.ne[1] as u32).div_ceil(8),
                (b.ne[2] * b.ne[3]) as u32,
            ];
            (shader, groups)
        }
        _ => return Err(format!("op {} is not implemented on Vulkan", t.op.desc())),
    };
    Ok(Dispatch {
        shader,
        bind: binds,
        push: p.w,
        groups,
    })
}

/// The float order in which the CPU backend sums a K-quant MUL_MAT (the shader's KORD_*) for a
/// weight in a plain buffer, as crates/ggml-cpu/src/ops/ktile.rs picks it after llama.cpp's x86
/// dispatch: K types times 8 or more columns take the tiled path, the rest the AVX2 vec_dot
/// (whose order the shader has for Q4_K and Q6_K). A weight in a Vulkan buffer is never in
/// CPU_REPACK, and llama.cpp keeps the CPU layers' weights in Vulkan_Host (not CPU_REPACK) when
/// a Vulkan device is present, so the repacked q4_K_8x8 order is not the one to follow.
/// 0: element by element (no AVX2 on the host, or a type without an exact path).
fn k_order(a: &Tensor, b: &Tensor) -> u32 {
    const ELEM: u32 = 0;
    const TILED: u32 = 2;
    const VEC: u32 = 3;
    if a.ty == Type::F16 {
        return f16_order(a, b);
    }
    if !host_avx2_fma() || !matches!(a.ty, Type::Q3K | Type::Q4K | Type::Q5K | Type::Q6K) {
        return ELEM;
    }
    if b.ne[1] >= 8 && matches!(b.ty, Type::F32 | Type::Q8K) {
        return TILED;
    }
    match a.ty {
        Type::Q4K | Type::Q6K => VEC,
        _ => ELEM,
    }
}

/// F16 weights (the attention's K and V without flash attention): llamafile's tinyBLAS tile
/// where the CPU runs it (n >= 2 columns, rows of a multiple of its lanes, a multiple of 4 rows,
/// src1 contiguous or converted; crates/ggml-cpu/src/ops/gemm.rs), ggml_vec_dot_f16 otherwise;
/// each in the 8-lane AVX2 or the 16-lane AVX-512 form the host's CPU backend takes (kord 1/5
/// and 3/6 in mul_mat.comp), element by element on hosts without AVX2.
fn f16_order(a: &Tensor, b: &Tensor) -> u32 {
    if !host_avx2_fma() || !host_f16c() {
        return 0;
    }
    let tiny_lanes = if host_avx512f() { 16 } else { 8 };
    let tiny = b.ne[1] >= 2 && a.ne[0] % tiny_lanes == 0 && a.ne[1] % 4 == 0;
    if tiny && (b.is_contiguous() || b.ty != Type::F16) {
        if tiny_lanes == 16 {
            5
        } else {
            1
        }
    } else if host_f16_dot_avx512() {
        6
    } else {
        3
    }
}

#[cfg(target_arch = "x86_64")]
fn host_avx512f() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

#[cfg(not(target_arch = "x86_64"))]
fn host_avx512f() -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
fn host_f16c() -> bool {
    std::arch::is_x86_feature_detected!("f16c")
}

#[cfg(not(target_arch = "x86_64"))]
fn host_f16c() -> bool {
    false
}

/// The vector width of the CPU backend's ggml_v_expf (SWIGLU, SOFT_MAX): 16 where it takes
/// ggml's AVX-512 path (AVX-512F, DQ and FMA: crates/ggml-cpu/src/simd/features.rs
/// `avx512_exp`), 8 with AVX2 and FMA, 0 (scalar expf) otherwise.
#[cfg(target_arch = "x86_64")]
fn host_exp_lanes() -> u32 {
    use std::arch::is_x86_feature_detected as has;
    if has!("avx512f") && has!("avx512dq") && has!("fma") {
        16
    } else if host_avx2_fma() {
        8
    } else {
        0
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn host_exp_lanes() -> u32 {
    0
}

/// Whether the CPU backend's F16 dot product (flash attention's q.k) is its AVX-512 kernel:
/// ggml-cpu takes its AVX-512 level where AVX2/FMA/F16C and AVX-512 F, BW, VL and VNNI are
/// all present (crates/ggml-cpu/src/simd/features.rs `avx512_dot`).
#[cfg(target_arch = "x86_64")]
fn host_f16_dot_avx512() -> bool {
    use std::arch::is_x86_feature_detected as has;
    host_avx2_fma()
        && host_f16c()
        && has!("avx512f")
        && has!("avx512bw")
        && has!("avx512vl")
        && has!("avx512vnni")
}

#[cfg(not(target_arch = "x86_64"))]
fn host_f16_dot_avx512() -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
fn host_avx2_fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

#[cfg(not(target_arch = "x86_64"))]
fn host_avx2_fma() -> bool {
    false
}

/// ggml_rope_yarn_corr_dims
fn corr_dims(
    n_dims: i32,
    n_ctx_orig: i32,
    freq_base: f32,
    beta_fast: f32,
    beta_slow: f32,
) -> [f32; 2] {
    let dim = |n_rot: f32| {
        n_dims as f32 * (n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln()
            / (2.0 * freq_base.ln())
    };
    let start = dim(beta_fast).floor();
    let end = dim(beta_slow).ceil();
    [start.max(0.0), end.min((n_dims - 1) as f32)]
}

/// ggml_vk_get_op_batch_size: the dimension that counts tokens for the offload decision.
pub(crate) fn op_batch_size(t: &Tensor) -> i64 {
    match t.op {
        Op::GetRows => 0,
        Op::MulMat { .. } => t.ne[1],
        Op::MulMatId | Op::Rope(_) => t.ne[2],
        _ => t.nrows(),
    }
}
