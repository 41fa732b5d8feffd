//! Fuzz the GGUF reader: any input must parse or fail with an error, never panic, read out of
//! bounds or allocate without bound; what parses must have every tensor's bytes inside the
//! data and re-write to a file that parses equal; loading a vocabulary from what parses must
//! give Ok or Err.
#![no_main]

use gguf::{GgufFile, GgufWriter};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Invalid UTF-8 warnings would flood the output.
    ggml::log::set_log_callback(Some(Box::new(|_, _| {})));
    let Ok(f) = GgufFile::from_bytes(data.to_vec()) else {
        return;
    };
    for t in &f.tensors {
        assert_eq!(f.tensor_data(t).len() as u64, t.size);
        assert_eq!(t.offset % f.alignment, 0);
    }
    assert!(f.data_offset.is_multiple_of(f.alignment));
    // The vocabulary loader reads the metadata of every model file: types, counts and ids
    // from the file must be checked, never trusted.
    let _ = llama::vocab::Vocab::from_gguf(&f);
    // Writing back what was read gives a file that reads back equal. Files whose tensor infos
    // are not in data order (legal) cannot be re-written with their offsets kept.
    if let Ok(w) = GgufWriter::from_gguf(&f) {
        let slices: Vec<&[u8]> = f.tensors.iter().map(|t| f.tensor_data(t)).collect();
        let bytes = w.to_bytes(&slices).expect("a parsed file can be written");
        let g = GgufFile::from_bytes(bytes).expect("a written file parses");
        // NaN payloads compare unequal; compare the encodings then (formatting every input's
        // KVs would cost a tenth of the run).
        assert!(g.kv == f.kv || format!("{:?}", g.kv) == format!("{:?}", f.kv));
        assert_eq!(g.tensors, f.tensors);
    }
});
