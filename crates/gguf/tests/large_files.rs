//! A 4 GiB model (a sparse file: only its header is written) opens instantly with a memory map
//! or metadata only; neither reads the tensor data.

use std::time::Instant;

use gguf::{GgufFile, GgufWriter, Value};

#[test]
fn sparse_four_gib_file_opens_without_reading_data() {
    let dir = test_fixtures::scratch_dir("gguf-large");
    let path = dir.join("big.gguf");
    let mut w = GgufWriter::new();
    w.add_kv("general.name", Value::from("big")).unwrap();
    w.add_tensor("huge", ggml::Type::F32, &[1 << 20, 1 << 10])
        .unwrap();
    let header = w.header_bytes();
    let total = w.file_size();
    std::fs::write(&path, &header).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(total).unwrap();
    drop(f);

    let t = Instant::now();
    let meta = GgufFile::open_metadata(&path).unwrap();
    let mapped = GgufFile::open(&path).unwrap();
    assert!(
        t.elapsed().as_secs_f64() < 5.0,
        "opening read the data: {:?}",
        t.elapsed()
    );
    assert_eq!(meta.file_size, (4 << 30) + header.len() as u64);
    let huge = mapped.tensor("huge").unwrap();
    assert_eq!(huge.size, 4 << 30);
    assert!(mapped.is_mmapped());
    // The map covers the tensor; touching one page reads one page.
    let data = mapped.tensor_data(huge);
    assert_eq!(data.len() as u64, 4 << 30);
    assert_eq!(data[(2 << 30) + 12345], 0);
    assert!(meta.tensor_data(meta.tensor("huge").unwrap()).is_empty());
    std::fs::remove_file(&path).unwrap();
}
