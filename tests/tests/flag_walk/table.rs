//! The flag walk's table: for each tool, each flag its `--help` lists (all spellings) and how
//! its effect is seen. Entries of one group run together (one run per spelling index), so
//! their checks must not disturb each other.

use std::path::Path;

#[path = "table/completion.rs"]
mod completion;
#[path = "table/input_log.rs"]
mod input_log;
#[path = "table/own_tools.rs"]
mod own_tools;
#[path = "table/sampling.rs"]
mod sampling;
#[path = "table/shared.rs"]
mod shared;

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
    /// a row of docs/flags.md's deliberate no-ops (none today: the variant keeps the doc's
    /// table and the walk in step when a flag becomes one)
    #[allow(dead_code)]
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
    let mut v: Vec<Entry> = Vec::new();
    shared::shared_flags(&mut v);
    input_log::input_and_log_flags(&mut v);
    sampling::sampling_flags(&mut v);
    completion::completion_flags(&mut v);
    own_tools::tools_of_their_own(&mut v);
    Box::leak(v.into_boxed_slice())
}
