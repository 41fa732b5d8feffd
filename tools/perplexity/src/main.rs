//! llama-perplexity: perplexity over a text file (`-f`), optionally saving the log-probabilities
//! for a later `--kl-divergence` run against another model (`--kl-divergence-base FILE`).

use common::args::{Example, Params, ParseEnv, ParseError, StdOutput};
use common::{log_err, log_inf, log_out, log_wrn};
use llama_perplexity::kld::kl_divergence;
use llama_perplexity::ppl::{perplexity, PplOptions};
use llama_perplexity::tasks;
use std::path::PathBuf;

/// Whether the command line names one of these flags (long flags may use `_`).
fn given(argv: &[String], names: &[&str]) -> bool {
    argv.iter()
        .skip(1)
        .any(|a| names.contains(&a.replace('_', "-").as_str()))
}

/// llama-perplexity sets `n_ctx = 512` before parsing, in llama.cpp; applied here when neither
/// the command line nor the environment set it.
fn apply_tool_defaults(argv: &[String], p: &mut Params) {
    if !given(argv, &["-c", "--ctx-size"]) && std::env::var_os("LLAMA_ARG_CTX_SIZE").is_none() {
        p.n_ctx = 512;
    }
}

/// The text to score, as bytes: the file itself (one trailing newline dropped for `-f`), since
/// llama-perplexity turns escape processing off by default and tokenizes the bytes as they are;
/// the parser's text when `--escape` asks for processing or the prompt came from `-p`.
fn prompt_bytes(argv: &[String], p: &Params) -> Vec<u8> {
    if p.prompt_file.is_empty() || given(argv, &["-e", "--escape"]) {
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

fn main() {
    std::process::exit(real_main());
}

fn real_main() -> i32 {
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    llama::backend_init();
    let env = ParseEnv::detect();
    let mut params =
        match common::args::parse(&argv, Example::Perplexity, &env, &mut StdOutput, None) {
            Ok(p) => p,
            Err(ParseError::Exit(code)) => return code,
            Err(ParseError::Message(m)) => {
                eprintln!("{m}");
                return 1;
            }
        };
    apply_tool_defaults(&argv, &mut params);
    if !params.logits_file.is_empty() && !params.kl_divergence {
        // the base logits file can reach gigabytes: an interrupted run must not leave its temporary
        atomic_file::install_signal_cleanup();
    }
    common::log::init();
    common::args::apply_log_settings(&params);

    // the scoring runs on rayon's pool: made here, a thread the OS refuses is an error rather
    // than a panic at the first chunk
    if let Err(e) = rayon::ThreadPoolBuilder::new().build_global() {
        log_err!(
            "llama_perplexity: failed to create the scoring threads: {}\n",
            e
        );
        return 1;
    }
    let n_ctx = params.n_ctx;
    if n_ctx <= 0 {
        log_err!("llama_perplexity: perplexity tool requires '--ctx-size' > 0\n");
        return 1;
    }
    let task_mode = params.hellaswag || params.winogrande || params.multiple_choice;
    if !task_mode {
        // several chunks decode together as separate sequences when the batch holds them
        let n_seq = (params.n_batch / n_ctx).max(1);
        let n_kv = n_seq * n_ctx;
        params.n_parallel = n_seq;
        params.n_ctx = n_kv;
        params.n_batch = params.n_batch.min(n_kv);
    } else {
        params.n_batch = params.n_batch.min(params.n_ctx);
        params.n_parallel = params.n_parallel.max(4);
        params.kv_unified = true;
    }
    if params.ppl_stride > 0 {
        log_inf!(
            "Will perform strided perplexity calculation -> adjusting context size from {} to {}\n",
            params.n_ctx,
            params.n_ctx + params.ppl_stride / 2
        );
        params.n_ctx += params.ppl_stride / 2;
    }

    let (model, mut ctx) = match common::startup::init_from_params(&mut params) {
        Ok(l) => (l.model, l.ctx),
        Err(common::startup::InitError::Model) => {
            log_err!("llama_perplexity: unable to load model\n");
            return 1;
        }
        Err(common::startup::InitError::Context) => {
            log_err!("llama_perplexity: failed to create context\n");
            return 1;
        }
    };
    let n_ctx_train = model.n_ctx_train() as i32;
    if params.n_ctx > n_ctx_train {
        log_wrn!(
            "llama_perplexity: model was trained on only {} context tokens ({} specified)\n",
            n_ctx_train,
            params.n_ctx
        );
    }
    log_inf!("\n");
    log_inf!("{}\n", common::startup::system_info(&params));

    let opts = PplOptions {
        n_ctx: n_ctx as usize,
        n_batch: params.n_batch.max(1) as usize,
        n_chunks: params.n_chunks,
        ppl_stride: params.ppl_stride,
        ppl_output_type: params.ppl_output_type,
        logits_file: (!params.logits_file.is_empty()).then(|| PathBuf::from(&params.logits_file)),
    };
    let n_batch = params.n_batch.max(1) as usize;
    let prompt = prompt_bytes(&argv, &params);
    if params.hellaswag {
        tasks::hellaswag(
            &mut ctx,
            &String::from_utf8_lossy(&prompt),
            params.hellaswag_tasks,
            n_batch,
        );
    } else if params.winogrande {
        tasks::winogrande(
            &mut ctx,
            &String::from_utf8_lossy(&prompt),
            params.winogrande_tasks,
            n_batch,
        );
    } else if params.multiple_choice {
        // the task file is binary: scored from its bytes, not the parser's text
        tasks::multiple_choice(&mut ctx, &prompt, params.multiple_choice_tasks, n_batch);
    }
    // a failure was logged; llama.cpp exits with 0 after it, a script is better told
    let ok = if params.hellaswag || params.winogrande || params.multiple_choice {
        true
    } else if params.kl_divergence {
        kl_divergence(&mut ctx, &opts)
    } else {
        perplexity(&mut ctx, &prompt, &opts).is_some()
    };

    log_out!("\n");
    ctx.perf_print();
    common::startup::memory_breakdown_print(&ctx);
    if ok {
        0
    } else {
        1
    }
}
