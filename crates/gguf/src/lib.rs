//! GGUF, the model file format of ggml: read (memory map, plain read, or metadata only) and write.
//!
//! A file is: magic "GGUF", version, tensor count, KV count, the KV pairs, the tensor infos,
//! padding to the alignment (`general.alignment`, default 32), then the data section where each
//! tensor starts at an aligned offset. Everything read from a file is validated before use.

mod array;
pub mod display;
mod error;
mod parse;
mod reader;
mod tensor;
mod value;
mod writer;

pub use array::{Array, Iter as ArrayIter, Packed, StrArray, StrIter};
pub use error::{ErrorKind, GgufError};
pub use parse::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT, MAX_ARRAY_DEPTH, MAX_DIMS, MAX_NAME, VERSION};
pub use reader::{GgufFile, ReadMode};
pub use tensor::TensorInfo;
pub use value::{Value, ValueRef, ValueType};
pub use writer::{write_gguf, FileStream, GgufWriter, PendingFile, TensorStream};
