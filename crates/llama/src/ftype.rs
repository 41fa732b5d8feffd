//! The file type (llama_ftype): what general.file_type says a model mostly contains, or a guess
//! from the most common tensor type when the key is absent.

use ggml::Type;

pub const GUESSED: u32 = 1024;

/// llama_model_ftype_name
pub fn name(ftype: u32) -> String {
    let base = match ftype & !GUESSED {
        0 => "all F32",
        1 => "F16",
        32 => "BF16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K - Medium",
        21 => "Q2_K - Small",
        11 => "Q3_K - Small",
        12 => "Q3_K - Medium",
        13 => "Q3_K - Large",
        14 => "Q4_K - Small",
        15 => "Q4_K - Medium",
        16 => "Q5_K - Small",
        17 => "Q5_K - Medium",
        18 => "Q6_K",
        36 => "TQ1_0 - 1.69 bpw ternary",
        37 => "TQ2_0 - 2.06 bpw ternary",
        19 => "IQ2_XXS - 2.0625 bpw",
        20 => "IQ2_XS - 2.3125 bpw",
        28 => "IQ2_S - 2.5 bpw",
        29 => "IQ2_M - 2.7 bpw",
        22 => "IQ3_XS - 3.3 bpw",
        23 => "IQ3_XXS - 3.0625 bpw",
        24 => "IQ1_S - 1.5625 bpw",
        31 => "IQ1_M - 1.75 bpw",
        25 => "IQ4_NL - 4.5 bpw",
        30 => "IQ4_XS - 4.25 bpw",
        26 => "IQ3_S - 3.4375 bpw",
        27 => "IQ3_S mix - 3.66 bpw",
        38 => "MXFP4 MoE",
        _ => "unknown, may not work",
    };
    if ftype & GUESSED != 0 {
        format!("{base} (guessed)")
    } else {
        base.to_string()
    }
}

/// The ftype a file whose most common tensor type is `ty` is guessed to have.
pub fn from_type(ty: Type) -> u32 {
    match ty {
        Type::F32 => 0,
        Type::F16 => 1,
        Type::Bf16 => 32,
        Type::Q4_0 => 2,
        Type::Q4_1 => 3,
        Type::Q5_0 => 8,
        Type::Q5_1 => 9,
        Type::Q8_0 => 7,
        Type::Q2K => 10,
        Type::Q3K => 12,
        Type::Q4K => 15,
        Type::Q5K => 17,
        Type::Q6K => 18,
        Type::Iq4Nl => 25,
        _ => 0,
    }
}
