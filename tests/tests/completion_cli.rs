//! llama-completion end to end: flags accepted on a small generated model, bad input rejected
//! with a clear error and a non-zero exit, and (on the reference model) llama.cpp's greedy text.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn completion(args: &[&str]) -> Output {
    let bin = test_fixtures::bin("llama-completion", "llama-completion");
    Command::new(bin)
        .args(args)
        .env_remove("LLAMA_ARG_MODEL")
        .output()
        .expect("run llama-completion")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A 2-layer llama with llama-gguf-new's built-in vocabulary (head size 32, so quantized KV
/// types fit): loads and decodes in milliseconds.
fn small_model() -> &'static Path {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    MODEL.get_or_init(|| {
        let dir = test_fixtures::cache_dir().join("completion-cli");
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join(format!("small-{}.gguf", std::process::id()));
        let bin = test_fixtures::bin("llama-gguf-new", "llama-gguf-new");
        #[rustfmt::skip]
        let o = Command::new(bin)
            .args(["--arch", "llama", "--layers", "2", "--embd", "128", "--heads", "4", "--heads-kv", "2",
                "--ff", "192", "--ctx", "512", "--vocab-size", "1000", "--type", "f32", "--seed", "7",
                "-o", out.to_str().unwrap()])
            .output()
            .expect("run llama-gguf-new");
        assert!(o.status.success(), "llama-gguf-new: {}", text(&o.stderr));
        out
    })
}

fn model_arg() -> &'static str {
    small_model().to_str().unwrap()
}

/// Runs a generation on the small model with extra flags; asserts success.
fn run_ok(extra: &[&str]) -> Output {
    let mut args = vec!["-m", model_arg(), "-p", "hello world", "-n", "4", "-no-cnv"];
    args.extend_from_slice(extra);
    let o = completion(&args);
    assert!(
        o.status.success(),
        "{extra:?} failed ({:?}):\n{}",
        o.status,
        text(&o.stderr)
    );
    o
}

/// Runs with extra flags; asserts failure with status 1 and the given stderr fragment.
fn run_err(args: &[&str], want: &str) -> String {
    let o = completion(args);
    let err = text(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{args:?} should fail with 1:\n{err}"
    );
    assert!(err.contains(want), "{args:?}: expected {want:?} in:\n{err}");
    assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    err
}

#[test]
fn no_model_flag_is_an_error() {
    let err = run_err(&["-p", "x"], "error: --model is required");
    assert_eq!(err.trim_end(), "error: --model is required");
}

#[test]
fn unknown_flags_and_values_are_errors() {
    let m = model_arg();
    run_err(&["-m", m, "--bogus"], "error: invalid argument: --bogus");
    run_err(&["-m", m, "--mmap"], "error: invalid argument: --mmap");
    run_err(
        &["-m", m, "-fa", "sometimes"],
        "error: unknown value for --flash-attn: 'sometimes'",
    );
    run_err(&["-m", m, "-ctk", "q7"], "Unsupported cache type: q7");
    run_err(
        &["-m", m, "-lm", "turbo"],
        "error while handling argument \"-lm\": invalid value",
    );
    run_err(
        &["-m", m, "-n", "many"],
        "error while handling argument \"-n\": stoi",
    );
    run_err(&["-m", m, "-c"], "expected value for argument");
    run_err(
        &["-m", m, "-ngl", "x"],
        "error while handling argument \"-ngl\": stoi",
    );
    run_err(&["-m", m, "-dev", "CUDA0"], "invalid device: CUDA0");
    run_err(&["-m", m, "-ot", "x=NOPE"], "unknown buffer type");
    run_err(
        &["-m", m, "-f", "/nonexistent/prompt.txt"],
        "failed to open file '/nonexistent/prompt.txt'",
    );
}

#[test]
fn help_and_list_devices_exit_zero() {
    let o = completion(&["-h"]);
    assert!(o.status.success());
    let out = text(&o.stdout);
    assert!(out.starts_with("----- common params -----"));
    assert!(out.contains("example usage:"));
    let o = completion(&["--list-devices"]);
    assert!(o.status.success());
    assert!(text(&o.stdout).starts_with("Available devices:\n"));
}

#[test]
fn missing_and_broken_model_files_fail_cleanly() {
    let err = run_err(
        &["-m", "/nonexistent/model.gguf", "-p", "x", "-no-cnv"],
        "error: unable to create context",
    );
    assert!(
        err.contains("failed to load model '/nonexistent/model.gguf'"),
        "{err}"
    );

    let dir = test_fixtures::scratch_dir("completion-broken");
    let junk = dir.join("junk.gguf");
    std::fs::write(&junk, b"this is not a gguf file at all").unwrap();
    run_err(
        &["-m", junk.to_str().unwrap(), "-p", "x", "-no-cnv"],
        "error: unable to create context",
    );

    // a truncated copy of a valid model
    let bytes = std::fs::read(small_model()).unwrap();
    let cut = dir.join("cut.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    run_err(
        &["-m", cut.to_str().unwrap(), "-p", "x", "-no-cnv"],
        "error: unable to create context",
    );
}

#[test]
fn generation_prints_prompt_then_text_and_perf_to_stderr() {
    let o = run_ok(&["--temp", "0", "--seed", "1"]);
    let out = text(&o.stdout);
    assert!(out.starts_with("hello world"), "{out:?}");
    assert!(out.ends_with("\n\n"), "{out:?}");
    let err = text(&o.stderr);
    for line in [
        "llama_completion: llama backend init",
        "llama_completion: load the model and apply lora adapter, if any",
        "system_info: n_threads = ",
        "sampler seed: 1\n",
        "sampler chain: logits -> ?penalties -> ?dry -> ?top-n-sigma -> top-k -> ?typical -> top-p -> min-p -> ?xtc -> temp-ext -> dist \n",
        "generate: n_ctx = ",
        "common_perf_print:    sampling time = ",
        "common_perf_print:        eval time = ",
        "common_perf_print:    graphs reused = ",
    ] {
        assert!(err.contains(line), "missing {line:?} in:\n{err}");
    }
    // the log lines carry llama.cpp's level tag; the generated text does not reach stderr
    assert!(!err.contains("hello world"), "{err}");
}

#[test]
fn fit_pass_reports_at_trace_level() {
    let err = text(&run_ok(&["-lv", "4"]).stderr);
    for line in [
        "cmn  common_init_: fitting params to device memory ...",
        "common_params_fit_impl: getting device memory data for initial parameters:",
        "common_memory_breakdown_print: |   - Host ",
        "common_params_fit_impl: projected to use ",
        "MiB of system memory, no changes needed",
        "common_fit_params: successfully fit params to free device memory",
        "common_fit_params: fitting params to free memory took ",
    ] {
        assert!(err.contains(line), "missing {line:?} in:\n{err}");
    }
    // hidden at the default verbosity, skipped with -fit off
    assert!(!text(&run_ok(&[]).stderr).contains("common_fit_params"));
    assert!(!text(&run_ok(&["-lv", "4", "-fit", "off"]).stderr).contains("common_fit_params"));
}

#[test]
fn greedy_is_deterministic_and_seeded_sampling_repeats() {
    let a = text(&run_ok(&["--temp", "0"]).stdout);
    let b = text(&run_ok(&["--temp", "0", "--seed", "99"]).stdout);
    assert_eq!(a, b);
    let s1 = text(&run_ok(&["--seed", "42", "-n", "8"]).stdout);
    let s2 = text(&run_ok(&["--seed", "42", "-n", "8"]).stdout);
    assert_eq!(s1, s2);
}

#[test]
fn no_display_prompt_and_ignore_eos() {
    let o = run_ok(&["--no-display-prompt", "--temp", "0", "--ignore-eos"]);
    let out = text(&o.stdout);
    assert!(!out.starts_with("hello world"), "{out:?}");
    let err = text(&o.stderr);
    assert!(
        err.contains("sampler chain: logits -> logit-bias -> "),
        "{err}"
    );
}

#[test]
fn every_shared_flag_is_accepted() {
    #[rustfmt::skip]
    let sets: &[&[&str]] = &[
        &["-c", "128", "-b", "64", "-ub", "32"],
        &["-t", "1", "-tb", "2"],
        &["--threads", "1", "--threads-batch", "1", "--prio", "0", "--poll", "0"],
        &["-fa", "on"], &["-fa", "off"], &["-fa", "auto"], &["--flash-attn", "on"],
        &["-ctk", "f32", "-ctv", "f32"], &["-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on"],
        &["-lm", "none"], &["-lm", "mmap"], &["--load-mode", "auto"],
        &["-ngl", "0"], &["-ngl", "auto"], &["-ngl", "all"], &["-ngl", "99"],
        &["-ot", "blk\\.0\\..*=CPU"], &["-dev", "none"], &["-sm", "none"], &["-mg", "0"],
        &["-nkvo"], &["--no-op-offload"], &["-nr"], &["--no-host"], &["--check-tensors"],
        &["--no-warmup"], &["--warmup"], &["-e"], &["--no-escape"],
        &["--verbose-prompt"], &["--no-display-prompt"], &["--display-prompt"],
        &["-r", "xyz"], &["--reverse-prompt", "\\n"], &["-sp"], &["--keep", "2"],
        &["-lv", "4"], &["-lv", "0"], &["-v"], &["--log-disable"], &["--log-prefix"],
        &["--no-log-prefix"], &["--log-timestamps"], &["--no-log-timestamps"], &["--log-colors", "off"],
        &["--seed", "5", "--temp", "0.7", "--top-k", "10", "--top-p", "0.9", "--min-p", "0.1"],
        &["--typical", "0.9", "--repeat-penalty", "1.2", "--repeat-last-n", "16"],
        &["--presence-penalty", "0.5", "--frequency-penalty", "0.5"],
        &["--dry-multiplier", "0.8", "--dry-base", "1.75", "--dry-allowed-length", "2", "--dry-penalty-last-n", "-1", "--dry-sequence-breaker", "\\n"],
        &["--xtc-probability", "0.5", "--xtc-threshold", "0.1"], &["--top-nsigma", "1.0"],
        &["--dynatemp-range", "0.5", "--dynatemp-exp", "1.5"],
        &["--mirostat", "1"], &["--mirostat", "2", "--mirostat-lr", "0.2", "--mirostat-ent", "3"],
        &["-l", "5+1", "--logit-bias", "7-2"], &["--samplers", "top_k;temperature"],
        &["--sampler-seq", "kt"], &["--ignore-eos"], &["--perf"], &["--no-perf"],
        &["-np", "1"], &["--swa-full"], &["--context-shift"], &["--no-context-shift"],
        &["-n", "-1", "-c", "32"], &["-n", "-2", "-c", "32"],
        &["-fit", "off"], &["-ptc", "2"], &["-gan", "1", "-gaw", "512"],
        &["--rope-freq-base", "10000"], &["--yarn-orig-ctx", "0"],
    ];
    for extra in sets {
        run_ok(extra);
    }
}

#[test]
fn prompt_from_file_and_escapes() {
    let dir = test_fixtures::scratch_dir("completion-prompt-file");
    let f = dir.join("prompt.txt");
    std::fs::write(&f, "from a file\n").unwrap();
    let o = completion(&[
        "-m",
        model_arg(),
        "-f",
        f.to_str().unwrap(),
        "-n",
        "1",
        "-no-cnv",
        "--temp",
        "0",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).starts_with("from a file"),
        "{}",
        text(&o.stdout)
    );
    let o = run_ok(&["-p", "a\\tb", "-n", "1"]);
    assert!(text(&o.stdout).starts_with("a\tb"));
    let o = run_ok(&["-p", "a\\tb", "-n", "1", "--no-escape"]);
    assert!(text(&o.stdout).starts_with("a\\tb"));
}

#[test]
fn context_limits() {
    // a prompt longer than n_ctx - 4 is refused
    // (n_ctx is padded to a multiple of 256)
    let long = "word ".repeat(600);
    run_err(
        &["-m", model_arg(), "-p", &long, "-c", "32", "-no-cnv"],
        "prompt is too long",
    );
    // generation stops when the context is full
    let o = run_ok(&["-c", "16", "-n", "400", "--temp", "0", "--ignore-eos"]);
    assert!(text(&o.stderr).contains("context full and context shift is disabled => stopping"));
}

#[test]
fn conversation_mode_reads_stdin_until_eof() {
    // the small model carries a chat template: conversation mode turns on by itself, formats the
    // prompt as a user turn, answers, then waits for input and stops at EOF (stdin is closed)
    let o = completion(&[
        "-m",
        model_arg(),
        "-p",
        "hello world",
        "-n",
        "4",
        "--temp",
        "0",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains(
            "chat template is available, enabling conversation mode (disable it with -no-cnv)"
        ),
        "{err}"
    );
    assert!(err.contains("== Running in interactive mode. =="), "{err}");
    let out = text(&o.stdout);
    assert!(out.contains("hello world"), "{out:?}");
    assert!(out.contains("\n> EOF by user\n"), "{out:?}");
    // -no-cnv turns it off again
    let o = run_ok(&["--temp", "0"]);
    assert!(!text(&o.stdout).contains("EOF by user"));
}

#[cfg(unix)]
#[test]
fn ctrl_c_stops_with_the_timings_and_status_130() {
    use test_fixtures::running::Running;
    let bin = test_fixtures::bin("llama-completion", "llama-completion");
    // endless generation: no token limit, EOG ignored, context shifting instead of stopping;
    // the signal goes once the generation has begun, so the handler is installed by then
    #[rustfmt::skip]
    let args = ["-m", model_arg(), "-p", "hi", "-n", "-1", "--ignore-eos", "--context-shift", "-no-cnv"];
    let mut cmd = Command::new(bin);
    cmd.args(args);
    let run = Running::start(&mut cmd, "generate: n_ctx = ");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let o = run.interrupt();
    assert_eq!(o.code, Some(130), "{}", o.stderr);
    assert!(
        o.stdout.ends_with("\nInterrupted by user\n"),
        "{:?}",
        o.stdout
    );
    assert!(
        o.stderr.contains("common_perf_print:    graphs reused = "),
        "{}",
        o.stderr
    );
}

/// The acceptance line of issue 6: the reference model's greedy continuation.
#[test]
fn greedy_continuation_matches_llama_cpp_on_the_reference_model() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let log =
        std::fs::read_to_string(test_fixtures::shared_dir().join("reference/logs/greedy-f32.log"))
            .unwrap();
    let want = log
        .lines()
        .find(|l| l.starts_with("Hello my name is"))
        .unwrap()
        .trim()
        .to_string();
    let o = completion(&[
        "-m",
        model.to_str().unwrap(),
        "-p",
        "Hello my name is",
        "-n",
        "24",
        "--temp",
        "0",
        "-c",
        "256",
        "-no-cnv",
        "--no-warmup",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.replace('\n', " ").contains(&want) || out.contains(&want),
        "got {out:?}\nwant {want:?}"
    );
    let err = text(&o.stderr);
    assert!(err.contains("sampler seed: "));
    assert!(err.contains("\ttop_k = 40, top_p = 0.950, min_p = 0.050, xtc_probability = 0.000, xtc_threshold = 0.100, typical_p = 1.000, top_n_sigma = -1.000, temp = 0.000\n"), "{err}");
}

/// The seeded runs of the reference logs (`-p hello -n 4 --seed 1`, temperature 0.8 through
/// top-k, top-p, min-p and dist): llama.cpp's std::mt19937 draws reproduced token for token.
#[test]
fn seeded_sampling_matches_llama_cpp_on_the_reference_logs() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let logs = test_fixtures::shared_dir().join("reference/logs");
    for name in [
        "completion-lv4",
        "completion-fa-off",
        "completion-ub32",
        "completion-kv-q8_0",
    ] {
        let log = std::fs::read_to_string(logs.join(format!("{name}.log"))).unwrap();
        let cmd = log.lines().next().unwrap().trim_start_matches("$ ");
        let mut args: Vec<String> = cmd.split_whitespace().skip(1).map(String::from).collect();
        let m = args.iter().position(|a| a == "-m").unwrap();
        args[m + 1] = model.to_str().unwrap().to_string();
        let want = log.lines().find(|l| l.starts_with("hello")).unwrap();
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = completion(&argv);
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        let out = text(&o.stdout);
        assert_eq!(out.lines().next(), Some(want), "{name}");
    }
}

/// shared/scripts/check-startup-log.py on the f32 reference logs (the quantized models are not
/// made here, so those entries report "model missing" and are not counted).
#[test]
fn startup_log_figures_match_llama_cpp_for_f32() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let bin = test_fixtures::bin("llama-completion", "llama-completion");
    let script = test_fixtures::shared_dir().join("scripts/check-startup-log.py");
    let logs = test_fixtures::shared_dir().join("reference/logs");
    let o = Command::new("python3")
        .arg(&script)
        .arg(&bin)
        .arg(model.parent().unwrap())
        .arg(&logs)
        .output()
        .expect("run check-startup-log.py");
    let out = text(&o.stdout);
    let problems: Vec<&str> = out
        .lines()
        .filter(|l| l.contains(": ") && !l.ends_with("model missing"))
        .filter(|l| !l.contains("reference runs match"))
        .collect();
    assert!(
        problems.is_empty(),
        "check-startup-log.py:\n{out}\n{}",
        text(&o.stderr)
    );
    assert!(out.contains("6/10 reference runs match"), "{out}");
}
