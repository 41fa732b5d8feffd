//! In-process tokenization speed: load a vocabulary, tokenize a file `--reps` times (no BOS,
//! special tokens not parsed, as test-tokenizer-0) and print "<tokens> <best seconds>".
//! Used by scripts/bench-tokenize.

use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: tokenize_bench VOCAB.gguf TEXT [REPS]");
        std::process::exit(2);
    }
    let reps: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(3);
    let file = match gguf::GgufFile::open_metadata(&args[1]) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    ggml::log::set_log_callback(Some(Box::new(|_, _| {})));
    let vocab = match llama::vocab::Vocab::from_gguf(&file) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let text = match std::fs::read(&args[2]) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {}: {e}", args[2]);
            std::process::exit(1);
        }
    };
    let mut best = f64::INFINITY;
    let mut n = 0;
    for _ in 0..reps.max(1) {
        let t0 = Instant::now();
        n = vocab.tokenize(&text, false, false).len();
        best = best.min(t0.elapsed().as_secs_f64());
    }
    println!("{n} {best:.6}");
}
