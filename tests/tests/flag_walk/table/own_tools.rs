//! The flags of one tool alone.

use super::*;

/// The flags of one tool alone: perplexity's and imatrix's tasks, tokenize's output forms,
/// llama-bench's test parameters (each a column of its table), and the GGUF tools.
pub(super) fn tools_of_their_own(v: &mut Vec<Entry>) {
    use Want::*;
    let ppl: &[&str] = &["perplexity"];
    let tests_ppl = Tested("tests/tests/perplexity_cli.rs");
    v.push(e(
        ppl,
        &["-kvu", "--kv-unified"],
        &[],
        Has("kv_unified            = true"),
        "p1",
    ));
    v.push(pre(
        e(
            ppl,
            &["-no-kvu", "--no-kv-unified"],
            &[],
            Lacks("kv_unified            = true"),
            "",
        ),
        &["-kvu"],
    ));
    v.push(e(
        &["perplexity", "imatrix"],
        &["--chunks"],
        &["2"],
        Has("over 2 chunks"),
        "p1",
    ));
    for names in [
        &["--hellaswag"][..],
        &["--hellaswag-tasks"],
        &["--winogrande"],
        &["--multiple-choice"],
        &["--kl-divergence"],
        &["--save-all-logits", "--kl-divergence-base"],
        &["--ppl-output-type"],
    ] {
        let names: &'static [&'static str] = Box::leak(names.to_vec().into_boxed_slice());
        v.push(e(
            ppl,
            names,
            &[],
            Tested("tests/tests/perplexity_cli.rs"),
            "",
        ));
    }
    let _ = tests_ppl;
    v.push(e(ppl, &["--winogrande-tasks"], &[], Unwalked, ""));
    v.push(e(ppl, &["--multiple-choice-tasks"], &[], Unwalked, ""));
    v.push(e(ppl, &["--ppl-stride"], &["8"], OutDiffers, ""));

    let im: &[&str] = &["imatrix"];
    let cli = "tools/imatrix/tests/cli.rs";
    for names in [
        &["--in-file"][..],
        &["-o", "--output", "--output-file"],
        &["-ofreq", "--output-frequency"],
        &["--output-format"],
        &["--save-frequency"],
        &["--process-output"],
        &["--ppl", "--no-ppl"],
        &["--show-statistics"],
    ] {
        let names: &'static [&'static str] = Box::leak(names.to_vec().into_boxed_slice());
        v.push(e(im, names, &[], Tested(cli), ""));
    }
    v.push(e(
        im,
        &["--chunk", "--from-chunk"],
        &["1"],
        Has("removing initial 1 chunks"),
        "p1",
    ));
    v.push(e(im, &["--parse-special"], &[], Unwalked, ""));

    let tok: &[&str] = &["tokenize"];
    for names in [
        &["--ids"][..],
        &["--stdin"],
        &["--no-bos"],
        &["--no-parse-special"],
        &["--show-count"],
    ] {
        let names: &'static [&'static str] = Box::leak(names.to_vec().into_boxed_slice());
        v.push(e(
            tok,
            names,
            &[],
            Tested("tests/tests/tokenize_cli.rs"),
            "",
        ));
    }

    // llama-bench: each test parameter given adds its column to the markdown table
    let b: &[&str] = &["bench"];
    let bench_cli = "tests/tests/bench_cli.rs";
    v.push(e(b, &["-h", "--help"], &[], Solo("test parameters:"), ""));
    v.push(e(b, &["--version"], &[], Solo("version: "), ""));
    v.push(e(
        b,
        &["--numa"],
        &["isolate", "-v"],
        Has("--numa isolate: "),
        "",
    ));
    v.push(e(b, &["--prio"], &["-1", "-v"], Has("prio = -1"), ""));
    v.push(e(b, &["--delay"], &["1"], Unwalked, ""));
    for names in [
        &["-r", "--repetitions"][..],
        &["-o", "--output"],
        &["-oe", "--output-err"],
        &["--list-devices"],
        &["--progress"],
        &["--no-warmup"],
        &["--plot"],
        &["-m", "--model"],
        &["-p", "--n-prompt"],
        &["-n", "--n-gen"],
        &["-pg"],
        &["-d", "--n-depth"],
        &["-t", "--threads"],
    ] {
        let names: &'static [&'static str] = Box::leak(names.to_vec().into_boxed_slice());
        v.push(e(b, names, &[], Tested(bench_cli), ""));
    }
    v.push(e(
        b,
        &["-v", "--verbose"],
        &[],
        Has("llama_model_loader: loaded meta data"),
        "",
    ));
    v.push(e(
        b,
        &["-fitt", "--fit-target"],
        &["1024"],
        Fails("fitting to device memory is not supported by this build"),
        "",
    ));
    v.push(e(
        b,
        &["-fitc", "--fit-ctx"],
        &["512"],
        Fails("fitting to device memory is not supported by this build"),
        "",
    ));
    let cols: &[(
        &'static [&'static str],
        &'static [&'static str],
        &'static str,
        &'static str,
    )] = &[
        (&["-b", "--batch-size"], &["16"], " n_batch |", "b1"),
        (&["-ub", "--ubatch-size"], &["8"], " n_ubatch |", "b1"),
        (&["-ctk", "--cache-type-k"], &["q8_0"], " type_k |", "b1"),
        (&["-ctv", "--cache-type-v"], &["q8_0"], " type_v |", "b2"),
        (&["-C", "--cpu-mask"], &["0x1"], " cpu_mask   |", "b1"),
        (&["--cpu-strict"], &["1"], " cpu_strict |", "b1"),
        (&["--poll"], &["0"], "       poll |", "b1"),
        (&["-ncmoe", "--n-cpu-moe"], &["1"], " n_cpu_moe |", "b1"),
        (&["-sm", "--split-mode"], &["none"], "     sm |", "b1"),
        (&["-mg", "--main-gpu"], &["1"], " main_gpu |", "b1"),
        (&["-nkvo", "--no-kv-offload"], &["1"], " nkvo |", "b1"),
        (&["-fa", "--flash-attn"], &["on"], "  fa |", "b2"),
        (&["-dev", "--device"], &["none"], " dev          |", "b1"),
        (&["-lm", "--load-mode"], &["none"], "         lm |", "b1"),
        (&["-lzm", "--lazy-mode"], &["on"], " lazy_mode  |", "b1"),
        (&["-mmp", "--mmap"], &["0"], "       none |", "b3"),
        (&["-dio", "--direct-io"], &["1"], "        dio |", "b4"),
        (&["-embd", "--embeddings"], &["1"], "       embd |", "b1"),
        (&["-ts", "--tensor-split"], &["1"], " ts           |", "b1"),
        (
            &["-ot", "--override-tensor"],
            &["token_embd=CPU"],
            " ot                    |",
            "b1",
        ),
        (&["-nopo", "--no-op-offload"], &["1"], " nopo |", "b1"),
        (&["--no-host"], &["1"], "  noh |", "b1"),
        (&["--repack"], &["0"], " rpk |", "b1"),
    ];
    for &(names, args, col, group) in cols {
        v.push(e(b, names, args, Has(col), group));
    }
    v.push(e(
        b,
        &["-ngl", "--n-gpu-layers"],
        &[],
        Tested("tests/tests/vulkan_cli.rs"),
        "",
    ));

    // llama-quantize (base: the small f32 model to q8_0)
    let q: &[&str] = &["quantize"];
    let qt = "tools/quantize/tests/flags.rs";
    let qn = "tools/quantize/tests/quant_new.rs";
    v.push(e(
        q,
        &["--help"],
        &[],
        Fails("allowed quantization types"),
        "",
    ));
    v.push(e(q, &["--imatrix"], &[], Tested(qn), ""));
    v.push(e(q, &["--include-weights"], &[], Tested(qt), ""));
    v.push(e(q, &["--exclude-weights"], &[], Tested(qn), ""));
    v.push(e(q, &["--output-tensor-type"], &[], Tested(qn), ""));
    v.push(e(q, &["--prune-layers"], &[], Tested(qt), ""));
    v.push(e(q, &["--keep-split"], &[], Tested(qt), ""));
    v.push(e(q, &["--override-kv"], &[], Tested(qt), ""));
    v.push(e(
        q,
        &["--dry-run"],
        &[],
        Tested("tools/quantize/tests/reference.rs"),
        "",
    ));
    v.push(e(
        q,
        &["--allow-requantize"],
        &["{Q}", "{D}/requant.gguf", "q4_0"],
        Solo("type =   q8_0, converting to q4_0"),
        "",
    ));
    v.push(e(q, &["--pure"], &["{S}", "{D}/pure.gguf", "q4_k"], Solo("output.weight                        - ncols     64 not divisible by 256 (required for type    q4_K)"), ""));
    v.push(e(q, &["--leave-output-tensor"], &[], Lacks("output.weight                        - [    64,    300,      1,      1], type =    f32, converting to q8_0"), "q1"));
    v.push(e(q, &["--token-embedding-type"], &["q4_0"], Has("token_embd.weight                    - [    64,    300,      1,      1], type =    f32, converting to q4_0"), "q1"));
    v.push(e(q, &["--tensor-type"], &["attn_q=q4_0"], Has("blk.0.attn_q.weight                  - [    64,     64,      1,      1], type =    f32, converting to q4_0"), "q2"));
    v.push(e(q, &["--tensor-type-file"], &["{D}/types.txt"], Has("blk.0.attn_q.weight                  - [    64,     64,      1,      1], type =    f32, converting to q4_0"), "q3"));
    v.push(e(q, &["--max-buffer-size"], &["1"], Unwalked, ""));

    // llama-gguf-split, llama-gguf-inspect
    let sp: &[&str] = &["gguf-split"];
    // as llama.cpp's: only --help is taken, -h is "bad arguments" (and the usage)
    v.push(e(sp, &["--help"], &[], Solo("usage:"), ""));
    v.push(e(sp, &["-h"], &[], Fails("error: bad arguments"), ""));
    v.push(e(sp, &["--version"], &[], Solo("version: "), ""));
    for names in [
        &["--split"][..],
        &["--merge"],
        &["--split-max-tensors"],
        &["--split-max-size"],
        &["--no-tensor-first-split"],
        &["--dry-run"],
        &["--delete-splits"],
    ] {
        let names: &'static [&'static str] = Box::leak(names.to_vec().into_boxed_slice());
        v.push(e(
            sp,
            names,
            &[],
            Tested("tests/tests/gguf_split_cli.rs"),
            "",
        ));
    }
    let gi: &[&str] = &["gguf-inspect"];
    v.push(e(
        gi,
        &["-h", "--help"],
        &[],
        Solo("Usage: llama-gguf-inspect"),
        "",
    ));
    v.push(e(gi, &["--version"], &[], Solo("version: "), ""));
    for (names, file) in [
        (&["--json"][..], "gguf_inspect.rs"),
        (&["--full-arrays"], "gguf_inspect.rs"),
        (&["--no-tensors"], "gguf_inspect.rs"),
        (&["--key"], "gguf_inspect.rs"),
        (&["--markdown"], "gguf_inspect_dump.rs"),
        (&["--data-offset"], "gguf_inspect_dump.rs"),
        (&["--data-alignment"], "gguf_inspect_dump.rs"),
        (&["--verbose"], "gguf_inspect_dump.rs"),
    ] {
        let names: &'static [&'static str] = Box::leak(names.to_vec().into_boxed_slice());
        let file: &'static str = Box::leak(format!("tests/tests/{file}").into_boxed_str());
        v.push(e(gi, names, &[], Tested(file), ""));
    }

    // llama-gguf-new: the file it writes, read back by llama-gguf-inspect
    let gn: &[&str] = &["gguf-new"];
    v.push(e(
        gn,
        &["-h", "--help"],
        &[],
        Solo("Write a GGUF model with random weights"),
        "",
    ));
    for names in [
        &["-o", "--output"][..],
        &["--preset"],
        &["--arch"],
        &["--layers"],
        &["--embd"],
        &["--heads"],
        &["--heads-kv"],
        &["--ff"],
        &["--ctx"],
        &["--type"],
        &["--seed"],
        &["--vocab"],
        &["--vocab-size"],
    ] {
        let names: &'static [&'static str] = Box::leak(names.to_vec().into_boxed_slice());
        v.push(e(gn, names, &[], Tested("tests/tests/gguf_new.rs"), ""));
    }
    v.push(e(
        gn,
        &["--name"],
        &["walkname"],
        Gguf("general.name str              = walkname"),
        "n1",
    ));
    v.push(e(
        gn,
        &["--rope-freq-base"],
        &["1234"],
        Gguf("llama.rope.freq_base f32              = 1234.000000"),
        "n1",
    ));
    v.push(e(
        gn,
        &["--rms-eps"],
        &["0.001"],
        Gguf("llama.attention.layer_norm_rms_epsilon f32              = 0.001000"),
        "n1",
    ));
    v.push(e(
        gn,
        &["--swa"],
        &["16", "--arch", "gemma2"],
        Gguf("gemma2.attention.sliding_window u32              = 16"),
        "n2",
    ));
    v.push(e(
        gn,
        &["--experts"],
        &["4", "--arch", "qwen2moe"],
        Gguf("qwen2moe.expert_count u32              = 4"),
        "n3",
    ));
    v.push(e(
        gn,
        &["--experts-used"],
        &["1"],
        Gguf("qwen2moe.expert_used_count u32              = 1"),
        "n3",
    ));
    v.push(e(
        gn,
        &["--ff-exp"],
        &["32"],
        Gguf("qwen2moe.expert_feed_forward_length u32              = 32"),
        "n3",
    ));
    v.push(e(
        gn,
        &["--ff-shexp"],
        &["16"],
        Gguf("qwen2moe.expert_shared_feed_forward_length u32              = 16"),
        "n3",
    ));
    v.push(e(
        gn,
        &["--experts-shared"],
        &["1", "--arch", "deepseek"],
        Gguf("deepseek.expert_shared_count u32              = 1"),
        "n4",
    ));
    v.push(e(
        gn,
        &["--dense-lead"],
        &["0"],
        Gguf("deepseek.leading_dense_block_count u32              = 0"),
        "n4",
    ));
    v.push(e(
        gn,
        &["--expert-scales"],
        &[],
        Gguf("blk.0.ffn_gate_exps.scale"),
        "n3",
    ));
    v.push(e(
        gn,
        &["--yarn"],
        &["4", "--arch", "mistral3"],
        Gguf("mistral3.rope.scaling.factor f32              = 4.000000"),
        "",
    ));
    // deepseek2's layouts: one KV head (the latent) and no dense leading layer in one layer
    v.push(e(
        gn,
        &["--nextn"],
        &[
            "1",
            "--arch",
            "deepseek2",
            "--heads-kv",
            "1",
            "--dense-lead",
            "0",
        ],
        Gguf("deepseek2.nextn_predict_layers u32              = 1"),
        "",
    ));
    v.push(e(
        gn,
        &["--fused-gate-up-exps"],
        &[
            "--arch",
            "deepseek2",
            "--heads-kv",
            "1",
            "--dense-lead",
            "0",
        ],
        Gguf("blk.0.ffn_gate_up_exps.weight"),
        "",
    ));
    v.push(e(
        gn,
        &["--mla-kv-b"],
        &[
            "--arch",
            "deepseek2",
            "--heads-kv",
            "2",
            "--dense-lead",
            "0",
        ],
        Gguf("blk.0.attn_kv_b.weight"),
        "",
    ));
    v.push(e(gn, &["--quiet"], &[], Unwalked, ""));
    v.push(e(gn, &["--force"], &[], Unwalked, ""));

    let ld: &[&str] = &["list-devices"];
    v.push(e(
        ld,
        &["-h", "--help", "--usage"],
        &[],
        Solo("usage: "),
        "",
    ));
    v.push(e(ld, &["--version"], &[], Solo("version: "), ""));
}
