//! Conversation mode on the real Gemma 3 270M: the prompt tokens of two user turns under the
//! ChatML fallback, llama.cpp's built-in gemma template and Google's Jinja template, equal to
//! what llama.cpp's llama-completion --verbose-prompt printed (tests/fixtures/gemma3-chat/).

use std::io::Write;
use std::process::{Command, Stdio};

fn model() -> Option<std::path::PathBuf> {
    let p = test_fixtures::cache_dir().join("gemma-3-270m-q4_k_m.gguf");
    if p.is_file() {
        return Some(p);
    }
    test_fixtures::skip(&format!(
        "{} is missing (run scripts/fetch-test-models --gemma3)",
        p.display()
    ));
    None
}

fn fixtures() -> std::path::PathBuf {
    test_fixtures::repo_root().join("tests/fixtures/gemma3-chat")
}

/// The `--verbose-prompt` token lines of the log, timestamps cut.
fn token_lines(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| {
            (l.contains("->") || l.contains("tokens in prompt")) && !l.contains("sampler chain")
        })
        .map(|l| match l.split_once(' ') {
            Some((t, rest)) if t.chars().all(|c| c.is_ascii_digit() || c == '.') => rest,
            _ => l,
        })
        .map(str::to_string)
        .collect()
}

fn chat(model: &std::path::Path, args: &[&str]) -> std::process::Output {
    let bin = test_fixtures::bin("llama-completion", "llama-completion");
    #[rustfmt::skip]
    let mut child = Command::new(bin)
        .args(["-m", model.to_str().unwrap(), "-cnv", "--verbose-prompt", "-n", "16", "--temp", "0",
            "-c", "512", "-t", "2"])
        .args(args)
        .env_remove("LLAMA_ARG_MODEL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run llama-completion");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"What is 2+2?\nAnd 3+3?\n")
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn prompt_tokens_of_each_template_match_llama_cpp() {
    let Some(model) = model() else {
        return;
    };
    let jinja = fixtures().join("google-gemma-2-2b-it.jinja");
    let jinja = jinja.to_str().unwrap();
    #[rustfmt::skip]
    let cases: [(&str, Vec<&str>, bool); 4] = [
        ("chatml-fallback-sys", vec!["-sys", "You are terse."], true),
        ("builtin-gemma-sys", vec!["--chat-template", "gemma", "-sys", "You are terse."], true),
        ("builtin-gemma", vec!["--chat-template", "gemma"], true),
        ("jinja-gemma", vec!["--jinja", "--chat-template-file", jinja], false),
    ];
    for (name, args, ok) in cases {
        let o = chat(&model, &args);
        let err = test_fixtures::text(&o.stderr);
        let want = std::fs::read_to_string(fixtures().join(format!("{name}.tokens.txt"))).unwrap();
        assert_eq!(
            token_lines(&err),
            want.lines().collect::<Vec<_>>(),
            "{name}"
        );
        if ok {
            assert!(o.status.success(), "{name}: {err}");
        } else {
            // the template's raise_exception on the second turn
            assert_eq!(o.status.code(), Some(1), "{name}: {err}");
            assert!(
                err.contains("Conversation roles must alternate user/assistant/user/assistant/..."),
                "{name}: {err}"
            );
        }
    }
}
