//! llama-eval-callback: runs a prompt through the model and prints every graph node the
//! scheduler computes, as llama.cpp's common_debug_cb_eval does. The binary (main.rs) drives
//! libllama; these modules are the parts that need no model.

pub mod graph;
pub mod printer;
