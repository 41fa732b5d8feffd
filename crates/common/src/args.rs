//! The command-line parser of the common-parser tools (llama.cpp's `common_params_parse`): one
//! table of options shared by completion, perplexity, tokenize and eval-callback, with
//! llama.cpp's flag names, defaults, value parsing, environment variables, `-h` layout and error
//! messages ("error: invalid argument: X", "error while handling argument ..."; exit status 1).

mod opt;
mod options;
mod sampling_options;
mod unused;
pub mod util;

use std::collections::HashMap;

use llama::sampling::SamplingParams;

pub use opt::Opt;

/// A tool's extra `-h` text (its example usage), printed after the options.
pub type UsageFn<'a> = &'a dyn Fn(&mut dyn ParseOutput);

/// Which tool is parsing (`llama_example`): decides which tool-specific options exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Example {
    /// eval-callback: only the shared options.
    Common,
    Completion,
    Perplexity,
    Tokenize,
    Imatrix,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlashAttn {
    Auto,
    Enabled,
    Disabled,
}

impl FlashAttn {
    /// `llama_flash_attn_type_name`.
    pub fn name(self) -> &'static str {
        match self {
            FlashAttn::Auto => "auto",
            FlashAttn::Enabled => "enabled",
            FlashAttn::Disabled => "disabled",
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConversationMode {
    Auto,
    Enabled,
    Disabled,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeScaling {
    Unspecified,
    None,
    Linear,
    Yarn,
}

/// `-ngl`: a count, or llama.cpp's sentinels.
pub const GPU_LAYERS_AUTO: i32 = -1;
pub const GPU_LAYERS_ALL: i32 = -2;

/// A GPU-like device visible to the parser (`-dev`, `--list-devices`).
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceInfo {
    pub name: String,
    pub description: String,
    pub total_bytes: u64,
    pub free_bytes: u64,
}

/// What the parser needs to know about the machine, supplied by the tool from its backends.
#[derive(Clone, Debug)]
pub struct Machine {
    /// `llama_supports_gpu_offload()`.
    pub supports_gpu_offload: bool,
    /// Non-CPU devices.
    pub devices: Vec<DeviceInfo>,
    /// Buffer type names `-ot` accepts (each device's default buffer type).
    pub buft_names: Vec<String>,
    /// `llama_max_devices()`.
    pub max_devices: usize,
}

impl Default for Machine {
    fn default() -> Self {
        Machine {
            supports_gpu_offload: false,
            devices: Vec::new(),
            buft_names: vec!["CPU".to_string()],
            max_devices: 16,
        }
    }
}

impl Machine {
    /// The registered backends' view (register them first, e.g. `llama::backend_init()`):
    /// non-CPU devices with their memory, and every device's default buffer type.
    pub fn from_backends() -> Machine {
        let mut m = Machine {
            buft_names: Vec::new(),
            ..Machine::default()
        };
        for d in ggml::backend::devices() {
            let buft = d.buffer_type().name().to_string();
            if !m.buft_names.contains(&buft) {
                m.buft_names.push(buft);
            }
            if d.kind() == ggml::backend::DeviceKind::Cpu {
                continue;
            }
            if matches!(
                d.kind(),
                ggml::backend::DeviceKind::Gpu | ggml::backend::DeviceKind::IGpu
            ) {
                m.supports_gpu_offload = true;
            }
            let (free, total) = d.memory();
            m.devices.push(DeviceInfo {
                name: d.name().to_string(),
                description: d.description().to_string(),
                total_bytes: total as u64,
                free_bytes: free as u64,
            });
        }
        if m.buft_names.is_empty() {
            m.buft_names.push("CPU".to_string());
        }
        m
    }
}

/// The machine as the parser sees it, asked for only when a flag needs it (-dev, -ot, -ngl,
/// --list-devices, ...): enumerating the devices loads the GPU drivers, which a run that stops
/// at a bad argument or an unreadable model file should not pay for.
#[derive(Clone, Debug, Default)]
pub struct ParseEnv {
    probe: Option<fn() -> Machine>,
    machine: std::sync::OnceLock<Machine>,
}

impl ParseEnv {
    /// The registered backends, enumerated on first use.
    pub fn detect() -> ParseEnv {
        ParseEnv {
            probe: Some(Machine::from_backends),
            machine: std::sync::OnceLock::new(),
        }
    }

    /// A fixed machine (tests, fuzzing).
    pub fn fixed(m: Machine) -> ParseEnv {
        ParseEnv {
            probe: None,
            machine: std::sync::OnceLock::from(m),
        }
    }

    pub fn machine(&self) -> &Machine {
        self.machine
            .get_or_init(|| self.probe.map(|f| f()).unwrap_or_default())
    }
}

/// `common_params`, the fields these tools use, with llama.cpp's defaults.
#[derive(Clone, Debug)]
pub struct Params {
    pub model: String,
    pub model_url: String,
    pub hf_repo: String,
    pub hf_file: String,
    pub prompt: String,
    pub prompt_file: String,
    pub system_prompt: String,
    pub n_predict: i32,
    pub n_ctx: i32,
    pub n_batch: i32,
    pub n_ubatch: i32,
    pub n_keep: i32,
    pub n_chunks: i32,
    pub n_parallel: i32,
    pub n_print: i32,
    pub grp_attn_n: i32,
    pub grp_attn_w: i32,
    /// -1 until post-processing resolves it.
    pub n_threads: i32,
    pub n_threads_batch: i32,
    pub cpu_mask: String,
    pub cpu_range: String,
    pub cpu_strict: u64,
    pub priority: i32,
    pub poll: u64,
    pub cpu_mask_batch: String,
    pub cpu_range_batch: String,
    pub cpu_strict_batch: i32,
    pub priority_batch: i32,
    pub poll_batch: i32,
    pub flash_attn: FlashAttn,
    pub rope_scaling: RopeScaling,
    pub rope_freq_base: f32,
    pub rope_freq_scale: f32,
    pub yarn_orig_ctx: i32,
    pub yarn_ext_factor: f32,
    pub yarn_attn_factor: f32,
    pub yarn_beta_slow: f32,
    pub yarn_beta_fast: f32,
    pub cache_type_k: ggml::Type,
    pub cache_type_v: ggml::Type,
    pub cache_type_k_draft: ggml::Type,
    pub cache_type_v_draft: ggml::Type,
    pub no_kv_offload: bool,
    pub no_extra_bufts: bool,
    pub no_host: bool,
    pub no_op_offload: bool,
    pub swa_full: bool,
    pub kv_unified: bool,
    pub check_tensors: bool,
    /// `-lm`: "auto", "none", "mmap", "mlock", "mmap+mlock", "dio".
    pub load_mode: String,
    pub lazy_mode: String,
    pub numa: String,
    pub n_gpu_layers: i32,
    pub split_mode: SplitMode,
    pub tensor_split: Vec<f32>,
    pub main_gpu: i32,
    /// `-dev`: device names; `Some(vec![])` for "none".
    pub devices: Option<Vec<String>>,
    /// `-ot`: (tensor name regex, buffer type name).
    pub tensor_buft_overrides: Vec<(String, String)>,
    /// `--override-kv`, in the order given (the loader uses the first for each key)
    pub kv_overrides: Vec<llama::kv_override::KvOverride>,
    pub fit_params: bool,
    pub fit_params_target: Vec<u64>,
    pub fit_params_min_ctx: i32,
    pub lora_adapters: Vec<(String, f32)>,
    pub control_vectors: Vec<(String, f32)>,
    pub control_vector_layer_range: (i32, i32),
    pub rpc_servers: String,
    pub escape: bool,
    pub no_perf: bool,
    pub warmup: bool,
    pub verbose_prompt: bool,
    pub display_prompt: bool,
    pub use_color: bool,
    pub ctx_shift: bool,
    pub path_prompt_cache: String,
    pub prompt_cache_all: bool,
    pub prompt_cache_ro: bool,
    pub antiprompt: Vec<String>,
    pub special: bool,
    pub conversation_mode: ConversationMode,
    pub single_turn: bool,
    pub interactive: bool,
    pub interactive_first: bool,
    pub multiline_input: bool,
    pub input_prefix_bos: bool,
    pub input_prefix: String,
    pub input_suffix: String,
    pub enable_chat_template: bool,
    pub use_jinja: bool,
    pub chat_template: String,
    pub reasoning_format: String,
    pub reasoning: String,
    pub reasoning_effort: String,
    pub reasoning_budget: i32,
    pub reasoning_budget_message: String,
    pub reasoning_preserve: bool,
    pub skip_chat_parsing: bool,
    pub simple_io: bool,
    pub sampling: SamplingParams,
    pub backend_sampling: bool,
    pub verbosity: i32,
    pub log_disable: bool,
    pub log_file: String,
    pub log_jsonl: bool,
    pub log_colors: Option<bool>,
    pub log_prefix: Option<bool>,
    pub log_timestamps: Option<bool>,
    pub offline: bool,
    // perplexity
    pub hellaswag: bool,
    pub hellaswag_tasks: usize,
    pub winogrande: bool,
    pub winogrande_tasks: usize,
    pub multiple_choice: bool,
    pub multiple_choice_tasks: usize,
    pub kl_divergence: bool,
    pub logits_file: String,
    pub ppl_stride: i32,
    pub ppl_output_type: i32,
    // tokenize
    pub tok_ids: bool,
    pub tok_stdin: bool,
    pub tok_no_bos: bool,
    pub parse_special: bool,
    pub tok_show_count: bool,
    // imatrix
    /// `-o`: the output file of the tools that write one.
    pub out_file: String,
    /// `--in-file`, in the order given.
    pub in_files: Vec<String>,
    pub n_out_freq: i32,
    pub n_save_freq: i32,
    pub i_chunk: i32,
    /// `--output-format`: > 0 for the legacy .dat, < 0 for GGUF, 0 for GGUF by default.
    pub imat_dat: i8,
    pub process_output: bool,
    pub compute_ppl: bool,
    pub show_statistics: bool,
    /// Set by `-h`; the parser prints usage and reports an exit.
    pub usage: bool,
    pub completion_bash: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            model: String::new(),
            model_url: String::new(),
            hf_repo: String::new(),
            hf_file: String::new(),
            prompt: String::new(),
            prompt_file: String::new(),
            system_prompt: String::new(),
            n_predict: -1,
            n_ctx: 0,
            n_batch: 2048,
            n_ubatch: 512,
            n_keep: 0,
            n_chunks: -1,
            n_parallel: 1,
            n_print: -1,
            grp_attn_n: 1,
            grp_attn_w: 512,
            n_threads: -1,
            n_threads_batch: -1,
            cpu_mask: String::new(),
            cpu_range: String::new(),
            cpu_strict: 0,
            priority: 0,
            poll: 50,
            cpu_mask_batch: String::new(),
            cpu_range_batch: String::new(),
            cpu_strict_batch: 0,
            priority_batch: 0,
            poll_batch: 50,
            flash_attn: FlashAttn::Auto,
            rope_scaling: RopeScaling::Unspecified,
            rope_freq_base: 0.0,
            rope_freq_scale: 0.0,
            yarn_orig_ctx: 0,
            yarn_ext_factor: -1.0,
            yarn_attn_factor: -1.0,
            yarn_beta_slow: -1.0,
            yarn_beta_fast: -1.0,
            cache_type_k: ggml::Type::F16,
            cache_type_v: ggml::Type::F16,
            cache_type_k_draft: ggml::Type::F16,
            cache_type_v_draft: ggml::Type::F16,
            no_kv_offload: false,
            no_extra_bufts: false,
            no_host: false,
            no_op_offload: false,
            swa_full: false,
            kv_unified: false,
            check_tensors: false,
            load_mode: "auto".to_string(),
            lazy_mode: "auto".to_string(),
            numa: String::new(),
            n_gpu_layers: GPU_LAYERS_AUTO,
            split_mode: SplitMode::Layer,
            tensor_split: Vec::new(),
            main_gpu: 0,
            devices: None,
            tensor_buft_overrides: Vec::new(),
            kv_overrides: Vec::new(),
            fit_params: true,
            fit_params_target: vec![1024],
            fit_params_min_ctx: 4096,
            lora_adapters: Vec::new(),
            control_vectors: Vec::new(),
            control_vector_layer_range: (-1, -1),
            rpc_servers: String::new(),
            escape: true,
            no_perf: false,
            warmup: true,
            verbose_prompt: false,
            display_prompt: true,
            use_color: false,
            ctx_shift: false,
            path_prompt_cache: String::new(),
            prompt_cache_all: false,
            prompt_cache_ro: false,
            antiprompt: Vec::new(),
            special: false,
            conversation_mode: ConversationMode::Auto,
            single_turn: false,
            interactive: false,
            interactive_first: false,
            multiline_input: false,
            input_prefix_bos: false,
            input_prefix: String::new(),
            input_suffix: String::new(),
            enable_chat_template: true,
            use_jinja: false,
            chat_template: String::new(),
            reasoning_format: "auto".to_string(),
            reasoning: "auto".to_string(),
            reasoning_effort: "default".to_string(),
            reasoning_budget: -1,
            reasoning_budget_message: String::new(),
            reasoning_preserve: true,
            skip_chat_parsing: false,
            simple_io: false,
            sampling: SamplingParams::default(),
            backend_sampling: false,
            verbosity: crate::log::DEFAULT_VERBOSITY,
            log_disable: false,
            log_file: String::new(),
            log_jsonl: false,
            log_colors: None,
            log_prefix: None,
            log_timestamps: None,
            offline: false,
            hellaswag: false,
            hellaswag_tasks: 400,
            winogrande: false,
            winogrande_tasks: 0,
            multiple_choice: false,
            multiple_choice_tasks: 0,
            kl_divergence: false,
            logits_file: String::new(),
            ppl_stride: 0,
            ppl_output_type: 0,
            tok_ids: false,
            tok_stdin: false,
            tok_no_bos: false,
            parse_special: false,
            tok_show_count: false,
            out_file: String::new(),
            in_files: Vec::new(),
            n_out_freq: 10,
            n_save_freq: 0,
            i_chunk: 0,
            imat_dat: 0,
            process_output: false,
            compute_ppl: true,
            show_statistics: false,
            usage: false,
            completion_bash: false,
        }
    }
}

impl Params {
    /// The per-example defaults `common_params_parser_init` sets before parsing.
    pub fn for_example(ex: Example) -> Params {
        let mut p = Params::default();
        if ex == Example::Tokenize {
            p.parse_special = true;
        }
        if ex == Example::Imatrix {
            // set by llama-imatrix's main before parsing, so its help shows them as defaults
            p.out_file = "imatrix.gguf".to_string();
            p.n_ctx = 512;
            p.escape = false;
        }
        p
    }
}

/// Why parsing stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum ParseError {
    /// Print this to stderr (a newline follows) and exit with status 1.
    Message(String),
    /// Output was already printed (`-h`, `--version`, `--list-devices`); exit with this status.
    Exit(i32),
}

/// Where output of the parser goes (stdout text such as `-h`), so tests can capture it.
pub trait ParseOutput {
    fn out(&mut self, s: &str);
    fn err(&mut self, s: &str);
}

/// The process's real stdout/stderr.
pub struct StdOutput;

impl ParseOutput for StdOutput {
    fn out(&mut self, s: &str) {
        use std::io::Write;
        let mut o = std::io::stdout().lock();
        let _ = o.write_all(s.as_bytes());
        let _ = o.flush();
    }
    fn err(&mut self, s: &str) {
        use std::io::Write;
        let _ = std::io::stderr().lock().write_all(s.as_bytes());
    }
}

/// State handlers may use besides the params: the machine and the output sinks.
pub struct Ctx<'a> {
    pub env: &'a ParseEnv,
    pub out: &'a mut dyn ParseOutput,
    /// Set by a handler that has printed its output and wants the process to exit.
    pub exit: Option<i32>,
    dry_breakers_cleared: bool,
}

impl Ctx<'_> {
    /// `--dry-sequence-breaker` clears the defaults the first time only.
    pub fn clear_dry_breakers_once(&mut self) -> bool {
        !std::mem::replace(&mut self.dry_breakers_cleared, true)
    }
}

/// Parse `argv` (argv[0] first) for a tool: environment variables, then the command line, then
/// llama.cpp's post-processing (threads, required model, escapes, verbosity).
pub fn parse(
    argv: &[String],
    ex: Example,
    env: &ParseEnv,
    out: &mut dyn ParseOutput,
    print_usage: Option<UsageFn>,
) -> Result<Params, ParseError> {
    let mut params = Params::for_example(ex);
    let opts = options::options(ex, &params);
    let mut ctx = Ctx {
        env,
        out,
        exit: None,
        dry_breakers_cleared: false,
    };

    let mut by_name: HashMap<&str, (usize, bool)> = HashMap::new();
    for (i, o) in opts.iter().enumerate() {
        for a in o.args {
            by_name.insert(a, (i, true));
        }
        for a in o.args_neg {
            by_name.insert(a, (i, false));
        }
    }

    // environment variables first
    for o in &opts {
        let Some((name, value)) = o.env_value() else {
            continue;
        };
        if let Err(e) = o.apply_env(&mut params, &mut ctx, &value) {
            return Err(ParseError::Message(format!(
                "error while handling environment variable \"{name}\": {e}\n\n"
            )));
        }
    }

    let mut seen = std::collections::HashSet::new();
    let mut i = 1;
    while i < argv.len() {
        let mut arg = argv[i].clone();
        if arg.starts_with("--") {
            arg = arg.replace('_', "-");
        }
        let Some(&(idx, positive)) = by_name.get(arg.as_str()) else {
            return Err(ParseError::Message(format!(
                "error: invalid argument: {arg}"
            )));
        };
        if !seen.insert(arg.clone()) && arg != "--spec-type" {
            crate::log_wrn!("DEPRECATED: argument '{arg}' specified multiple times, use comma-separated values instead (only last value will be used)\n");
        }
        let o = &opts[idx];
        if let Some(w) = unused::warning(ex, o, &arg) {
            crate::log_wrn!("{w}");
        }
        if let Some((name, _)) = o.env_value() {
            ctx.out.err(&format!(
                "warn: {name} environment variable is set, but will be overwritten by command line argument {arg}\n"
            ));
        }
        let n_values = o.n_values();
        let result = if i + n_values >= argv.len() && n_values > 0 {
            Err("expected value for argument".to_string())
        } else {
            let values: Vec<&str> = argv[i + 1..=i + n_values]
                .iter()
                .map(|s| s.as_str())
                .collect();
            i += n_values;
            o.apply(&mut params, &mut ctx, positive, &values)
        };
        if let Err(e) = result {
            return Err(ParseError::Message(format!(
                "error while handling argument \"{arg}\": {e}\n\nusage:\n{}\n\nto show complete usage, run with -h",
                o.to_help_string()
            )));
        }
        if let Some(code) = ctx.exit {
            return Err(ParseError::Exit(code));
        }
        i += 1;
    }

    postprocess(&mut params, ex)?;

    if params.usage {
        print_help(&opts, ex, ctx.out);
        if let Some(f) = print_usage {
            f(ctx.out);
        }
        return Err(ParseError::Exit(0));
    }
    if params.completion_bash {
        print_completion(&opts, ex, ctx.out);
        return Err(ParseError::Exit(0));
    }
    Ok(params)
}

fn postprocess(params: &mut Params, _ex: Example) -> Result<(), ParseError> {
    if params.n_threads < 0 {
        params.n_threads = util::num_physical_cores();
    }
    if params.n_threads_batch < 0 {
        params.n_threads_batch = params.n_threads;
        crate::startup::threads::inherit_batch(params);
    }
    crate::startup::threads::warn_mask_bits(params);
    if params.log_jsonl {
        crate::log::set_jsonl(true);
    }
    if params.prompt_cache_all && (params.interactive || params.interactive_first) {
        return Err(ParseError::Message(
            "error: --prompt-cache-all not supported in interactive mode yet\n".to_string(),
        ));
    }
    if params.model.is_empty() && !params.usage && !params.completion_bash {
        return Err(ParseError::Message(
            "error: --model is required\n".to_string(),
        ));
    }
    if params.escape {
        params.prompt = util::process_escapes(&params.prompt);
        params.input_prefix = util::process_escapes(&params.input_prefix);
        params.input_suffix = util::process_escapes(&params.input_suffix);
        for a in params.antiprompt.iter_mut() {
            *a = util::process_escapes(a);
        }
        for b in params.sampling.dry_sequence_breakers.iter_mut() {
            *b = util::process_escapes(b);
        }
    }
    if !params.chat_template.is_empty()
        && !crate::chat::verify_template(&params.chat_template, params.use_jinja)
    {
        let note = if params.use_jinja {
            ""
        } else {
            "\nnote: llama.cpp was started without --jinja, we only support commonly used templates"
        };
        return Err(ParseError::Message(format!(
            "error: the supplied chat template is not supported: {}{note}\n",
            params.chat_template
        )));
    }
    Ok(())
}

/// `common_params_print_usage`: options grouped as common / sampling / example-specific.
fn print_help(opts: &[Opt], ex: Example, out: &mut dyn ParseOutput) {
    let mut common = String::new();
    let mut sparam = String::new();
    let mut specific = String::new();
    for o in opts {
        let s = o.to_help_string();
        if o.sparam {
            sparam.push_str(&s);
        } else if o.in_example(ex) {
            specific.push_str(&s);
        } else {
            common.push_str(&s);
        }
    }
    let mut text = String::new();
    for (title, body) in [
        ("common params", common),
        ("sampling params", sparam),
        ("example-specific params", specific),
    ] {
        if body.is_empty() {
            continue;
        }
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&format!("----- {title} -----\n\n"));
        text.push_str(&body);
    }
    out.out(&text);
}

fn print_completion(opts: &[Opt], _ex: Example, out: &mut dyn ParseOutput) {
    let mut s = String::from(
        "_llama_completions() {\n    local cur prev opts\n    COMPREPLY=()\n    cur=\"${COMP_WORDS[COMP_CWORD]}\"\n    prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n\n    opts=\"",
    );
    for o in opts {
        for a in o.args {
            s.push_str(a);
            s.push(' ');
        }
    }
    s.push_str("\"\n\n    case \"$prev\" in\n        --model|-m)\n            COMPREPLY=( $(compgen -f -X '!*.gguf' -- \"$cur\") $(compgen -d -- \"$cur\") )\n            return 0\n            ;;\n        *)\n            COMPREPLY=( $(compgen -W \"${opts}\" -- \"$cur\") )\n            return 0\n            ;;\n    esac\n}\n\n");
    for exe in [
        "llama-bench",
        "llama-completion",
        "llama-eval-callback",
        "llama-imatrix",
        "llama-perplexity",
        "llama-quantize",
        "llama-tokenize",
    ] {
        s.push_str(&format!("complete -F _llama_completions {exe}\n"));
    }
    out.out(&s);
}

/// Parse the process arguments for a tool, printing errors as llama.cpp does and exiting with
/// status 1 on error (0 after `-h` and the like).
pub fn parse_or_exit(ex: Example, env: &ParseEnv, print_usage: Option<UsageFn>) -> Params {
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut out = StdOutput;
    match parse(&argv, ex, env, &mut out, print_usage) {
        Ok(p) => p,
        Err(ParseError::Exit(code)) => std::process::exit(code),
        Err(ParseError::Message(m)) => {
            out.err(&format!("{m}\n"));
            std::process::exit(1);
        }
    }
}

/// Apply the logging flags to the common logger (after `log::init`).
pub fn apply_log_settings(p: &Params) {
    crate::log::set_verbosity(p.verbosity);
    if let Some(v) = p.log_prefix {
        crate::log::set_prefix(v);
    }
    if let Some(v) = p.log_timestamps {
        crate::log::set_timestamps(v);
    }
    if let Some(v) = p.log_colors {
        crate::log::set_colors(v);
    }
    if !p.log_file.is_empty() {
        let _ = crate::log::set_file(Some(std::path::Path::new(&p.log_file)));
    }
    if p.log_disable {
        crate::log::disable();
    }
}

#[cfg(test)]
mod tests;
