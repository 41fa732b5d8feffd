//! Greedy generation on the real SmolLM2-135M-Instruct Q4_1 equals llama.cpp's text for 32
//! tokens (fixtures in tests/fixtures/greedy-smollm2, with the command that made them). Each
//! decode step runs the one-token paths, whose float order must be llama.cpp's: a top-2 logit
//! gap of a few hundredths flips a token otherwise.

use std::process::Command;

const PROMPTS: [&str; 3] = [
    "The capital of France is",
    "Once upon a time",
    "def fibonacci(n):",
];

#[test]
fn greedy_text_equals_llama_cpp_for_32_tokens() {
    let Some(model) = test_fixtures::smollm2_or_skip() else {
        return;
    };
    let bin = test_fixtures::bin("llama-completion", "llama-completion");
    let dir = test_fixtures::repo_root().join("tests/fixtures/greedy-smollm2");
    for (i, prompt) in PROMPTS.iter().enumerate() {
        // llama.cpp's text on this CPU's SIMD class (avx512/ on AVX-512 CPUs, see the README)
        let fixture = test_fixtures::simd_fixture(&dir.join(format!("prompt{}.out", i + 1)));
        let want = std::fs::read(&fixture).unwrap();
        #[rustfmt::skip]
        let o = Command::new(&bin)
            .args(["-m", model.to_str().unwrap(), "-p", prompt, "-n", "32", "--temp", "0",
                "-c", "512", "-no-cnv", "-t", "2"])
            .env_remove("LLAMA_ARG_MODEL")
            .output()
            .expect("run llama-completion");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&want),
            "prompt {prompt:?} ({})",
            fixture.display()
        );
    }
}
