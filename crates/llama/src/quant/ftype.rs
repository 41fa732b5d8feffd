//! The quantization mixtures (llama_ftype values) llama-quantize can produce with our types.

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
}

impl Ftype {
    pub const ALL: [Ftype; 19] = [
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
        }
    }
}
