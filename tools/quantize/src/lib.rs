//! llama-quantize's command-line parser as a library, so the fuzz targets (fuzz/) can drive it
//! without running the tool.

pub mod args;
