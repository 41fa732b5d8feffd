//! llama-gguf-split: split a GGUF model into shards, or merge shards back into one file, byte
//! for byte as llama.cpp's gguf-split does.

mod args;
mod kv;
mod merge;
mod naming;
mod split;

use std::process::ExitCode;

use args::{Operation, Parsed};

fn main() -> ExitCode {
    // Ctrl+C or a kill must not leave a half-written shard's temporary behind.
    atomic_file::install_signal_cleanup();
    let argv: Vec<String> = std::env::args().collect();
    let exe = argv
        .first()
        .map(String::as_str)
        .unwrap_or("llama-gguf-split");
    let params = match args::parse(&argv) {
        Parsed::Run(p) => p,
        Parsed::Help => {
            print!("{}", args::usage(exe));
            return ExitCode::SUCCESS;
        }
        Parsed::Version => {
            eprint!("{}", build_info::version_text());
            return ExitCode::SUCCESS;
        }
        Parsed::Error(e) => {
            eprintln!("{e}");
            print!("{}", args::usage(exe));
            return ExitCode::FAILURE;
        }
    };
    let result = match params.operation {
        Operation::Split => split::run(&params),
        Operation::Merge => merge::run(&params),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("{e}");
            }
            ExitCode::FAILURE
        }
    }
}
