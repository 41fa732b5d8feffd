//! llama-gguf-split end to end: shards and merged files byte-identical to llama.cpp's gguf-split
//! (sha256 recorded from its binary in tests/fixtures/gguf-split), merging gives back the model's
//! metadata and tensors, and bad inputs fail with one line, exit 1 and no file left behind.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gguf::GgufFile;
use sha2::{Digest, Sha256};

const F32_ARGS: &[&str] = &[
    "--layers",
    "3",
    "--embd",
    "256",
    "--heads",
    "4",
    "--heads-kv",
    "2",
    "--ff",
    "512",
    "--vocab-size",
    "900",
    "--ctx",
    "128",
    "--seed",
    "7",
    "--quiet",
];
const Q8_ARGS: &[&str] = &[
    "--layers",
    "2",
    "--embd",
    "64",
    "--heads",
    "4",
    "--heads-kv",
    "2",
    "--ff",
    "128",
    "--vocab-size",
    "300",
    "--ctx",
    "128",
    "--seed",
    "7",
    "--type",
    "q8_0",
    "--quiet",
];

/// (case, input model, flags) as tests/fixtures/gguf-split/README.md recorded them.
const SPLITS: &[(&str, &str, &[&str])] = &[
    ("tensors5", "f32.gguf", &["--split-max-tensors", "5"]),
    ("size1m", "f32.gguf", &["--split-max-size", "1M"]),
    (
        "size1m-nofirst",
        "f32.gguf",
        &["--split-max-size", "1M", "--no-tensor-first-split"],
    ),
    ("default", "f32.gguf", &[]),
    (
        "q8-tensors4-nofirst",
        "q8.gguf",
        &["--split-max-tensors", "4", "--no-tensor-first-split"],
    ),
];

fn split_tool(args: &[&str]) -> Output {
    Command::new(test_fixtures::bin("llama-gguf-split", "llama-gguf-split"))
        .args(args)
        .output()
        .expect("run llama-gguf-split")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn sha256(path: &Path) -> String {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `sha256sum` lines of a fixture file: path -> hash.
fn fixture(name: &str) -> BTreeMap<String, String> {
    let path = test_fixtures::repo_root()
        .join("tests/fixtures/gguf-split")
        .join(name);
    let body = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    body.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (hash, file) = l.split_once("  ").expect("sha256sum line");
            (file.to_string(), hash.to_string())
        })
        .collect()
}

/// The fixtures' input models, made again and checked against the recorded hashes: if
/// llama-gguf-new's output changed, the recorded shards say nothing about this tool.
fn inputs(dir: &Path) {
    let gguf_new = test_fixtures::bin("llama-gguf-new", "llama-gguf-new");
    let want = fixture("inputs.sha256");
    for (name, args) in [("f32.gguf", F32_ARGS), ("q8.gguf", Q8_ARGS)] {
        let out = dir.join(name);
        let o = Command::new(&gguf_new)
            .args(args)
            .arg("-o")
            .arg(&out)
            .output()
            .expect("run llama-gguf-new");
        assert!(o.status.success(), "llama-gguf-new: {}", text(&o.stderr));
        assert_eq!(
            sha256(&out),
            want[name],
            "llama-gguf-new no longer writes the model the fixtures were recorded from ({name}); \
             record them again as tests/fixtures/gguf-split/README.md says"
        );
    }
}

/// Every file in `dir/case`, by `case/name`, with its hash.
fn hashes(dir: &Path, case: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for e in fs::read_dir(dir.join(case)).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        m.insert(format!("{case}/{name}"), sha256(&e.path()));
    }
    m
}

/// The recorded shards of one case (its merged file is compared on its own).
fn recorded(all: &BTreeMap<String, String>, case: &str) -> BTreeMap<String, String> {
    all.iter()
        .filter(|(k, _)| k.starts_with(&format!("{case}/s-")))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn first_shard(dir: &Path, case: &str) -> PathBuf {
    let mut names: Vec<_> = fs::read_dir(dir.join(case))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| s(p).ends_with(".gguf") && s(p).contains("-00001-of-"))
        .collect();
    assert_eq!(names.len(), 1, "{case}: {names:?}");
    names.pop().unwrap()
}

#[test]
fn shards_and_merged_files_are_byte_identical_to_llama_cpp() {
    let dir = test_fixtures::scratch_dir("gguf-split-identity");
    inputs(&dir);
    let want = fixture("outputs.sha256");

    for (case, model, flags) in SPLITS {
        fs::create_dir_all(dir.join(case)).unwrap();
        let mut args: Vec<&str> = flags.to_vec();
        let input = dir.join(model);
        let prefix = dir.join(case).join("s");
        args.extend([s(&input), s(&prefix)]);
        let o = split_tool(&args);
        assert!(o.status.success(), "{case}: {}", text(&o.stderr));
        assert_eq!(hashes(&dir, case), recorded(&want, case), "{case}");
    }

    for case in ["tensors5", "size1m", "q8-tensors4-nofirst"] {
        let first = first_shard(&dir, case);
        let merged = dir.join(case).join("merged.gguf");
        let o = split_tool(&["--merge", s(&first), s(&merged)]);
        assert!(o.status.success(), "{case}: {}", text(&o.stderr));
        let key = format!("{case}/merged.gguf");
        assert_eq!(sha256(&merged), want[&key], "{key}");
    }

    // a merged file keeps split.* keys, which splitting again must move, not duplicate
    let case = "resplit-merged-tensors9";
    fs::create_dir_all(dir.join(case)).unwrap();
    let merged = dir.join("tensors5/merged.gguf");
    let prefix = dir.join(case).join("s");
    let o = split_tool(&["--split-max-tensors", "9", s(&merged), s(&prefix)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(hashes(&dir, case), recorded(&want, case));
}

#[test]
fn merging_gives_back_the_model() {
    let dir = test_fixtures::scratch_dir("gguf-split-roundtrip");
    inputs(&dir);
    let model = dir.join("q8.gguf");
    let prefix = dir.join("s");
    let o = split_tool(&["--split-max-tensors", "3", s(&model), s(&prefix)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let merged = dir.join("merged.gguf");
    let o = split_tool(&["--merge", s(&dir.join("s-00001-of-00007.gguf")), s(&merged)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.ends_with(&format!(
            "gguf_merge: {} merged from 7 split with 21 tensors.\n",
            s(&merged)
        )),
        "{err}"
    );

    let a = GgufFile::open(&model).unwrap();
    let b = GgufFile::open(&merged).unwrap();
    let n = a.kv.len();
    assert_eq!(b.kv[..n], a.kv[..], "the model's KV pairs first, in order");
    let split_keys: Vec<(&str, String)> = b.kv[n..]
        .iter()
        .map(|(k, v)| (k.as_str(), format!("{v:?}")))
        .collect();
    assert_eq!(
        split_keys,
        [
            ("split.no", "U16(0)".to_string()),
            ("split.tensors.count", "I32(21)".to_string()),
            ("split.count", "U16(0)".to_string()),
        ]
    );
    assert_eq!(a.tensors.len(), b.tensors.len());
    for (x, y) in a.tensors.iter().zip(&b.tensors) {
        assert_eq!((&x.name, x.ty, x.shape()), (&y.name, y.ty, y.shape()));
        assert_eq!(a.tensor_data(x), b.tensor_data(y), "{}", x.name);
    }
}

#[test]
fn plan_dry_run_and_messages() {
    let dir = test_fixtures::scratch_dir("gguf-split-dry-run");
    inputs(&dir);
    let model = dir.join("f32.gguf");
    let prefix = dir.join("out").join("s");
    fs::create_dir_all(dir.join("out")).unwrap();
    let o = split_tool(&["--dry-run", "--split-max-size", "2M", s(&model), s(&prefix)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // as llama.cpp printed it for this model
    assert_eq!(
        text(&o.stdout),
        "n_split: 5\n\
         split 00001: n_tensors = 7, total_size = 1M\n\
         split 00002: n_tensors = 6, total_size = 1M\n\
         split 00003: n_tensors = 7, total_size = 1M\n\
         split 00004: n_tensors = 7, total_size = 1M\n\
         split 00005: n_tensors = 3, total_size = 1M\n"
    );
    assert_eq!(
        text(&o.stderr),
        "gguf_split: 5 gguf split written with a total of 30 tensors.\n"
    );
    assert_eq!(fs::read_dir(dir.join("out")).unwrap().count(), 0);

    let o = split_tool(&["--split-max-tensors", "16", s(&model), s(&prefix)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.ends_with(&format!(
            "Writing file {p}-00001-of-00002.gguf ... done\nWriting file {p}-00002-of-00002.gguf ... done\n",
            p = s(&prefix)
        )),
        "{out}"
    );

    // a dry merge reads every shard but writes nothing
    let merged = dir.join("merged.gguf");
    let first = format!("{}-00001-of-00002.gguf", s(&prefix));
    let o = split_tool(&["--merge", "--dry-run", &first, s(&merged)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!merged.exists());
}

fn no_temporaries(dir: &Path) {
    for e in fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        assert!(!name.contains(".tmp"), "temporary left behind: {name}");
    }
}

fn fails(o: &Output, want: &str) {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(want), "expected '{want}' in: {err}");
}

#[test]
fn bad_inputs_fail_cleanly() {
    let dir = test_fixtures::scratch_dir("gguf-split-errors");
    inputs(&dir);
    let model = dir.join("q8.gguf");
    let shards = dir.join("shards");
    fs::create_dir_all(&shards).unwrap();
    let prefix = shards.join("s");
    let o = split_tool(&["--split-max-tensors", "8", s(&model), s(&prefix)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let first = format!("{}-00001-of-00003.gguf", s(&prefix));
    let merged = dir.join("merged.gguf");

    // the output exists: llama.cpp refuses before reading anything, and so do we
    fs::write(&merged, b"keep").unwrap();
    let o = split_tool(&["--merge", &first, s(&merged)]);
    fails(
        &o,
        &format!("gguf_merge: output file {} already exists", s(&merged)),
    );
    assert_eq!(fs::read(&merged).unwrap(), b"keep");
    fs::remove_file(&merged).unwrap();

    // a shard of a 4-way split under the name of shard 2 of 3
    let other = dir.join("other");
    fs::create_dir_all(&other).unwrap();
    let o = split_tool(&["--split-max-tensors", "6", s(&model), s(&other.join("s"))]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let second = format!("{}-00002-of-00003.gguf", s(&prefix));
    let saved = fs::read(&second).unwrap();
    fs::copy(other.join("s-00002-of-00004.gguf"), &second).unwrap();
    let o = split_tool(&["--merge", &first, s(&merged)]);
    fails(&o, &format!("{second} has split.count = 4, expected 3"));
    fs::write(&second, &saved).unwrap();
    assert!(!merged.exists());

    // a missing shard names itself
    let third = format!("{}-00003-of-00003.gguf", s(&prefix));
    fs::rename(&third, dir.join("moved.gguf")).unwrap();
    let o = split_tool(&["--merge", &first, s(&merged)]);
    fails(&o, &format!("failed to load input GGUF from {third}"));
    assert!(!merged.exists());
    fs::rename(dir.join("moved.gguf"), &third).unwrap();

    // not a shard, and a shard under another name
    let o = split_tool(&["--merge", s(&model), s(&merged)]);
    fails(
        &o,
        "gguf_merge: input file does not contain split.count metadata",
    );
    let renamed = dir.join("renamed.gguf");
    fs::copy(&first, &renamed).unwrap();
    let o = split_tool(&["--merge", s(&renamed), s(&merged)]);
    fails(
        &o,
        &format!(
            "gguf_merge: unexpected input file name: {} i_split=0 n_split=3",
            s(&renamed)
        ),
    );

    // a tensor larger than --split-max-size would leave a shard empty: nothing is written
    let wide = dir.join("wide.gguf");
    let o = Command::new(test_fixtures::bin("llama-gguf-new", "llama-gguf-new"))
        .args([
            "--layers",
            "1",
            "--embd",
            "256",
            "--heads",
            "4",
            "--heads-kv",
            "2",
        ])
        .args([
            "--ff",
            "512",
            "--vocab-size",
            "1100",
            "--ctx",
            "128",
            "--quiet",
            "-o",
        ])
        .arg(&wide)
        .output()
        .expect("run llama-gguf-new");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let empty = dir.join("empty");
    fs::create_dir_all(&empty).unwrap();
    let o = split_tool(&["--split-max-size", "1M", s(&wide), s(&empty.join("s"))]);
    fails(
        &o,
        "error: one of splits have 0 tensors. Maybe size or tensors limit is too small",
    );
    assert_eq!(fs::read_dir(&empty).unwrap().count(), 0);

    // not a GGUF file, and a missing one
    let junk = dir.join("junk.gguf");
    fs::write(&junk, [0u8; 100]).unwrap();
    let o = split_tool(&[s(&junk), s(&empty.join("s"))]);
    fails(
        &o,
        &format!("gguf_split:  failed to load input GGUF from {}", s(&junk)),
    );
    let o = split_tool(&[s(&dir.join("absent.gguf")), s(&empty.join("s"))]);
    fails(&o, "gguf_split:  failed to open input GGUF from");
    assert_eq!(fs::read_dir(&empty).unwrap().count(), 0);

    // bad flags: the cause, then the usage on stdout
    for (args, want) in [
        (
            &["--split", "--merge", "a", "b"][..],
            "error: either --split or --merge can be specified, but not both",
        ),
        (
            &["--split-max-size", "5K", "a", "b"][..],
            "error: supported units are M (megabytes) or G (gigabytes), but got: K",
        ),
        (
            &["--split-max-tensors", "0", "a", "b"][..],
            "error: invalid parameter for argument: --split-max-tensors",
        ),
        (
            &["--frobnicate", "a", "b"][..],
            "error: unknown argument: --frobnicate",
        ),
        (&["a"][..], "error: bad arguments"),
    ] {
        let o = split_tool(args);
        fails(&o, want);
        assert!(text(&o.stdout).contains("usage: "), "{args:?}");
    }

    for d in [&dir, &shards, &other, &empty] {
        no_temporaries(d);
    }
}

#[test]
fn help_prints_usage_and_exits_0() {
    let o = split_tool(&["--help"]);
    assert!(o.status.success());
    let out = text(&o.stdout);
    assert!(out.contains("[options] GGUF_IN GGUF_OUT"), "{out}");
    assert!(out.contains("  --split-max-tensors     max tensors in each split (default: 128)\n"));
}

#[test]
fn delete_splits_removes_the_shards_once_merged() {
    let dir = test_fixtures::scratch_dir("gguf-split-delete");
    inputs(&dir);
    let prefix = dir.join("s");
    let o = split_tool(&[
        "--split-max-tensors",
        "10",
        s(&dir.join("q8.gguf")),
        s(&prefix),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let shards: Vec<String> = (1..=3)
        .map(|i| format!("{}-{i:05}-of-00003.gguf", s(&prefix)))
        .collect();
    let merged = dir.join("merged.gguf");
    let o = split_tool(&["--merge", "--delete-splits", &shards[0], s(&merged)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    for shard in &shards {
        assert!(!Path::new(shard).exists(), "{shard} still there");
        assert!(
            err.contains(&format!("gguf_merge: deleted file {shard}\n")),
            "{err}"
        );
    }
    let a = GgufFile::open(dir.join("q8.gguf")).unwrap();
    let b = GgufFile::open(&merged).unwrap();
    assert_eq!(a.data(), b.data(), "the merged tensor data");
}
