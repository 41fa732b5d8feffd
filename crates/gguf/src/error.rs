//! Errors of the reader and writer. A format error always says where (byte offset), which field
//! and what is wrong; the wording follows ggml's gguf.cpp where it has a message for the case.

use std::io;
use std::path::PathBuf;

use crate::value::ValueType;

#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("failed to open GGUF file '{}' ({source})", path.display())]
    Open { path: PathBuf, source: io::Error },
    /// A directory, device, FIFO or socket: only a regular file has a size that bounds a read.
    #[error("failed to open GGUF file '{}' ({what}, not a regular file)", path.display())]
    NotAFile { path: PathBuf, what: &'static str },
    #[error("failed to read GGUF file '{}' ({source})", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("failed to write GGUF file '{}' ({source})", path.display())]
    Write { path: PathBuf, source: io::Error },
    #[error("invalid GGUF file: at byte {offset}, {field}: {kind}")]
    Invalid {
        offset: u64,
        field: String,
        kind: ErrorKind,
    },
    /// An array built from loose values holds one of another type than its element type.
    #[error("array of {elem_type} elements holds a {found} at index {index}")]
    MixedArray {
        elem_type: ValueType,
        index: usize,
        found: ValueType,
    },
    /// The caller asked the writer for something the format cannot hold.
    #[error("cannot write GGUF: {0}")]
    Unwritable(String),
}

impl GgufError {
    /// The specific format problem, for callers (and tests) that branch on it.
    pub fn kind(&self) -> Option<&ErrorKind> {
        match self {
            GgufError::Invalid { kind, .. } => Some(kind),
            _ => None,
        }
    }

    pub fn offset(&self) -> Option<u64> {
        match self {
            GgufError::Invalid { offset, .. } => Some(*offset),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ErrorKind {
    #[error("needs {needed} bytes but the file ends after {available} more")]
    Truncated { needed: u64, available: u64 },
    #[error("invalid magic characters: '{found}', expected 'GGUF'")]
    BadMagic { found: String },
    #[error("bad GGUF version: 0")]
    VersionZero,
    #[error("GGUFv1 is no longer supported, please use a more up-to-date version")]
    VersionOne,
    #[error("this GGUF file version {0} is extremely large, is there a mismatch between the host and model endianness?")]
    VersionByteSwapped(u32),
    #[error("this GGUF file is version {0} but this software only supports up to version 3")]
    VersionTooNew(u32),
    #[error("number of tensors is {count} but must be in [0, {max}] (the rest of the file can hold no more)")]
    TooManyTensors { count: u64, max: u64 },
    #[error("number of key value pairs is {count} but must be in [0, {max}] (the rest of the file can hold no more)")]
    TooManyKv { count: u64, max: u64 },
    #[error("key is empty")]
    EmptyKey,
    #[error("duplicate key '{key}' (already KV pair {first})")]
    DuplicateKey { key: String, first: usize },
    #[error("invalid GGUF type {0}")]
    InvalidValueType(u32),
    #[error("string length {len} exceeds the {available} bytes left in the file")]
    StringTooLong { len: u64, available: u64 },
    #[error(
        "array of {len} {elem_type} elements cannot fit in the {available} bytes left in the file"
    )]
    ArrayTooLong {
        len: u64,
        elem_type: ValueType,
        available: u64,
    },
    #[error("arrays nested deeper than {0} levels")]
    ArrayTooDeep(usize),
    #[error("bool value {0} is neither 0 nor 1")]
    InvalidBool(u8),
    #[error("key '{key}' must be of type {expected} but is {found}")]
    WrongType {
        key: String,
        expected: ValueType,
        found: ValueType,
    },
    #[error("alignment {0} is not a power of 2")]
    BadAlignment(u64),
    #[error("tensor name is too long: {len} >= {max}")]
    TensorNameTooLong { len: u64, max: u64 },
    #[error("duplicate tensor name '{name}' (already tensor {first})")]
    DuplicateTensor { name: String, first: usize },
    #[error("tensor '{name}' has invalid number of dimensions: {n_dims} > 4")]
    TooManyDims { name: String, n_dims: u32 },
    #[error("tensor '{name}' has invalid ggml type {ty}")]
    InvalidTensorType { name: String, ty: u32 },
    #[error("tensor '{name}' has negative ne[{dim}] = {value}")]
    NegativeDim {
        name: String,
        dim: usize,
        value: i64,
    },
    #[error(
        "tensor '{name}' has too many elements: the product of its dimensions overflows int64"
    )]
    ElementCountOverflow { name: String },
    #[error("tensor '{name}' of type {ty} has {ne0} elements per row, not a multiple of block size ({block})")]
    NotBlockMultiple {
        name: String,
        ty: &'static str,
        ne0: u64,
        block: u64,
    },
    #[error(
        "tensor '{name}' has offset {tensor_offset}, not a multiple of the alignment {alignment}"
    )]
    MisalignedTensor {
        name: String,
        tensor_offset: u64,
        alignment: u64,
    },
    #[error(
        "tensor '{name}' data [{start}, {end}) lies outside the data section of {data_size} bytes"
    )]
    TensorOutOfFile {
        name: String,
        start: u64,
        end: u64,
        data_size: u64,
    },
    #[error("tensor '{name}' data [{start}, {end}) overlaps tensor '{other}' [{other_start}, {other_end})")]
    TensorOverlap {
        name: String,
        start: u64,
        end: u64,
        other: String,
        other_start: u64,
        other_end: u64,
    },
}

pub(crate) fn invalid(offset: u64, field: impl Into<String>, kind: ErrorKind) -> GgufError {
    GgufError::Invalid {
        offset,
        field: field.into(),
        kind,
    }
}
