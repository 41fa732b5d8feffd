//! The flag walk's table: for each tool, each flag its `--help` lists (all spellings) and how
//! its effect is seen. Entries of one group run together (one run per spelling index), so
//! their checks must not disturb each other.

use std::path::Path;

pub enum Want {
    /// the output (stdout and stderr) holds this and the run without the flag does not
    Has(&'static str),
    /// the run without the flag holds this and the run with it does not
    Lacks(&'static str),
    /// run alone (no base arguments): exit 0 and this in the output
    Solo(&'static str),
    /// exit 1 with this in the output
    Fails(&'static str),
    /// the run writes this file (`{X}` is the tool), holding this text
    File(&'static str, &'static str),
    /// stdout differs from that of the run without the flag
    OutDiffers,
    /// the GGUF file the run writes (`-o`) holds this key line, as llama-gguf-inspect prints it
    Gguf(&'static str),
    /// the tool's "warning: FLAG has no effect in TOOL" line
    Warn,
    /// a row of docs/flags.md's deliberate no-ops
    NoOp,
    /// its effect needs more than one short run (a device, a second turn, a filled context)
    /// and this test file asserts it; the file must name one of the flag's spellings
    Tested(&'static str),
    /// its effect is real but no run of this walk shows it yet: a row of docs/flags.md's
    /// "Not walked yet" table
    Unwalked,
}

pub struct Entry {
    pub tools: Vec<&'static str>,
    pub names: &'static [&'static str],
    /// arguments before the flag: the run without the flag then has these (a flag that sets
    /// the default shows its effect against its opposite)
    pub pre: &'static [&'static str],
    pub args: &'static [&'static str],
    pub want: Want,
    pub group: &'static str,
    /// run with the tool's quiet base (no -v)
    pub quiet: bool,
    /// what the run reads on stdin (its entry then runs alone, with a pre-run)
    pub stdin: &'static str,
}

/// The common-parser tools that load a model and make a context.
const LOADS: &[&str] = &["completion", "perplexity", "eval-callback", "imatrix"];
/// Those that never sample.
const NO_SAMPLING: &[&str] = &["perplexity", "eval-callback", "imatrix", "tokenize"];
const COMMON: &[&str] = &[
    "completion",
    "perplexity",
    "eval-callback",
    "imatrix",
    "tokenize",
];

fn e(
    tools: &[&'static str],
    names: &'static [&'static str],
    args: &'static [&'static str],
    want: Want,
    group: &'static str,
) -> Entry {
    Entry {
        tools: tools.to_vec(),
        names,
        pre: &[],
        args,
        want,
        group,
        quiet: false,
        stdin: "",
    }
}

fn quiet(mut x: Entry) -> Entry {
    x.quiet = true;
    x
}

fn pre(mut x: Entry, p: &'static [&'static str]) -> Entry {
    x.pre = p;
    x.group = "";
    x
}

/// The files the entries use: `{M}` the reference model, `{S}` a small model, `{T}` a text,
/// `{D}` the scratch directory.
pub fn prepare(dir: &Path, model: &Path) -> Vec<(&'static str, String)> {
    let small = dir.join("small.gguf");
    let st = std::process::Command::new(test_fixtures::bin("llama-gguf-new", "llama-gguf-new"))
        .args(["-o"])
        .arg(&small)
        .args([
            "--arch",
            "llama",
            "--layers",
            "1",
            "--embd",
            "64",
            "--heads",
            "2",
            "--ff",
            "64",
            "--vocab-size",
            "300",
            "--quiet",
        ])
        .status()
        .expect("run llama-gguf-new");
    assert!(st.success());
    let words = [
        "the", "of", "and", "to", "in", "is", "was", "for", "on", "with", "as", "by",
    ];
    let text: Vec<&str> = (0..600)
        .map(|i| words[(i * 7 + i / 3) % words.len()])
        .collect();
    std::fs::write(dir.join("text.txt"), text.join(" ")).unwrap();
    std::fs::write(dir.join("prompt.txt"), "from a file").unwrap();
    std::fs::write(dir.join("grammar.gbnf"), "root ::= \"yes\"\n").unwrap();
    std::fs::write(dir.join("schema.json"), r#"{"type":"integer"}"#).unwrap();
    std::fs::write(
        dir.join("template.jinja"),
        "{% for m in messages %}<<{{ m.content }}>>{% endfor %}",
    )
    .unwrap();
    std::fs::write(dir.join("sys.txt"), "be brief").unwrap();
    std::fs::write(
        dir.join("reason.jinja"),
        "{% for m in messages %}<<{{ m.content }}>>{% endfor %}[{{ preserve_reasoning }}]",
    )
    .unwrap();
    std::fs::write(dir.join("types.txt"), "attn_q=q4_0\n").unwrap();
    let q8 = dir.join("small-q8_0.gguf");
    let st = std::process::Command::new(test_fixtures::bin("llama-quantize", "llama-quantize"))
        .arg(&small)
        .arg(&q8)
        .arg("q8_0")
        .output()
        .expect("run llama-quantize");
    assert!(st.status.success());
    vec![
        ("{M}", model.display().to_string()),
        ("{S}", small.display().to_string()),
        ("{Q}", q8.display().to_string()),
        ("{W}", text.join(" ")),
        ("{T}", dir.join("text.txt").display().to_string()),
        ("{D}", dir.display().to_string()),
    ]
}

/// Each tool's usual arguments: (before the flags, after them).
pub fn base(tool: &str) -> (&'static [&'static str], &'static [&'static str]) {
    match tool {
        "completion" => (
            &[
                "-m",
                "{S}",
                "-p",
                "hello world",
                "-n",
                "2",
                "--temp",
                "0",
                "-no-cnv",
                "-fit",
                "off",
                "-c",
                "64",
                "-s",
                "1",
            ],
            &[],
        ),
        "perplexity" => (
            &[
                "-m", "{S}", "-f", "{T}", "-c", "16", "-b", "16", "-fit", "off", "--chunks", "1",
            ],
            &[],
        ),
        "imatrix" => (
            &[
                "-m",
                "{S}",
                "-f",
                "{T}",
                "-c",
                "16",
                "-b",
                "16",
                "-fit",
                "off",
                "--chunks",
                "1",
                "-o",
                "{D}/imatrix-{J}.gguf",
            ],
            &[],
        ),
        "eval-callback" => (&["-m", "{S}", "-p", "hi", "-fit", "off", "-c", "64"], &[]),
        "tokenize" => (&["-m", "{M}", "-p", "hello world"], &[]),
        "bench" => (&["-m", "{S}", "-p", "8", "-n", "2", "-r", "1"], &[]),
        "quantize" => (&[], &["{S}", "{D}/q.gguf", "q8_0"]),
        "gguf-split" => (&[], &["{S}", "{D}/split"]),
        "gguf-inspect" => (&[], &["{S}"]),
        "gguf-new" => (
            &[
                "-o",
                "{D}/new-{J}.gguf",
                "--layers",
                "1",
                "--embd",
                "64",
                "--heads",
                "2",
                "--ff",
                "64",
                "--vocab-size",
                "300",
            ],
            &[],
        ),
        "list-devices" => (&[], &[]),
        _ => panic!("no base for {tool}"),
    }
}

/// The flag that makes a tool log everything, if it has one.
pub fn verbose_flag(tool: &str) -> Option<&'static str> {
    match tool {
        "completion" | "perplexity" | "imatrix" | "eval-callback" | "tokenize" => Some("-v"),
        _ => None,
    }
}

/// A flag of the loading tools seen in their log, and the warning llama-tokenize gives it
/// (a flag that fails while parsing fails there too).
fn ctx(
    v: &mut Vec<Entry>,
    names: &'static [&'static str],
    args: &'static [&'static str],
    want: Want,
    group: &'static str,
) {
    let tok = match want {
        Want::Fails("failed to find RPC backend") => Want::Fails("failed to find RPC backend"),
        _ => Want::Warn,
    };
    v.push(e(LOADS, names, args, want, group));
    v.push(e(&["tokenize"], names, args, tok, "warn"));
}

/// A sampling flag: seen in llama-completion's sampler lines; the other tools say they do
/// not sample.
fn samp(
    v: &mut Vec<Entry>,
    names: &'static [&'static str],
    args: &'static [&'static str],
    has: &'static str,
    group: &'static str,
) {
    v.push(e(&["completion"], names, args, Want::Has(has), group));
    v.push(e(NO_SAMPLING, names, args, Want::Warn, "warn"));
}

pub fn entries() -> &'static [Entry] {
    use Want::*;
    let mut v: Vec<Entry> = Vec::new();
    let c: &[&str] = &["completion"];
    let ppl: &[&str] = &["perplexity", "imatrix"];
    let yarn: &'static [&'static str] = &["--rope-scaling", "yarn", "--rope-scale", "4", "-n", "8"];

    // ----- help, version and the like: every common-parser tool -----
    v.push(e(
        COMMON,
        &["-h", "--help", "--usage"],
        &[],
        Solo("-h,    --help, --usage"),
        "",
    ));
    v.push(e(COMMON, &["--version"], &[], Solo("version: "), ""));
    v.push(e(
        COMMON,
        &["-cl", "--cache-list"],
        &[],
        Solo("number of models in cache: 0"),
        "",
    ));
    v.push(e(
        COMMON,
        &["--completion-bash"],
        &[],
        Solo("complete -F _llama_completions"),
        "",
    ));
    v.push(e(
        COMMON,
        &["--list-devices"],
        &[],
        Solo("Available devices:"),
        "",
    ));

    // ----- threads -----
    ctx(
        &mut v,
        &["-t", "--threads"],
        &["1"],
        Has("system_info: n_threads = 1 ("),
        "ctx",
    );
    ctx(
        &mut v,
        &["-tb", "--threads-batch"],
        &["1"],
        Has("(n_threads_batch = 1)"),
        "ctx",
    );
    ctx(
        &mut v,
        &["-C", "--cpu-mask"],
        &["0x1"],
        Has("cpumask = 0x1"),
        "pool",
    );
    ctx(
        &mut v,
        &["--cpu-strict"],
        &["1"],
        Has("strict_cpu = 1"),
        "pool",
    );
    ctx(&mut v, &["--prio"], &["-1"], Has("prio = -1"), "pool");
    ctx(&mut v, &["--poll"], &["0"], Has("poll = 0"), "pool");
    ctx(
        &mut v,
        &["-Cr", "--cpu-range"],
        &["0-0"],
        Has("cpumask = 0x1"),
        "pool2",
    );
    ctx(
        &mut v,
        &["-Cb", "--cpu-mask-batch"],
        &["0x1", "-tb", "1"],
        Has("cpumask = 0x1"),
        "bpool",
    );
    ctx(
        &mut v,
        &["--cpu-strict-batch"],
        &["1"],
        Has("strict_cpu = 1"),
        "bpool",
    );
    ctx(&mut v, &["--prio-batch"], &["1"], Has("prio = 1"), "bpool");
    ctx(&mut v, &["--poll-batch"], &["0"], Has("poll = 0"), "bpool");
    ctx(
        &mut v,
        &["-Crb", "--cpu-range-batch"],
        &["0-0", "-tb", "1"],
        Has("cpumask = 0x1"),
        "bpool2",
    );
    ctx(
        &mut v,
        &["--numa"],
        &["isolate"],
        Has("--numa isolate: "),
        "ctx",
    );

    // ----- context -----
    v.push(e(
        &["completion", "eval-callback"],
        &["-c", "--ctx-size"],
        &["512"],
        Has("llama_context: n_ctx                 = 512"),
        "ctx",
    ));
    v.push(e(
        ppl,
        &["-c", "--ctx-size"],
        &["32"],
        Has("n_ctx=32"),
        "c32",
    ));
    v.push(e(
        &["tokenize"],
        &["-c", "--ctx-size"],
        &["512"],
        Warn,
        "warn",
    ));
    v.push(e(
        c,
        &["-n", "--predict", "--n-predict"],
        &["1"],
        Has("n_predict = 1,"),
        "ctx",
    ));
    v.push(e(
        NO_SAMPLING,
        &["-n", "--predict", "--n-predict"],
        &["1"],
        Warn,
        "warn",
    ));
    v.push(e(
        &["completion", "eval-callback"],
        &["-b", "--batch-size"],
        &["16"],
        Has("llama_context: n_batch               = 16"),
        "ctx",
    ));
    v.push(e(
        ppl,
        &["-b", "--batch-size"],
        &["8"],
        Has("llama_context: n_batch               = 8"),
        "ctx",
    ));
    v.push(e(
        &["tokenize"],
        &["-b", "--batch-size"],
        &["16"],
        Warn,
        "warn",
    ));
    ctx(
        &mut v,
        &["-ub", "--ubatch-size"],
        &["8"],
        Has("llama_context: n_ubatch              = 8"),
        "ctx",
    );
    v.push(e(c, &["--keep"], &["1"], Has("n_keep = 1"), "ctx"));
    v.push(e(NO_SAMPLING, &["--keep"], &["1"], Warn, "warn"));
    ctx(
        &mut v,
        &["--swa-full"],
        &[],
        Tested("tests/tests/gemma3_cli.rs"),
        "",
    );
    ctx(
        &mut v,
        &["-fa", "--flash-attn"],
        &["off"],
        Has("llama_context: flash_attn            = disabled"),
        "ctx",
    );
    ctx(
        &mut v,
        &["-ctk", "--cache-type-k"],
        &["f32"],
        Has("K (f32)"),
        "ctx",
    );
    ctx(
        &mut v,
        &["-ctv", "--cache-type-v"],
        &["f32"],
        Has("V (f32)"),
        "ctx",
    );
    ctx(
        &mut v,
        &["-dt", "--defrag-thold"],
        &["0.1"],
        Has("DEPRECATED: --defrag-thold is deprecated"),
        "ctx",
    );
    v.push(e(
        &["completion", "eval-callback"],
        &["-np", "--parallel"],
        &["2"],
        Has("llama_context: n_seq_max             = 2"),
        "np",
    ));
    v.push(e(ppl, &["-np", "--parallel"], &["2"], Unwalked, ""));
    v.push(e(
        &["tokenize"],
        &["-np", "--parallel"],
        &["2"],
        Warn,
        "warn",
    ));
    ctx(
        &mut v,
        &["-kvo", "--kv-offload", "-nkvo", "--no-kv-offload"],
        &[],
        Tested("tests/tests/vulkan_cli.rs"),
        "",
    );
    ctx(&mut v, &["--repack", "-nr", "--no-repack"], &[], NoOp, "");
    ctx(&mut v, &["--no-host"], &[], Warn, "warn");
    ctx(
        &mut v,
        &["--rpc"],
        &["127.0.0.1:1"],
        Fails("failed to find RPC backend"),
        "",
    );
    ctx(
        &mut v,
        &["-lm", "--load-mode"],
        &["none"],
        Has("load_mode = none"),
        "ctx",
    );
    ctx(&mut v, &["-lzm", "--lazy-mode"], &["on"], Warn, "warn");
    ctx(
        &mut v,
        &["-dev", "--device"],
        &["none"],
        Tested("tests/tests/vulkan_cli.rs"),
        "",
    );
    ctx(
        &mut v,
        &["--override-tensor", "-ot"],
        &["token_embd=CPU"],
        Has("tensor token_embd.weight ("),
        "ctx",
    );
    ctx(
        &mut v,
        &["-cmoe", "--cpu-moe"],
        &[],
        Tested("tests/tests/moe_models.rs"),
        "",
    );
    ctx(
        &mut v,
        &["-ncmoe", "--n-cpu-moe"],
        &["1"],
        Tested("tests/tests/moe_models.rs"),
        "",
    );
    ctx(
        &mut v,
        &["-ncffn", "--n-cpu-ffn"],
        &["1"],
        Has("tensor blk.0.ffn_up.weight ("),
        "np",
    );
    ctx(
        &mut v,
        &["-ngl", "--gpu-layers", "--n-gpu-layers"],
        &["0"],
        Tested("tests/tests/vulkan_cli.rs"),
        "",
    );
    ctx(
        &mut v,
        &["-sm", "--split-mode"],
        &["row"],
        Has("Setting the split mode has no effect"),
        "ctx",
    );
    ctx(
        &mut v,
        &["-ts", "--tensor-split"],
        &["1,1"],
        Has("Setting a tensor split has no effect"),
        "ctx",
    );
    ctx(
        &mut v,
        &["-mg", "--main-gpu"],
        &["1"],
        Has("Setting the main GPU has no effect"),
        "ctx",
    );
    ctx(
        &mut v,
        &["-fit", "--fit"],
        &["on"],
        Has("fitting params to device memory"),
        "fit",
    );
    ctx(
        &mut v,
        &["-fitt", "--fit-target"],
        &["2048"],
        Has(">= 2048 MiB of system memory"),
        "fit",
    );
    ctx(&mut v, &["-fitc", "--fit-ctx"], &["512"], Unwalked, "");
    ctx(
        &mut v,
        &["--check-tensors"],
        &[],
        Tested("tests/tests/reliability_errors.rs"),
        "",
    );
    ctx(
        &mut v,
        &["--override-kv"],
        &["llama.context_length=int:300"],
        Has("print_info: n_ctx_train           = 300"),
        "ctx",
    );
    ctx(
        &mut v,
        &["--op-offload", "--no-op-offload"],
        &[],
        Unwalked,
        "",
    );
    ctx(
        &mut v,
        &["--lora"],
        &["{D}/none.gguf"],
        Fails("failed to open"),
        "",
    );
    ctx(
        &mut v,
        &["--lora-scaled"],
        &["{D}/none.gguf:0.5"],
        Fails("failed to open"),
        "",
    );
    ctx(
        &mut v,
        &["--control-vector"],
        &["{D}/none.gguf"],
        Fails("none.gguf"),
        "",
    );
    ctx(
        &mut v,
        &["--control-vector-scaled"],
        &["{D}/none.gguf:0.5"],
        Fails("none.gguf"),
        "",
    );
    ctx(
        &mut v,
        &["--control-vector-layer-range"],
        &["1", "2"],
        Tested("tests/tests/control_vector_cli.rs"),
        "",
    );
    v.push(e(
        COMMON,
        &["--spec-draft-type-k", "-ctkd", "--cache-type-k-draft"],
        &["f32"],
        Warn,
        "warn",
    ));
    v.push(e(
        COMMON,
        &["--spec-draft-type-v", "-ctvd", "--cache-type-v-draft"],
        &["f32"],
        Warn,
        "warn",
    ));

    // ----- rope -----
    ctx(
        &mut v,
        &["--rope-scaling"],
        &["yarn", "--rope-scale", "4"],
        Has("custom YaRN scaling detected"),
        "yarn",
    );
    ctx(
        &mut v,
        &["--rope-scale"],
        &["2"],
        Has("llama_context: freq_scale            = 0.5"),
        "ctx",
    );
    ctx(
        &mut v,
        &["--rope-freq-base"],
        &["1000"],
        Has("llama_context: freq_base             = 1000.0"),
        "ctx",
    );
    ctx(
        &mut v,
        &["--rope-freq-scale"],
        &["0.25"],
        Has("freq_scale            = 0.25"),
        "fit",
    );
    ctx(
        &mut v,
        &["--yarn-orig-ctx"],
        &["1000", "--rope-scaling", "yarn", "--rope-scale", "3"],
        Has("n_ctx_train adjusted to 3000"),
        "",
    );
    for names in [
        &["--yarn-ext-factor"][..],
        &["--yarn-attn-factor"],
        &["--yarn-beta-slow"],
        &["--yarn-beta-fast"],
    ] {
        let names: &'static [&'static str] = Box::leak(names.to_vec().into_boxed_slice());
        // the betas move the generated text of the random model too little to show
        let beta = names[0].starts_with("--yarn-beta");
        let tools: &[&str] = if beta {
            &["perplexity", "eval-callback", "imatrix"]
        } else {
            LOADS
        };
        if names[0] == "--yarn-attn-factor" {
            // YaRN itself replaces the factor (llama_context recomputes it from the scale, as
            // llama.cpp does), so its effect shows on the plain rope the file asks for
            v.push(e(tools, names, &["0.5", "-n", "8"], OutDiffers, ""));
        } else {
            v.push(pre(e(tools, names, &["0.5"], OutDiffers, ""), yarn));
        }
        if beta {
            v.push(e(c, names, &["0.5"], Unwalked, ""));
        }
        v.push(e(&["tokenize"], names, &["0.5"], Warn, "warn"));
    }

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

    // ----- sampling -----
    samp(
        &mut v,
        &["--samplers"],
        &["top_k;temperature"],
        "sampler chain: logits -> top-k -> temp-ext",
        "s3",
    );
    samp(&mut v, &["-s", "--seed"], &["7"], "sampler seed: 7", "s1");
    samp(
        &mut v,
        &["--sampler-seq", "--sampling-seq"],
        &["kt"],
        "sampler chain: logits -> top-k -> temp-ext",
        "s4",
    );
    samp(
        &mut v,
        &["--ignore-eos"],
        &[],
        "sampler chain: logits -> logit-bias",
        "s1",
    );
    samp(
        &mut v,
        &["--temp", "--temperature"],
        &["0.5"],
        "temp = 0.500",
        "s1",
    );
    samp(&mut v, &["--top-k"], &["7"], "top_k = 7,", "s1");
    samp(&mut v, &["--top-p"], &["0.5"], "top_p = 0.500", "s1");
    samp(&mut v, &["--min-p"], &["0.2"], "min_p = 0.200", "s1");
    samp(
        &mut v,
        &["--top-nsigma", "--top-n-sigma"],
        &["2"],
        "top_n_sigma = 2.000",
        "s1",
    );
    samp(
        &mut v,
        &["--xtc-probability"],
        &["0.5"],
        "xtc_probability = 0.500",
        "s1",
    );
    samp(
        &mut v,
        &["--xtc-threshold"],
        &["0.3"],
        "xtc_threshold = 0.300",
        "s1",
    );
    samp(
        &mut v,
        &["--typical", "--typical-p"],
        &["0.5"],
        "typical_p = 0.500",
        "s1",
    );
    samp(
        &mut v,
        &["--repeat-last-n"],
        &["16"],
        "repeat_last_n = 16,",
        "s1",
    );
    samp(
        &mut v,
        &["--repeat-penalty"],
        &["1.5"],
        "repeat_penalty = 1.500",
        "s1",
    );
    samp(
        &mut v,
        &["--presence-penalty"],
        &["0.5"],
        "presence_penalty = 0.500",
        "s1",
    );
    samp(
        &mut v,
        &["--frequency-penalty"],
        &["0.5"],
        "frequency_penalty = 0.500",
        "s1",
    );
    samp(
        &mut v,
        &["--dry-multiplier"],
        &["0.5"],
        "dry_multiplier = 0.500",
        "s1",
    );
    samp(&mut v, &["--dry-base"], &["2"], "dry_base = 2.000", "s1");
    samp(
        &mut v,
        &["--dry-allowed-length"],
        &["3"],
        "dry_allowed_length = 3,",
        "s1",
    );
    samp(
        &mut v,
        &["--dry-penalty-last-n"],
        &["16"],
        "dry_penalty_last_n = 16",
        "s1",
    );
    v.push(e(c, &["--dry-sequence-breaker"], &["none"], Unwalked, ""));
    v.push(e(
        NO_SAMPLING,
        &["--dry-sequence-breaker"],
        &["none"],
        Warn,
        "warn",
    ));
    samp(
        &mut v,
        &["--adaptive-target"],
        &["0.5"],
        "adaptive_target = 0.500",
        "s1",
    );
    samp(
        &mut v,
        &["--adaptive-decay"],
        &["0.5"],
        "adaptive_decay = 0.500",
        "s1",
    );
    v.push(e(c, &["--dynatemp-range"], &["0.5"], OutDiffers, ""));
    v.push(e(
        NO_SAMPLING,
        &["--dynatemp-range"],
        &["0.5"],
        Warn,
        "warn",
    ));
    v.push(pre(
        e(c, &["--dynatemp-exp"], &["4"], OutDiffers, ""),
        &["--dynatemp-range", "0.5", "-n", "8"],
    ));
    v.push(e(NO_SAMPLING, &["--dynatemp-exp"], &["4"], Warn, "warn"));
    samp(&mut v, &["--mirostat"], &["2"], "mirostat = 2,", "s2");
    samp(
        &mut v,
        &["--mirostat-lr"],
        &["0.5"],
        "mirostat_lr = 0.500",
        "s2",
    );
    samp(
        &mut v,
        &["--mirostat-ent"],
        &["3"],
        "mirostat_ent = 3.000",
        "s2",
    );
    samp(
        &mut v,
        &["-l", "--logit-bias"],
        &["14990+1"],
        "sampler chain: logits -> logit-bias",
        "s5",
    );
    samp(
        &mut v,
        &["--grammar"],
        &["root ::= \"yes\""],
        "eval: [ 'y':88 ]",
        "",
    );
    samp(
        &mut v,
        &["--grammar-file"],
        &["{D}/grammar.gbnf"],
        "eval: [ 'y':88 ]",
        "",
    );
    samp(
        &mut v,
        &["-j", "--json-schema"],
        &["{\"type\":\"integer\"}"],
        "eval: [ '4':19 ]",
        "",
    );
    samp(
        &mut v,
        &["-jf", "--json-schema-file"],
        &["{D}/schema.json"],
        "eval: [ '4':19 ]",
        "",
    );
    v.push(e(COMMON, &["-bs", "--backend-sampling"], &[], Warn, "warn"));

    // ----- llama-completion's own -----
    v.push(e(
        c,
        &["--verbose-prompt"],
        &[],
        Has("number of tokens in prompt = 7"),
        "c1",
    ));
    v.push(quiet(pre(
        e(c, &["--display-prompt"], &[], Has("hello world"), ""),
        &["--no-display-prompt"],
    )));
    v.push(quiet(e(
        c,
        &["--no-display-prompt"],
        &[],
        Lacks("hello world"),
        "",
    )));
    v.push(e(
        c,
        &["-co", "--color"],
        &["on"],
        Has("\x1b[33mhello world"),
        "",
    ));
    v.push(e(
        c,
        &["--context-shift", "--no-context-shift"],
        &[],
        Tested("tests/tests/completion_cli.rs"),
        "",
    ));
    v.push(e(
        ppl,
        &["--context-shift", "--no-context-shift"],
        &[],
        Warn,
        "warn",
    ));
    v.push(e(
        c,
        &["-sys", "--system-prompt"],
        &["be brief", "-cnv"],
        Has("be brief"),
        "",
    ));
    v.push(e(
        c,
        &["-sysf", "--system-prompt-file"],
        &["{D}/sys.txt", "-cnv"],
        Has("be brief"),
        "",
    ));
    v.push(e(
        c,
        &["-ptc", "--print-token-count"],
        &["1"],
        Has("consumed so far = 7 / 256"),
        "c1",
    ));
    v.push(e(
        c,
        &["--prompt-cache"],
        &["{D}/cache-new.bin"],
        Has("session file does not exist, will create"),
        "",
    ));
    v.push(e(
        c,
        &["--prompt-cache-all"],
        &["--prompt-cache", "{D}/cache-all.bin"],
        Tested("tests/tests/prompt_cache_cli.rs"),
        "",
    ));
    v.push(e(
        c,
        &["--prompt-cache-ro"],
        &["--prompt-cache", "{D}/cache-ro.bin"],
        Tested("tests/tests/prompt_cache_cli.rs"),
        "",
    ));
    v.push(e(
        c,
        &["-r", "--reverse-prompt"],
        &["STOP", "-i"],
        Has("Reverse prompt: 'STOP'"),
        "",
    ));
    v.push(e(
        c,
        &["-sp", "--special"],
        &[],
        Tested("tests/tests/completion_cli.rs"),
        "",
    ));
    v.push(pre(
        e(c, &["-cnv", "--conversation"], &[], Has("EOF by user"), ""),
        &[],
    ));
    v.push(pre(
        e(
            c,
            &["-no-cnv", "--no-conversation"],
            &[],
            Lacks("EOF by user"),
            "",
        ),
        &["-cnv"],
    ));
    v.push(e(
        c,
        &["-st", "--single-turn"],
        &[],
        Tested("tests/tests/readme_cli.rs"),
        "",
    ));
    v.push(e(
        c,
        &["-i", "--interactive"],
        &[],
        Has("interactive mode on"),
        "",
    ));
    v.push(e(
        c,
        &["-if", "--interactive-first"],
        &[],
        Has("interactive mode on"),
        "",
    ));
    // two typed lines: one turn with -mli (one "> " before both), two without
    let mut mli = pre(
        e(
            c,
            &["-mli", "--multiline-input"],
            &[],
            Has("\n> a\nb\n"),
            "",
        ),
        &["-cnv"],
    );
    mli.stdin = "a\nb\n";
    v.push(mli);
    v.push(e(
        c,
        &["--in-prefix-bos"],
        &["-i"],
        Has("Input prefix with BOS"),
        "",
    ));
    v.push(e(
        c,
        &["--in-prefix"],
        &["PRE", "-i"],
        Has("Input prefix: 'PRE'"),
        "",
    ));
    v.push(e(
        c,
        &["--in-suffix"],
        &["SUF", "-i"],
        Has("Input suffix: 'SUF'"),
        "",
    ));
    v.push(pre(
        e(
            &["completion", "perplexity"],
            &["--warmup"],
            &[],
            Has("warming up the model"),
            "",
        ),
        &["--no-warmup"],
    ));
    v.push(e(
        &["completion", "perplexity"],
        &["--no-warmup"],
        &[],
        Lacks("warming up the model"),
        "c2",
    ));
    v.push(e(
        c,
        &["-gan", "--grp-attn-n"],
        &["2", "-gaw", "256"],
        Has("self-extend: n_ctx_train = 4096, grp_attn_n = 2, grp_attn_w = 256"),
        "",
    ));
    v.push(e(
        c,
        &["-gaw", "--grp-attn-w"],
        &["6", "-gan", "4"],
        Fails("grp_attn_w (6) must be a positive multiple of grp_attn_n (4)"),
        "",
    ));
    v.push(e(
        c,
        &["--jinja"],
        &[],
        Tested("tests/tests/chat_cli.rs"),
        "",
    ));
    v.push(pre(
        e(
            c,
            &["--no-jinja"],
            &[],
            Fails("error: the supplied chat template is not supported"),
            "",
        ),
        &[
            "-cnv",
            "--jinja",
            "--chat-template-file",
            "{D}/template.jinja",
        ],
    ));
    v.push(e(
        c,
        &["--reasoning-format"],
        &["none"],
        Has("warning: --reasoning-format has no effect in llama-completion"),
        "c1",
    ));
    v.push(e(
        c,
        &["-rea", "--reasoning"],
        &["on"],
        Has("warning: -rea/--reasoning-effort reach only the chat template"),
        "c1",
    ));
    v.push(e(
        c,
        &["--reasoning-effort"],
        &["low"],
        Has("warning: -rea/--reasoning-effort reach only the chat template"),
        "c2",
    ));
    v.push(e(
        c,
        &["--reasoning-budget"],
        &["1"],
        Has("warning: --reasoning-budget has no effect in llama-completion"),
        "c1",
    ));
    v.push(e(
        c,
        &["--reasoning-budget-message"],
        &["x"],
        Has("warning: --reasoning-budget-message has no effect in llama-completion"),
        "c1",
    ));
    // they reach the chat template example llama-completion logs (as in llama.cpp)
    let reason: &'static [&'static str] = &[
        "-cnv",
        "--jinja",
        "--chat-template-file",
        "{D}/reason.jinja",
    ];
    v.push(pre(
        e(
            c,
            &["--reasoning-preserve"],
            &[],
            Has("How are you?>>[True]"),
            "",
        ),
        &[
            "-cnv",
            "--jinja",
            "--chat-template-file",
            "{D}/reason.jinja",
            "--no-reasoning-preserve",
        ],
    ));
    v.push(e(
        c,
        &["--no-reasoning-preserve"],
        reason,
        Has("How are you?>>[False]"),
        "",
    ));
    v.push(e(
        c,
        &["--chat-template"],
        &["gemma", "-cnv", "--verbose-prompt"],
        Has("<start_of_turn>"),
        "",
    ));
    v.push(e(
        c,
        &["--chat-template-file"],
        &[
            "{D}/template.jinja",
            "-cnv",
            "--jinja",
            "-sys",
            "S",
            "--verbose-prompt",
        ],
        Has("<<S>>"),
        "",
    ));
    v.push(e(
        c,
        &["--skip-chat-parsing", "--no-skip-chat-parsing"],
        &[],
        Tested("tests/tests/chat_cli.rs"),
        "",
    ));
    v.push(pre(
        e(c, &["--simple-io"], &[], Lacks("\x1b[33m"), ""),
        &["-co", "on"],
    ));

    tools_of_their_own(&mut v);
    Box::leak(v.into_boxed_slice())
}

/// The flags of one tool alone: perplexity's and imatrix's tasks, tokenize's output forms,
/// llama-bench's test parameters (each a column of its table), and the GGUF tools.
fn tools_of_their_own(v: &mut Vec<Entry>) {
    use Want::*;
    let ppl: &[&str] = &["perplexity"];
    let tests_ppl = Tested("tests/tests/perplexity_cli.rs");
    v.push(e(
        ppl,
        &["-kvu", "--kv-unified"],
        &[],
        Has("kv_unified            = true"),
        "p1",
    ));
    v.push(pre(
        e(
            ppl,
            &["-no-kvu", "--no-kv-unified"],
            &[],
            Lacks("kv_unified            = true"),
            "",
        ),
        &["-kvu"],
    ));
    v.push(e(
        &["perplexity", "imatrix"],
        &["--chunks"],
        &["2"],
        Has("over 2 chunks"),
        "p1",
    ));
    for names in [
        &["--hellaswag"][..],
        &["--hellaswag-tasks"],
        &["--winogrande"],
        &["--multiple-choice"],
        &["--kl-divergence"],
        &["--save-all-logits", "--kl-divergence-base"],
        &["--ppl-output-type"],
    ] {
        let names: &'static [&'static str] = Box::leak(names.to_vec().into_boxed_slice());
        v.push(e(
            ppl,
            names,
            &[],
            Tested("tests/tests/perplexity_cli.rs"),
            "",
        ));
    }
    let _ = tests_ppl;
    v.push(e(ppl, &["--winogrande-tasks"], &[], Unwalked, ""));
    v.push(e(ppl, &["--multiple-choice-tasks"], &[], Unwalked, ""));
    v.push(e(ppl, &["--ppl-stride"], &["8"], OutDiffers, ""));

    let im: &[&str] = &["imatrix"];
    let cli = "tools/imatrix/tests/cli.rs";
    for names in [
        &["--in-file"][..],
        &["-o", "--output", "--output-file"],
        &["-ofreq", "--output-frequency"],
        &["--output-format"],
        &["--save-frequency"],
        &["--process-output"],
        &["--ppl", "--no-ppl"],
        &["--show-statistics"],
    ] {
        let names: &'static [&'static str] = Box::leak(names.to_vec().into_boxed_slice());
        v.push(e(im, names, &[], Tested(cli), ""));
    }
    v.push(e(
        im,
        &["--chunk", "--from-chunk"],
        &["1"],
        Has("removing initial 1 chunks"),
        "p1",
    ));
    v.push(e(im, &["--parse-special"], &[], Unwalked, ""));

    let tok: &[&str] = &["tokenize"];
    for names in [
        &["--ids"][..],
        &["--stdin"],
        &["--no-bos"],
        &["--no-parse-special"],
        &["--show-count"],
    ] {
        let names: &'static [&'static str] = Box::leak(names.to_vec().into_boxed_slice());
        v.push(e(
            tok,
            names,
            &[],
            Tested("tests/tests/tokenize_cli.rs"),
            "",
        ));
    }

    // llama-bench: each test parameter given adds its column to the markdown table
    let b: &[&str] = &["bench"];
    let bench_cli = "tests/tests/bench_cli.rs";
    v.push(e(b, &["-h", "--help"], &[], Solo("test parameters:"), ""));
    v.push(e(b, &["--version"], &[], Solo("version: "), ""));
    v.push(e(
        b,
        &["--numa"],
        &["isolate", "-v"],
        Has("--numa isolate: "),
        "",
    ));
    v.push(e(b, &["--prio"], &["-1", "-v"], Has("prio = -1"), ""));
    v.push(e(b, &["--delay"], &["1"], Unwalked, ""));
    for names in [
        &["-r", "--repetitions"][..],
        &["-o", "--output"],
        &["-oe", "--output-err"],
        &["--list-devices"],
        &["--progress"],
        &["--no-warmup"],
        &["--plot"],
        &["-m", "--model"],
        &["-p", "--n-prompt"],
        &["-n", "--n-gen"],
        &["-pg"],
        &["-d", "--n-depth"],
        &["-t", "--threads"],
    ] {
        let names: &'static [&'static str] = Box::leak(names.to_vec().into_boxed_slice());
        v.push(e(b, names, &[], Tested(bench_cli), ""));
    }
    v.push(e(
        b,
        &["-v", "--verbose"],
        &[],
        Has("llama_model_loader: loaded meta data"),
        "",
    ));
    v.push(e(
        b,
        &["-fitt", "--fit-target"],
        &["1024"],
        Fails("fitting to device memory is not supported by this build"),
        "",
    ));
    v.push(e(
        b,
        &["-fitc", "--fit-ctx"],
        &["512"],
        Fails("fitting to device memory is not supported by this build"),
        "",
    ));
    let cols: &[(
        &'static [&'static str],
        &'static [&'static str],
        &'static str,
        &'static str,
    )] = &[
        (&["-b", "--batch-size"], &["16"], " n_batch |", "b1"),
        (&["-ub", "--ubatch-size"], &["8"], " n_ubatch |", "b1"),
        (&["-ctk", "--cache-type-k"], &["q8_0"], " type_k |", "b1"),
        (&["-ctv", "--cache-type-v"], &["q8_0"], " type_v |", "b2"),
        (&["-C", "--cpu-mask"], &["0x1"], " cpu_mask   |", "b1"),
        (&["--cpu-strict"], &["1"], " cpu_strict |", "b1"),
        (&["--poll"], &["0"], "       poll |", "b1"),
        (&["-ncmoe", "--n-cpu-moe"], &["1"], " n_cpu_moe |", "b1"),
        (&["-sm", "--split-mode"], &["none"], "     sm |", "b1"),
        (&["-mg", "--main-gpu"], &["1"], " main_gpu |", "b1"),
        (&["-nkvo", "--no-kv-offload"], &["1"], " nkvo |", "b1"),
        (&["-fa", "--flash-attn"], &["on"], "  fa |", "b2"),
        (&["-dev", "--device"], &["none"], " dev          |", "b1"),
        (&["-lm", "--load-mode"], &["none"], "         lm |", "b1"),
        (&["-lzm", "--lazy-mode"], &["on"], " lazy_mode  |", "b1"),
        (&["-mmp", "--mmap"], &["0"], "       none |", "b3"),
        (&["-dio", "--direct-io"], &["1"], "        dio |", "b4"),
        (&["-embd", "--embeddings"], &["1"], "       embd |", "b1"),
        (&["-ts", "--tensor-split"], &["1"], " ts           |", "b1"),
        (
            &["-ot", "--override-tensor"],
            &["token_embd=CPU"],
            " ot                    |",
            "b1",
        ),
        (&["-nopo", "--no-op-offload"], &["1"], " nopo |", "b1"),
        (&["--no-host"], &["1"], "  noh |", "b1"),
        (&["--repack"], &["0"], " rpk |", "b1"),
    ];
    for &(names, args, col, group) in cols {
        v.push(e(b, names, args, Has(col), group));
    }
    v.push(e(
        b,
        &["-ngl", "--n-gpu-layers"],
        &[],
        Tested("tests/tests/vulkan_cli.rs"),
        "",
    ));

    // llama-quantize (base: the small f32 model to q8_0)
    let q: &[&str] = &["quantize"];
    let qt = "tools/quantize/tests/flags.rs";
    let qn = "tools/quantize/tests/quant_new.rs";
    v.push(e(
        q,
        &["--help"],
        &[],
        Fails("allowed quantization types"),
        "",
    ));
    v.push(e(q, &["--imatrix"], &[], Tested(qn), ""));
    v.push(e(q, &["--include-weights"], &[], Tested(qt), ""));
    v.push(e(q, &["--exclude-weights"], &[], Tested(qn), ""));
    v.push(e(q, &["--output-tensor-type"], &[], Tested(qn), ""));
    v.push(e(q, &["--prune-layers"], &[], Tested(qt), ""));
    v.push(e(q, &["--keep-split"], &[], Tested(qt), ""));
    v.push(e(q, &["--override-kv"], &[], Tested(qt), ""));
    v.push(e(
        q,
        &["--dry-run"],
        &[],
        Tested("tools/quantize/tests/reference.rs"),
        "",
    ));
    v.push(e(
        q,
        &["--allow-requantize"],
        &["{Q}", "{D}/requant.gguf", "q4_0"],
        Solo("type =   q8_0, converting to q4_0"),
        "",
    ));
    v.push(e(q, &["--pure"], &["{S}", "{D}/pure.gguf", "q4_k"], Solo("output.weight                        - ncols     64 not divisible by 256 (required for type    q4_K)"), ""));
    v.push(e(q, &["--leave-output-tensor"], &[], Lacks("output.weight                        - [    64,    300,      1,      1], type =    f32, converting to q8_0"), "q1"));
    v.push(e(q, &["--token-embedding-type"], &["q4_0"], Has("token_embd.weight                    - [    64,    300,      1,      1], type =    f32, converting to q4_0"), "q1"));
    v.push(e(q, &["--tensor-type"], &["attn_q=q4_0"], Has("blk.0.attn_q.weight                  - [    64,     64,      1,      1], type =    f32, converting to q4_0"), "q2"));
    v.push(e(q, &["--tensor-type-file"], &["{D}/types.txt"], Has("blk.0.attn_q.weight                  - [    64,     64,      1,      1], type =    f32, converting to q4_0"), "q3"));
    v.push(e(q, &["--max-buffer-size"], &["1"], Unwalked, ""));

    // llama-gguf-split, llama-gguf-inspect
    let sp: &[&str] = &["gguf-split"];
    // as llama.cpp's: only --help is taken, -h is "bad arguments" (and the usage)
    v.push(e(sp, &["--help"], &[], Solo("usage:"), ""));
    v.push(e(sp, &["-h"], &[], Fails("error: bad arguments"), ""));
    v.push(e(sp, &["--version"], &[], Solo("version: "), ""));
    for names in [
        &["--split"][..],
        &["--merge"],
        &["--split-max-tensors"],
        &["--split-max-size"],
        &["--no-tensor-first-split"],
        &["--dry-run"],
        &["--delete-splits"],
    ] {
        let names: &'static [&'static str] = Box::leak(names.to_vec().into_boxed_slice());
        v.push(e(
            sp,
            names,
            &[],
            Tested("tests/tests/gguf_split_cli.rs"),
            "",
        ));
    }
    let gi: &[&str] = &["gguf-inspect"];
    v.push(e(
        gi,
        &["-h", "--help"],
        &[],
        Solo("Usage: llama-gguf-inspect"),
        "",
    ));
    v.push(e(gi, &["--version"], &[], Solo("version: "), ""));
    for (names, file) in [
        (&["--json"][..], "gguf_inspect.rs"),
        (&["--full-arrays"], "gguf_inspect.rs"),
        (&["--no-tensors"], "gguf_inspect.rs"),
        (&["--key"], "gguf_inspect.rs"),
        (&["--markdown"], "gguf_inspect_dump.rs"),
        (&["--data-offset"], "gguf_inspect_dump.rs"),
        (&["--data-alignment"], "gguf_inspect_dump.rs"),
        (&["--verbose"], "gguf_inspect_dump.rs"),
    ] {
        let names: &'static [&'static str] = Box::leak(names.to_vec().into_boxed_slice());
        let file: &'static str = Box::leak(format!("tests/tests/{file}").into_boxed_str());
        v.push(e(gi, names, &[], Tested(file), ""));
    }

    // llama-gguf-new: the file it writes, read back by llama-gguf-inspect
    let gn: &[&str] = &["gguf-new"];
    v.push(e(
        gn,
        &["-h", "--help"],
        &[],
        Solo("Write a GGUF model with random weights"),
        "",
    ));
    for names in [
        &["-o", "--output"][..],
        &["--preset"],
        &["--arch"],
        &["--layers"],
        &["--embd"],
        &["--heads"],
        &["--heads-kv"],
        &["--ff"],
        &["--ctx"],
        &["--type"],
        &["--seed"],
        &["--vocab"],
        &["--vocab-size"],
    ] {
        let names: &'static [&'static str] = Box::leak(names.to_vec().into_boxed_slice());
        v.push(e(gn, names, &[], Tested("tests/tests/gguf_new.rs"), ""));
    }
    v.push(e(
        gn,
        &["--name"],
        &["walkname"],
        Gguf("general.name str              = walkname"),
        "n1",
    ));
    v.push(e(
        gn,
        &["--rope-freq-base"],
        &["1234"],
        Gguf("llama.rope.freq_base f32              = 1234.000000"),
        "n1",
    ));
    v.push(e(
        gn,
        &["--rms-eps"],
        &["0.001"],
        Gguf("llama.attention.layer_norm_rms_epsilon f32              = 0.001000"),
        "n1",
    ));
    v.push(e(
        gn,
        &["--swa"],
        &["16", "--arch", "gemma2"],
        Gguf("gemma2.attention.sliding_window u32              = 16"),
        "n2",
    ));
    v.push(e(
        gn,
        &["--experts"],
        &["4", "--arch", "qwen2moe"],
        Gguf("qwen2moe.expert_count u32              = 4"),
        "n3",
    ));
    v.push(e(
        gn,
        &["--experts-used"],
        &["1"],
        Gguf("qwen2moe.expert_used_count u32              = 1"),
        "n3",
    ));
    v.push(e(
        gn,
        &["--ff-exp"],
        &["32"],
        Gguf("qwen2moe.expert_feed_forward_length u32              = 32"),
        "n3",
    ));
    v.push(e(
        gn,
        &["--ff-shexp"],
        &["16"],
        Gguf("qwen2moe.expert_shared_feed_forward_length u32              = 16"),
        "n3",
    ));
    v.push(e(
        gn,
        &["--experts-shared"],
        &["1", "--arch", "deepseek"],
        Gguf("deepseek.expert_shared_count u32              = 1"),
        "n4",
    ));
    v.push(e(
        gn,
        &["--dense-lead"],
        &["0"],
        Gguf("deepseek.leading_dense_block_count u32              = 0"),
        "n4",
    ));
    v.push(e(
        gn,
        &["--expert-scales"],
        &[],
        Gguf("blk.0.ffn_gate_exps.scale"),
        "n3",
    ));
    v.push(e(
        gn,
        &["--yarn"],
        &["4", "--arch", "mistral3"],
        Gguf("mistral3.rope.scaling.factor f32              = 4.000000"),
        "",
    ));
    v.push(e(gn, &["--quiet"], &[], Unwalked, ""));
    v.push(e(gn, &["--force"], &[], Unwalked, ""));

    let ld: &[&str] = &["list-devices"];
    v.push(e(
        ld,
        &["-h", "--help", "--usage"],
        &[],
        Solo("usage: "),
        "",
    ));
    v.push(e(ld, &["--version"], &[], Solo("version: "), ""));
}
