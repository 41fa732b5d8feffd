//! The README's main commands on the model scripts/fetch-test-models fetches give the text the
//! README promises (and llama.cpp's llama-completion prints for them).

use std::process::{Command, Stdio};

fn run(args: &[&str]) -> String {
    let bin = test_fixtures::bin("llama-completion", "llama-completion");
    let o = Command::new(bin)
        .args(args)
        .env_remove("LLAMA_ARG_MODEL")
        .stdin(Stdio::null())
        .output()
        .expect("run llama-completion");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn readme_completion_and_chat_answer_paris() {
    let Some(model) = test_fixtures::smollm2_or_skip() else {
        return;
    };
    let m = model.to_str().unwrap();
    let out = run(&[
        "-m",
        m,
        "-p",
        "The capital of France is",
        "-n",
        "4",
        "--temp",
        "0",
        "-no-cnv",
    ]);
    assert!(
        out.starts_with("The capital of France is Paris.\n"),
        "{out:?}"
    );
    let chat = run(&[
        "-m",
        m,
        "-cnv",
        "-st",
        "-p",
        "What is the capital of France?",
        "--temp",
        "0",
    ]);
    assert!(
        chat.contains("What is the capital of France?\nassistant\nThe capital of France is Paris. [end of text]\n"),
        "{chat:?}"
    );
}
