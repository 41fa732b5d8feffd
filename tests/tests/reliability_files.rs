//! Nothing is left behind and nothing useless is written (issue 14, items 6 and 8): SIGINT and
//! SIGTERM during llama-quantize, llama-gguf-new and llama-perplexity --kl-divergence-base leave
//! no file at the destination and no temporary; a temporary of a killed run is removed by the
//! next one; llama-gguf-new refuses oversized shapes before writing; llama-quantize refuses an
//! unwritable output at once and a model the loader would reject before writing it.
//!
//! The models come from llama-gguf-new (no python needed), so nothing here is skipped.

use std::fs::File;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use gguf::{GgufFile, TensorInfo, Value};

const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;

fn bin(name: &str) -> PathBuf {
    test_fixtures::bin(name, name)
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn gguf_new(args: &[&str]) -> Output {
    Command::new(bin("llama-gguf-new"))
        .args(args)
        .output()
        .expect("run llama-gguf-new")
}

fn quantize(args: &[&str]) -> Output {
    Command::new(bin("llama-quantize"))
        .args(args)
        .output()
        .expect("run llama-quantize")
}

/// A model made once with llama-gguf-new and kept in target/test-models.
fn made_model(file: &str, args: &[&str]) -> PathBuf {
    let path = test_fixtures::cache_dir().join(file);
    if !path.is_file() {
        std::fs::create_dir_all(test_fixtures::cache_dir()).unwrap();
        let mut all = args.to_vec();
        all.extend(["--quiet", "-o", s(&path)]);
        let o = gguf_new(&all);
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    path
}

/// 5 MiB: a 2-layer llama for the quick cases.
fn small_model() -> &'static Path {
    static M: OnceLock<PathBuf> = OnceLock::new();
    M.get_or_init(|| made_model("reliability-small.gguf", SMALL))
}

const SMALL: &[&str] = &[
    "--layers",
    "2",
    "--embd",
    "256",
    "--heads",
    "4",
    "--heads-kv",
    "2",
    "--ff",
    "512",
    "--ctx",
    "256",
    "--vocab-size",
    "300",
];

/// About 470 MiB of f32: quantizing it or decoding with it takes seconds, time to interrupt.
const BIG: &[&str] = &[
    "--layers",
    "4",
    "--embd",
    "1024",
    "--heads",
    "8",
    "--heads-kv",
    "8",
    "--ff",
    "2816",
    "--ctx",
    "512",
    "--vocab-size",
    "32000",
];

fn big_model() -> &'static Path {
    static M: OnceLock<PathBuf> = OnceLock::new();
    M.get_or_init(|| made_model("reliability-big.gguf", BIG))
}

/// Files in `dir` named `name` or `name.tmp<anything>`.
fn leftovers(dir: &Path, name: &str) -> Vec<String> {
    let tmp = format!("{name}.tmp");
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n == name || n.starts_with(&tmp))
        .collect();
    v.sort();
    v
}

/// Starts `exe` with stderr to `log` (a pipe could fill and stall it), SIGINT and SIGTERM at
/// their default disposition: the tools keep an inherited ignore (a background job's), so a
/// test suite started in the background would otherwise see them run on through the signal.
fn spawn(exe: &Path, args: &[&str], log: &Path) -> Child {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new(exe);
    c.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(log).unwrap());
    // SAFETY: between fork and exec the closure only calls signal(2), which is
    // async-signal-safe, and allocates nothing.
    unsafe {
        c.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            Ok(())
        });
    }
    c.spawn().expect("spawn")
}

/// Waits until `dir/name.tmp<pid>` holds at least `min` bytes: the run is mid-write.
fn wait_for_temporary(child: &mut Child, dir: &Path, name: &str, min: u64, log: &Path) {
    let tmp = dir.join(format!("{name}.tmp{}", child.id()));
    let start = Instant::now();
    loop {
        if std::fs::metadata(&tmp).is_ok_and(|m| m.len() >= min) {
            return;
        }
        if let Some(st) = child.try_wait().unwrap() {
            panic!(
                "{name}: the run ended ({st}) before its temporary reached {min} bytes:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "{name}: no temporary after 300 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn send(child: &Child, sig: i32) {
    let st = Command::new("kill")
        .args(["-s", &sig.to_string(), &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(st.success());
}

/// Interrupts a run of `exe` that writes `dir/name` once it is writing, and checks that it died
/// of that signal and left neither the file nor a temporary.
fn interrupt(exe: &Path, args: &[&str], dir: &Path, name: &str, sig: i32) {
    let log = dir.join(format!("{name}.{sig}.log"));
    let mut child = spawn(exe, args, &log);
    wait_for_temporary(&mut child, dir, name, 1 << 20, &log);
    send(&child, sig);
    let st = child.wait().unwrap();
    assert_eq!(
        st.signal(),
        Some(sig),
        "{name}: {st}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert_eq!(leftovers(dir, name), Vec::<String>::new());
}

#[test]
fn signals_during_quantize_leave_nothing() {
    let m = big_model();
    let dir = test_fixtures::scratch_dir("reliability-quantize-signal");
    let out = dir.join("q.gguf");
    for sig in [SIGINT, SIGTERM] {
        interrupt(
            &bin("llama-quantize"),
            &[s(m), s(&out), "q6_k", "1"],
            &dir,
            "q.gguf",
            sig,
        );
    }
}

#[test]
fn signals_during_gguf_new_leave_nothing() {
    let dir = test_fixtures::scratch_dir("reliability-gguf-new-signal");
    let out = dir.join("new.gguf");
    let mut args = BIG.to_vec();
    args.extend(["--quiet", "-o", s(&out)]);
    for sig in [SIGINT, SIGTERM] {
        interrupt(&bin("llama-gguf-new"), &args, &dir, "new.gguf", sig);
    }
}

#[test]
fn signals_during_kl_divergence_base_leave_nothing() {
    let m = big_model();
    let dir = test_fixtures::scratch_dir("reliability-perplexity-signal");
    let base = dir.join("base.kld");
    let text_file = test_fixtures::shared_dir().join("reference/text/gpl-3.txt");
    for sig in [SIGINT, SIGTERM] {
        interrupt(
            &bin("llama-perplexity"),
            &[
                "-m",
                s(m),
                "-f",
                s(&text_file),
                "-c",
                "128",
                "-b",
                "128",
                "-t",
                "1",
                "--kl-divergence-base",
                s(&base),
            ],
            &dir,
            "base.kld",
            sig,
        );
    }
}

/// A pid that no process has: one that ran and was reaped.
fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

#[test]
fn stale_temporaries_of_killed_runs_are_removed_by_the_next_run() {
    let dir = test_fixtures::scratch_dir("reliability-stale");
    let dead = dead_pid();
    // as SIGKILL leaves them: a partial file under the temporary name of a gone process
    let q_stale = dir.join(format!("q.gguf.tmp{dead}"));
    let n_stale = dir.join(format!("n.gguf.tmp{dead}"));
    // not ours: another name, and a live process (pid 1)
    let others = [
        dir.join(format!("x.gguf.tmp{dead}")),
        dir.join("q.gguf.tmp1"),
    ];
    for p in [&q_stale, &n_stale].into_iter().chain(&others) {
        std::fs::write(p, b"GGUF partial").unwrap();
    }
    let q = dir.join("q.gguf");
    let o = quantize(&[s(small_model()), s(&q), "q8_0"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!q_stale.exists(), "quantize left {}", q_stale.display());
    let n = dir.join("n.gguf");
    let mut args = SMALL.to_vec();
    args.extend(["--quiet", "-o", s(&n)]);
    let o = gguf_new(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!n_stale.exists(), "gguf-new left {}", n_stale.display());
    assert!(q.is_file() && n.is_file());
    for p in &others {
        assert!(p.exists(), "{} is not ours to remove", p.display());
    }
}

#[test]
fn gguf_new_refuses_oversized_files_before_writing() {
    let dir = test_fixtures::scratch_dir("reliability-gguf-new-size");
    let out = dir.join("big.gguf");
    // the shape of the issue: 17 GB written before anyone noticed
    let o = gguf_new(&["--vocab-size", "100000", "--embd", "100000", "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        "error: the file would take 450.19 GiB (483384992800 bytes), more than the limit of 4.00 GiB; pass --force to write it\n"
    );
    assert_eq!(leftovers(&dir, "big.gguf"), Vec::<String>::new());
    // --force passes the limit but not the free space of the file system (28 TiB is more than
    // any disk this runs on has)
    let o = gguf_new(&[
        "--vocab-size",
        "1000000",
        "--embd",
        "1000000",
        "--ff",
        "1000000",
        "--layers",
        "1",
        "--force",
        "-o",
        s(&out),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.starts_with("error: the file would take 27939.71 GiB (30000034891200 bytes) but only ")
            && err.ends_with(&format!(" are free in {}\n", dir.display())),
        "{err}"
    );
    assert_eq!(leftovers(&dir, "big.gguf"), Vec::<String>::new());
    // below the limit nothing is asked
    let mut args = SMALL.to_vec();
    args.extend(["--quiet", "-o", s(&out)]);
    let o = gguf_new(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// The last lines of a failed llama-quantize run: the cause, then the summary.
fn quantize_fails(args: &[&str], cause: &str) -> String {
    let o = quantize(args);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let input = args[args.len() - 3];
    let want = format!(
        "llama_model_quantize: failed to quantize: {cause}\nllama_quantize: failed to quantize model from '{input}'\n"
    );
    assert!(err.ends_with(&want), "want:\n{want}got:\n{err}");
    err
}

#[test]
fn quantize_refuses_an_unwritable_output_at_once() {
    let dir = test_fixtures::scratch_dir("reliability-quantize-output");
    let m = s(small_model());
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let file = dir.join("plain");
    std::fs::write(&file, b"x").unwrap();
    let missing = dir.join("missing/out.gguf");
    let under_file = file.join("out.gguf");
    let cases = [
        (
            s(&sub).to_string(),
            format!("output path '{}' is a directory", sub.display()),
        ),
        (
            s(&missing).to_string(),
            format!(
                "cannot write '{}': directory '{}' does not exist",
                missing.display(),
                dir.join("missing").display()
            ),
        ),
        (
            s(&under_file).to_string(),
            format!(
                "cannot write '{}': Not a directory (os error 20)",
                under_file.display()
            ),
        ),
    ];
    for (out, cause) in &cases {
        let err = quantize_fails(&[m, out, "q4_0"], cause);
        // at once: the input was not even opened
        assert!(
            !err.contains("llama_model_loader: loaded meta data"),
            "{err}"
        );
    }
    // a directory without write permission (root writes anyway: then there is nothing to see)
    let ro = dir.join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::os::unix::fs::PermissionsExt::from_mode(0o555)).unwrap();
    if std::fs::write(ro.join("probe"), b"").is_err() {
        let out = ro.join("out.gguf");
        quantize_fails(
            &[m, s(&out), "q4_0"],
            &format!(
                "cannot write '{}': Permission denied (os error 13)",
                out.display()
            ),
        );
    } else {
        eprintln!("running as root: the permission case is not observable");
    }
    std::fs::set_permissions(&ro, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    assert_eq!(std::fs::read_dir(&sub).unwrap().count(), 0);
}

/// The small model with its KV pairs and tensors changed by `edit`, written to `path`.
fn mutated(
    path: &Path,
    edit: impl FnOnce(&mut Vec<(String, Value)>, &mut Vec<(TensorInfo, Vec<u8>)>),
) {
    let f = GgufFile::open(small_model()).unwrap();
    let mut kv = f.kv.clone();
    let mut tensors: Vec<(TensorInfo, Vec<u8>)> = f
        .tensors
        .iter()
        .map(|t| (t.clone(), f.tensor_data(t).to_vec()))
        .collect();
    edit(&mut kv, &mut tensors);
    let refs: Vec<(TensorInfo, &[u8])> = tensors
        .iter()
        .map(|(t, d)| (t.clone(), d.as_slice()))
        .collect();
    gguf::write_gguf(path, &kv, &refs).unwrap();
}

/// llama-completion's stderr for loading `model`.
fn completion_stderr(model: &Path) -> String {
    let o = Command::new(bin("llama-completion"))
        .args(["-m", s(model), "-p", "x", "-n", "1", "-no-cnv"])
        .output()
        .expect("run llama-completion");
    assert_eq!(o.status.code(), Some(1));
    text(&o.stderr)
}

#[test]
fn quantize_refuses_what_the_loader_rejects_and_writes_nothing() {
    let dir = test_fixtures::scratch_dir("reliability-quantize-check");
    let bad_hparam = dir.join("bad-hparam.gguf");
    mutated(&bad_hparam, |kv, _| {
        for (k, v) in kv.iter_mut() {
            if k == "llama.attention.head_count_kv" {
                *v = Value::U32(3);
            }
        }
    });
    let bad_shape = dir.join("bad-shape.gguf");
    mutated(&bad_shape, |_, tensors| {
        let t = tensors
            .iter_mut()
            .find(|(t, _)| t.name == "blk.0.ffn_norm.weight")
            .unwrap();
        *t = (
            TensorInfo::new("blk.0.ffn_norm.weight", ggml::Type::F32, &[128]).unwrap(),
            vec![0; 512],
        );
    });
    let no_ctx = dir.join("no-ctx.gguf");
    mutated(&no_ctx, |kv, _| {
        kv.retain(|(k, _)| k != "llama.context_length")
    });
    let cases = [
        (
            &bad_hparam,
            "invalid hyperparameter: layer 0: n_head = 4 must be a positive multiple of n_head_kv = 3",
        ),
        (
            &bad_shape,
            "check_tensor_dims: tensor 'blk.0.ffn_norm.weight' has wrong shape; expected   256, got   128,     1,     1,     1",
        ),
        (&no_ctx, "key not found in model: llama.context_length"),
    ];
    for (model, cause) in cases {
        let out = dir.join("out.gguf");
        quantize_fails(&[s(model), s(&out), "q4_0"], cause);
        assert_eq!(leftovers(&dir, "out.gguf"), Vec::<String>::new());
        // the same cause as the loader gives
        let err = completion_stderr(model);
        assert!(err.contains(cause), "llama-completion:\n{err}");
    }
}

#[test]
fn expert_count_on_a_dense_model_is_a_warning() {
    let dir = test_fixtures::scratch_dir("reliability-quantize-expert");
    let model = dir.join("dense-with-experts.gguf");
    mutated(&model, |kv, _| {
        kv.push(("llama.expert_count".into(), Value::U32(8)));
    });
    let out = dir.join("out.gguf");
    let o = quantize(&[s(&model), s(&out), "q4_0"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("llama_model_quantize_impl: warning: llama.expert_count = 8 but the model has no expert tensors: it is loaded as a dense model\n"),
        "{err}"
    );
    assert!(out.is_file());
    // llama-completion loads both, dense, with the same note
    for m in [&model, &out] {
        let o = Command::new(bin("llama-completion"))
            .args(["-m", s(m), "-p", "x", "-n", "1", "-no-cnv"])
            .output()
            .expect("run llama-completion");
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{err}");
        assert!(
            err.contains("llama_model_load: warning: llama.expert_count = 8 but the model has no expert tensors: it is loaded as a dense model\n"),
            "{err}"
        );
    }
}
