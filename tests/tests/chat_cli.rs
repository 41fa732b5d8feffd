//! llama-completion's conversation mode formats each turn with the model's chat template as
//! llama.cpp does: SmolLM2-135M-Instruct's ChatML through the built-in layout, its own Jinja
//! template with --jinja (which adds SmolLM's default system turn), a --chat-template name
//! overriding the model's, and an unknown name refused at parse time.
//!
//! The expected prompts are what llama.cpp's common_chat_format_single gives for the same
//! messages (common/chat.cpp with llama-chat.cpp's chatml/llama3 layouts, and the model's
//! template), tokenized by llama-tokenize (verified against llama.cpp's vocab vectors); the
//! test compares them with the token ids `--verbose-prompt` prints.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn completion(args: &[&str], stdin: &str) -> Output {
    let bin = test_fixtures::bin("llama-completion", "llama-completion");
    let mut child = Command::new(bin)
        .args(args)
        .env_remove("LLAMA_ARG_MODEL")
        .env_remove("LLAMA_ARG_CHAT_TEMPLATE")
        .env_remove("LLAMA_ARG_JINJA")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run llama-completion");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().expect("wait llama-completion")
}

/// Token ids of `text` by llama-tokenize (`add_special` as llama-completion tokenizes a
/// whole prompt; off for a turn typed in conversation mode).
fn tokenize(model: &str, prompt: &str, add_special: bool) -> Vec<i32> {
    let bin = test_fixtures::bin("llama-tokenize", "llama-tokenize");
    let mut args = vec!["-m", model, "-p", prompt, "--ids", "--log-disable"];
    if !add_special {
        args.push("--no-bos");
    }
    let o = Command::new(bin)
        .args(&args)
        .output()
        .expect("run llama-tokenize");
    assert!(o.status.success(), "llama-tokenize: {}", text_of(&o));
    let out = text(&o.stdout);
    let list = out.trim().trim_start_matches('[').trim_end_matches(']');
    list.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().expect("token id"))
        .collect()
}

fn text_of(o: &Output) -> String {
    format!("{}{}", text(&o.stdout), text(&o.stderr))
}

/// The token ids of each `number of tokens in prompt = N` block `--verbose-prompt` printed:
/// the first is the initial prompt, then one per user turn.
fn verbose_prompt_blocks(stderr: &str) -> Vec<Vec<i32>> {
    let mut blocks = Vec::new();
    for part in stderr.split("number of tokens in prompt = ").skip(1) {
        let n: usize = part
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|d| d.parse().ok())
            .expect("token count");
        let mut ids = Vec::new();
        let mut rest = part;
        while ids.len() < n {
            let at = rest.find(" -> '").expect("a token line");
            let digits: String = rest[..at]
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_digit())
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            ids.push(digits.parse().expect("token id"));
            rest = &rest[at + 5..];
        }
        blocks.push(ids);
    }
    blocks
}

/// One conversation turn "Hi there" piped in, one token generated; the printed blocks.
fn chat_run(model: &str, extra: &[&str]) -> Vec<Vec<i32>> {
    let mut args = vec![
        "-m",
        model,
        "-cnv",
        "--verbose-prompt",
        "-n",
        "1",
        "-c",
        "256",
        "--temp",
        "0",
        "--no-warmup",
    ];
    args.extend_from_slice(extra);
    let o = completion(&args, "Hi there\n");
    assert!(
        o.status.success(),
        "{extra:?} ({:?}):\n{}",
        o.status,
        text_of(&o)
    );
    assert!(
        text(&o.stdout).contains("\n> EOF by user\n"),
        "{}",
        text_of(&o)
    );
    verbose_prompt_blocks(&text(&o.stderr))
}

const SMOLLM_DEFAULT_SYSTEM: &str =
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n";

#[test]
fn smollm2_builtin_chatml_turns_match_llama_cpp() {
    let Some(m) = test_fixtures::smollm2_or_skip() else {
        return;
    };
    let m = m.to_str().unwrap();
    // -sys: the system turn is the initial prompt; the user turn keeps the newline the
    // formatted past ends in (common_chat_format_single)
    let blocks = chat_run(m, &["-sys", "Be brief."]);
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    assert_eq!(
        blocks[0],
        tokenize(m, "<|im_start|>system\nBe brief.<|im_end|>\n", true)
    );
    let user = "\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n";
    assert_eq!(blocks[1], tokenize(m, user, false));
    assert_eq!(
        blocks[1][..2],
        [198, 1],
        "newline, then <|im_start|> as one special token"
    );
}

#[test]
fn smollm2_jinja_renders_the_models_own_template() {
    let Some(m) = test_fixtures::smollm2_or_skip() else {
        return;
    };
    let m = m.to_str().unwrap();
    // SmolLM2's template opens with its default system turn when the chat has none; the
    // built-in ChatML layout does not
    let blocks = chat_run(m, &["--jinja"]);
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    assert!(blocks[0].is_empty());
    let want = format!(
        "{SMOLLM_DEFAULT_SYSTEM}<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
    );
    assert_eq!(blocks[1], tokenize(m, &want, false));
    let builtin = chat_run(m, &[]);
    assert_eq!(
        builtin[1],
        tokenize(
            m,
            "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
            false
        )
    );
}

#[test]
fn chat_template_name_overrides_the_models() {
    let Some(m) = test_fixtures::smollm2_or_skip() else {
        return;
    };
    let m = m.to_str().unwrap();
    let blocks = chat_run(m, &["--chat-template", "llama3"]);
    let want = "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
    assert_eq!(blocks[1], tokenize(m, want, false));
}

#[test]
fn unknown_chat_template_is_refused() {
    // checked while parsing, before any model is opened (common_params_parse_ex)
    let o = completion(&["-m", "no-such.gguf", "--chat-template", "llama-9000"], "");
    assert_eq!(o.status.code(), Some(1), "{}", text_of(&o));
    assert!(text(&o.stderr).contains(
        "error: the supplied chat template is not supported: llama-9000\nnote: llama.cpp was started without --jinja, we only support commonly used templates\n"
    ), "{}", text_of(&o));
    // with --jinja any template that renders is accepted, one that does not is refused
    let o = completion(
        &[
            "-m",
            "no-such.gguf",
            "--jinja",
            "--chat-template",
            "{% if %}",
        ],
        "",
    );
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.contains("common_chat_verify_template: failed to apply template:"),
        "{err}"
    );
    assert!(
        err.contains("error: the supplied chat template is not supported: {% if %}\n"),
        "{err}"
    );
    assert!(
        !err.contains("note: llama.cpp was started without --jinja"),
        "{err}"
    );
}

#[test]
fn chat_template_file_is_read_and_checked() {
    let dir = test_fixtures::scratch_dir("chat-cli-template-file");
    let f = dir.join("t.jinja");
    std::fs::write(&f, "{{ nothing a built-in layout knows }}").unwrap();
    let o = completion(
        &[
            "-m",
            "no-such.gguf",
            "--chat-template-file",
            f.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("error: the supplied chat template is not supported: {{ nothing a built-in layout knows }}"), "{}", text_of(&o));
}

#[test]
fn help_lists_the_builtin_templates() {
    let o = completion(&["-h"], "");
    assert!(o.status.success());
    // the help wraps long lines: compare with the whitespace flattened
    let out = text(&o.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        out.contains("list of built-in templates: bailing,"),
        "{out}"
    );
    assert!(out.contains("bailing, bailing-think, bailing2, chatglm3, chatglm4, chatml, command-r, deepseek, deepseek-ocr, deepseek2, deepseek3,"), "{out}");
    assert!(
        out.contains("seed_oss, smolvlm, solar-open, vicuna, vicuna-orca, yandex, zephyr"),
        "{out}"
    );
}

#[test]
fn flags_llama_completion_does_not_act_on_are_said_not_ignored() {
    let Some(m) = test_fixtures::smollm2_or_skip() else {
        return;
    };
    let m = m.to_str().unwrap();
    #[rustfmt::skip]
    let o = completion(&["-m", m, "-cnv", "-sys", "Be brief.", "--jinja", "--skip-chat-parsing",
        "-n", "1", "-c", "64", "--no-warmup", "--reasoning-budget", "10", "--reasoning-format", "none"], "");
    assert!(o.status.success(), "{}", text_of(&o));
    let err = text(&o.stderr);
    assert!(
        err.contains("warning: --reasoning-budget has no effect in llama-completion"),
        "{err}"
    );
    assert!(
        err.contains("warning: --reasoning-format has no effect in llama-completion"),
        "{err}"
    );
    // llama.cpp's own warning when the initial prompt is applied with --skip-chat-parsing
    assert!(
        err.contains(
            "Forcing pure content template, will not render reasoning or tools separately."
        ),
        "{err}"
    );
    assert!(text(&o.stdout).contains("EOF by user"), "{}", text_of(&o));
}

/// With stdin piped and no terminal, llama.cpp's console (readline_advanced, without
/// `--simple-io`) writes each character it reads to stdout, so the typed turn is part of the
/// output: `printf 'hi\n' | llama-completion -m SmolLM2 -cnv -n 8 --temp 0` prints the 23 bytes
/// "\n> " "hi\n" "\n> " "EOF by user\n" "\n\n" (llama.cpp's log thread may put the echo
/// first). `--simple-io` reads with getline and echoes nothing.
#[test]
fn piped_input_is_echoed_as_llama_cpp_s_console_does() {
    let Some(m) = test_fixtures::smollm2_or_skip() else {
        return;
    };
    let m = m.to_str().unwrap();
    let args = [
        "-m",
        m,
        "-cnv",
        "-n",
        "8",
        "--temp",
        "0",
        "-c",
        "256",
        "--no-warmup",
    ];
    let o = completion(&args, "hi\n");
    assert!(o.status.success(), "{}", text_of(&o));
    assert_eq!(text(&o.stdout), "\n> hi\n\n> EOF by user\n\n\n");
    let mut simple = args.to_vec();
    simple.push("--simple-io");
    let o = completion(&simple, "hi\n");
    assert!(o.status.success(), "{}", text_of(&o));
    assert_eq!(text(&o.stdout), "\n> \n> EOF by user\n\n\n");
}
