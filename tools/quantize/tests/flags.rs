//! The flags beyond the reference runs: --prune-layers, --override-kv, --imatrix with
//! --include/--exclude-weights, --keep-split, on small models made by llama-gguf-new.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use ggml::Type;
use gguf::{Array, GgufFile, GgufWriter, TensorInfo, Value, ValueType};

const LAYERS: usize = 4;

/// A 4-layer llama with 256-wide rows (k-quants need no fallback), made once per run.
fn small_model() -> &'static Path {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    MODEL.get_or_init(|| {
        let dir = test_fixtures::scratch_dir("quantize-flags-model");
        let path = dir.join("small-f32.gguf");
        let o = Command::new(test_fixtures::bin("llama-gguf-new", "llama-gguf-new"))
            .args([
                "--layers",
                "4",
                "--embd",
                "256",
                "--heads",
                "4",
                "--heads-kv",
                "2",
                "--ff",
                "512",
                "--ctx",
                "256",
                "--vocab-size",
                "300",
                "--quiet",
                "-o",
            ])
            .arg(&path)
            .output()
            .expect("run llama-gguf-new");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        path
    })
}

fn quantize(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_llama-quantize"))
        .args(args)
        .output()
        .expect("run llama-quantize")
}

fn ok(o: &Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "llama-quantize failed:\n{text}");
    text
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn tensor_bytes(f: &GgufFile, name: &str) -> Vec<u8> {
    let t = f.tensor(name).unwrap_or_else(|| panic!("no tensor {name}"));
    f.tensor_data(t).to_vec()
}

#[test]
fn prune_layers_drops_and_renumbers() {
    let dir = test_fixtures::scratch_dir("quantize-prune");
    let (full, pruned) = (dir.join("full.gguf"), dir.join("pruned.gguf"));
    ok(&quantize(&[s(small_model()), s(&full), "q8_0"]));
    let log = ok(&quantize(&[
        "--prune-layers",
        "3,1",
        s(small_model()),
        s(&pruned),
        "q8_0",
    ]));
    let (a, b) = (
        GgufFile::open(&full).unwrap(),
        GgufFile::open(&pruned).unwrap(),
    );
    assert_eq!(b.get("llama.block_count"), Some(&Value::U32(2)));
    // block_count is set last, after the quantization keys.
    assert_eq!(b.kv.last().unwrap().0, "llama.block_count");
    let per_layer = (a.tensors.len() - b.tensors.len()) / 2;
    assert_eq!(a.tensors.len() - 2 * per_layer, b.tensors.len());
    assert!(b.tensors.iter().all(|t| !t.name.starts_with("blk.2.")));
    // Old layer 2 is new layer 1, byte for byte; layer 0 keeps its place.
    for w in ["attn_q.weight", "ffn_down.weight", "attn_norm.weight"] {
        assert_eq!(
            tensor_bytes(&b, &format!("blk.1.{w}")),
            tensor_bytes(&a, &format!("blk.2.{w}"))
        );
        assert_eq!(
            tensor_bytes(&b, &format!("blk.0.{w}")),
            tensor_bytes(&a, &format!("blk.0.{w}"))
        );
    }
    // The counter runs over the kept tensors; the total is the model's (llama.cpp's n_tensors).
    let last = format!("[{:>4}/{:>4}]", b.tensors.len(), a.tensors.len());
    assert!(log.contains(&last), "{log}");
}

#[test]
fn override_kv_is_written_and_visible_to_inspect() {
    let dir = test_fixtures::scratch_dir("quantize-override");
    let out = dir.join("o.gguf");
    let log = ok(&quantize(&[
        "--override-kv",
        "general.name=str:renamed model",
        "--override-kv",
        "llama.context_length=int:-77",
        "--override-kv",
        "test.ratio=float:0.25x",
        "--override-kv",
        "test.flag=bool:true",
        "--override-kv",
        "llama.block_count=int:4",
        s(small_model()),
        s(&out),
        "q4_0",
    ]));
    // Keys the type choice reads take the override, as llama.cpp's loader logs it.
    assert!(
        log.contains("validate_override: Using metadata override (  int) 'llama.block_count' = 4"),
        "{log}"
    );
    let o = Command::new(test_fixtures::bin(
        "llama-gguf-inspect",
        "llama-gguf-inspect",
    ))
    .args([s(&out), "--key", "general.name"])
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "renamed model");
    let f = GgufFile::open(&out).unwrap();
    // int overrides are stored as u32 of their magnitude, floats as f32, as llama.cpp does.
    assert_eq!(f.get("llama.context_length"), Some(&Value::U32(77)));
    assert_eq!(f.get("test.ratio"), Some(&Value::F32(0.25)));
    assert_eq!(f.get("test.flag"), Some(&Value::Bool(true)));
    let keys: Vec<&str> = f.kv.iter().map(|(k, _)| k.as_str()).collect();
    let n = keys.len();
    assert_eq!(
        &keys[n - 7..],
        [
            "general.quantization_version",
            "general.file_type",
            "general.name",
            "llama.context_length",
            "test.ratio",
            "test.flag",
            "llama.block_count"
        ]
    );
}

#[test]
fn bad_values_give_llama_cpp_errors() {
    let m = s(small_model());
    let cases = [
        (
            "--override-kv",
            "a.b=bad:1",
            "string_parse_kv_override: invalid type for KV override 'a.b=bad:1'",
        ),
        (
            "--override-kv",
            "a.b=bool:yes",
            "string_parse_kv_override: invalid boolean value for KV override 'a.b=bool:yes'",
        ),
        (
            "--override-kv",
            "no-equals",
            "string_parse_kv_override: malformed KV override 'no-equals'",
        ),
        (
            "--prune-layers",
            "1,x",
            "parse_layer_prune: invalid layer id 'x'",
        ),
        (
            "--prune-layers",
            "-2",
            "parse_layer_prune: invalid layer id '-2'",
        ),
    ];
    for (flag, value, msg) in cases {
        let o = quantize(&[flag, value, m, "/tmp/never-written.gguf", "q4_0"]);
        assert_eq!(o.status.code(), Some(1), "{flag} {value}");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(text.contains(msg), "{flag} {value}:\n{text}");
        assert!(text.contains("allowed quantization types"));
    }
    let long = format!("k=str:{}", "x".repeat(128));
    let o = quantize(&["--override-kv", &long, m, "/tmp/never-written.gguf", "q4_0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("value cannot exceed 127 chars"));
    // --include-weights and --exclude-weights together: usage.
    let o = quantize(&[
        "--include-weights",
        "a",
        "--exclude-weights",
        "b",
        m,
        "/tmp/never-written.gguf",
        "q4_0",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(!Path::new("/tmp/never-written.gguf").exists());
}

/// Deterministic positive "activation statistics" for a tensor.
fn sums(n: usize, salt: usize) -> Vec<f32> {
    (0..n)
        .map(|i| 0.05 + ((i * 7919 + salt * 104729) % 1000) as f32 / 50.0)
        .collect()
}

/// The 2-D weights of the small model with their row length.
fn matrices(f: &GgufFile) -> Vec<(String, usize)> {
    f.tensors
        .iter()
        .filter(|t| t.n_dims == 2 && t.name.ends_with(".weight"))
        .map(|t| (t.name.clone(), t.ne[0] as usize))
        .collect()
}

/// An imatrix GGUF as llama-imatrix writes it: `<name>.in_sum2` [ne0, 1] and `<name>.counts`
/// [1, 1], keys imatrix.datasets / chunk_count / chunk_size.
fn write_imatrix_gguf(path: &Path, entries: &[(String, Vec<f32>, f32)]) {
    let mut w = GgufWriter::new();
    w.add_kv("general.type", "imatrix").unwrap();
    let ds = Array::new(
        ValueType::Str,
        vec![
            Value::Str("calib.txt".into()),
            Value::Str("more.txt".into()),
        ],
    );
    w.add_kv("imatrix.datasets", Value::Array(ds)).unwrap();
    w.add_kv("imatrix.chunk_count", Value::U32(7)).unwrap();
    w.add_kv("imatrix.chunk_size", Value::U32(512)).unwrap();
    let mut data: Vec<Vec<u8>> = Vec::new();
    for (name, s, count) in entries {
        w.add_tensor(format!("{name}.in_sum2"), Type::F32, &[s.len() as u64, 1])
            .unwrap();
        data.push(s.iter().flat_map(|x| x.to_le_bytes()).collect());
        w.add_tensor(format!("{name}.counts"), Type::F32, &[1, 1])
            .unwrap();
        data.push(count.to_le_bytes().to_vec());
    }
    let mut st = w.create(path).unwrap();
    for d in &data {
        st.write_tensor(d).unwrap();
    }
    st.finish().unwrap();
}

/// The legacy `.dat` layout: n_entries, then per entry name, ncall, nval, values; then the
/// chunk count and dataset name.
fn write_imatrix_dat(path: &Path, entries: &[(String, Vec<f32>, f32)]) {
    let mut b = Vec::new();
    b.extend((entries.len() as i32).to_le_bytes());
    for (name, s, count) in entries {
        b.extend((name.len() as i32).to_le_bytes());
        b.extend(name.as_bytes());
        b.extend((*count as i32).to_le_bytes());
        b.extend((s.len() as i32).to_le_bytes());
        for x in s {
            b.extend(x.to_le_bytes());
        }
    }
    b.extend(7i32.to_le_bytes());
    b.extend(9i32.to_le_bytes());
    b.extend(b"calib.txt");
    std::fs::write(path, b).unwrap();
}

#[test]
fn imatrix_changes_k_quants_and_is_recorded() {
    let dir = test_fixtures::scratch_dir("quantize-imatrix");
    let model = GgufFile::open(small_model()).unwrap();
    let entries: Vec<(String, Vec<f32>, f32)> = matrices(&model)
        .into_iter()
        .enumerate()
        .map(|(i, (n, ne0))| (n, sums(ne0, i), 3.0))
        .collect();
    let (gg, dat) = (dir.join("imatrix.gguf"), dir.join("imatrix.dat"));
    write_imatrix_gguf(&gg, &entries);
    write_imatrix_dat(&dat, &entries);

    let plain = dir.join("plain.gguf");
    ok(&quantize(&[s(small_model()), s(&plain), "q4_k_m"]));
    let with = dir.join("with.gguf");
    let log = ok(&quantize(&[
        "--imatrix",
        s(&gg),
        s(small_model()),
        s(&with),
        "q4_k_m",
    ]));
    let n = entries.len();
    assert!(log.contains("load_imatrix: imatrix datasets=['calib.txt', 'more.txt']"));
    assert!(log.contains(&format!(
        "load_imatrix: loaded {n} importance matrix entries from {} computed on 7 chunks",
        s(&gg)
    )));
    assert!(log.contains(&format!(
        "prepare_imatrix: have {n} importance matrix entries"
    )));
    assert!(log.contains(&format!(
        "llama_model_quantize_impl: have importance matrix data with {n} entries"
    )));

    let (p, w) = (
        GgufFile::open(&plain).unwrap(),
        GgufFile::open(&with).unwrap(),
    );
    for t in ["blk.0.attn_q.weight", "blk.3.ffn_up.weight"] {
        assert_eq!(w.tensor(t).unwrap().ty, Type::Q4K);
        assert_ne!(tensor_bytes(&p, t), tensor_bytes(&w, t), "{t}");
    }
    // Norms are copied either way.
    assert_eq!(
        tensor_bytes(&p, "blk.0.attn_norm.weight"),
        tensor_bytes(&w, "blk.0.attn_norm.weight")
    );
    assert_eq!(
        w.get("quantize.imatrix.file"),
        Some(&Value::Str(s(&gg).to_string()))
    );
    assert_eq!(
        w.get("quantize.imatrix.dataset"),
        Some(&Value::Str("calib.txt".into()))
    );
    assert_eq!(
        w.get("quantize.imatrix.entries_count"),
        Some(&Value::U32(n as u32))
    );
    assert_eq!(w.get("quantize.imatrix.chunks_count"), Some(&Value::U32(7)));

    // The legacy file holds the same statistics: the same tensors.
    let legacy = dir.join("legacy.gguf");
    ok(&quantize(&[
        "--imatrix",
        s(&dat),
        s(small_model()),
        s(&legacy),
        "q4_k_m",
    ]));
    let l = GgufFile::open(&legacy).unwrap();
    for (name, _, _) in &entries {
        assert_eq!(tensor_bytes(&l, name), tensor_bytes(&w, name), "{name}");
    }

    // --exclude-weights attn_q: those tensors are quantized as without an imatrix.
    let excl = dir.join("excl.gguf");
    let log = ok(&quantize(&[
        "--imatrix",
        s(&gg),
        "--exclude-weights",
        "attn_q",
        s(small_model()),
        s(&excl),
        "q4_k_m",
    ]));
    assert!(log.contains(&format!(
        "prepare_imatrix: have {} importance matrix entries",
        n - LAYERS
    )));
    assert!(log.contains("did not find weights for blk.0.attn_q.weight"));
    let e = GgufFile::open(&excl).unwrap();
    assert_eq!(
        tensor_bytes(&e, "blk.0.attn_q.weight"),
        tensor_bytes(&p, "blk.0.attn_q.weight")
    );
    assert_eq!(
        tensor_bytes(&e, "blk.0.attn_k.weight"),
        tensor_bytes(&w, "blk.0.attn_k.weight")
    );
    // --include-weights ffn_down keeps only those entries.
    let incl = dir.join("incl.gguf");
    let log = ok(&quantize(&[
        "--imatrix",
        s(&gg),
        "--include-weights",
        "ffn_down",
        s(small_model()),
        s(&incl),
        "q4_k_m",
    ]));
    assert!(log.contains(&format!(
        "prepare_imatrix: have {LAYERS} importance matrix entries"
    )));
}

#[test]
fn bad_imatrix_files_fail() {
    let dir = test_fixtures::scratch_dir("quantize-imatrix-bad");
    let m = s(small_model());
    let out = dir.join("o.gguf");
    let o = quantize(&["--imatrix", "/nonexistent.dat", m, s(&out), "q4_k_m"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("load_imatrix: failed to load imatrix from '/nonexistent.dat'"));

    let nan = dir.join("nan.gguf");
    write_imatrix_gguf(
        &nan,
        &[("blk.0.attn_q.weight".into(), vec![f32::NAN; 256], 1.0)],
    );
    let o = quantize(&["--imatrix", s(&nan), m, s(&out), "q4_k_m"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("imatrix contains non-finite value nan"));

    let short = dir.join("short.gguf");
    write_imatrix_gguf(
        &short,
        &[("blk.0.attn_q.weight".into(), vec![1.0; 64], 1.0)],
    );
    let o = quantize(&["--imatrix", s(&short), m, s(&out), "q4_k_m"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("imatrix size 64 is different from tensor size 256 for blk.0.attn_q.weight"));
    assert!(!out.exists());
}

/// Splits `src` into two shards as gguf-split does: all KV pairs and the split keys in the
/// first, only the split keys in the second.
fn split_model(src: &Path, prefix: &Path) -> Vec<PathBuf> {
    let f = GgufFile::open(src).unwrap();
    let half = f.tensors.len() / 2;
    let parts = [&f.tensors[..half], &f.tensors[half..]];
    let mut paths = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let mut kv: Vec<(String, Value)> = if i == 0 { f.kv.clone() } else { Vec::new() };
        kv.push(("split.no".into(), Value::U16(i as u16)));
        kv.push(("split.count".into(), Value::U16(2)));
        kv.push((
            "split.tensors.count".into(),
            Value::I32(f.tensors.len() as i32),
        ));
        let tensors: Vec<(TensorInfo, &[u8])> =
            part.iter().map(|t| (t.clone(), f.tensor_data(t))).collect();
        let path = PathBuf::from(format!("{}-{:05}-of-00002.gguf", s(prefix), i + 1));
        gguf::write_gguf(&path, &kv, &tensors).unwrap();
        paths.push(path);
    }
    paths
}

#[test]
fn keep_split_writes_one_shard_per_input_shard() {
    let dir = test_fixtures::scratch_dir("quantize-split");
    let shards = split_model(small_model(), &dir.join("in"));
    let whole = dir.join("whole.gguf");
    ok(&quantize(&[s(small_model()), s(&whole), "q4_0"]));
    // Without --keep-split a split input becomes one file without split keys.
    let joined = dir.join("joined.gguf");
    ok(&quantize(&[s(&shards[0]), s(&joined), "q4_0"]));
    let (w, j) = (
        GgufFile::open(&whole).unwrap(),
        GgufFile::open(&joined).unwrap(),
    );
    assert_eq!(j.tensors.len(), w.tensors.len());
    assert!(j.get("split.count").is_none());
    for t in &w.tensors {
        assert_eq!(
            tensor_bytes(&j, &t.name),
            tensor_bytes(&w, &t.name),
            "{}",
            t.name
        );
    }

    ok(&quantize(&[
        "--keep-split",
        s(&shards[0]),
        s(&dir.join("out.gguf")),
        "q4_0",
    ]));
    let outs: Vec<GgufFile> = (1..=2)
        .map(|i| GgufFile::open(dir.join(format!("out-{i:05}-of-00002.gguf"))).unwrap())
        .collect();
    let ins: Vec<GgufFile> = shards.iter().map(|p| GgufFile::open(p).unwrap()).collect();
    for (i, (o, inp)) in outs.iter().zip(&ins).enumerate() {
        assert_eq!(o.get("split.no"), Some(&Value::U16(i as u16)));
        assert_eq!(o.get("split.count"), Some(&Value::U16(2)));
        assert_eq!(
            o.get("split.tensors.count"),
            Some(&Value::I32(w.tensors.len() as i32))
        );
        let names: Vec<&str> = o.tensors.iter().map(|t| t.name.as_str()).collect();
        let want: Vec<&str> = inp.tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names, want,
            "shard {i} keeps the input's tensors in their order"
        );
        for t in &o.tensors {
            assert_eq!(tensor_bytes(o, &t.name), tensor_bytes(&w, &t.name));
        }
    }
    assert_eq!(outs[0].get("general.file_type"), Some(&Value::U32(2)));
    assert_eq!(outs[1].kv.len(), 3, "later shards hold only the split keys");

    // An unsplit input with --keep-split: one file, named as llama.cpp names it, no split keys.
    ok(&quantize(&[
        "--keep-split",
        s(small_model()),
        s(&dir.join("single.gguf")),
        "q4_0",
    ]));
    let one = GgufFile::open(dir.join("single-00001-of-00001.gguf")).unwrap();
    assert!(one.get("split.count").is_none());
    assert_eq!(one.tensors.len(), w.tensors.len());

    // A missing shard is an error, and nothing is written.
    std::fs::remove_file(&shards[1]).unwrap();
    let o = quantize(&[s(&shards[0]), s(&dir.join("x.gguf")), "q4_0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("failed to load GGUF split from"));
    assert!(!dir.join("x.gguf").exists());
}
