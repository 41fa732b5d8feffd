//! What the tools share: logging (llama.cpp's common_log) and, as tools land, their flag groups.

pub mod args;
pub mod chat;
pub mod json_schema;
pub mod log;
pub mod startup;
