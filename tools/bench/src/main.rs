//! llama-bench: prompt-processing and generation throughput over a grid of parameters.

use llama_bench::params::{self, Command, Env};
use llama_bench::plot;
use llama_bench::printers::{self, Printer};
use llama_bench::record::TestRecord;
use std::io::Write;

mod run;

/// Writes each result as soon as it is measured, to stdout and/or stderr.
struct Out {
    stdout: Option<Box<dyn Printer>>,
    stderr: Option<Box<dyn Printer>>,
}

fn emit(to_stderr: bool, s: &str) {
    if to_stderr {
        let mut e = std::io::stderr().lock();
        let _ = e.write_all(s.as_bytes());
        let _ = e.flush();
    } else {
        let mut o = std::io::stdout().lock();
        let _ = o.write_all(s.as_bytes());
        let _ = o.flush();
    }
}

impl run::Sink for Out {
    fn result(&mut self, t: &TestRecord) {
        if let Some(p) = self.stdout.as_mut() {
            emit(false, &p.test(t));
        }
        if let Some(p) = self.stderr.as_mut() {
            emit(true, &p.test(t));
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
    let argv0 = argv
        .first()
        .cloned()
        .unwrap_or_else(|| "llama-bench".to_string());

    if cfg!(debug_assertions) {
        eprintln!("warning: asserts enabled, performance may be affected");
    }

    llama::backend_init();
    let devices = ggml::backend::devices();
    let is_offload = |name: &str| {
        devices
            .iter()
            .any(|d| d.name() == name && d.kind() != ggml::backend::DeviceKind::Cpu)
    };
    let mut bufts: Vec<String> = devices
        .iter()
        .map(|d| d.buffer_type().name().to_string())
        .collect();
    bufts.sort();
    bufts.dedup();
    let env = Env {
        is_offload_device: &is_offload,
        buffer_types: &bufts,
    };

    // a process started without even argv[0] has no arguments either
    let p = match params::parse(argv.get(1..).unwrap_or(&[]), &env) {
        Ok(Command::Help) => {
            print!("{}", llama_bench::usage::usage(&argv0));
            return 0;
        }
        Ok(Command::Version) => {
            eprint!("{}", build_info::version_text());
            return 0;
        }
        Ok(Command::ListDevices) => {
            print!("{}", llama_list_devices::available_devices_text());
            return 0;
        }
        Ok(Command::Run(p)) => p,
        Err(e) => {
            if let Some(d) = &e.detail {
                eprintln!("error: {d}");
            }
            eprintln!("error: invalid parameter for argument: {}", e.arg);
            print!("{}", llama_bench::usage::usage(&argv0));
            return 1;
        }
    };

    // libllama's log is silenced unless -v, as llama-bench installs a null callback
    if !p.verbose {
        ggml::log::set_log_callback(Some(Box::new(|_, _| {})));
    }

    // llama_numa_init: ggml places threads per node only on a multi-node machine, which this
    // build does not do; say so rather than ignore the flag
    if let Some(mode) = &p.numa {
        let nodes = ggml_cpu::placement::numa_nodes();
        if nodes > 1 {
            eprintln!("llama_bench: warning: --numa {mode}: {nodes} NUMA nodes found, but this build does not place threads or memory per node");
        } else if p.verbose {
            eprintln!("llama_bench: --numa {mode}: single NUMA node, nothing to place");
        }
    }
    if let Err((why, errno)) = ggml_cpu::placement::set_process_priority(p.prio) {
        // set_process_priority's own warning, then llama-bench's error
        eprintln!(
            "set_process_priority: failed to set process priority {} : {why} ({errno})",
            p.prio
        );
        eprintln!("llama_bench: error: failed to set process priority");
        return 1;
    }

    let machine = run::machine();
    let mut out = Out {
        stdout: printers::create(p.output_format, &machine.build_commit, machine.build_number),
        stderr: printers::create(
            p.output_format_stderr,
            &machine.build_commit,
            machine.build_number,
        ),
    };
    if let Some(pr) = out.stdout.as_mut() {
        emit(false, &pr.header(&p, &machine.backends));
    }
    if let Some(pr) = out.stderr.as_mut() {
        emit(true, &pr.header(&p, &machine.backends));
    }

    let (results, failed) = match run::run(&p, &mut out) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };

    if let Some(pr) = out.stdout.as_mut() {
        emit(false, &pr.footer());
    }
    if let Some(pr) = out.stderr.as_mut() {
        emit(true, &pr.footer());
    }

    if let Some(path) = &p.plot {
        let names: Vec<String> = p
            .model
            .iter()
            .map(|m| {
                std::path::Path::new(m)
                    .file_name()
                    .map_or(m.clone(), |n| n.to_string_lossy().into_owned())
            })
            .collect();
        let title = format!("llama-bench: {}", names.join(", "));
        if let Err(e) = plot::write_svg(path, &results, &title) {
            eprintln!("error: failed to write {}: {e}", path.display());
            return 1;
        }
    }
    if failed == 0 {
        0
    } else {
        1
    }
}
