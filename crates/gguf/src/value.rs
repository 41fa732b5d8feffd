//! GGUF metadata values: the 13 value types of the format and typed accessors for them.

use std::fmt;

/// The on-disk value type ids (`enum gguf_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    Str = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    pub const ALL: [ValueType; 13] = [
        ValueType::U8,
        ValueType::I8,
        ValueType::U16,
        ValueType::I16,
        ValueType::U32,
        ValueType::I32,
        ValueType::F32,
        ValueType::Bool,
        ValueType::Str,
        ValueType::Array,
        ValueType::U64,
        ValueType::I64,
        ValueType::F64,
    ];

    pub fn from_id(id: u32) -> Option<ValueType> {
        ValueType::ALL.get(id as usize).copied()
    }

    pub fn id(self) -> u32 {
        self as u32
    }

    /// The short name llama.cpp's loader dump uses (`gguf_type_name`).
    pub fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "u8",
            ValueType::I8 => "i8",
            ValueType::U16 => "u16",
            ValueType::I16 => "i16",
            ValueType::U32 => "u32",
            ValueType::I32 => "i32",
            ValueType::F32 => "f32",
            ValueType::Bool => "bool",
            ValueType::Str => "str",
            ValueType::Array => "arr",
            ValueType::U64 => "u64",
            ValueType::I64 => "i64",
            ValueType::F64 => "f64",
        }
    }

    /// Bytes of one value of a fixed-size type; `None` for strings and arrays.
    pub fn fixed_size(self) -> Option<usize> {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => Some(1),
            ValueType::U16 | ValueType::I16 => Some(2),
            ValueType::U32 | ValueType::I32 | ValueType::F32 => Some(4),
            ValueType::U64 | ValueType::I64 | ValueType::F64 => Some(8),
            ValueType::Str | ValueType::Array => None,
        }
    }

    /// The fewest bytes one value of this type can occupy in a file: a string needs its 8-byte
    /// length, an array its 4-byte element type and 8-byte count. Used to bound counts read from
    /// a file by the bytes that are left, before anything is allocated.
    pub fn min_encoded_size(self) -> u64 {
        match self {
            ValueType::Str => 8,
            ValueType::Array => 12,
            other => other.fixed_size().unwrap_or(1) as u64,
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An array value: every element has `elem_type` (arrays of arrays are allowed).
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    pub elem_type: ValueType,
    pub values: Vec<Value>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    Str(String),
    Array(Array),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl Value {
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::Str(_) => ValueType::Str,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Any unsigned integer, or a signed one that is not negative.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v as u64),
            Value::U16(v) => Some(v as u64),
            Value::U32(v) => Some(v as u64),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any integer that fits in an i64.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::U8(v) => Some(v as i64),
            Value::U16(v) => Some(v as i64),
            Value::U32(v) => Some(v as i64),
            Value::U64(v) => i64::try_from(v).ok(),
            Value::I8(v) => Some(v as i64),
            Value::I16(v) => Some(v as i64),
            Value::I32(v) => Some(v as i64),
            Value::I64(v) => Some(v),
            _ => None,
        }
    }

    /// F32, or F64 narrowed.
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            Value::F32(v) => Some(v),
            Value::F64(v) => Some(v as f32),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v as f64),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

impl Array {
    pub fn new(elem_type: ValueType, values: Vec<Value>) -> Array {
        Array { elem_type, values }
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// All elements as strings, or `None` if this is not an array of strings.
    pub fn strings(&self) -> Option<Vec<&str>> {
        if self.elem_type != ValueType::Str {
            return None;
        }
        self.values.iter().map(Value::as_str).collect()
    }

    /// All elements as f32 (F32 or F64 arrays).
    pub fn f32s(&self) -> Option<Vec<f32>> {
        self.values.iter().map(Value::as_f32).collect()
    }

    /// All elements as i32, for any integer array whose values fit.
    pub fn i32s(&self) -> Option<Vec<i32>> {
        self.values
            .iter()
            .map(|v| v.as_i64().and_then(|x| i32::try_from(x).ok()))
            .collect()
    }

    /// Whether every element has `elem_type` (recursively for nested arrays).
    pub fn is_consistent(&self) -> bool {
        self.values.iter().all(|v| {
            v.value_type() == self.elem_type
                && match v {
                    Value::Array(inner) => inner.is_consistent(),
                    _ => true,
                }
        })
    }
}

macro_rules! impl_from {
    ($($t:ty => $v:ident),*) => {
        $(impl From<$t> for Value {
            fn from(x: $t) -> Value { Value::$v(x) }
        })*
    };
}
impl_from!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, f32 => F32,
    bool => Bool, String => Str, Array => Array, u64 => U64, i64 => I64, f64 => F64);

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(s.to_string())
    }
}
