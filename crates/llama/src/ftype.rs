//! The file type (llama_ftype): what general.file_type says a model mostly contains, or a guess
//! from the most common tensor type when the key is absent. The names and the guess live in
//! gguf::display, which llama-gguf-inspect shares.

pub use gguf::display::{ftype_name as name, ftype_of_type as from_type, FTYPE_GUESSED as GUESSED};
