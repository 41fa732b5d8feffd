//! The flags every loading tool shares: help and version, threads, context, rope.

use super::*;

pub(super) fn shared_flags(v: &mut Vec<Entry>) {
    use Want::*;
    let c: &[&str] = &["completion"];
    let ppl: &[&str] = &["perplexity", "imatrix"];
    let yarn: &'static [&'static str] = &["--rope-scaling", "yarn", "--rope-scale", "4", "-n", "8"];
    // ----- help, version and the like: every common-parser tool -----
    v.push(e(
        COMMON,
        &["-h", "--help", "--usage"],
        &[],
        Solo("-h,    --help, --usage"),
        "",
    ));
    v.push(e(COMMON, &["--version"], &[], Solo("version: "), ""));
    v.push(e(
        COMMON,
        &["-cl", "--cache-list"],
        &[],
        Solo("number of models in cache: 0"),
        "",
    ));
    v.push(e(
        COMMON,
        &["--completion-bash"],
        &[],
        Solo("complete -F _llama_completions"),
        "",
    ));
    v.push(e(
        COMMON,
        &["--list-devices"],
        &[],
        Solo("Available devices:"),
        "",
    ));

    // ----- threads -----
    ctx(
        v,
        &["-t", "--threads"],
        &["1"],
        Has("system_info: n_threads = 1 ("),
        "ctx",
    );
    ctx(
        v,
        &["-tb", "--threads-batch"],
        &["1"],
        Has("(n_threads_batch = 1)"),
        "ctx",
    );
    ctx(
        v,
        &["-C", "--cpu-mask"],
        &["0x1"],
        Has("cpumask = 0x1"),
        "pool",
    );
    ctx(v, &["--cpu-strict"], &["1"], Has("strict_cpu = 1"), "pool");
    ctx(v, &["--prio"], &["-1"], Has("prio = -1"), "pool");
    ctx(v, &["--poll"], &["0"], Has("poll = 0"), "pool");
    ctx(
        v,
        &["-Cr", "--cpu-range"],
        &["0-0"],
        Has("cpumask = 0x1"),
        "pool2",
    );
    ctx(
        v,
        &["-Cb", "--cpu-mask-batch"],
        &["0x1", "-tb", "1"],
        Has("cpumask = 0x1"),
        "bpool",
    );
    ctx(
        v,
        &["--cpu-strict-batch"],
        &["1"],
        Has("strict_cpu = 1"),
        "bpool",
    );
    ctx(v, &["--prio-batch"], &["1"], Has("prio = 1"), "bpool");
    ctx(v, &["--poll-batch"], &["0"], Has("poll = 0"), "bpool");
    ctx(
        v,
        &["-Crb", "--cpu-range-batch"],
        &["0-0", "-tb", "1"],
        Has("cpumask = 0x1"),
        "bpool2",
    );
    ctx(v, &["--numa"], &["isolate"], Has("--numa isolate: "), "ctx");

    // ----- context -----
    v.push(e(
        &["completion", "eval-callback"],
        &["-c", "--ctx-size"],
        &["512"],
        Has("llama_context: n_ctx                 = 512"),
        "ctx",
    ));
    v.push(e(
        ppl,
        &["-c", "--ctx-size"],
        &["32"],
        Has("n_ctx=32"),
        "c32",
    ));
    v.push(e(
        &["tokenize"],
        &["-c", "--ctx-size"],
        &["512"],
        Warn,
        "warn",
    ));
    v.push(e(
        c,
        &["-n", "--predict", "--n-predict"],
        &["1"],
        Has("n_predict = 1,"),
        "ctx",
    ));
    v.push(e(
        NO_SAMPLING,
        &["-n", "--predict", "--n-predict"],
        &["1"],
        Warn,
        "warn",
    ));
    v.push(e(
        &["completion", "eval-callback"],
        &["-b", "--batch-size"],
        &["16"],
        Has("llama_context: n_batch               = 16"),
        "ctx",
    ));
    v.push(e(
        ppl,
        &["-b", "--batch-size"],
        &["8"],
        Has("llama_context: n_batch               = 8"),
        "ctx",
    ));
    v.push(e(
        &["tokenize"],
        &["-b", "--batch-size"],
        &["16"],
        Warn,
        "warn",
    ));
    ctx(
        v,
        &["-ub", "--ubatch-size"],
        &["8"],
        Has("llama_context: n_ubatch              = 8"),
        "ctx",
    );
    v.push(e(c, &["--keep"], &["1"], Has("n_keep = 1"), "ctx"));
    v.push(e(NO_SAMPLING, &["--keep"], &["1"], Warn, "warn"));
    ctx(
        v,
        &["--swa-full"],
        &[],
        Tested("tests/tests/gemma3_cli.rs"),
        "",
    );
    ctx(
        v,
        &["-fa", "--flash-attn"],
        &["off"],
        Has("llama_context: flash_attn            = disabled"),
        "ctx",
    );
    ctx(
        v,
        &["-ctk", "--cache-type-k"],
        &["f32"],
        Has("K (f32)"),
        "ctx",
    );
    ctx(
        v,
        &["-ctv", "--cache-type-v"],
        &["f32"],
        Has("V (f32)"),
        "ctx",
    );
    ctx(
        v,
        &["-dt", "--defrag-thold"],
        &["0.1"],
        Has("DEPRECATED: --defrag-thold is deprecated"),
        "ctx",
    );
    v.push(e(
        &["completion", "eval-callback"],
        &["-np", "--parallel"],
        &["2"],
        Has("llama_context: n_seq_max             = 2"),
        "np",
    ));
    v.push(e(ppl, &["-np", "--parallel"], &["2"], Unwalked, ""));
    v.push(e(
        &["tokenize"],
        &["-np", "--parallel"],
        &["2"],
        Warn,
        "warn",
    ));
    ctx(
        v,
        &["-kvo", "--kv-offload", "-nkvo", "--no-kv-offload"],
        &[],
        Tested("tests/tests/vulkan_cli.rs"),
        "",
    );
    ctx(
        v,
        &["--repack", "-nr", "--no-repack"],
        &[],
        Tested("tests/tests/perplexity_cli.rs"),
        "",
    );
    ctx(v, &["--no-host"], &[], Warn, "warn");
    ctx(
        v,
        &["--rpc"],
        &["127.0.0.1:1"],
        Fails("failed to find RPC backend"),
        "",
    );
    ctx(
        v,
        &["-lm", "--load-mode"],
        &["none"],
        Has("load_mode = none"),
        "ctx",
    );
    ctx(v, &["-lzm", "--lazy-mode"], &["on"], Warn, "warn");
    ctx(
        v,
        &["-dev", "--device"],
        &["none"],
        Tested("tests/tests/vulkan_cli.rs"),
        "",
    );
    ctx(
        v,
        &["--override-tensor", "-ot"],
        &["token_embd=CPU"],
        Has("tensor token_embd.weight ("),
        "ctx",
    );
    ctx(
        v,
        &["-cmoe", "--cpu-moe"],
        &[],
        Tested("tests/tests/moe_models.rs"),
        "",
    );
    ctx(
        v,
        &["-ncmoe", "--n-cpu-moe"],
        &["1"],
        Tested("tests/tests/moe_models.rs"),
        "",
    );
    ctx(
        v,
        &["-ncffn", "--n-cpu-ffn"],
        &["1"],
        Has("tensor blk.0.ffn_up.weight ("),
        "np",
    );
    ctx(
        v,
        &["-ngl", "--gpu-layers", "--n-gpu-layers"],
        &["0"],
        Tested("tests/tests/vulkan_cli.rs"),
        "",
    );
    ctx(
        v,
        &["-sm", "--split-mode"],
        &["row"],
        Has("Setting the split mode has no effect"),
        "ctx",
    );
    ctx(
        v,
        &["-ts", "--tensor-split"],
        &["1,1"],
        Has("Setting a tensor split has no effect"),
        "ctx",
    );
    ctx(
        v,
        &["-mg", "--main-gpu"],
        &["1"],
        Has("Setting the main GPU has no effect"),
        "ctx",
    );
    ctx(
        v,
        &["-fit", "--fit"],
        &["on"],
        Has("fitting params to device memory"),
        "fit",
    );
    ctx(
        v,
        &["-fitt", "--fit-target"],
        &["2048"],
        Has(">= 2048 MiB of system memory"),
        "fit",
    );
    ctx(v, &["-fitc", "--fit-ctx"], &["512"], Unwalked, "");
    ctx(
        v,
        &["--check-tensors"],
        &[],
        Tested("tests/tests/reliability_errors.rs"),
        "",
    );
    ctx(
        v,
        &["--override-kv"],
        &["llama.context_length=int:300"],
        Has("print_info: n_ctx_train           = 300"),
        "ctx",
    );
    ctx(v, &["--op-offload", "--no-op-offload"], &[], Unwalked, "");
    ctx(
        v,
        &["--lora"],
        &["{D}/none.gguf"],
        Fails("failed to open"),
        "",
    );
    ctx(
        v,
        &["--lora-scaled"],
        &["{D}/none.gguf:0.5"],
        Fails("failed to open"),
        "",
    );
    ctx(
        v,
        &["--control-vector"],
        &["{D}/none.gguf"],
        Fails("none.gguf"),
        "",
    );
    ctx(
        v,
        &["--control-vector-scaled"],
        &["{D}/none.gguf:0.5"],
        Fails("none.gguf"),
        "",
    );
    ctx(
        v,
        &["--control-vector-layer-range"],
        &["1", "2"],
        Tested("tests/tests/control_vector_cli.rs"),
        "",
    );
    v.push(e(
        COMMON,
        &["--spec-draft-type-k", "-ctkd", "--cache-type-k-draft"],
        &["f32"],
        Warn,
        "warn",
    ));
    v.push(e(
        COMMON,
        &["--spec-draft-type-v", "-ctvd", "--cache-type-v-draft"],
        &["f32"],
        Warn,
        "warn",
    ));

    // ----- rope -----
    ctx(
        v,
        &["--rope-scaling"],
        &["yarn", "--rope-scale", "4"],
        Has("custom YaRN scaling detected"),
        "yarn",
    );
    ctx(
        v,
        &["--rope-scale"],
        &["2"],
        Has("llama_context: freq_scale            = 0.5"),
        "ctx",
    );
    ctx(
        v,
        &["--rope-freq-base"],
        &["1000"],
        Has("llama_context: freq_base             = 1000.0"),
        "ctx",
    );
    ctx(
        v,
        &["--rope-freq-scale"],
        &["0.25"],
        Has("freq_scale            = 0.25"),
        "fit",
    );
    ctx(
        v,
        &["--yarn-orig-ctx"],
        &["1000", "--rope-scaling", "yarn", "--rope-scale", "3"],
        Has("n_ctx_train adjusted to 3000"),
        "",
    );
    for names in [
        &["--yarn-ext-factor"][..],
        &["--yarn-attn-factor"],
        &["--yarn-beta-slow"],
        &["--yarn-beta-fast"],
    ] {
        let names: &'static [&'static str] = Box::leak(names.to_vec().into_boxed_slice());
        // the betas move the generated text of the random model too little to show
        let beta = names[0].starts_with("--yarn-beta");
        let tools: &[&str] = if beta {
            &["perplexity", "eval-callback", "imatrix"]
        } else {
            LOADS
        };
        if names[0] == "--yarn-attn-factor" {
            // YaRN itself replaces the factor (llama_context recomputes it from the scale, as
            // llama.cpp does), so its effect shows on the plain rope the file asks for
            v.push(e(tools, names, &["0.5", "-n", "8"], OutDiffers, ""));
        } else {
            v.push(pre(e(tools, names, &["0.5"], OutDiffers, ""), yarn));
        }
        if beta {
            v.push(e(c, names, &["0.5"], Unwalked, ""));
        }
        v.push(e(&["tokenize"], names, &["0.5"], Warn, "warn"));
    }
}
