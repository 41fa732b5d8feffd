//! llama-bench: throughput of prompt processing and generation over a grid of parameters, with
//! llama.cpp's flags and output formats. The binary (main.rs) drives libllama; these modules
//! are the parts that need no model.

pub mod cfmt;
pub mod params;
pub mod plot;
pub mod printers;
pub mod record;
pub mod usage;
