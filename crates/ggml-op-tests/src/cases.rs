//! The case table: op x types x shapes, with non-contiguous views, permutes and broadcasting.

use crate::case::{Built, Case, Compare, Init};
use ggml::op::rope_mode;
use ggml::{Context, GluOp, RopeParams, SortOrder, TensorId, Type, UnaryOp};

const DEFAULT: Compare = Compare::Nmse(1e-7);
/// Results rounded through f16 or bf16, or computed from f16/bf16/quantized operands.
const LOW: Compare = Compare::Nmse(5e-4);
/// Rows quantized by a backend: its quantizer may round ties differently from the reference
/// one (ggml's x86 Q8_0 quantizer does), moving single elements by one step.
const QUANTIZED: Compare = Compare::Nmse(1e-5);
/// Values that pass through an f16 lookup table (GELU family) or f16 storage.
const TABLE: Compare = Compare::Nmse(5e-6);

const FLOATS: [Type; 3] = [Type::F32, Type::F16, Type::Bf16];
const QUANTS: [Type; 27] = [
    Type::Q1_0,
    Type::Q2_0,
    Type::Q4_0,
    Type::Q4_1,
    Type::Q5_0,
    Type::Q5_1,
    Type::Q8_0,
    Type::Q8_1,
    Type::Q2K,
    Type::Q3K,
    Type::Q4K,
    Type::Q5K,
    Type::Q6K,
    Type::Q8K,
    Type::Iq4Nl,
    Type::Iq4Xs,
    Type::Iq2Xxs,
    Type::Iq2Xs,
    Type::Iq2S,
    Type::Iq3Xxs,
    Type::Iq3S,
    Type::Iq1S,
    Type::Iq1M,
    Type::Tq1_0,
    Type::Tq2_0,
    Type::Mxfp4,
    Type::Nvfp4,
];

fn tol(ty: Type) -> Compare {
    if ty == Type::F32 {
        DEFAULT
    } else {
        LOW
    }
}

fn t(ctx: &mut Context, ty: Type, ne: &[i64]) -> TensorId {
    ctx.new_tensor(ty, ne)
}

/// A tensor with shape `ne` made non-contiguous: a permuted view of a larger one.
fn permuted(ctx: &mut Context, ty: Type, ne: [i64; 4]) -> TensorId {
    // store as {ne1, ne0, ne2, ne3} and swap the first two dims back
    let base = ctx.new_tensor(ty, &[ne[1], ne[0], ne[2], ne[3]]);
    ctx.permute(base, 1, 0, 2, 3)
}

fn binary_cases(out: &mut Vec<Case>) {
    type Mk = fn(&mut Context, TensorId, TensorId) -> TensorId;
    let ops: [(&'static str, Mk); 4] = [
        ("ADD", |c, a, b| c.add(a, b)),
        ("SUB", |c, a, b| c.sub(a, b)),
        ("MUL", |c, a, b| c.mul(a, b)),
        ("DIV", |c, a, b| c.div(a, b)),
    ];
    let shapes: [([i64; 4], [i64; 4]); 5] = [
        ([16, 5, 4, 3], [16, 5, 4, 3]),
        ([16, 5, 4, 3], [16, 1, 1, 1]),
        ([16, 5, 4, 3], [16, 5, 1, 3]),
        ([16, 5, 4, 3], [8, 1, 4, 1]),
        ([256, 7, 1, 1], [256, 1, 1, 1]),
    ];
    for (name, mk) in ops {
        for (ta, tb) in [
            (Type::F32, Type::F32),
            (Type::F16, Type::F32),
            (Type::F16, Type::F16),
            (Type::Bf16, Type::F32),
        ] {
            for (sa, sb) in shapes {
                let desc = format!("{name}(a={ta},b={tb},ne_a={sa:?},ne_b={sb:?})");
                out.push(Case::new(name, ta, desc, tol(ta), move |c| {
                    let a = t(c, ta, &sa);
                    let b = t(c, tb, &sb);
                    let r = mk(c, a, b);
                    if name == "DIV" {
                        Built::new(r).with(b, Init::Uniform(0.5, 2.0))
                    } else {
                        Built::new(r)
                    }
                }));
            }
        }
        let desc = format!("{name}(a=f32,b=f32,ne=[12,6,2,1],permuted a)");
        out.push(Case::new(name, Type::F32, desc, DEFAULT, move |c| {
            let a = permuted(c, Type::F32, [12, 6, 2, 1]);
            let b = t(c, Type::F32, &[12, 1, 2, 1]);
            let r = mk(c, a, b);
            Built::new(r).with(b, Init::Uniform(0.5, 2.0))
        }));
    }
    out.push(Case::new(
        "ADD",
        Type::F32,
        "ADD(inplace,f32,[32,4])".into(),
        DEFAULT,
        |c| {
            let a = t(c, Type::F32, &[32, 4]);
            let b = t(c, Type::F32, &[32, 1]);
            Built::new(c.add_inplace(a, b))
        },
    ));
    out.push(Case::new(
        "ADD_ID",
        Type::F32,
        "ADD_ID(f32,ne=[32,3,5],n_as=4)".into(),
        DEFAULT,
        |c| {
            let a = t(c, Type::F32, &[32, 3, 5]);
            let b = t(c, Type::F32, &[32, 4]);
            let ids = t(c, Type::I32, &[3, 5]);
            Built::new(c.add_id(a, b, ids)).with(
                ids,
                Init::Index {
                    max: 4,
                    unique: true,
                },
            )
        },
    ));
}

fn unary_cases(out: &mut Vec<Case>) {
    let all = [
        UnaryOp::Abs,
        UnaryOp::Sgn,
        UnaryOp::Neg,
        UnaryOp::Step,
        UnaryOp::Tanh,
        UnaryOp::Elu,
        UnaryOp::Relu,
        UnaryOp::Sigmoid,
        UnaryOp::Gelu,
        UnaryOp::GeluQuick,
        UnaryOp::Silu,
        UnaryOp::HardSwish,
        UnaryOp::HardSigmoid,
        UnaryOp::Exp,
        UnaryOp::GeluErf,
    ];
    for op in all {
        for ty in [Type::F32, Type::F16] {
            let table = matches!(op, UnaryOp::Gelu | UnaryOp::GeluQuick);
            let cmp = if ty != Type::F32 {
                LOW
            } else if table {
                TABLE
            } else {
                DEFAULT
            };
            let desc = format!("{}(type={ty},ne=[128,3,2,1])", op.name());
            out.push(Case::new(op.name(), ty, desc, cmp, move |c| {
                let a = t(c, ty, &[128, 3, 2, 1]);
                Built::new(c.unary(a, op)).with(a, Init::Uniform(-4.0, 4.0))
            }));
        }
    }
    for ty in FLOATS {
        out.push(Case::new(
            "SCALE",
            ty,
            format!("SCALE(type={ty},s=0.7,b=0.25)"),
            tol(ty),
            move |c| {
                let a = t(c, ty, &[64, 5, 3]);
                Built::new(c.scale_bias(a, 0.7, 0.25))
            },
        ));
        out.push(Case::new(
            "SQR",
            ty,
            format!("SQR(type={ty})"),
            tol(ty),
            move |c| {
                let a = t(c, ty, &[64, 5, 3]);
                Built::new(c.sqr(a))
            },
        ));
        out.push(Case::new(
            "SQRT",
            ty,
            format!("SQRT(type={ty})"),
            tol(ty),
            move |c| {
                let a = t(c, ty, &[64, 5, 3]);
                Built::new(c.sqrt(a)).with(a, Init::Uniform(0.0, 4.0))
            },
        ));
        out.push(Case::new(
            "CLAMP",
            ty,
            format!("CLAMP(type={ty},min=-0.5,max=0.5)"),
            tol(ty),
            move |c| {
                let a = t(c, ty, &[64, 5, 3]);
                Built::new(c.clamp(a, -0.5, 0.5))
            },
        ));
    }
    out.push(Case::new(
        "SCALE",
        Type::F32,
        "SCALE(f32,s=2,inplace)".into(),
        DEFAULT,
        |c| {
            let a = t(c, Type::F32, &[64, 5]);
            Built::new(c.scale_inplace(a, 2.0))
        },
    ));
    let glus = [
        GluOp::Reglu,
        GluOp::Geglu,
        GluOp::Swiglu,
        GluOp::GegluErf,
        GluOp::GegluQuick,
    ];
    for op in glus {
        let table = matches!(op, GluOp::Geglu | GluOp::GegluQuick);
        for ty in [Type::F32, Type::F16] {
            let cmp = if ty != Type::F32 {
                LOW
            } else if table {
                TABLE
            } else {
                DEFAULT
            };
            for swapped in [false, true] {
                let desc = format!("{}(type={ty},fused halves,swapped={swapped})", op.name());
                out.push(Case::new(op.name(), ty, desc, cmp, move |c| {
                    let a = t(c, ty, &[64, 5, 3]);
                    Built::new(c.glu(a, op, swapped)).with(a, Init::Uniform(-3.0, 3.0))
                }));
            }
            let desc = format!("{}(type={ty},split)", op.name());
            out.push(Case::new(op.name(), ty, desc, cmp, move |c| {
                let a = t(c, ty, &[48, 5, 3]);
                let b = t(c, ty, &[48, 5, 3]);
                Built::new(c.glu_split(a, b, op)).with(a, Init::Uniform(-3.0, 3.0))
            }));
        }
    }
}

fn reduce_cases(out: &mut Vec<Case>) {
    for ty in FLOATS {
        out.push(Case::new(
            "SUM",
            ty,
            format!("SUM(type={ty},[33,4,3])"),
            tol(ty),
            move |c| {
                let a = t(c, ty, &[33, 4, 3]);
                Built::new(c.sum(a))
            },
        ));
        out.push(Case::new(
            "SUM_ROWS",
            ty,
            format!("SUM_ROWS(type={ty},[33,4,3])"),
            tol(ty),
            move |c| {
                let a = t(c, ty, &[33, 4, 3]);
                Built::new(c.sum_rows(a))
            },
        ));
    }
    out.push(Case::new(
        "MEAN",
        Type::F32,
        "MEAN(f32,[33,4,3])".into(),
        DEFAULT,
        |c| {
            let a = t(c, Type::F32, &[33, 4, 3]);
            Built::new(c.mean(a))
        },
    ));
    out.push(Case::new(
        "SUM_ROWS",
        Type::F32,
        "SUM_ROWS(f32,permuted [20,6,2])".into(),
        DEFAULT,
        |c| {
            let a = permuted(c, Type::F32, [20, 6, 2, 1]);
            Built::new(c.sum_rows(a))
        },
    ));
    out.push(Case::new(
        "ARGMAX",
        Type::F32,
        "ARGMAX(f32,[100,7])".into(),
        Compare::Nmse(0.0),
        |c| {
            let a = t(c, Type::F32, &[100, 7]);
            Built::new(c.argmax(a))
        },
    ));
    for order in [SortOrder::Asc, SortOrder::Desc] {
        let desc = format!("ARGSORT(f32,[37,5,2],{order:?})");
        out.push(Case::new(
            "ARGSORT",
            Type::F32,
            desc,
            Compare::Nmse(0.0),
            move |c| {
                let a = t(c, Type::F32, &[37, 5, 2]);
                Built::new(c.argsort(a, order))
            },
        ));
    }
    out.push(Case::new(
        "TOP_K",
        Type::F32,
        "TOP_K(f32,[50,6],k=7)".into(),
        Compare::SortedRows,
        |c| {
            let a = t(c, Type::F32, &[50, 6]);
            Built::new(c.top_k(a, 7))
        },
    ));
}

fn layout_cases(out: &mut Vec<Case>) {
    for ty in [Type::F32, Type::F16, Type::I32] {
        out.push(Case::new(
            "REPEAT",
            ty,
            format!("REPEAT(type={ty},[8,3,1,2]->[16,6,3,2])"),
            DEFAULT,
            move |c| {
                let a = t(c, ty, &[8, 3, 1, 2]);
                let b = t(c, ty, &[16, 6, 3, 2]);
                let r = c.repeat(a, b);
                Built::new(r).with(a, Init::Uniform(-8.0, 8.0))
            },
        ));
        for dim in 0..4 {
            out.push(Case::new(
                "CONCAT",
                ty,
                format!("CONCAT(type={ty},dim={dim})"),
                DEFAULT,
                move |c| {
                    let mut nb = [6i64, 5, 4, 3];
                    nb[dim] = 2;
                    let a = t(c, ty, &[6, 5, 4, 3]);
                    let b = t(c, ty, &nb);
                    Built::new(c.concat(a, b, dim as i32))
                        .with(a, Init::Uniform(-8.0, 8.0))
                        .with(b, Init::Uniform(-8.0, 8.0))
                },
            ));
        }
    }
    for (name, rms) in [("NORM", false), ("RMS_NORM", true)] {
        for shape in [[64i64, 5, 4, 1], [4096, 2, 1, 1]] {
            out.push(Case::new(
                name,
                Type::F32,
                format!("{name}(f32,ne={shape:?})"),
                DEFAULT,
                move |c| {
                    let a = t(c, Type::F32, &shape);
                    Built::new(if rms {
                        c.rms_norm(a, 1e-6)
                    } else {
                        c.norm(a, 1e-5)
                    })
                },
            ));
        }
        out.push(Case::new(
            name,
            Type::F32,
            format!("{name}(f32,permuted [32,6,2])"),
            DEFAULT,
            move |c| {
                let a = permuted(c, Type::F32, [32, 6, 2, 1]);
                Built::new(if rms {
                    c.rms_norm(a, 1e-6)
                } else {
                    c.norm(a, 1e-5)
                })
            },
        ));
    }
}

fn copy_cases(out: &mut Vec<Case>) {
    let pairs = [
        (Type::F32, Type::F32),
        (Type::F32, Type::F16),
        (Type::F32, Type::Bf16),
        (Type::F16, Type::F32),
        (Type::F16, Type::F16),
        (Type::Bf16, Type::F32),
        (Type::F32, Type::I32),
        (Type::I32, Type::F32),
        (Type::I32, Type::I32),
    ];
    for (from, to) in pairs {
        let cmp = if to == Type::F32 || to == from {
            DEFAULT
        } else {
            LOW
        };
        out.push(Case::new(
            "CPY",
            to,
            format!("CPY({from}->{to},[64,5,3])"),
            cmp,
            move |c| {
                let a = t(c, from, &[64, 5, 3]);
                let b = t(c, to, &[64, 5, 3]);
                Built::new(c.cpy(a, b)).with(a, Init::Uniform(-100.0, 100.0))
            },
        ));
        out.push(Case::new(
            "CPY",
            to,
            format!("CPY({from}->{to},transposed src)"),
            cmp,
            move |c| {
                let a0 = t(c, from, &[12, 10]);
                let a = c.transpose(a0);
                let b = t(c, to, &[10, 12]);
                Built::new(c.cpy(a, b)).with(a0, Init::Uniform(-100.0, 100.0))
            },
        ));
    }
    for q in QUANTS {
        out.push(Case::new(
            "CPY",
            q,
            format!("CPY(f32->{q},[256,4])"),
            QUANTIZED,
            move |c| {
                let a = t(c, Type::F32, &[256, 4]);
                let b = t(c, q, &[256, 4]);
                Built::new(c.cpy(a, b))
            },
        ));
        out.push(Case::new(
            "CPY",
            q,
            format!("CPY({q}->f32,[256,4])"),
            DEFAULT,
            move |c| {
                let a = t(c, q, &[256, 4]);
                let b = t(c, Type::F32, &[256, 4]);
                Built::new(c.cpy(a, b))
            },
        ));
    }
    for ty in [Type::F32, Type::F16] {
        out.push(Case::new(
            "CONT",
            ty,
            format!("CONT(type={ty},permute 0213 of [8,6,4,2])"),
            DEFAULT,
            move |c| {
                let a0 = t(c, ty, &[8, 6, 4, 2]);
                let a = c.permute(a0, 0, 2, 1, 3);
                Built::new(c.cont(a))
            },
        ));
        out.push(Case::new(
            "CONT",
            ty,
            format!("CONT(type={ty},transpose,reshape 2d)"),
            DEFAULT,
            move |c| {
                let a0 = t(c, ty, &[8, 6]);
                let a = c.transpose(a0);
                Built::new(c.cont_2d(a, 12, 4))
            },
        ));
        out.push(Case::new(
            "DUP",
            ty,
            format!("DUP(type={ty},view of rows 1..3)"),
            DEFAULT,
            move |c| {
                let a0 = t(c, ty, &[8, 6]);
                let nb1 = c[a0].nb[1];
                let v = c.view_2d(a0, 8, 3, nb1, nb1);
                Built::new(c.dup(v))
            },
        ));
    }
    out.push(Case::new(
        "CPY",
        Type::F16,
        "CPY(f32->f16,into a view of a cache)".into(),
        LOW,
        |c| {
            let cache = t(c, Type::F16, &[32, 10]);
            let x = t(c, Type::F32, &[32, 3]);
            let nb1 = c[cache].nb[1];
            let v = c.view_2d(cache, 32, 3, nb1, 4 * nb1);
            Built::new(c.cpy(x, v))
        },
    ));
}

fn more_copy_cases(out: &mut Vec<Case>) {
    for q in [Type::Q8_0, Type::Q4K] {
        let ne0 = q.block_size() as i64 * 2;
        out.push(Case::new(
            "CPY",
            q,
            format!("CPY({q}->{q},rows 1..4 of a view)"),
            DEFAULT,
            move |c| {
                let a0 = t(c, q, &[ne0, 6]);
                let nb1 = c[a0].nb[1];
                let a = c.view_2d(a0, ne0, 3, nb1, nb1);
                let b = t(c, q, &[ne0, 3]);
                Built::new(c.cpy(a, b))
            },
        ));
        out.push(Case::new(
            "GET_ROWS",
            q,
            format!("GET_ROWS({q},indices from a strided view)"),
            DEFAULT,
            move |c| {
                let a = t(c, q, &[ne0, 9]);
                let idx0 = t(c, Type::I32, &[4, 3]);
                let idx = c.view_1d(idx0, 3, 4 * 4);
                Built::new(c.get_rows(a, idx)).with(
                    idx0,
                    Init::Index {
                        max: 9,
                        unique: false,
                    },
                )
            },
        ));
    }
}

fn rows_cases(out: &mut Vec<Case>) {
    let mut srcs: Vec<Type> = FLOATS.to_vec();
    srcs.extend(QUANTS);
    srcs.push(Type::I32);
    for ty in srcs {
        let ne0 = if ty.block_size() > 32 { 256 } else { 64 };
        let cmp = if ty.is_quantized() {
            DEFAULT
        } else {
            tol(Type::F32)
        };
        out.push(Case::new(
            "GET_ROWS",
            ty,
            format!("GET_ROWS(type={ty},ne0={ne0},rows 10,idx [5,2])"),
            cmp,
            move |c| {
                let a = t(c, ty, &[ne0, 10, 2]);
                let idx = t(c, Type::I32, &[5, 2]);
                let init = if ty == Type::I32 {
                    Init::Uniform(-1000.0, 1000.0)
                } else {
                    Init::Uniform(-1.0, 1.0)
                };
                Built::new(c.get_rows(a, idx))
                    .with(
                        idx,
                        Init::Index {
                            max: 10,
                            unique: false,
                        },
                    )
                    .with(a, init)
            },
        ));
    }
    let mut dsts: Vec<Type> = FLOATS.to_vec();
    dsts.extend(QUANTS);
    for ty in dsts {
        for ity in [Type::I64, Type::I32] {
            let ne0 = if ty.block_size() > 32 { 256 } else { 64 };
            let cmp = if ty == Type::F32 {
                DEFAULT
            } else if ty.is_quantized() {
                QUANTIZED
            } else {
                LOW
            };
            let desc =
                format!("SET_ROWS(type={ty},idx={ity},ne0={ne0},dst rows 12,src rows 5,bcast)");
            out.push(Case::new("SET_ROWS", ty, desc, cmp, move |c| {
                let dst = t(c, ty, &[ne0, 12, 2, 1]);
                let src = t(c, Type::F32, &[ne0, 5, 2, 1]);
                let idx = t(c, ity, &[5, 1]);
                Built::new(c.set_rows(dst, src, idx)).with(
                    idx,
                    Init::Index {
                        max: 12,
                        unique: true,
                    },
                )
            }));
        }
    }
}

fn matmul_cases(out: &mut Vec<Case>) {
    // activations already in the weight's dot type are used in place
    for ty in [Type::F16, Type::Bf16] {
        for n in [1i64, 8] {
            let desc = format!("MUL_MAT(a={ty},b={ty},m=13,n={n},k=96)");
            out.push(Case::new("MUL_MAT", ty, desc, LOW, move |c| {
                let a = t(c, ty, &[96, 13]);
                let b = t(c, ty, &[96, n]);
                Built::new(c.mul_mat(a, b))
            }));
        }
    }
    let mut types: Vec<Type> = FLOATS.to_vec();
    types.extend(QUANTS);
    for ty in types {
        let k = if ty.block_size() > 32 { 256 } else { 64 };
        let cmp = tol(ty);
        for n in [1i64, 7, 33] {
            let desc = format!("MUL_MAT(a={ty},b=f32,m=19,n={n},k={k})");
            out.push(Case::new("MUL_MAT", ty, desc, cmp, move |c| {
                let a = t(c, ty, &[k, 19]);
                let b = t(c, Type::F32, &[k, n]);
                Built::new(c.mul_mat(a, b))
            }));
        }
        let desc = format!("MUL_MAT(a={ty},b=f32,m=9,n=5,k={k},batch a [2,1] b [4,3])");
        out.push(Case::new("MUL_MAT", ty, desc, cmp, move |c| {
            let a = t(c, ty, &[k, 9, 2, 1]);
            let b = t(c, Type::F32, &[k, 5, 4, 3]);
            Built::new(c.mul_mat(a, b))
        }));
    }
    for tb in [Type::F16, Type::F32] {
        let desc = format!("MUL_MAT(a=f32,b={tb},b permuted,m=6,n=4,k=32,heads=3)");
        out.push(Case::new("MUL_MAT", Type::F32, desc, tol(tb), move |c| {
            let a = t(c, Type::F32, &[32, 6, 3]);
            let b0 = t(c, tb, &[32, 3, 4]);
            let b = c.permute(b0, 0, 2, 1, 3);
            Built::new(c.mul_mat(a, b))
        }));
    }
    out.push(Case::new(
        "MUL_MAT",
        Type::F32,
        "MUL_MAT(a=f32 view of rows,b=f32 transposed)".into(),
        DEFAULT,
        |c| {
            let a0 = t(c, Type::F32, &[16, 12]);
            let nb1 = c[a0].nb[1];
            let a = c.view_2d(a0, 16, 8, nb1, 2 * nb1);
            let b0 = t(c, Type::F32, &[3, 16]);
            let b = c.transpose(b0);
            Built::new(c.mul_mat(a, b))
        },
    ));
    for ty in [Type::F32, Type::F16, Type::Q8_0, Type::Q4_0, Type::Q4K] {
        let k = if ty.block_size() > 32 { 256 } else { 64 };
        for (n_used_b, tokens) in [(1i64, 3i64), (2, 4)] {
            let desc = format!(
                "MUL_MAT_ID(a={ty},n_as=4,n_used=2,b rows {n_used_b},tokens {tokens},k={k})"
            );
            out.push(Case::new("MUL_MAT_ID", ty, desc, tol(ty), move |c| {
                let a = t(c, ty, &[k, 10, 4]);
                let b = t(c, Type::F32, &[k, n_used_b, tokens]);
                let ids = t(c, Type::I32, &[2, tokens]);
                Built::new(c.mul_mat_id(a, b, ids)).with(
                    ids,
                    Init::Index {
                        max: 4,
                        unique: true,
                    },
                )
            }));
        }
    }
}

fn rope_cases(out: &mut Vec<Case>) {
    for ty in [Type::F32, Type::F16] {
        for mode in [rope_mode::NORMAL, rope_mode::NEOX] {
            for (ext, ff, n_dims) in [
                (0.0f32, false, 32),
                (0.0, false, 16),
                (1.0, false, 32),
                (0.0, true, 32),
            ] {
                let desc = format!("ROPE(type={ty},mode={mode},n_dims={n_dims},ext_factor={ext},freq_factors={ff})");
                out.push(Case::new("ROPE", ty, desc, tol(ty), move |c| {
                    let a = t(c, ty, &[32, 4, 5, 1]);
                    let pos = t(c, Type::I32, &[5]);
                    let f = if ff {
                        Some(t(c, Type::F32, &[n_dims as i64 / 2]))
                    } else {
                        None
                    };
                    let p = RopeParams {
                        n_dims,
                        mode,
                        n_ctx_orig: 4096,
                        freq_base: 10000.0,
                        freq_scale: if ext != 0.0 { 0.25 } else { 1.0 },
                        ext_factor: ext,
                        attn_factor: 1.0,
                        beta_fast: 32.0,
                        beta_slow: 1.0,
                        sections: [0; 4],
                        n_offs: 0,
                    };
                    let mut b = Built::new(c.rope_ext(a, pos, f, p)).with(
                        pos,
                        Init::Index {
                            max: 100,
                            unique: false,
                        },
                    );
                    if let Some(f) = f {
                        b = b.with(f, Init::Uniform(0.5, 4.0));
                    }
                    b
                }));
            }
        }
    }
    out.push(Case::new(
        "ROPE",
        Type::F32,
        "ROPE(f32,neox,view of a fused qkv row)".into(),
        DEFAULT,
        |c| {
            let qkv = t(c, Type::F32, &[3 * 16 * 2, 4]);
            let nb1 = c[qkv].nb[1];
            let k = c.view_3d(qkv, 16, 2, 4, 16 * 4, nb1, 16 * 2 * 4);
            let pos = t(c, Type::I32, &[4]);
            let p = RopeParams {
                n_dims: 16,
                mode: rope_mode::NEOX,
                n_ctx_orig: 2048,
                ..RopeParams::default()
            };
            Built::new(c.rope_ext(k, pos, None, p)).with(
                pos,
                Init::Index {
                    max: 50,
                    unique: false,
                },
            )
        },
    ));
    // ggml_rope_set_offset (deepseek2's un-split attention): the rotated part is the tail
    for mode in [rope_mode::NORMAL, rope_mode::NEOX] {
        let desc = format!("ROPE(f32,mode={mode},n_dims=8,n_offs=24,[32,4,5])");
        out.push(Case::new("ROPE", Type::F32, desc, DEFAULT, move |c| {
            let a = t(c, Type::F32, &[32, 4, 5, 1]);
            let pos = t(c, Type::I32, &[5]);
            let p = RopeParams {
                n_dims: 8,
                mode,
                n_ctx_orig: 4096,
                ..RopeParams::default()
            };
            let r = c.rope_ext(a, pos, None, p);
            let r = c.rope_set_offset(r, 24);
            Built::new(r).with(
                pos,
                Init::Index {
                    max: 100,
                    unique: false,
                },
            )
        }));
    }
}

fn attn_cases(out: &mut Vec<Case>) {
    for (mask, max_bias, sinks) in [
        (None, 0.0f32, false),
        (Some(Type::F32), 0.0, false),
        (Some(Type::F16), 0.0, false),
        (Some(Type::F16), 8.0, false),
        (Some(Type::F32), 0.0, true),
    ] {
        let desc =
            format!("SOFT_MAX(f32,mask={mask:?},max_bias={max_bias},sinks={sinks},[40,6,4,2])");
        out.push(Case::new("SOFT_MAX", Type::F32, desc, DEFAULT, move |c| {
            let a = t(c, Type::F32, &[40, 6, 4, 2]);
            let m = mask.map(|mt| t(c, mt, &[40, 8, 1, 2]));
            let r = c.soft_max_ext(a, m, 0.3, max_bias);
            let mut b = Built::new(r);
            if sinks {
                let s = t(c, Type::F32, &[4]);
                c.soft_max_add_sinks(r, Some(s));
            }
            if let Some(m) = m {
                b = b.with(m, Init::CausalMask);
            }
            b
        }));
    }
    for (kv, mask_ty, softcap, max_bias, sinks, n_q) in [
        (Type::F16, Some(Type::F16), 0.0f32, 0.0f32, false, 1i64),
        (Type::F16, Some(Type::F16), 0.0, 0.0, false, 7),
        (Type::F32, Some(Type::F16), 0.0, 0.0, false, 3),
        (Type::F16, None, 0.0, 0.0, false, 2),
        (Type::F16, Some(Type::F16), 30.0, 0.0, false, 3),
        (Type::F16, Some(Type::F16), 0.0, 8.0, false, 3),
        (Type::F16, Some(Type::F16), 0.0, 0.0, true, 3),
        (Type::F16, Some(Type::F32), 0.0, 0.0, false, 3),
        (Type::Q8_0, Some(Type::F16), 0.0, 0.0, false, 3),
        (Type::Bf16, Some(Type::F16), 0.0, 0.0, false, 3),
    ] {
        let desc = format!(
            "FLASH_ATTN_EXT(kv={kv},mask={mask_ty:?},softcap={softcap},max_bias={max_bias},sinks={sinks},n_q={n_q},d=64,h=4,h_kv=2,n_kv=24)"
        );
        out.push(Case::new("FLASH_ATTN_EXT", kv, desc, LOW, move |c| {
            let (d, h, hkv, nkv) = (64i64, 4i64, 2i64, 24i64);
            let q0 = t(c, Type::F32, &[d, h, n_q]);
            let q = c.permute(q0, 0, 2, 1, 3);
            let k0 = t(c, kv, &[d, hkv, nkv]);
            let k = c.permute(k0, 0, 2, 1, 3);
            let v0 = t(c, kv, &[d, hkv, nkv]);
            let v = c.permute(v0, 0, 2, 1, 3);
            let m = mask_ty.map(|mt| t(c, mt, &[nkv, n_q.max(1)]));
            let r = c.flash_attn_ext(q, k, v, m, 0.125, max_bias, softcap);
            if sinks {
                let s = t(c, Type::F32, &[h]);
                c.flash_attn_ext_add_sinks(r, Some(s));
            }
            let mut b = Built::new(r).with(q0, Init::Uniform(-2.0, 2.0));
            if let Some(m) = m {
                b = b.with(m, Init::CausalMask);
            }
            b
        }));
    }
}

/// Every case.
pub fn all() -> Vec<Case> {
    let mut out = Vec::new();
    rows_cases(&mut out);
    more_copy_cases(&mut out);
    binary_cases(&mut out);
    unary_cases(&mut out);
    reduce_cases(&mut out);
    layout_cases(&mut out);
    copy_cases(&mut out);
    matmul_cases(&mut out);
    rope_cases(&mut out);
    attn_cases(&mut out);
    out
}
