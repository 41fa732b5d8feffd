//! llama-eval-callback end to end on the reference model: the same nodes (names, ops, shapes)
//! as llama.cpp's log (shared/reference/logs/eval-callback-hi*.log) with values within 1e-3
//! relative or 1e-4 absolute, plus --filter and --graph.

use std::process::{Command, Output};

fn evalcb(args: &[&str]) -> Output {
    Command::new(test_fixtures::bin(
        "llama-eval-callback",
        "llama-eval-callback",
    ))
    .args(args)
    .output()
    .expect("run llama-eval-callback")
}

/// One printed node: its header line and the numbers of its value block (values and sums).
#[derive(Debug)]
struct Node {
    header: String,
    numbers: Vec<f64>,
    layout: Vec<String>,
}

/// The nodes of a log (other lines, such as log messages, are skipped).
fn nodes(log: &str) -> Vec<Node> {
    let mut out: Vec<Node> = Vec::new();
    for line in log.lines() {
        if line.starts_with("common_debug_cb_eval: ") {
            out.push(Node {
                header: line.to_string(),
                numbers: vec![],
                layout: vec![],
            });
            continue;
        }
        let Some(n) = out.last_mut() else { continue };
        if !line.starts_with("    ") {
            continue;
        }
        if let Some(sum) = line.trim().strip_prefix("sum = ") {
            n.numbers.push(sum.parse().unwrap());
            n.layout.push("sum".into());
        } else {
            // the shape of the block without the values: brackets, ellipses, counts per row
            let mut count = 0;
            for item in line
                .trim()
                .trim_start_matches('[')
                .trim_end_matches("],")
                .split(',')
            {
                if let Ok(v) = item.trim().parse::<f64>() {
                    n.numbers.push(v);
                    count += 1;
                }
            }
            let skeleton: String = line
                .chars()
                .filter(|c| !c.is_ascii_digit() && *c != '.' && *c != '-')
                .collect();
            n.layout.push(format!(
                "{} {}",
                skeleton.split_whitespace().collect::<Vec<_>>().join(" "),
                count
            ));
        }
    }
    out
}

fn compare(ours: &str, reference: &str) {
    let (a, b) = (nodes(ours), nodes(reference));
    assert!(!b.is_empty());
    let names = |v: &[Node]| v.iter().map(|n| n.header.clone()).collect::<Vec<_>>();
    assert_eq!(names(&a), names(&b), "node headers differ");
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.layout, y.layout, "value layout of {}", x.header);
        assert_eq!(x.numbers.len(), y.numbers.len(), "{}", x.header);
        for (p, q) in x.numbers.iter().zip(&y.numbers) {
            let ok = (p - q).abs() <= 1e-4 + 1e-6 || (p - q).abs() <= 1e-3 * q.abs();
            assert!(ok, "{}: {p} vs llama.cpp {q}", x.header);
        }
    }
}

fn reference(name: &str) -> String {
    std::fs::read_to_string(
        test_fixtures::shared_dir()
            .join("reference/logs")
            .join(name),
    )
    .unwrap()
}

#[test]
fn every_node_as_llama_cpp_prints_it() {
    let Some(m) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let out = evalcb(&[
        "-m",
        m.to_str().unwrap(),
        "-p",
        "hi",
        "-n",
        "1",
        "--seed",
        "1",
        "-c",
        "256",
    ]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("number of input tokens = 1"));
    assert!(stderr.contains("  6023"));
    compare(&stdout, &reference("eval-callback-hi.log"));
}

#[test]
fn without_flash_attention() {
    let Some(m) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let log = reference("eval-callback-hi-fa-off.log");
    let cmd = log.lines().next().unwrap();
    assert!(cmd.contains("-fa off"), "{cmd}");
    let out = evalcb(&[
        "-m",
        m.to_str().unwrap(),
        "-p",
        "hi",
        "-n",
        "1",
        "--seed",
        "1",
        "-c",
        "256",
        "-fa",
        "off",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    compare(&String::from_utf8_lossy(&out.stdout), &log);
}

#[test]
fn filter_and_graph() {
    let Some(m) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = test_fixtures::scratch_dir("evalcb_graph");
    let svg = dir.join("g.svg");
    let dot = dir.join("g.dot");
    let m = m.to_str().unwrap().to_string();
    let out = evalcb(&[
        "-m",
        &m,
        "-p",
        "hi",
        "-c",
        "256",
        "--filter",
        "l_out-",
        "--graph",
        svg.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = nodes(&String::from_utf8_lossy(&out.stdout));
    let want: Vec<Node> = nodes(&reference("eval-callback-hi.log"))
        .into_iter()
        .filter(|n| {
            n.header["common_debug_cb_eval: ".len()..]
                .trim_start()
                .starts_with("l_out-")
        })
        .collect();
    assert_eq!(got.len(), 4);
    assert_eq!(
        got.iter().map(|n| &n.header).collect::<Vec<_>>(),
        want.iter().map(|n| &n.header).collect::<Vec<_>>()
    );

    let s = std::fs::read_to_string(&svg).expect("svg written");
    assert!(s.starts_with("<svg"));
    // every node of the graph is drawn, filtered or not
    let all = nodes(&reference("eval-callback-hi.log")).len();
    assert_eq!(s.matches("rx=\"4\"").count(), all);
    assert!(s.contains("split 0: CPU"));

    let out = evalcb(&[
        "-m",
        &m,
        "-p",
        "hi",
        "-c",
        "256",
        "--filter",
        "nothing-matches",
        "--graph",
        dot.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    assert!(nodes(&String::from_utf8_lossy(&out.stdout)).is_empty());
    let d = std::fs::read_to_string(&dot).expect("dot written");
    assert!(d.starts_with("digraph"));
    assert!(d.contains("token_embd.weight"));

    let out = evalcb(&[
        "-m",
        &m,
        "-p",
        "hi",
        "--graph",
        dir.join("g.png").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let out = evalcb(&["-m", &m, "-p", "hi", "--filter", "(unclosed"]);
    assert_eq!(out.status.code(), Some(1));
}
