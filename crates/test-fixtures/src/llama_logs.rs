//! Reading what llama.cpp's tools (and ours) print, for the tests that compare the two on
//! recorded fixtures (`tests/fixtures/<topic>/`): log lines without their timestamps, the
//! graph line, perplexity chunks and estimate, and llama-eval-callback's nodes.

use std::path::PathBuf;

/// A recorded fixture: `tests/fixtures/<topic>/<name>`.
pub fn fixture_path(topic: &str, name: &str) -> PathBuf {
    crate::repo_root()
        .join("tests/fixtures")
        .join(topic)
        .join(name)
}

/// A recorded fixture's bytes, as recorded on this CPU's SIMD class: `<topic>/avx512/<name>` on
/// an AVX-512 CPU where llama.cpp's AVX-512 build recorded it, `<topic>/<name>` otherwise
/// ([`crate::simd_fixture`]).
pub fn fixture(topic: &str, name: &str) -> Vec<u8> {
    let p = crate::simd_fixture(&fixture_path(topic, name));
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The first log line holding `what`, from that point on (without the timestamp and prefix).
pub fn line_of(log: &str, what: &str) -> String {
    let l = log
        .lines()
        .find(|l| l.contains(what))
        .unwrap_or_else(|| panic!("no {what:?} line in:\n{log}"));
    l[l.find(what).unwrap()..].to_string()
}

/// Every log line holding `what`, each from that point on.
pub fn lines_of(log: &str, what: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| l.find(what).map(|i| l[i..].to_string()))
        .collect()
}

/// "graph: nodes = N, splits = M, ..." of the scheduler's reserve line.
pub fn graph_line(log: &str) -> String {
    line_of(log, "sched_reserve: graph: nodes").replacen("sched_reserve: ", "", 1)
}

/// llama-perplexity's "Final estimate: PPL = X".
pub fn final_ppl(s: &str) -> f64 {
    let line = line_of(s, "Final estimate: PPL = ");
    let v = line.split("PPL = ").nth(1).unwrap();
    v.split_whitespace().next().unwrap().parse().unwrap()
}

/// llama-perplexity's per-chunk values ("[1]x,[2]y,...").
pub fn ppl_chunks(s: &str) -> Vec<f64> {
    let line = s.lines().find(|l| l.starts_with("[1]")).unwrap_or("");
    line.split(',')
        .filter_map(|x| x.split_once(']').and_then(|(_, v)| v.parse().ok()))
        .collect()
}

/// The chunks and final estimate of `got` (our output) within `rel` of `want` (llama.cpp's),
/// with as many chunks as llama.cpp printed, and `n_chunks` of them when given.
pub fn assert_ppl_close(got: &str, want: &str, rel: f64, n_chunks: Option<usize>, what: &str) {
    let (g, w) = (ppl_chunks(got), ppl_chunks(want));
    if let Some(n) = n_chunks {
        assert_eq!(g.len(), n, "{what}: {got}");
    }
    assert_eq!(g.len(), w.len(), "{what}: {got}\n{want}");
    for (g, w) in g
        .iter()
        .zip(&w)
        .chain([(&final_ppl(got), &final_ppl(want))])
    {
        assert!((g - w).abs() <= rel * w.abs(), "{what}: {g} vs {w}");
    }
}

/// Each node llama-eval-callback printed: its header (name, op, sources, shape) and its sum.
pub fn evalcb_nodes(log: &str) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for line in log.lines() {
        if let Some((_, h)) = line.split_once("common_debug_cb_eval:") {
            out.push((h.trim().to_string(), f64::NAN));
        } else if let (Some(sum), Some(last)) = (line.trim().strip_prefix("sum = "), out.last_mut())
        {
            last.1 = sum.parse().unwrap_or(f64::NAN);
        }
    }
    out
}

/// Our llama-perplexity on `model` over the shared GPL text as the random-weight fixtures were
/// recorded (`-c 128 --chunks 4 -t 2`): its stdout and stderr, after it succeeded.
pub fn perplexity_run(model: &std::path::Path, what: &str) -> String {
    let gpl = crate::shared_dir().join("reference/text/gpl-3.txt");
    let o = std::process::Command::new(crate::bin("llama-perplexity", "llama-perplexity"))
        .arg("-m")
        .arg(model)
        .arg("-f")
        .arg(gpl)
        .args(["-c", "128", "--chunks", "4", "-t", "2"])
        .env_remove("LLAMA_ARG_MODEL")
        .output()
        .expect("run llama-perplexity");
    let all = format!("{}{}", crate::text(&o.stdout), crate::text(&o.stderr));
    assert!(o.status.success(), "{what}: {all}");
    all
}

/// A log line without its prefix ("0.00.123.456 I "), as the fixtures hold it.
pub fn unprefixed(line: &str) -> &str {
    let mut parts = line.splitn(3, ' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(ts), Some(lv), Some(rest))
            if lv.len() == 1 && ts.chars().all(|c| c.is_ascii_digit() || c == '.') =>
        {
            rest
        }
        _ => line,
    }
}
