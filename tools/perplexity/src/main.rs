//! llama-perplexity: perplexity over a text file (`-f`), optionally saving the log-probabilities
//! for a later `--kl-divergence` run against another model (`--kl-divergence-base FILE`).

use common::args::{Example, Params, ParseEnv, ParseError, StdOutput};
use common::{log_err, log_inf, log_out, log_wrn};
use llama_perplexity::kld::kl_divergence;
use llama_perplexity::ppl::{perplexity, PplOptions};
use llama_perplexity::tasks;
use std::path::PathBuf;

fn parse_env() -> ParseEnv {
    let devs = ggml::backend::devices();
    let mut buft_names: Vec<String> = devs
        .iter()
        .map(|d| d.buffer_type().name().to_string())
        .collect();
    buft_names.dedup();
    ParseEnv {
        supports_gpu_offload: devs
            .iter()
            .any(|d| d.kind() != ggml::backend::DeviceKind::Cpu),
        devices: llama_list_devices::offload_devices(&devs)
            .into_iter()
            .map(|d| common::args::DeviceInfo {
                name: d.name,
                description: d.description,
                total_bytes: d.total as u64,
                free_bytes: d.free as u64,
            })
            .collect(),
        buft_names,
        ..ParseEnv::default()
    }
}

/// llama-perplexity's own defaults, set before parsing in llama.cpp (`n_ctx = 512`,
/// `escape = false`): applied here where the command line and environment left them unset.
fn apply_tool_defaults(argv: &[String], p: &mut Params) {
    let given = |names: &[&str]| {
        argv.iter()
            .skip(1)
            .any(|a| names.contains(&a.replace('_', "-").as_str()))
    };
    if !given(&["-c", "--ctx-size"]) && std::env::var_os("LLAMA_ARG_CTX_SIZE").is_none() {
        p.n_ctx = 512;
    }
    if !given(&["-e", "--escape"]) && !p.prompt_file.is_empty() {
        // the parser unescaped the file's text; perplexity scores it verbatim
        if let Ok(bytes) = std::fs::read(&p.prompt_file) {
            let mut text = String::from_utf8_lossy(&bytes).into_owned();
            if text.ends_with('\n') {
                text.pop();
            }
            p.prompt = text;
        }
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
    let env = parse_env();
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
    common::log::init();
    common::args::apply_log_settings(&params);

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
        Ok(x) => x,
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
    if params.hellaswag {
        tasks::hellaswag(&mut ctx, &params.prompt, params.hellaswag_tasks, n_batch);
    } else if params.winogrande {
        tasks::winogrande(&mut ctx, &params.prompt, params.winogrande_tasks, n_batch);
    } else if params.multiple_choice {
        // the task file is binary: read it as bytes rather than through the text prompt
        let bytes = if params.prompt_file.is_empty() {
            params.prompt.clone().into_bytes()
        } else {
            std::fs::read(&params.prompt_file).unwrap_or_default()
        };
        tasks::multiple_choice(&mut ctx, &bytes, params.multiple_choice_tasks, n_batch);
    } else if params.kl_divergence {
        kl_divergence(&mut ctx, &opts);
    } else {
        // failures were reported; llama.cpp still exits with 0 after them
        let _ = perplexity(&mut ctx, &params.prompt, &opts);
    }

    log_out!("\n");
    ctx.perf_print();
    common::startup::memory_breakdown_print(&ctx);
    0
}
