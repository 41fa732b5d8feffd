//! llama-quantize's choice of type per tensor (llama.cpp src/llama-quant.cpp): which tensors
//! are quantized at all, the per-ftype mixtures (Q4_K_M's Q6_K attn_v on "more bits" layers
//! and so on), the user overrides, and the fallback for rows the block size does not divide.

// Index loops mirror ggml's C line by line, which keeps the port auditable.
#![allow(clippy::needless_range_loop)]

mod ftype;
pub mod imatrix;
mod input;
pub mod kv_override;
mod model;
mod output;
mod prune;
#[cfg(test)]
mod tests;

pub use ftype::Ftype;
pub use imatrix::{Imatrix, ImatrixEntry, ImatrixError};
pub use input::split_path;
pub use kv_override::{KvOverride, OverrideValue};
pub use model::{
    model_info, model_info_with, model_quantize, model_quantize_with_progress, output_kv,
    ModelQuantizeParams, QuantizeStats, QNT_VERSION,
};

use ggml::Type;
use regex::Regex;

/// The broad role of a tensor, from its name (llama.cpp's `tensor_category`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorCategory {
    TokenEmbd,
    AttentionQ,
    AttentionV,
    AttentionK,
    AttentionQkv,
    AttentionKvB,
    AttentionOutput,
    FfnUp,
    FfnGate,
    FfnDown,
    Output,
    Other,
}

fn is_token_embd(name: &str) -> bool {
    name == "token_embd.weight" || name == "per_layer_token_embd.weight"
}

pub fn tensor_category(name: &str) -> TensorCategory {
    use TensorCategory::*;
    if name == "output.weight" {
        return Output;
    }
    if is_token_embd(name) {
        return TokenEmbd;
    }
    let table = [
        ("attn_qkv.weight", AttentionQkv),
        ("attn_kv_b.weight", AttentionKvB),
        ("attn_v.weight", AttentionV),
        ("attn_k.weight", AttentionK),
        ("attn_q.weight", AttentionQ),
        ("attn_output.weight", AttentionOutput),
        ("ffn_up", FfnUp),
        ("ffn_gate", FfnGate),
        ("ffn_down", FfnDown),
    ];
    table
        .iter()
        .find(|(pat, _)| name.contains(pat))
        .map(|(_, c)| *c)
        .unwrap_or(Other)
}

fn is_attn_v(cat: TensorCategory) -> bool {
    matches!(
        cat,
        TensorCategory::AttentionV | TensorCategory::AttentionQkv | TensorCategory::AttentionKvB
    )
}

/// What the choice needs to know about the model.
#[derive(Clone, Debug, Default)]
pub struct ModelInfo {
    /// general.architecture, e.g. "llama", "qwen2", "falcon".
    pub arch: String,
    /// Number of layers (all of them, nextn included).
    pub n_layer: u32,
    pub n_expert: u32,
    pub n_head: u32,
    pub n_head_kv: u32,
    /// llama.cpp's LLM_TYPE_70B (attn_v gets more bits there).
    pub is_70b: bool,
}

impl ModelInfo {
    fn n_gqa(&self) -> u32 {
        self.n_head.checked_div(self.n_head_kv).unwrap_or(0)
    }
}

/// The user's choices (llama_model_quantize_params, the parts that decide types).
#[derive(Clone, Debug)]
pub struct QuantizeParams {
    pub ftype: Ftype,
    /// --pure: every quantizable tensor gets the default type (overrides still apply).
    pub pure: bool,
    /// false with --leave-output-tensor.
    pub quantize_output_tensor: bool,
    /// --output-tensor-type
    pub output_tensor_type: Option<Type>,
    /// --token-embedding-type
    pub token_embedding_type: Option<Type>,
    /// --tensor-type PATTERN=TYPE, in order; the first pattern found in the name wins.
    pub tensor_types: Vec<(Regex, Type)>,
    /// The COPY target type: tensors are copied unchanged.
    pub only_copy: bool,
    /// Whether an importance matrix was given (some mixtures differ with one).
    pub has_imatrix: bool,
}

impl QuantizeParams {
    pub fn new(ftype: Ftype) -> QuantizeParams {
        QuantizeParams {
            ftype,
            pure: false,
            quantize_output_tensor: true,
            output_tensor_type: None,
            token_embedding_type: None,
            tensor_types: Vec::new(),
            only_copy: false,
            has_imatrix: false,
        }
    }
}

/// A tensor as the quantizer sees it.
#[derive(Clone, Debug)]
pub struct TensorDesc {
    pub name: String,
    pub ne: [u64; 4],
    pub ty: Type,
}

impl TensorDesc {
    fn n_dims(&self) -> usize {
        (1..4)
            .rev()
            .find(|&i| self.ne[i] > 1)
            .map(|i| i + 1)
            .unwrap_or(1)
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum QuantError {
    #[error("no tensor type fallback is defined for type {0}")]
    NoFallback(Type),
    #[error("Failed to determine layer for tensor {0}")]
    NoLayer(String),
    #[error("Bad layer {0} for tensor {1}. Must be in [0, {2})")]
    BadLayer(i64, String, u32),
    /// Reading, converting or writing the model failed.
    #[error("{0}")]
    Failed(String),
}

/// `sscanf(name, "blk.%d.", &il)`: the layer number, if the name has one.
pub fn layer_of(name: &str) -> Option<i64> {
    let rest = name.strip_prefix("blk.")?.trim_start();
    let (sign, digits) = match rest.as_bytes().first() {
        Some(b'-') => (-1, &rest[1..]),
        Some(b'+') => (1, &rest[1..]),
        _ => (1, rest),
    };
    let end = digits.bytes().take_while(u8::is_ascii_digit).count();
    digits[..end].parse::<i64>().ok().map(|v| sign * v)
}

/// The order llama.cpp's model loader keeps weights in (and llama-quantize writes them):
/// tensors without a layer first, then by layer, each group by name.
pub fn loader_order(names: &mut [impl AsRef<str>]) {
    names.sort_by(|a, b| {
        let (a, b) = (a.as_ref(), b.as_ref());
        (layer_of(a).unwrap_or(-1), a).cmp(&(layer_of(b).unwrap_or(-1), b))
    });
}

/// tensor_allows_quantization: weights of 2+ dimensions, minus norms, routers, small tables.
pub fn allows_quantization(params: &QuantizeParams, t: &TensorDesc) -> bool {
    if params.only_copy || t.n_dims() < 2 {
        return false;
    }
    let name = t.name.as_str();
    let mut q = name.ends_with("weight");
    q &= !name.contains("_norm.weight");
    q &= params.quantize_output_tensor || name != "output.weight";
    let never = [
        "ffn_gate_inp.weight",
        "ffn_gate_tid2eid.weight",
        "altup",
        "laurel",
        "per_layer_model_proj",
        "ssm_conv1d",
        "shortconv.conv.weight",
        "indexer.k_proj.weight",
        "indexer.q_proj.weight",
        "time_mix_first.weight",
        "time_mix_w0.weight",
        "time_mix_w1.weight",
        "time_mix_w2.weight",
        "time_mix_v0.weight",
        "time_mix_v1.weight",
        "time_mix_v2.weight",
        "time_mix_a0.weight",
        "time_mix_a1.weight",
        "time_mix_a2.weight",
        "time_mix_g1.weight",
        "time_mix_g2.weight",
        "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight",
        "time_mix_lerp_fused.weight",
        "attn_rel_b.weight",
        ".position_embd",
        "sam.pos_embd",
        "sam.neck.",
        "sam.net_",
        ".rel_pos",
        ".patch_embd",
        ".patch_merger",
        "a.rvq.codebook",
        "mm.a.code_embd",
    ];
    q &= !never.iter().any(|p| name.contains(p));
    q &= name != "position_embd.weight" && name != "token_types.weight";
    q
}

/// Whether llama-quantize insists on an imatrix for this tensor at this type.
pub fn tensor_requires_imatrix(name: &str, ty: Type, ftype: Ftype) -> bool {
    if is_token_embd(name) || name == "output.weight" {
        return false;
    }
    match ty {
        Type::Iq3Xxs | Type::Iq2Xxs | Type::Iq2Xs | Type::Iq2S | Type::Iq1M | Type::Iq1S => true,
        // the k-quants never need one, except Q2_K in a Q2_K_S file
        Type::Q2K => ftype == Ftype::Q2KS,
        _ => false,
    }
}

/// One tensor's outcome: the type, and the warnings llama.cpp logs while choosing it.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub ty: Type,
    pub warnings: Vec<String>,
}

/// The running state of one quantization (counters over attn_v / ffn_* tensors).
pub struct TypeChooser<'a> {
    model: &'a ModelInfo,
    params: &'a QuantizeParams,
    n_attention_wv: u32,
    i_attention_wv: u32,
    n_ffn: u32,
    i_ffn_down: u32,
    i_ffn_gate: u32,
    i_ffn_up: u32,
    has_tied_embeddings: bool,
    /// How many tensors fell back to another type because of their row length.
    pub n_fallback: u32,
}

impl<'a> TypeChooser<'a> {
    /// `names` are all the model's tensor names (used to count attn_v tensors and to see
    /// whether output.weight exists).
    pub fn new(
        model: &'a ModelInfo,
        params: &'a QuantizeParams,
        names: &[&str],
    ) -> TypeChooser<'a> {
        let cats: Vec<TensorCategory> = names.iter().map(|n| tensor_category(n)).collect();
        TypeChooser {
            model,
            params,
            n_attention_wv: cats.iter().filter(|c| is_attn_v(**c)).count() as u32,
            i_attention_wv: 0,
            n_ffn: model.n_layer,
            i_ffn_down: 0,
            i_ffn_gate: 0,
            i_ffn_up: 0,
            has_tied_embeddings: !cats.contains(&TensorCategory::Output),
            n_fallback: 0,
        }
    }

    /// The type of the next tensor; tensors must come in the loader's order (`loader_order`).
    pub fn choose(&mut self, t: &TensorDesc) -> Result<Choice, QuantError> {
        let mut warnings = Vec::new();
        if !allows_quantization(self.params, t) {
            return Ok(Choice { ty: t.ty, warnings });
        }
        let p = self.params;
        let cat = tensor_category(&t.name);
        if let (Some(ty), TensorCategory::TokenEmbd) = (p.token_embedding_type, cat) {
            let named = t.name == "per_layer_token_embd.weight"
                && p.tensor_types.iter().any(|(re, _)| re.is_match(&t.name));
            if !named {
                return Ok(Choice { ty, warnings });
            }
        }
        if let (Some(ty), TensorCategory::Output) = (p.output_tensor_type, cat) {
            return Ok(Choice { ty, warnings });
        }
        let mut new_type = p.ftype.default_type();
        if new_type.is_quantized() {
            let mut manual = false;
            if let Some((_, qtype)) = p.tensor_types.iter().find(|(re, _)| re.is_match(&t.name)) {
                if *qtype != new_type {
                    warnings.push(format!(
                        "llama_tensor_get_type: {:<36} - applying manual override: {} -> {}\n",
                        t.name, new_type, qtype
                    ));
                    new_type = *qtype;
                }
                manual = true;
            }
            if !manual && !p.pure {
                new_type = self.mixture_type(new_type, t, cat)?;
            }
            new_type = self.fallback(t, new_type, &mut warnings)?;
        }
        Ok(Choice {
            ty: new_type,
            warnings,
        })
    }

    /// Chooses every tensor's type, in the order given.
    pub fn choose_all(&mut self, tensors: &[TensorDesc]) -> Result<Vec<Choice>, QuantError> {
        tensors.iter().map(|t| self.choose(t)).collect()
    }

    fn fallback(
        &mut self,
        t: &TensorDesc,
        target: Type,
        warnings: &mut Vec<String>,
    ) -> Result<Type, QuantError> {
        let ncols = t.ne[0];
        let qk = target.block_size() as u64;
        if ncols.is_multiple_of(qk) {
            return Ok(target);
        }
        self.n_fallback += 1;
        let mut msg = format!(
            "warning: {:<36} - ncols {:>6} not divisible by {:>3} (required for type {:>7}) ",
            t.name,
            ncols,
            qk,
            target.name()
        );
        let mut ret = match target {
            Type::Iq1S
            | Type::Iq1M
            | Type::Iq2Xxs
            | Type::Iq2Xs
            | Type::Iq2S
            | Type::Iq3Xxs
            | Type::Iq3S
            | Type::Iq4Xs => Type::Iq4Nl,
            Type::Q2_0 | Type::Q2K | Type::Q3K | Type::Tq1_0 | Type::Tq2_0 => Type::Q4_0,
            Type::Q4K => Type::Q5_0,
            Type::Q5K => Type::Q5_1,
            Type::Q6K => Type::Q8_0,
            _ if qk <= 32 => target,
            _ => return Err(QuantError::NoFallback(target)),
        };
        if !ncols.is_multiple_of(ret.block_size() as u64) {
            msg.push_str("(WARNING: must use F16 due to unusual shape) ");
            ret = Type::F16;
        }
        msg.push_str(&format!("-> falling back to {:>7}\n", ret.name()));
        warnings.push(msg);
        Ok(ret)
    }

    fn layer_info(&self, i_layer: u32, n_layer: u32, name: &str) -> Result<(u32, u32), QuantError> {
        if self.model.n_expert.max(1) > 1 {
            let il = layer_of(name).ok_or_else(|| QuantError::NoLayer(name.to_string()))?;
            if il < 0 || il >= n_layer as i64 {
                return Err(QuantError::BadLayer(il, name.to_string(), n_layer));
            }
            return Ok((il as u32, n_layer));
        }
        Ok((i_layer, n_layer))
    }

    /// llama_tensor_get_type_impl for the mixtures of `Ftype`.
    fn mixture_type(
        &mut self,
        mut new_type: Type,
        t: &TensorDesc,
        cat: TensorCategory,
    ) -> Result<Type, QuantError> {
        use Ftype as F;
        use TensorCategory as C;
        let ftype = self.params.ftype;
        let m = self.model;
        let falcon = m.arch == "falcon";
        let more_bits = |i: u32, n: u32| -> bool {
            let (i, n) = (i as i64, n as i64);
            i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
        };
        // the 1.5-2.7 bpw mixtures, which share one set of rules
        let iq12 = matches!(
            ftype,
            F::Iq2Xxs | F::Iq2Xs | F::Iq1S | F::Iq2S | F::Iq2M | F::Iq1M
        );
        let iq2sm = matches!(ftype, F::Iq2S | F::Iq2M);

        // glm5-next keeps these projections at Q8_0 or better
        if m.arch == "glm5-next"
            && ["attn_q_a", "attn_q_b", "nextn.eh_proj"]
                .iter()
                .any(|p| t.name.contains(p))
            && !matches!(new_type, Type::F32 | Type::Bf16 | Type::F16)
        {
            return Ok(Type::Q8_0);
        }

        if cat == C::Output || (self.has_tied_embeddings && cat == C::TokenEmbd) {
            if let Some(ty) = self.params.output_tensor_type {
                new_type = ty;
            } else {
                let nx = t.ne[0];
                let qk = new_type.block_size() as u64;
                if ftype == F::Mxfp4Moe || falcon || !nx.is_multiple_of(qk) {
                    new_type = Type::Q8_0;
                } else if matches!(
                    ftype,
                    F::Iq2Xxs | F::Iq2Xs | F::Iq3Xxs | F::Iq1S | F::Iq2S | F::Iq2M | F::Iq1M
                ) {
                    new_type = Type::Q5K;
                } else if new_type != Type::Q8_0 {
                    new_type = Type::Q6K;
                }
            }
        } else if ftype == F::Mxfp4Moe {
            // expert tensors (3-D) become MXFP4, everything else Q8_0; bailingmoe3's 3-D MLA
            // projections are not experts
            let expert_role = matches!(cat, C::FfnUp | C::FfnGate | C::FfnDown);
            new_type = if t.ne[2] > 1 && (m.arch != "bailingmoe3" || expert_role) {
                Type::Mxfp4
            } else {
                Type::Q8_0
            };
        } else if cat == C::TokenEmbd {
            if let Some(ty) = self.params.token_embedding_type {
                new_type = ty;
            } else if matches!(ftype, F::Iq2Xxs | F::Iq2Xs | F::Iq1S | F::Iq1M) {
                new_type = Type::Q2K;
            } else if matches!(ftype, F::Iq2S | F::Iq2M | F::Iq3Xxs) {
                new_type = Type::Iq3S;
            } else if matches!(ftype, F::Tq1_0 | F::Tq2_0 | F::Q2_0) {
                new_type = Type::Q4K;
            }
        } else if iq12 {
            if is_attn_v(cat) {
                new_type = if m.n_gqa() >= 4 || m.n_expert >= 4 {
                    Type::Q4K
                } else if iq2sm {
                    Type::Iq3S
                } else {
                    Type::Q2K
                };
                self.i_attention_wv += 1;
            } else if m.n_expert == 8 && cat == C::AttentionK {
                new_type = Type::Q4K;
            } else if cat == C::FfnDown {
                if self.i_ffn_down < self.n_ffn / 8 {
                    new_type = if iq2sm { Type::Iq3S } else { Type::Q2K };
                }
                self.i_ffn_down += 1;
            } else if cat == C::AttentionOutput {
                if m.n_expert == 8 {
                    new_type = Type::Q5K;
                } else if matches!(ftype, F::Iq1S | F::Iq1M) {
                    new_type = Type::Iq2Xxs;
                } else if iq2sm {
                    new_type = Type::Iq3S;
                }
            }
        } else if is_attn_v(cat) {
            let gqa4 = m.n_gqa() >= 4;
            match ftype {
                F::Q2K => new_type = if gqa4 { Type::Q4K } else { Type::Q3K },
                F::Q2KS if gqa4 => new_type = Type::Q4K,
                F::Iq3Xxs => {
                    new_type = if gqa4 {
                        Type::Q4K
                    } else if !self.params.has_imatrix {
                        Type::Iq3S
                    } else {
                        Type::Iq3Xxs
                    }
                }
                F::Iq3Xs | F::Iq3S if gqa4 => new_type = Type::Q4K,
                F::Iq3M => new_type = Type::Q4K,
                F::Q3KM => {
                    new_type = if self.i_attention_wv < 2 {
                        Type::Q5K
                    } else {
                        Type::Q4K
                    }
                }
                F::Q3KL => new_type = Type::Q5K,
                F::Iq4Nl | F::Iq4Xs if gqa4 => new_type = Type::Q5K,
                F::Q4KM | F::Q5KM if more_bits(self.i_attention_wv, self.n_attention_wv) => {
                    new_type = Type::Q6K
                }
                F::Q4KS if self.i_attention_wv < 4 => new_type = Type::Q5K,
                _ => {}
            }
            if m.is_70b && (new_type == Type::Q3K || new_type == Type::Q4K) {
                new_type = Type::Q5K;
            }
            if m.n_expert == 8 {
                new_type = Type::Q8_0;
            }
            self.i_attention_wv += 1;
        } else if cat == C::AttentionK {
            if m.n_expert == 8 {
                new_type = Type::Q8_0;
            } else if ftype == F::Iq3Xs {
                new_type = Type::Iq3Xxs;
            } else if ftype == F::Iq3Xxs {
                new_type = Type::Iq2S;
            }
        } else if cat == C::AttentionQ {
            if ftype == F::Iq3Xs {
                new_type = Type::Iq3Xxs;
            } else if ftype == F::Iq3Xxs {
                new_type = Type::Iq2S;
            }
        } else if cat == C::FfnDown {
            let (il, nl) = self.layer_info(self.i_ffn_down, self.n_ffn, &t.name)?;
            let imat = self.params.has_imatrix;
            match ftype {
                F::Q2K => new_type = Type::Q3K,
                F::Q2KS if il < nl / 8 => new_type = Type::Q4K,
                F::Iq3Xxs if !imat => new_type = if il < nl / 8 { Type::Q4K } else { Type::Q3K },
                F::Q3KM => {
                    new_type = if il < nl / 16 {
                        Type::Q5K
                    } else if !falcon || more_bits(il, nl) {
                        Type::Q4K
                    } else {
                        Type::Q3K
                    }
                }
                F::Iq3M if il < nl / 8 || (m.n_expert == 8 && more_bits(il, nl)) => {
                    new_type = Type::Q4K
                }
                F::Q3KL => new_type = if falcon { Type::Q4K } else { Type::Q5K },
                F::Q4KM => {
                    if falcon {
                        new_type = if il < nl / 16 {
                            Type::Q6K
                        } else if more_bits(il, nl) {
                            Type::Q5K
                        } else {
                            Type::Q4K
                        };
                    } else if more_bits(il, nl) {
                        new_type = Type::Q6K;
                    }
                }
                F::Iq4Nl | F::Iq4Xs if il < nl / 8 && !imat => new_type = Type::Q5K,
                F::Q5KM if more_bits(il, nl) => new_type = Type::Q6K,
                F::Q4KS if !falcon && il < nl / 8 => new_type = Type::Q5K,
                F::Q4_0 | F::Q5_0 if imat && il < nl / 8 => {
                    new_type = if ftype == F::Q4_0 {
                        Type::Q4_1
                    } else {
                        Type::Q5_1
                    };
                }
                _ => {}
            }
            self.i_ffn_down += 1;
        } else if cat == C::AttentionOutput {
            if !falcon {
                if m.n_expert == 8 {
                    if matches!(
                        ftype,
                        F::Q2K
                            | F::Iq3Xs
                            | F::Iq3Xxs
                            | F::Q3KS
                            | F::Q3KM
                            | F::Iq4Nl
                            | F::Q4KS
                            | F::Q4KM
                            | F::Iq3S
                            | F::Iq3M
                            | F::Iq4Xs
                    ) {
                        new_type = Type::Q5K;
                    }
                } else {
                    match ftype {
                        F::Q2K => new_type = Type::Q3K,
                        F::Iq3Xxs => new_type = Type::Iq3S,
                        F::Q3KM => new_type = Type::Q4K,
                        F::Q3KL => new_type = Type::Q5K,
                        F::Iq3M => new_type = Type::Q4K,
                        _ => {}
                    }
                }
            } else if ftype == F::Q3KL {
                new_type = Type::Q4K;
            }
        } else if cat == C::AttentionQkv {
            match ftype {
                F::Q3KM | F::Q3KL | F::Iq3M => new_type = Type::Q4K,
                F::Q4KM => new_type = Type::Q5K,
                F::Q5KM => new_type = Type::Q6K,
                _ => {}
            }
        } else if cat == C::FfnGate || cat == C::FfnUp {
            let i = if cat == C::FfnGate {
                self.i_ffn_gate
            } else {
                self.i_ffn_up
            };
            let (il, nl) = self.layer_info(i, self.n_ffn, &t.name)?;
            if ftype == F::Iq3Xs && il >= nl / 8 && il < 7 * nl / 8 {
                new_type = Type::Iq3Xxs;
            }
            if cat == C::FfnGate {
                self.i_ffn_gate += 1;
            } else {
                self.i_ffn_up += 1;
            }
        }
        Ok(new_type)
    }
}
