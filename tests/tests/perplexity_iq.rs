//! The IQ1/IQ2/IQ3/IQ4_XS/TQ mixtures of the reference model, quantized by our llama-quantize
//! (the same bytes as llama.cpp's, checked here by sha256), give llama.cpp's llama-perplexity
//! output digit for digit on an AVX2 CPU: their AVX2 dot products follow ggml's float order.
//! Fixtures: tests/fixtures/perplexity-iq (README.md there gives the commands).

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// llama.cpp's log of `stem` recorded on this CPU's SIMD class, and whether it is one (the
/// AVX2 logs for AVX2, FMA and F16C without AVX-512; `avx512/` for AVX-512); elsewhere the AVX2
/// log, which another float order matches only approximately.
fn reference_log(stem: &str) -> (String, bool) {
    use test_fixtures::SimdClass;
    let avx2 = fixtures().join(format!("perplexity-iq/{stem}.log"));
    let path = test_fixtures::simd_fixture(&avx2);
    let exact = match test_fixtures::simd_class() {
        SimdClass::Avx2 => true,
        SimdClass::Avx512 => path != avx2,
        SimdClass::Other => false,
    };
    (std::fs::read_to_string(path).expect("fixture log"), exact)
}

/// The `[i]x,` values of a chunk line.
fn chunk_values(line: &str) -> Vec<f64> {
    line.split(',')
        .filter_map(|p| p.split(']').nth(1))
        .filter_map(|v| v.trim().parse().ok())
        .collect()
}

fn final_line(s: &str) -> Option<String> {
    s.lines()
        .find_map(|l| l.find("Final estimate").map(|i| l[i..].trim().to_string()))
}

/// (PPL, uncertainty) of a final-estimate line.
fn final_values(line: &str) -> (f64, f64) {
    let nums: Vec<f64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    (nums[0], nums[1])
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs()
}

/// Quantizes the reference model to `ty` (with the quant-new imatrix when `imat`), checks the
/// file's sha256 against llama.cpp's, and compares llama-perplexity with llama.cpp's log.
fn check(ty: &str, imat: bool) {
    let Some(m) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let lower = ty.to_lowercase();
    let stem = if imat {
        format!("{lower}-imat")
    } else {
        lower.clone()
    };
    let dir = test_fixtures::scratch_dir(&format!("ppl_iq_{stem}"));
    let file = format!("tiny-random-qwen2vocab-{stem}.gguf");
    let mut q = Command::new(test_fixtures::bin("llama-quantize", "llama-quantize"));
    q.current_dir(&dir);
    if imat {
        // the path is stored in the file's metadata: relative, as llama.cpp was given it
        std::fs::copy(
            fixtures().join("quant-new/imatrix.gguf"),
            dir.join("imatrix.gguf"),
        )
        .unwrap();
        q.args(["--imatrix", "imatrix.gguf"]);
    }
    let out = q.arg(&m).arg(&file).args([ty, "2"]).output().unwrap();
    assert!(
        out.status.success(),
        "llama-quantize {ty}: {}",
        test_fixtures::text(&out.stderr)
    );

    let (log, exact) = reference_log(&stem);
    let want_sha = log
        .lines()
        .find_map(|l| l.strip_prefix("# sha256 "))
        .expect("sha256 line")
        .trim();
    let bytes = std::fs::read(dir.join(&file)).unwrap();
    let sha: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        sha, want_sha,
        "{file}: not the file llama.cpp's log was made on"
    );

    let out = test_fixtures::run_tool(
        "llama-perplexity",
        &[
            "-m",
            dir.join(&file).to_str().unwrap(),
            "-f",
            test_fixtures::shared_dir()
                .join("reference/text/gpl-3.txt")
                .to_str()
                .unwrap(),
            "-c",
            "128",
            "-b",
            "128",
            "--chunks",
            "8",
        ],
    );
    let (stdout, stderr) = (
        test_fixtures::text(&out.stdout),
        test_fixtures::text(&out.stderr),
    );
    assert!(out.status.success(), "{ty}: {stderr}");
    let want_chunks = log.lines().find(|l| l.starts_with("[1]")).unwrap();
    let want_final = final_line(&log).unwrap();
    let got_chunks = stdout
        .lines()
        .find_map(|l| l.find("[1]").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("{ty}: no chunk line in {stdout}"));
    let got_final = final_line(&stderr).unwrap_or_else(|| panic!("{ty}: {stderr}"));
    if exact {
        assert_eq!(got_chunks.trim(), want_chunks.trim(), "{ty}: chunk values");
        assert_eq!(got_final, want_final, "{ty}: final estimate");
    } else {
        // another float order: llama.cpp's own builds differ by up to ~0.3% between them
        eprintln!("note: no llama.cpp log for this CPU's float order; comparing within 1%");
        let (g, w) = (chunk_values(got_chunks), chunk_values(want_chunks));
        assert_eq!(g.len(), w.len(), "{ty}: {got_chunks}");
        for (a, b) in g.iter().zip(&w) {
            assert!(close(*a, *b, 1e-2), "{ty}: {a} vs llama.cpp {b}");
        }
        let (g, w) = (final_values(&got_final), final_values(&want_final));
        assert!(
            close(g.0, w.0, 1e-2) && close(g.1, w.1, 1e-2),
            "{ty}: {g:?} vs {w:?}"
        );
    }
    let _ = std::fs::remove_file(dir.join(&file));
}

#[test]
fn iq1_s_matches_llama_cpp() {
    check("IQ1_S", true);
}

#[test]
fn iq1_m_matches_llama_cpp() {
    check("IQ1_M", true);
}

#[test]
fn iq2_xxs_matches_llama_cpp() {
    check("IQ2_XXS", true);
}

#[test]
fn iq2_xs_matches_llama_cpp() {
    check("IQ2_XS", true);
}

#[test]
fn iq2_s_matches_llama_cpp() {
    check("IQ2_S", true);
}

#[test]
fn iq3_xxs_matches_llama_cpp() {
    check("IQ3_XXS", true);
}

#[test]
fn iq3_s_matches_llama_cpp() {
    check("IQ3_S", false);
}

#[test]
fn iq4_xs_matches_llama_cpp() {
    check("IQ4_XS", false);
}

#[test]
fn tq1_0_matches_llama_cpp() {
    check("TQ1_0", false);
}

#[test]
fn tq2_0_matches_llama_cpp() {
    check("TQ2_0", false);
}
