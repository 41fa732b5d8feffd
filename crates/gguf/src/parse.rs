//! Parsing of the GGUF header, KV pairs and tensor infos from a prefix of a file.
//!
//! The parser works on a byte slice that may hold only the start of the file (`file_size` says
//! how long the file really is), so that metadata can be read from a huge file without reading
//! its tensor data: a read past the slice but inside the file asks the caller for more bytes.
//! Every count is checked against the bytes left in the file before anything is allocated.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use crate::array::{Array, Packed, StrArray};
use crate::error::{invalid, ErrorKind, GgufError};
use crate::value::{Value, ValueType};
use crate::TensorInfo;

pub const MAGIC: &[u8; 4] = b"GGUF";
pub const VERSION: u32 = 3;
pub const DEFAULT_ALIGNMENT: u64 = 32;
pub const ALIGNMENT_KEY: &str = "general.alignment";
/// ggml's GGML_MAX_NAME: tensor names must be shorter than this.
pub const MAX_NAME: u64 = 64;
pub const MAX_DIMS: u32 = 4;
/// Arrays of arrays are legal; a bound on nesting keeps a crafted file from exhausting the stack.
pub const MAX_ARRAY_DEPTH: usize = 8;
/// The smallest possible KV pair (key length, empty key, type, one byte) and tensor info (name
/// length, n_dims, type, offset), used to bound the counts in the header.
const MIN_KV_BYTES: u64 = 8 + 4 + 1;
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 4 + 8;

pub(crate) struct Parsed {
    pub version: u32,
    pub kv: Vec<(String, Value)>,
    pub tensors: Vec<TensorInfo>,
    pub alignment: u64,
    pub data_offset: u64,
}

pub(crate) enum ParseError {
    Invalid(GgufError),
    /// The slice ended before the file does; the caller should retry with at least this many bytes.
    NeedMore(u64),
}

impl From<GgufError> for ParseError {
    fn from(e: GgufError) -> Self {
        ParseError::Invalid(e)
    }
}

type PResult<T> = Result<T, ParseError>;

struct Cursor<'a> {
    buf: &'a [u8],
    pos: u64,
    file_size: u64,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> u64 {
        self.file_size.saturating_sub(self.pos)
    }

    /// How many of `count` items of at least `min_size` bytes to reserve room for up front: no
    /// more than the bytes already in hand can back (a metadata-only read holds only the start
    /// of a file whose size bounds the counts), and at most 64 Ki; the rest grows as read.
    fn reservable(&self, count: u64, min_size: u64) -> usize {
        let in_hand = (self.buf.len() as u64).saturating_sub(self.pos) / min_size;
        count.min(in_hand).min(1 << 16) as usize
    }

    fn take(&mut self, n: u64, field: &dyn Fn() -> String) -> PResult<&'a [u8]> {
        if n > self.remaining() {
            let kind = ErrorKind::Truncated {
                needed: n,
                available: self.remaining(),
            };
            return Err(invalid(self.pos, field(), kind).into());
        }
        let end = self.pos + n;
        if end > self.buf.len() as u64 {
            return Err(ParseError::NeedMore(end));
        }
        let s = &self.buf[self.pos as usize..end as usize];
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, field: &dyn Fn() -> String) -> PResult<[u8; N]> {
        let s = self.take(N as u64, field)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u32(&mut self, field: &dyn Fn() -> String) -> PResult<u32> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    fn u64(&mut self, field: &dyn Fn() -> String) -> PResult<u64> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    fn string(&mut self, field: &dyn Fn() -> String) -> PResult<String> {
        Ok(self.str(field)?.into_owned())
    }

    /// A string borrowed from the buffer, or, if its bytes are not UTF-8, a repaired copy.
    fn str(&mut self, field: &dyn Fn() -> String) -> PResult<Cow<'a, str>> {
        let at = self.pos;
        let len = self.u64(&|| format!("{} (string length)", field()))?;
        if len > self.remaining() {
            let kind = ErrorKind::StringTooLong {
                len,
                available: self.remaining(),
            };
            return Err(invalid(at, field(), kind).into());
        }
        let bytes = self.take(len, field)?;
        Ok(match std::str::from_utf8(bytes) {
            Ok(s) => Cow::Borrowed(s),
            Err(_) => {
                // ggml accepts any bytes; keep such files usable but say that text was altered.
                ggml::log_warn!(
                    "gguf: {} at byte {} is not valid UTF-8; invalid bytes replaced\n",
                    field(),
                    at
                );
                String::from_utf8_lossy(bytes)
            }
        })
    }

    fn value(&mut self, ty: ValueType, depth: usize, field: &dyn Fn() -> String) -> PResult<Value> {
        Ok(match ty {
            ValueType::U8 => Value::U8(self.array::<1>(field)?[0]),
            ValueType::I8 => Value::I8(self.array::<1>(field)?[0] as i8),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.array(field)?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.array(field)?)),
            ValueType::U32 => Value::U32(u32::from_le_bytes(self.array(field)?)),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.array(field)?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.array(field)?)),
            ValueType::U64 => Value::U64(u64::from_le_bytes(self.array(field)?)),
            ValueType::I64 => Value::I64(i64::from_le_bytes(self.array(field)?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.array(field)?)),
            ValueType::Bool => {
                let at = self.pos;
                Value::Bool(bool_at(self.array::<1>(field)?[0], at, field)?)
            }
            ValueType::Str => Value::Str(self.string(field)?),
            ValueType::Array => Value::Array(self.array_value(depth + 1, field)?),
        })
    }

    fn value_type(&mut self, field: &dyn Fn() -> String) -> PResult<ValueType> {
        let at = self.pos;
        let id = self.u32(field)?;
        ValueType::from_id(id)
            .ok_or_else(|| invalid(at, field(), ErrorKind::InvalidValueType(id)).into())
    }

    /// The `len` fixed-size elements that follow, decoded at once into one slice.
    fn packed<T: Packed, const N: usize>(
        &mut self,
        len: u64,
        field: &dyn Fn() -> String,
        decode: fn([u8; N]) -> T,
    ) -> PResult<Array> {
        // The caller bounded len by the bytes left, so len * N cannot overflow.
        let bytes = self.take(len * N as u64, field)?;
        let values: Arc<[T]> = bytes
            .chunks_exact(N)
            .map(|c| {
                let mut a = [0u8; N];
                a.copy_from_slice(c);
                decode(a)
            })
            .collect();
        Ok(T::into_array(values))
    }

    fn array_value(&mut self, depth: usize, field: &dyn Fn() -> String) -> PResult<Array> {
        if depth > MAX_ARRAY_DEPTH {
            return Err(
                invalid(self.pos, field(), ErrorKind::ArrayTooDeep(MAX_ARRAY_DEPTH)).into(),
            );
        }
        let elem_type = self.value_type(&|| format!("{} (array element type)", field()))?;
        let at = self.pos;
        let len = self.u64(&|| format!("{} (array length)", field()))?;
        let max = self.remaining() / elem_type.min_encoded_size();
        if len > max {
            let kind = ErrorKind::ArrayTooLong {
                len,
                elem_type,
                available: self.remaining(),
            };
            return Err(invalid(at, field(), kind).into());
        }
        let elem = |i: u64| move || format!("{}[{}]", field(), i);
        Ok(match elem_type {
            ValueType::U8 => Array::from(self.take(len, field)?),
            ValueType::I8 => self.packed(len, field, i8::from_le_bytes)?,
            ValueType::U16 => self.packed(len, field, u16::from_le_bytes)?,
            ValueType::I16 => self.packed(len, field, i16::from_le_bytes)?,
            ValueType::U32 => self.packed(len, field, u32::from_le_bytes)?,
            ValueType::I32 => self.packed(len, field, i32::from_le_bytes)?,
            ValueType::F32 => self.packed(len, field, f32::from_le_bytes)?,
            ValueType::U64 => self.packed(len, field, u64::from_le_bytes)?,
            ValueType::I64 => self.packed(len, field, i64::from_le_bytes)?,
            ValueType::F64 => self.packed(len, field, f64::from_le_bytes)?,
            ValueType::Bool => {
                let start = self.pos;
                let bytes = self.take(len, field)?;
                let mut out = Vec::with_capacity(bytes.len());
                for (i, &b) in bytes.iter().enumerate() {
                    out.push(bool_at(b, start + i as u64, &elem(i as u64))?);
                }
                Array::from(out)
            }
            ValueType::Str => {
                let mut out = StrArray::with_capacity(self.reservable(len, 8), 0);
                for i in 0..len {
                    out.push(&self.str(&elem(i))?);
                }
                Array::from(out)
            }
            ValueType::Array => {
                let mut out = Vec::with_capacity(self.reservable(len, 12));
                for i in 0..len {
                    out.push(self.array_value(depth + 1, &elem(i))?);
                }
                Array::from_arrays(out)
            }
        })
    }
}

fn bool_at(b: u8, at: u64, field: &dyn Fn() -> String) -> Result<bool, GgufError> {
    match b {
        0 => Ok(false),
        1 => Ok(true),
        b => Err(invalid(at, field(), ErrorKind::InvalidBool(b))),
    }
}

fn align_up(x: u64, alignment: u64) -> Option<u64> {
    x.checked_add(alignment - 1)
        .map(|v| v / alignment * alignment)
}

pub(crate) fn parse(buf: &[u8], file_size: u64) -> PResult<Parsed> {
    let mut c = Cursor {
        buf,
        pos: 0,
        file_size,
    };

    let magic = c.array::<4>(&|| "magic".to_string())?;
    if &magic != MAGIC {
        let found: String = magic
            .iter()
            .map(|&b| {
                if b.is_ascii_graphic() || b == b' ' {
                    b as char
                } else {
                    '?'
                }
            })
            .collect();
        return Err(invalid(0, "magic", ErrorKind::BadMagic { found }).into());
    }

    let version = c.u32(&|| "version".to_string())?;
    let bad_version = match version {
        0 => Some(ErrorKind::VersionZero),
        1 => Some(ErrorKind::VersionOne),
        2 | 3 => None,
        // A byte-swapped small version has its low 16 bits clear.
        v if v & 0xFFFF == 0 => Some(ErrorKind::VersionByteSwapped(v)),
        v => Some(ErrorKind::VersionTooNew(v)),
    };
    if let Some(kind) = bad_version {
        return Err(invalid(4, "version", kind).into());
    }

    let n_tensors = c.u64(&|| "tensor count".to_string())?;
    let n_kv = c.u64(&|| "KV count".to_string())?;
    let max_kv = c.remaining() / MIN_KV_BYTES;
    if n_kv > max_kv {
        return Err(invalid(
            16,
            "KV count",
            ErrorKind::TooManyKv {
                count: n_kv,
                max: max_kv,
            },
        )
        .into());
    }
    let max_tensors = c.remaining().saturating_sub(n_kv * MIN_KV_BYTES) / MIN_TENSOR_INFO_BYTES;
    if n_tensors > max_tensors {
        let kind = ErrorKind::TooManyTensors {
            count: n_tensors,
            max: max_tensors,
        };
        return Err(invalid(8, "tensor count", kind).into());
    }

    let cap = c.reservable(n_kv, MIN_KV_BYTES);
    let mut kv: Vec<(String, Value)> = Vec::with_capacity(cap);
    let mut key_index: HashMap<String, usize> = HashMap::with_capacity(cap);
    let mut alignment = DEFAULT_ALIGNMENT;
    for i in 0..n_kv as usize {
        let key_at = c.pos;
        let key = c.string(&|| format!("key of KV pair {i}"))?;
        if key.is_empty() {
            return Err(invalid(key_at, format!("key of KV pair {i}"), ErrorKind::EmptyKey).into());
        }
        if let Some(&first) = key_index.get(&key) {
            let kind = ErrorKind::DuplicateKey {
                key: key.clone(),
                first,
            };
            return Err(invalid(key_at, format!("key of KV pair {i}"), kind).into());
        }
        let field = || format!("value of KV pair {i} '{key}'");
        let ty_at = c.pos;
        let ty = c.value_type(&field)?;
        let value_at = c.pos;
        let value = c.value(ty, 0, &field)?;
        if key == ALIGNMENT_KEY {
            let Value::U32(a) = value else {
                let kind = ErrorKind::WrongType {
                    key: key.clone(),
                    expected: ValueType::U32,
                    found: ty,
                };
                return Err(invalid(ty_at, field(), kind).into());
            };
            if a == 0 || !a.is_power_of_two() {
                return Err(invalid(value_at, field(), ErrorKind::BadAlignment(a as u64)).into());
            }
            alignment = a as u64;
        }
        key_index.insert(key.clone(), i);
        kv.push((key, value));
    }

    let cap = c.reservable(n_tensors, MIN_TENSOR_INFO_BYTES);
    let mut tensors: Vec<TensorInfo> = Vec::with_capacity(cap);
    let mut tensor_index: HashMap<String, usize> = HashMap::with_capacity(cap);
    for i in 0..n_tensors as usize {
        let name_at = c.pos;
        let name_field = || format!("name of tensor {i}");
        let name = c.string(&name_field)?;
        if name.len() as u64 >= MAX_NAME {
            let kind = ErrorKind::TensorNameTooLong {
                len: name.len() as u64,
                max: MAX_NAME,
            };
            return Err(invalid(name_at, name_field(), kind).into());
        }
        if let Some(&first) = tensor_index.get(&name) {
            let kind = ErrorKind::DuplicateTensor {
                name: name.clone(),
                first,
            };
            return Err(invalid(name_at, name_field(), kind).into());
        }
        let field = |what: &str| format!("tensor {i} '{name}' {what}");
        let dims_at = c.pos;
        let n_dims = c.u32(&|| field("n_dims"))?;
        if n_dims > MAX_DIMS {
            let kind = ErrorKind::TooManyDims {
                name: name.clone(),
                n_dims,
            };
            return Err(invalid(dims_at, field("n_dims"), kind).into());
        }
        let mut ne = [1u64; 4];
        let mut n_elements: i64 = 1;
        for (d, slot) in ne.iter_mut().enumerate().take(n_dims as usize) {
            let at = c.pos;
            let raw = c.u64(&|| field(&format!("ne[{d}]")))? as i64;
            if raw < 0 {
                let kind = ErrorKind::NegativeDim {
                    name: name.clone(),
                    dim: d,
                    value: raw,
                };
                return Err(invalid(at, field(&format!("ne[{d}]")), kind).into());
            }
            n_elements = n_elements.checked_mul(raw).ok_or_else(|| {
                invalid(
                    at,
                    field(&format!("ne[{d}]")),
                    ErrorKind::ElementCountOverflow { name: name.clone() },
                )
            })?;
            *slot = raw as u64;
        }
        let type_at = c.pos;
        let type_id = c.u32(&|| field("type"))?;
        let ty = ggml::Type::from_id(type_id).ok_or_else(|| {
            invalid(
                type_at,
                field("type"),
                ErrorKind::InvalidTensorType {
                    name: name.clone(),
                    ty: type_id,
                },
            )
        })?;
        let block = ty.block_size() as u64;
        if !ne[0].is_multiple_of(block) {
            let kind = ErrorKind::NotBlockMultiple {
                name: name.clone(),
                ty: ty.name(),
                ne0: ne[0],
                block,
            };
            return Err(invalid(type_at, field("type"), kind).into());
        }
        // n_elements fits in i64, so blocks * type_size (type_size <= 292) fits in u64 only if
        // checked: a quantized type's bytes per block exceed its elements per block.
        let size = (n_elements as u64 / block)
            .checked_mul(ty.type_size() as u64)
            .ok_or_else(|| {
                invalid(
                    type_at,
                    field("type"),
                    ErrorKind::ElementCountOverflow { name: name.clone() },
                )
            })?;
        // Checked below, once the data section's start and size are known.
        let offset = c.u64(&|| field("offset"))?;
        tensor_index.insert(name.clone(), i);
        tensors.push(TensorInfo {
            name,
            n_dims,
            ne,
            ty,
            offset,
            size,
        });
    }

    let infos_end = c.pos;
    let data_offset = align_up(infos_end, alignment).unwrap_or(u64::MAX);
    let data_size = file_size.saturating_sub(data_offset);
    check_tensor_layout(&tensors, infos_end, alignment, data_offset, data_size)?;

    Ok(Parsed {
        version,
        kv,
        tensors,
        alignment,
        data_offset,
    })
}

/// Each tensor's data must start aligned, lie inside the file, and not overlap another's.
/// Errors point at the tensor's offset field, found by walking the infos again.
fn check_tensor_layout(
    tensors: &[TensorInfo],
    infos_end: u64,
    alignment: u64,
    data_offset: u64,
    data_size: u64,
) -> PResult<()> {
    // Byte positions of the offset fields: walk back from the end of the infos.
    let mut offset_field_at = vec![0u64; tensors.len()];
    let mut end = infos_end;
    for (i, t) in tensors.iter().enumerate().rev() {
        offset_field_at[i] = end - 8;
        end -= 8 + 4 + 8 * t.n_dims as u64 + 4 + 8 + t.name.len() as u64;
    }
    let field = |i: usize| format!("tensor {i} '{}' offset", tensors[i].name);

    for (i, t) in tensors.iter().enumerate() {
        if !t.offset.is_multiple_of(alignment) {
            let kind = ErrorKind::MisalignedTensor {
                name: t.name.clone(),
                tensor_offset: t.offset,
                alignment,
            };
            return Err(invalid(offset_field_at[i], field(i), kind).into());
        }
        let end = t.offset.checked_add(t.size);
        if end.is_none_or(|e| e > data_size) || (t.size > 0 && data_offset == u64::MAX) {
            let kind = ErrorKind::TensorOutOfFile {
                name: t.name.clone(),
                start: t.offset,
                end: end.unwrap_or(u64::MAX),
                data_size,
            };
            return Err(invalid(offset_field_at[i], field(i), kind).into());
        }
    }

    let mut order: Vec<usize> = (0..tensors.len())
        .filter(|&i| tensors[i].size > 0)
        .collect();
    order.sort_by_key(|&i| (tensors[i].offset, i));
    for w in order.windows(2) {
        let (a, b) = (&tensors[w[0]], &tensors[w[1]]);
        if a.offset + a.size > b.offset {
            let later = w[0].max(w[1]);
            let (this, other) = if later == w[1] { (b, a) } else { (a, b) };
            let kind = ErrorKind::TensorOverlap {
                name: this.name.clone(),
                start: this.offset,
                end: this.offset + this.size,
                other: other.name.clone(),
                other_start: other.offset,
                other_end: other.offset + other.size,
            };
            return Err(invalid(offset_field_at[later], field(later), kind).into());
        }
    }
    Ok(())
}
