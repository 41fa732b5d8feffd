//! llama-quantize: quantize a GGUF model to one of llama.cpp's mixtures, with its command
//! line, log lines and output file (byte-identical for the same input and options).

mod progress;

use llama_quantize::args;

use std::process::ExitCode;
use std::time::Instant;

use std::collections::HashMap;
use std::path::Path;

use llama::quant::{imatrix, model_quantize_with_progress, KvOverride, ModelQuantizeParams};

/// The importance matrix of `--imatrix` after the include/exclude filters, with the chunk
/// count and datasets; prints llama.cpp's load_imatrix / prepare_imatrix lines. `Err` means
/// the message is printed and the process exits 1.
struct Prepared {
    values: HashMap<String, Vec<f32>>,
    datasets: Vec<String>,
    chunk_count: i32,
}

fn prepare_imatrix(a: &args::Args) -> Result<Option<Prepared>, ()> {
    let Some(file) = &a.imatrix_file else {
        return Ok(None);
    };
    let loaded = match imatrix::load(Path::new(file)) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}");
            eprintln!("load_imatrix: failed to load imatrix from '{file}'");
            return Err(());
        }
    };
    if !loaded.is_legacy && !loaded.has_metadata {
        eprintln!("load_imatrix: missing imatrix metadata in file {file}");
        return Err(());
    }
    let (mut values, skipped) = imatrix::importance(&loaded);
    for line in skipped {
        eprintln!("{line}");
    }
    if let Some((first, rest)) = loaded.datasets.split_first() {
        let mut line = format!("load_imatrix: imatrix datasets=['{first}'");
        for d in rest {
            line.push_str(&format!(", '{d}'"));
        }
        println!("{line}]");
    }
    println!(
        "load_imatrix: loaded {} importance matrix entries from {} computed on {} chunks",
        values.len(),
        file,
        loaded.chunk_count
    );
    imatrix::filter(&mut values, &a.include_weights, &a.exclude_weights);
    if values.is_empty() {
        return Ok(None);
    }
    println!(
        "prepare_imatrix: have {} importance matrix entries",
        values.len()
    );
    Ok(Some(Prepared {
        values,
        datasets: loaded.datasets,
        chunk_count: loaded.chunk_count,
    }))
}

/// The quantize.imatrix.* keys llama-quantize adds after the user's overrides.
fn imatrix_overrides(file: &str, p: &Prepared) -> Vec<KvOverride> {
    use llama::quant::OverrideValue::Int;
    let mut v = vec![KvOverride::str_truncated("quantize.imatrix.file", file)];
    if let Some(d) = p.datasets.first() {
        v.push(KvOverride::str_truncated("quantize.imatrix.dataset", d));
    }
    v.push(KvOverride {
        key: "quantize.imatrix.entries_count".into(),
        value: Int(p.values.len() as i64),
    });
    if p.chunk_count > 0 {
        v.push(KvOverride {
            key: "quantize.imatrix.chunks_count".into(),
            value: Int(p.chunk_count as i64),
        });
    }
    v
}

fn main() -> ExitCode {
    // Ctrl+C or a kill must not leave the half-written output's temporary behind.
    atomic_file::install_signal_cleanup();
    let argv: Vec<String> = std::env::args().collect();
    // llama.cpp's llama-quantize has no --version; ours answers it like every other tool
    if argv.get(1).is_some_and(|a| a == "--version") {
        eprint!("{}", build_info::version_text());
        return ExitCode::SUCCESS;
    }
    let mut a = match args::parse(&argv) {
        Ok(a) => a,
        Err(args::Exit(code)) => return ExitCode::from(code),
    };
    let Ok(prepared) = prepare_imatrix(&a) else {
        return ExitCode::from(1);
    };
    let mut kv_overrides = std::mem::take(&mut a.kv_overrides);
    if let (Some(p), Some(file)) = (&prepared, &a.imatrix_file) {
        kv_overrides.extend(imatrix_overrides(file, p));
    }

    eprintln!(
        "version: {} (build {}, commit {})",
        env!("CARGO_PKG_VERSION"),
        env!("LLAMA_BUILD_NUMBER"),
        env!("LLAMA_BUILD_COMMIT")
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
        keep_split: a.keep_split,
        kv_overrides,
        prune_layers: a.prune_layers,
        imatrix: prepared.map(|p| p.values),
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
