//! llama-imatrix: the importance matrix of a model over a text (the squared activations seen by
//! each weight matrix), written in llama.cpp's GGUF or legacy .dat format, combined with
//! earlier files, or summarised (`--show-statistics`). main.rs parses the flags and loads the
//! model; these modules hold the rest.

pub mod callback;
pub mod collector;
pub mod compute;
pub mod save;
pub mod statistics;
