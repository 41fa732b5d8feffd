//! Flags that llama.cpp's common parser lists for a tool which has no use for them (every tool
//! gets the shared and sampling options): given on the command line, the tool says so instead
//! of ignoring them silently (issue 15).

use super::{Example, Opt};

/// What llama-tokenize reads: the vocabulary and the prompt, nothing of a context.
const TOKENIZE_USES: &[&str] = &[
    "-h",
    "--version",
    "-cl",
    "--completion-bash",
    "--list-devices",
    "-p",
    "-f",
    "-e",
    "-m",
    "-mu",
    "-dr",
    "-hf",
    "-hff",
    "--override-kv",
    "--log-disable",
    "--log-file",
    "--log-jsonl",
    "--log-colors",
    "-v",
    "-lv",
    "--log-prefix",
    "--log-timestamps",
    "--ids",
    "--stdin",
    "--no-bos",
    "--no-parse-special",
    "--show-count",
    "--rpc",
];

/// Options of the shared table that the model-loading tools other than llama-completion
/// read nowhere.
const NOT_GENERATING: &[&str] = &["-n", "--keep", "--spec-draft-type-k", "--spec-draft-type-v"];

/// Why `ex` ignores `o`, if it does.
fn reason(ex: Example, o: &Opt) -> Option<&'static str> {
    let first = o.args.first().copied().unwrap_or("");
    if ex == Example::Tokenize && first == "--override-kv" {
        return Some("this build reads the vocabulary without metadata overrides");
    }
    if ex == Example::Tokenize && !TOKENIZE_USES.contains(&first) {
        return Some("it reads only the vocabulary and the prompt");
    }
    match first {
        "-hft" => return Some("model download is not supported in this build"),
        "--offline" => return Some("this build never uses the network"),
        "-lzm" => return Some("this build keeps every tensor resident"),
        "--no-host" => return Some("this build cannot bypass a device's host buffer"),
        _ => {}
    }
    if ex == Example::Completion {
        return match first {
            "--spec-draft-type-k" | "--spec-draft-type-v" => {
                Some("it has no speculative decoding (as in llama.cpp)")
            }
            "-bs" => Some("this build samples on the CPU, outside the graph"),
            _ => None,
        };
    }
    if o.sparam {
        return Some("it does not sample");
    }
    if NOT_GENERATING.contains(&first) {
        return Some("it does not generate");
    }
    match (ex, first) {
        (Example::Perplexity | Example::Imatrix, "--context-shift") => {
            Some("it evaluates fixed chunks")
        }
        _ => None,
    }
}

/// The tool's name in the warning.
fn tool_name(ex: Example) -> &'static str {
    match ex {
        Example::Common => "llama-eval-callback",
        Example::Completion => "llama-completion",
        Example::Perplexity => "llama-perplexity",
        Example::Tokenize => "llama-tokenize",
        Example::Imatrix => "llama-imatrix",
    }
}

/// The warning for `arg` (as typed), if `ex` has no use for its option.
pub(super) fn warning(ex: Example, o: &Opt, arg: &str) -> Option<String> {
    reason(ex, o).map(|why| {
        format!(
            "warning: {arg} has no effect in {} ({why})\n",
            tool_name(ex)
        )
    })
}
