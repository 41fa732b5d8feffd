//! Reading real files: the reference model and the shared vocab files, through every read mode,
//! and writing them back byte for byte.

use gguf::{GgufFile, GgufWriter, ReadMode, Value};

#[test]
fn reference_model_reads_in_every_mode() {
    let Some(path) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let m = GgufFile::open(&path).unwrap();
    assert!(m.is_mmapped());
    assert_eq!(m.version, 3);
    assert_eq!(m.kv.len(), 21);
    assert_eq!(m.tensors.len(), 39);
    assert_eq!(m.alignment, 32);
    assert_eq!(
        m.get("general.architecture").and_then(Value::as_str),
        Some("llama")
    );
    assert_eq!(m.get("llama.block_count").and_then(Value::as_u64), Some(4));
    let tokens = m
        .get("tokenizer.ggml.tokens")
        .and_then(Value::as_array)
        .unwrap();
    assert_eq!(tokens.len(), 151936);
    assert_eq!(tokens.strings().unwrap().get(0), Some("!"));
    let emb = m.tensor("token_embd.weight").unwrap();
    assert_eq!(emb.ne, [256, 151936, 1, 1]);
    assert_eq!(emb.size, 256 * 151936 * 4);
    assert_eq!(m.tensor_data(emb).len() as u64, emb.size);
    let n_params: u64 = m.tensors.iter().map(|t| t.n_elements()).sum();
    assert_eq!(n_params, 80_611_584);

    let r = GgufFile::open_with(&path, ReadMode::Read).unwrap();
    assert!(!r.is_mmapped());
    assert_eq!(r.kv, m.kv);
    assert_eq!(r.tensors, m.tensors);
    assert_eq!(r.data(), m.data());

    let meta = GgufFile::open_metadata(&path).unwrap();
    assert!(!meta.has_data());
    assert_eq!(meta.kv, m.kv);
    assert_eq!(meta.tensors, m.tensors);
    assert_eq!(meta.data_offset, m.data_offset);
    assert_eq!(meta.file_size, m.file_size);
    assert!(meta.tensor_data(emb).is_empty());
}

#[test]
fn reference_model_rewrites_byte_identical() {
    let Some(path) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let original = std::fs::read(&path).unwrap();
    let m = GgufFile::from_bytes(original.clone()).unwrap();
    let data: Vec<&[u8]> = m.tensors.iter().map(|t| m.tensor_data(t)).collect();
    let bytes = GgufWriter::from_gguf(&m).unwrap().to_bytes(&data).unwrap();
    assert!(bytes == original, "rewritten file differs");
}

#[test]
fn shared_vocab_files_read_and_rewrite() {
    let dir = test_fixtures::shared_dir().join("vocab");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("gguf") {
            continue;
        }
        n += 1;
        let original = std::fs::read(&path).unwrap();
        let f = GgufFile::from_bytes(original.clone())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            f.get("tokenizer.ggml.model").is_some(),
            "{}",
            path.display()
        );
        let meta = GgufFile::open_metadata(&path).unwrap();
        assert_eq!(meta.kv, f.kv);
        let data: Vec<&[u8]> = f.tensors.iter().map(|t| f.tensor_data(t)).collect();
        let bytes = GgufWriter::from_gguf(&f).unwrap().to_bytes(&data).unwrap();
        assert!(bytes == original, "{} rewritten differs", path.display());
    }
    assert!(
        n >= 5,
        "expected the shared vocab files in {}",
        dir.display()
    );
}
