//! Array values kept packed: one slice of the element type, one text buffer for strings, so
//! that an array costs about what its elements occupy in the file rather than a `Value` (32
//! bytes, plus a heap block per string) apiece. Elements are read out on access. The slices
//! are shared, so that copies of a file's metadata (a writer made from a reader, quantize's
//! checks) do not each copy a large array again.

use std::fmt;
use std::ops::Index;
use std::sync::Arc;

use crate::error::GgufError;
use crate::value::{Value, ValueRef, ValueType};

/// An array value: every element has the array's element type. Arrays of arrays are allowed,
/// and each inner array has its own element type.
#[derive(Clone, Debug, PartialEq)]
pub struct Array(Data);

#[derive(Clone, Debug, PartialEq)]
enum Data {
    U8(Arc<[u8]>),
    I8(Arc<[i8]>),
    U16(Arc<[u16]>),
    I16(Arc<[i16]>),
    U32(Arc<[u32]>),
    I32(Arc<[i32]>),
    F32(Arc<[f32]>),
    Bool(Arc<[bool]>),
    // Behind a pointer so that an array of arrays pays 24 bytes per inner array, not 56.
    Str(Arc<StrArray>),
    Array(Arc<[Array]>),
    U64(Arc<[u64]>),
    I64(Arc<[i64]>),
    F64(Arc<[f64]>),
}

mod sealed {
    pub trait Sealed {}
}

/// The fixed-size element types, which an `Array` holds as a plain slice (`as_slice::<f32>()`).
pub trait Packed: sealed::Sealed + Copy + 'static {
    const TYPE: ValueType;
    #[doc(hidden)]
    fn slice_of(a: &Array) -> Option<&[Self]>;
    #[doc(hidden)]
    fn into_array(v: Arc<[Self]>) -> Array;
    #[doc(hidden)]
    fn view(self) -> ValueRef<'static>;
    #[doc(hidden)]
    fn from_value(v: &Value) -> Option<Self>;
}

macro_rules! packed {
    ($($t:ty => $v:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Packed for $t {
            const TYPE: ValueType = ValueType::$v;
            fn slice_of(a: &Array) -> Option<&[$t]> {
                match &a.0 {
                    Data::$v(s) => Some(s),
                    _ => None,
                }
            }
            fn into_array(v: Arc<[$t]>) -> Array {
                Array(Data::$v(v))
            }
            fn view(self) -> ValueRef<'static> {
                ValueRef::$v(self)
            }
            fn from_value(v: &Value) -> Option<$t> {
                match *v {
                    Value::$v(x) => Some(x),
                    _ => None,
                }
            }
        }
        impl From<Vec<$t>> for Array {
            fn from(v: Vec<$t>) -> Array {
                Array(Data::$v(Arc::from(v)))
            }
        }
        impl From<&[$t]> for Array {
            fn from(v: &[$t]) -> Array {
                Array(Data::$v(Arc::from(v)))
            }
        }
    )*};
}
packed!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, f32 => F32,
    bool => Bool, u64 => U64, i64 => I64, f64 => F64);

fn packed_from_values<T: Packed>(values: &[Value]) -> Result<Array, GgufError> {
    let mut out = Vec::with_capacity(values.len());
    for (index, v) in values.iter().enumerate() {
        out.push(T::from_value(v).ok_or_else(|| mixed(T::TYPE, index, v))?);
    }
    Ok(T::into_array(Arc::from(out)))
}

fn mixed(elem_type: ValueType, index: usize, v: &Value) -> GgufError {
    GgufError::MixedArray {
        elem_type,
        index,
        found: v.value_type(),
    }
}

impl Array {
    /// An array of `elem_type` from loose values; an error names the first value of another
    /// type. The typed constructors (`From<Vec<f32>>`, `from_strs`, `from_arrays`) cannot fail.
    pub fn new(elem_type: ValueType, values: Vec<Value>) -> Result<Array, GgufError> {
        match elem_type {
            ValueType::U8 => packed_from_values::<u8>(&values),
            ValueType::I8 => packed_from_values::<i8>(&values),
            ValueType::U16 => packed_from_values::<u16>(&values),
            ValueType::I16 => packed_from_values::<i16>(&values),
            ValueType::U32 => packed_from_values::<u32>(&values),
            ValueType::I32 => packed_from_values::<i32>(&values),
            ValueType::F32 => packed_from_values::<f32>(&values),
            ValueType::Bool => packed_from_values::<bool>(&values),
            ValueType::U64 => packed_from_values::<u64>(&values),
            ValueType::I64 => packed_from_values::<i64>(&values),
            ValueType::F64 => packed_from_values::<f64>(&values),
            ValueType::Str => {
                let mut s = StrArray::with_capacity(values.len(), 0);
                for (index, v) in values.iter().enumerate() {
                    s.push(v.as_str().ok_or_else(|| mixed(elem_type, index, v))?);
                }
                Ok(Array::from(s))
            }
            ValueType::Array => {
                let mut out = Vec::with_capacity(values.len());
                for (index, v) in values.into_iter().enumerate() {
                    match v {
                        Value::Array(a) => out.push(a),
                        other => return Err(mixed(elem_type, index, &other)),
                    }
                }
                Ok(Array::from_arrays(out))
            }
        }
    }

    pub fn from_strs<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> Array {
        Array::from(items.into_iter().collect::<StrArray>())
    }

    pub fn from_arrays(items: Vec<Array>) -> Array {
        Array(Data::Array(Arc::from(items)))
    }

    pub fn elem_type(&self) -> ValueType {
        match &self.0 {
            Data::U8(_) => ValueType::U8,
            Data::I8(_) => ValueType::I8,
            Data::U16(_) => ValueType::U16,
            Data::I16(_) => ValueType::I16,
            Data::U32(_) => ValueType::U32,
            Data::I32(_) => ValueType::I32,
            Data::F32(_) => ValueType::F32,
            Data::Bool(_) => ValueType::Bool,
            Data::Str(_) => ValueType::Str,
            Data::Array(_) => ValueType::Array,
            Data::U64(_) => ValueType::U64,
            Data::I64(_) => ValueType::I64,
            Data::F64(_) => ValueType::F64,
        }
    }

    pub fn len(&self) -> usize {
        match &self.0 {
            Data::U8(s) => s.len(),
            Data::I8(s) => s.len(),
            Data::U16(s) => s.len(),
            Data::I16(s) => s.len(),
            Data::U32(s) => s.len(),
            Data::I32(s) => s.len(),
            Data::F32(s) => s.len(),
            Data::Bool(s) => s.len(),
            Data::Str(s) => s.len(),
            Data::Array(s) => s.len(),
            Data::U64(s) => s.len(),
            Data::I64(s) => s.len(),
            Data::F64(s) => s.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i`, numbers by value, strings and inner arrays borrowed.
    pub fn get(&self, i: usize) -> Option<ValueRef<'_>> {
        match &self.0 {
            Data::U8(s) => s.get(i).map(|x| x.view()),
            Data::I8(s) => s.get(i).map(|x| x.view()),
            Data::U16(s) => s.get(i).map(|x| x.view()),
            Data::I16(s) => s.get(i).map(|x| x.view()),
            Data::U32(s) => s.get(i).map(|x| x.view()),
            Data::I32(s) => s.get(i).map(|x| x.view()),
            Data::F32(s) => s.get(i).map(|x| x.view()),
            Data::Bool(s) => s.get(i).map(|x| x.view()),
            Data::Str(s) => s.get(i).map(ValueRef::Str),
            Data::Array(s) => s.get(i).map(ValueRef::Array),
            Data::U64(s) => s.get(i).map(|x| x.view()),
            Data::I64(s) => s.get(i).map(|x| x.view()),
            Data::F64(s) => s.get(i).map(|x| x.view()),
        }
    }

    pub fn iter(&self) -> Iter<'_> {
        Iter {
            array: self,
            next: 0,
            end: self.len(),
        }
    }

    /// The elements as a slice, if they are of type `T` (`as_slice::<u8>()`).
    pub fn as_slice<T: Packed>(&self) -> Option<&[T]> {
        T::slice_of(self)
    }

    /// The elements of an array of strings.
    pub fn strings(&self) -> Option<&StrArray> {
        match &self.0 {
            Data::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The inner arrays of an array of arrays.
    pub fn arrays(&self) -> Option<&[Array]> {
        match &self.0 {
            Data::Array(s) => Some(s),
            _ => None,
        }
    }

    /// All elements as f32, for F32 arrays and F64 ones narrowed.
    pub fn f32s(&self) -> Option<Vec<f32>> {
        match &self.0 {
            Data::F32(s) => Some(s.to_vec()),
            Data::F64(s) => Some(s.iter().map(|&x| x as f32).collect()),
            _ => None,
        }
    }

    /// All elements as i32, for an integer array whose values all fit.
    pub fn i32s(&self) -> Option<Vec<i32>> {
        fn fit<T: Copy>(s: &[T]) -> Option<Vec<i32>>
        where
            i32: TryFrom<T>,
        {
            s.iter().map(|&x| i32::try_from(x).ok()).collect()
        }
        match &self.0 {
            Data::U8(s) => fit(s),
            Data::I8(s) => fit(s),
            Data::U16(s) => fit(s),
            Data::I16(s) => fit(s),
            Data::U32(s) => fit(s),
            Data::I32(s) => Some(s.to_vec()),
            Data::U64(s) => fit(s),
            Data::I64(s) => fit(s),
            Data::F32(_) | Data::F64(_) | Data::Bool(_) | Data::Str(_) | Data::Array(_) => None,
        }
    }
}

impl From<StrArray> for Array {
    fn from(mut s: StrArray) -> Array {
        s.shrink_to_fit();
        Array(Data::Str(Arc::new(s)))
    }
}

/// The elements of an `Array`, in order.
pub struct Iter<'a> {
    array: &'a Array,
    next: usize,
    end: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = ValueRef<'a>;

    fn next(&mut self) -> Option<ValueRef<'a>> {
        if self.next >= self.end {
            return None;
        }
        self.next += 1;
        self.array.get(self.next - 1)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.end - self.next;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a Array {
    type Item = ValueRef<'a>;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// An array of strings as one text buffer and the end offset of each string in it.
#[derive(Clone, Default, PartialEq)]
pub struct StrArray {
    text: String,
    ends: Vec<usize>,
}

impl StrArray {
    pub fn new() -> StrArray {
        StrArray::default()
    }

    /// Room for `n` strings of `text_bytes` bytes in all.
    pub fn with_capacity(n: usize, text_bytes: usize) -> StrArray {
        StrArray {
            text: String::with_capacity(text_bytes),
            ends: Vec::with_capacity(n),
        }
    }

    pub fn push(&mut self, s: &str) {
        self.text.push_str(s);
        self.ends.push(self.text.len());
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        self.text.get(start..end)
    }

    pub fn iter(&self) -> StrIter<'_> {
        StrIter {
            array: self,
            next: 0,
        }
    }

    pub(crate) fn shrink_to_fit(&mut self) {
        self.text.shrink_to_fit();
        self.ends.shrink_to_fit();
    }
}

impl Index<usize> for StrArray {
    type Output = str;

    fn index(&self, i: usize) -> &str {
        match self.get(i) {
            Some(s) => s,
            None => panic!(
                "index {i} out of range for an array of {} strings",
                self.len()
            ),
        }
    }
}

impl fmt::Debug for StrArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<S: AsRef<str>> FromIterator<S> for StrArray {
    fn from_iter<I: IntoIterator<Item = S>>(items: I) -> StrArray {
        let mut out = StrArray::new();
        for s in items {
            out.push(s.as_ref());
        }
        out
    }
}

/// The strings of a `StrArray`, in order.
pub struct StrIter<'a> {
    array: &'a StrArray,
    next: usize,
}

impl<'a> Iterator for StrIter<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let s = self.array.get(self.next)?;
        self.next += 1;
        Some(s)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.array.len().saturating_sub(self.next);
        (n, Some(n))
    }
}

impl ExactSizeIterator for StrIter<'_> {}

impl<'a> IntoIterator for &'a StrArray {
    type Item = &'a str;
    type IntoIter = StrIter<'a>;

    fn into_iter(self) -> StrIter<'a> {
        self.iter()
    }
}
