//! Command line parsing as llama.cpp's split_params_parse does it: options first, each starting
//! with `--` (underscores read as dashes), then exactly GGUF_IN and GGUF_OUT.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Split,
    Merge,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// At most this many tensors per shard.
    Tensors(u32),
    /// At most this many bytes of (padded) tensor data per shard.
    Bytes(u64),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    pub operation: Operation,
    pub mode: Mode,
    pub input: String,
    pub output: String,
    pub no_tensor_first_split: bool,
    pub dry_run: bool,
    pub delete_splits: bool,
}

pub const DEFAULT_SPLIT_TENSORS: u32 = 128;

/// What parsing ends in besides parameters.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    Run(Params),
    Help,
    Version,
    /// The line to print before the usage; the exit status is 1.
    Error(String),
}

pub fn usage(executable: &str) -> String {
    format!(
        "\n\
usage: {executable} [options] GGUF_IN GGUF_OUT\n\
\n\
Apply a GGUF operation on IN to OUT.\n\
options:\n\
\x20 -h, --help              show this help message and exit\n\
\x20 --version               show version and build info\n\
\x20 --split                 split GGUF to multiple GGUF (enabled by default)\n\
\x20 --merge                 merge multiple GGUF to a single GGUF\n\
\x20 --split-max-tensors     max tensors in each split (default: {DEFAULT_SPLIT_TENSORS})\n\
\x20 --split-max-size N(M|G) max size per split\n\
\x20 --no-tensor-first-split do not add tensors to the first split (disabled by default)\n\
\x20 --dry-run               only print out a split plan and exit, without writing any new files\n\
\x20 --delete-splits         delete the split files during merge to free up disk space WARNING: this option is unsafe and will leave you in an unrecoverable state if something fails during the merge\n\
\n"
    )
}

/// The leading integer of `s` as C's atoi/sscanf("%d") read it: blanks, a sign, digits.
/// `None` when there are no digits; out of range values saturate.
fn leading_int(s: &str) -> Option<i64> {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, rest) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let digits: &str = &rest[..rest.bytes().take_while(u8::is_ascii_digit).count()];
    if digits.is_empty() {
        return None;
    }
    let mut v: i64 = 0;
    for d in digits.bytes() {
        v = v.saturating_mul(10).saturating_add((d - b'0') as i64);
    }
    let v = if neg { -v } else { v };
    Some(v.clamp(i32::MIN as i64, i32::MAX as i64))
}

/// "128M" or "4G" in bytes (decimal units, as llama.cpp counts them).
fn size_to_bytes(s: &str) -> Result<u64, String> {
    let unit: u64 = match s.chars().last() {
        Some('M') => 1000 * 1000,
        Some('G') => 1000 * 1000 * 1000,
        other => {
            return Err(format!(
                "error: supported units are M (megabytes) or G (gigabytes), but got: {}",
                other.map(String::from).unwrap_or_default()
            ))
        }
    };
    match leading_int(s) {
        Some(n) if n > 0 => Ok(n as u64 * unit),
        _ => Err("error: size must be a positive value".into()),
    }
}

pub fn parse(args: &[String]) -> Parsed {
    match parse_ex(args) {
        Ok(p) => p,
        Err(e) => Parsed::Error(e),
    }
}

fn parse_ex(args: &[String]) -> Result<Parsed, String> {
    let mut operation = None;
    let mut mode = None;
    let mut no_tensor_first_split = false;
    let mut dry_run = false;
    let mut delete_splits = false;
    let mut missing_value = None;

    let mut i = 1;
    while i < args.len() && args[i].starts_with("--") {
        let arg = args[i].replace('_', "-");
        match arg.as_str() {
            "--help" => return Ok(Parsed::Help),
            "--version" => return Ok(Parsed::Version),
            "--dry-run" => dry_run = true,
            "--no-tensor-first-split" => no_tensor_first_split = true,
            "--delete-splits" => delete_splits = true,
            "--merge" | "--split" => {
                let op = if arg == "--merge" {
                    Operation::Merge
                } else {
                    Operation::Split
                };
                if operation.is_some_and(|o| o != op) {
                    return Err(
                        "error: either --split or --merge can be specified, but not both".into(),
                    );
                }
                operation = Some(op);
            }
            "--split-max-tensors" | "--split-max-size" => {
                i += 1;
                let Some(value) = args.get(i) else {
                    missing_value = Some(arg);
                    break;
                };
                let by_size = arg == "--split-max-size";
                if mode.is_some_and(|m| matches!(m, Mode::Bytes(_)) != by_size) {
                    return Err("error: either --split-max-tensors or --split-max-size can be specified, but not both".into());
                }
                mode = Some(if by_size {
                    Mode::Bytes(size_to_bytes(value)?)
                } else {
                    // llama.cpp divides by this count (a 0 crashes it); C's remainder ignores
                    // the sign of the divisor, so a negative count acts as its magnitude.
                    match leading_int(value).map(|n| n.unsigned_abs() as u32) {
                        Some(n) if n > 0 => Mode::Tensors(n),
                        _ => {
                            return Err(format!(
                                "error: invalid parameter for argument: {arg} (must be a non-zero count, got '{value}')"
                            ))
                        }
                    }
                });
            }
            _ => return Err(format!("error: unknown argument: {arg}")),
        }
        i += 1;
    }
    if let Some(arg) = missing_value {
        return Err(format!("error: invalid parameter for argument: {arg}"));
    }
    if args.len().saturating_sub(i) != 2 {
        return Err("error: bad arguments".into());
    }
    Ok(Parsed::Run(Params {
        operation: operation.unwrap_or(Operation::Split),
        mode: mode.unwrap_or(Mode::Tensors(DEFAULT_SPLIT_TENSORS)),
        input: args[i].clone(),
        output: args[i + 1].clone(),
        no_tensor_first_split,
        dry_run,
        delete_splits,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Parsed {
        let mut v = vec!["llama-gguf-split".to_string()];
        v.extend(args.iter().map(|s| s.to_string()));
        parse(&v)
    }

    fn run(args: &[&str]) -> Params {
        match p(args) {
            Parsed::Run(p) => p,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn defaults_are_split_by_128_tensors() {
        let r = run(&["in.gguf", "out"]);
        assert_eq!(r.operation, Operation::Split);
        assert_eq!(r.mode, Mode::Tensors(128));
        assert_eq!((r.input.as_str(), r.output.as_str()), ("in.gguf", "out"));
        assert!(!r.dry_run && !r.no_tensor_first_split && !r.delete_splits);
    }

    #[test]
    fn values_and_underscores() {
        let r = run(&[
            "--split_max_size",
            "2G",
            "--no_tensor_first_split",
            "a",
            "b",
        ]);
        assert_eq!(r.mode, Mode::Bytes(2_000_000_000));
        assert!(r.no_tensor_first_split);
        assert_eq!(
            run(&["--split-max-tensors", "-3", "a", "b"]).mode,
            Mode::Tensors(3)
        );
        assert_eq!(
            run(&["--split-max-size", "1.5M", "a", "b"]).mode,
            Mode::Bytes(1_000_000)
        );
        assert_eq!(
            run(&["--merge", "--merge", "a", "b"]).operation,
            Operation::Merge
        );
    }

    #[test]
    fn errors_match_llama_cpp() {
        let err = |args: &[&str]| match p(args) {
            Parsed::Error(e) => e,
            other => panic!("{args:?}: {other:?}"),
        };
        assert_eq!(
            err(&["--split", "--merge", "a", "b"]),
            "error: either --split or --merge can be specified, but not both"
        );
        assert_eq!(
            err(&[
                "--split-max-size",
                "1M",
                "--split-max-tensors",
                "2",
                "a",
                "b"
            ]),
            "error: either --split-max-tensors or --split-max-size can be specified, but not both"
        );
        assert_eq!(
            err(&["--split-max-size", "1K", "a", "b"]),
            "error: supported units are M (megabytes) or G (gigabytes), but got: K"
        );
        assert_eq!(
            err(&["--split-max-size", "0M", "a", "b"]),
            "error: size must be a positive value"
        );
        assert_eq!(
            err(&["--split-max-size", "M", "a", "b"]),
            "error: size must be a positive value"
        );
        assert_eq!(
            err(&["--split-max-tensors"]),
            "error: invalid parameter for argument: --split-max-tensors"
        );
        assert_eq!(
            err(&["--bogus", "a", "b"]),
            "error: unknown argument: --bogus"
        );
        assert_eq!(err(&["a"]), "error: bad arguments");
        assert_eq!(err(&["a", "b", "--dry-run"]), "error: bad arguments");
        // only arguments starting with "--" are options
        assert_eq!(err(&["-h"]), "error: bad arguments");
        assert!(err(&["--split-max-tensors", "0", "a", "b"])
            .starts_with("error: invalid parameter for argument: --split-max-tensors"));
        assert_eq!(p(&["--help", "--bogus"]), Parsed::Help);
        assert_eq!(p(&["--version"]), Parsed::Version);
    }
}
