//! llama-bench end to end on the reference model: the markdown table, the machine-readable
//! formats (each checked with its standard parser), --plot, --list-devices and bad arguments.

use std::process::{Command, Output, Stdio};

fn bench(args: &[&str]) -> Output {
    Command::new(test_fixtures::bin("llama-bench", "llama-bench"))
        .args(args)
        .output()
        .expect("run llama-bench")
}

fn model() -> Option<String> {
    test_fixtures::reference_model_or_skip().map(|p| p.display().to_string())
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn markdown_table_and_json_from_one_run() {
    let Some(m) = model() else { return };
    let out = bench(&[
        "-m", &m, "-p", "16", "-n", "4", "-t", "1,2", "-r", "2", "-o", "json", "-oe", "md",
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");

    // stdout: JSON with one object per test, the 42 fields and the samples
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("json output parses");
    let tests = v.as_array().expect("an array");
    assert_eq!(tests.len(), 4);
    let kinds: Vec<(i64, i64, i64)> = tests
        .iter()
        .map(|t| {
            (
                t["n_threads"].as_i64().unwrap(),
                t["n_prompt"].as_i64().unwrap(),
                t["n_gen"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(kinds, vec![(1, 16, 0), (1, 0, 4), (2, 16, 0), (2, 0, 4)]);
    for t in tests {
        assert_eq!(t.as_object().unwrap().len(), 44);
        assert_eq!(t["samples_ns"].as_array().unwrap().len(), 2);
        assert!(t["avg_ts"].as_f64().unwrap() > 0.0);
        assert_eq!(t["model_filename"], m.as_str());
        assert_eq!(t["backends"], "CPU");
        // the mean of the samples is what avg_ts reports
        let ts: Vec<f64> = t["samples_ts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        let mean = ts.iter().sum::<f64>() / ts.len() as f64;
        assert!((mean - t["avg_ts"].as_f64().unwrap()).abs() / mean < 1e-4);
    }

    // stderr: the markdown table with the threads column and the build footer
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with('|')).collect();
    assert_eq!(
        lines[0],
        "| model                          |       size |     params | backend    | threads |            test |                  t/s |"
    );
    assert_eq!(lines.len(), 2 + 4);
    assert!(
        lines[2].starts_with(
            "| llama ?B all F32               | 307.51 MiB |    80.61 M | CPU        |"
        ),
        "{}",
        lines[2]
    );
    assert!(lines[2].contains("|       1 |            pp16 |"));
    assert!(lines[5].contains("|       2 |             tg4 |"));
    for l in &lines[2..] {
        assert!(l.contains(" ± "), "{l}");
    }
    let footer = stderr.lines().last().unwrap();
    assert!(
        footer.starts_with("build: ") && footer.ends_with(')'),
        "{footer}"
    );
}

#[test]
fn csv_jsonl_and_sql_load_with_their_tools() {
    let Some(m) = model() else { return };
    let common = [
        "-m",
        m.as_str(),
        "-p",
        "8",
        "-n",
        "0",
        "-pg",
        "8,2",
        "-r",
        "1",
        "--no-warmup",
    ];
    let run = |fmt: &str| {
        let mut a: Vec<&str> = common.to_vec();
        a.extend(["-o", fmt]);
        let out = bench(&a);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };

    let csv = run("csv");
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0].split(',').count(), 42);
    assert!(
        rows[0].starts_with("build_commit,build_number,cpu_info,gpu_info,backends,model_filename,")
    );
    assert!(
        rows[2].contains(",\"8\",\"2\",\"0\","),
        "pp8+tg2 row: {}",
        rows[2]
    );

    let jsonl = run("jsonl");
    let objs: Vec<serde_json::Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).expect("jsonl line parses"))
        .collect();
    assert_eq!(objs.len(), 2);
    assert_eq!(objs[1]["n_gen"], 2);

    let sql = run("sql");
    let Some(sqlite3) = test_fixtures::sqlite3_or_skip() else {
        return;
    };
    let mut child = Command::new(sqlite3)
        .arg(":memory:")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sqlite3");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(sql.as_bytes()).unwrap();
        stdin
            .write_all(b"SELECT count(*), sum(n_prompt), min(avg_ts) > 0 FROM llama_bench;\n")
            .unwrap();
    }
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success() && o.stderr.is_empty(),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(text(&o.stdout).trim(), "2|16|1");
}

#[test]
fn plot_draws_a_line_per_test() {
    let Some(m) = model() else { return };
    let dir = test_fixtures::scratch_dir("bench_plot");
    let svg = dir.join("threads.svg");
    let out = bench(&[
        "-m",
        &m,
        "-p",
        "8",
        "-n",
        "2",
        "-t",
        "1,2",
        "-r",
        "1",
        "--no-warmup",
        "-o",
        "none",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty(), "-o none prints nothing");
    let s = std::fs::read_to_string(&svg).expect("plot written");
    assert!(s.starts_with("<svg"));
    assert_eq!(
        s.matches("<polyline").count(),
        2,
        "pp8 and tg2 along threads"
    );
    assert!(s.contains(">threads</text>"));
    assert!(s.contains("data-label=\"pp8\"") && s.contains("data-label=\"tg2\""));
}

#[test]
fn progress_lines_and_depth() {
    let Some(m) = model() else { return };
    let out = bench(&[
        "-m",
        &m,
        "-p",
        "0",
        "-n",
        "2",
        "-d",
        "8",
        "-r",
        "2",
        "--progress",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("llama-bench: benchmark 1/1: starting"));
    assert!(err.contains("llama-bench: benchmark 1/1: warmup generation run"));
    assert!(err.contains("llama-bench: benchmark 1/1: depth run 1/2\n"));
    assert!(err.contains("llama-bench: benchmark 1/1: depth run 2/2 (cached)"));
    assert!(err.contains("llama-bench: benchmark 1/1: generation run 2/2"));
    assert!(text(&out.stdout).contains("|        tg2 @ d8 |"));
}

#[test]
fn bad_arguments_and_missing_model() {
    let out = bench(&["-t", "1-x"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("error: invalid range format"), "{err}");
    assert!(
        err.contains("error: invalid parameter for argument: -t"),
        "{err}"
    );
    assert!(text(&out.stdout).starts_with("usage: "));

    let out = bench(&["--frobnicate"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("error: invalid parameter for argument: --frobnicate"));

    let out = bench(&[
        "-m",
        "/nonexistent/model.gguf",
        "-p",
        "8",
        "-n",
        "0",
        "-r",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr)
        .contains("llama_bench: error: failed to load model '/nonexistent/model.gguf'"));
    // the table header and footer are still printed
    assert!(text(&out.stdout).contains("build: "));
}

#[test]
fn list_devices_and_help() {
    let out = bench(&["--list-devices"]);
    assert!(out.status.success());
    assert!(text(&out.stdout).starts_with("Available devices:\n"));
    let out = bench(&["-h"]);
    assert!(out.status.success());
    assert!(text(&out.stdout).contains("-r, --repetitions <n>"));
}
