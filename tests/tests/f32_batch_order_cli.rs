//! F32 prompts sum like llama.cpp's tinyBLAS in every column, leftover columns of the register
//! tiles included: the reference model's greedy text equals llama.cpp's where it used to part
//! at a near-tie (tests/fixtures/f32-batch/).

#[test]
fn greedy_text_of_f32_prompts_matches_llama_cpp() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let m = model.to_str().unwrap();
    let prompts = [
        "Once upon a time",
        "In 1492, Columbus sailed the ocean blue. He",
    ];
    let mut case = 0;
    for fa in ["on", "off"] {
        for p in prompts {
            case += 1;
            #[rustfmt::skip]
            let o = test_fixtures::run_tool("llama-completion", &["-m", m, "-p", p, "-n", "24",
                "--temp", "0", "-no-cnv", "-c", "256", "-t", "2", "-fa", fa]);
            assert!(o.status.success(), "{}", test_fixtures::text(&o.stderr));
            let want = std::fs::read_to_string(
                test_fixtures::repo_root().join(format!("tests/fixtures/f32-batch/case{case}.txt")),
            )
            .unwrap();
            assert_eq!(
                test_fixtures::text(&o.stdout),
                want,
                "case {case}: -fa {fa} {p:?}"
            );
        }
    }
}
