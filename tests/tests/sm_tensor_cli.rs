//! `-sm tensor` from the command line: accepted by the tools, and on a machine without GPUs a
//! clear error with a non-zero exit (the meta device needs member devices; with fake GPUs it is
//! tested in crates/llama/tests/meta_tensor.rs).

use std::process::Command;

#[test]
fn completion_without_gpus_says_why_and_fails() {
    let dir = test_fixtures::cache_dir().join("sm-tensor-cli");
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join(format!("small-{}.gguf", std::process::id()));
    let o = Command::new(test_fixtures::bin("llama-gguf-new", "llama-gguf-new"))
        .args([
            "--layers",
            "1",
            "--embd",
            "64",
            "--heads",
            "2",
            "--heads-kv",
            "1",
        ])
        .args([
            "--ff",
            "128",
            "--vocab-size",
            "300",
            "--ctx",
            "256",
            "--quiet",
            "-o",
        ])
        .arg(&model)
        .output()
        .expect("run llama-gguf-new");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new(test_fixtures::bin("llama-completion", "llama-completion"))
        .arg("-m")
        .arg(&model)
        .args(["-sm", "tensor", "-p", "hi", "-n", "1", "-no-cnv"])
        .env_remove("LLAMA_ARG_MODEL")
        .output()
        .expect("run llama-completion");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("split mode 'tensor' needs at least one GPU device"),
        "{err}"
    );
    assert!(!err.contains("is not supported"), "{err}");
    let _ = std::fs::remove_file(&model);
}
