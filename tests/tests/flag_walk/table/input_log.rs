//! The prompt, model and logging flags.

use super::*;

pub(super) fn input_and_log_flags(v: &mut Vec<Entry>) {
    use Want::*;
    let c: &[&str] = &["completion"];
    let ppl: &[&str] = &["perplexity", "imatrix"];
    // ----- prompt and model -----
    v.push(e(
        c,
        &["-p", "--prompt"],
        &["from the flag"],
        Has("from the flag"),
        "prompt",
    ));
    v.push(e(
        &["eval-callback"],
        &["-p", "--prompt"],
        &["from the flag"],
        OutDiffers,
        "",
    ));
    v.push(e(
        &["tokenize"],
        &["--prompt"],
        &["from the flag"],
        Has("' flag'"),
        "prompt",
    ));
    v.push(e(
        &["tokenize"],
        &["-p"],
        &[],
        Tested("tests/tests/tokenize_cli.rs"),
        "",
    ));
    v.push(e(
        &["perplexity"],
        &["-p", "--prompt"],
        &[
            "{W}", "-m", "{S}", "-c", "16", "-b", "16", "--chunks", "1", "-fit", "off",
        ],
        Solo("[1]"),
        "",
    ));
    v.push(e(
        &["imatrix"],
        &["-p", "--prompt"],
        &[
            "{W}",
            "-m",
            "{S}",
            "-c",
            "16",
            "-b",
            "16",
            "--chunks",
            "1",
            "-fit",
            "off",
            "-o",
            "{D}/p-{J}.gguf",
        ],
        Solo("[1]"),
        "",
    ));
    v.push(e(
        c,
        &["-f", "--file"],
        &["{D}/prompt.txt"],
        Has("a file"),
        "",
    ));
    v.push(e(
        &["tokenize"],
        &["-f", "--file"],
        &["{D}/prompt.txt"],
        Has("' file'"),
        "",
    ));
    v.push(e(
        &["eval-callback"],
        &["-f", "--file"],
        &["{D}/prompt.txt"],
        OutDiffers,
        "",
    ));
    v.push(e(
        ppl,
        &["-f", "--file"],
        &["{D}/none.txt"],
        Fails("none.txt"),
        "",
    ));
    v.push(e(
        c,
        &["-bf", "--binary-file"],
        &["{D}/prompt.txt"],
        Has("a file"),
        "",
    ));
    v.push(e(
        &["tokenize"],
        &["-bf", "--binary-file"],
        &["{D}/prompt.txt"],
        Has("' file'"),
        "",
    ));
    v.push(e(
        &["eval-callback"],
        &["-bf", "--binary-file"],
        &["{D}/prompt.txt"],
        OutDiffers,
        "",
    ));
    v.push(e(
        &["perplexity"],
        &["-bf", "--binary-file"],
        &[
            "{T}", "-m", "{S}", "-c", "16", "-b", "16", "--chunks", "1", "-fit", "off",
        ],
        Solo("[1]"),
        "",
    ));
    v.push(e(
        &["imatrix"],
        &["-bf", "--binary-file"],
        &[
            "{T}",
            "-m",
            "{S}",
            "-c",
            "16",
            "-b",
            "16",
            "--chunks",
            "1",
            "-fit",
            "off",
            "-o",
            "{D}/bf-{J}.gguf",
        ],
        Solo("[1]"),
        "",
    ));
    v.push(e(
        COMMON,
        &["-e", "--escape", "--no-escape"],
        &[],
        Tested("tests/tests/tokenize_cli.rs"),
        "",
    ));
    v.push(e(
        COMMON,
        &["-m", "--model"],
        &["{D}/none.gguf"],
        Fails("none.gguf"),
        "",
    ));
    v.push(e(
        COMMON,
        &["-mu", "--model-url"],
        &["http://localhost/x.gguf"],
        Fails("model download is not supported in this build"),
        "",
    ));
    v.push(e(
        COMMON,
        &["-dr", "--docker-repo"],
        &["gemma3"],
        Fails("model download is not supported in this build"),
        "",
    ));
    v.push(e(
        COMMON,
        &["-hf", "-hfr", "--hf-repo"],
        &["a/b"],
        Fails("model download is not supported in this build"),
        "",
    ));
    v.push(e(
        COMMON,
        &["-hff", "--hf-file"],
        &["x.gguf"],
        Fails("model download is not supported in this build"),
        "",
    ));
    v.push(e(COMMON, &["-hft", "--hf-token"], &["t"], Warn, "warn"));
    v.push(e(COMMON, &["--offline"], &[], Warn, "warn"));
    v.push(e(
        LOADS,
        &["--perf", "--no-perf"],
        &[],
        Tested("tests/tests/completion_cli.rs"),
        "",
    ));
    v.push(e(
        &["tokenize"],
        &["--perf", "--no-perf"],
        &[],
        Warn,
        "warn",
    ));

    // ----- logging -----
    v.push(quiet(e(
        LOADS,
        &["--log-disable"],
        &[],
        Lacks("llama threadpool init"),
        "",
    )));
    v.push(quiet(e(
        &["tokenize"],
        &["--log-disable"],
        &[],
        Lacks("control-looking token"),
        "",
    )));
    v.push(quiet(e(
        LOADS,
        &["--log-file"],
        &["{D}/log-{J}.txt"],
        File("{D}/log-{J}.txt", "llama threadpool init"),
        "",
    )));
    v.push(quiet(e(
        &["tokenize"],
        &["--log-file"],
        &["{D}/log-{J}.txt"],
        File("{D}/log-{J}.txt", "control-looking token"),
        "",
    )));
    v.push(quiet(e(
        COMMON,
        &["--log-jsonl"],
        &[],
        Has("{\"type\":\"log\""),
        "",
    )));
    v.push(quiet(pre(
        e(
            COMMON,
            &["--no-log-jsonl"],
            &[],
            Lacks("{\"type\":\"log\""),
            "",
        ),
        &["--log-jsonl"],
    )));
    v.push(quiet(e(
        COMMON,
        &["--log-colors"],
        &["on"],
        Has("\x1b["),
        "",
    )));
    v.push(quiet(e(
        COMMON,
        &["-v", "--verbose", "--log-verbose"],
        &[],
        Has("D init_tokenizer"),
        "",
    )));
    v.push(quiet(e(
        LOADS,
        &["-lv", "--verbosity", "--log-verbosity"],
        &["1"],
        Lacks("llama threadpool init"),
        "",
    )));
    v.push(quiet(e(
        &["tokenize"],
        &["-lv", "--verbosity", "--log-verbosity"],
        &["1"],
        Lacks("control-looking token"),
        "",
    )));
    v.push(quiet(e(
        COMMON,
        &[
            "--log-prefix",
            "--no-log-prefix",
            "--log-timestamps",
            "--no-log-timestamps",
        ],
        &[],
        Tested("tests/tests/completion_cli.rs"),
        "",
    )));
}
