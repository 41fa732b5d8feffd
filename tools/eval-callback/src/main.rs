//! llama-eval-callback: decodes the prompt as one batch and prints every graph node the
//! scheduler computes (name, op, source shapes, a summary of the values and their sum).
//! Beyond llama.cpp: `--filter REGEX` prints only the nodes whose name matches, and
//! `--graph FILE.svg|FILE.dot` draws the computed graph.

mod callback;

use callback::CallbackOptions;
use common::args::{Example, ParseEnv, ParseError, StdOutput};
use common::{log_err, log_inf, log_out};
use llama_eval_callback::graph::{self, GraphRecord};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Our flags, taken out of the command line before the common parser sees the rest.
struct Extra {
    graph: Option<PathBuf>,
    filter: Option<String>,
}

fn take_extra(argv: &[String]) -> Result<(Vec<String>, Extra), String> {
    let mut rest = Vec::with_capacity(argv.len());
    let mut extra = Extra {
        graph: None,
        filter: None,
    };
    let mut i = 0;
    while i < argv.len() {
        let a = argv[i].replace('_', "-");
        if a == "--graph" || a == "--filter" {
            let v = argv
                .get(i + 1)
                .ok_or_else(|| format!("error: {a} expects a value"))?
                .clone();
            if a == "--graph" {
                extra.graph = Some(PathBuf::from(v));
            } else {
                extra.filter = Some(v);
            }
            i += 2;
            continue;
        }
        rest.push(argv[i].clone());
        i += 1;
    }
    Ok((rest, extra))
}

fn main() {
    std::process::exit(real_main());
}

fn real_main() -> i32 {
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let (argv, extra) = match take_extra(&argv) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    llama::backend_init();
    let env = ParseEnv::detect();
    let mut params = match common::args::parse(&argv, Example::Common, &env, &mut StdOutput, None) {
        Ok(p) => p,
        Err(ParseError::Exit(code)) => return code,
        Err(ParseError::Message(m)) => {
            eprintln!("{m}");
            return 1;
        }
    };
    common::log::init();
    common::args::apply_log_settings(&params);

    let filter = match extra
        .filter
        .as_deref()
        .map(|f| regex::Regex::new(&format!("^(?:{f})")))
    {
        None => None,
        Some(Ok(r)) => Some(r),
        Some(Err(e)) => {
            log_err!(
                "error: invalid --filter regex '{}': {}\n",
                extra.filter.as_deref().unwrap_or(""),
                e
            );
            return 1;
        }
    };
    let record = extra
        .graph
        .as_ref()
        .map(|_| Arc::new(Mutex::new(GraphRecord::default())));
    let cb = callback::make(CallbackOptions {
        filter,
        graph: record.clone(),
        n: 3,
    });

    params.warmup = false;
    let Ok(common::startup::Loaded { model, mut ctx }) =
        common::startup::init_from_params_with(&mut params, Some(cb))
    else {
        log_err!("main : failed to init\n");
        return 1;
    };

    log_inf!("\n");
    log_inf!("{}\n", common::startup::system_info(&params));
    log_inf!("\n");

    let vocab = model.vocab();
    let tokens = vocab.tokenize(params.prompt.as_bytes(), vocab.add_bos(), true);
    log_inf!("number of input tokens = {}\n", tokens.len());
    for t in &tokens {
        log_inf!("  {}\n", t);
    }
    if tokens.is_empty() {
        log_err!(
            "run : there are not input tokens to process - (try to provide a prompt with '-p')\n"
        );
        return 1;
    }
    if ctx.decode(&llama::Batch::get_one(&tokens)) != 0 {
        log_err!("run : failed to eval\n");
        return 1;
    }

    log_out!("\n");
    ctx.perf_print();

    if let (Some(path), Some(rec)) = (&extra.graph, &record) {
        let (n_nodes, n_splits) = ctx.graph_nodes_splits();
        let title = format!(
            "{} — {} token(s), {} nodes, {} splits",
            model.desc(),
            tokens.len(),
            n_nodes,
            n_splits
        );
        let g = rec.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = graph::write(path, &g, &title) {
            log_err!("error: {}\n", e);
            return 1;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn extra_flags_are_taken_out() {
        let (rest, e) = take_extra(&v(
            "llama-eval-callback -m x --graph g.svg -p hi --filter attn_.* -n 1",
        ))
        .unwrap();
        assert_eq!(rest, v("llama-eval-callback -m x -p hi -n 1"));
        assert_eq!(e.graph, Some(PathBuf::from("g.svg")));
        assert_eq!(e.filter.as_deref(), Some("attn_.*"));
        assert!(take_extra(&v("x --graph")).is_err());
    }
}
