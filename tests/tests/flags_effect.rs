//! Issue 15 ("no flag that silently does nothing"): a table of flags, each with what it must
//! change in llama-completion's output or log, or the line that says plainly why this build
//! cannot do it (docs/flags.md lists the latter).

use std::process::{Command, Output, Stdio};

fn run(model: &str, extra: &[&str]) -> Output {
    let bin = test_fixtures::bin("llama-completion", "llama-completion");
    let mut args = vec![
        "-m",
        model,
        "-v",
        "-p",
        "hello world",
        "-n",
        "2",
        "--temp",
        "0",
        "-no-cnv",
        "-fit",
        "off",
    ];
    args.extend_from_slice(extra);
    Command::new(bin)
        .args(&args)
        .env_remove("LLAMA_ARG_MODEL")
        .stdin(Stdio::null())
        .output()
        .expect("run llama-completion")
}

enum Want {
    /// stderr holds this text and the run succeeds
    Log(&'static str),
    /// stdout holds this text and the run succeeds
    Out(&'static str),
    /// the run fails with status 1 and this text on stderr
    Fails(&'static str),
    /// stderr holds this text, and a run with the other flags instead does not
    LogVs(&'static str, &'static [&'static str]),
}

#[test]
fn each_flag_has_its_effect_or_says_why_not() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let m = model.to_str().unwrap();
    #[rustfmt::skip]
    let table: &[(&[&str], Want)] = &[
        (&["--override-kv", "llama.context_length=int:300"], Want::Log("print_info: n_ctx_train           = 300")),
        (&["--rope-scale", "2"], Want::Log("llama_context: freq_scale            = 0.5")),
        (&["--rope-scale", "2", "--rope-scaling", "none"], Want::LogVs("llama_context: freq_scale            = 1\n", &["--rope-scale", "2"])),
        (&["--rope-scaling", "yarn", "--rope-scale", "4"], Want::Log("llama_init_from_model: custom YaRN scaling detected, re-adjusting n_ctx_train(4096)...\n")),
        (&["--rope-scaling", "yarn", "--rope-scale", "4", "-c", "0"], Want::Log("llama_init_from_model: n_ctx_train adjusted to 16384\n")),
        (&["--rope-scaling", "yarn", "--rope-scale", "3", "--yarn-orig-ctx", "1000"], Want::Log("n_ctx_train adjusted to 3000\n")),
        (&["-co", "on"], Want::Out("\x1b[33mhello world\x1b[0m")),
        (&["--log-jsonl"], Want::Out("{\"type\":\"log\",\"time\":")),
        (&["--lora", "adapter.gguf"], Want::Fails("failed to open 'adapter.gguf': No such file or directory")),
        (&["-C", "0x1", "--cpu-strict", "1", "-t", "1"], Want::Log("ggml_threadpool_new: cpumask = 0x1, strict_cpu = 1, prio = 0, poll = 50")),
        (&["--poll", "0"], Want::Log("ggml_threadpool_new: cpumask = 0x0, strict_cpu = 0, prio = 0, poll = 0")),
        (&["--prio", "-1"], Want::Log("ggml_threadpool_new: cpumask = 0x0, strict_cpu = 0, prio = -1, poll = 50")),
        (&["--numa", "isolate"], Want::Log("--numa isolate: ")),
        (&["--reasoning-budget", "10"], Want::Log("warning: --reasoning-budget has no effect in llama-completion")),
    ];
    // the baseline has none of these
    let base = run(m, &[]);
    assert!(base.status.success());
    let base_err = String::from_utf8_lossy(&base.stderr).into_owned();
    let base_out = String::from_utf8_lossy(&base.stdout).into_owned();
    for (flags, want) in table {
        let o = run(m, flags);
        let err = String::from_utf8_lossy(&o.stderr);
        let out = String::from_utf8_lossy(&o.stdout);
        match want {
            Want::Log(t) => {
                assert!(o.status.success(), "{flags:?}: {err}");
                assert!(err.contains(t), "{flags:?}: no {t:?} in the log");
                assert!(
                    !base_err.contains(t),
                    "{flags:?}: {t:?} is there without the flag too"
                );
            }
            Want::Out(t) => {
                assert!(o.status.success(), "{flags:?}: {err}");
                assert!(out.contains(t), "{flags:?}: {out:?}");
                assert!(!base_out.contains(t));
            }
            Want::LogVs(t, other) => {
                assert!(o.status.success(), "{flags:?}: {err}");
                assert!(err.contains(t), "{flags:?}: no {t:?} in the log");
                let o2 = run(m, other);
                assert!(
                    !String::from_utf8_lossy(&o2.stderr).contains(t),
                    "{other:?} has {t:?} too"
                );
            }
            Want::Fails(t) => {
                assert_eq!(o.status.code(), Some(1), "{flags:?}");
                assert!(err.contains(t), "{flags:?}: {err}");
            }
        }
    }
}
