//! --log-jsonl: every message one JSON object on stdout, as llama.cpp's common_log writes it
//! (tests/fixtures/log-jsonl/), nothing on stderr.

fn masked(line: &str) -> String {
    // "time":N
    let mut s = String::new();
    let mut rest = line;
    while let Some(i) = rest.find("\"time\":") {
        s.push_str(&rest[..i + 7]);
        rest = rest[i + 7..].trim_start_matches(|c: char| c.is_ascii_digit());
        s.push('T');
    }
    s.push_str(rest);
    for variable in ["system_info: ", "sampler seed: ", "common_perf_print: "] {
        if let Some(i) = s.find(variable) {
            s.truncate(i + variable.len());
        }
    }
    s
}

#[test]
fn completion_log_is_llama_cpp_s_jsonl() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    #[rustfmt::skip]
    let o = test_fixtures::run_tool("llama-completion", &["-m", model.to_str().unwrap(),
        "-p", "Hello my name is", "-n", "4", "--temp", "0", "-no-cnv", "-c", "256", "-t", "2",
        "--log-jsonl"]);
    assert!(o.status.success());
    assert_eq!(test_fixtures::text(&o.stderr), "", "stderr stays empty");
    let want = std::fs::read_to_string(
        test_fixtures::repo_root().join("tests/fixtures/log-jsonl/completion-greedy.jsonl"),
    )
    .unwrap();
    let got = test_fixtures::text(&o.stdout);
    let got: Vec<String> = got.lines().map(masked).collect();
    let want: Vec<String> = want.lines().map(masked).collect();
    assert_eq!(got, want);
    // each line is one object with llama.cpp's keys in its order
    for l in &got {
        assert!(
            l.starts_with("{\"type\":\"log\",\"time\":T,\"level\":\"")
                || l.starts_with(
                    "{\"type\":\"fit_memory_breakdown\",\"data\":{\"unit\":\"MiB\",\"rows\":["
                ),
            "{l}"
        );
    }
}
