//! Issue 15 item 8, the flag walk: every flag that each tool's `--help` lists (every spelling)
//! is looked up in the table of `flag_walk/table.rs`, which says how its effect is seen — a
//! line of the output or log that a run without it lacks, a failure with its message, the
//! tool's plain warning that the flag does nothing there, or a row of the deliberate no-ops in
//! docs/flags.md. A flag that `--help` lists and the table does not cover fails the walk, and
//! so does a flag whose run does not show what the table says.

#[path = "flag_walk/table.rs"]
mod table;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;

use table::{Entry, Want};

/// The tools: binary name, cargo package.
const TOOLS: &[(&str, &str)] = &[
    ("llama-completion", "llama-completion"),
    ("llama-perplexity", "llama-perplexity"),
    ("llama-eval-callback", "llama-eval-callback"),
    ("llama-imatrix", "llama-imatrix"),
    ("llama-tokenize", "llama-tokenize"),
    ("llama-bench", "llama-bench"),
    ("llama-quantize", "llama-quantize"),
    ("llama-gguf-split", "llama-gguf-split"),
    ("llama-gguf-inspect", "llama-gguf-inspect"),
    ("llama-gguf-new", "llama-gguf-new"),
    ("llama-list-devices", "llama-list-devices"),
];

/// The flags a `--help` text lists, every spelling: a line that starts (at most 6 spaces in)
/// with '-' names its flags up to the first word that is not one; a `[--flag]` of a usage line
/// counts too. Description lines are indented further and are not read.
fn help_flags(help: &str) -> Vec<String> {
    fn is_flag(t: &str) -> bool {
        let body = t.trim_start_matches('-');
        let dashes = t.len() - body.len();
        (1..=2).contains(&dashes)
            && body
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric())
            && body.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    }
    let mut out: Vec<String> = Vec::new();
    let mut add = |f: &str| {
        if !out.iter().any(|o| o == f) {
            out.push(f.to_string());
        }
    };
    for line in help.lines() {
        for part in line.split('[').skip(1) {
            if let Some(inner) = part.split(']').next() {
                if is_flag(inner) {
                    add(inner);
                }
            }
        }
        let indent = line.len() - line.trim_start_matches(' ').len();
        let s = line.trim();
        if indent > 6 || !s.starts_with('-') {
            continue;
        }
        for tok in s.split([' ', ',']).filter(|t| !t.is_empty()) {
            if !is_flag(tok) {
                break;
            }
            add(tok);
        }
    }
    out
}

#[test]
fn help_parser_reads_every_spelling() {
    let help = concat!(
        "-h,    --help, --usage                  print usage and exit\n",
        "--override-tensor, -ot <pat>=<type>,...\n",
        "                                        --logit-bias EOS-inf)\n",
        "  -ot --override-tensor <tensor name pattern>\n",
        "      --preset <NAME>\n",
        "          - llama\n",
        "usage: q [--help] [--pure]\n",
    );
    assert_eq!(
        help_flags(help),
        [
            "-h",
            "--help",
            "--usage",
            "--override-tensor",
            "-ot",
            "--preset",
            "--pure"
        ]
        .iter()
        .fold(Vec::<String>::new(), |mut v, f| {
            if !v.iter().any(|o| o == f) {
                v.push(f.to_string());
            }
            v
        })
    );
}

/// The deliberate no-ops of docs/flags.md: (tool, spelling) for each flag named in a row of
/// its "Deliberate no-ops" table.
fn doc_rows(title: &str) -> BTreeSet<(String, String)> {
    let doc = std::fs::read_to_string(test_fixtures::repo_root().join("docs/flags.md"))
        .expect("read docs/flags.md");
    let section = doc
        .split(title)
        .nth(1)
        .unwrap_or_else(|| panic!("docs/flags.md has a {title:?} section"));
    let mut set = BTreeSet::new();
    for row in section.lines().take_while(|l| !l.starts_with("## ")) {
        let cells: Vec<&str> = row.split(" | ").collect();
        if !row.starts_with("| `llama-") || cells.len() < 3 {
            continue;
        }
        let tools: Vec<String> = cells[0]
            .split('`')
            .filter(|t| t.starts_with("llama-"))
            .map(str::to_string)
            .collect();
        for flag in cells[1].split('`').filter(|t| t.starts_with('-')) {
            for t in &tools {
                set.insert((t.clone(), flag.to_string()));
            }
        }
    }
    set
}

struct Ran {
    code: Option<i32>,
    /// stdout
    out: String,
    /// stdout then stderr
    text: String,
}

fn run(bin: &Path, args: &[String], dir: &Path) -> Ran {
    run_with(bin, args, dir, "")
}

/// A run with `input` on stdin (none: stdin closed).
fn run_with(bin: &Path, args: &[String], dir: &Path, input: &str) -> Ran {
    use std::io::Write;
    let mut child = Command::new(bin)
        .args(args)
        .current_dir(dir)
        .env_remove("LLAMA_ARG_MODEL")
        .env_remove("HF_TOKEN")
        .env("NO_COLOR", "1")
        .stdin(if input.is_empty() {
            Stdio::null()
        } else {
            Stdio::piped()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run {}: {e}", bin.display()));
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes()).expect("write stdin");
    }
    let o = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("run {}: {e}", bin.display()));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut text = out.clone();
    text.push_str(&String::from_utf8_lossy(&o.stderr));
    Ran {
        code: o.status.code(),
        out,
        text,
    }
}

/// One command to run: a tool, whether it runs with its quiet base, the entries it checks and
/// the spelling index each uses.
struct Job {
    tool: &'static str,
    quiet: bool,
    args: Vec<String>,
    checks: Vec<(&'static Entry, String)>,
}

/// A tool's command line: its base, `-v` unless quiet, then the flags.
fn command(tool: &str, quiet: bool, flags: &[String], vars: &[(&str, String)]) -> Vec<String> {
    let (before, after) = table::base(tool);
    let mut args: Vec<String> = before.iter().map(|a| expand(a, vars)).collect();
    if !quiet {
        if let Some(v) = table::verbose_flag(tool) {
            args.push(v.to_string());
        }
    }
    args.extend(flags.iter().cloned());
    args.extend(after.iter().map(|a| expand(a, vars)));
    args
}

/// A command line with `{J}` (a file name of its own) replaced by the job's number.
fn numbered(args: Vec<String>, id: usize) -> Vec<String> {
    args.into_iter()
        .map(|a| a.replace("{J}", &id.to_string()))
        .collect()
}

fn expand(a: &str, vars: &[(&str, String)]) -> String {
    let mut s = a.to_string();
    for (k, v) in vars {
        s = s.replace(k, v);
    }
    s
}

#[test]
fn every_listed_flag_has_its_effect_or_says_why_not() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let only = std::env::var("FLAG_WALK_TOOL").ok();
    let dir = test_fixtures::scratch_dir("flag_walk");
    let vars = table::prepare(&dir, &model);
    let table = table::entries();
    let mut problems: Vec<String> = Vec::new();

    // the doc's no-ops (and flags not walked yet) and the table's are the same
    for (title, unwalked) in [("## Deliberate no-ops", false), ("## Not walked yet", true)] {
        let rows = doc_rows(title);
        let table_rows: BTreeSet<(String, String)> = table
            .iter()
            .filter(|e| {
                if unwalked {
                    matches!(e.want, Want::Unwalked)
                } else {
                    matches!(e.want, Want::NoOp)
                }
            })
            .flat_map(|e| {
                e.tools.iter().flat_map(move |t| {
                    e.names
                        .iter()
                        .map(move |n| (format!("llama-{t}"), n.to_string()))
                })
            })
            .collect();
        for x in rows.difference(&table_rows) {
            problems.push(format!(
                "docs/flags.md lists {x:?} under {title:?}; the table does not"
            ));
        }
        for x in table_rows.difference(&rows) {
            problems.push(format!(
                "the table has {x:?} for {title:?}; docs/flags.md does not"
            ));
        }
    }

    let mut jobs: Vec<Job> = Vec::new();
    let mut bins = BTreeMap::new();
    for &(bin_name, package) in TOOLS {
        let tool = &bin_name["llama-".len()..];
        if only.as_deref().is_some_and(|o| o != tool) {
            continue;
        }
        let bin = test_fixtures::bin(package, bin_name);
        let help = run(&bin, &["--help".to_string()], &dir);
        assert!(
            help.code == Some(0) || tool == "quantize",
            "{bin_name} --help: {}",
            help.text
        );
        let listed = help_flags(&help.text);
        assert!(listed.len() > 2, "{bin_name}: no flags read from --help");
        bins.insert(tool, bin);

        // every listed spelling is covered, and the table names no flag the help lacks
        let mine: Vec<&'static Entry> = table.iter().filter(|e| e.tools.contains(&tool)).collect();
        for f in &listed {
            let n = mine
                .iter()
                .filter(|e| e.names.contains(&f.as_str()))
                .count();
            if n != 1 {
                problems.push(format!(
                    "{bin_name}: --help lists {f}; the table covers it {n} times"
                ));
            }
        }
        for e in &mine {
            for n in e.names {
                if !listed.iter().any(|f| f == n) {
                    problems.push(format!(
                        "{bin_name}: the table has {n}, --help does not list it"
                    ));
                }
            }
        }

        // group the entries into runs: one per spelling index of each group
        let mut groups: BTreeMap<&str, Vec<&'static Entry>> = BTreeMap::new();
        for e in &mine {
            if let Want::Tested(file) = e.want {
                let path = test_fixtures::repo_root().join(file);
                let src = std::fs::read_to_string(&path).unwrap_or_default();
                if !e.names.iter().any(|n| src.contains(&format!("\"{n}\""))) {
                    problems.push(format!("{bin_name} {:?}: {file} does not name it", e.names));
                }
            }
        }
        for e in mine
            .iter()
            .filter(|e| !matches!(e.want, Want::NoOp | Want::Tested(_) | Want::Unwalked))
        {
            if e.group.is_empty() || matches!(e.want, Want::Solo(..) | Want::Fails(..)) {
                for n in e.names.iter() {
                    let solo = matches!(e.want, Want::Solo(..));
                    let mut flag: Vec<String> = e.pre.iter().map(|a| expand(a, &vars)).collect();
                    flag.push(n.to_string());
                    flag.extend(e.args.iter().map(|a| expand(a, &vars)));
                    let args = if solo {
                        flag
                    } else {
                        command(tool, e.quiet, &flag, &vars)
                    };
                    let args = numbered(args, jobs.len());
                    jobs.push(Job {
                        tool,
                        quiet: e.quiet,
                        args,
                        checks: vec![(*e, n.to_string())],
                    });
                }
            } else {
                groups.entry(e.group).or_default().push(e);
            }
        }
        for (_, es) in groups {
            let quiet = es[0].quiet;
            let n_runs = es.iter().map(|e| e.names.len()).max().unwrap_or(1);
            for k in 0..n_runs {
                let mut flags: Vec<String> = Vec::new();
                let mut checks = Vec::new();
                for e in &es {
                    assert_eq!(e.quiet, quiet, "{:?}: one group, one base", e.names);
                    assert!(
                        e.pre.is_empty(),
                        "{:?}: an entry with pre runs alone",
                        e.names
                    );
                    let n = e.names[k % e.names.len()];
                    flags.push(n.to_string());
                    flags.extend(e.args.iter().map(|a| expand(a, &vars)));
                    checks.push((*e, n.to_string()));
                }
                let args = numbered(command(tool, quiet, &flags, &vars), jobs.len());
                jobs.push(Job {
                    tool,
                    quiet,
                    args,
                    checks,
                });
            }
        }
    }

    // the bases: each tool with its usual arguments, verbose and quiet
    let mut bases: BTreeMap<(&str, bool), Ran> = BTreeMap::new();
    for (tool, bin) in &bins {
        for quiet in [false, true] {
            let args = numbered(
                command(tool, quiet, &[], &vars),
                usize::MAX - quiet as usize,
            );
            let r = run(bin, &args, &dir);
            assert_eq!(r.code, Some(0), "llama-{tool} {args:?}: {}", r.text);
            bases.insert((tool, quiet), r);
        }
    }

    let queue = Mutex::new(jobs.into_iter().enumerate());
    let found = Mutex::new(Vec::<String>::new());
    // runs and seconds per tool, printed for whoever tunes the groups (--nocapture)
    let spent = Mutex::new(BTreeMap::<&str, (usize, f64)>::new());
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let Some((id, job)) = queue.lock().unwrap().next() else {
                    break;
                };
                let t0 = std::time::Instant::now();
                let input = job.checks.first().map_or("", |(e, _)| e.stdin);
                let r = run_with(&bins[job.tool], &job.args, &dir, input);
                // an entry with arguments before its flag is compared with a run of those
                let pre_base;
                let base = match job.checks.first() {
                    Some((e, _)) if !e.pre.is_empty() => {
                        let pre: Vec<String> = e.pre.iter().map(|a| expand(a, &vars)).collect();
                        let args =
                            numbered(command(job.tool, job.quiet, &pre, &vars), 1_000_000 + id);
                        pre_base = run_with(&bins[job.tool], &args, &dir, input);
                        &pre_base
                    }
                    _ => &bases[&(job.tool, job.quiet)],
                };
                {
                    let mut spent = spent.lock().unwrap();
                    let t = spent.entry(job.tool).or_default();
                    t.0 += 1;
                    t.1 += t0.elapsed().as_secs_f64();
                }
                let mut bad = Vec::new();
                for (e, name) in &job.checks {
                    if let Err(why) = check(&e.want, job.tool, name, &job.args, &r, base, &vars) {
                        bad.push(format!("llama-{} {name}: {why}", job.tool));
                    }
                }
                if !bad.is_empty() {
                    let tail: String = r.text.lines().rev().take(6).collect::<Vec<_>>().join(" | ");
                    found.lock().unwrap().push(format!(
                        "{}\n    (run: {:?}, exit {:?}, last lines: {tail})",
                        bad.join("\n"),
                        job.args,
                        r.code
                    ));
                }
            });
        }
    });
    for (tool, (n, secs)) in spent.into_inner().unwrap() {
        eprintln!("llama-{tool}: {n} runs, {secs:.1} s");
    }
    problems.extend(found.into_inner().unwrap());
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Whether a run shows what the table wants of the flag spelt `name`.
fn check(
    want: &Want,
    tool: &str,
    name: &str,
    args: &[String],
    r: &Ran,
    base: &Ran,
    vars: &[(&str, String)],
) -> Result<(), String> {
    let ok = |r: &Ran| {
        if r.code == Some(0) {
            Ok(())
        } else {
            Err(format!("exit {:?}", r.code))
        }
    };
    match want {
        Want::Has(t) => {
            ok(r)?;
            if !r.text.contains(t) {
                return Err(format!("no {t:?} in its output"));
            }
            if base.text.contains(t) {
                return Err(format!("{t:?} is there without the flag too"));
            }
        }
        Want::Lacks(t) => {
            ok(r)?;
            if r.text.contains(t) {
                return Err(format!("{t:?} is still in its output"));
            }
            if !base.text.contains(t) {
                return Err(format!(
                    "{t:?} is not in the output without the flag either"
                ));
            }
        }
        Want::Solo(t) => {
            ok(r)?;
            if !r.text.contains(t) {
                return Err(format!("no {t:?} in its output"));
            }
        }
        Want::Fails(t) => {
            if r.code != Some(1) {
                return Err(format!("exit {:?}, not 1", r.code));
            }
            if !r.text.contains(t) {
                return Err(format!("no {t:?} in its output"));
            }
        }
        Want::Warn => {
            let t = format!("warning: {name} has no effect in llama-{tool}");
            if !r.text.contains(&t) {
                return Err(format!("no {t:?} in its output"));
            }
        }
        Want::File(path, t) => {
            ok(r)?;
            // the file is the one the command names (its `{J}` already numbered)
            let want = expand(path, vars);
            let (head, tail) = want.split_once("{J}").unwrap_or((&want, ""));
            let path = args
                .iter()
                .find(|a| a.starts_with(head) && a.ends_with(tail))
                .cloned()
                .ok_or("the command names no such file")?;
            let got = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
            if !got.contains(t) {
                return Err(format!("{path} lacks {t:?}"));
            }
        }
        Want::OutDiffers => {
            ok(r)?;
            if r.out == base.out {
                return Err("its stdout is the same as without the flag".to_string());
            }
        }
        Want::Gguf(t) => {
            ok(r)?;
            let file = args
                .iter()
                .position(|a| a == "-o")
                .and_then(|i| args.get(i + 1))
                .ok_or("no -o in its command")?;
            let inspect = test_fixtures::bin("llama-gguf-inspect", "llama-gguf-inspect");
            let o = Command::new(inspect)
                .arg(file)
                .output()
                .map_err(|e| e.to_string())?;
            if !String::from_utf8_lossy(&o.stdout).contains(t) {
                return Err(format!("llama-gguf-inspect {file} lacks {t:?}"));
            }
        }
        Want::NoOp | Want::Tested(_) | Want::Unwalked => unreachable!("not run"),
    }
    Ok(())
}
