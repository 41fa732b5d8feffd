//! llama-bench's usage text (`print_usage`), with the defaults of `CmdParams`.

use crate::params::CmdParams;

/// The usage text (stdout), llama-bench's `print_usage` plus our `--plot`.
pub fn usage(argv0: &str) -> String {
    let d = CmdParams::defaults();
    let join = |v: &[i32]| {
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut s = String::new();
    s += &format!("usage: {argv0} [options]\n\noptions:\n");
    s += "  -h, --help\n";
    s += "  --version                                   print version and build info and exit\n";
    s += "  --numa <distribute|isolate|numactl>         numa mode (default: disabled)\n";
    s += &format!("  -r, --repetitions <n>                       number of times to repeat each test (default: {})\n", d.reps);
    s += &format!(
        "  --prio <-1|0|1|2|3>                         process/thread priority (default: {})\n",
        d.prio
    );
    s += &format!(
        "  --delay <0...N> (seconds)                   delay between each test (default: {})\n",
        d.delay
    );
    s += &format!("  -o, --output <csv|json|jsonl|md|sql>        output format printed to stdout (default: {})\n", d.output_format.name());
    s += &format!("  -oe, --output-err <csv|json|jsonl|md|sql>   output format printed to stderr (default: {})\n", d.output_format_stderr.name());
    s += "  --list-devices                              list available devices and exit\n";
    s += "  -v, --verbose                               verbose output\n";
    s += "  --progress                                  print test progress indicators\n";
    s += "  --no-warmup                                 skip warmup runs before benchmarking\n";
    s += "  -fitt, --fit-target <MiB>                   fit model to device memory with this margin per device in MiB (default: off)\n";
    s += "  -fitc, --fit-ctx <n>                        minimum ctx size for --fit-target (default: 4096)\n";
    s += "  --plot <file.svg>                           draw t/s against the swept parameter (not in llama.cpp)\n";
    s += "\ntest parameters:\n";
    s += &format!(
        "  -m, --model <filename>                            (default: {})\n",
        d.model.join(",")
    );
    s += &format!(
        "  -p, --n-prompt <n>                                (default: {})\n",
        join(&d.n_prompt)
    );
    s += &format!(
        "  -n, --n-gen <n>                                   (default: {})\n",
        join(&d.n_gen)
    );
    s += "  -pg <pp,tg>                                       (default: )\n";
    s += &format!(
        "  -d, --n-depth <n>                                 (default: {})\n",
        join(&d.n_depth)
    );
    s += &format!(
        "  -b, --batch-size <n>                              (default: {})\n",
        join(&d.n_batch)
    );
    s += &format!(
        "  -ub, --ubatch-size <n>                            (default: {})\n",
        join(&d.n_ubatch)
    );
    s += "  -ctk, --cache-type-k <t>                          (default: f16)\n";
    s += "  -ctv, --cache-type-v <t>                          (default: f16)\n";
    s += &format!(
        "  -t, --threads <n>                                 (default: {})\n",
        join(&d.n_threads)
    );
    s += "  -C, --cpu-mask <hex,hex>                          (default: 0x0)\n";
    s += "  --cpu-strict <0|1>                                (default: 0)\n";
    s += &format!(
        "  --poll <0...100>                                  (default: {})\n",
        join(&d.poll)
    );
    s += &format!(
        "  -ngl, --n-gpu-layers <n>                          (default: {})\n",
        join(&d.n_gpu_layers)
    );
    s += &format!(
        "  -ncmoe, --n-cpu-moe <n>                           (default: {})\n",
        join(&d.n_cpu_moe)
    );
    s += "  -sm, --split-mode <none|layer|row|tensor>         (default: layer)\n";
    s += &format!(
        "  -mg, --main-gpu <i>                               (default: {})\n",
        join(&d.main_gpu)
    );
    s += "  -nkvo, --no-kv-offload <0|1>                      (default: 0)\n";
    s += "  -fa, --flash-attn <on|off|auto>                   (default: auto)\n";
    s += "  -dev, --device <dev0/dev1/...>                    (default: auto)\n";
    s += "  -lm, --load-mode <auto|none|mmap|mlock|mmap+mlock|dio> (default: auto)\n";
    s += "  -lzm, --lazy-mode <on|auto|off>                   (default: auto)\n";
    s += "  -mmp, --mmap <0|1>                                (DEPRECATED IN FAVOUR OF --load-mode)\n";
    s += "  -dio, --direct-io <0|1>                           (DEPRECATED IN FAVOUR OF --load-mode)\n";
    s += "  -embd, --embeddings <0|1>                         (default: 0)\n";
    s += "  -ts, --tensor-split <ts0/ts1/..>                  (default: 0)\n";
    s += "  -ot --override-tensor <tensor name pattern>=<buffer type>;...\n";
    s += "                                                    (default: disabled)\n";
    s += "  -nopo, --no-op-offload <0|1>                      (default: 0)\n";
    s += "  --no-host <0|1>                                   (default: 0)\n";
    s += "  --repack <0|1>                                    (default: 1)\n";
    s += "\n";
    s += "Multiple values can be given for each parameter by separating them with ','\n";
    s += "or by specifying the parameter multiple times. Ranges can be given as\n";
    s += "'first-last' or 'first-last+step' or 'first-last*mult'.\n";
    s
}
