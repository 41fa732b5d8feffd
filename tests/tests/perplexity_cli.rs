//! llama-perplexity end to end on the reference model: llama.cpp's per-chunk values and final
//! estimate (shared/reference/logs/perplexity-f32.log), the KL-divergence round trip through a
//! base logits file, and the error paths.

use std::process::{Command, Output};

use test_fixtures::{simd_class, SimdClass};

fn ppl(args: &[&str]) -> Output {
    Command::new(test_fixtures::bin("llama-perplexity", "llama-perplexity"))
        .args(args)
        .output()
        .expect("run llama-perplexity")
}

/// Runs llama-perplexity, asserts it succeeded and returns (stdout, stderr).
fn ppl_ok(args: &[&str]) -> (String, String) {
    let out = ppl(args);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    (stdout, stderr)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn gpl3() -> String {
    test_fixtures::shared_dir()
        .join("reference/text/gpl-3.txt")
        .display()
        .to_string()
}

/// The `[i]x,` values of a stdout stream.
fn chunk_values(s: &str) -> Vec<f64> {
    s.split(',')
        .filter_map(|item| {
            let item = item.trim();
            let rest = item.strip_prefix('[')?;
            let (_, v) = rest.split_once(']')?;
            v.parse().ok()
        })
        .collect()
}

/// (PPL, uncertainty) of "Final estimate: PPL = X +/- Y".
fn final_estimate(s: &str) -> Option<(f64, f64)> {
    let line = s.lines().find(|l| l.contains("Final estimate: PPL = "))?;
    let rest = line.split("Final estimate: PPL = ").nth(1)?;
    let (a, b) = rest.split_once(" +/- ")?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs()
}

/// llama.cpp's log for `ty` recorded on this CPU's SIMD class, and the relative bound that
/// applies: 0.01% where the float order is llama.cpp's (the values are then equal to every
/// printed digit), 1% on CPUs for which no llama.cpp log exists (compared with the AVX2 one).
fn reference_log(ty: &str) -> (String, f64) {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let avx2 = fixtures.join(format!("perplexity-{ty}-avx2.log"));
    match simd_class() {
        SimdClass::Avx512 => {
            // shared/reference has llama.cpp's AVX-512 logs for f32, q8_0, q4_0 and q4_k_m;
            // tests/fixtures holds the ones recorded here with llama.cpp built from the pinned
            // source
            let shared =
                test_fixtures::shared_dir().join(format!("reference/logs/perplexity-{ty}.log"));
            let fixture = fixtures.join(format!("perplexity-{ty}.log"));
            let path = if shared.exists() { shared } else { fixture };
            (std::fs::read_to_string(path).unwrap(), 1e-4)
        }
        SimdClass::Avx2 => (std::fs::read_to_string(avx2).unwrap(), 1e-4),
        SimdClass::Other => {
            eprintln!("note: no llama.cpp log for this CPU's float order; comparing with the AVX2 one within 1%");
            (std::fs::read_to_string(avx2).unwrap(), 1e-2)
        }
    }
}

/// Runs `-c 128 -b 128 --chunks 8` on `model` and checks every chunk value and the final
/// estimate against llama.cpp's log of the same file on the same SIMD class (`reference_log`);
/// returns stderr.
fn assert_matches_reference(model: &std::path::Path, ty: &str) -> String {
    assert_matches_log(model, ty, reference_log(ty), &[])
}

/// As `assert_matches_reference`, against `log` (llama.cpp's log and the relative bound), with
/// `extra` arguments.
fn assert_matches_log(
    model: &std::path::Path,
    ty: &str,
    (reference, rel): (String, f64),
    extra: &[&str],
) -> String {
    let want_chunks = chunk_values(reference.lines().find(|l| l.starts_with("[1]")).unwrap());
    let want_final = final_estimate(&reference).unwrap();
    assert_eq!(want_chunks.len(), 8);

    let gpl3 = gpl3();
    let mut args = vec![
        "-m",
        model.to_str().unwrap(),
        "-f",
        &gpl3,
        "-c",
        "128",
        "-b",
        "128",
        "--chunks",
        "8",
    ];
    args.extend_from_slice(extra);
    let out = ppl(&args);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{ty}: {stderr}");
    // stdout also carries the end of the ETA line ("0.12 minutes")
    let got = chunk_values(stdout.lines().find(|l| l.starts_with("[1]")).unwrap_or(""));
    assert_eq!(got.len(), 8, "{ty}: stdout: {stdout}");
    for (i, (g, w)) in got.iter().zip(&want_chunks).enumerate() {
        assert!(
            close(*g, *w, rel),
            "{ty} chunk {}: {g} vs llama.cpp {w} ({:?} log)",
            i + 1,
            simd_class()
        );
    }
    let (p, u) = final_estimate(&stderr).expect("final estimate on stderr");
    assert!(
        close(p, want_final.0, rel),
        "{ty}: PPL {p} vs {}",
        want_final.0
    );
    assert!(
        close(u, want_final.1, rel),
        "{ty}: uncertainty {u} vs {}",
        want_final.1
    );
    stderr
}

#[test]
fn matches_llama_cpp_per_chunk_and_final() {
    let Some(m) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let stderr = assert_matches_reference(&m, "f32");
    assert!(stderr.contains(
        "perplexity: calculating perplexity over 8 chunks, n_ctx=128, batch_size=128, n_seq=1"
    ));
    assert!(stderr.contains("perplexity: tokenizing the input .."));
    assert!(stderr.contains(" seconds per pass - ETA "));
}

#[test]
fn kl_divergence_of_a_model_with_itself_is_zero() {
    let Some(m) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let m = m.to_str().unwrap().to_string();
    let dir = test_fixtures::scratch_dir("ppl_kld");
    let base = dir.join("base.kld");
    let base_s = base.to_str().unwrap();

    // two chunks of 128: 2 x 63 = 126 scored tokens, enough for the statistics block
    let out = ppl(&[
        "-m",
        &m,
        "-f",
        &gpl3(),
        "-c",
        "128",
        "-b",
        "128",
        "--chunks",
        "2",
        "--kl-divergence-base",
        base_s,
    ]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("perplexity: saving all logits to {base_s}")));
    let (ppl_base, _) = final_estimate(&stderr).unwrap();

    let bytes = std::fs::read(&base).expect("base file written");
    let n_vocab = i32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    assert_eq!(&bytes[..8], b"_logits_");
    assert_eq!(i32::from_le_bytes(bytes[8..12].try_into().unwrap()), 128);
    assert_eq!(n_vocab, 151936);
    assert_eq!(i32::from_le_bytes(bytes[16..20].try_into().unwrap()), 2);
    let nv = 2 * n_vocab.div_ceil(2) + 4;
    assert_eq!(bytes.len(), 20 + 2 * 128 * 4 + 2 * 63 * nv * 2);

    let (stdout, stderr) = ppl_ok(&[
        "-m",
        &m,
        "-c",
        "128",
        "-b",
        "128",
        "--kl-divergence-base",
        base_s,
        "--kl-divergence",
    ]);
    assert!(
        stderr
            .contains("kl_divergence: computing over 2 chunks, n_ctx=128, batch_size=128, n_seq=1"),
        "{stderr}"
    );
    assert_eq!(
        stdout
            .matches("chunk             PPL               ln(PPL(Q)/PPL(base))")
            .count(),
        2
    );
    let field = |label: &str| -> f64 {
        let l = stdout
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no '{label}' in {stdout}"));
        let v = l[label.len()..]
            .trim_start_matches([' ', ':'])
            .split_whitespace()
            .next()
            .unwrap();
        v.trim_end_matches('%').parse().unwrap()
    };
    let mean_kld = field("Mean    KLD:");
    assert!(mean_kld.abs() < 1e-3, "mean KLD {mean_kld}");
    assert!(field("Maximum KLD:").abs() < 1e-2);
    assert_eq!(field("Same top p:"), 100.0);
    assert!(field("RMS Δp    :").abs() < 0.01);
    assert!(close(
        field("Mean PPL(Q)                   :"),
        ppl_base,
        1e-4
    ));
    assert!(close(
        field("Mean PPL(base)                :"),
        ppl_base,
        1e-3
    ));
    assert!(stdout.contains("====== KL divergence statistics ======"));
    assert!(stdout.contains("====== Token probability statistics ======"));
}

#[test]
fn output_type_one_and_batched_chunks() {
    let Some(m) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    // -b 256 holds two chunks of 128: decoded together as two sequences, same values
    let (stdout, stderr) = ppl_ok(&[
        "-m",
        m.to_str().unwrap(),
        "-f",
        &gpl3(),
        "-c",
        "128",
        "-b",
        "256",
        "--chunks",
        "2",
        "--ppl-output-type",
        "1",
    ]);
    assert!(
        stderr.contains("n_ctx=128, batch_size=256, n_seq=2"),
        "{stderr}"
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.ends_with(" minutes"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    assert_eq!(rows[0][0], "0");
    assert_eq!(
        rows[1][0], "0",
        "llama.cpp prints the offset of the first chunk of the batch"
    );
    let reference = std::fs::read_to_string(
        test_fixtures::shared_dir().join("reference/logs/perplexity-f32.log"),
    )
    .unwrap();
    let want = chunk_values(reference.lines().find(|l| l.starts_with("[1]")).unwrap());
    for (r, w) in rows.iter().zip(&want) {
        let v: f64 = r[1].parse().unwrap();
        assert!(close(v, *w, 1e-4), "{v} vs {w}");
        assert_eq!(r.len(), 4);
    }
}

#[test]
fn errors() {
    let Some(m) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let m = m.to_str().unwrap().to_string();
    let dir = test_fixtures::scratch_dir("ppl_errors");
    let short = dir.join("short.txt");
    std::fs::write(&short, "only a few words here\n").unwrap();

    let out = ppl(&["-m", &m, "-f", short.to_str().unwrap(), "-c", "128"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "llama.cpp exits 0 after a scoring error; a script is better told"
    );
    let err = text(&out.stderr);
    assert!(
        err.contains(
            "perplexity: you need at least 256 tokens to evaluate perplexity with a context of 128"
        ),
        "{err}"
    );
    assert!(err.contains("perplexity: the data file you provided tokenizes to only"));

    let out = ppl(&["-m", &m, "-f", short.to_str().unwrap(), "-c", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("perplexity tool requires '--ctx-size' > 0"));

    let bogus = dir.join("bogus.kld");
    std::fs::write(&bogus, b"not a logits file at all").unwrap();
    let out = ppl(&[
        "-m",
        &m,
        "-c",
        "128",
        "--kl-divergence-base",
        bogus.to_str().unwrap(),
        "--kl-divergence",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("does not look like a file containing log-probabilities"));

    let out = ppl(&["-m", &m, "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("error: invalid argument: --no-such-flag"));
}

#[test]
fn task_modes_score_every_task() {
    let Some(m) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let m = m.to_str().unwrap().to_string();
    let dir = test_fixtures::scratch_dir("ppl_tasks");

    let mut hs = String::new();
    for i in 0..5 {
        hs += &format!(
            "Activity {i}: A man is standing in a field and\n{}\nhe throws a ball.\nhe eats a sandwich.\nthe sky turns green.\nhe starts to run.\n",
            i % 4
        );
    }
    let hs_path = dir.join("hs.txt");
    std::fs::write(&hs_path, hs).unwrap();
    let (stdout, stderr) = ppl_ok(&[
        "-m",
        &m,
        "-f",
        hs_path.to_str().unwrap(),
        "--hellaswag",
        "--hellaswag-tasks",
        "4",
        "-c",
        "256",
    ]);
    assert!(stderr.contains("hellaswag_score : loaded 5 tasks from prompt."));
    assert!(stdout.contains("\ntask\tacc_norm\t95% confidence interval\n"));
    let rows: Vec<&str> = stdout.lines().filter(|l| l.contains("%\t[")).collect();
    assert_eq!(rows.len(), 4, "{stdout}");
    assert!(rows[3].starts_with("4\t"));

    let wg: String = (0..5)
        .map(|i| format!("{i},The trophy does not fit in the suitcase because _ is too big.,trophy,suitcase,{}\n", 1 + i % 2))
        .collect();
    let wg_path = dir.join("wg.csv");
    std::fs::write(&wg_path, wg).unwrap();
    let (stdout, stderr) = ppl_ok(&[
        "-m",
        &m,
        "-f",
        wg_path.to_str().unwrap(),
        "--winogrande",
        "-c",
        "256",
    ]);
    // llama.cpp's reader drops the last line once -f has removed the final newline
    assert!(
        stderr.contains("winogrande_score : loaded 4 tasks from prompt."),
        "{stderr}"
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|r| r.len() == 6)
        .collect();
    assert_eq!(rows.len(), 4, "{stdout}");
    for r in &rows {
        assert!(r[4] == "1" || r[4] == "2");
        let s1: f64 = r[2].parse().unwrap();
        assert!(s1 < 0.0, "a mean log-probability: {s1}");
    }

    // the binary multiple-choice format: n_task, task offsets, then per task the question,
    // mc1 (answers and labels) and mc2
    let s = |x: &str| -> Vec<u8> { [&(x.len() as u32).to_le_bytes()[..], x.as_bytes()].concat() };
    let mut tasks = Vec::new();
    for i in 0..3 {
        let mut t = s(&format!("Question {i}: what is the capital of France?"));
        t.extend(3u32.to_le_bytes());
        for a in ["Paris", "London", "Berlin"] {
            t.extend(s(a));
        }
        for l in [1i32, 0, 0] {
            t.extend(l.to_le_bytes());
        }
        t.extend(0u32.to_le_bytes());
        tasks.push(t);
    }
    let mut bin = 3u32.to_le_bytes().to_vec();
    let mut off = 4 + 4 * 3;
    for t in &tasks {
        bin.extend((off as u32).to_le_bytes());
        off += t.len();
    }
    for t in &tasks {
        bin.extend(t);
    }
    let mc_path = dir.join("mc.bin");
    std::fs::write(&mc_path, bin).unwrap();
    let (stdout, stderr) = ppl_ok(&[
        "-m",
        &m,
        "-bf",
        mc_path.to_str().unwrap(),
        "--multiple-choice",
        "-c",
        "256",
    ]);
    assert!(
        stderr.contains("multiple_choice_score: there are 3 tasks in prompt"),
        "{stderr}"
    );
    assert!(stdout.contains("\ntask\tacc_norm\n1\t"), "{stdout}");
    assert!(
        stderr.contains("Random chance: 33.3333 +/- 33.3333"),
        "{stderr}"
    );
}

/// The acceptance for quantized models: our llama-quantize's q8_0, q4_0 and q4_k_m of
/// the reference model give llama.cpp's per-chunk values and final estimate within 0.01%.
#[test]
fn q8_0_model_matches_llama_cpp() {
    quantized_model_matches_llama_cpp("q8_0");
}

/// On x86 llama.cpp repacks Q4_0 weights (q4_0_8x8) and fuses each block's whole integer dot
/// into one float accumulator; ggml-cpu follows that order for such weights.
#[test]
fn q4_0_model_matches_llama_cpp() {
    quantized_model_matches_llama_cpp("q4_0");
}

/// On x86 llama.cpp repacks Q4_K weights (q4_K_8x8 gemm / gemv) and runs Q6_K through its tiled
/// K-quant kernels for batches >= 8; ggml-cpu follows their float orders (ops/ktile.rs).
#[test]
fn q4_k_m_model_matches_llama_cpp() {
    quantized_model_matches_llama_cpp("q4_k_m");
}

/// Q3_K batches follow the tiled K-quant order too (reference: tests/fixtures).
#[test]
fn q3_k_m_model_matches_llama_cpp() {
    quantized_model_matches_llama_cpp("q3_k_m");
}

/// On AVX-512 llama.cpp repacks Q2_K weights too (q2_K_8x8 gemm / gemv, whose float orders
/// differ from the Q2_K dot product's; ggml-cpu's dot/x86_q2k_repack.rs); its CPU_REPACK buffer
/// then holds them. The log was recorded with llama.cpp built from the pinned source with
/// AVX-512 (tests/fixtures/perplexity-q2_k.log); CPUs without AVX-512F keep Q2_K in plain
/// memory in both programs and have no recording, so they skip.
#[test]
fn q2_k_model_matches_llama_cpp_s_repacked_orders() {
    if simd_class() != SimdClass::Avx512 {
        eprintln!("skipped: llama.cpp repacks Q2_K only with AVX-512 (no log for this CPU)");
        return;
    }
    let Some(m) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = test_fixtures::scratch_dir("ppl_quantized_q2_k");
    let out_model = dir.join("tiny-q2_k.gguf");
    quantize(&m, &out_model, "q2_k");
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/perplexity-q2_k.log");
    let log = std::fs::read_to_string(&fixture).unwrap();
    let stderr = assert_matches_log(&out_model, "q2_k", (log.clone(), 1e-4), &["-lv", "4"]);
    let buffers: Vec<&str> = log
        .lines()
        .filter_map(|l| l.strip_prefix("I load_tensors: "))
        .collect();
    assert_eq!(buffers.len(), 2, "{log}");
    for want in buffers {
        assert!(stderr.contains(want), "{want}: {stderr}");
    }
    let _ = std::fs::remove_file(&out_model);
}

/// With the default batch (2048) and `-c 128` perplexity evaluates 16 sequences at once, and
/// llama_context pads each sequence's share of the context to 256 (n_ctx 2048 -> 4096, with
/// its "rounding down" warning), which sizes the KV cache and the compute buffer: every
/// such line of llama.cpp's log (tests/fixtures/perplexity-n-seq.log) appears in ours.
#[test]
fn parallel_sequences_pad_the_context_as_llama_cpp_does() {
    let Some(m) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let gpl3 = gpl3();
    #[rustfmt::skip]
    let (_, stderr) = ppl_ok(&["-m", m.to_str().unwrap(), "-f", &gpl3, "-c", "128",
        "--chunks", "2", "-t", "1", "-lv", "4"]);
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/perplexity-n-seq.log");
    let log = std::fs::read_to_string(&fixture).unwrap();
    let lines: Vec<&str> = log.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines.len(), 8, "{log}");
    for want in lines {
        assert!(stderr.contains(want), "missing {want:?}: {stderr}");
    }
}

/// The small qwen3moe model of the repacked-expert tests (llama-gguf-new).
#[rustfmt::skip]
const MOE_MODEL: &[&str] = &["--arch", "qwen3moe", "--layers", "2", "--embd", "256", "--heads",
    "4", "--heads-kv", "2", "--ff", "256", "--ctx", "512", "--vocab-size", "1000", "--experts", "8",
    "--experts-used", "2", "--ff-exp", "256", "--ff-shexp", "256", "--seed", "7"];

/// A model made by llama-gguf-new (`model`) and our llama-quantize (`quant`: its arguments
/// before the files, then the type) against llama.cpp's AVX-512 logs `{fixture}.log` and
/// `{fixture}-nr.log`: every chunk and the final estimate (1e-6), and every `load_tensors`
/// buffer line of the log (the CPU_REPACK size among them) in ours.
fn repacked_model_matches_llama_cpp(name: &str, model: &[&str], quant: &[&str], fixture: &str) {
    let dir = test_fixtures::scratch_dir(&format!("ppl_repack_{name}"));
    let f32_model = dir.join(format!("{name}-f32.gguf"));
    let o = Command::new(test_fixtures::bin("llama-gguf-new", "llama-gguf-new"))
        .args(model)
        .args(["--quiet", "-o"])
        .arg(&f32_model)
        .output()
        .expect("run llama-gguf-new");
    assert!(o.status.success(), "llama-gguf-new: {}", text(&o.stderr));
    let out_model = dir.join(format!("{name}.gguf"));
    let (ty, opts) = quant.split_last().expect("a type");
    let q = Command::new(test_fixtures::bin("llama-quantize", "llama-quantize"))
        .args(opts)
        .arg(&f32_model)
        .arg(&out_model)
        .arg(ty)
        .output()
        .expect("run llama-quantize");
    assert!(
        q.status.success(),
        "llama-quantize {quant:?}: {}",
        text(&q.stderr)
    );
    for (log_name, extra) in [
        (format!("{fixture}.log"), &[][..]),
        (format!("{fixture}-nr.log"), &["-nr"][..]),
    ] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(&log_name);
        let log = std::fs::read_to_string(&path).unwrap();
        let mut args = vec!["-lv", "4"];
        args.extend_from_slice(extra);
        let stderr = assert_matches_log(&out_model, &log_name, (log.clone(), 1e-6), &args);
        let buffers: Vec<&str> = log
            .lines()
            .filter_map(|l| l.strip_prefix("I load_tensors: "))
            .collect();
        assert!(!buffers.is_empty(), "{log}");
        for want in buffers {
            assert!(stderr.contains(want), "{log_name}: {want}: {stderr}");
        }
    }
    let _ = std::fs::remove_file(&out_model);
    let _ = std::fs::remove_file(&f32_model);
}

/// A MoE model's expert stacks go to CPU_REPACK as llama.cpp puts them there (its repack takes
/// MUL_MAT_ID's 3-D weights), every (expert, token) cell in the repacked gemv's order: the
/// CPU_REPACK buffer size and every chunk equal llama.cpp's, and with `-nr` both keep the
/// experts in plain memory and move from the 3rd chunk on
/// (tests/fixtures/perplexity-moe-q4_0{,-nr}.log, recorded with AVX-512; other CPUs skip).
#[test]
fn moe_experts_in_cpu_repack_match_llama_cpp() {
    if simd_class() != SimdClass::Avx512 {
        eprintln!("skipped: the logs were recorded on an AVX-512 CPU");
        return;
    }
    repacked_model_matches_llama_cpp("moe-q4_0", MOE_MODEL, &["q4_0"], "perplexity-moe-q4_0");
}

/// The same model quantized to MXFP4_MOE (llama.cpp's llama-quantize writes the same bytes):
/// its MXFP4 experts go to CPU_REPACK (llama.cpp's mxfp4_8x8_q8_0, ne[1] % 8 == 0 with AVX2),
/// 1.59 MiB as llama.cpp's, each (expert, token) cell in that kernel's order; with `-nr` both
/// keep them in plain memory and take the MXFP4 dot product's order, which moves the 3rd chunk
/// on (1592.0442 -> 1592.0409). Before the repack, ours kept them in plain memory on both runs
/// (tests/fixtures/perplexity-moe-mxfp4{,-nr}.log, recorded with AVX-512; other CPUs skip).
#[test]
fn moe_mxfp4_experts_in_cpu_repack_match_llama_cpp() {
    if simd_class() != SimdClass::Avx512 {
        eprintln!("skipped: the logs were recorded on an AVX-512 CPU");
        return;
    }
    repacked_model_matches_llama_cpp(
        "moe-mxfp4",
        MOE_MODEL,
        &["MXFP4_MOE"],
        "perplexity-moe-mxfp4",
    );
}

/// MUL_MAT of 2-D MXFP4 weights in CPU_REPACK: a dense llama model whose layers' weights are
/// quantized to MXFP4 (`--tensor-type`, the same bytes as llama.cpp's llama-quantize) gives
/// llama.cpp's CPU_REPACK size and every chunk of its repacked gemm order (128-token batches:
/// whole fours of columns), and with `-nr` its dot product's order (1673.3446 -> 1673.1728)
/// (tests/fixtures/perplexity-dense-mxfp4{,-nr}.log, recorded with AVX-512; other CPUs skip).
#[test]
fn dense_mxfp4_weights_in_cpu_repack_match_llama_cpp() {
    if simd_class() != SimdClass::Avx512 {
        eprintln!("skipped: the logs were recorded on an AVX-512 CPU");
        return;
    }
    #[rustfmt::skip]
    let model = ["--arch", "llama", "--layers", "2", "--embd", "256", "--heads", "4",
        "--heads-kv", "2", "--ff", "512", "--ctx", "512", "--vocab-size", "1000", "--seed", "7"];
    let mut quant = Vec::new();
    for t in [
        "attn_q",
        "attn_k",
        "attn_v",
        "attn_output",
        "ffn_up",
        "ffn_gate",
        "ffn_down",
    ] {
        quant.push("--tensor-type".to_string());
        quant.push(format!("{t}=mxfp4"));
    }
    quant.push("q8_0".to_string());
    let quant: Vec<&str> = quant.iter().map(String::as_str).collect();
    repacked_model_matches_llama_cpp("dense-mxfp4", &model, &quant, "perplexity-dense-mxfp4");
}

/// With `-nr` (`--no-repack`) llama.cpp keeps Q4_0, Q4_K and (on AVX-512) Q2_K weights out of
/// CPU_REPACK and runs them through its dot products (Q4_K's and Q2_K's batches through the
/// tiled K-quant kernels), whose float orders differ from the repacked gemm / gemv: its
/// perplexity moves in the 4th digit (q4_0 222283.70 -> 222064.01, q2_k 223139.96 ->
/// 223332.85), and ours follows it each way. The logs were recorded with llama.cpp
/// built from the pinned source with AVX-512 (tests/fixtures/perplexity-*-nr.log); other CPUs
/// take ggml's 8-lane exp in the attention and SwiGLU, so they are compared within 1%.
#[test]
fn no_repack_follows_llama_cpp_s_plain_buffer_orders() {
    let Some(m) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = test_fixtures::scratch_dir("ppl_no_repack");
    for ty in ["q4_0", "q4_k_m", "q2_k"] {
        let out_model = dir.join(format!("tiny-{ty}.gguf"));
        quantize(&m, &out_model, ty);
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("fixtures/perplexity-{ty}-nr.log"));
        let log = std::fs::read_to_string(&fixture).unwrap();
        let rel = match simd_class() {
            SimdClass::Avx512 => 1e-4,
            _ => {
                eprintln!("note: llama.cpp's -nr log is AVX-512's; comparing within 1%");
                1e-2
            }
        };
        let stderr = assert_matches_log(&out_model, ty, (log, rel), &["-nr", "-lv", "4"]);
        assert!(
            stderr.contains("CPU_Mapped model buffer size"),
            "{ty}: {stderr}"
        );
        assert!(!stderr.contains("CPU_REPACK"), "{ty}: {stderr}");
        let _ = std::fs::remove_file(&out_model);
    }
}

fn quantize(m: &std::path::Path, out_model: &std::path::Path, ty: &str) {
    let q = Command::new(test_fixtures::bin("llama-quantize", "llama-quantize"))
        .arg(m)
        .arg(out_model)
        .arg(ty)
        .output()
        .expect("run llama-quantize");
    assert!(
        q.status.success(),
        "llama-quantize {ty}: {}",
        text(&q.stderr)
    );
}

fn quantized_model_matches_llama_cpp(ty: &str) {
    let Some(m) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = test_fixtures::scratch_dir(&format!("ppl_quantized_{ty}"));
    let out_model = dir.join(format!("tiny-{ty}.gguf"));
    quantize(&m, &out_model, ty);
    // -lv 4: the load_tensors lines
    let stderr = assert_matches_log(&out_model, ty, reference_log(ty), &["-lv", "4"]);
    // llama.cpp's x86 build repacks Q4_0 and Q4_K at load where it has AVX2
    if matches!(ty, "q4_0" | "q4_k_m") && simd_class() != SimdClass::Other {
        assert!(
            stderr.contains("CPU_REPACK model buffer size"),
            "{ty}: {stderr}"
        );
    }
    let _ = std::fs::remove_file(&out_model);
}
