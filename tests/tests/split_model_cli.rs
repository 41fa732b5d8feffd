//! Split models load as llama.cpp loads them: given the first shard written by llama-gguf-split,
//! llama-completion finds the others by name, gives the unsplit file's greedy text in every
//! load mode, and prints llama.cpp's lines (checked against llama.cpp's own run on a split of
//! the reference model: the same startup log but for timings); a wrong or missing shard is one
//! error line naming it.

use std::path::{Path, PathBuf};

use std::sync::OnceLock;

use test_fixtures::{run_tool as run, text};

/// (unsplit model, first shard of its two-way split)
fn models() -> &'static (PathBuf, PathBuf) {
    static M: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    M.get_or_init(|| {
        let dir = test_fixtures::scratch_dir("split-model-cli");
        let whole = dir.join("whole.gguf");
        #[rustfmt::skip]
        let o = run("llama-gguf-new", &["--arch", "llama", "--layers", "2", "--embd", "128",
            "--heads", "4", "--heads-kv", "2", "--ff", "192", "--ctx", "256", "--vocab-size", "1000",
            "--type", "f32", "--seed", "11", "-o", whole.to_str().unwrap()]);
        assert!(o.status.success(), "llama-gguf-new: {}", text(&o.stderr));
        let prefix = dir.join("shard");
        let o = run(
            "llama-gguf-split",
            &[
                "--split",
                "--split-max-tensors",
                "12",
                whole.to_str().unwrap(),
                prefix.to_str().unwrap(),
            ],
        );
        assert!(o.status.success(), "llama-gguf-split: {}", text(&o.stderr));
        let first = dir.join("shard-00001-of-00002.gguf");
        assert!(first.is_file() && dir.join("shard-00002-of-00002.gguf").is_file());
        (whole, first)
    })
}

fn greedy(model: &Path, extra: &[&str]) -> (String, String) {
    let mut args = vec![
        "-m",
        model.to_str().unwrap(),
        "-p",
        "hello world",
        "-n",
        "16",
        "--temp",
        "0",
        "-no-cnv",
        "-lv",
        "4",
    ];
    args.extend_from_slice(extra);
    let o = run("llama-completion", &args);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{args:?}:\n{err}");
    (text(&o.stdout), err)
}

/// N of "loaded meta data with K key-value pairs and N tensors".
fn tensor_count(log: &str) -> usize {
    let line = log
        .lines()
        .find(|l| l.contains("key-value pairs and"))
        .expect("the loader's summary line");
    let after = line.split("key-value pairs and ").nth(1).unwrap();
    after.split(' ').next().unwrap().parse().unwrap()
}

#[test]
fn the_first_shard_gives_the_unsplit_text_in_every_load_mode() {
    let (whole, first) = models();
    let (want, whole_log) = greedy(whole, &[]);
    let n_tensors = tensor_count(&whole_log);
    for mode in ["mmap", "none", "dio"] {
        let (got, err) = greedy(first, &["-lm", mode]);
        assert_eq!(got, want, "-lm {mode}");
        assert!(
            err.contains("llama_model_loader: additional 1 GGUFs metadata loaded."),
            "{err}"
        );
        assert_eq!(tensor_count(&err), n_tensors, "all shards' tensors counted");
        // a mapped buffer per file; one allocated buffer otherwise
        let n_buffers = err.matches("model buffer size =").count();
        assert_eq!(
            n_buffers,
            if mode == "mmap" { 2 } else { 1 },
            "{mode}:\n{err}"
        );
    }
}

#[test]
fn a_later_or_missing_shard_is_an_error_naming_it() {
    let (_, first) = models();
    let dir = first.parent().unwrap();
    let second = dir.join("shard-00002-of-00002.gguf");
    load_fails(
        &second,
        &format!(
            "error loading model: illegal split file idx: 1 (file: {}), model must be loaded with the first split",
            second.display()
        ),
    );

    // the first shard alone, in a directory without the second
    let lone_dir = test_fixtures::scratch_dir("split-model-cli-lone");
    let lone = lone_dir.join("shard-00001-of-00002.gguf");
    std::fs::copy(first, &lone).unwrap();
    load_fails(
        &lone,
        &format!(
            "error loading model: llama_model_loader: failed to load GGUF split from {}",
            lone_dir.join("shard-00002-of-00002.gguf").display()
        ),
    );

    // a first shard renamed so that its name no longer says which split it is
    let renamed = lone_dir.join("renamed.gguf");
    std::fs::rename(&lone, &renamed).unwrap();
    load_fails(
        &renamed,
        &format!("invalid split file name: {}", renamed.display()),
    );
}

/// llama-completion on `model` exits 1 with `want` in its log, without a panic.
fn load_fails(model: &Path, want: &str) {
    let m = model.to_str().unwrap();
    let o = run(
        "llama-completion",
        &["-m", m, "-p", "x", "-n", "1", "-no-cnv"],
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(want), "want {want:?} in:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
}
