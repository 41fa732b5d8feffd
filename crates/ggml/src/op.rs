//! Operations as a typed enum: each variant carries its own parameters (no `op_params` blob),
//! so every backend's `match` is checked by the compiler when an op is added.

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Abs,
    Sgn,
    Neg,
    Step,
    Tanh,
    Elu,
    Relu,
    Sigmoid,
    Gelu,
    GeluQuick,
    Silu,
    HardSwish,
    HardSigmoid,
    Exp,
    GeluErf,
}

impl UnaryOp {
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Abs => "ABS",
            UnaryOp::Sgn => "SGN",
            UnaryOp::Neg => "NEG",
            UnaryOp::Step => "STEP",
            UnaryOp::Tanh => "TANH",
            UnaryOp::Elu => "ELU",
            UnaryOp::Relu => "RELU",
            UnaryOp::Sigmoid => "SIGMOID",
            UnaryOp::Gelu => "GELU",
            UnaryOp::GeluQuick => "GELU_QUICK",
            UnaryOp::Silu => "SILU",
            UnaryOp::HardSwish => "HARDSWISH",
            UnaryOp::HardSigmoid => "HARDSIGMOID",
            UnaryOp::Exp => "EXP",
            UnaryOp::GeluErf => "GELU_ERF",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GluOp {
    Reglu,
    Geglu,
    Swiglu,
    GegluErf,
    GegluQuick,
}

impl GluOp {
    pub fn name(self) -> &'static str {
        match self {
            GluOp::Reglu => "REGLU",
            GluOp::Geglu => "GEGLU",
            GluOp::Swiglu => "SWIGLU",
            GluOp::GegluErf => "GEGLU_ERF",
            GluOp::GegluQuick => "GEGLU_QUICK",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SortOrder {
    Asc,
    Desc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Prec {
    #[default]
    Default,
    F32,
}

/// ggml's rope modes: 0 normal (adjacent pairs), 2 NeoX (halves).
pub mod rope_mode {
    pub const NORMAL: i32 = 0;
    pub const NEOX: i32 = 2;
    pub const MROPE: i32 = 8;
    pub const VISION: i32 = 24;
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeParams {
    pub n_dims: i32,
    pub mode: i32,
    pub n_ctx_orig: i32,
    pub freq_base: f32,
    pub freq_scale: f32,
    pub ext_factor: f32,
    pub attn_factor: f32,
    pub beta_fast: f32,
    pub beta_slow: f32,
    pub sections: [i32; 4],
    /// the first rotated value of each row (ggml_rope_set_offset, op_params[15]): the
    /// n_dims values from here are rotated, the rest copied
    pub n_offs: i32,
}

impl Default for RopeParams {
    fn default() -> Self {
        RopeParams {
            n_dims: 0,
            mode: 0,
            n_ctx_orig: 0,
            freq_base: 10000.0,
            freq_scale: 1.0,
            ext_factor: 0.0,
            attn_factor: 1.0,
            beta_fast: 32.0,
            beta_slow: 1.0,
            sections: [0; 4],
            n_offs: 0,
        }
    }
}

/// Sources, by op (src[i] of the tensor):
/// - binary ops: 0 = a, 1 = b (broadcast to a)
/// - AddId: 0 = a, 1 = b, 2 = ids; MulMatId: 0 = experts, 1 = b, 2 = ids
/// - SetRows: 0 = rows, 1 = indices, 2 = destination (the tensor is a view of src 2)
/// - Cpy: 0 = from, 1 = to (the tensor is a view of src 1)
/// - SoftMax: 0 = a, 1 = mask, 2 = sinks; Rope: 0 = a, 1 = positions, 2 = freq factors
/// - FlashAttnExt: 0 = q, 1 = k, 2 = v, 3 = mask, 4 = sinks
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    None,
    Dup,
    Add,
    AddId,
    Sub,
    Mul,
    Div,
    Sqr,
    Sqrt,
    Sum,
    SumRows,
    Mean,
    Argmax,
    Repeat,
    Concat {
        dim: i32,
    },
    Norm {
        eps: f32,
    },
    RmsNorm {
        eps: f32,
    },
    MulMat {
        prec: Prec,
    },
    MulMatId,
    Scale {
        s: f32,
        b: f32,
    },
    Cpy,
    Cont,
    Reshape,
    View,
    Permute {
        axes: [i32; 4],
    },
    Transpose,
    GetRows,
    SetRows,
    SoftMax {
        scale: f32,
        max_bias: f32,
    },
    Rope(RopeParams),
    Clamp {
        min: f32,
        max: f32,
    },
    /// every element set to `c` (src 0 gives the shape)
    Fill {
        c: f32,
    },
    Argsort {
        order: SortOrder,
    },
    TopK {
        k: i32,
    },
    FlashAttnExt {
        scale: f32,
        max_bias: f32,
        logit_softcap: f32,
        prec: Prec,
    },
    Unary(UnaryOp),
    Glu {
        op: GluOp,
        swapped: bool,
    },
}

impl Op {
    /// ggml_op_name
    pub fn name(&self) -> &'static str {
        match self {
            Op::None => "NONE",
            Op::Dup => "DUP",
            Op::Add => "ADD",
            Op::AddId => "ADD_ID",
            Op::Sub => "SUB",
            Op::Mul => "MUL",
            Op::Div => "DIV",
            Op::Sqr => "SQR",
            Op::Sqrt => "SQRT",
            Op::Sum => "SUM",
            Op::SumRows => "SUM_ROWS",
            Op::Mean => "MEAN",
            Op::Argmax => "ARGMAX",
            Op::Repeat => "REPEAT",
            Op::Concat { .. } => "CONCAT",
            Op::Norm { .. } => "NORM",
            Op::RmsNorm { .. } => "RMS_NORM",
            Op::MulMat { .. } => "MUL_MAT",
            Op::MulMatId => "MUL_MAT_ID",
            Op::Scale { .. } => "SCALE",
            Op::Cpy => "CPY",
            Op::Cont => "CONT",
            Op::Reshape => "RESHAPE",
            Op::View => "VIEW",
            Op::Permute { .. } => "PERMUTE",
            Op::Transpose => "TRANSPOSE",
            Op::GetRows => "GET_ROWS",
            Op::SetRows => "SET_ROWS",
            Op::SoftMax { .. } => "SOFT_MAX",
            Op::Rope(_) => "ROPE",
            Op::Clamp { .. } => "CLAMP",
            Op::Fill { .. } => "FILL",
            Op::Argsort { .. } => "ARGSORT",
            Op::TopK { .. } => "TOP_K",
            Op::FlashAttnExt { .. } => "FLASH_ATTN_EXT",
            Op::Unary(_) => "UNARY",
            Op::Glu { .. } => "GLU",
        }
    }

    /// ggml_op_desc: the unary or GLU op's own name for those, the op name otherwise.
    pub fn desc(&self) -> &'static str {
        match self {
            Op::Unary(u) => u.name(),
            Op::Glu { op, .. } => op.name(),
            _ => self.name(),
        }
    }

    /// ggml_is_view_op: ops whose result shares its source's memory.
    pub fn is_view(&self) -> bool {
        matches!(
            self,
            Op::Reshape | Op::View | Op::Permute { .. } | Op::Transpose
        )
    }

    pub fn is_none(&self) -> bool {
        matches!(self, Op::None)
    }

    /// ggml_op_can_inplace (ggml-alloc.c): the result may reuse its first source's memory.
    pub fn can_inplace(&self) -> bool {
        matches!(
            self,
            Op::Scale { .. }
                | Op::Add
                | Op::AddId
                | Op::Sub
                | Op::Mul
                | Op::Div
                | Op::Sqr
                | Op::Sqrt
                | Op::Unary(_)
                | Op::Rope(_)
                | Op::RmsNorm { .. }
                | Op::SoftMax { .. }
        )
    }
}
