//! llama-bench's command line: llama.cpp's hand-written argument loop (`parse_cmd_params`).
//! Most test parameters take comma-separated lists and may be repeated; the values accumulate and
//! the cartesian product of all lists is benchmarked.

use std::fmt;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    None,
    Csv,
    Json,
    Jsonl,
    Md,
    Sql,
}

impl OutputFormat {
    pub fn parse(s: &str) -> Option<OutputFormat> {
        Some(match s {
            "none" => OutputFormat::None,
            "csv" => OutputFormat::Csv,
            "json" => OutputFormat::Json,
            "jsonl" => OutputFormat::Jsonl,
            "md" => OutputFormat::Md,
            "sql" => OutputFormat::Sql,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::None => "none",
            OutputFormat::Csv => "csv",
            OutputFormat::Json => "json",
            OutputFormat::Jsonl => "jsonl",
            OutputFormat::Md => "md",
            OutputFormat::Sql => "sql",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitMode {
    None,
    Layer,
    Row,
    Tensor,
}

impl SplitMode {
    pub fn name(self) -> &'static str {
        match self {
            SplitMode::None => "none",
            SplitMode::Layer => "layer",
            SplitMode::Row => "row",
            SplitMode::Tensor => "tensor",
        }
    }
}

/// `-lm`: the same modes, names and parsing as the loader.
pub use llama::LoadMode;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LazyMode {
    Off,
    Auto,
    On,
}

impl LazyMode {
    pub fn name(self) -> &'static str {
        match self {
            LazyMode::Off => "off",
            LazyMode::Auto => "auto",
            LazyMode::On => "on",
        }
    }
}

/// llama_flash_attn_type: printed as its enum value (-1 auto, 0 disabled, 1 enabled).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlashAttn {
    Auto,
    Disabled,
    Enabled,
}

impl FlashAttn {
    pub fn value(self) -> i32 {
        match self {
            FlashAttn::Auto => -1,
            FlashAttn::Disabled => 0,
            FlashAttn::Enabled => 1,
        }
    }
}

/// A `-dev` combination: `auto` (empty), `none`, or device names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Devices {
    Auto,
    None,
    Named(Vec<String>),
}

impl fmt::Display for Devices {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Devices::Auto => f.write_str("auto"),
            Devices::None => f.write_str("none"),
            Devices::Named(n) => f.write_str(&n.join("/")),
        }
    }
}

/// One `-ot` override: a tensor-name regex and the buffer type it goes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuftOverride {
    pub pattern: String,
    pub buft: String,
}

/// The maximum number of devices a tensor split names (llama_max_devices()).
pub const MAX_DEVICES: usize = 16;

#[derive(Clone, Debug, PartialEq)]
pub struct CmdParams {
    pub model: Vec<String>,
    pub n_prompt: Vec<i32>,
    pub n_gen: Vec<i32>,
    pub n_pg: Vec<(i32, i32)>,
    pub n_depth: Vec<i32>,
    pub n_batch: Vec<i32>,
    pub n_ubatch: Vec<i32>,
    pub type_k: Vec<ggml::Type>,
    pub type_v: Vec<ggml::Type>,
    pub n_threads: Vec<i32>,
    pub cpu_mask: Vec<String>,
    pub cpu_strict: Vec<bool>,
    pub poll: Vec<i32>,
    pub n_gpu_layers: Vec<i32>,
    pub n_cpu_moe: Vec<i32>,
    pub split_mode: Vec<SplitMode>,
    pub load_mode: Vec<LoadMode>,
    pub lazy_mode: Vec<LazyMode>,
    pub main_gpu: Vec<i32>,
    pub no_kv_offload: Vec<bool>,
    pub flash_attn: Vec<FlashAttn>,
    pub devices: Vec<Devices>,
    pub tensor_split: Vec<Vec<f32>>,
    pub tensor_buft_overrides: Vec<Vec<BuftOverride>>,
    pub embeddings: Vec<bool>,
    pub no_op_offload: Vec<bool>,
    pub no_host: Vec<bool>,
    pub repack: Vec<bool>,
    pub fit_target: Vec<u64>,
    pub fit_min_ctx: Vec<u32>,
    pub numa: Option<String>,
    pub reps: i32,
    pub prio: i32,
    pub delay: i32,
    pub verbose: bool,
    pub progress: bool,
    pub no_warmup: bool,
    pub output_format: OutputFormat,
    pub output_format_stderr: OutputFormat,
    /// Beyond llama.cpp: draw t/s against the swept parameter into this SVG file.
    pub plot: Option<PathBuf>,
}

/// Physical cores are what llama.cpp defaults to; the standard library only knows logical
/// CPUs, which is the same number on the machines without SMT that this project measures on.
pub fn default_threads() -> i32 {
    std::thread::available_parallelism().map_or(4, |n| n.get() as i32)
}

impl CmdParams {
    /// llama-bench's `cmd_params_defaults`.
    pub fn defaults() -> CmdParams {
        CmdParams {
            model: vec!["models/7B/ggml-model-q4_0.gguf".to_string()],
            n_prompt: vec![512],
            n_gen: vec![128],
            n_pg: vec![],
            n_depth: vec![0],
            n_batch: vec![2048],
            n_ubatch: vec![512],
            type_k: vec![ggml::Type::F16],
            type_v: vec![ggml::Type::F16],
            n_threads: vec![default_threads()],
            cpu_mask: vec!["0x0".to_string()],
            cpu_strict: vec![false],
            poll: vec![50],
            n_gpu_layers: vec![-1],
            n_cpu_moe: vec![0],
            split_mode: vec![SplitMode::Layer],
            load_mode: vec![LoadMode::Auto],
            lazy_mode: vec![LazyMode::Auto],
            main_gpu: vec![0],
            no_kv_offload: vec![false],
            flash_attn: vec![FlashAttn::Auto],
            devices: vec![Devices::Auto],
            tensor_split: vec![vec![0.0; MAX_DEVICES]],
            tensor_buft_overrides: vec![vec![]],
            embeddings: vec![false],
            no_op_offload: vec![false],
            no_host: vec![false],
            repack: vec![true],
            fit_target: vec![0],
            fit_min_ctx: vec![0],
            numa: None,
            reps: 5,
            prio: 0,
            delay: 0,
            verbose: false,
            progress: false,
            no_warmup: false,
            output_format: OutputFormat::Md,
            output_format_stderr: OutputFormat::None,
            plot: None,
        }
    }

    fn empty_lists() -> CmdParams {
        let d = CmdParams::defaults();
        CmdParams {
            model: vec![],
            n_prompt: vec![],
            n_gen: vec![],
            n_pg: vec![],
            n_depth: vec![],
            n_batch: vec![],
            n_ubatch: vec![],
            type_k: vec![],
            type_v: vec![],
            n_threads: vec![],
            cpu_mask: vec![],
            cpu_strict: vec![],
            poll: vec![],
            n_gpu_layers: vec![],
            n_cpu_moe: vec![],
            split_mode: vec![],
            load_mode: vec![],
            lazy_mode: vec![],
            main_gpu: vec![],
            no_kv_offload: vec![],
            flash_attn: vec![],
            devices: vec![],
            tensor_split: vec![],
            tensor_buft_overrides: vec![],
            embeddings: vec![],
            no_op_offload: vec![],
            no_host: vec![],
            repack: vec![],
            fit_target: vec![],
            fit_min_ctx: vec![],
            ..d
        }
    }

    /// Unset lists take their defaults (the "set defaults" block after the loop).
    fn fill_defaults(&mut self) {
        let d = CmdParams::defaults();
        macro_rules! fill {
            ($($f:ident),*) => { $( if self.$f.is_empty() { self.$f = d.$f.clone(); } )* };
        }
        fill!(
            model,
            n_prompt,
            n_gen,
            n_pg,
            n_depth,
            n_batch,
            n_ubatch,
            type_k,
            type_v,
            n_threads,
            cpu_mask,
            cpu_strict,
            poll,
            n_gpu_layers,
            n_cpu_moe,
            split_mode,
            load_mode,
            lazy_mode,
            main_gpu,
            no_kv_offload,
            flash_attn,
            devices,
            tensor_split,
            tensor_buft_overrides,
            embeddings,
            no_op_offload,
            no_host,
            repack,
            fit_target,
            fit_min_ctx
        );
    }
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Command {
    Run(Box<CmdParams>),
    Help,
    Version,
    ListDevices,
}

/// A rejected command line: `detail` is printed as `error: <detail>` before
/// `error: invalid parameter for argument: <arg>`.
#[derive(Debug, PartialEq)]
pub struct ParseError {
    pub arg: String,
    pub detail: Option<String>,
}

/// The most values one range list may expand to: each value is a benchmark of its own, and
/// llama.cpp's unbounded expansion of `0-520261024` takes gigabytes before anything runs.
pub const MAX_RANGE_VALUES: usize = 65536;

/// `first[-last[(+|*)step]]` items separated by commas (llama-bench's `parse_int_range`).
pub fn parse_int_range(s: &str, allow_negative: bool) -> Result<Vec<i32>, String> {
    let mut out = Vec::new();
    for item in s.split(',') {
        if item.is_empty() {
            // a trailing comma is accepted, an empty item elsewhere is not
            continue;
        }
        if !allow_negative && item.starts_with('-') {
            return Err(format!("'{item}' is negative: counts must be 0 or more"));
        }
        let (first, rest) = split_number(item, allow_negative).ok_or("invalid range format")?;
        let (last, op, step) = if rest.is_empty() {
            (first, '+', 1)
        } else {
            let rest = rest.strip_prefix('-').ok_or("invalid range format")?;
            let (last, rest) = split_number(rest, false).ok_or("invalid range format")?;
            if rest.is_empty() {
                (last, '+', 1)
            } else {
                let op = rest.chars().next().unwrap_or('+');
                if op != '+' && op != '*' {
                    return Err("invalid range format".into());
                }
                let (step, rest) = split_number(&rest[1..], false).ok_or("invalid range format")?;
                if !rest.is_empty() {
                    return Err("invalid range format".into());
                }
                (last, op, step)
            }
        };
        let mut i = first;
        while i <= last {
            if out.len() == MAX_RANGE_VALUES {
                return Err(format!(
                    "'{s}' expands to more than {MAX_RANGE_VALUES} values"
                ));
            }
            out.push(i);
            let next = if op == '+' {
                i.checked_add(step)
            } else {
                i.checked_mul(step)
            };
            match next {
                Some(n) if n > i => i = n,
                _ => return Err("invalid range".into()),
            }
        }
    }
    // the regex loop of llama.cpp accepts one trailing comma but no empty item before it
    let n_items = s.split(',').count();
    if s.split(',')
        .enumerate()
        .any(|(k, item)| item.is_empty() && k + 1 != n_items)
    {
        return Err("invalid range format".into());
    }
    Ok(out)
}

/// Splits a leading decimal integer off `s`.
fn split_number(s: &str, allow_negative: bool) -> Option<(i32, &str)> {
    let neg = allow_negative && s.starts_with('-');
    let digits_start = usize::from(neg);
    let len = s[digits_start..]
        .bytes()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if len == 0 {
        return None;
    }
    let end = digits_start + len;
    let v: i32 = s[..end].parse().ok()?;
    Some((v, &s[end..]))
}

/// `0|1` lists (std::stoi semantics: any non-zero integer is true).
fn parse_bool_list(s: &str) -> Result<Vec<bool>, String> {
    s.split(',')
        .filter(|x| !x.is_empty())
        .map(|x| parse_int(x).map(|v| v != 0))
        .collect()
}

/// std::stoi: leading whitespace, an optional sign, digits; trailing text ignored.
fn parse_int(s: &str) -> Result<i32, String> {
    let t = s.trim_start();
    let (sign, digits) = match t.as_bytes().first() {
        Some(b'-') => (-1i64, &t[1..]),
        Some(b'+') => (1, &t[1..]),
        _ => (1, t),
    };
    let len = digits.bytes().take_while(|b| b.is_ascii_digit()).count();
    if len == 0 {
        return Err("stoi".into());
    }
    let v: i64 = digits[..len].parse().map_err(|_| "stoi".to_string())?;
    i32::try_from(sign * v).map_err(|_| "stoi".to_string())
}

fn parse_kv_type(s: &str) -> Option<ggml::Type> {
    Some(match s {
        "f16" => ggml::Type::F16,
        "bf16" => ggml::Type::Bf16,
        "q8_0" => ggml::Type::Q8_0,
        "q4_0" => ggml::Type::Q4_0,
        "q4_1" => ggml::Type::Q4_1,
        "q5_0" => ggml::Type::Q5_0,
        "q5_1" => ggml::Type::Q5_1,
        "iq4_nl" => ggml::Type::Iq4Nl,
        _ => return None,
    })
}

fn parse_flash_attn(s: &str) -> Option<FlashAttn> {
    match s {
        "on" | "enabled" | "true" | "1" => Some(FlashAttn::Enabled),
        "off" | "disabled" | "false" | "0" => Some(FlashAttn::Disabled),
        "auto" | "-1" => Some(FlashAttn::Auto),
        _ => None,
    }
}

/// One `-dev` combination; `known` says whether a name is an offload device.
fn parse_devices(value: &str, known: &dyn Fn(&str) -> bool) -> Result<Devices, String> {
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Err("no devices specified".into());
    }
    if trimmed == "auto" {
        return Ok(Devices::Auto);
    }
    let names: Vec<&str> = trimmed.split('/').collect();
    if names.len() == 1 && names[0].trim() == "none" {
        return Ok(Devices::None);
    }
    let mut out = Vec::new();
    for n in names {
        let n = n.trim();
        if n.is_empty() {
            return Err("invalid device specification".into());
        }
        if !known(n) {
            return Err(format!("invalid device: {n}"));
        }
        out.push(n.to_string());
    }
    Ok(Devices::Named(out))
}

/// `ts0/ts1/..` (also `;`) for one combination.
fn parse_tensor_split(s: &str) -> Result<Vec<f32>, String> {
    let parts: Vec<&str> = s.split([';', '/']).filter(|p| !p.is_empty()).collect();
    if parts.len() > MAX_DEVICES {
        return Err(format!(
            "got {} input configs, but system only has {} devices",
            parts.len(),
            MAX_DEVICES
        ));
    }
    let mut v = vec![0.0f32; MAX_DEVICES];
    for (i, p) in parts.iter().enumerate() {
        v[i] = parse_float(p)?;
    }
    Ok(v)
}

/// std::stof: a leading float, trailing text ignored.
fn parse_float(s: &str) -> Result<f32, String> {
    let t = s.trim_start();
    let mut end = 0;
    for i in (1..=t.len()).rev() {
        if t.is_char_boundary(i) && t[..i].parse::<f32>().is_ok() {
            end = i;
            break;
        }
    }
    if end == 0 {
        return Err("stof".into());
    }
    t[..end].parse::<f32>().map_err(|_| "stof".to_string())
}

/// Result of parsing `-ot`: either the groups or an unknown buffer type (llama.cpp lists the
/// available ones on stdout before failing).
pub enum OtError {
    Invalid,
    UnknownBuft(String),
}

/// `pat=buft;pat=buft,...`: `;` within a combination, `,` between them, an empty combination
/// means no override.
pub fn parse_overrides(value: &str, bufts: &[String]) -> Result<Vec<Vec<BuftOverride>>, OtError> {
    let mut groups = Vec::new();
    for group in value.split(',') {
        let mut g = Vec::new();
        for ov in group.split(';') {
            if ov.is_empty() {
                // an empty span ends the group, as strcspn returning 0 does
                break;
            }
            let (pat, buft) = ov.split_once('=').ok_or(OtError::Invalid)?;
            if !bufts.iter().any(|b| b == buft) {
                return Err(OtError::UnknownBuft(buft.to_string()));
            }
            g.push(BuftOverride {
                pattern: pat.to_string(),
                buft: buft.to_string(),
            });
        }
        groups.push(g);
    }
    Ok(groups)
}

/// What parsing needs to know about the machine.
pub struct Env<'a> {
    /// Is this the name of a non-CPU device?
    pub is_offload_device: &'a dyn Fn(&str) -> bool,
    /// Names of the devices' buffer types (what `-ot` accepts).
    pub buffer_types: &'a [String],
}

/// Parses `args` (without the program name).
pub fn parse(args: &[String], env: &Env) -> Result<Command, ParseError> {
    let mut p = CmdParams::empty_lists();
    let mut i = 0;
    while i < args.len() {
        let mut arg = args[i].clone();
        if arg.starts_with("--") {
            arg = arg.replace('_', "-");
        }
        let invalid = |detail: Option<String>| ParseError {
            arg: arg.clone(),
            detail,
        };
        // the flag's value, or the "missing value" error
        let mut value = || -> Result<String, ParseError> {
            i += 1;
            args.get(i).cloned().ok_or_else(|| ParseError {
                arg: arg.clone(),
                detail: None,
            })
        };
        let ints = |v: &str, neg: bool| parse_int_range(v, neg).map_err(|e| invalid(Some(e)));
        let bools = |v: &str| parse_bool_list(v).map_err(|e| invalid(Some(e)));
        match arg.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--version" => return Ok(Command::Version),
            "-m" | "--model" => {
                let v = value()?;
                p.model
                    .extend(v.split(',').filter(|s| !s.is_empty()).map(String::from));
            }
            "-hf" | "-hfr" | "--hf-repo" | "-hff" | "--hf-file" => {
                value()?;
                return Err(invalid(Some(
                    "downloading models is not supported; pass a local file with -m".into(),
                )));
            }
            "-hft" | "--hf-token" => {
                value()?;
            }
            "--offline" => {}
            "-p" | "--n-prompt" => p.n_prompt.extend(ints(&value()?, false)?),
            "-n" | "--n-gen" => p.n_gen.extend(ints(&value()?, false)?),
            "-pg" => {
                let v = value()?;
                let parts: Vec<&str> = v.split(',').filter(|s| !s.is_empty()).collect();
                if parts.len() != 2 {
                    return Err(invalid(None));
                }
                let a = parse_int(parts[0]).map_err(|e| invalid(Some(e)))?;
                let b = parse_int(parts[1]).map_err(|e| invalid(Some(e)))?;
                if a < 0 || b < 0 {
                    return Err(invalid(Some("-pg takes non-negative token counts".into())));
                }
                p.n_pg.push((a, b));
            }
            "-d" | "--n-depth" => p.n_depth.extend(ints(&value()?, false)?),
            "-b" | "--batch-size" => p.n_batch.extend(ints(&value()?, false)?),
            "-ub" | "--ubatch-size" => p.n_ubatch.extend(ints(&value()?, false)?),
            "-ctk" | "--cache-type-k" | "-ctv" | "--cache-type-v" => {
                let v = value()?;
                let mut types = Vec::new();
                for t in v.split(',').filter(|s| !s.is_empty()) {
                    types.push(parse_kv_type(t).ok_or_else(|| invalid(None))?);
                }
                if arg.contains('k') {
                    p.type_k.extend(types);
                } else {
                    p.type_v.extend(types);
                }
            }
            "-dev" | "--device" => {
                let v = value()?;
                for combo in v.split(',').filter(|s| !s.is_empty()) {
                    p.devices.push(
                        parse_devices(combo, env.is_offload_device)
                            .map_err(|e| invalid(Some(e)))?,
                    );
                }
            }
            "--list-devices" => return Ok(Command::ListDevices),
            "-t" | "--threads" => p.n_threads.extend(ints(&value()?, false)?),
            "-C" | "--cpu-mask" => {
                let v = value()?;
                p.cpu_mask
                    .extend(v.split(',').filter(|s| !s.is_empty()).map(String::from));
            }
            "--cpu-strict" => p.cpu_strict.extend(bools(&value()?)?),
            "--poll" => p.poll.extend(ints(&value()?, false)?),
            "-ngl" | "--n-gpu-layers" => p.n_gpu_layers.extend(ints(&value()?, true)?),
            "-ncmoe" | "--n-cpu-moe" => p.n_cpu_moe.extend(ints(&value()?, false)?),
            "-sm" | "--split-mode" => {
                let v = value()?;
                for m in v.split(',').filter(|s| !s.is_empty()) {
                    p.split_mode.push(match m {
                        "none" => SplitMode::None,
                        "layer" => SplitMode::Layer,
                        "row" => SplitMode::Row,
                        "tensor" => SplitMode::Tensor,
                        _ => return Err(invalid(None)),
                    });
                }
            }
            "-lm" | "--load-mode" => {
                let v = value()?;
                for m in v.split(',').filter(|s| !s.is_empty()) {
                    p.load_mode
                        .push(m.parse::<LoadMode>().map_err(|_| invalid(None))?);
                }
            }
            "-mmp" | "--mmap" | "-dio" | "--direct-io" => {
                let v = value()?;
                let on = if arg == "-mmp" || arg == "--mmap" {
                    LoadMode::Mmap
                } else {
                    LoadMode::Dio
                };
                eprintln!(
                    "W DEPRECATED: {arg} is deprecated in favour of --load-mode. Please use --load-mode {} instead.",
                    on.name()
                );
                for b in bools(&v)? {
                    p.load_mode.push(if b { on } else { LoadMode::None });
                }
            }
            "-lzm" | "--lazy-mode" => {
                let v = value()?;
                for m in v.split(',').filter(|s| !s.is_empty()) {
                    p.lazy_mode.push(match m {
                        "on" => LazyMode::On,
                        "auto" => LazyMode::Auto,
                        "off" => LazyMode::Off,
                        _ => return Err(invalid(None)),
                    });
                }
            }
            "-mg" | "--main-gpu" => p.main_gpu = ints(&value()?, false)?,
            "-nkvo" | "--no-kv-offload" => p.no_kv_offload.extend(bools(&value()?)?),
            "--numa" => {
                let v = value()?;
                match v.as_str() {
                    "" | "distribute" | "isolate" | "numactl" => p.numa = Some(v),
                    _ => return Err(invalid(None)),
                }
            }
            "-fa" | "--flash-attn" => {
                let v = value()?;
                for x in v.split(',').filter(|s| !s.is_empty()) {
                    p.flash_attn
                        .push(parse_flash_attn(x).ok_or_else(|| invalid(None))?);
                }
            }
            "-embd" | "--embeddings" => p.embeddings.extend(bools(&value()?)?),
            "-nopo" | "--no-op-offload" => p.no_op_offload.extend(bools(&value()?)?),
            "--no-host" => p.no_host.extend(bools(&value()?)?),
            "--repack" => p.repack.extend(bools(&value()?)?),
            "-ts" | "--tensor-split" => {
                let v = value()?;
                for combo in v.split(',').filter(|s| !s.is_empty()) {
                    p.tensor_split
                        .push(parse_tensor_split(combo).map_err(|e| invalid(Some(e)))?);
                }
            }
            "-ot" | "--override-tensor" => {
                let v = value()?;
                match parse_overrides(&v, env.buffer_types) {
                    Ok(groups) => p.tensor_buft_overrides.extend(groups),
                    Err(OtError::Invalid) => return Err(invalid(None)),
                    Err(OtError::UnknownBuft(b)) => {
                        // llama.cpp prints these on stdout
                        println!("error: unrecognized buffer type '{b}'");
                        println!("Available buffer types:");
                        for name in env.buffer_types {
                            println!("  {name}");
                        }
                        return Err(invalid(None));
                    }
                }
            }
            "-r" | "--repetitions" => {
                let v = parse_int(&value()?).map_err(|e| invalid(Some(e)))?;
                // no repetition leaves nothing to average, and a negative count is no count
                if v < 1 {
                    return Err(invalid(Some(format!("{arg} must be at least 1, got {v}"))));
                }
                p.reps = v;
            }
            "--prio" => {
                let v = parse_int(&value()?).map_err(|e| invalid(Some(e)))?;
                if !(-1..=3).contains(&v) {
                    return Err(invalid(Some(format!("invalid priority {v}"))));
                }
                p.prio = v;
            }
            "--delay" => {
                let v = parse_int(&value()?).map_err(|e| invalid(Some(e)))?;
                if v < 0 {
                    return Err(invalid(Some(format!("{arg} must be 0 or more, got {v}"))));
                }
                p.delay = v;
            }
            "-o" | "--output" => {
                p.output_format = OutputFormat::parse(&value()?).ok_or_else(|| invalid(None))?
            }
            "-oe" | "--output-err" => {
                p.output_format_stderr =
                    OutputFormat::parse(&value()?).ok_or_else(|| invalid(None))?
            }
            "-v" | "--verbose" => p.verbose = true,
            "--progress" => p.progress = true,
            "--no-warmup" => p.no_warmup = true,
            "-fitt" | "--fit-target" => {
                let v = value()?;
                for x in v.split(',').filter(|s| !s.is_empty()) {
                    p.fit_target.push(
                        x.trim()
                            .parse()
                            .map_err(|_| invalid(Some("stoull".into())))?,
                    );
                }
            }
            "-fitc" | "--fit-ctx" => {
                let v = value()?;
                for x in v.split(',').filter(|s| !s.is_empty()) {
                    p.fit_min_ctx.push(
                        x.trim()
                            .parse()
                            .map_err(|_| invalid(Some("stoul".into())))?,
                    );
                }
            }
            "--plot" => p.plot = Some(PathBuf::from(value()?)),
            _ => return Err(invalid(None)),
        }
        i += 1;
    }
    p.fill_defaults();
    Ok(Command::Run(Box::new(p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    type IsDevice = Box<dyn Fn(&str) -> bool>;

    fn env_none() -> (IsDevice, Vec<String>) {
        (
            Box::new(|n: &str| n == "GPU0"),
            vec!["CPU".to_string(), "GPU0".to_string()],
        )
    }

    fn run(s: &str) -> Result<CmdParams, ParseError> {
        let (f, b) = env_none();
        let env = Env {
            is_offload_device: &*f,
            buffer_types: &b,
        };
        match parse(&args(s), &env)? {
            Command::Run(p) => Ok(*p),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn int_ranges() {
        assert_eq!(parse_int_range("1,2,4", false).unwrap(), vec![1, 2, 4]);
        assert_eq!(parse_int_range("1-4", false).unwrap(), vec![1, 2, 3, 4]);
        assert_eq!(parse_int_range("1-8*2", false).unwrap(), vec![1, 2, 4, 8]);
        assert_eq!(parse_int_range("1-8+2", false).unwrap(), vec![1, 3, 5, 7]);
        assert_eq!(
            parse_int_range("1-4,16", false).unwrap(),
            vec![1, 2, 3, 4, 16]
        );
        assert_eq!(parse_int_range("-1", true).unwrap(), vec![-1]);
        assert_eq!(parse_int_range("-1-1", true).unwrap(), vec![-1, 0, 1]);
        assert!(parse_int_range("-1", false).is_err());
        // found by the cli_args fuzz target: 0-520261024 took 2 GB and 10 s before the check
        assert_eq!(
            parse_int_range("0-520261024", false).unwrap_err(),
            "'0-520261024' expands to more than 65536 values"
        );
        assert_eq!(
            parse_int_range("1-65536", false).unwrap().len(),
            MAX_RANGE_VALUES
        );
        assert!(parse_int_range("0-65535,7", false).is_err());
        assert!(parse_int_range("a", false).is_err());
        assert!(
            parse_int_range("1-8*1", false).is_err(),
            "a step that does not advance loops forever"
        );
        assert!(parse_int_range("0-8*2", false).is_err());
        assert!(parse_int_range("1-4x", false).is_err());
        assert!(parse_int_range("1,,2", false).is_err());
        assert_eq!(parse_int_range("4-1", false).unwrap(), Vec::<i32>::new());
    }

    #[test]
    fn defaults_fill_unset_lists() {
        let p = run("-m a.gguf").unwrap();
        assert_eq!(p.model, vec!["a.gguf"]);
        assert_eq!(p.n_prompt, vec![512]);
        assert_eq!(p.n_gen, vec![128]);
        assert_eq!(p.reps, 5);
        assert_eq!(p.output_format, OutputFormat::Md);
        assert_eq!(p.tensor_buft_overrides, vec![Vec::<BuftOverride>::new()]);
    }

    #[test]
    fn lists_accumulate_and_commas_split() {
        let p =
            run("-m a.gguf,b.gguf -m c.gguf -t 1,2 -t 4 -p 0 -n 16 -pg 8,8 -o json -r 3").unwrap();
        assert_eq!(p.model, vec!["a.gguf", "b.gguf", "c.gguf"]);
        assert_eq!(p.n_threads, vec![1, 2, 4]);
        assert_eq!(p.n_prompt, vec![0]);
        assert_eq!(p.n_pg, vec![(8, 8)]);
        assert_eq!(p.output_format, OutputFormat::Json);
        assert_eq!(p.reps, 3);
    }

    #[test]
    fn underscores_normalised_for_long_flags() {
        let p = run("--n_prompt 64 --cache_type_k q8_0").unwrap();
        assert_eq!(p.n_prompt, vec![64]);
        assert_eq!(p.type_k, vec![ggml::Type::Q8_0]);
    }

    #[test]
    fn enums_and_bools() {
        let p = run("-fa on,off,auto -ctv q4_0 -sm none -lm mmap,dio -nkvo 0,1 -embd 1").unwrap();
        assert_eq!(
            p.flash_attn,
            vec![FlashAttn::Enabled, FlashAttn::Disabled, FlashAttn::Auto]
        );
        assert_eq!(p.type_v, vec![ggml::Type::Q4_0]);
        assert_eq!(p.split_mode, vec![SplitMode::None]);
        assert_eq!(p.load_mode, vec![LoadMode::Mmap, LoadMode::Dio]);
        assert_eq!(p.no_kv_offload, vec![false, true]);
        assert_eq!(p.embeddings, vec![true]);
    }

    #[test]
    fn errors_name_the_argument() {
        assert_eq!(
            run("-x").unwrap_err(),
            ParseError {
                arg: "-x".into(),
                detail: None
            }
        );
        assert_eq!(run("-t").unwrap_err().arg, "-t");
        assert_eq!(
            run("-ctk f32").unwrap_err().arg,
            "-ctk",
            "f32 is not a bench cache type"
        );
        assert_eq!(run("-o xml").unwrap_err().arg, "-o");
        assert_eq!(run("-pg 1").unwrap_err().arg, "-pg");
        let e = run("-dev FOO").unwrap_err();
        assert_eq!(e.detail.as_deref(), Some("invalid device: FOO"));
        assert_eq!(
            run("-t 1-x").unwrap_err().detail.as_deref(),
            Some("invalid range format")
        );
    }

    #[test]
    fn zero_repetitions_and_negative_counts_are_refused() {
        let detail = |s: &str| run(s).unwrap_err().detail;
        assert_eq!(
            detail("-r 0").as_deref(),
            Some("-r must be at least 1, got 0")
        );
        assert_eq!(
            detail("--repetitions -1").as_deref(),
            Some("--repetitions must be at least 1, got -1")
        );
        assert_eq!(
            detail("-p -1").as_deref(),
            Some("'-1' is negative: counts must be 0 or more")
        );
        assert_eq!(
            detail("-n 16,-5").as_deref(),
            Some("'-5' is negative: counts must be 0 or more")
        );
        assert_eq!(
            detail("--delay -2").as_deref(),
            Some("--delay must be 0 or more, got -2")
        );
        assert_eq!(run("-r 1").unwrap().reps, 1);
    }

    #[test]
    fn devices_split_and_overrides() {
        let p = run("-dev auto,none,GPU0 -ts 3/1,1;1 -ot a=CPU;b=GPU0,,c=CPU").unwrap();
        assert_eq!(
            p.devices,
            vec![
                Devices::Auto,
                Devices::None,
                Devices::Named(vec!["GPU0".into()])
            ]
        );
        assert_eq!(p.devices[2].to_string(), "GPU0");
        assert_eq!(&p.tensor_split[0][..3], &[3.0, 1.0, 0.0]);
        assert_eq!(&p.tensor_split[1][..3], &[1.0, 1.0, 0.0]);
        assert_eq!(p.tensor_buft_overrides.len(), 3);
        assert_eq!(p.tensor_buft_overrides[0].len(), 2);
        assert!(p.tensor_buft_overrides[1].is_empty());
        assert_eq!(
            p.tensor_buft_overrides[2][0],
            BuftOverride {
                pattern: "c".into(),
                buft: "CPU".into()
            }
        );
        assert_eq!(run("-ot a=NOPE").unwrap_err().arg, "-ot");
    }

    #[test]
    fn help_and_list_devices_stop_parsing() {
        let (f, b) = env_none();
        let env = Env {
            is_offload_device: &*f,
            buffer_types: &b,
        };
        assert!(matches!(
            parse(&args("--list-devices -x"), &env),
            Ok(Command::ListDevices)
        ));
        assert!(matches!(parse(&args("-h -x"), &env), Ok(Command::Help)));
        assert!(matches!(
            parse(&args("--version -x"), &env),
            Ok(Command::Version)
        ));
        assert!(crate::usage::usage("llama-bench").contains("-r, --repetitions <n>"));
    }
}
