//! The option table: names, value hints, help text and handlers, as `common_params_parser_init`
//! declares them for the common-parser tools.

use super::opt::{Handler, Opt};
use super::sampling_options::sampling_options;
use super::util::{is_autoy, is_falsey, is_truthy, parse_csv_row, stof, stoi, stoul};
use super::{
    ConversationMode, Ctx, Example, FlashAttn, Params, RopeScaling, SplitMode, GPU_LAYERS_ALL,
    GPU_LAYERS_AUTO,
};

const KV_CACHE_TYPES: [&str; 9] = [
    "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1",
];

fn kv_cache_type(s: &str) -> Result<ggml::Type, String> {
    if KV_CACHE_TYPES.contains(&s) {
        if let Some(t) = ggml::Type::from_name(s) {
            return Ok(t);
        }
    }
    Err(format!("Unsupported cache type: {s}"))
}

pub(super) fn read_file(path: &str) -> Result<String, String> {
    std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|_| format!("error: failed to open file '{path}'\n"))
}

fn tf(b: bool) -> &'static str {
    if b {
        "true"
    } else {
        "false"
    }
}

fn ed(b: bool) -> &'static str {
    if b {
        "enabled"
    } else {
        "disabled"
    }
}

fn gpu_warning(ctx: &mut Ctx, what: &str) {
    if !ctx.env.machine().supports_gpu_offload {
        ctx.out.err(&format!(
            "warning: llama.cpp was compiled without support for GPU offload. {what}\n"
        ));
    }
}

const COMPLETION: &[Example] = &[Example::Completion];
const PERPLEXITY: &[Example] = &[Example::Perplexity];
const TOKENIZE: &[Example] = &[Example::Tokenize];
const COMPLETION_PPL: &[Example] = &[Example::Completion, Example::Perplexity];
const IMATRIX: &[Example] = &[Example::Imatrix];
const IMATRIX_PPL: &[Example] = &[Example::Imatrix, Example::Perplexity];
const COMPLETION_IMATRIX_PPL: &[Example] =
    &[Example::Completion, Example::Imatrix, Example::Perplexity];

/// Every option visible to `ex`, in llama.cpp's declaration order.
pub fn options(ex: Example, d: &Params) -> Vec<Opt> {
    use Handler::*;
    let kv_types = KV_CACHE_TYPES.join(", ");
    let mut all = vec![
        Opt::new(&["-h", "--help", "--usage"], None, "print usage and exit", Void(|p, _| {
            p.usage = true;
            Ok(())
        })),
        Opt::new(&["--version"], None, "show version and build info", Void(|_, ctx| {
            ctx.out.err(&build_info::version_text());
            ctx.exit = Some(0);
            Ok(())
        })),
        Opt::new(&["-cl", "--cache-list"], None, "show list of models in cache", Void(|_, ctx| {
            ctx.out.out("number of models in cache: 0\n");
            ctx.exit = Some(0);
            Ok(())
        })),
        Opt::new(&["--completion-bash"], None, "print source-able bash completion script for llama.cpp", Void(|p, _| {
            p.completion_bash = true;
            Ok(())
        })),
        Opt::new(&["--verbose-prompt"], None, format!("print a verbose prompt before generation (default: {})", tf(d.verbose_prompt)), Void(|p, _| {
            p.verbose_prompt = true;
            Ok(())
        })).ex(COMPLETION),
        Opt::new(&["--display-prompt"], None, format!("whether to print prompt at generation (default: {})", tf(d.display_prompt)), Bool(|p, v| p.display_prompt = v))
            .neg(&["--no-display-prompt"]).ex(COMPLETION),
        Opt::new(&["-co", "--color"], Some("[on|off|auto]"), "Colorize output to distinguish prompt and user input from generations ('on', 'off', or 'auto', default: 'auto')\n'auto' enables colors when output is to a terminal", Str(|p, _, v| {
            if is_truthy(v) {
                p.use_color = true;
            } else if is_falsey(v) {
                p.use_color = false;
            } else if is_autoy(v) {
                use std::io::IsTerminal;
                p.use_color = std::io::stdout().is_terminal();
            } else {
                return Err(format!("error: unknown value for --color: '{v}'\n"));
            }
            Ok(())
        })).ex(COMPLETION),
        Opt::new(&["-t", "--threads"], Some("N"), format!("number of CPU threads to use during generation (default: {})", d.n_threads), Int(|p, _, v| {
            p.n_threads = if v <= 0 { super::util::hardware_concurrency() } else { v };
            Ok(())
        })).env("LLAMA_ARG_THREADS"),
        Opt::new(&["-tb", "--threads-batch"], Some("N"), "number of threads to use during batch and prompt processing (default: same as --threads)", Int(|p, _, v| {
            p.n_threads_batch = if v <= 0 { super::util::hardware_concurrency() } else { v };
            Ok(())
        })),
        Opt::new(&["-C", "--cpu-mask"], Some("M"), "CPU affinity mask: arbitrarily long hex. Complements cpu-range (default: \"\")", Str(|p, _, v| {
            if !cpu_mask_ok(v) {
                return Err("invalid cpumask".into());
            }
            p.cpu_mask = v.to_string();
            Ok(())
        })),
        Opt::new(&["-Cr", "--cpu-range"], Some("lo-hi"), "range of CPUs for affinity. Complements --cpu-mask", Str(|p, _, v| {
            if !cpu_range_ok(v) {
                return Err("invalid range".into());
            }
            p.cpu_range = v.to_string();
            Ok(())
        })),
        Opt::new(&["--cpu-strict"], Some("<0|1>"), format!("use strict CPU placement (default: {})\n", d.cpu_strict), Str(|p, _, v| {
            p.cpu_strict = stoul(v)?;
            Ok(())
        })),
        Opt::new(&["--prio"], Some("N"), format!("set process/thread priority : low(-1), normal(0), medium(1), high(2), realtime(3) (default: {})\n", d.priority), Int(|p, _, v| {
            if !(-1..=3).contains(&v) {
                return Err("invalid value".into());
            }
            p.priority = v;
            Ok(())
        })),
        Opt::new(&["--poll"], Some("<0...100>"), format!("use polling level to wait for work (0 - no polling, default: {})\n", d.poll), Str(|p, _, v| {
            p.poll = stoul(v)?;
            Ok(())
        })),
        Opt::new(&["-Cb", "--cpu-mask-batch"], Some("M"), "CPU affinity mask: arbitrarily long hex. Complements cpu-range-batch (default: same as --cpu-mask)", Str(|p, _, v| {
            if !cpu_mask_ok(v) {
                return Err("invalid cpumask".into());
            }
            p.cpu_mask_batch = v.to_string();
            Ok(())
        })),
        Opt::new(&["-Crb", "--cpu-range-batch"], Some("lo-hi"), "ranges of CPUs for affinity. Complements --cpu-mask-batch", Str(|p, _, v| {
            if !cpu_range_ok(v) {
                return Err("invalid range".into());
            }
            p.cpu_range_batch = v.to_string();
            Ok(())
        })),
        Opt::new(&["--cpu-strict-batch"], Some("<0|1>"), "use strict CPU placement (default: same as --cpu-strict)", Int(|p, _, v| {
            p.cpu_strict_batch = v;
            Ok(())
        })),
        Opt::new(&["--prio-batch"], Some("N"), format!("set process/thread priority : 0-normal, 1-medium, 2-high, 3-realtime (default: {})\n", d.priority_batch), Int(|p, _, v| {
            if !(0..=3).contains(&v) {
                return Err("invalid value".into());
            }
            p.priority_batch = v;
            Ok(())
        })),
        Opt::new(&["--poll-batch"], Some("<0|1>"), "use polling to wait for work (default: same as --poll)", Int(|p, _, v| {
            p.poll_batch = v;
            Ok(())
        })),
        Opt::new(&["-c", "--ctx-size"], Some("N"), format!("size of the prompt context (default: {}, 0 = loaded from model)", d.n_ctx), Int(|p, _, v| {
            p.n_ctx = v;
            Ok(())
        })).env("LLAMA_ARG_CTX_SIZE"),
        Opt::new(&["-n", "--predict", "--n-predict"], Some("N"), if ex == Example::Completion {
            format!("number of tokens to predict (default: {}, -1 = infinity, -2 = until context filled)", d.n_predict)
        } else {
            format!("number of tokens to predict (default: {}, -1 = infinity)", d.n_predict)
        }, Int(|p, _, v| {
            p.n_predict = v;
            Ok(())
        })).env("LLAMA_ARG_N_PREDICT"),
        Opt::new(&["-b", "--batch-size"], Some("N"), format!("logical maximum batch size (default: {})", d.n_batch), Int(|p, _, v| {
            p.n_batch = v;
            Ok(())
        })).env("LLAMA_ARG_BATCH"),
        Opt::new(&["-ub", "--ubatch-size"], Some("N"), format!("physical maximum batch size (default: {})", d.n_ubatch), Int(|p, _, v| {
            p.n_ubatch = v;
            Ok(())
        })).env("LLAMA_ARG_UBATCH"),
        Opt::new(&["--keep"], Some("N"), format!("number of tokens to keep from the initial prompt (default: {}, -1 = all)", d.n_keep), Int(|p, _, v| {
            p.n_keep = v;
            Ok(())
        })),
        Opt::new(&["--swa-full"], None, format!("use full-size SWA cache (default: {})\n[(more info)](https://github.com/ggml-org/llama.cpp/pull/13194#issuecomment-2868343055)", tf(d.swa_full)), Void(|p, _| {
            p.swa_full = true;
            Ok(())
        })).env("LLAMA_ARG_SWA_FULL"),
        Opt::new(&["-kvu", "--kv-unified"], None, format!("use single unified KV buffer for the KV cache of all sequences (default: {})", tf(d.kv_unified)), Bool(|p, v| p.kv_unified = v))
            .neg(&["-no-kvu", "--no-kv-unified"]).env("LLAMA_ARG_KV_UNIFIED").ex(PERPLEXITY),
        Opt::new(&["--context-shift"], None, format!("whether to use context shift on infinite text generation (default: {})", ed(d.ctx_shift)), Bool(|p, v| p.ctx_shift = v))
            .neg(&["--no-context-shift"]).ex(COMPLETION_IMATRIX_PPL).env("LLAMA_ARG_CONTEXT_SHIFT"),
        Opt::new(&["--chunks"], Some("N"), format!("max number of chunks to process (default: {}, -1 = all)", d.n_chunks), Int(|p, _, v| {
            p.n_chunks = v;
            Ok(())
        })).ex(IMATRIX_PPL),
        Opt::new(&["-fa", "--flash-attn"], Some("[on|off|auto]"), format!("set Flash Attention use ('on', 'off', or 'auto', default: '{}')", d.flash_attn.name()), Str(|p, _, v| {
            p.flash_attn = if is_truthy(v) {
                FlashAttn::Enabled
            } else if is_falsey(v) {
                FlashAttn::Disabled
            } else if is_autoy(v) {
                FlashAttn::Auto
            } else {
                return Err(format!("error: unknown value for --flash-attn: '{v}'\n"));
            };
            Ok(())
        })).env("LLAMA_ARG_FLASH_ATTN"),
        Opt::new(&["-p", "--prompt"], Some("PROMPT"), "prompt to start generation with; for system message, use -sys", Str(|p, _, v| {
            p.prompt = v.to_string();
            Ok(())
        })),
        Opt::new(&["-sys", "--system-prompt"], Some("PROMPT"), "system prompt to use with model (if applicable, depending on chat template)", Str(|p, _, v| {
            p.system_prompt = v.to_string();
            Ok(())
        })).ex(COMPLETION),
        Opt::new(&["--perf"], None, format!("whether to enable internal libllama performance timings (default: {})", tf(d.no_perf)), Bool(|p, v| {
            p.no_perf = !v;
            p.sampling.no_perf = !v;
        })).neg(&["--no-perf"]).env("LLAMA_ARG_PERF"),
        Opt::new(&["-f", "--file"], Some("FNAME"), "a file containing the prompt (default: none)", Str(|p, _, v| {
            p.prompt = read_file(v)?;
            p.prompt_file = v.to_string();
            if p.prompt.ends_with('\n') {
                p.prompt.pop();
            }
            Ok(())
        })),
        Opt::new(&["-sysf", "--system-prompt-file"], Some("FNAME"), "a file containing the system prompt (default: none)", Str(|p, _, v| {
            p.system_prompt = read_file(v)?;
            if p.system_prompt.ends_with('\n') {
                p.system_prompt.pop();
            }
            Ok(())
        })).ex(COMPLETION),
        Opt::new(&["-bf", "--binary-file"], Some("FNAME"), "binary file containing the prompt (default: none)", Str(|p, ctx, v| {
            let bytes = std::fs::read(v).map_err(|_| format!("error: failed to open file '{v}'\n"))?;
            p.prompt_file = v.to_string();
            p.prompt = String::from_utf8_lossy(&bytes).into_owned();
            ctx.out.err(&format!("Read {} bytes from binary file {}\n", bytes.len(), v));
            Ok(())
        })),
        Opt::new(&["-e", "--escape"], None, format!("whether to process escapes sequences (\\n, \\r, \\t, \\', \\\", \\\\) (default: {})", tf(d.escape)), Bool(|p, v| p.escape = v))
            .neg(&["--no-escape"]),
        Opt::new(&["-ptc", "--print-token-count"], Some("N"), format!("print token count every N tokens (default: {})", d.n_print), Int(|p, _, v| {
            p.n_print = v;
            Ok(())
        })).ex(COMPLETION),
        Opt::new(&["--prompt-cache"], Some("FNAME"), "file to cache prompt state for faster startup (default: none)", Str(|p, _, v| {
            p.path_prompt_cache = v.to_string();
            Ok(())
        })).ex(COMPLETION),
        Opt::new(&["--prompt-cache-all"], None, "if specified, saves user input and generations to cache as well\n", Void(|p, _| {
            p.prompt_cache_all = true;
            Ok(())
        })).ex(COMPLETION),
        Opt::new(&["--prompt-cache-ro"], None, "if specified, uses the prompt cache but does not update it", Void(|p, _| {
            p.prompt_cache_ro = true;
            Ok(())
        })).ex(COMPLETION),
        Opt::new(&["-r", "--reverse-prompt"], Some("PROMPT"), "halt generation at PROMPT, return control in interactive mode\n", Str(|p, _, v| {
            p.antiprompt.push(v.to_string());
            Ok(())
        })).ex(COMPLETION),
        Opt::new(&["-sp", "--special"], None, format!("special tokens output enabled (default: {})", tf(d.special)), Void(|p, _| {
            p.special = true;
            Ok(())
        })).ex(COMPLETION),
        Opt::new(&["-cnv", "--conversation"], None, "whether to run in conversation mode:\n- does not print special tokens and suffix/prefix\n- interactive mode is also enabled\n(default: auto enabled if chat template is available)", Bool(|p, v| {
            p.conversation_mode = if v { ConversationMode::Enabled } else { ConversationMode::Disabled };
        })).neg(&["-no-cnv", "--no-conversation"]).ex(COMPLETION),
        Opt::new(&["-st", "--single-turn"], None, "run conversation for a single turn only, then exit when done\nwill not be interactive if first turn is predefined with --prompt\n(default: false)", Void(|p, _| {
            p.single_turn = true;
            Ok(())
        })).ex(COMPLETION),
        Opt::new(&["-i", "--interactive"], None, format!("run in interactive mode (default: {})", tf(d.interactive)), Void(|p, _| {
            p.interactive = true;
            Ok(())
        })).ex(COMPLETION),
        Opt::new(&["-if", "--interactive-first"], None, format!("run in interactive mode and wait for input right away (default: {})", tf(d.interactive_first)), Void(|p, _| {
            p.interactive_first = true;
            Ok(())
        })).ex(COMPLETION),
        Opt::new(&["-mli", "--multiline-input"], None, "allows you to write or paste multiple lines without ending each in '\\'", Void(|p, _| {
            p.multiline_input = true;
            Ok(())
        })).ex(COMPLETION),
        Opt::new(&["--in-prefix-bos"], None, "prefix BOS to user inputs, preceding the `--in-prefix` string", Void(|p, _| {
            p.input_prefix_bos = true;
            p.enable_chat_template = false;
            Ok(())
        })).ex(COMPLETION),
        Opt::new(&["--in-prefix"], Some("STRING"), "string to prefix user inputs with (default: empty)", Str(|p, _, v| {
            p.input_prefix = v.to_string();
            p.enable_chat_template = false;
            Ok(())
        })).ex(COMPLETION),
        Opt::new(&["--in-suffix"], Some("STRING"), "string to suffix after user inputs with (default: empty)", Str(|p, _, v| {
            p.input_suffix = v.to_string();
            p.enable_chat_template = false;
            Ok(())
        })).ex(COMPLETION),
        Opt::new(&["--warmup"], None, format!("whether to perform warmup with an empty run (default: {})", ed(d.warmup)), Bool(|p, v| p.warmup = v))
            .neg(&["--no-warmup"]).ex(COMPLETION_PPL),
    ];
    all.extend(sampling_options(d));
    all.extend(vec![
        Opt::new(&["--rope-scaling"], Some("{none,linear,yarn}"), "RoPE frequency scaling method, defaults to linear unless specified by the model", Str(|p, _, v| {
            p.rope_scaling = match v {
                "none" => RopeScaling::None,
                "linear" => RopeScaling::Linear,
                "yarn" => RopeScaling::Yarn,
                _ => return Err("invalid value".into()),
            };
            Ok(())
        })).env("LLAMA_ARG_ROPE_SCALING_TYPE"),
        Opt::new(&["--rope-scale"], Some("N"), "RoPE context scaling factor, expands context by a factor of N", Str(|p, _, v| {
            p.rope_freq_scale = 1.0 / stof(v)?;
            Ok(())
        })).env("LLAMA_ARG_ROPE_SCALE"),
        Opt::new(&["--rope-freq-base"], Some("N"), "RoPE base frequency, used by NTK-aware scaling (default: loaded from model)", Str(|p, _, v| {
            p.rope_freq_base = stof(v)?;
            Ok(())
        })).env("LLAMA_ARG_ROPE_FREQ_BASE"),
        Opt::new(&["--rope-freq-scale"], Some("N"), "RoPE frequency scaling factor, expands context by a factor of 1/N", Str(|p, _, v| {
            p.rope_freq_scale = stof(v)?;
            Ok(())
        })).env("LLAMA_ARG_ROPE_FREQ_SCALE"),
        Opt::new(&["--yarn-orig-ctx"], Some("N"), format!("YaRN: original context size of model (default: {} = model training context size)", d.yarn_orig_ctx), Int(|p, _, v| {
            p.yarn_orig_ctx = v;
            Ok(())
        })).env("LLAMA_ARG_YARN_ORIG_CTX"),
        Opt::new(&["--yarn-ext-factor"], Some("N"), format!("YaRN: extrapolation mix factor (default: {:.2}, 0.0 = full interpolation)", d.yarn_ext_factor), Str(|p, _, v| {
            p.yarn_ext_factor = stof(v)?;
            Ok(())
        })).env("LLAMA_ARG_YARN_EXT_FACTOR"),
        Opt::new(&["--yarn-attn-factor"], Some("N"), format!("YaRN: scale sqrt(t) or attention magnitude (default: {:.2})", d.yarn_attn_factor), Str(|p, _, v| {
            p.yarn_attn_factor = stof(v)?;
            Ok(())
        })).env("LLAMA_ARG_YARN_ATTN_FACTOR"),
        Opt::new(&["--yarn-beta-slow"], Some("N"), format!("YaRN: high correction dim or alpha (default: {:.2})", d.yarn_beta_slow), Str(|p, _, v| {
            p.yarn_beta_slow = stof(v)?;
            Ok(())
        })).env("LLAMA_ARG_YARN_BETA_SLOW"),
        Opt::new(&["--yarn-beta-fast"], Some("N"), format!("YaRN: low correction dim or beta (default: {:.2})", d.yarn_beta_fast), Str(|p, _, v| {
            p.yarn_beta_fast = stof(v)?;
            Ok(())
        })).env("LLAMA_ARG_YARN_BETA_FAST"),
        Opt::new(&["-gan", "--grp-attn-n"], Some("N"), format!("group-attention factor (default: {})", d.grp_attn_n), Int(|p, _, v| {
            p.grp_attn_n = v;
            Ok(())
        })).env("LLAMA_ARG_GRP_ATTN_N").ex(COMPLETION),
        Opt::new(&["-gaw", "--grp-attn-w"], Some("N"), format!("group-attention width (default: {})", d.grp_attn_w), Int(|p, _, v| {
            p.grp_attn_w = v;
            Ok(())
        })).env("LLAMA_ARG_GRP_ATTN_W").ex(COMPLETION),
        Opt::new(&["-kvo", "--kv-offload"], None, format!("whether to enable KV cache offloading (default: {})", ed(!d.no_kv_offload)), Bool(|p, v| p.no_kv_offload = !v))
            .neg(&["-nkvo", "--no-kv-offload"]).env("LLAMA_ARG_KV_OFFLOAD"),
        Opt::new(&["--repack"], None, format!("whether to enable weight repacking (default: {})", ed(!d.no_extra_bufts)), Bool(|p, v| p.no_extra_bufts = !v))
            .neg(&["-nr", "--no-repack"]).env("LLAMA_ARG_REPACK"),
        Opt::new(&["--no-host"], None, "bypass host buffer allowing extra buffers to be used", Void(|p, _| {
            p.no_host = true;
            Ok(())
        })).env("LLAMA_ARG_NO_HOST"),
        Opt::new(&["-ctk", "--cache-type-k"], Some("TYPE"), format!("KV cache data type for K\nallowed values: {kv_types}\n(default: {})", d.cache_type_k.name()), Str(|p, _, v| {
            p.cache_type_k = kv_cache_type(v)?;
            Ok(())
        })).env("LLAMA_ARG_CACHE_TYPE_K"),
        Opt::new(&["-ctv", "--cache-type-v"], Some("TYPE"), format!("KV cache data type for V\nallowed values: {kv_types}\n(default: {})", d.cache_type_v.name()), Str(|p, _, v| {
            p.cache_type_v = kv_cache_type(v)?;
            Ok(())
        })).env("LLAMA_ARG_CACHE_TYPE_V"),
        Opt::new(&["--hellaswag"], None, "compute HellaSwag score over random tasks from datafile supplied with -f", Void(|p, _| {
            p.hellaswag = true;
            Ok(())
        })).ex(PERPLEXITY),
        Opt::new(&["--hellaswag-tasks"], Some("N"), format!("number of tasks to use when computing the HellaSwag score (default: {})", d.hellaswag_tasks), Int(|p, _, v| {
            p.hellaswag_tasks = v as usize;
            Ok(())
        })).ex(PERPLEXITY),
        Opt::new(&["--winogrande"], None, "compute Winogrande score over random tasks from datafile supplied with -f", Void(|p, _| {
            p.winogrande = true;
            Ok(())
        })).ex(PERPLEXITY),
        Opt::new(&["--winogrande-tasks"], Some("N"), format!("number of tasks to use when computing the Winogrande score (default: {})", d.winogrande_tasks), Int(|p, _, v| {
            p.winogrande_tasks = v as usize;
            Ok(())
        })).ex(PERPLEXITY),
        Opt::new(&["--multiple-choice"], None, "compute multiple choice score over random tasks from datafile supplied with -f", Void(|p, _| {
            p.multiple_choice = true;
            Ok(())
        })).ex(PERPLEXITY),
        Opt::new(&["--multiple-choice-tasks"], Some("N"), format!("number of tasks to use when computing the multiple choice score (default: {})", d.multiple_choice_tasks), Int(|p, _, v| {
            p.multiple_choice_tasks = v as usize;
            Ok(())
        })).ex(PERPLEXITY),
        Opt::new(&["--kl-divergence"], None, "computes KL-divergence to logits provided via --kl-divergence-base", Void(|p, _| {
            p.kl_divergence = true;
            Ok(())
        })).ex(PERPLEXITY),
        Opt::new(&["--save-all-logits", "--kl-divergence-base"], Some("FNAME"), "set logits file", Str(|p, _, v| {
            p.logits_file = v.to_string();
            Ok(())
        })).ex(PERPLEXITY),
        Opt::new(&["--ppl-stride"], Some("N"), format!("stride for perplexity calculation (default: {})", d.ppl_stride), Int(|p, _, v| {
            p.ppl_stride = v;
            Ok(())
        })).ex(PERPLEXITY),
        Opt::new(&["--ppl-output-type"], Some("<0|1>"), format!("output type for perplexity calculation (default: {})", d.ppl_output_type), Int(|p, _, v| {
            p.ppl_output_type = v;
            Ok(())
        })).ex(PERPLEXITY),
        Opt::new(&["-dt", "--defrag-thold"], Some("N"), "KV cache defragmentation threshold (DEPRECATED)", Str(|_, _, _| {
            crate::log_wrn!("DEPRECATED: --defrag-thold is deprecated and no longer necessary to specify\n");
            Ok(())
        })).env("LLAMA_ARG_DEFRAG_THOLD"),
        Opt::new(&["-np", "--parallel"], Some("N"), format!("number of parallel sequences to decode (default: {})", d.n_parallel), Int(|p, _, v| {
            p.n_parallel = v;
            Ok(())
        })).env("LLAMA_ARG_N_PARALLEL"),
        Opt::new(&["--rpc"], Some("SERVERS"), "comma separated list of RPC servers (host:port)", Str(|_, _, _| {
            Err("failed to find RPC backend".into())
        })).env("LLAMA_ARG_RPC"),
        Opt::new(&["-lm", "--load-mode"], Some("MODE"), "model loading mode:\n- auto: mmap unless a device cannot use it (default)\n- none: read the model into memory\n- mmap: memory-map the model\n- mlock: read the model and lock it in RAM\n- mmap+mlock: memory-map and lock\n- dio: read with direct I/O", Str(|p, _, v| {
            match v {
                "auto" | "none" | "mmap" | "mlock" | "mmap+mlock" | "dio" => {
                    p.load_mode = v.to_string();
                    Ok(())
                }
                _ => Err("invalid value".into()),
            }
        })).env("LLAMA_ARG_LOAD_MODE"),
        Opt::new(&["-lzm", "--lazy-mode"], Some("MODE"), "on-demand reading of certain tensors, for example per-layer embeddings\n- on, auto (only tensors > 4 GiB, default), off", Str(|p, _, v| {
            match v {
                "on" | "auto" | "off" => {
                    p.lazy_mode = v.to_string();
                    Ok(())
                }
                _ => Err("invalid value".into()),
            }
        })).env("LLAMA_ARG_LAZY_MODE"),
        Opt::new(&["--numa"], Some("TYPE"), "attempt optimizations that help on some NUMA systems\n- distribute: spread execution evenly over all nodes\n- isolate: only spawn threads on CPUs on the node that execution started on\n- numactl: use the CPU map provided by numactl\nif run without this previously, it is recommended to drop the system page cache before using this\nsee https://github.com/ggml-org/llama.cpp/issues/1437", Str(|p, _, v| {
            match v {
                "distribute" | "" | "isolate" | "numactl" => {
                    p.numa = if v.is_empty() { "distribute".into() } else { v.to_string() };
                    Ok(())
                }
                _ => Err("invalid value".into()),
            }
        })).env("LLAMA_ARG_NUMA"),
        Opt::new(&["-dev", "--device"], Some("<dev1,dev2,..>"), "comma-separated list of devices to use for offloading (none = don't offload)\nuse --list-devices to see a list of available devices", Str(|p, ctx, v| {
            let names: Vec<&str> = v.split(',').filter(|s| !s.is_empty()).collect();
            if names.is_empty() {
                return Err("no devices specified".into());
            }
            if names == ["none"] {
                p.devices = Some(Vec::new());
                return Ok(());
            }
            for n in &names {
                if !ctx.env.machine().devices.iter().any(|d| d.name == *n) {
                    return Err(format!("invalid device: {n}"));
                }
            }
            p.devices = Some(names.iter().map(|s| s.to_string()).collect());
            Ok(())
        })).env("LLAMA_ARG_DEVICE"),
        Opt::new(&["--list-devices"], None, "print list of available devices and exit", Void(|_, ctx| {
            let mut s = String::from("Available devices:\n");
            if ctx.env.machine().devices.is_empty() {
                s.push_str("  (none)\n");
            }
            for d in &ctx.env.machine().devices {
                s.push_str(&format!(
                    "  {}: {} ({} MiB, {} MiB free)\n",
                    d.name,
                    d.description,
                    d.total_bytes / 1024 / 1024,
                    d.free_bytes / 1024 / 1024
                ));
            }
            ctx.out.out(&s);
            ctx.exit = Some(0);
            Ok(())
        })),
        Opt::new(&["--override-tensor", "-ot"], Some("<tensor name pattern>=<buffer type>,..."), "override tensor buffer type", Str(|p, ctx, v| {
            for item in v.split(',').filter(|s| !s.is_empty()) {
                let Some((pat, buft)) = item.split_once('=') else {
                    return Err("invalid value".into());
                };
                if !ctx.env.machine().buft_names.iter().any(|b| b == buft) {
                    let mut names = ctx.env.machine().buft_names.clone();
                    names.sort();
                    let mut s = String::from("Available buffer types:\n");
                    for n in names {
                        s.push_str(&format!("  {n}\n"));
                    }
                    ctx.out.out(&s);
                    return Err("unknown buffer type".into());
                }
                p.tensor_buft_overrides.push((pat.to_string(), buft.to_string()));
            }
            Ok(())
        })).env("LLAMA_ARG_OVERRIDE_TENSOR"),
        Opt::new(&["-cmoe", "--cpu-moe"], None, "keep all Mixture of Experts (MoE) weights in the CPU", Void(|p, _| {
            p.tensor_buft_overrides.push(("\\.ffn_(up|down|gate|gate_up)_(ch|)exps".into(), "CPU".into()));
            Ok(())
        })).env("LLAMA_ARG_CPU_MOE"),
        Opt::new(&["-ncmoe", "--n-cpu-moe"], Some("N"), "keep the Mixture of Experts (MoE) weights of the first N layers in the CPU", Int(|p, _, v| {
            if v < 0 {
                return Err("invalid value".into());
            }
            for i in 0..v {
                p.tensor_buft_overrides.push((format!("blk\\.{i}\\.ffn_(up|down|gate|gate_up)_(ch|)exps"), "CPU".into()));
            }
            Ok(())
        })).env("LLAMA_ARG_N_CPU_MOE"),
        Opt::new(&["-ncffn", "--n-cpu-ffn"], Some("N"), "keep the dense FFN weights of the first N layers in the CPU", Int(|p, _, v| {
            if v < 0 {
                return Err("invalid value".into());
            }
            for i in 0..v {
                p.tensor_buft_overrides.push((format!("blk\\.{i}\\.ffn_(up|down|gate)\\."), "CPU".into()));
            }
            Ok(())
        })).env("LLAMA_ARG_N_CPU_FFN"),
        Opt::new(&["-ngl", "--gpu-layers", "--n-gpu-layers"], Some("N"), format!("max. number of layers to store in VRAM, either an exact number, 'auto', or 'all' (default: {})", if d.n_gpu_layers == GPU_LAYERS_AUTO { "auto".to_string() } else { d.n_gpu_layers.to_string() }), Str(|p, ctx, v| {
            p.n_gpu_layers = match v {
                "auto" => GPU_LAYERS_AUTO,
                "all" => GPU_LAYERS_ALL,
                _ => stoi(v)?,
            };
            if !ctx.env.machine().supports_gpu_offload {
                ctx.out.err("warning: no usable GPU found, --gpu-layers option will be ignored\n");
                ctx.out.err("warning: one possible reason is that llama.cpp was compiled without GPU support\n");
                ctx.out.err("warning: consult docs/build.md for compilation instructions\n");
            }
            Ok(())
        })).env("LLAMA_ARG_N_GPU_LAYERS"),
        Opt::new(&["-sm", "--split-mode"], Some("{none,layer,row,tensor}"), "how to split the model across multiple GPUs, one of:\n- none: use one GPU only\n- layer (default): split layers and KV across GPUs (pipelined)\n- row: split weight across GPUs by rows (parallelized)\n- tensor: split weights and KV across GPUs (parallelized, EXPERIMENTAL)", Str(|p, ctx, v| {
            p.split_mode = match v {
                "none" => SplitMode::None,
                "layer" => SplitMode::Layer,
                "row" => SplitMode::Row,
                "tensor" => SplitMode::Tensor,
                _ => return Err("invalid value".into()),
            };
            gpu_warning(ctx, "Setting the split mode has no effect.");
            Ok(())
        })).env("LLAMA_ARG_SPLIT_MODE"),
        Opt::new(&["-ts", "--tensor-split"], Some("N0,N1,N2,..."), "fraction of the model to offload to each GPU, comma-separated list of proportions, e.g. 3,1", Str(|p, ctx, v| {
            let parts: Vec<&str> = v.split([',', '/']).filter(|s| !s.is_empty()).collect();
            if parts.len() >= ctx.env.machine().max_devices {
                return Err(format!("got {} input configs, but system only has {} devices", parts.len(), ctx.env.machine().max_devices));
            }
            let mut split = vec![0.0f32; ctx.env.machine().max_devices];
            for (i, s) in parts.iter().enumerate() {
                split[i] = stof(s)?;
            }
            p.tensor_split = split;
            gpu_warning(ctx, "Setting a tensor split has no effect.");
            Ok(())
        })).env("LLAMA_ARG_TENSOR_SPLIT"),
        Opt::new(&["-mg", "--main-gpu"], Some("INDEX"), format!("the GPU to use for the model (with split-mode = none), or for intermediate results and KV (with split-mode = row) (default: {})", d.main_gpu), Int(|p, ctx, v| {
            p.main_gpu = v;
            gpu_warning(ctx, "Setting the main GPU has no effect.");
            Ok(())
        })).env("LLAMA_ARG_MAIN_GPU"),
        Opt::new(&["-fit", "--fit"], Some("[on|off]"), format!("whether to adjust unset arguments to fit in device memory ('on' or 'off', default: '{}')", if d.fit_params { "on" } else { "off" }), Str(|p, _, v| {
            if is_truthy(v) {
                p.fit_params = true;
            } else if is_falsey(v) {
                p.fit_params = false;
            } else {
                return Err(format!("error: unkown value for --fit: '{v}'\n"));
            }
            Ok(())
        })).env("LLAMA_ARG_FIT"),
        Opt::new(&["-fitt", "--fit-target"], Some("MiB0,MiB1,MiB2,..."), format!("target margin per device for --fit, comma-separated list of values, single value is broadcast across all devices, default: {}", d.fit_params_target[0]), Str(|p, _, v| {
            let mut t = Vec::new();
            for s in v.split(',') {
                t.push(stoul(s)?);
            }
            p.fit_params_target = t;
            Ok(())
        })).env("LLAMA_ARG_FIT_TARGET"),
        Opt::new(&["-fitc", "--fit-ctx"], Some("N"), format!("minimum ctx size that can be set by --fit option, default: {}", d.fit_params_min_ctx), Int(|p, _, v| {
            p.fit_params_min_ctx = v;
            Ok(())
        })).env("LLAMA_ARG_FIT_CTX"),
        Opt::new(&["--check-tensors"], None, format!("check model tensor data for invalid values (default: {})", tf(d.check_tensors)), Void(|p, _| {
            p.check_tensors = true;
            Ok(())
        })),
        Opt::new(&["--override-kv"], Some("KEY=TYPE:VALUE,..."), "advanced option to override model metadata by key. to specify multiple overrides, either use comma-separated values.\ntypes: int, float, bool, str. example: --override-kv tokenizer.ggml.add_bos_token=bool:false,tokenizer.ggml.add_eos_token=bool:false", Str(|p, _, v| {
            for item in parse_csv_row(v) {
                match llama::kv_override::KvOverride::parse(&item) {
                    Ok(o) => p.kv_overrides.push(o),
                    Err(why) => {
                        // string_parse_kv_override's COM_ERR, then the handler's exception
                        ggml::log_error!("{why}\n");
                        return Err(format!("error: Invalid type for KV override: {item}\n"));
                    }
                }
            }
            Ok(())
        })),
        Opt::new(&["--op-offload"], None, format!("whether to offload host tensor operations to device (default: {})", tf(!d.no_op_offload)), Bool(|p, v| p.no_op_offload = !v))
            .neg(&["--no-op-offload"]),
        Opt::new(&["--lora"], Some("FNAME"), "path to LoRA adapter (use comma-separated values to load multiple adapters)", Str(|p, _, v| {
            for f in v.split(',') {
                p.lora_adapters.push((f.to_string(), 1.0));
            }
            Ok(())
        })),
        Opt::new(&["--lora-scaled"], Some("FNAME:SCALE,..."), "path to LoRA adapter with user defined scaling (format: FNAME:SCALE,...)\nnote: use comma-separated values", Str(|p, _, v| {
            for item in v.split(',') {
                let (f, sc) = item.rsplit_once(':').ok_or_else(|| "invalid value".to_string())?;
                p.lora_adapters.push((f.to_string(), stof(sc)?));
            }
            Ok(())
        })),
        Opt::new(&["--control-vector"], Some("FNAME"), "add a control vector\nnote: use comma-separated values to add multiple control vectors", Str(|p, _, v| {
            for f in v.split(',') {
                p.control_vectors.push((f.to_string(), 1.0));
            }
            Ok(())
        })),
        Opt::new(&["--control-vector-scaled"], Some("FNAME:SCALE,..."), "add a control vector with user defined scaling SCALE\nnote: use comma-separated values (format: FNAME:SCALE,...)", Str(|p, _, v| {
            for item in v.split(',') {
                let (f, sc) = item.rsplit_once(':').ok_or_else(|| "invalid value".to_string())?;
                p.control_vectors.push((f.to_string(), stof(sc)?));
            }
            Ok(())
        })),
        Opt::new(&["--control-vector-layer-range"], Some("START"), "layer range to apply the control vector(s) to, start and end inclusive", StrStr(|p, a, b| {
            p.control_vector_layer_range = (stoi(a)?, stoi(b)?);
            Ok(())
        })).hint2("END"),
        Opt::new(&["-m", "--model"], Some("FNAME"), "model path to load", Str(|p, _, v| {
            p.model = v.to_string();
            Ok(())
        })).env("LLAMA_ARG_MODEL"),
        Opt::new(&["-mu", "--model-url"], Some("MODEL_URL"), "model download url (default: unused)", Str(|_, _, _| {
            Err("model download is not supported in this build".into())
        })).env("LLAMA_ARG_MODEL_URL"),
        Opt::new(&["-dr", "--docker-repo"], Some("[<repo>/]<model>[:quant]"), "Docker Hub model repository. repo is optional, default to ai/. quant is optional, default to :latest.\nexample: gemma3\n(default: unused)", Str(|_, _, _| {
            Err("model download is not supported in this build".into())
        })).env("LLAMA_ARG_DOCKER_REPO"),
        Opt::new(&["-hf", "-hfr", "--hf-repo"], Some("<user>/<model>[:quant]"), "Hugging Face model repository; quant is optional, case-insensitive, default to Q4_K_M, or falls back to the first file in the repo if Q4_K_M doesn't exist.\nmmproj is also downloaded automatically if available. to disable, add --no-mmproj\nexample: unsloth/phi-4-GGUF:q4_k_m\n(default: unused)", Str(|_, _, _| {
            Err("model download is not supported in this build".into())
        })).env("LLAMA_ARG_HF_REPO"),
        Opt::new(&["-hff", "--hf-file"], Some("FILE"), "Hugging Face model file. If specified, it will override the quant in --hf-repo (default: unused)", Str(|_, _, _| {
            Err("model download is not supported in this build".into())
        })).env("LLAMA_ARG_HF_FILE"),
        Opt::new(&["-hft", "--hf-token"], Some("TOKEN"), "Hugging Face access token (default: value from HF_TOKEN environment variable)", Str(|_, _, _| Ok(()))).env("HF_TOKEN"),
        Opt::new(&["--log-disable"], None, "Log disable", Void(|p, _| {
            p.log_disable = true;
            Ok(())
        })),
        Opt::new(&["--log-file"], Some("FNAME"), "Log to file", Str(|p, _, v| {
            p.log_file = v.to_string();
            Ok(())
        })).env("LLAMA_ARG_LOG_FILE"),
        Opt::new(&["--log-jsonl"], None, format!("Log as JSONL (one JSON object per line) to stdout, this also disables colored logging (default: {})", ed(d.log_jsonl)), Bool(|p, v| p.log_jsonl = v))
            .neg(&["--no-log-jsonl"]).env("LLAMA_ARG_LOG_JSONL"),
        Opt::new(&["--log-colors"], Some("[on|off|auto]"), "Set colored logging ('on', 'off', or 'auto', default: 'auto')\n'auto' enables colors when output is to a terminal", Str(|p, _, v| {
            p.log_colors = if is_truthy(v) {
                Some(true)
            } else if is_falsey(v) {
                Some(false)
            } else if is_autoy(v) {
                None
            } else {
                return Err(format!("error: unknown value for --log-colors: '{v}'\n"));
            };
            Ok(())
        })).env("LLAMA_ARG_LOG_COLORS"),
        Opt::new(&["-v", "--verbose", "--log-verbose"], None, "Set verbosity level to infinity (i.e. log all messages, useful for debugging)", Void(|p, _| {
            p.verbosity = i32::MAX;
            Ok(())
        })),
        Opt::new(&["--offline"], None, "Offline mode: forces use of cache, prevents network access", Void(|p, _| {
            p.offline = true;
            Ok(())
        })).env("LLAMA_ARG_OFFLINE"),
        Opt::new(&["-lv", "--verbosity", "--log-verbosity"], Some("N"), format!("Set the verbosity threshold. Messages with a higher verbosity will be ignored. Values:\n - 0: generic output\n - 1: error\n - 2: warning\n - 3: info\n - 4: trace\n - 5: debug\n(default: {})\n", d.verbosity), Int(|p, _, v| {
            p.verbosity = v;
            Ok(())
        })).env("LLAMA_ARG_LOG_VERBOSITY"),
        Opt::new(&["--log-prefix"], None, "Enable prefix in log messages", Bool(|p, v| p.log_prefix = Some(v)))
            .neg(&["--no-log-prefix"]).env("LLAMA_ARG_LOG_PREFIX"),
        Opt::new(&["--log-timestamps"], None, "Enable timestamps in log messages", Bool(|p, v| p.log_timestamps = Some(v)))
            .neg(&["--no-log-timestamps"]).env("LLAMA_ARG_LOG_TIMESTAMPS"),
        Opt::new(&["--spec-draft-type-k", "-ctkd", "--cache-type-k-draft"], Some("TYPE"), format!("KV cache data type for K for the draft model\nallowed values: {kv_types}\n(default: {})", d.cache_type_k_draft.name()), Str(|p, _, v| {
            p.cache_type_k_draft = kv_cache_type(v)?;
            Ok(())
        })).env("LLAMA_ARG_SPEC_DRAFT_CACHE_TYPE_K"),
        Opt::new(&["--spec-draft-type-v", "-ctvd", "--cache-type-v-draft"], Some("TYPE"), format!("KV cache data type for V for the draft model\nallowed values: {kv_types}\n(default: {})", d.cache_type_v_draft.name()), Str(|p, _, v| {
            p.cache_type_v_draft = kv_cache_type(v)?;
            Ok(())
        })).env("LLAMA_ARG_SPEC_DRAFT_CACHE_TYPE_V"),
        // imatrix
        Opt::new(&["--in-file"], Some("FNAME"), "an input file (use comma-separated values to specify multiple files)", Str(|p, _, v| {
            for item in super::util::parse_csv_row(v) {
                if std::fs::File::open(&item).is_err() {
                    return Err(format!("error: failed to open file '{item}'\n"));
                }
                p.in_files.push(item);
            }
            Ok(())
        })).ex(IMATRIX),
        Opt::new(&["-o", "--output", "--output-file"], Some("FNAME"), format!("output file (default: '{}')", d.out_file), Str(|p, _, v| {
            p.out_file = v.to_string();
            Ok(())
        })).ex(IMATRIX),
        Opt::new(&["-ofreq", "--output-frequency"], Some("N"), format!("output the imatrix every N iterations (default: {})", d.n_out_freq), Int(|p, _, v| {
            p.n_out_freq = v;
            Ok(())
        })).ex(IMATRIX),
        Opt::new(&["--output-format"], Some("{gguf,dat}"), format!("output format for imatrix file (default: {})", if d.imat_dat > 0 { "dat" } else { "gguf" }), Str(|p, _, v| {
            p.imat_dat = match v {
                "gguf" => -1,
                "dat" => 1,
                _ => return Err("invalid output format".into()),
            };
            Ok(())
        })).ex(IMATRIX),
        Opt::new(&["--save-frequency"], Some("N"), format!("save an imatrix copy every N iterations (default: {})", d.n_save_freq), Int(|p, _, v| {
            p.n_save_freq = v;
            Ok(())
        })).ex(IMATRIX),
        Opt::new(&["--process-output"], None, format!("collect data for the output tensor (default: {})", tf(d.process_output)), Void(|p, _| {
            p.process_output = true;
            Ok(())
        })).ex(IMATRIX),
        Opt::new(&["--ppl"], None, format!("whether to compute perplexity (default: {})", tf(d.compute_ppl)), Bool(|p, v| p.compute_ppl = v))
            .neg(&["--no-ppl"]).ex(IMATRIX),
        Opt::new(&["--chunk", "--from-chunk"], Some("N"), format!("start processing the input from chunk N (default: {})", d.i_chunk), Int(|p, _, v| {
            p.i_chunk = v;
            Ok(())
        })).ex(IMATRIX),
        Opt::new(&["--show-statistics"], None, format!("show imatrix statistics and then exit (default: {})", tf(d.show_statistics)), Void(|p, _| {
            p.show_statistics = true;
            Ok(())
        })).ex(IMATRIX),
        Opt::new(&["--parse-special"], None, format!("parse special tokens (chat, tool, etc) (default: {})", tf(d.parse_special)), Void(|p, _| {
            p.parse_special = true;
            Ok(())
        })).ex(IMATRIX),
        // tokenize
        Opt::new(&["--ids"], None, "if given, only print numerical token IDs, and not token strings.\nThe output format looks like [1, 2, 3], i.e. parseable by Python.", Void(|p, _| {
            p.tok_ids = true;
            Ok(())
        })).ex(TOKENIZE),
        Opt::new(&["--stdin"], None, "read prompt from standard input.", Void(|p, _| {
            p.tok_stdin = true;
            Ok(())
        })).ex(TOKENIZE),
        Opt::new(&["--no-bos"], None, "do not ever add a BOS token to the prompt, even if normally the model uses a BOS token.", Void(|p, _| {
            p.tok_no_bos = true;
            Ok(())
        })).ex(TOKENIZE),
        Opt::new(&["--no-parse-special"], None, "do not parse control tokens.", Void(|p, _| {
            p.parse_special = false;
            Ok(())
        })).ex(TOKENIZE),
        Opt::new(&["--show-count"], None, "print the total number of tokens.", Void(|p, _| {
            p.tok_show_count = true;
            Ok(())
        })).ex(TOKENIZE),
        // completion chat flags: templates are applied in tools/completion via common::chat
        Opt::new(&["--jinja"], None, format!("whether to use jinja template engine for chat (default: {})", ed(d.use_jinja)), Bool(|p, v| p.use_jinja = v))
            .neg(&["--no-jinja"]).env("LLAMA_ARG_JINJA").ex(COMPLETION),
        Opt::new(&["--reasoning-format"], Some("FORMAT"), "controls whether thought tags are allowed and/or extracted from the response, and in which format they're returned; one of:\n- none: leaves thoughts unparsed in `message.content`\n- deepseek: puts thoughts in `message.reasoning_content`\n- deepseek-legacy: keeps `<think>` tags in `message.content` while also populating `message.reasoning_content`\n(default: auto)", Str(|p, _, v| {
            match v {
                "none" | "deepseek" | "deepseek-legacy" | "auto" => {
                    p.reasoning_format = v.to_string();
                    Ok(())
                }
                _ => Err(format!("Unknown reasoning format: {v}")),
            }
        })).env("LLAMA_ARG_THINK").ex(COMPLETION),
        Opt::new(&["-rea", "--reasoning"], Some("[on|off|auto]"), "Use reasoning/thinking in the chat ('on', 'off', or 'auto', default: 'auto' (detect from template))", Str(|p, _, v| {
            if is_truthy(v) || is_falsey(v) || is_autoy(v) {
                p.reasoning = v.to_string();
                Ok(())
            } else {
                Err(format!("error: unknown value for --reasoning: '{v}'\n"))
            }
        })).env("LLAMA_ARG_REASONING").ex(COMPLETION),
        Opt::new(&["--reasoning-effort"], Some("LEVEL"), "reasoning effort level given to the chat template: 'default' to keep the template default,\nor a level such as 'low', 'medium', 'high'", Str(|p, _, v| {
            p.reasoning_effort = v.to_string();
            Ok(())
        })).env("LLAMA_ARG_REASONING_EFFORT").ex(COMPLETION),
        Opt::new(&["--reasoning-budget"], Some("N"), "token budget for thinking: -1 for unrestricted, 0 for immediate end, N>0 for token budget (default: -1)", Int(|p, _, v| {
            if v < -1 {
                return Err("invalid value".into());
            }
            p.reasoning_budget = v;
            Ok(())
        })).env("LLAMA_ARG_THINK_BUDGET").ex(COMPLETION),
        Opt::new(&["--reasoning-budget-message"], Some("MESSAGE"), "message injected before the end-of-thinking tag when reasoning budget is exhausted (default: none)", Str(|p, _, v| {
            p.reasoning_budget_message = v.to_string();
            Ok(())
        })).env("LLAMA_ARG_THINK_BUDGET_MESSAGE").ex(COMPLETION),
        Opt::new(&["--reasoning-preserve"], None, format!("preserve reasoning trace in the full history, not just the last assistant message (default: {})", ed(d.reasoning_preserve)), Bool(|p, v| p.reasoning_preserve = v))
            .neg(&["--no-reasoning-preserve"]).env("LLAMA_ARG_REASONING_PRESERVE").ex(COMPLETION),
        Opt::new(&["--chat-template"], Some("JINJA_TEMPLATE"), format!("set custom jinja chat template (default: template taken from model's metadata)\nif suffix/prefix are specified, template will be disabled\nonly commonly used templates are accepted (unless --jinja is set before this flag):\nlist of built-in templates:\n{}", llama::chat::builtin_templates().join(", ")), Str(|p, _, v| {
            p.chat_template = v.to_string();
            Ok(())
        })).env("LLAMA_ARG_CHAT_TEMPLATE").ex(COMPLETION),
        Opt::new(&["--chat-template-file"], Some("JINJA_TEMPLATE_FILE"), format!("set custom jinja chat template file (default: template taken from model's metadata)\nif suffix/prefix are specified, template will be disabled\nonly commonly used templates are accepted (unless --jinja is set before this flag):\nlist of built-in templates:\n{}", llama::chat::builtin_templates().join(", ")), Str(|p, _, v| {
            p.chat_template = read_file(v)?;
            Ok(())
        })).env("LLAMA_ARG_CHAT_TEMPLATE_FILE").ex(COMPLETION),
        Opt::new(&["--skip-chat-parsing"], None, "force a pure content parser, even if a Jinja template is specified; model will output everything in the content section (default: disabled)", Bool(|p, v| p.skip_chat_parsing = v))
            .neg(&["--no-skip-chat-parsing"]).env("LLAMA_ARG_SKIP_CHAT_PARSING").ex(COMPLETION),
        Opt::new(&["--simple-io"], None, "use basic IO for better compatibility in subprocesses and limited consoles", Void(|p, _| {
            p.simple_io = true;
            Ok(())
        })).ex(COMPLETION),
    ]);
    all.into_iter()
        .filter(|o| o.examples.is_empty() || o.examples.contains(&ex))
        .collect()
}

fn cpu_mask_ok(v: &str) -> bool {
    let h = v
        .strip_prefix("0x")
        .or_else(|| v.strip_prefix("0X"))
        .unwrap_or(v);
    !h.is_empty() && h.bytes().all(|c| c.is_ascii_hexdigit())
}

fn cpu_range_ok(v: &str) -> bool {
    let Some((lo, hi)) = v.split_once('-') else {
        return false;
    };
    let lo: Option<usize> = if lo.is_empty() {
        Some(0)
    } else {
        lo.parse().ok()
    };
    let hi: Option<usize> = if hi.is_empty() {
        Some(511)
    } else {
        hi.parse().ok()
    };
    matches!((lo, hi), (Some(l), Some(h)) if l <= h && h < 512)
}
