//! `--override-kv` end to end: the loader's getters read the overrides (the model's
//! hyperparameters, name and tokenizer flags change), log validate_override's lines exactly
//! as llama.cpp's llama-completion does on the same model, and bad overrides are rejected.

use std::path::Path;
use std::process::{Command, Output};

fn completion(args: &[&str]) -> Output {
    let bin = test_fixtures::bin("llama-completion", "llama-completion");
    Command::new(bin)
        .args(args)
        .env_remove("LLAMA_ARG_MODEL")
        .output()
        .expect("run llama-completion")
}

/// stderr without common_log's `0.00.123.456 I ` prefixes (also those inside a line, where
/// a message was logged in two parts).
fn unprefixed(o: &Output) -> Vec<String> {
    let text = String::from_utf8_lossy(&o.stderr);
    text.lines()
        .map(|l| {
            let mut out = String::new();
            let mut rest = l;
            while let Some(pos) = find_stamp(rest) {
                out.push_str(&rest[..pos]);
                rest = &rest[pos + 15..];
            }
            out.push_str(rest);
            out
        })
        .collect()
}

/// Byte offset of the first `D.DD.DDD.DDD X ` stamp in `s`.
fn find_stamp(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let pat = b"0.00.000.000 I ";
    (0..b.len().saturating_sub(pat.len() - 1)).find(|&i| {
        pat.iter().enumerate().all(|(j, &p)| {
            let c = b[i + j];
            match p {
                b'0' => c.is_ascii_digit(),
                b'I' => matches!(c, b'I' | b'W' | b'E' | b'D'),
                _ => c == p,
            }
        })
    })
}

fn run(model: &Path, overrides: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "-m",
        model.to_str().unwrap(),
        "-v",
        "-p",
        "hi",
        "-n",
        "1",
        "-no-cnv",
        "-fit",
        "off",
        "-s",
        "1",
        "--override-kv",
        overrides,
    ];
    args.extend_from_slice(extra);
    completion(&args)
}

const OVERRIDES: &str = "llama.context_length=int:64,general.name=str:hello,\
tokenizer.ggml.add_bos_token=bool:false,llama.block_count=float:2,general.file_type=int:1,\
llama.rope.freq_base=float:10000.5,llama.context_length=int:99";

/// The lines llama.cpp's llama-completion (pinned build) logged for OVERRIDES on the reference
/// model, filtered as below.
const LLAMACPP: &str = include_str!("../fixtures/kv-override/llamacpp-completion-v.txt");

#[test]
fn overrides_log_and_apply_as_llama_cpp() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let o = run(&model, OVERRIDES, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let keep = [
        "override",
        "n_ctx_train",
        "freq_base_train",
        "print_info: file type",
        "general.name  ",
        "add_bos",
    ];
    let ours: Vec<String> = unprefixed(&o)
        .into_iter()
        .filter(|l| keep.iter().any(|k| l.contains(k)))
        .collect();
    let want: Vec<&str> = LLAMACPP.lines().collect();
    assert_eq!(ours, want);
}

#[test]
fn without_overrides_the_file_values_stand() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    // an override of a key nothing reads is inert, as in llama.cpp
    let o = run(&model, "no.such.key=int:5", &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines = unprefixed(&o);
    assert!(lines
        .iter()
        .any(|l| l == "print_info: n_ctx_train           = 4096"));
    // the file has no add_bos_token: the gpt2 tokenizer's default (no BOS)
    assert!(lines.iter().any(|l| l == "n_ctx: 4096, add_bos: 0"));
    assert!(!lines.iter().any(|l| l.contains("validate_override")));
}

#[test]
fn quoted_field_keeps_its_comma() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let o = run(
        &model,
        "\"general.name=str:a,b\",llama.context_length=int:128,tokenizer.ggml.add_bos_token=bool:true",
        &["-c", "0"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines = unprefixed(&o);
    assert!(lines
        .iter()
        .any(|l| l == "print_info: general.name          = a,b"));
    assert!(lines
        .iter()
        .any(|l| l == "print_info: n_ctx_train           = 128"));
    // -c 0 takes the (overridden) training context, raised to libllama's minimum of 256,
    // which it then warns about; the prompt gets a BOS now
    assert!(lines.iter().any(|l| l
        == "llama_context: n_ctx_seq (256) > n_ctx_train (128) -- possible training context overflow"));
    assert!(lines.iter().any(|l| l == "n_ctx: 256, add_bos: 1"));
}

#[test]
fn bad_overrides_are_rejected_with_llama_cpp_messages() {
    for (arg, why) in [
        ("a=i:1", "invalid type for KV override 'a=i:1'"),
        ("noequals", "malformed KV override 'noequals'"),
        (
            "b=bool:yes",
            "invalid boolean value for KV override 'b=bool:yes'",
        ),
    ] {
        let o = completion(&["-m", "unused.gguf", "--override-kv", arg]);
        assert_eq!(o.status.code(), Some(1), "{arg}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!(
                "error while handling argument \"--override-kv\": error: Invalid type for KV override: {arg}"
            )),
            "{arg}: {err}"
        );
        assert!(
            err.contains(&format!("string_parse_kv_override: {why}")),
            "{err}"
        );
    }
    let long = format!("k=str:{}", "x".repeat(128));
    let o = completion(&["-m", "unused.gguf", "--override-kv", &long]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("value cannot exceed 127 chars"));
}
