//! The quantization mixtures (llama_ftype values) of llama.cpp's llama-quantize.

use ggml::Type;

/// A target file type. The numeric ids are llama.cpp's `llama_ftype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ftype {
    AllF32,
    F16,
    Bf16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2K,
    Q2KS,
    Q3KS,
    Q3KM,
    Q3KL,
    Q4KS,
    Q4KM,
    Q5KS,
    Q5KM,
    Q6K,
    Iq4Nl,
    Iq2Xxs,
    Iq2Xs,
    Iq3Xs,
    Iq3Xxs,
    Iq1S,
    Iq3S,
    Iq3M,
    Iq2S,
    Iq2M,
    Iq4Xs,
    Iq1M,
    Tq1_0,
    Tq2_0,
    Mxfp4Moe,
    Nvfp4,
    Q1_0,
    Q2_0,
}

impl Ftype {
    pub const ALL: [Ftype; 36] = [
        Ftype::AllF32,
        Ftype::F16,
        Ftype::Bf16,
        Ftype::Q4_0,
        Ftype::Q4_1,
        Ftype::Q5_0,
        Ftype::Q5_1,
        Ftype::Q8_0,
        Ftype::Q2K,
        Ftype::Q2KS,
        Ftype::Q3KS,
        Ftype::Q3KM,
        Ftype::Q3KL,
        Ftype::Q4KS,
        Ftype::Q4KM,
        Ftype::Q5KS,
        Ftype::Q5KM,
        Ftype::Q6K,
        Ftype::Iq4Nl,
        Ftype::Iq2Xxs,
        Ftype::Iq2Xs,
        Ftype::Iq3Xs,
        Ftype::Iq3Xxs,
        Ftype::Iq1S,
        Ftype::Iq3S,
        Ftype::Iq3M,
        Ftype::Iq2S,
        Ftype::Iq2M,
        Ftype::Iq4Xs,
        Ftype::Iq1M,
        Ftype::Tq1_0,
        Ftype::Tq2_0,
        Ftype::Mxfp4Moe,
        Ftype::Nvfp4,
        Ftype::Q1_0,
        Ftype::Q2_0,
    ];

    /// llama_ftype id, as stored in general.file_type.
    pub fn id(self) -> u32 {
        match self {
            Ftype::AllF32 => 0,
            Ftype::F16 => 1,
            Ftype::Q4_0 => 2,
            Ftype::Q4_1 => 3,
            Ftype::Q8_0 => 7,
            Ftype::Q5_0 => 8,
            Ftype::Q5_1 => 9,
            Ftype::Q2K => 10,
            Ftype::Q3KS => 11,
            Ftype::Q3KM => 12,
            Ftype::Q3KL => 13,
            Ftype::Q4KS => 14,
            Ftype::Q4KM => 15,
            Ftype::Q5KS => 16,
            Ftype::Q5KM => 17,
            Ftype::Q6K => 18,
            Ftype::Q2KS => 21,
            Ftype::Iq4Nl => 25,
            Ftype::Bf16 => 32,
            Ftype::Iq2Xxs => 19,
            Ftype::Iq2Xs => 20,
            Ftype::Iq3Xs => 22,
            Ftype::Iq3Xxs => 23,
            Ftype::Iq1S => 24,
            Ftype::Iq3S => 26,
            Ftype::Iq3M => 27,
            Ftype::Iq2S => 28,
            Ftype::Iq2M => 29,
            Ftype::Iq4Xs => 30,
            Ftype::Iq1M => 31,
            Ftype::Tq1_0 => 36,
            Ftype::Tq2_0 => 37,
            Ftype::Mxfp4Moe => 38,
            Ftype::Nvfp4 => 39,
            Ftype::Q1_0 => 40,
            Ftype::Q2_0 => 41,
        }
    }

    pub fn from_id(id: u32) -> Option<Ftype> {
        Ftype::ALL.iter().copied().find(|f| f.id() == id)
    }

    /// The name llama-quantize accepts on its command line (QUANT_OPTIONS), e.g. "Q4_K_M".
    pub fn name(self) -> &'static str {
        match self {
            Ftype::AllF32 => "F32",
            Ftype::F16 => "F16",
            Ftype::Bf16 => "BF16",
            Ftype::Q4_0 => "Q4_0",
            Ftype::Q4_1 => "Q4_1",
            Ftype::Q5_0 => "Q5_0",
            Ftype::Q5_1 => "Q5_1",
            Ftype::Q8_0 => "Q8_0",
            Ftype::Q2K => "Q2_K",
            Ftype::Q2KS => "Q2_K_S",
            Ftype::Q3KS => "Q3_K_S",
            Ftype::Q3KM => "Q3_K_M",
            Ftype::Q3KL => "Q3_K_L",
            Ftype::Q4KS => "Q4_K_S",
            Ftype::Q4KM => "Q4_K_M",
            Ftype::Q5KS => "Q5_K_S",
            Ftype::Q5KM => "Q5_K_M",
            Ftype::Q6K => "Q6_K",
            Ftype::Iq4Nl => "IQ4_NL",
            Ftype::Iq2Xxs => "IQ2_XXS",
            Ftype::Iq2Xs => "IQ2_XS",
            Ftype::Iq3Xs => "IQ3_XS",
            Ftype::Iq3Xxs => "IQ3_XXS",
            Ftype::Iq1S => "IQ1_S",
            Ftype::Iq3S => "IQ3_S",
            Ftype::Iq3M => "IQ3_M",
            Ftype::Iq2S => "IQ2_S",
            Ftype::Iq2M => "IQ2_M",
            Ftype::Iq4Xs => "IQ4_XS",
            Ftype::Iq1M => "IQ1_M",
            Ftype::Tq1_0 => "TQ1_0",
            Ftype::Tq2_0 => "TQ2_0",
            Ftype::Mxfp4Moe => "MXFP4_MOE",
            Ftype::Nvfp4 => "NVFP4",
            Ftype::Q1_0 => "Q1_0",
            Ftype::Q2_0 => "Q2_0",
        }
    }

    /// Case-insensitive lookup by name; "Q3_K", "Q4_K" and "Q5_K" are llama-quantize's aliases
    /// for the _M mixtures.
    pub fn from_name(s: &str) -> Option<Ftype> {
        let up = s.to_ascii_uppercase();
        match up.as_str() {
            "Q3_K" => return Some(Ftype::Q3KM),
            "Q4_K" => return Some(Ftype::Q4KM),
            "Q5_K" => return Some(Ftype::Q5KM),
            _ => {}
        }
        Ftype::ALL.iter().copied().find(|f| f.name() == up)
    }

    /// llama_ftype_get_default_type: the type most tensors get.
    pub fn default_type(self) -> Type {
        match self {
            Ftype::AllF32 => Type::F32,
            Ftype::F16 => Type::F16,
            Ftype::Bf16 => Type::Bf16,
            Ftype::Q4_0 => Type::Q4_0,
            Ftype::Q4_1 => Type::Q4_1,
            Ftype::Q5_0 => Type::Q5_0,
            Ftype::Q5_1 => Type::Q5_1,
            Ftype::Q8_0 => Type::Q8_0,
            Ftype::Q2K | Ftype::Q2KS => Type::Q2K,
            Ftype::Q3KS | Ftype::Q3KM | Ftype::Q3KL => Type::Q3K,
            Ftype::Q4KS | Ftype::Q4KM => Type::Q4K,
            Ftype::Q5KS | Ftype::Q5KM => Type::Q5K,
            Ftype::Q6K => Type::Q6K,
            Ftype::Iq4Nl => Type::Iq4Nl,
            Ftype::Iq2Xxs => Type::Iq2Xxs,
            Ftype::Iq2Xs => Type::Iq2Xs,
            Ftype::Iq3Xs => Type::Iq3S,
            Ftype::Iq3Xxs => Type::Iq3Xxs,
            Ftype::Iq1S => Type::Iq1S,
            Ftype::Iq3S => Type::Iq3S,
            Ftype::Iq3M => Type::Iq3S,
            Ftype::Iq2S => Type::Iq2Xs,
            Ftype::Iq2M => Type::Iq2S,
            Ftype::Iq4Xs => Type::Iq4Xs,
            Ftype::Iq1M => Type::Iq1M,
            Ftype::Tq1_0 => Type::Tq1_0,
            Ftype::Tq2_0 => Type::Tq2_0,
            Ftype::Mxfp4Moe => Type::Mxfp4,
            Ftype::Nvfp4 => Type::Nvfp4,
            Ftype::Q1_0 => Type::Q1_0,
            Ftype::Q2_0 => Type::Q2_0,
        }
    }
}
