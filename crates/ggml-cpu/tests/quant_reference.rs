//! Acceptance: quantizing each tensor of the reference model with ggml::quants reproduces the
//! per-tensor sha256 of llama-quantize's q8_0, q4_0, f16 and q4_k_m files
//! (shared/reference/quant/sha256.txt, which also names the type chosen for each tensor).

use std::collections::HashMap;
use std::fmt::Write;

use ggml::quants;
use ggml::Type;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

struct Expected {
    file: String,
    tensor: String,
    ty: Type,
    sha: String,
}

fn expected() -> Vec<Expected> {
    let path = test_fixtures::shared_dir().join("reference/quant/sha256.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    let mut file = String::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if !line.starts_with(' ') {
            file = fields.get(1).copied().unwrap_or_default().to_string();
            continue;
        }
        let wanted = ["q8_0.gguf", "q4_0.gguf", "f16.gguf", "q4_k_m.gguf"];
        if !wanted.iter().any(|w| file.ends_with(w)) {
            continue;
        }
        let ty = Type::from_name(fields[2]).unwrap_or_else(|| panic!("unknown type in {line}"));
        out.push(Expected {
            file: file.clone(),
            tensor: fields[1].to_string(),
            ty,
            sha: fields[0].to_string(),
        });
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Quantizes a whole tensor, rows split across threads in chunks as llama-quantize does.
fn quantize_tensor(ty: Type, src: &[f32], n_per_row: usize) -> Vec<u8> {
    let nrows = src.len() / n_per_row;
    let row_size = quants::bytes_for(ty, n_per_row);
    let mut dst = vec![0u8; nrows * row_size];
    let rows_per_chunk = 64;
    dst.par_chunks_mut(rows_per_chunk * row_size)
        .enumerate()
        .for_each(|(c, out)| {
            let first = c * rows_per_chunk;
            let n = out.len() / row_size;
            let src = &src[first * n_per_row..(first + n) * n_per_row];
            let written = quants::quantize_chunk(ty, src, out, 0, n, n_per_row, None);
            assert_eq!(written, out.len());
        });
    dst
}

#[test]
fn quantized_tensors_match_llama_quantize() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let f = gguf::GgufFile::open(&model).expect("open reference model");
    let wanted = expected();
    assert!(
        wanted.len() >= 4 * 39,
        "sha256.txt lists {} tensors",
        wanted.len()
    );

    // Each distinct (tensor, type) is computed once; several files share them.
    let mut jobs: Vec<(String, Type)> = wanted.iter().map(|e| (e.tensor.clone(), e.ty)).collect();
    jobs.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    jobs.dedup();
    let mut got: HashMap<(String, Type), String> = HashMap::new();
    for (name, ty) in jobs {
        let info = f
            .tensor(&name)
            .unwrap_or_else(|| panic!("{name} missing from the model"));
        assert_eq!(info.ty, Type::F32);
        let raw = f.tensor_data(info);
        let src: Vec<f32> = raw
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let n_per_row = info.ne[0] as usize;
        let q = quantize_tensor(ty, &src, n_per_row);
        got.insert((name, ty), hex(&Sha256::digest(&q)));
    }

    let mut bad = Vec::new();
    for e in &wanted {
        let sha = &got[&(e.tensor.clone(), e.ty)];
        if *sha != e.sha {
            bad.push(format!("{} {} {}", e.file, e.tensor, e.ty));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} tensors differ:\n{}",
        bad.len(),
        wanted.len(),
        bad.join("\n")
    );
}
