//! Acceptance: llama-quantize on the reference model writes files whose sha256 equal
//! llama.cpp's (shared/reference/quant/sha256.txt), and logs what llama.cpp logs
//! (shared/reference/logs/quantize-*.log) apart from the version and timing lines.

use std::path::Path;
use std::process::Command;

use sha2::{Digest, Sha256};

fn expected_sha(file: &str) -> String {
    let path = test_fixtures::shared_dir().join("reference/quant/sha256.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .find(|l| !l.starts_with(' ') && l.trim_end().ends_with(file))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("{file} not in sha256.txt"))
        .to_string()
}

fn sha_file(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The log lines that do not depend on the build or the clock.
fn stable_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| {
            !l.starts_with("version:") && !l.starts_with("built with") && !l.starts_with('$')
        })
        .filter(|l| !l.contains("quantize time =") && !l.contains("total time =") && !l.is_empty())
        .map(String::from)
        .collect()
}

fn check(ty: &str, suffix: &str) {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = model.parent().unwrap();
    let out_name = format!("tiny-random-qwen2vocab-{suffix}.gguf");
    let scratch = test_fixtures::scratch_dir(&format!("quantize-{suffix}"));
    let out = scratch.join(&out_name);
    // Run in the model's folder with a relative input, as the reference logs were made.
    let o = Command::new(env!("CARGO_BIN_EXE_llama-quantize"))
        .current_dir(dir)
        .args([
            model.file_name().unwrap().to_str().unwrap(),
            out.to_str().unwrap(),
            ty,
            "2",
        ])
        .output()
        .expect("run llama-quantize");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "llama-quantize {ty} failed:\n{stderr}");
    assert_eq!(
        sha_file(&out),
        expected_sha(&out_name),
        "{out_name} differs from llama.cpp's"
    );

    let log = std::fs::read_to_string(
        test_fixtures::shared_dir().join(format!("reference/logs/quantize-{suffix}.log")),
    )
    .unwrap();
    let want = stable_lines(&log);
    let got_text = format!("{stderr}{}", String::from_utf8_lossy(&o.stdout));
    let got: Vec<String> = stable_lines(&got_text)
        .into_iter()
        .map(|l| {
            l.replace(out.to_str().unwrap(), &out_name)
                .replace(" using 2 threads", "")
        })
        .collect();
    assert_eq!(got, want, "log of {ty}");
    let _ = std::fs::remove_dir_all(&scratch);
}

#[test]
fn q8_0_matches_llama_cpp() {
    check("q8_0", "q8_0");
}

#[test]
fn q4_0_matches_llama_cpp() {
    check("Q4_0", "q4_0");
}

#[test]
fn q4_k_m_matches_llama_cpp() {
    check("Q4_K_M", "q4_k_m");
}

#[test]
fn f16_matches_llama_cpp() {
    check("f16", "f16");
}

#[test]
fn bad_command_lines_fail_cleanly() {
    let bin = env!("CARGO_BIN_EXE_llama-quantize");
    let o = Command::new(bin).args(["in.gguf"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("allowed quantization types"));
    let o = Command::new(bin)
        .args(["/nonexistent/in.gguf", "/tmp/x.gguf", "q4_0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("llama_quantize: failed to quantize model from '/nonexistent/in.gguf'"));
    assert!(!Path::new("/tmp/x.gguf").exists());
}

#[test]
fn dry_run_prints_sizes_and_writes_nothing() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let o = Command::new(env!("CARGO_BIN_EXE_llama-quantize"))
        .args(["--dry-run", model.to_str().unwrap(), "Q4_K_M"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("llama_quantize: calculating quantization size for"));
    assert!(
        stderr.contains("size =   148.38 MiB ->    30.43 MiB (q6_K)"),
        "{stderr}"
    );
    assert!(stderr.contains("llama_model_quantize_impl: quant size  =    53.04 MiB (5.52 BPW)"));
    assert!(!model
        .parent()
        .unwrap()
        .join("ggml-model-Q4_K_M.gguf")
        .exists());
}
