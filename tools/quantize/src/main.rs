//! llama-quantize: quantize a GGUF model to one of llama.cpp's mixtures, with its command
//! line, log lines and output file (byte-identical for the same input and options).

mod args;
mod progress;

use std::process::ExitCode;
use std::time::Instant;

use llama::quant::{model_quantize_with_progress, ModelQuantizeParams};

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let a = match args::parse(&argv) {
        Ok(a) => a,
        Err(args::Exit(code)) => return ExitCode::from(code),
    };

    eprintln!(
        "version: {} (build {}, commit {})",
        env!("CARGO_PKG_VERSION"),
        env!("QUANTIZE_BUILD_NUMBER"),
        env!("QUANTIZE_BUILD_COMMIT")
    );
    eprintln!(
        "built with rustc for {} {}",
        std::env::consts::OS,
        std::env::consts::ARCH
    );
    let mut line = if a.dry_run {
        format!(
            "llama_quantize: calculating quantization size for '{}' as {}",
            a.input, a.ftype_name
        )
    } else {
        format!(
            "llama_quantize: quantizing '{}' to '{}' as {}",
            a.input, a.output, a.ftype_name
        )
    };
    if a.nthread > 0 {
        line.push_str(&format!(" using {} threads", a.nthread));
    }
    eprintln!("{line}");

    let t_main = Instant::now();
    let nthread = if a.nthread > 0 {
        a.nthread as usize
    } else {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    };
    let params = ModelQuantizeParams {
        types: a.types,
        nthread,
        allow_requantize: a.allow_requantize,
        dry_run: a.dry_run,
    };
    let t_start = Instant::now();
    let bar = progress::Bar::new();
    let result = model_quantize_with_progress(
        a.input.as_ref(),
        a.output.as_ref(),
        &params,
        &|done, total| bar.set(done, total),
    );
    bar.finish();
    if let Err(e) = result {
        ggml::log_error!("llama_model_quantize: failed to quantize: {}\n", e);
        eprintln!(
            "llama_quantize: failed to quantize model from '{}'",
            a.input
        );
        return ExitCode::from(1);
    }
    let t_quantize = t_start.elapsed();
    println!();
    println!(
        "llama_quantize: quantize time = {:8.2} ms",
        t_quantize.as_secs_f64() * 1e3
    );
    println!(
        "llama_quantize:    total time = {:8.2} ms",
        t_main.elapsed().as_secs_f64() * 1e3
    );
    ExitCode::SUCCESS
}
