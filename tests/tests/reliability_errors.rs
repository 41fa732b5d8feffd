//! Every failure says why (issue 14, items 1, 7 and 9): one case per class of failure, each
//! asserting the exact cause on stderr and exit status 1. The load and context classes run all
//! four model tools: llama-completion, llama-perplexity and llama-eval-callback log llama.cpp's
//! chain (`llama_model_load: error loading model: <cause>`, ..., the tool's own line), and
//! llama-bench, whose libllama log is silenced, names the cause in its own line.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use gguf::Value;
use test_fixtures::gguf_edit::{self, Tensors};

fn tool(name: &str) -> PathBuf {
    let full = format!("llama-{name}");
    test_fixtures::bin(&full, &full)
}

fn run(name: &str, args: &[&str]) -> Output {
    Command::new(tool(name))
        .args(args)
        .env_remove("LLAMA_ARG_MODEL")
        .output()
        .unwrap_or_else(|e| panic!("run llama-{name}: {e}"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Whether `stderr` holds `msg` as a whole log message: a line that is `msg`, or that ends with
/// it after the level letter of the common log (`0.00.000.055 E msg`; a progress line without
/// its newline may come before the letter).
fn has_line(stderr: &str, msg: &str) -> bool {
    stderr
        .lines()
        .any(|l| l == msg || l.ends_with(&format!("E {msg}")))
}

/// The run failed with status 1 and printed every one of `lines`, and did not panic.
fn assert_fails(o: &Output, what: &str, lines: &[String]) {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{what}: exit status\n{err}");
    assert!(!err.contains("panicked"), "{what} panicked:\n{err}");
    for l in lines {
        assert!(
            has_line(&err, l),
            "{what}: expected the line {l:?} in:\n{err}"
        );
    }
}

/// A fresh directory under target/test-models/scratch, its own to every call (tests run in
/// parallel, and making a scratch directory empties it); removed when dropped.
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    Scratch(test_fixtures::scratch_dir(&format!(
        "reliability-{name}-{}-{n}",
        std::process::id()
    )))
}

/// A generated model cached as target/test-models/reliability/<name> (the shape and seed fix
/// its bytes; concurrent test processes each write a temporary file and rename it).
fn cached_model(name: &str, shape: &[&str]) -> PathBuf {
    let dir = test_fixtures::cache_dir().join("reliability");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(name);
    if !out.is_file() {
        let tmp = dir.join(format!(".{name}.{}", std::process::id()));
        gguf_new(&tmp, shape);
        std::fs::rename(&tmp, &out).unwrap();
    }
    out
}

fn gguf_new(out: &Path, shape: &[&str]) {
    let mut args: Vec<&str> = shape.to_vec();
    args.extend(["--type", "f32", "--seed", "7", "--quiet", "-o"]);
    args.push(out.to_str().unwrap());
    let o = run("gguf-new", &args);
    assert!(o.status.success(), "llama-gguf-new: {}", text(&o.stderr));
}

/// A 2-layer llama with the built-in vocabulary (head size 32): loads in milliseconds.
fn small_model() -> &'static Path {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    MODEL.get_or_init(|| {
        #[rustfmt::skip]
        let m = cached_model("small.gguf", &["--arch", "llama", "--layers", "2", "--embd", "128",
            "--heads", "4", "--heads-kv", "2", "--ff", "192", "--ctx", "512", "--vocab-size", "1000"]);
        m
    })
}

fn small() -> &'static str {
    small_model().to_str().unwrap()
}

/// Text that tokenizes to a few hundred tokens with the built-in vocabulary.
fn text_file(dir: &Path) -> PathBuf {
    let p = dir.join("text.txt");
    std::fs::write(&p, "hello world the quick brown fox ".repeat(200)).unwrap();
    p
}

/// A copy of the small model with its metadata and tensors edited by `edit` (tensors as
/// name, type, shape and data).
fn edited_model(out: &Path, edit: impl FnOnce(&mut Vec<(String, Value)>, &mut Tensors)) {
    gguf_edit::rewrite(small_model(), out, edit);
}

/// The lines each model tool prints when the model at `path` cannot be loaded because of
/// `log` (libllama's lines with the cause) and `cause` (what llama-bench says).
fn assert_load_fails_everywhere(path: &str, extra: &[&str], log: &[String], cause: &str) {
    let dir = scratch("load");
    let txt = text_file(&dir);
    let txt = txt.to_str().unwrap();
    let mut common = log.to_vec();
    common.push("llama_model_load_from_file_impl: failed to load model".into());
    common.push(format!("cmn  common_init_: failed to load model '{path}'"));

    let mut args = vec!["-m", path, "-p", "hi", "-n", "1", "-no-cnv"];
    args.extend_from_slice(extra);
    let mut want = common.clone();
    want.push("llama_completion: error: unable to create context".into());
    assert_fails(&run("completion", &args), "llama-completion", &want);

    let mut args = vec!["-m", path, "-f", txt, "-c", "16", "-b", "16"];
    args.extend_from_slice(extra);
    let mut want = common.clone();
    want.push("llama_perplexity: unable to load model".into());
    assert_fails(&run("perplexity", &args), "llama-perplexity", &want);

    let mut args = vec!["-m", path, "-p", "hi"];
    args.extend_from_slice(extra);
    let mut want = common;
    want.push("main : failed to init".into());
    assert_fails(&run("eval-callback", &args), "llama-eval-callback", &want);

    if extra.contains(&"--check-tensors") {
        // llama-bench has no --check-tensors (nor has llama.cpp's)
        return;
    }
    let mut args = vec!["-m", path, "-p", "4", "-n", "0", "-r", "1"];
    args.extend_from_slice(extra);
    let want = [format!(
        "llama_bench: error: failed to load model '{path}': {cause}"
    )];
    assert_fails(&run("bench", &args), "llama-bench", &want);
}

fn gguf_lines(path: &str, cause: &str, func: &str) -> Vec<String> {
    vec![
        format!("{func}: {cause}"),
        format!(
            "llama_model_load: error loading model: llama_model_loader: failed to load model from {path}"
        ),
    ]
}

/// What llama-gguf-inspect says about `path` (its one `error: <cause>` line): the model tools
/// must give the same cause.
fn inspect_cause(path: &str) -> String {
    let o = run("gguf-inspect", &[path]);
    assert_eq!(o.status.code(), Some(1), "llama-gguf-inspect {path}");
    let err = text(&o.stderr);
    err.trim_end()
        .strip_prefix("error: ")
        .unwrap_or_else(|| panic!("llama-gguf-inspect printed:\n{err}"))
        .to_string()
}

#[test]
fn missing_file() {
    let dir = scratch("missing");
    let p = dir.join("nope.gguf");
    let p = p.to_str().unwrap();
    let cause = format!("failed to open GGUF file '{p}' (No such file or directory (os error 2))");
    assert_eq!(inspect_cause(p), cause);
    assert_load_fails_everywhere(
        p,
        &[],
        &gguf_lines(p, &cause, "gguf_init_from_file"),
        &cause,
    );
}

#[test]
fn unreadable_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("unreadable");
    // a directory cannot be read as a model by anyone, root included
    let d = dir.join("model.gguf");
    std::fs::create_dir(&d).unwrap();
    let d = d.to_str().unwrap();
    let cause = inspect_cause(d);
    assert!(
        cause.starts_with(&format!("failed to open GGUF file '{d}' (")),
        "{cause}"
    );
    assert_load_fails_everywhere(
        d,
        &[],
        &gguf_lines(d, &cause, "gguf_init_from_file"),
        &cause,
    );

    // mode 000 is the permission case, for users other than root (who reads any file)
    let f = dir.join("locked.gguf");
    std::fs::copy(small_model(), &f).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o000)).unwrap();
    if std::fs::File::open(&f).is_ok() {
        eprintln!("running as root: mode 000 does not stop reads; the directory case stands");
        return;
    }
    let f = f.to_str().unwrap();
    let cause = format!("failed to open GGUF file '{f}' (Permission denied (os error 13))");
    assert_eq!(inspect_cause(f), cause);
    assert_load_fails_everywhere(
        f,
        &[],
        &gguf_lines(f, &cause, "gguf_init_from_file"),
        &cause,
    );
}

#[test]
fn truncated_file() {
    let dir = scratch("truncated");
    let bytes = std::fs::read(small_model()).unwrap();
    let p = dir.join("cut.gguf");
    std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    let p = p.to_str().unwrap();
    let cause = inspect_cause(p);
    assert!(
        cause.starts_with("invalid GGUF file: at byte ")
            && cause.contains("lies outside the data section of"),
        "{cause}"
    );
    let log = gguf_lines(p, &cause, "gguf_init_from_file_impl");
    assert_load_fails_everywhere(p, &[], &log, &cause);
}

#[test]
fn corrupt_file() {
    let dir = scratch("corrupt");
    let mut bytes = std::fs::read(small_model()).unwrap();
    bytes[..4].copy_from_slice(b"GGXF");
    let p = dir.join("magic.gguf");
    std::fs::write(&p, &bytes).unwrap();
    let p = p.to_str().unwrap();
    let cause = inspect_cause(p);
    assert!(
        cause.contains("invalid magic characters: 'GGXF', expected 'GGUF'"),
        "{cause}"
    );
    let log = gguf_lines(p, &cause, "gguf_init_from_file_impl");
    assert_load_fails_everywhere(p, &[], &log, &cause);
}

#[test]
fn bad_hyperparameter() {
    let dir = scratch("hparam");
    let p = dir.join("hparam.gguf");
    edited_model(&p, |kv, _| {
        for (k, v) in kv.iter_mut() {
            if k == "llama.block_count" {
                *v = Value::Str("two".into());
            }
        }
    });
    let p = p.to_str().unwrap();
    let cause = "key llama.block_count has wrong type: expected an unsigned integer";
    let log = [format!(
        "llama_model_load: error loading model: error loading model hyperparameters: {cause}"
    )];
    assert_load_fails_everywhere(p, &[], &log, cause);
}

#[test]
fn wrong_tensor_shape() {
    let dir = scratch("shape");
    let p = dir.join("shape.gguf");
    edited_model(&p, |_, tensors| {
        let t = tensors
            .iter_mut()
            .find(|t| t.0 == "blk.0.attn_q.weight")
            .unwrap();
        t.2 = vec![128, 64];
        t.3.truncate(128 * 64 * 4);
    });
    let p = p.to_str().unwrap();
    let cause = "check_tensor_dims: tensor 'blk.0.attn_q.weight' has wrong shape; expected   128,   128, got   128,    64,     1,     1";
    let log = [format!("llama_model_load: error loading model: {cause}")];
    assert_load_fails_everywhere(p, &[], &log, cause);
}

#[test]
fn missing_tensor() {
    let dir = scratch("tensor");
    let p = dir.join("tensor.gguf");
    edited_model(&p, |_, tensors| {
        tensors.retain(|t| t.0 != "output_norm.weight");
    });
    let p = p.to_str().unwrap();
    let cause = "missing tensor 'output_norm.weight'";
    let log = [format!("llama_model_load: error loading model: {cause}")];
    assert_load_fails_everywhere(p, &[], &log, cause);
}

#[test]
fn nan_found_by_check_tensors() {
    let dir = scratch("nan");
    let p = dir.join("nan.gguf");
    edited_model(&p, |_, tensors| {
        let t = tensors
            .iter_mut()
            .find(|t| t.0 == "blk.1.ffn_up.weight")
            .unwrap();
        // row 3 (of 128 values), element 5
        let at = (3 * 128 + 5) * 4;
        t.3[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
    });
    let p = p.to_str().unwrap();
    let cause =
        "tensor 'blk.1.ffn_up.weight' has invalid data: found nan value at block 389 (row 3)";
    let log = [format!("llama_model_load: error loading model: {cause}")];
    assert_load_fails_everywhere(p, &["--check-tensors"], &log, cause);
    // without the check the same file loads
    let o = run("completion", &["-m", p, "-p", "hi", "-n", "1", "-no-cnv"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn bad_override_regex() {
    let cause = "invalid tensor override regex '(': unclosed group";
    let log = [format!("llama_model_load: error loading model: {cause}")];
    assert_load_fails_everywhere(small(), &["-ot", "(=CPU"], &log, cause);
}

#[test]
fn kv_type_that_cannot_hold_the_head_size() {
    #[rustfmt::skip]
    let m = cached_model("head16.gguf", &["--arch", "llama", "--layers", "1", "--embd", "64",
        "--heads", "4", "--heads-kv", "2", "--ff", "96", "--ctx", "256", "--vocab-size", "300"]);
    let m = m.to_str().unwrap();
    let cause = "K cache type q4_0 with block size 32 does not divide n_embd_head_k=16";
    let common = |tool_line: &str| {
        vec![
            format!("llama_init_from_model: {cause}"),
            format!("cmn  common_init_: failed to create context with model '{m}'"),
            tool_line.to_string(),
        ]
    };
    let o = run(
        "completion",
        &["-m", m, "-p", "hi", "-n", "1", "-no-cnv", "-ctk", "q4_0"],
    );
    assert_fails(
        &o,
        "llama-completion",
        &common("llama_completion: error: unable to create context"),
    );
    let dir = scratch("ctk");
    let txt = text_file(&dir);
    let o = run(
        "perplexity",
        &[
            "-m",
            m,
            "-f",
            txt.to_str().unwrap(),
            "-c",
            "16",
            "-ctk",
            "q4_0",
        ],
    );
    assert_fails(
        &o,
        "llama-perplexity",
        &common("llama_perplexity: failed to create context"),
    );
    let o = run("eval-callback", &["-m", m, "-p", "hi", "-ctk", "q4_0"]);
    assert_fails(&o, "llama-eval-callback", &common("main : failed to init"));
    let o = run(
        "bench",
        &["-m", m, "-p", "4", "-n", "0", "-r", "1", "-ctk", "q4_0"],
    );
    let want = [format!(
        "llama_bench: error: failed to create context with model '{m}': invalid context parameters: {cause}"
    )];
    assert_fails(&o, "llama-bench", &want);
}

#[test]
fn too_many_sequences() {
    // llama-perplexity sets the sequence count itself (see perplexity_context_below_8) and
    // llama-bench has no -np
    let m = small();
    let want = |tool_line: &str| {
        vec![
            "llama_init_from_model: failed to initialize the context: n_seq_max must be <= 256"
                .to_string(),
            format!("cmn  common_init_: failed to create context with model '{m}'"),
            tool_line.to_string(),
        ]
    };
    let o = run(
        "completion",
        &["-m", m, "-p", "hi", "-n", "1", "-no-cnv", "-np", "100000"],
    );
    assert_fails(
        &o,
        "llama-completion",
        &want("llama_completion: error: unable to create context"),
    );
    let o = run("eval-callback", &["-m", m, "-p", "hi", "-np", "100000"]);
    assert_fails(&o, "llama-eval-callback", &want("main : failed to init"));
}

#[test]
fn perplexity_context_below_8() {
    // -c 4 with the default batch of 2048 asks for 512 sequences of 4 tokens
    let dir = scratch("ctx4");
    let txt = text_file(&dir);
    let m = small();
    let o = run(
        "perplexity",
        &["-m", m, "-f", txt.to_str().unwrap(), "-c", "4"],
    );
    let want = [
        "llama_init_from_model: failed to initialize the context: n_seq_max must be <= 256"
            .to_string(),
        format!("cmn  common_init_: failed to create context with model '{m}'"),
        "llama_perplexity: failed to create context".to_string(),
    ];
    assert_fails(&o, "llama-perplexity -c 4", &want);
}

#[test]
fn threads_the_os_refuses() {
    // 512 threads of 2 MiB stacks do not fit in 700 MB of address space; the model does
    let cmd = format!(
        "ulimit -v 700000 && exec '{}' -m '{}' -p hi -n 1 -no-cnv -t 512",
        tool("completion").display(),
        small()
    );
    let o = Command::new("sh").args(["-c", &cmd]).output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("E llama_init_from_model: failed to initialize the context: failed to create 512 threads: "))
        .unwrap_or_else(|| panic!("no thread error in:\n{err}"));
    assert!(
        line.ends_with("(os error 11)") || line.ends_with("(os error 12)"),
        "{line}"
    );
    assert!(
        has_line(&err, "llama_completion: error: unable to create context"),
        "{err}"
    );
}

/// llama-perplexity on the small model with 16-token chunks, plus `extra`.
fn perplexity(dir: &Path, extra: &[&str]) -> Output {
    let txt = text_file(dir);
    let mut args = vec![
        "-m",
        small(),
        "-f",
        txt.to_str().unwrap(),
        "-c",
        "16",
        "-b",
        "16",
        "--chunks",
        "3",
    ];
    args.extend_from_slice(extra);
    run("perplexity", &args)
}

#[test]
fn perplexity_logits_file_cannot_be_created() {
    let dir = scratch("ppl-open");
    let p = dir.join("no-such-dir").join("base.kld");
    let p = p.to_str().unwrap();
    let o = perplexity(&dir, &["--kl-divergence-base", p]);
    let want = [format!(
        "perplexity: failed to open {p} for writing: No such file or directory (os error 2)"
    )];
    assert_fails(&o, "perplexity into a missing directory", &want);
}

#[test]
fn perplexity_logits_file_cannot_be_written() {
    // a file size limit stands in for a full disk: the write fails with EFBIG (the signal that
    // would kill the process is ignored, as a disk-full write returns an error instead)
    let dir = scratch("ppl-full");
    let txt = text_file(&dir);
    let out = dir.join("base.kld");
    let cmd = format!(
        "trap '' XFSZ; ulimit -f 8 && exec '{}' -m '{}' -f '{}' -c 16 -b 16 --chunks 3 --kl-divergence-base '{}'",
        tool("perplexity").display(),
        small(),
        txt.display(),
        out.display()
    );
    let o = Command::new("sh").args(["-c", &cmd]).output().unwrap();
    let want =
        ["perplexity: failed to write the logits file: File too large (os error 27)".to_string()];
    assert_fails(&o, "perplexity over the file size limit", &want);
    let left: Vec<_> = std::fs::read_dir(&*dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "text.txt")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn perplexity_text_too_short() {
    let dir = scratch("ppl-short");
    let txt = dir.join("short.txt");
    std::fs::write(&txt, "hello").unwrap();
    let o = run(
        "perplexity",
        &[
            "-m",
            small(),
            "-f",
            txt.to_str().unwrap(),
            "-c",
            "16",
            "-b",
            "16",
        ],
    );
    let err = text(&o.stderr);
    let n = err
        .lines()
        .find_map(|l| l.split("tokenizes to only ").nth(1))
        .and_then(|t| t.strip_suffix(" tokens"))
        .unwrap_or_else(|| panic!("no token count in:\n{err}"));
    let want = [
        "perplexity: you need at least 32 tokens to evaluate perplexity with a context of 16"
            .to_string(),
        format!("perplexity: the data file you provided tokenizes to only {n} tokens"),
    ];
    assert_fails(&o, "perplexity of a short text", &want);
}

#[test]
fn kld_file_corrupt() {
    let dir = scratch("kld");
    let base = dir.join("base.kld");
    let o = perplexity(&dir, &["--kl-divergence-base", base.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let bytes = std::fs::read(&base).unwrap();
    let kld = |name: &str, data: &[u8], model: Option<&str>| {
        let p = dir.join(name);
        std::fs::write(&p, data).unwrap();
        let txt = text_file(&dir);
        let o = run(
            "perplexity",
            &[
                "-m",
                model.unwrap_or(small()),
                "-f",
                txt.to_str().unwrap(),
                "-c",
                "16",
                "-b",
                "16",
                "--kl-divergence-base",
                p.to_str().unwrap(),
                "--kl-divergence",
            ],
        );
        (p.to_str().unwrap().to_string(), o)
    };
    // the base file itself compares fine
    let (_, o) = kld("same.kld", &bytes, None);
    assert!(o.status.success(), "{}", text(&o.stderr));

    let (p, o) = kld("cut-header.kld", &bytes[..100], None);
    assert_fails(
        &o,
        "truncated tokens",
        &[format!(
            "kl_divergence: failed reading evaluation tokens from {p}"
        )],
    );
    let (_, o) = kld("cut-rows.kld", &bytes[..bytes.len() - 100], None);
    assert_fails(
        &o,
        "truncated rows",
        &["kl_divergence: failed reading log-probs for chunk 2".to_string()],
    );
    let mut magic = bytes.clone();
    magic[..8].copy_from_slice(b"XXXXXXXX");
    let (p, o) = kld("magic.kld", &magic, None);
    assert_fails(
        &o,
        "wrong magic",
        &[format!(
            "kl_divergence: {p} does not look like a file containing log-probabilities"
        )],
    );

    let other = dir.join("v1200.gguf");
    #[rustfmt::skip]
    gguf_new(&other, &["--arch", "llama", "--layers", "2", "--embd", "128", "--heads", "4",
        "--heads-kv", "2", "--ff", "192", "--ctx", "512", "--vocab-size", "1200"]);
    let (_, o) = kld("vocab.kld", &bytes, other.to_str());
    assert_fails(
        &o,
        "other vocabulary",
        &["kl_divergence: inconsistent vocabulary (1000 vs 1200)".to_string()],
    );
}

#[test]
fn bench_refuses_zero_repetitions_and_negative_counts() {
    for (args, arg, detail) in [
        (&["-r", "0"][..], "-r", "-r must be at least 1, got 0"),
        (&["-r", "-1"][..], "-r", "-r must be at least 1, got -1"),
        (
            &["-p", "-1"][..],
            "-p",
            "'-1' is negative: counts must be 0 or more",
        ),
        (
            &["-n", "-5"][..],
            "-n",
            "'-5' is negative: counts must be 0 or more",
        ),
    ] {
        let mut a = vec!["-m", small()];
        a.extend_from_slice(args);
        let o = run("bench", &a);
        let want = [
            format!("error: {detail}"),
            format!("error: invalid parameter for argument: {arg}"),
        ];
        assert_fails(&o, &format!("llama-bench {args:?}"), &want);
        assert!(
            text(&o.stdout).starts_with("usage: "),
            "{args:?}: usage on stdout"
        );
    }
}

#[test]
fn list_devices_answers_like_the_other_tools() {
    let o = run("list-devices", &["--foo"]);
    assert_fails(
        &o,
        "llama-list-devices --foo",
        &["error: invalid argument: --foo".to_string()],
    );
    let c = run("completion", &["--foo"]);
    assert_fails(
        &c,
        "llama-completion --foo",
        &["error: invalid argument: --foo".to_string()],
    );

    let o = run("list-devices", &["--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        text(&o.stdout).starts_with("usage: "),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn version_agrees_across_tools() {
    const TOOLS: [&str; 9] = [
        "completion",
        "perplexity",
        "eval-callback",
        "bench",
        "list-devices",
        "tokenize",
        "gguf-inspect",
        "quantize",
        "gguf-new",
    ];
    // built in one cargo run, the tools link one build of build-info even while commits land
    // (test_fixtures::bin builds them one by one)
    // (test_fixtures::bin builds each once a process: done first, so the one run below is
    // the last build before the tools run)
    let exes: Vec<PathBuf> = TOOLS.iter().map(|t| tool(t)).collect();
    let release = exes[0]
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|d| d == "release");
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo.args(["build", "--quiet"]);
    cargo.args(if release {
        &["--release"][..]
    } else {
        &["--profile", "test"][..]
    });
    for t in TOOLS {
        cargo.args(["-p", &format!("llama-{t}")]);
    }
    let status = cargo
        .current_dir(test_fixtures::repo_root())
        .status()
        .unwrap();
    assert!(status.success(), "cargo build of the tools");

    let first_line = |name: &str| {
        let o = run(name, &["--version"]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "llama-{name} --version: {}",
            text(&o.stderr)
        );
        let err = text(&o.stderr);
        err.lines()
            .find(|l| l.starts_with("version: "))
            .unwrap_or_else(|| panic!("llama-{name} --version printed:\n{err}"))
            .to_string()
    };
    let want = first_line(TOOLS[0]);
    assert!(
        want.contains(" (build ") && want.contains(", commit "),
        "{want}"
    );
    assert!(
        !want.ends_with("commit unknown)") || !test_fixtures::repo_root().join(".git").exists(),
        "{want}"
    );
    for name in &TOOLS[1..] {
        assert_eq!(first_line(name), want, "llama-{name}");
    }
}
