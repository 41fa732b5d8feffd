use super::*;

struct Capture {
    out: String,
    err: String,
}

impl ParseOutput for Capture {
    fn out(&mut self, s: &str) {
        self.out.push_str(s);
    }
    fn err(&mut self, s: &str) {
        self.err.push_str(s);
    }
}

fn run(args: &[&str]) -> (Result<Params, ParseError>, Capture) {
    run_ex(Example::Completion, args)
}

fn run_ex(ex: Example, args: &[&str]) -> (Result<Params, ParseError>, Capture) {
    let argv: Vec<String> = std::iter::once("llama-completion")
        .chain(args.iter().copied())
        .map(String::from)
        .collect();
    let mut cap = Capture {
        out: String::new(),
        err: String::new(),
    };
    let r = parse(&argv, ex, &ParseEnv::default(), &mut cap, None);
    (r, cap)
}

fn ok(args: &[&str]) -> Params {
    let (r, _) = run(args);
    r.unwrap_or_else(|e| panic!("{args:?}: {e:?}"))
}

fn msg(args: &[&str]) -> String {
    match run(args).0 {
        Err(ParseError::Message(m)) => m,
        other => panic!("{args:?}: expected an error, got {other:?}"),
    }
}

#[test]
fn defaults_match_common_params() {
    let p = ok(&["-m", "x.gguf"]);
    assert_eq!(p.n_predict, -1);
    assert_eq!(p.n_ctx, 0);
    assert_eq!(p.n_batch, 2048);
    assert_eq!(p.n_ubatch, 512);
    assert_eq!(p.flash_attn, FlashAttn::Auto);
    assert_eq!(p.n_gpu_layers, GPU_LAYERS_AUTO);
    assert_eq!(p.load_mode, "auto");
    assert_eq!(p.verbosity, 3);
    assert!(p.warmup && p.escape && p.display_prompt);
    assert!(p.n_threads > 0 && p.n_threads_batch == p.n_threads);
    assert_eq!(p.sampling, llama::sampling::SamplingParams::default());
}

#[test]
fn the_greedy_reference_command_parses() {
    let p = ok(&[
        "-m",
        "tiny.gguf",
        "-p",
        "Hello my name is",
        "-n",
        "24",
        "--temp",
        "0",
        "-c",
        "256",
        "-no-cnv",
        "--no-warmup",
    ]);
    assert_eq!(p.prompt, "Hello my name is");
    assert_eq!(p.n_predict, 24);
    assert_eq!(p.sampling.temp, 0.0);
    assert_eq!(p.n_ctx, 256);
    assert_eq!(p.conversation_mode, ConversationMode::Disabled);
    assert!(!p.warmup);
}

#[test]
fn unknown_flag_is_an_invalid_argument() {
    assert_eq!(
        msg(&["-m", "x", "--bogus"]),
        "error: invalid argument: --bogus"
    );
    // removed at the pinned commit
    assert_eq!(
        msg(&["-m", "x", "--mmap"]),
        "error: invalid argument: --mmap"
    );
    assert_eq!(
        msg(&["-m", "x", "--no-mmap"]),
        "error: invalid argument: --no-mmap"
    );
}

#[test]
fn underscores_in_long_flags_become_dashes() {
    let p = ok(&["-m", "x", "--ctx_size", "128", "--no_warmup"]);
    assert_eq!(p.n_ctx, 128);
    assert!(!p.warmup);
}

#[test]
fn missing_value_and_bad_numbers_are_wrapped_with_usage() {
    let m = msg(&["-m", "x", "-n"]);
    assert!(
        m.starts_with("error while handling argument \"-n\": expected value for argument\n\nusage:\n-n,    --predict, --n-predict N"),
        "{m}"
    );
    assert!(
        m.ends_with("\n\nto show complete usage, run with -h"),
        "{m}"
    );
    let m = msg(&["-m", "x", "-c", "abc"]);
    assert!(
        m.starts_with("error while handling argument \"-c\": stoi\n\n"),
        "{m}"
    );
    let m = msg(&["-m", "x", "--temp", "hot"]);
    assert!(
        m.starts_with("error while handling argument \"--temp\": stof\n\n"),
        "{m}"
    );
}

#[test]
fn enum_values_are_checked() {
    let m = msg(&["-m", "x", "-fa", "maybe"]);
    assert!(
        m.contains("error: unknown value for --flash-attn: 'maybe'"),
        "{m}"
    );
    for (v, want) in [
        ("on", FlashAttn::Enabled),
        ("off", FlashAttn::Disabled),
        ("auto", FlashAttn::Auto),
        ("1", FlashAttn::Enabled),
        ("-1", FlashAttn::Auto),
    ] {
        assert_eq!(ok(&["-m", "x", "-fa", v]).flash_attn, want);
    }
    let m = msg(&["-m", "x", "-ctk", "q7_0"]);
    assert!(m.contains(": Unsupported cache type: q7_0\n"), "{m}");
    assert_eq!(
        ok(&["-m", "x", "-ctk", "q8_0", "-ctv", "q8_0"]).cache_type_v,
        ggml::Type::Q8_0
    );
    let m = msg(&["-m", "x", "-lm", "fast"]);
    assert!(m.contains("\"-lm\": invalid value"), "{m}");
    for lm in ["auto", "none", "mmap", "mlock", "mmap+mlock", "dio"] {
        assert_eq!(ok(&["-m", "x", "--load-mode", lm]).load_mode, lm);
    }
    assert!(msg(&["-m", "x", "-sm", "diagonal"]).contains("invalid value"));
    assert!(
        msg(&["-m", "x", "--repeat-last-n", "-5"]).contains("error: invalid repeat-last-n = -5")
    );
}

#[test]
fn gpu_layers_accept_auto_all_and_numbers_with_warnings_without_gpu() {
    let (r, cap) = run(&["-m", "x", "-ngl", "all"]);
    assert_eq!(r.unwrap().n_gpu_layers, GPU_LAYERS_ALL);
    assert_eq!(
        cap.err,
        "warning: no usable GPU found, --gpu-layers option will be ignored\n\
         warning: one possible reason is that llama.cpp was compiled without GPU support\n\
         warning: consult docs/build.md for compilation instructions\n"
    );
    assert_eq!(
        ok(&["-m", "x", "-ngl", "auto"]).n_gpu_layers,
        GPU_LAYERS_AUTO
    );
    assert_eq!(ok(&["-m", "x", "--n-gpu-layers", "99"]).n_gpu_layers, 99);
    assert!(msg(&["-m", "x", "-ngl", "lots"]).contains(": stoi\n"));
}

#[test]
fn model_is_required() {
    assert_eq!(msg(&["-p", "hi"]), "error: --model is required\n");
}

#[test]
fn escapes_are_processed_unless_disabled() {
    assert_eq!(ok(&["-m", "x", "-p", r"a\nb"]).prompt, "a\nb");
    assert_eq!(
        ok(&["-m", "x", "-p", r"a\nb", "--no-escape"]).prompt,
        r"a\nb"
    );
    assert_eq!(
        ok(&["-m", "x", "-r", r"\t", "-e"]).antiprompt,
        vec!["\t".to_string()]
    );
}

#[test]
fn threads_resolve_like_postprocess_cpu_params() {
    let p = ok(&["-m", "x", "-t", "3"]);
    assert_eq!((p.n_threads, p.n_threads_batch), (3, 3));
    let p = ok(&["-m", "x", "-t", "3", "-tb", "5"]);
    assert_eq!((p.n_threads, p.n_threads_batch), (3, 5));
    let p = ok(&["-m", "x", "-t", "0"]);
    assert_eq!(p.n_threads, util::hardware_concurrency());
}

#[test]
fn sampling_flags_land_in_sampling_params() {
    let p = ok(&[
        "-m",
        "x",
        "--seed",
        "42",
        "--top-k",
        "5",
        "--top-p",
        "0.5",
        "--min-p",
        "0.1",
        "--typical",
        "0.9",
        "--repeat-penalty",
        "1.1",
        "--repeat-last-n",
        "32",
        "--presence-penalty",
        "0.2",
        "--frequency-penalty",
        "0.3",
        "--dry-multiplier",
        "0.8",
        "--dry-base",
        "0.5",
        "--dry-allowed-length",
        "3",
        "--dry-penalty-last-n",
        "-1",
        "--dry-sequence-breaker",
        "x",
        "--dry-sequence-breaker",
        "y",
        "--mirostat",
        "2",
        "--mirostat-lr",
        "0.2",
        "--mirostat-ent",
        "4",
        "--xtc-probability",
        "0.5",
        "--xtc-threshold",
        "0.2",
        "--top-nsigma",
        "1.5",
        "--dynatemp-range",
        "0.3",
        "--dynatemp-exp",
        "2",
        "-l",
        "5+2",
        "--ignore-eos",
        "--temp",
        "-3",
        "--sampler-seq",
        "kt",
    ]);
    let s = &p.sampling;
    assert_eq!(s.seed, 42);
    assert_eq!((s.top_k, s.top_p, s.min_p, s.typ_p), (5, 0.5, 0.1, 0.9));
    assert_eq!(
        (
            s.penalty_repeat,
            s.penalty_last_n,
            s.penalty_present,
            s.penalty_freq
        ),
        (1.1, 32, 0.2, 0.3)
    );
    assert_eq!(s.dry_multiplier, 0.8);
    assert_eq!(s.dry_base, 1.75, "a base below 1 is ignored");
    assert_eq!((s.dry_allowed_length, s.dry_penalty_last_n), (3, -1));
    assert_eq!(
        s.dry_sequence_breakers,
        vec!["x".to_string(), "y".to_string()]
    );
    assert_eq!((s.mirostat, s.mirostat_eta, s.mirostat_tau), (2, 0.2, 4.0));
    assert_eq!(
        (s.xtc_probability, s.xtc_threshold, s.top_n_sigma),
        (0.5, 0.2, 1.5)
    );
    assert_eq!((s.dynatemp_range, s.dynatemp_exponent), (0.3, 2.0));
    assert_eq!(s.logit_bias, vec![(5, 2.0)]);
    assert!(s.ignore_eos);
    assert_eq!(s.temp, 0.0, "negative temperatures clamp to 0");
    assert_eq!(
        s.samplers,
        vec![
            llama::sampling::SamplerType::TopK,
            llama::sampling::SamplerType::Temperature
        ]
    );
    assert!(msg(&["-m", "x", "-l", "oops"]).contains(": invalid input format\n"));
    assert_eq!(ok(&["-m", "x", "-s", "-1"]).sampling.seed, u32::MAX);
}

#[test]
fn logging_flags() {
    let p = ok(&[
        "-m",
        "x",
        "-lv",
        "4",
        "--log-prefix",
        "--no-log-timestamps",
        "--log-disable",
    ]);
    assert_eq!(p.verbosity, 4);
    assert_eq!(p.log_prefix, Some(true));
    assert_eq!(p.log_timestamps, Some(false));
    assert!(p.log_disable);
    assert_eq!(ok(&["-m", "x", "-v"]).verbosity, i32::MAX);
}

#[test]
fn override_tensor_and_devices() {
    let p = ok(&["-m", "x", "-ot", "blk\\.0\\..*=CPU,output=CPU"]);
    assert_eq!(p.tensor_buft_overrides.len(), 2);
    let (r, cap) = run(&["-m", "x", "-ot", "a=CUDA0"]);
    assert!(matches!(r, Err(ParseError::Message(m)) if m.contains("unknown buffer type")));
    assert_eq!(cap.out, "Available buffer types:\n  CPU\n");
    assert!(msg(&["-m", "x", "-ot", "noequals"]).contains("invalid value"));
    assert!(msg(&["-m", "x", "-dev", "CUDA0"]).contains("invalid device: CUDA0"));
    assert_eq!(ok(&["-m", "x", "-dev", "none"]).devices, Some(vec![]));
}

#[test]
fn list_devices_and_help_exit_zero() {
    let (r, cap) = run(&["--list-devices"]);
    assert_eq!(r.unwrap_err(), ParseError::Exit(0));
    assert_eq!(cap.out, "Available devices:\n  (none)\n");
    let (r, cap) = run(&["-h"]);
    assert_eq!(r.unwrap_err(), ParseError::Exit(0));
    assert!(
        cap.out
            .starts_with("----- common params -----\n\n-h,    --help, --usage"),
        "{}",
        &cap.out[..80]
    );
    assert!(cap.out.contains("\n\n----- sampling params -----\n\n"));
    assert!(cap
        .out
        .contains("\n\n----- example-specific params -----\n\n"));
    assert!(cap.out.contains("-no-cnv, --no-conversation"));
}

#[test]
fn prompt_file_strips_one_newline_and_missing_file_fails() {
    let dir = std::env::temp_dir().join(format!("args-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("p.txt");
    std::fs::write(&f, "line1\nline2\n\n").unwrap();
    let p = ok(&["-m", "x", "-f", f.to_str().unwrap()]);
    assert_eq!(p.prompt, "line1\nline2\n");
    let m = msg(&["-m", "x", "-f", "/nonexistent/prompt.txt"]);
    assert!(
        m.contains(": error: failed to open file '/nonexistent/prompt.txt'\n"),
        "{m}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tool_specific_options_are_scoped() {
    // completion-only flags do not exist for eval-callback
    let (r, _) = run_ex(Example::Common, &["-m", "x", "-no-cnv"]);
    assert_eq!(
        r.unwrap_err(),
        ParseError::Message("error: invalid argument: -no-cnv".into())
    );
    let (r, _) = run_ex(
        Example::Perplexity,
        &["-m", "x", "--chunks", "8", "--kl-divergence"],
    );
    let p = r.unwrap();
    assert_eq!(p.n_chunks, 8);
    assert!(p.kl_divergence);
    let (r, _) = run_ex(
        Example::Tokenize,
        &["-m", "x", "--ids", "--no-parse-special"],
    );
    let p = r.unwrap();
    assert!(p.tok_ids && !p.parse_special);
}

#[test]
fn repeated_flags_still_apply_in_order() {
    // llama.cpp warns (DEPRECATED ...) and keeps applying: scalars take the last value, lists grow
    let p = ok(&["-m", "x", "-c", "1024", "-c", "2048", "-r", "a", "-r", "b"]);
    assert_eq!(p.n_ctx, 2048);
    assert_eq!(p.antiprompt, vec!["a".to_string(), "b".to_string()]);
}
