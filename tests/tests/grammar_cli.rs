//! Constrained sampling end to end on the real SmolLM2-135M-Instruct (issue 15 item 2):
//! llama.cpp's grammars/json.gbnf makes the output JSON, `-j` makes it an object matching the
//! schema, and an invalid grammar fails with llama.cpp's messages and a clean exit status.

use std::path::PathBuf;
use std::process::{Command, Output};

fn grammar_file(name: &str) -> PathBuf {
    test_fixtures::repo_root()
        .join("tests/fixtures/grammars")
        .join(name)
}

fn completion(args: &[&str]) -> Output {
    let bin = test_fixtures::bin("llama-completion", "llama-completion");
    Command::new(bin)
        .args(args)
        .env_remove("LLAMA_ARG_MODEL")
        .output()
        .expect("run llama-completion")
}

/// The model's own chat layout, written into the prompt so the run needs no conversation mode.
fn chatml(question: &str) -> String {
    format!("<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n")
}

/// Greedy generation for `question` with the extra (grammar) flags; returns the generated text
/// after the echoed prompt, which must have ended at EOG (" [end of text]"), not at -n.
fn generate(model: &str, question: &str, extra: &[&str]) -> String {
    let prompt = chatml(question);
    let mut args = vec![
        "-m", model, "-p", &prompt, "-n", "160", "-no-cnv", "--temp", "0",
    ];
    args.extend_from_slice(extra);
    let o = completion(&args);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{question}: {:?}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let start = stdout
        .rfind("assistant\n")
        .map(|i| i + "assistant\n".len())
        .unwrap_or_else(|| panic!("{question}: prompt not echoed:\n{stdout}"));
    let generated = stdout[start..].trim_end();
    let Some(body) = generated.strip_suffix("[end of text]") else {
        panic!("{question}: generation did not end at EOG within -n:\n{generated}");
    };
    body.to_string()
}

#[test]
fn json_gbnf_makes_the_output_json_on_five_prompts() {
    let Some(model) = test_fixtures::smollm2_or_skip() else {
        return;
    };
    let model = model.to_str().unwrap();
    let g = grammar_file("json.gbnf");
    let g = g.to_str().unwrap();
    for q in [
        "Give the name and age of a person as JSON.",
        "Return a JSON object with a city and its country.",
        "Write a JSON object for a book with title and author.",
        "Give a JSON object with a fruit and its color.",
        "Give a JSON object with the x and y of a point.",
    ] {
        let body = generate(model, q, &["--grammar-file", g]);
        let v: serde_json::Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{q}: output is not JSON ({e}):\n{body}"));
        assert!(v.is_object(), "{q}: json.gbnf's root is an object: {body}");
    }
}

#[test]
fn json_schema_output_validates() {
    let Some(model) = test_fixtures::smollm2_or_skip() else {
        return;
    };
    let model = model.to_str().unwrap();
    let schema =
        r#"{"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"]}"#;
    let dir = test_fixtures::scratch_dir("grammar-cli");
    let schema_file = dir.join("answer.schema.json");
    std::fs::write(&schema_file, schema).unwrap();
    let schema_file = schema_file.to_str().unwrap();
    for (q, flag, value) in [
        ("What is 2+3? Answer in JSON.", "-j", schema),
        (
            "How many legs does a dog have? Answer in JSON.",
            "-jf",
            schema_file,
        ),
    ] {
        let body = generate(model, q, &[flag, value]);
        let v: serde_json::Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{q}: output is not JSON ({e}):\n{body}"));
        let obj = v
            .as_object()
            .unwrap_or_else(|| panic!("{q}: not an object: {body}"));
        assert!(
            obj.get("answer").is_some_and(|a| a.is_i64() || a.is_u64()),
            "{q}: no integer \"answer\": {body}"
        );
        // the schema has no other properties and does not allow additional ones
        assert_eq!(obj.len(), 1, "{q}: {body}");
    }
}

#[test]
fn an_invalid_grammar_fails_with_llama_cpp_messages() {
    let Some(model) = test_fixtures::smollm2_or_skip() else {
        return;
    };
    let model = model.to_str().unwrap();
    let o = completion(&[
        "-m",
        model,
        "-p",
        "hi",
        "-n",
        "4",
        "-no-cnv",
        "--grammar",
        "root ::= (\"a\"",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("parse: error parsing grammar: expecting ')' at \n\nroot ::= (\"a\"\n"),
        "{err}"
    );
    assert!(
        err.contains("llama_completion: error: failed to parse grammar"),
        "{err}"
    );

    let o = completion(&[
        "-m",
        model,
        "-p",
        "hi",
        "-n",
        "4",
        "-no-cnv",
        "--grammar",
        "root ::= \"a\" | root \"b\"",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("unsupported grammar, left recursion detected for nonterminal at index 0"),
        "{err}"
    );

    let o = completion(&[
        "-m",
        model,
        "-p",
        "hi",
        "-n",
        "4",
        "-no-cnv",
        "-j",
        "{\"type\": 3}",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("error while handling argument \"-j\": JSON schema conversion failed:\nJSON schema error at #: type must be a string or an array of strings"),
        "{err}"
    );
}

#[test]
fn a_grammar_without_root_fails() {
    let Some(model) = test_fixtures::smollm2_or_skip() else {
        return;
    };
    let model = model.to_str().unwrap();
    let o = completion(&[
        "-m",
        model,
        "-p",
        "hi",
        "-n",
        "4",
        "-no-cnv",
        "--grammar",
        "start ::= \"a\"",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("grammar does not contain a 'root' symbol"),
        "{err}"
    );
}
