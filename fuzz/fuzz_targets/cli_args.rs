//! Fuzz the command-line parsers: common's (completion, perplexity, eval-callback, tokenize),
//! llama-bench's and llama-quantize's. The input is argv split on NUL bytes (argv[0] is fixed),
//! the first byte picks the parser. Any argv must give Ok or Err: no panic, no exit, no hang.
#![no_main]

use common::args::{parse, Example, ParseEnv, ParseOutput};
use libfuzzer_sys::fuzz_target;

/// Usage and error text go nowhere: only the parse result matters.
struct Sink;
impl ParseOutput for Sink {
    fn out(&mut self, _: &str) {}
    fn err(&mut self, _: &str) {}
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let args: Vec<String> = rest
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    // Options that read a file would read whatever the input names (/dev/zero, a directory,
    // the corpus); the parsers' handling of files that do not exist is what can be fuzzed.
    if args
        .iter()
        .any(|a| !a.is_empty() && std::path::Path::new(a).exists())
    {
        return;
    }
    match sel % 6 {
        k @ 0..=3 => {
            let (ex, exe) = [
                (Example::Completion, "llama-completion"),
                (Example::Perplexity, "llama-perplexity"),
                (Example::Common, "llama-eval-callback"),
                (Example::Tokenize, "llama-tokenize"),
            ][k as usize];
            let mut argv = vec![exe.to_string()];
            argv.extend(args);
            let env = ParseEnv::default();
            let _ = parse(&argv, ex, &env, &mut Sink, None);
        }
        4 => {
            let bufts = ["CPU".to_string(), "CUDA0".to_string()];
            let env = llama_bench::params::Env {
                is_offload_device: &|d: &str| d == "CUDA0",
                buffer_types: &bufts,
            };
            let _ = llama_bench::params::parse(&args, &env);
        }
        _ => {
            let mut argv = vec!["llama-quantize".to_string()];
            argv.extend(args);
            let _ = llama_quantize::args::parse(&argv);
        }
    }
});
