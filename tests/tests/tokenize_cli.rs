//! llama-tokenize end to end: llama.cpp's reference outputs (tokenize-ids.log,
//! tokenize-show.log; the reference model's vocabulary is ggml-vocab-qwen2.gguf, and the tool
//! reads nothing else), every vocabulary's vectors through `-f`, the flags, and the errors.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn tokenize(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let bin = test_fixtures::bin("llama-tokenize", "llama-tokenize");
    let mut child = Command::new(bin)
        .args(args)
        .env_remove("LLAMA_ARG_MODEL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run llama-tokenize");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input).unwrap();
    } else {
        drop(child.stdin.take());
    }
    child.wait_with_output().expect("wait llama-tokenize")
}

fn vocab(name: &str) -> PathBuf {
    test_fixtures::shared_dir().join("vocab").join(name)
}

fn qwen2() -> String {
    vocab("ggml-vocab-qwen2.gguf")
        .to_string_lossy()
        .into_owned()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The command of a reference log ("$ llama-tokenize -m M -p <words...> --flags") with the
/// model replaced; the prompt is every word up to the next flag.
fn reference_run(log: &str) -> (Output, String) {
    reference_run_with(log, &qwen2())
}

fn reference_run_with(log: &str, model: &str) -> (Output, String) {
    let text =
        std::fs::read_to_string(test_fixtures::shared_dir().join("reference/logs").join(log))
            .expect("reference log");
    let (cmd, expected) = text.split_once('\n').expect("command line");
    let words: Vec<&str> = cmd.split(' ').skip(2).collect();
    let mut args: Vec<String> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        match words[i] {
            "-m" => {
                args.extend(["-m".to_string(), model.to_string()]);
                i += 2;
            }
            "-p" => {
                let mut j = i + 1;
                while j < words.len() && !words[j].starts_with("--") {
                    j += 1;
                }
                args.extend(["-p".to_string(), words[i + 1..j].join(" ")]);
                i = j;
            }
            w => {
                args.push(w.to_string());
                i += 1;
            }
        }
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    (tokenize(&refs, None), expected.to_string())
}

#[test]
fn reproduces_reference_ids_log() {
    let (o, want) = reference_run("tokenize-ids.log");
    assert!(o.status.success());
    assert_eq!(out(&o), want);
    assert!(o.stderr.is_empty(), "--log-disable leaves stderr quiet");
}

#[test]
fn reproduces_reference_show_log() {
    let (o, want) = reference_run("tokenize-show.log");
    assert!(o.status.success());
    assert_eq!(out(&o), want);
}

#[test]
fn reproduces_reference_logs_on_the_reference_model() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let model = model.to_string_lossy().into_owned();
    for log in ["tokenize-ids.log", "tokenize-show.log"] {
        let t0 = std::time::Instant::now();
        let (o, want) = reference_run_with(log, &model);
        assert!(o.status.success());
        assert_eq!(out(&o), want, "{log}");
        // Only the metadata is read: far less than the time to read 328 MB of weights cold.
        assert!(t0.elapsed().as_secs() < 30);
    }
}

#[test]
fn file_input_is_verbatim_for_every_vocab() {
    let dir = test_fixtures::scratch_dir("tokenize-cli-vectors");
    let mut n = 0;
    for entry in std::fs::read_dir(test_fixtures::shared_dir().join("vocab")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "gguf") {
            continue;
        }
        let (Ok(inp), Ok(outp)) = (
            std::fs::read(format!("{}.inp", path.display())),
            std::fs::read_to_string(format!("{}.out", path.display())),
        ) else {
            continue;
        };
        // The longest text (many lines, a trailing space-newline mix) of each vocabulary.
        let texts: Vec<&[u8]> = inp
            .split(|&b| b == b'\x00')
            .next()
            .map(|raw| split_tests(raw))
            .unwrap_or_default();
        let (k, text) = texts
            .iter()
            .enumerate()
            .max_by_key(|(_, t)| t.len())
            .map(|(k, t)| (k, *t))
            .unwrap();
        let want: Vec<&str> = outp.lines().collect();
        let file = dir.join(format!("text-{n}.txt"));
        std::fs::write(&file, text).unwrap();
        let o = tokenize(
            &[
                "-m",
                path.to_str().unwrap(),
                "-f",
                file.to_str().unwrap(),
                "--ids",
                "--no-bos",
                "--no-parse-special",
                "--log-disable",
            ],
            None,
        );
        assert!(o.status.success());
        let got: Vec<String> = out(&o)
            .trim()
            .trim_matches(['[', ']'])
            .split(", ")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        assert_eq!(got.join(" "), want[k].trim(), "{}", path.display());
        n += 1;
    }
    assert!(n > 0);
}

fn split_tests(raw: &[u8]) -> Vec<&[u8]> {
    let sep = b"\n__ggml_vocab_test__\n";
    let mut out = Vec::new();
    let mut rest = raw;
    while !rest.is_empty() {
        match rest.windows(sep.len()).position(|w| w == sep) {
            Some(p) => {
                out.push(&rest[..p]);
                rest = &rest[p + sep.len()..];
            }
            None => {
                out.push(rest);
                break;
            }
        }
    }
    out
}

#[test]
fn stdin_escapes_bos_and_special_tokens() {
    let m = qwen2();
    let o = tokenize(
        &[
            "-m",
            &m,
            "--stdin",
            "--ids",
            "--show-count",
            "--log-disable",
        ],
        Some(b"Hello\\nworld"),
    );
    assert_eq!(out(&o), "[9707, 198, 14615]\nTotal number of tokens: 3\n");
    let o = tokenize(
        &["-m", &m, "--stdin", "--ids", "--no-escape", "--log-disable"],
        Some(b"Hello\\nworld"),
    );
    assert_ne!(out(&o), "[9707, 198, 14615]\n");

    let o = tokenize(
        &["-m", &m, "-p", "<|im_start|>", "--ids", "--log-disable"],
        None,
    );
    assert_eq!(out(&o), "[151644]\n");
    let o = tokenize(
        &[
            "-m",
            &m,
            "-p",
            "<|im_start|>",
            "--ids",
            "--no-parse-special",
            "--log-disable",
        ],
        None,
    );
    assert_ne!(out(&o), "[151644]\n");

    let spm = vocab("ggml-vocab-llama-spm.gguf");
    let spm = spm.to_str().unwrap();
    let with = tokenize(&["-m", spm, "-p", "Hello", "--ids", "--log-disable"], None);
    let without = tokenize(
        &[
            "-m",
            spm,
            "-p",
            "Hello",
            "--ids",
            "--no-bos",
            "--log-disable",
        ],
        None,
    );
    assert!(out(&with).starts_with("[1, "), "{}", out(&with));
    assert!(!out(&without).starts_with("[1, "), "{}", out(&without));

    let o = tokenize(&["-m", spm, "-p", "Hello world"], None);
    assert!(o.status.success());
    assert_eq!(
        out(&o),
        "     1 -> '<s>'\n 15043 -> ' Hello'\n  3186 -> ' world'\n"
    );
}

#[test]
fn errors_are_one_line_and_exit_1() {
    let m = qwen2();
    let o = tokenize(&["-m", &m], None);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("error: must specify one of: --stdin, --file or --prompt"));

    let o = tokenize(&["-m", "/nonexistent/model.gguf", "-p", "hi"], None);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("error: could not load model from file '/nonexistent/model.gguf'."));

    let o = tokenize(&["-m", &m, "--bogus"], None);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("error: invalid argument: --bogus"));

    // A file that is not GGUF at all.
    let dir = test_fixtures::scratch_dir("tokenize-cli-errors");
    let bad = dir.join("bad.gguf");
    std::fs::write(&bad, b"not a model").unwrap();
    let o = tokenize(&["-m", bad.to_str().unwrap(), "-p", "hi"], None);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
}
