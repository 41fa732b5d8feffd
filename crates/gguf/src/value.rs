//! GGUF metadata values: the 13 value types of the format and typed accessors for them.

use std::fmt;

use crate::array::Array;

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

/// A value borrowed from a `Value` or read out of an `Array`: numbers by value, strings and
/// arrays by reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ValueRef<'a> {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    Str(&'a str),
    Array(&'a Array),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl Value {
    pub fn view(&self) -> ValueRef<'_> {
        match self {
            Value::U8(x) => ValueRef::U8(*x),
            Value::I8(x) => ValueRef::I8(*x),
            Value::U16(x) => ValueRef::U16(*x),
            Value::I16(x) => ValueRef::I16(*x),
            Value::U32(x) => ValueRef::U32(*x),
            Value::I32(x) => ValueRef::I32(*x),
            Value::F32(x) => ValueRef::F32(*x),
            Value::Bool(x) => ValueRef::Bool(*x),
            Value::Str(s) => ValueRef::Str(s),
            Value::Array(a) => ValueRef::Array(a),
            Value::U64(x) => ValueRef::U64(*x),
            Value::I64(x) => ValueRef::I64(*x),
            Value::F64(x) => ValueRef::F64(*x),
        }
    }

    pub fn value_type(&self) -> ValueType {
        self.view().value_type()
    }

    pub fn as_str(&self) -> Option<&str> {
        self.view().as_str()
    }

    /// Any unsigned integer, or a signed one that is not negative.
    pub fn as_u64(&self) -> Option<u64> {
        self.view().as_u64()
    }

    /// Any integer that fits in an i64.
    pub fn as_i64(&self) -> Option<i64> {
        self.view().as_i64()
    }

    /// F32, or F64 narrowed.
    pub fn as_f32(&self) -> Option<f32> {
        self.view().as_f32()
    }

    pub fn as_f64(&self) -> Option<f64> {
        self.view().as_f64()
    }

    pub fn as_bool(&self) -> Option<bool> {
        self.view().as_bool()
    }

    pub fn as_array(&self) -> Option<&Array> {
        self.view().as_array()
    }
}

impl<'a> ValueRef<'a> {
    pub fn value_type(self) -> ValueType {
        match self {
            ValueRef::U8(_) => ValueType::U8,
            ValueRef::I8(_) => ValueType::I8,
            ValueRef::U16(_) => ValueType::U16,
            ValueRef::I16(_) => ValueType::I16,
            ValueRef::U32(_) => ValueType::U32,
            ValueRef::I32(_) => ValueType::I32,
            ValueRef::F32(_) => ValueType::F32,
            ValueRef::Bool(_) => ValueType::Bool,
            ValueRef::Str(_) => ValueType::Str,
            ValueRef::Array(_) => ValueType::Array,
            ValueRef::U64(_) => ValueType::U64,
            ValueRef::I64(_) => ValueType::I64,
            ValueRef::F64(_) => ValueType::F64,
        }
    }

    /// An owned copy.
    pub fn to_value(self) -> Value {
        match self {
            ValueRef::U8(x) => Value::U8(x),
            ValueRef::I8(x) => Value::I8(x),
            ValueRef::U16(x) => Value::U16(x),
            ValueRef::I16(x) => Value::I16(x),
            ValueRef::U32(x) => Value::U32(x),
            ValueRef::I32(x) => Value::I32(x),
            ValueRef::F32(x) => Value::F32(x),
            ValueRef::Bool(x) => Value::Bool(x),
            ValueRef::Str(s) => Value::Str(s.to_string()),
            ValueRef::Array(a) => Value::Array(a.clone()),
            ValueRef::U64(x) => Value::U64(x),
            ValueRef::I64(x) => Value::I64(x),
            ValueRef::F64(x) => Value::F64(x),
        }
    }

    pub fn as_str(self) -> Option<&'a str> {
        match self {
            ValueRef::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Any unsigned integer, or a signed one that is not negative.
    pub fn as_u64(self) -> Option<u64> {
        match self {
            ValueRef::U8(v) => Some(v as u64),
            ValueRef::U16(v) => Some(v as u64),
            ValueRef::U32(v) => Some(v as u64),
            ValueRef::U64(v) => Some(v),
            ValueRef::I8(v) => u64::try_from(v).ok(),
            ValueRef::I16(v) => u64::try_from(v).ok(),
            ValueRef::I32(v) => u64::try_from(v).ok(),
            ValueRef::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any integer that fits in an i64.
    pub fn as_i64(self) -> Option<i64> {
        match self {
            ValueRef::U8(v) => Some(v as i64),
            ValueRef::U16(v) => Some(v as i64),
            ValueRef::U32(v) => Some(v as i64),
            ValueRef::U64(v) => i64::try_from(v).ok(),
            ValueRef::I8(v) => Some(v as i64),
            ValueRef::I16(v) => Some(v as i64),
            ValueRef::I32(v) => Some(v as i64),
            ValueRef::I64(v) => Some(v),
            _ => None,
        }
    }

    /// F32, or F64 narrowed.
    pub fn as_f32(self) -> Option<f32> {
        match self {
            ValueRef::F32(v) => Some(v),
            ValueRef::F64(v) => Some(v as f32),
            _ => None,
        }
    }

    pub fn as_f64(self) -> Option<f64> {
        match self {
            ValueRef::F32(v) => Some(v as f64),
            ValueRef::F64(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_bool(self) -> Option<bool> {
        match self {
            ValueRef::Bool(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_array(self) -> Option<&'a Array> {
        match self {
            ValueRef::Array(a) => Some(a),
            _ => None,
        }
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
