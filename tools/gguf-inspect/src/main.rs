//! llama-gguf-inspect: what a user wants to know about a GGUF file without loading the model:
//! header, every KV pair (in llama.cpp's loader dump layout), the tensors, the file type,
//! parameter count and size. `--json` for scripts, `--key` for one value.

mod json;
mod markdown;
mod report;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use gguf::GgufFile;

#[derive(Parser, Debug)]
#[command(
    name = "llama-gguf-inspect",
    disable_version_flag = true,
    about = "Show the metadata and tensors of a GGUF file"
)]
struct Args {
    /// The GGUF file
    #[arg(required_unless_present = "version")]
    file: Option<PathBuf>,
    /// Show version and build info (the same line as every other tool's)
    #[arg(long)]
    version: bool,
    /// Print a complete machine-readable dump as JSON
    #[arg(long)]
    json: bool,
    /// Print arrays in full (JSON) / values uncut (text)
    #[arg(long)]
    full_arrays: bool,
    /// Leave out the tensor list
    #[arg(long)]
    no_tensors: bool,
    /// Print the value of one key alone (arrays one element a line) and exit
    #[arg(long, value_name = "KEY")]
    key: Option<String>,
    /// Print gguf_dump.py's markdown report
    #[arg(long)]
    markdown: bool,
    /// Print the absolute offset of the tensor data (as gguf_dump.py --data-offset)
    #[arg(long)]
    data_offset: bool,
    /// Print the data alignment (as gguf_dump.py --data-alignment)
    #[arg(long)]
    data_alignment: bool,
    /// Also describe the file's layout on stderr while reading it
    #[arg(long)]
    verbose: bool,
}

fn run(args: &Args, path: &Path) -> Result<(), String> {
    // Only the metadata is read: inspecting a 100 GB model must not read its weights.
    if args.verbose {
        eprintln!("* Loading: {}", path.display());
    }
    let file = GgufFile::open_metadata(path).map_err(|e| e.to_string())?;
    if args.verbose {
        eprintln!(
            "* GGUF v{}: {} key/value pair(s), {} tensor(s); alignment {}, tensor data at offset {} of {} bytes",
            file.version,
            file.kv.len(),
            file.tensors.len(),
            file.alignment,
            file.data_offset,
            file.file_size
        );
    }
    let mut out = std::io::stdout().lock();
    let bytes = if let Some(key) = &args.key {
        let v = file
            .get(key)
            .ok_or_else(|| format!("key '{key}' not found in {}", path.display()))?;
        report::key_value(v)
    } else if args.json {
        let mut s = json::dump(&file, path, args.full_arrays, !args.no_tensors).to_string();
        s.push('\n');
        s.into_bytes()
    } else if args.markdown {
        markdown::dump(&file, path, !args.no_tensors).into_bytes()
    } else if args.data_offset {
        format!("{}\n", file.data_offset).into_bytes()
    } else if args.data_alignment {
        format!("{}\n", file.alignment).into_bytes()
    } else {
        report::text(&file, path, args.full_arrays, !args.no_tensors)
    };
    match out.write_all(&bytes).and_then(|_| out.flush()) {
        // A closed pipe (`| head`) is not an error worth reporting.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("writing output: {e}")),
        _ => Ok(()),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let Some(path) = args.file.as_deref().filter(|_| !args.version) else {
        eprint!("{}", build_info::version_text());
        return ExitCode::SUCCESS;
    };
    match run(&args, path) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
