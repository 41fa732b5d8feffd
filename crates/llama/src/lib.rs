//! llama
pub mod arch;
mod buffers;
pub mod cfmt;
pub mod chat;
pub mod error;
pub mod ftype;
pub mod grammar;
pub mod hparams;
pub mod kv_override;
mod load_data;
pub mod loader;
mod meta_split;
pub mod model;
pub mod model_check;
mod model_print;
mod model_tensors;
pub mod sampling;

pub use error::LlamaError;
pub use hparams::HParams;
pub use loader::LoadMode;
pub use model::{Layer, Model, ModelParams, SplitMode};
mod batch;
mod context;
mod context_params;
pub mod cvec;
mod decode;
pub(crate) mod graph;
mod kv_cache;
mod kv_cells;
mod kv_memory;
mod kv_shift;
mod kv_state;
pub mod lora;
mod perf;
mod reserve;
mod split_load;
pub mod state;
mod system_info;
mod validate;

pub use batch::Batch;
pub use context::{Context, MemoryBreakdownRow};
pub use context_params::{AbortCallback, ContextParams, EvalCallback, FlashAttnType};
pub use perf::PerfContextData;
pub use system_info::print_system_info;

/// Registers the compiled backends (ggml_backends::init: Vulkan where compiled, the CPU last);
/// safe to call more than once.
pub fn backend_init() {
    ggml_backends::init();
}
pub mod quant;
pub mod vocab;
