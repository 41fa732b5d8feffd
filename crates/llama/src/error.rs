//! Every way loading a model or creating a context can fail. Library code returns these and
//! never panics on bad input; the tools turn them into one `error: ...` line.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum LlamaError {
    /// The file could not be read as GGUF; the gguf error names the file where it matters.
    #[error("{source}")]
    Gguf {
        path: PathBuf,
        source: Box<gguf::GgufError>,
    },
    #[error("failed to read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("unknown model architecture: '{0}'")]
    UnknownArch(String),
    #[error("key not found in model: {0}")]
    MissingKey(String),
    #[error("key {key} has wrong type: {why}")]
    BadKey { key: String, why: String },
    #[error("missing tensor '{0}'")]
    MissingTensor(String),
    #[error("check_tensor_dims: tensor '{name}' has wrong shape; expected {expected}, got {got}")]
    WrongShape {
        name: String,
        expected: String,
        got: String,
    },
    #[error(
        "tensor '{name}' data is not within the file bounds, model is corrupted or incomplete"
    )]
    TensorOutOfBounds { name: String },
    #[error("tensor '{name}' has invalid data: {why}")]
    InvalidData { name: String, why: String },
    #[error("wrong number of tensors; expected {expected}, got {got}")]
    TensorCount { expected: usize, got: usize },
    #[error("invalid hyperparameter: {0}")]
    BadHparams(String),
    #[error("no backend device available: {0}")]
    NoDevice(String),
    #[error("unknown buffer type '{0}'")]
    UnknownBufferType(String),
    #[error("invalid tensor override regex '{pattern}': {why}")]
    BadOverride { pattern: String, why: String },
    #[error("failed to allocate {what} ({size} bytes in {buft}): {why}")]
    Alloc {
        what: String,
        buft: String,
        size: usize,
        why: String,
    },
    #[error("invalid context parameters: {0}")]
    BadParams(String),
    #[error("{0}")]
    Unsupported(String),
    /// A LoRA adapter that cannot apply to the model (llama.cpp's reason).
    #[error("{0}")]
    Adapter(String),
    /// The OS refused the compute threads ("failed to create N threads: ...").
    #[error("{0}")]
    Threads(String),
    #[error("graph computation failed: {0}")]
    Compute(String),
    #[error("vocabulary: {0}")]
    Vocab(String),
    /// A split model whose shards do not fit together (llama.cpp's own words).
    #[error("{0}")]
    Split(String),
    /// A buffer of the context that could not be allocated, in llama.cpp's words ("failed to
    /// allocate buffer for kv cache"); the cause was logged where it arose.
    #[error("failed to allocate buffer for {0}")]
    BufferAlloc(String),
    /// A backend's read, write or copy failed (a lost device, a failed transfer).
    #[error("{0}")]
    Backend(#[from] ggml::backend::BackendError),
}

pub type Result<T> = std::result::Result<T, LlamaError>;
