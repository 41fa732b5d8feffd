//! --control-vector, --control-vector-scaled and --control-vector-layer-range: the directions
//! are added to the layer outputs as llama.cpp adds them, so greedy text on the reference model
//! equals llama.cpp's run with the same file (tests/fixtures/control-vector, see the README);
//! the graph gains one node per steered layer; bad files stop the run with the cause.

use std::path::{Path, PathBuf};
use std::process::Output;

fn completion(args: &[&str]) -> Output {
    test_fixtures::run_tool("llama-completion", args)
}

use test_fixtures::text;

fn fixture(name: &str) -> PathBuf {
    test_fixtures::repo_root()
        .join("tests/fixtures/control-vector")
        .join(name)
}

fn greedy(model: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "-m",
        model.to_str().unwrap(),
        "-p",
        "Hello my name is",
        "-n",
        "12",
        "--temp",
        "0",
        "-no-cnv",
    ];
    args.extend_from_slice(extra);
    completion(&args)
}

fn ok(o: &Output) -> (String, String) {
    let err = text(&o.stderr);
    assert!(o.status.success(), "failed:\n{err}");
    (text(&o.stdout), err)
}

/// A control-vector file of 1-D F32 tensors of `n` elements.
fn write_cvec(path: &Path, tensors: &[(String, Vec<u8>)], n: u64) {
    let mut w = gguf::GgufWriter::new();
    w.add_kv(
        "general.architecture",
        gguf::Value::Str("controlvector".into()),
    )
    .unwrap();
    for (name, _) in tensors {
        w.add_tensor(name.as_str(), ggml::Type::F32, &[n]).unwrap();
    }
    let data: Vec<&[u8]> = tensors.iter().map(|(_, d)| d.as_slice()).collect();
    std::fs::write(path, w.to_bytes(&data).unwrap()).unwrap();
}

#[test]
fn steered_text_equals_llamacpp() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let cv = fixture("random.gguf");
    let cv = cv.to_str().unwrap();
    let (plain, _) = ok(&greedy(&model, &[]));

    let (out, err) = ok(&greedy(&model, &["--control-vector", cv, "-lv", "4"]));
    let want = std::fs::read_to_string(fixture("llamacpp-plain.txt")).unwrap();
    assert_eq!(out, want);
    assert_ne!(out, plain, "the vector must change the text");
    // reserved again for the graph with the three additions (layers 1..3), as llama.cpp does
    assert_eq!(
        err.matches("sched_reserve: reserving ...").count(),
        2,
        "{err}"
    );
    assert!(
        err.contains("sched_reserve: graph: nodes = 130,")
            && err.contains("sched_reserve: graph: nodes = 133,"),
        "{err}"
    );

    let scaled = format!("{cv}:-0.8");
    let (out, _) = ok(&greedy(
        &model,
        &[
            "--control-vector-scaled",
            &scaled,
            "--control-vector-layer-range",
            "2",
            "3",
        ],
    ));
    let want = std::fs::read_to_string(fixture("llamacpp-scaled-range.txt")).unwrap();
    assert_eq!(out, want);
}

#[test]
fn bad_control_vectors_stop_the_run_with_the_cause() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = test_fixtures::scratch_dir("control-vector-bad");

    // a file that is not there
    let missing = dir.join("missing.gguf");
    let o = greedy(&model, &["--control-vector", missing.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "failed to load control vector file from {}",
            missing.display()
        )),
        "{err}"
    );
    assert!(
        err.contains("no valid control vector files passed"),
        "{err}"
    );

    // directions of another width than the model's
    let narrow = dir.join("narrow.gguf");
    let dirs: Vec<(String, Vec<u8>)> = (1..4)
        .map(|il| {
            let v = (0..64)
                .flat_map(|i| (i as f32 * 0.01).to_le_bytes())
                .collect();
            (format!("direction.{il}"), v)
        })
        .collect();
    write_cvec(&narrow, &dirs, 64);
    let o = greedy(&model, &["--control-vector", narrow.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("control vector n_embd does not match model"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    // a tensor that is not a direction
    let odd = dir.join("odd.gguf");
    write_cvec(&odd, &[("weights.1".to_string(), vec![0u8; 1024])], 256);
    let o = greedy(&model, &["--control-vector", odd.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "invalid/unparsable direction tensor layer index in {}",
            odd.display()
        )),
        "{err}"
    );
}
