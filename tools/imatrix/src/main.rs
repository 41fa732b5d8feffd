//! llama-imatrix: computes the importance matrix of a model over a text (-f), combines it with
//! earlier ones (--in-file), and writes it in llama.cpp's GGUF or legacy .dat format (-o,
//! --output-format); `--show-statistics` summarises one file instead.

use std::sync::{Arc, Mutex};

use common::args::{Example, Params, ParseEnv, ParseError, ParseOutput, StdOutput};
use common::{log_err, log_inf, log_out, log_wrn};
use llama_imatrix::callback;
use llama_imatrix::collector::{Collector, Settings};
use llama_imatrix::compute::{compute_imatrix, ComputeOptions};
use llama_imatrix::save;
use llama_imatrix::statistics;

fn print_usage(out: &mut dyn ParseOutput, exe: &str) {
    out.out("\nexample usage:\n");
    out.out(&format!(
        "\n    {exe} \\\n       -m model.gguf -f some-text.txt [-o imatrix.gguf] [--output-format {{gguf,dat}}] [--no-ppl] \\\n       [--process-output] [--chunk 123] [--save-frequency 0] [--output-frequency 10] \\\n       [--in-file imatrix-prev-0.gguf --in-file imatrix-prev-1.gguf ...] [--parse-special] \\\n       [--show-statistics] [...]\n"
    ));
    out.out("\n");
}

/// Whether the command line names one of these flags (long flags may use `_`).
fn given(argv: &[String], names: &[&str]) -> bool {
    argv.iter()
        .skip(1)
        .any(|a| names.contains(&a.replace('_', "-").as_str()))
}

/// The text as bytes: the file itself (one trailing newline dropped) since escapes are off by
/// default and the bytes are tokenized as they are; the parser's text with `--escape` or `-p`.
fn prompt_bytes(argv: &[String], p: &Params) -> Vec<u8> {
    if p.prompt_file.is_empty() || p.escape {
        return p.prompt.clone().into_bytes();
    }
    match std::fs::read(&p.prompt_file) {
        Ok(mut b) => {
            if !given(argv, &["-bf", "--binary-file"]) && b.last() == Some(&b'\n') {
                b.pop();
            }
            b
        }
        Err(_) => p.prompt.clone().into_bytes(),
    }
}

fn settings(p: &Params) -> Settings {
    Settings {
        out_file: p.out_file.clone(),
        imat_dat: p.imat_dat,
        n_out_freq: p.n_out_freq,
        n_save_freq: p.n_save_freq,
        process_output: p.process_output,
        prompt_file: p.prompt_file.clone(),
        chunk_size: if p.n_parallel > 0 {
            p.n_ctx / p.n_parallel
        } else {
            p.n_ctx
        },
    }
}

/// Loads one `--in-file` into the collector; the cause is printed on failure.
fn load_into(c: &mut Collector, file: &str) -> bool {
    let m = match llama::quant::imatrix::load(std::path::Path::new(file)) {
        Ok(m) => m,
        Err(e) => {
            log_err!("main : failed to load {} ({})\n", file, e);
            return false;
        }
    };
    if let Err(e) = c.combine(&m) {
        log_err!("main : failed to load {} ({})\n", file, e);
        return false;
    }
    true
}

fn show_statistics(p: &Params) -> bool {
    if p.in_files.len() != 1 {
        log_err!("\nError: a single imatrix file is required to compute tensor statistics\n\n");
        return false;
    }
    let file = &p.in_files[0];
    let mut c = Collector::new(settings(p));
    if !load_into(&mut c, file) {
        log_err!("\nError: {} is not a valid imatrix file\n\n", file);
        return false;
    }
    let mut ts = Vec::new();
    for (name, st) in &c.stats {
        match statistics::compute(name, st) {
            Ok(t) => ts.push(t),
            Err(e) => log_err!("{}\n", e),
        }
    }
    if ts.is_empty() {
        log_err!("Error: cannot compute statistics for {}\n\n", file);
        return false;
    }
    statistics::compute_cossim(&mut ts);
    for entry in statistics::report(file, ts) {
        log_inf!("{}", entry);
    }
    true
}

/// The final save; a failure of this or of an earlier save is an error.
fn final_save(c: &Arc<Mutex<Collector>>) -> bool {
    let c = c.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = &c.save_error {
        log_err!("main : {}\n", e);
        return false;
    }
    if let Err(e) = save::save(&c, -1) {
        log_err!("main : {}\n", e);
        return false;
    }
    true
}

fn main() {
    std::process::exit(real_main());
}

fn real_main() -> i32 {
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let exe = argv
        .first()
        .cloned()
        .unwrap_or_else(|| "llama-imatrix".into());
    llama::backend_init();
    let env = ParseEnv::detect();
    let usage = move |out: &mut dyn ParseOutput| print_usage(out, &exe);
    let mut params =
        match common::args::parse(&argv, Example::Imatrix, &env, &mut StdOutput, Some(&usage)) {
            Ok(p) => p,
            Err(ParseError::Exit(code)) => return code,
            Err(ParseError::Message(m)) => {
                eprintln!("{m}");
                return 1;
            }
        };
    common::log::init();
    common::args::apply_log_settings(&params);

    if params.show_statistics {
        return if show_statistics(&params) { 0 } else { 1 };
    }

    let n_ctx = params.n_ctx;
    if n_ctx <= 0 {
        log_err!("main: imatrix tool requires '--ctx-size' > 0\n");
        return 1;
    }
    if params.n_out_freq <= 0 {
        // llama.cpp divides by it
        log_err!("main: --output-frequency must be > 0\n");
        return 1;
    }
    {
        let n_seq = (params.n_batch / n_ctx).max(1);
        let n_kv = n_seq * n_ctx;
        params.n_parallel = n_seq;
        params.n_ctx = n_kv;
        params.n_batch = params.n_batch.min(n_kv);
    }
    // every file is written through a temporary: Ctrl+C must not leave one behind
    atomic_file::install_signal_cleanup();

    let collector = Arc::new(Mutex::new(Collector::new(settings(&params))));
    {
        let mut c = collector.lock().unwrap_or_else(|e| e.into_inner());
        for f in &params.in_files {
            log_inf!("main : loading imatrix from '{}'\n", f);
            if !load_into(&mut c, f) {
                return 1;
            }
        }
    }

    let prompt = prompt_bytes(&argv, &params);
    if prompt.is_empty() {
        log_inf!("No prompt provided; combining precomputed matrices only.\n");
        if params.in_files.is_empty() {
            log_err!(
                "Error: No prompt provided and no precomputed matrices (--in-file) to combine.\n"
            );
            return 1;
        }
        if params.in_files.len() == 1 {
            log_inf!("main : saving imatrix to '{}'\n", params.out_file);
        } else {
            log_inf!("main : saving combined imatrix to '{}'\n", params.out_file);
        }
        return if final_save(&collector) { 0 } else { 1 };
    }

    params.warmup = false;
    let cb = callback::make(collector.clone());
    let Ok(common::startup::Loaded { model, mut ctx }) =
        common::startup::init_from_params_with(&mut params, Some(cb))
    else {
        log_err!("main : failed to init\n");
        return 1;
    };
    let n_ctx_train = model.n_ctx_train() as i32;
    if params.n_ctx > n_ctx_train {
        log_wrn!(
            "main: model was trained on only {} context tokens ({} specified)\n",
            n_ctx_train,
            params.n_ctx
        );
    }
    log_inf!("\n");
    log_inf!("{}\n", common::startup::system_info(&params));

    let opts = ComputeOptions {
        n_ctx: n_ctx as usize,
        n_batch: params.n_batch.max(1) as usize,
        n_chunks: params.n_chunks,
        i_chunk: params.i_chunk,
        compute_ppl: params.compute_ppl,
        parse_special: params.parse_special,
    };
    if !compute_imatrix(&mut ctx, &prompt, &opts, &collector) {
        return 1;
    }
    if !final_save(&collector) {
        return 1;
    }
    log_out!("\n");
    ctx.perf_print();
    0
}
