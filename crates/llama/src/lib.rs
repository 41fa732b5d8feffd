//! llama
pub mod arch;
mod buffers;
pub mod cfmt;
pub mod error;
pub mod ftype;
pub mod hparams;
mod load_data;
pub mod loader;
pub mod model;
mod model_print;
mod model_tensors;

pub use error::LlamaError;
pub use hparams::HParams;
pub use loader::LoadMode;
pub use model::{Layer, Model, ModelParams, SplitMode};
pub(crate) mod graph;
pub mod sampling;
