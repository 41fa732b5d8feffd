//! The fit step (llama.cpp's common_fit_params) on Vulkan (lavapipe, named by
//! GGML_VK_VISIBLE_DEVICES=0): it projects the device's memory for the placement, shrinks
//! nothing when the margin holds, and otherwise refills the layers back to front; its lines and
//! its decision equal those recorded from llama.cpp's own Vulkan build
//! (tests/fixtures/vulkan-fit/README.md). Skips without a Vulkan device (fails under CI=true).

use std::path::Path;
use std::process::Output;

use test_fixtures::llama_logs::unprefixed;
use test_fixtures::vulkan::vulkan0_or_skip as vulkan_or_skip;

fn run(name: &str, args: &[&str]) -> Output {
    test_fixtures::vulkan::run(name, args, Some("0"))
}

/// The fit step's lines of a run: from "fitting params to device memory" to "fitting params to
/// free memory took" (its seconds dropped), prefixes removed.
fn fit_lines(stderr: &str) -> Vec<String> {
    let lines: Vec<&str> = stderr.lines().map(unprefixed).collect();
    let start = lines
        .iter()
        .position(|l| l.contains("fitting params to device memory"))
        .unwrap_or_else(|| panic!("no fit step in:\n{stderr}"));
    let end = lines
        .iter()
        .position(|l| l.contains("fitting params to free memory took"))
        .unwrap_or_else(|| panic!("no end of the fit step in:\n{stderr}"));
    lines[start..=end]
        .iter()
        .map(|l| match l.find(" took ") {
            Some(i) => l[..i].to_string(),
            None => l.to_string(),
        })
        .collect()
}

fn fixture(name: &str) -> String {
    let p = test_fixtures::repo_root()
        .join("tests/fixtures/vulkan-fit")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn completion(model: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "-m",
        model.to_str().unwrap(),
        "-p",
        "hi",
        "-n",
        "1",
        "--temp",
        "0",
        "-no-cnv",
        "-lv",
        "4",
    ];
    args.extend_from_slice(extra);
    let o = run("llama-completion", &args);
    let err = test_fixtures::text(&o.stderr);
    assert!(o.status.success(), "{extra:?}:\n{err}");
    err
}

/// Whether `got` is llama.cpp's line `want` with every number within `tol` of its own (the
/// words equal).
fn close(got: &str, want: &str, tol: i64) -> bool {
    let (g, w): (Vec<&str>, Vec<&str>) = (
        got.split_whitespace().collect(),
        want.split_whitespace().collect(),
    );
    g.len() == w.len()
        && g.iter().zip(&w).all(|(a, b)| {
            let num = |t: &str| t.trim_end_matches(',').parse::<i64>().ok();
            match (num(a), num(b)) {
                (Some(x), Some(y)) => (x - y).abs() <= tol,
                _ => a == b,
            }
        })
}

/// Runs with `extra` and checks the fit step's lines against the fixture; `tol` MiB of slack
/// on the numbers (0: the lines are llama.cpp's exactly).
fn check(model: &Path, extra: &[&str], fixture_name: &str, tol: i64) -> String {
    let err = completion(model, extra);
    let want: Vec<String> = fit_lines(&fixture(fixture_name));
    let got = fit_lines(&err);
    let same = got.len() == want.len() && got.iter().zip(&want).all(|(g, w)| close(g, w, tol));
    assert!(
        same,
        "{extra:?}: the fit step differs from llama.cpp's\nours:\n{}\nllama.cpp:\n{}",
        got.join("\n"),
        want.join("\n")
    );
    err
}

#[test]
fn fit_lines_and_placement_are_llama_cpp_s_on_lavapipe() {
    if !vulkan_or_skip() {
        return;
    }
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    // everything fits: the device's projection, no change. Our Vulkan0 compute buffer is 0.25
    // MiB larger than llama.cpp's (its graph_optimize reorders the nodes; docs/vulkan.md), so
    // the projected MiB may be one more here
    check(&model, &["-ngl", "99"], "ngl99.txt", 1);
    // a 1M-cell KV cache leaves less than the 1024 MiB margin free: with -ngl set by the user
    // the step gives up (and the run keeps 5/5 layers)
    let err = check(
        &model,
        &["-ngl", "99", "-c", "1040000"],
        "ngl99-c1040000.txt",
        0,
    );
    assert!(err.contains("offloaded 5/5 layers to GPU"), "{err}");
    // with -ngl left to it, it refills the layers back to front and keeps 4 on the device
    let err = check(&model, &["-c", "1040000"], "ngl-default-c1040000.txt", 0);
    let placement: Vec<String> = err
        .lines()
        .map(unprefixed)
        .filter(|l| {
            l.contains("offload") || l.contains("KV buffer size") || l.contains("model buffer size")
        })
        .map(str::to_string)
        .collect();
    assert_eq!(
        placement.join("\n"),
        fixture("ngl-default-c1040000.placement.txt").trim_end(),
        "the placement after the fit step differs from llama.cpp's"
    );
}
