//! llama-imatrix against llama.cpp's (fixtures in tests/fixtures/imatrix and
//! tests/fixtures/quant-new, recorded as their READMEs say): on the f32 reference model, on
//! SmolLM2 Q4_1 and on Gemma 3 Q4_K_M the matrices are llama.cpp's bytes in both formats, with
//! the same perplexity lines; combining and `--show-statistics` give llama.cpp's bytes and text.
//! (Before the engine's F32 matrix product took tinyBLAS's order in the leftover token columns,
//! 7552f394, the reference model's sums differed by 1e-7 relative over 512-token ubatches; the
//! tests keep the entry-by-entry comparison, which names the first differing value.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use llama::quant::imatrix::{load, Imatrix};

fn fixtures(topic: &str) -> PathBuf {
    test_fixtures::repo_root()
        .join("tests/fixtures")
        .join(topic)
}

/// llama.cpp's output `name` of `topic` as recorded on this CPU's SIMD class: `avx512/<name>`
/// beside it on AVX-512 CPUs where that build's output was recorded (the README says how), the
/// AVX2 machine's file otherwise.
fn simd_fixture(topic: &str, name: &str) -> PathBuf {
    test_fixtures::simd_fixture(&fixtures(topic).join(name))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs llama-imatrix in `dir` (so that `-f text.txt` is stored as in the fixtures).
fn imatrix(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_llama-imatrix"))
        .current_dir(dir)
        .args(args)
        .env_remove("LLAMA_ARG_MODEL")
        .output()
        .expect("run llama-imatrix")
}

/// A scratch folder holding the text llama.cpp's matrices were computed from.
fn scratch_with_text(tag: &str) -> PathBuf {
    let dir = test_fixtures::scratch_dir(&format!("imatrix-{tag}"));
    std::fs::copy(fixtures("quant-new").join("text.txt"), dir.join("text.txt")).unwrap();
    dir
}

fn loaded(p: &Path) -> Imatrix {
    load(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Same entries, counts and metadata; sums within `rel` of llama.cpp's. Returns the names of
/// the entries whose sums are bit-equal.
fn assert_close(ours: &Imatrix, theirs: &Imatrix, rel: f32) -> Vec<String> {
    assert_eq!(ours.is_legacy, theirs.is_legacy);
    assert_eq!(ours.datasets, theirs.datasets);
    assert_eq!(ours.chunk_count, theirs.chunk_count);
    assert_eq!(ours.chunk_size, theirs.chunk_size);
    assert_eq!(ours.has_metadata, theirs.has_metadata);
    let names: Vec<_> = ours.entries.keys().collect();
    assert_eq!(names, theirs.entries.keys().collect::<Vec<_>>());
    let mut exact = Vec::new();
    for (name, a) in &ours.entries {
        let b = &theirs.entries[name];
        assert_eq!(a.counts, b.counts, "{name}");
        assert_eq!(a.sums.len(), b.sums.len(), "{name}");
        for (i, (x, y)) in a.sums.iter().zip(&b.sums).enumerate() {
            assert!(
                (x - y).abs() <= rel * y.abs(),
                "{name}[{i}]: {x} vs llama.cpp's {y}"
            );
        }
        if a.sums
            .iter()
            .zip(&b.sums)
            .all(|(x, y)| x.to_bits() == y.to_bits())
        {
            exact.push(name.clone());
        }
    }
    exact
}

/// The bytes before the data section are equal (names, shapes, keys, datasets, counts of
/// tensors) and so is the file's length.
fn assert_same_layout(ours: &Path, theirs: &Path) {
    let (a, b) = (std::fs::read(ours).unwrap(), std::fs::read(theirs).unwrap());
    assert_eq!(a.len(), b.len());
    let off = gguf::GgufFile::open(theirs).unwrap().data_offset as usize;
    assert!(a[..off] == b[..off], "headers differ");
}

const REL: f32 = 1e-5;

fn assert_same_bytes(ours: &Path, theirs: &Path) {
    let (a, b) = (std::fs::read(ours).unwrap(), std::fs::read(theirs).unwrap());
    assert!(
        a == b,
        "{} differs from llama.cpp's {}",
        ours.display(),
        theirs.display()
    );
}

fn first_layer_inputs_are_exact(exact: &[String]) {
    for t in ["attn_q", "attn_k", "attn_v"] {
        let name = format!("blk.0.{t}.weight");
        assert!(exact.contains(&name), "{name} is not bit-equal");
    }
}

#[test]
fn gguf_matrix_matches_llama_cpp() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = scratch_with_text("gguf");
    let m = model.to_str().unwrap();
    #[rustfmt::skip]
    let o = imatrix(&dir, &["-m", m, "-f", "text.txt", "-c", "128", "--chunks", "4", "--process-output",
        "-o", "imatrix.gguf", "-t", "2"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let expected = simd_fixture("imatrix", "process-output.gguf");
    let exact = assert_close(&loaded(&dir.join("imatrix.gguf")), &loaded(&expected), REL);
    first_layer_inputs_are_exact(&exact);
    assert_same_layout(&dir.join("imatrix.gguf"), &expected);
    assert_same_bytes(&dir.join("imatrix.gguf"), &expected);
    // the per-chunk perplexity and the final estimate, after the timed ETA line
    let out = text(&o.stdout);
    let want = std::fs::read_to_string(simd_fixture("imatrix", "process-output.stdout")).unwrap();
    let got: String = out.split_inclusive('\n').skip(1).collect();
    assert_eq!(got, want);
    let err = text(&o.stderr);
    assert!(
        err.contains(
            "compute_imatrix: computing over 4 chunks, n_ctx=128, batch_size=2048, n_seq=16"
        ),
        "{err}"
    );
    assert!(!dir.join("imatrix.gguf.at_1").exists());
}

#[test]
fn legacy_dat_matrix_matches_llama_cpp() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = scratch_with_text("dat");
    let m = model.to_str().unwrap();
    #[rustfmt::skip]
    let o = imatrix(&dir, &["-m", m, "-f", "text.txt", "-c", "128", "--chunks", "4", "-o", "imatrix.dat",
        "--output-format", "dat", "-t", "2", "--no-ppl"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!text(&o.stdout).contains("Final estimate"));
    let ours = dir.join("imatrix.dat");
    let theirs = simd_fixture("quant-new", "imatrix.dat");
    let exact = assert_close(&loaded(&ours), &loaded(&theirs), REL);
    first_layer_inputs_are_exact(&exact);
    assert_same_bytes(&ours, &theirs);
    assert_eq!(
        std::fs::metadata(&ours).unwrap().len(),
        std::fs::metadata(&theirs).unwrap().len()
    );
    // llama-quantize reads our file as it reads llama.cpp's
    let q = Command::new(test_fixtures::bin("llama-quantize", "llama-quantize"))
        .current_dir(&dir)
        .args(["--imatrix", "imatrix.dat", m, "q8.gguf", "Q8_0", "2"])
        .output()
        .unwrap();
    let qout = text(&q.stdout);
    assert!(q.status.success(), "{}", text(&q.stderr));
    assert!(
        qout.contains(
            "load_imatrix: loaded 28 importance matrix entries from imatrix.dat computed on 4 chunks"
        ),
        "{qout}"
    );
    assert!(
        qout.contains("load_imatrix: imatrix datasets=['text.txt']"),
        "{qout}"
    );
}

#[test]
fn a_dat_name_without_output_format_is_gguf_with_llama_cpp_warning() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = scratch_with_text("dat-name");
    #[rustfmt::skip]
    let o = imatrix(&dir, &["-m", model.to_str().unwrap(), "-f", "text.txt", "-c", "128", "--chunks", "2",
        "-o", "x.dat", "-t", "2", "--no-ppl"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains(
            "save_imatrix: saving imatrix using GGUF format with a different suffix than .gguf"
        ),
        "{err}"
    );
    let m = loaded(&dir.join("x.dat"));
    assert!(!m.is_legacy && m.has_metadata);
    assert_eq!(m.chunk_count, 2);
}

#[test]
fn save_and_output_frequencies_write_llama_cpp_files() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = scratch_with_text("save-frequency");
    #[rustfmt::skip]
    let o = imatrix(&dir, &["-m", model.to_str().unwrap(), "-f", "text.txt", "-c", "128", "--chunks", "5",
        "-b", "128", "--save-frequency", "2", "--output-frequency", "3", "-o", "sf.gguf", "-t", "2"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("sf.gguf"))
        .collect();
    files.sort();
    assert_eq!(files, ["sf.gguf", "sf.gguf.at_2", "sf.gguf.at_4"]);
    for f in &files {
        let expected = simd_fixture("imatrix", &format!("save-frequency/{f}"));
        assert_close(&loaded(&dir.join(f)), &loaded(&expected), REL);
        assert_same_layout(&dir.join(f), &expected);
        assert_same_bytes(&dir.join(f), &expected);
    }
    // each save prints a newline, so the chunks' values break where llama.cpp's do
    let want =
        std::fs::read_to_string(simd_fixture("imatrix", "save-frequency/stdout.txt")).unwrap();
    let got: String = text(&o.stdout).split_inclusive('\n').skip(1).collect();
    assert_eq!(got, want);
}

#[test]
fn combining_files_gives_llama_cpp_bytes() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = test_fixtures::scratch_dir("imatrix-combine");
    for f in ["imatrix.gguf", "imatrix.dat"] {
        std::fs::copy(fixtures("quant-new").join(f), dir.join(f)).unwrap();
    }
    let m = model.to_str().unwrap();
    for (out, extra) in [
        ("combined.gguf", &[][..]),
        ("combined.dat", &["--output-format", "dat"][..]),
    ] {
        let mut args = vec![
            "-m",
            m,
            "--in-file",
            "imatrix.gguf",
            "--in-file",
            "imatrix.dat",
            "-o",
            out,
        ];
        args.extend(extra);
        let o = imatrix(&dir, &args);
        let err = text(&o.stderr);
        assert!(o.status.success(), "{err}");
        assert!(err.contains("No prompt provided; combining precomputed matrices only."));
        assert!(err.contains(&format!("main : saving combined imatrix to '{out}'")));
        let ours = std::fs::read(dir.join(out)).unwrap();
        let theirs = std::fs::read(fixtures("imatrix").join(out)).unwrap();
        assert!(ours == theirs, "{out} differs from llama.cpp's");
    }
}

#[test]
fn statistics_match_llama_cpp() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = test_fixtures::scratch_dir("imatrix-stats");
    std::fs::copy(
        fixtures("quant-new").join("imatrix.gguf"),
        dir.join("imatrix.gguf"),
    )
    .unwrap();
    #[rustfmt::skip]
    let o = imatrix(&dir, &["-m", model.to_str().unwrap(), "--in-file", "imatrix.gguf", "--show-statistics",
        "--no-log-timestamps"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let want = std::fs::read_to_string(fixtures("imatrix").join("statistics.txt")).unwrap();
    assert_eq!(text(&o.stderr), want);
    // one file only
    #[rustfmt::skip]
    let o = imatrix(&dir, &["-m", "x", "--in-file", "imatrix.gguf,imatrix.gguf", "--show-statistics"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr)
        .contains("Error: a single imatrix file is required to compute tensor statistics"));
}

/// One line naming the cause, exit status 1, and no output file.
fn assert_refused(dir: &Path, o: &Output, needle: &str) {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(needle), "{err}");
    assert!(!dir.join("imatrix.gguf").exists());
}

#[test]
fn bad_input_is_one_clear_line_and_status_1() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = scratch_with_text("bad");
    let m = model.to_str().unwrap();
    // no text and nothing to combine
    let o = imatrix(&dir, &["-m", m]);
    assert_refused(
        &dir,
        &o,
        "Error: No prompt provided and no precomputed matrices (--in-file) to combine.",
    );
    // an empty text
    std::fs::write(dir.join("empty.txt"), "").unwrap();
    let o = imatrix(&dir, &["-m", m, "-f", "empty.txt"]);
    assert_refused(&dir, &o, "Error: No prompt provided");
    // shorter than two contexts
    std::fs::write(dir.join("short.txt"), "Hello world, this is short.").unwrap();
    let o = imatrix(&dir, &["-m", m, "-f", "short.txt", "-c", "128"]);
    assert_refused(
        &dir,
        &o,
        "compute_imatrix: you need at least 256 tokens for a context of 128 tokens",
    );
    // a corrupt --in-file: a truncated legacy file, and a file that is neither format
    let dat = std::fs::read(fixtures("quant-new").join("imatrix.dat")).unwrap();
    std::fs::write(dir.join("cut.dat"), &dat[..1000]).unwrap();
    let o = imatrix(&dir, &["-m", m, "--in-file", "cut.dat"]);
    assert_refused(
        &dir,
        &o,
        "main : failed to load cut.dat (common_imatrix_load_legacy: failed reading data for entry",
    );
    std::fs::write(dir.join("junk.gguf"), [0u8; 3]).unwrap();
    let o = imatrix(&dir, &["-m", m, "--in-file", "junk.gguf"]);
    assert_refused(&dir, &o, "main : failed to load junk.gguf (");
    // a missing --in-file is refused by the parser
    let o = imatrix(&dir, &["-m", m, "--in-file", "nope.gguf"]);
    assert_refused(&dir, &o, "error: failed to open file 'nope.gguf'");
    // an output that cannot be written: the run says so and fails (llama.cpp's ofstream
    // fails silently and exits 0)
    #[rustfmt::skip]
    let o = imatrix(&dir, &["-m", m, "-f", "text.txt", "-c", "128", "--chunks", "2", "--no-ppl", "-t", "2",
        "-o", "no/such/dir/x.gguf"]);
    assert_refused(&dir, &o, "failed to write no/such/dir/x.gguf");
    // an unknown output format
    let o = imatrix(&dir, &["-m", m, "-f", "text.txt", "--output-format", "bin"]);
    assert_refused(&dir, &o, "invalid output format");
}

#[test]
fn a_combined_matrix_of_another_width_is_refused_naming_the_tensor() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = scratch_with_text("mismatch");
    // llama.cpp's matrix with one entry cut short: collecting into it cannot go on
    let theirs = loaded(&fixtures("quant-new").join("imatrix.gguf"));
    let mut kv = vec![
        (
            "general.type".to_string(),
            gguf::Value::Str("imatrix".into()),
        ),
        (
            "imatrix.datasets".to_string(),
            gguf::Value::Array(gguf::Array::from_strs(["text.txt"])),
        ),
        ("imatrix.chunk_count".to_string(), gguf::Value::U32(4)),
        ("imatrix.chunk_size".to_string(), gguf::Value::U32(128)),
    ];
    let e = &theirs.entries["blk.0.attn_q.weight"];
    let sums: Vec<u8> = e.sums[..128].iter().flat_map(|v| v.to_le_bytes()).collect();
    let counts: Vec<u8> = (e.counts[0] as f32).to_le_bytes().to_vec();
    let t1 = gguf::TensorInfo::new("blk.0.attn_q.weight.in_sum2", ggml::Type::F32, &[128]).unwrap();
    let t2 = gguf::TensorInfo::new("blk.0.attn_q.weight.counts", ggml::Type::F32, &[1]).unwrap();
    gguf::write_gguf(
        dir.join("short.gguf"),
        &std::mem::take(&mut kv),
        &[(t1, &sums[..]), (t2, &counts[..])],
    )
    .unwrap();
    #[rustfmt::skip]
    let o = imatrix(&dir, &["-m", model.to_str().unwrap(), "--in-file", "short.gguf", "-f", "text.txt",
        "-c", "128", "--chunks", "2", "-t", "2"]);
    assert_refused(
        &dir,
        &o,
        "collect_imatrix: inconsistent size for blk.0.attn_q.weight (128 vs 256)",
    );
}

#[test]
fn ctrl_c_leaves_no_output_and_no_temporary() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = scratch_with_text("interrupt");
    // a long text: the run takes far longer than the wait below
    let t = std::fs::read_to_string(dir.join("text.txt")).unwrap();
    std::fs::write(dir.join("long.txt"), t.repeat(40)).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_llama-imatrix"));
    child
        .current_dir(&dir)
        .args(["-m", model.to_str().unwrap(), "-f", "long.txt", "-c", "128"])
        .args([
            "--output-frequency",
            "1",
            "-b",
            "128",
            "-t",
            "2",
            "-o",
            "i.gguf",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    // SIGINT at its default disposition: the tool keeps an inherited ignore (a background
    // job's), so a suite started in the background would see it run on through the signal.
    // SAFETY: between fork and exec the closure only calls signal(2), async-signal-safe.
    unsafe {
        use std::os::unix::process::CommandExt;
        child.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = child.spawn().unwrap();
    // wait for the first saved chunk, then interrupt
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !dir.join("i.gguf").exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(dir.join("i.gguf").exists(), "no save within 120 s");
    let k = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(k.success());
    let status = child.wait().unwrap();
    assert!(!status.success());
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.contains(".tmp")),
        "a temporary was left: {names:?}"
    );
    // what is there is a whole file from an earlier save (made, as llama.cpp makes it, when
    // the first matrix of a chunk crossed the chunk boundary)
    let m = loaded(&dir.join("i.gguf"));
    assert!(m.chunk_count >= 1 && !m.entries.is_empty(), "{m:?}");
}

fn sha256(p: &Path) -> String {
    use sha2::{Digest, Sha256};
    let bytes = std::fs::read(p).unwrap();
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The sha256 of llama.cpp's `name` in `sha256.txt`: the one of `avx512/sha256.txt` on an
/// AVX-512 CPU where that build's file was recorded and listed there, the AVX2 machine's else.
fn expected_sha(name: &str) -> String {
    let listed = |p: &Path| -> Option<String> {
        let list = std::fs::read_to_string(p).ok()?;
        list.lines()
            .find(|l| l.ends_with(&format!("  {name}")))
            .and_then(|l| l.split_whitespace().next())
            .map(str::to_string)
    };
    let avx2 = fixtures("imatrix").join("sha256.txt");
    listed(&test_fixtures::simd_fixture(&avx2))
        .or_else(|| listed(&avx2))
        .unwrap_or_else(|| panic!("{name} not listed"))
}

/// On a real model whose matrix products our engine computes as ggml does, both formats are
/// llama.cpp's bytes (so llama-quantize gives the same output from either tool's file).
#[test]
fn smollm2_matrices_are_llama_cpp_bytes() {
    let Some(model) = test_fixtures::smollm2_or_skip() else {
        return;
    };
    let dir = scratch_with_text("smollm2");
    let m = model.to_str().unwrap();
    #[rustfmt::skip]
    let o = imatrix(&dir, &["-m", m, "-f", "text.txt", "-c", "128", "--chunks", "2", "-o", "smollm2.gguf",
        "-t", "2"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        sha256(&dir.join("smollm2.gguf")),
        expected_sha("smollm2.gguf")
    );
    let want = std::fs::read_to_string(simd_fixture("imatrix", "smollm2.stdout")).unwrap();
    let got: String = text(&o.stdout).split_inclusive('\n').skip(1).collect();
    assert_eq!(got, want);
    #[rustfmt::skip]
    let o = imatrix(&dir, &["-m", m, "-f", "text.txt", "-c", "128", "--chunks", "2", "-o", "smollm2.dat",
        "--output-format", "dat", "-t", "2", "--no-ppl"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        sha256(&dir.join("smollm2.dat")),
        expected_sha("smollm2.dat")
    );
}

/// Gemma 3 270M Q4_K_M (fetched by scripts/fetch-test-models --gemma3): llama.cpp's bytes too.
#[test]
fn gemma3_matrix_is_llama_cpp_bytes() {
    let model = test_fixtures::cache_dir().join("gemma-3-270m-q4_k_m.gguf");
    if !model.is_file() {
        test_fixtures::skip(&format!(
            "{} is missing (run scripts/fetch-test-models --gemma3)",
            model.display()
        ));
        return;
    }
    let dir = scratch_with_text("gemma3");
    #[rustfmt::skip]
    let o = imatrix(&dir, &["-m", model.to_str().unwrap(), "-f", "text.txt", "-c", "128", "--chunks", "2",
        "-o", "gemma3.gguf", "-t", "2"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        sha256(&dir.join("gemma3.gguf")),
        expected_sha("gemma3.gguf")
    );
    let want = std::fs::read_to_string(simd_fixture("imatrix", "gemma3.stdout")).unwrap();
    let got: String = text(&o.stdout).split_inclusive('\n').skip(1).collect();
    assert_eq!(got, want);
}

/// Three chunks of 128 make one ubatch of 384 tokens, a multiple of the 6 columns of
/// llama.cpp's F32 matrix-product tiles (no leftover columns): llama.cpp's bytes too.
#[test]
fn reference_model_matrices_are_llama_cpp_bytes_over_384_token_ubatches() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = scratch_with_text("three-chunks");
    let m = model.to_str().unwrap();
    for (out, extra) in [
        ("reference-3chunks.gguf", &[][..]),
        (
            "reference-3chunks.dat",
            &["--output-format", "dat", "--no-ppl"][..],
        ),
    ] {
        #[rustfmt::skip]
        let mut args = vec!["-m", m, "-f", "text.txt", "-c", "128", "--chunks", "3", "-o", out, "-t", "2"];
        args.extend(extra);
        let o = imatrix(&dir, &args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_eq!(sha256(&dir.join(out)), expected_sha(out), "{out}");
    }
}

/// Our matrix fed to our llama-quantize gives the bytes llama.cpp's llama-quantize writes from
/// llama.cpp's matrix, for the imatrix-weighted IQ2_XS and Q2_K_S.
#[test]
fn quantizing_with_our_matrix_gives_llama_cpp_files() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = scratch_with_text("quantize");
    let m = model.to_str().unwrap();
    #[rustfmt::skip]
    let o = imatrix(&dir, &["-m", m, "-f", "text.txt", "-c", "128", "--chunks", "3", "-o", "imatrix.gguf",
        "-t", "2", "--no-ppl"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for t in ["IQ2_XS", "Q2_K_S"] {
        let out = format!("quantized-{t}.gguf");
        let q = Command::new(test_fixtures::bin("llama-quantize", "llama-quantize"))
            .current_dir(&dir)
            .args(["--imatrix", "imatrix.gguf", m, &out, t, "2"])
            .output()
            .unwrap();
        assert!(q.status.success(), "{}", text(&q.stderr));
        assert_eq!(sha256(&dir.join(&out)), expected_sha(&out), "{t}");
    }
}
