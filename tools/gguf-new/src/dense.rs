//! Tensor lists and keys of the dense architectures beyond llama/qwen/gemma2, as llama.cpp's
//! converter writes them (one list per architecture, names of src/llama-arch.cpp).

use gguf::Value;

use crate::model::{Shape, Spec};
use crate::weights::Init;
use crate::Arch;

/// What a layer of these architectures holds, beyond attention and FFN matrices.
struct Layout {
    /// LayerNorm with biases (attn_norm, ffn_norm, output_norm)
    norm_bias: bool,
    /// one attn_qkv matrix instead of attn_q / attn_k / attn_v
    fused_qkv: bool,
    /// biases on Q/K/V
    qkv_bias: bool,
    /// bias on attn_output and the FFN matrices
    out_ffn_bias: bool,
    /// an ffn_norm (command-r's parallel block has none)
    ffn_norm: bool,
    /// FFN: gate+up+down, a fused up of twice the width (gate and up halves), or up+down
    ffn: Ffn,
    /// post_attention_norm and post_ffw_norm (glm4, olmo2)
    post_norms: bool,
    /// olmo2: no attn_norm/ffn_norm, Q/K norms over whole rows
    olmo2: bool,
    /// an output matrix of its own
    output: bool,
}

#[derive(PartialEq)]
enum Ffn {
    Gated,
    FusedUp,
    Plain,
}

fn layout(arch: Arch) -> Option<Layout> {
    let base = Layout {
        norm_bias: false,
        fused_qkv: false,
        qkv_bias: false,
        out_ffn_bias: false,
        ffn_norm: true,
        ffn: Ffn::Gated,
        post_norms: false,
        olmo2: false,
        output: true,
    };
    Some(match arch {
        Arch::Gemma => Layout {
            output: false,
            ..base
        },
        Arch::Phi3 => Layout {
            fused_qkv: true,
            ffn: Ffn::FusedUp,
            ..base
        },
        Arch::Granite | Arch::Exaone | Arch::Smollm3 | Arch::Mistral3 => base,
        Arch::Olmo2 => Layout {
            olmo2: true,
            post_norms: true,
            ffn_norm: false,
            ..base
        },
        Arch::Starcoder2 => Layout {
            norm_bias: true,
            qkv_bias: true,
            out_ffn_bias: true,
            ffn: Ffn::Plain,
            ..base
        },
        Arch::Stablelm => Layout {
            norm_bias: true,
            qkv_bias: true,
            ..base
        },
        Arch::CommandR | Arch::Cohere2 => Layout {
            ffn_norm: false,
            output: false,
            ..base
        },
        Arch::Glm4 => Layout {
            qkv_bias: true,
            ffn: Ffn::FusedUp,
            post_norms: true,
            ..base
        },
        _ => return None,
    })
}

/// The tensors of `s`, None for the architectures model.rs lists itself.
pub fn tensors(s: &Shape, n_vocab: u64, wtype: ggml::Type) -> Option<Vec<Spec>> {
    let lay = layout(s.arch)?;
    let (e, ff) = (s.embd as u64, s.ff as u64);
    let kv = s.heads_kv as u64 * (e / s.heads as u64);
    let std = |fan_in: u64| Init::Normal((fan_in as f32).powf(-0.5));
    let mat = |name: String, shape: Vec<u64>, init| Spec {
        name,
        shape,
        ty: wtype,
        init,
    };
    let vec = |name: String, len: u64, init| Spec {
        name,
        shape: vec![len],
        ty: ggml::Type::F32,
        init,
    };
    let bias = Init::Normal(0.02);
    let mut out = vec![mat(
        "token_embd.weight".into(),
        vec![e, n_vocab],
        Init::Normal(1.0),
    )];
    for il in 0..s.layers + s.nextn {
        let p = |n: &str| format!("blk.{il}.{n}");
        if !lay.olmo2 {
            out.push(vec(p("attn_norm.weight"), e, Init::Norm));
            if lay.norm_bias {
                out.push(vec(p("attn_norm.bias"), e, bias));
            }
        }
        if lay.fused_qkv {
            out.push(mat(p("attn_qkv.weight"), vec![e, e + 2 * kv], std(e)));
        } else {
            for (n, rows) in [("attn_q", e), ("attn_k", kv), ("attn_v", kv)] {
                out.push(mat(p(&format!("{n}.weight")), vec![e, rows], std(e)));
                if lay.qkv_bias {
                    out.push(vec(p(&format!("{n}.bias")), rows, bias));
                }
            }
        }
        out.push(mat(p("attn_output.weight"), vec![e, e], std(e)));
        if lay.out_ffn_bias {
            out.push(vec(p("attn_output.bias"), e, bias));
        }
        // command-r's head LayerNorms, present from 64 layers on (llama.cpp reads them there)
        if s.arch == Arch::CommandR && s.layers >= 64 {
            let head = e / s.heads as u64;
            let q = Spec {
                name: p("attn_q_norm.weight"),
                shape: vec![head, s.heads as u64],
                ty: ggml::Type::F32,
                init: Init::Norm,
            };
            let k = Spec {
                name: p("attn_k_norm.weight"),
                shape: vec![head, s.heads_kv as u64],
                ty: ggml::Type::F32,
                init: Init::Norm,
            };
            out.extend([q, k]);
        }
        if lay.olmo2 {
            out.push(vec(p("attn_q_norm.weight"), e, Init::Norm));
            out.push(vec(p("attn_k_norm.weight"), kv, Init::Norm));
        }
        if lay.post_norms {
            out.push(vec(p("post_attention_norm.weight"), e, Init::Norm));
        }
        if lay.ffn_norm {
            out.push(vec(p("ffn_norm.weight"), e, Init::Norm));
            if lay.norm_bias {
                out.push(vec(p("ffn_norm.bias"), e, bias));
            }
        }
        match lay.ffn {
            Ffn::Gated => {
                out.push(mat(p("ffn_gate.weight"), vec![e, ff], std(e)));
                out.push(mat(p("ffn_up.weight"), vec![e, ff], std(e)));
            }
            Ffn::FusedUp => out.push(mat(p("ffn_up.weight"), vec![e, 2 * ff], std(e))),
            Ffn::Plain => {
                out.push(mat(p("ffn_up.weight"), vec![e, ff], std(e)));
                out.push(vec(p("ffn_up.bias"), ff, bias));
            }
        }
        out.push(mat(p("ffn_down.weight"), vec![ff, e], std(ff)));
        if lay.out_ffn_bias {
            out.push(vec(p("ffn_down.bias"), e, bias));
        }
        if lay.post_norms {
            out.push(vec(p("post_ffw_norm.weight"), e, Init::Norm));
        }
        out.extend(crate::nextn::tensors(s, il, n_vocab, wtype));
    }
    out.push(vec("output_norm.weight".into(), e, Init::Norm));
    if lay.norm_bias {
        out.push(vec("output_norm.bias".into(), e, bias));
    }
    if lay.output {
        out.push(mat("output.weight".into(), vec![e, n_vocab], std(e)));
    }
    if s.arch == Arch::Phi3 {
        // Phi-3 128k's longrope factors ({n_rot/2}), one pair for all layers
        let half = (e / s.heads as u64) / 2;
        out.push(vec("rope_factors_long.weight".into(), half, Init::Norm));
        out.push(vec("rope_factors_short.weight".into(), half, Init::Norm));
    }
    Some(out)
}

/// The architecture's own keys (after the common ones of model.rs), with the values its
/// converter writes for a model of this shape.
pub fn kv(s: &Shape) -> Vec<(String, Value)> {
    let a = s.arch.name();
    let k = |n: &str| format!("{a}.{n}");
    let head = s.embd / s.heads;
    let layer_norm_eps = (k("attention.layer_norm_epsilon"), Value::F32(1e-5));
    match s.arch {
        Arch::Granite => vec![
            (k("logit_scale"), Value::F32(8.0)),
            (k("residual_scale"), Value::F32(0.22)),
            (k("embedding_scale"), Value::F32(12.0)),
            (k("attention.scale"), Value::F32(1.0 / head as f32)),
        ],
        Arch::Starcoder2 => vec![layer_norm_eps],
        // StableLM 2 rotates a quarter of each head
        Arch::Stablelm => vec![
            layer_norm_eps,
            (k("rope.dimension_count"), Value::U32(head / 4)),
        ],
        Arch::CommandR => vec![layer_norm_eps, (k("logit_scale"), Value::F32(0.125))],
        Arch::Cohere2 => vec![
            layer_norm_eps,
            (k("logit_scale"), Value::F32(0.125)),
            (k("attention.sliding_window"), Value::U32(s.swa)),
            // every other layer dense, so that a 2-layer model has both kinds
            (k("attention.sliding_window_pattern"), Value::U32(2)),
        ],
        // Ministral 3's llama 4 attention temperature (its beta), with a short original
        // context so that the query scale steps every 16 positions
        Arch::Mistral3 => {
            let mut kv = vec![
                (k("attention.temperature_scale"), Value::F32(0.1)),
                (k("rope.scaling.original_context_length"), Value::U32(16)),
            ];
            // Ministral 3's YaRN keys (mscale_all_dim 1), with betas off the defaults
            if let Some(f) = s.yarn {
                kv.extend([
                    (k("rope.scaling.type"), "yarn".into()),
                    (k("rope.scaling.factor"), Value::F32(f)),
                    (k("rope.scaling.yarn_log_multiplier"), Value::F32(1.0)),
                    (k("rope.scaling.yarn_beta_fast"), Value::F32(16.0)),
                    (k("rope.scaling.yarn_beta_slow"), Value::F32(2.0)),
                ]);
            }
            kv
        }
        // OLMo 3 (olmo2 with a window) when --swa is given: every other layer slides here, so
        // that a 2-layer model has both kinds
        Arch::Olmo2 if s.swa_set => vec![
            (k("attention.sliding_window"), Value::U32(s.swa)),
            (k("attention.sliding_window_pattern"), Value::U32(2)),
        ],
        // Phi-3 128k: its longrope attention factor; contexts past 64 use the long factors
        Arch::Phi3 => vec![
            (k("rope.scaling.attn_factor"), Value::F32(1.19)),
            (k("rope.scaling.original_context_length"), Value::U32(64)),
        ],
        // GLM-4 rotates half of each head
        Arch::Glm4 => vec![(k("rope.dimension_count"), Value::U32(head / 2))],
        _ => Vec::new(),
    }
}
