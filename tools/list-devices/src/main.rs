//! llama-list-devices: prints the offload devices of the compiled backends and their memory.
//! Answers `-h`/`--help`, `--version` and unknown arguments as the other tools do.

use std::process::ExitCode;

fn main() -> ExitCode {
    let argv0 = std::env::args().next();
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match llama_list_devices::cli::parse(&args) {
        llama_list_devices::cli::Action::List => {
            // registers the compiled backends (the CPU, which is never listed, last)
            ggml_backends::init();
            print!("{}", llama_list_devices::available_devices_text());
            ExitCode::SUCCESS
        }
        llama_list_devices::cli::Action::Help => {
            print!(
                "{}",
                llama_list_devices::cli::usage(argv0.as_deref().unwrap_or("llama-list-devices"))
            );
            ExitCode::SUCCESS
        }
        llama_list_devices::cli::Action::Version => {
            eprint!("{}", build_info::version_text());
            ExitCode::SUCCESS
        }
        llama_list_devices::cli::Action::Invalid(arg) => {
            eprintln!("error: invalid argument: {arg}");
            ExitCode::FAILURE
        }
    }
}
