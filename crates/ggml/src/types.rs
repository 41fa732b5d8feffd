//! ggml's element types. The numeric ids are ggml's (`enum ggml_type`), since GGUF files store them.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum Type {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2K = 10,
    Q3K = 11,
    Q4K = 12,
    Q5K = 13,
    Q6K = 14,
    Q8K = 15,
    Iq2Xxs = 16,
    Iq2Xs = 17,
    Iq3Xxs = 18,
    Iq1S = 19,
    Iq4Nl = 20,
    Iq3S = 21,
    Iq2S = 22,
    Iq4Xs = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    Iq1M = 29,
    Bf16 = 30,
    Tq1_0 = 34,
    Tq2_0 = 35,
    Mxfp4 = 39,
    Nvfp4 = 40,
    Q1_0 = 41,
    Q2_0 = 42,
}

/// Static facts about one type; the quants module adds the conversion and dot-product functions.
#[derive(Clone, Copy, Debug)]
pub struct TypeInfo {
    pub name: &'static str,
    pub block_size: usize,
    pub type_size: usize,
    pub is_quantized: bool,
}

impl Type {
    pub const ALL: [Type; 35] = [
        Type::F32,
        Type::F16,
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
        Type::Iq2Xxs,
        Type::Iq2Xs,
        Type::Iq3Xxs,
        Type::Iq1S,
        Type::Iq4Nl,
        Type::Iq3S,
        Type::Iq2S,
        Type::Iq4Xs,
        Type::I8,
        Type::I16,
        Type::I32,
        Type::I64,
        Type::F64,
        Type::Iq1M,
        Type::Bf16,
        Type::Tq1_0,
        Type::Tq2_0,
        Type::Mxfp4,
        Type::Nvfp4,
    ];

    pub fn from_id(id: u32) -> Option<Type> {
        Type::ALL.iter().copied().find(|t| *t as u32 == id)
    }

    pub fn id(self) -> u32 {
        self as u32
    }

    pub fn info(self) -> TypeInfo {
        let (name, block_size, type_size, is_quantized) = match self {
            Type::F32 => ("f32", 1, 4, false),
            Type::F16 => ("f16", 1, 2, false),
            Type::Q4_0 => ("q4_0", 32, 18, true),
            Type::Q4_1 => ("q4_1", 32, 20, true),
            Type::Q5_0 => ("q5_0", 32, 22, true),
            Type::Q5_1 => ("q5_1", 32, 24, true),
            Type::Q8_0 => ("q8_0", 32, 34, true),
            Type::Q8_1 => ("q8_1", 32, 36, true),
            Type::Q2K => ("q2_K", 256, 84, true),
            Type::Q3K => ("q3_K", 256, 110, true),
            Type::Q4K => ("q4_K", 256, 144, true),
            Type::Q5K => ("q5_K", 256, 176, true),
            Type::Q6K => ("q6_K", 256, 210, true),
            Type::Q8K => ("q8_K", 256, 292, true),
            Type::Iq2Xxs => ("iq2_xxs", 256, 66, true),
            Type::Iq2Xs => ("iq2_xs", 256, 74, true),
            Type::Iq3Xxs => ("iq3_xxs", 256, 98, true),
            Type::Iq1S => ("iq1_s", 256, 50, true),
            Type::Iq4Nl => ("iq4_nl", 32, 18, true),
            Type::Iq3S => ("iq3_s", 256, 110, true),
            Type::Iq2S => ("iq2_s", 256, 82, true),
            Type::Iq4Xs => ("iq4_xs", 256, 136, true),
            Type::Iq1M => ("iq1_m", 256, 56, true),
            Type::Tq1_0 => ("tq1_0", 256, 54, true),
            Type::Tq2_0 => ("tq2_0", 256, 66, true),
            Type::Mxfp4 => ("mxfp4", 32, 17, true),
            Type::Nvfp4 => ("nvfp4", 64, 36, true),
            Type::Q1_0 => ("q1_0", 128, 18, true),
            Type::Q2_0 => ("q2_0", 64, 18, true),
            Type::I8 => ("i8", 1, 1, false),
            Type::I16 => ("i16", 1, 2, false),
            Type::I32 => ("i32", 1, 4, false),
            Type::I64 => ("i64", 1, 8, false),
            Type::F64 => ("f64", 1, 8, false),
            Type::Bf16 => ("bf16", 1, 2, false),
        };
        TypeInfo {
            name,
            block_size,
            type_size,
            is_quantized,
        }
    }

    pub fn name(self) -> &'static str {
        self.info().name
    }

    pub fn from_name(name: &str) -> Option<Type> {
        Type::ALL
            .iter()
            .copied()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }

    pub fn block_size(self) -> usize {
        self.info().block_size
    }

    pub fn type_size(self) -> usize {
        self.info().type_size
    }

    pub fn is_quantized(self) -> bool {
        self.info().is_quantized
    }

    /// Bytes of one row of `ne0` elements; `ne0` must be a multiple of the block size.
    pub fn row_size(self, ne0: i64) -> usize {
        self.type_size() * (ne0 as usize / self.block_size())
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::Type;

    #[test]
    fn ids_and_names_round_trip() {
        for t in Type::ALL {
            assert_eq!(Type::from_id(t.id()), Some(t));
            assert_eq!(Type::from_name(t.name()), Some(t));
        }
        // ids ggml removed (Q4_2, Q4_3, the repacked Q4_0_x_x and IQ4_NL_x_x) stay unknown
        for id in [4, 5, 31, 32, 33, 36, 37, 38, 43] {
            assert_eq!(Type::from_id(id), None, "id {id}");
        }
    }

    #[test]
    fn block_sizes_follow_ggml_common_static_asserts() {
        const QK_K: usize = 256;
        let expect = [
            (Type::Iq2Xxs, QK_K, 2 + QK_K / 8 * 2),
            (Type::Iq2Xs, QK_K, 2 + QK_K / 8 * 2 + QK_K / 32),
            (Type::Iq2S, QK_K, 2 + QK_K / 4 + QK_K / 16),
            (Type::Iq3Xxs, QK_K, 2 + 3 * (QK_K / 8)),
            (Type::Iq3S, QK_K, 2 + 13 * (QK_K / 32) + QK_K / 64),
            (Type::Iq1S, QK_K, 2 + QK_K / 8 + QK_K / 16),
            (Type::Iq1M, QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32),
            (Type::Iq4Xs, QK_K, 2 + 2 + QK_K / 64 + QK_K / 2),
            (
                Type::Tq1_0,
                QK_K,
                2 + QK_K / 64 + (QK_K - 4 * QK_K / 64) / 5,
            ),
            (Type::Tq2_0, QK_K, 2 + QK_K / 4),
            (Type::Mxfp4, 32, 1 + 32 / 2),
            (Type::Nvfp4, 64, 64 / 16 + 64 / 2),
            (Type::Q1_0, 128, 2 + 128 / 8),
            (Type::Q2_0, 64, 2 + 64 / 4),
        ];
        for (t, bs, ts) in expect {
            assert_eq!((t.block_size(), t.type_size()), (bs, ts), "{t}");
            assert!(t.is_quantized());
        }
    }
}
