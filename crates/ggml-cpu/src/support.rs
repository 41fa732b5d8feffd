//! Which op / type combinations the kernels implement (the device's supports_op).

use crate::quant::{can_dequantize, can_quantize, mm_traits};
use ggml::op::rope_mode;
use ggml::{Context, Op, Tensor, TensorId, Type};

fn is_float(ty: Type) -> bool {
    matches!(ty, Type::F32 | Type::F16 | Type::Bf16)
}

/// Types a row can be read from as f32.
fn readable(ty: Type) -> bool {
    is_float(ty) || ty == Type::I32 || (ty.is_quantized() && can_dequantize(ty))
}

fn is_index(ty: Type) -> bool {
    matches!(ty, Type::I32 | Type::I64)
}

/// MUL_MAT of a whole 2-D weight, or MUL_MAT_ID of a whole 3-D expert stack, held in
/// CPU_REPACK (src 0 only) by F32 activations in host memory (the repack extra buffer
/// type's supports_op: ggml_n_dims 2 for MUL_MAT, 3 for MUL_MAT_ID).
fn repacked_mul_mat(ctx: &Context, t: &Tensor, s0: &Tensor) -> bool {
    let host_or_none = |s: &Tensor| s.buffer().is_none_or(|b| b.is_host());
    let dims_ok = match t.op {
        Op::MulMat { .. } => s0.n_dims() == 2,
        Op::MulMatId => s0.n_dims() == 3 && t.src[2].is_some_and(|i| ctx[i].ty == Type::I32),
        _ => false,
    };
    dims_ok
        && crate::repack::holds(s0)
        && s0.view_src.is_none()
        && crate::repack::layout_for(s0.ty, s0.ne).is_some()
        && t.src[1].is_some_and(|b| ctx[b].ty == Type::F32 && host_or_none(&ctx[b]))
        && t.ty == Type::F32
}

pub(crate) fn supports_op(ctx: &Context, id: TensorId) -> bool {
    let t = &ctx[id];
    let src = |i: usize| -> Option<&Tensor> { t.src[i].map(|s| &ctx[s]) };
    let ty = |i: usize| src(i).map(|s| s.ty);
    let s0 = match src(0) {
        Some(s) => s,
        None => return matches!(t.op, Op::None),
    };
    // weights in CPU_REPACK feed only the matmul whose kernels read that layout (the repack
    // extra buffer type's supports_op)
    if t.srcs().any(|s| crate::repack::holds(&ctx[s])) {
        return repacked_mul_mat(ctx, t, s0);
    }
    match t.op {
        Op::None | Op::Reshape | Op::View | Op::Permute { .. } | Op::Transpose => true,
        Op::Dup | Op::Cont | Op::Cpy => {
            if s0.ty == t.ty {
                true
            } else if t.ty.is_quantized() {
                can_quantize(t.ty)
                    && t.is_contiguous()
                    && s0.ne[0] % t.ty.block_size() as i64 == 0
                    && (is_float(s0.ty) || s0.ty == Type::I32)
            } else {
                readable(s0.ty) && (is_float(t.ty) || t.ty == Type::I32)
            }
        }
        Op::Add | Op::Sub | Op::Mul | Op::Div => {
            is_float(s0.ty) && ty(1).is_some_and(is_float) && is_float(t.ty)
        }
        Op::AddId => s0.ty == Type::F32 && ty(1) == Some(Type::F32) && ty(2) == Some(Type::I32),
        Op::Sqr
        | Op::Sqrt
        | Op::Scale { .. }
        | Op::Clamp { .. }
        | Op::Fill { .. }
        | Op::Unary(_)
        | Op::Glu { .. } => is_float(s0.ty) && is_float(t.ty) && ty(1).is_none_or(is_float),
        Op::Norm { .. } | Op::RmsNorm { .. } => is_float(s0.ty) && is_float(t.ty),
        Op::Sum | Op::SumRows | Op::Mean => is_float(s0.ty) && is_float(t.ty),
        Op::Argmax | Op::Argsort { .. } | Op::TopK { .. } => is_float(s0.ty),
        Op::Repeat | Op::Concat { .. } => !s0.ty.is_quantized() && ty(1).is_none_or(|b| b == s0.ty),
        Op::MulMat { .. } | Op::MulMatId => {
            let ok_ids = !matches!(t.op, Op::MulMatId) || ty(2) == Some(Type::I32);
            mm_traits(s0.ty).is_some()
                && s0.is_contiguous_rows()
                && ty(1).is_some_and(readable)
                && t.ty == Type::F32
                && t.nb[0] == 4
                && ok_ids
        }
        Op::GetRows => {
            (readable(s0.ty) || s0.ty == Type::I32)
                && ty(1).is_some_and(is_index)
                && matches!(t.ty, Type::F32 | Type::I32)
        }
        Op::SetRows => {
            let dst_ok = is_float(t.ty) || (t.ty.is_quantized() && can_quantize(t.ty));
            s0.ty == Type::F32 && ty(1).is_some_and(is_index) && dst_ok && t.is_contiguous_rows()
        }
        Op::SoftMax { .. } => {
            s0.ty == Type::F32
                && ty(1).is_none_or(|m| matches!(m, Type::F32 | Type::F16))
                && ty(2).is_none_or(|s| s == Type::F32)
        }
        Op::Rope(rp) => {
            let mode_ok = rp.mode & (rope_mode::MROPE | rope_mode::VISION) == 0;
            mode_ok
                && matches!(s0.ty, Type::F32 | Type::F16)
                && rp.n_dims > 0
                && rp.n_dims % 2 == 0
                && rp.n_offs >= 0
                && rp.n_offs % 2 == 0
                && (rp.n_offs + rp.n_dims) as i64 <= s0.ne[0]
                && ty(1) == Some(Type::I32)
                && ty(2).is_none_or(|f| f == Type::F32)
        }
        Op::FlashAttnExt { .. } => {
            let (Some(k), Some(v)) = (src(1), src(2)) else {
                return false;
            };
            is_float(s0.ty)
                && mm_traits(k.ty).is_some()
                && k.is_contiguous_rows()
                && readable(v.ty)
                && ty(3).is_none_or(|m| matches!(m, Type::F32 | Type::F16))
                && ty(4).is_none_or(|s| s == Type::F32)
                && t.ty == Type::F32
        }
    }
}
