//! llama-gguf-inspect's gguf_dump.py modes (--markdown, --data-offset, --data-alignment) give
//! gguf_dump.py's text exactly: against its recorded output for a sample file written by gguf-py
//! (tests/fixtures/gguf-inspect, made by make-sample.py there), and against a live gguf_dump.py
//! run on the reference model where python's gguf package is installed.

use std::path::Path;
use std::process::{Command, Output};

fn fixtures() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/gguf-inspect"
    ))
}

fn inspect_in(dir: &Path, args: &[&str]) -> Output {
    let bin = test_fixtures::bin("llama-gguf-inspect", "llama-gguf-inspect");
    Command::new(bin)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run llama-gguf-inspect")
}

fn stdout_ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).expect("utf-8 output")
}

#[test]
fn sample_file_matches_recorded_gguf_dump() {
    for (flags, recorded) in [
        (&["--markdown"][..], "sample.md"),
        (&["--markdown", "--no-tensors"][..], "sample-no-tensors.md"),
        (&["--data-offset"][..], "data-offset.txt"),
        (&["--data-alignment"][..], "data-alignment.txt"),
    ] {
        let mut args = flags.to_vec();
        args.push("sample.gguf");
        let ours = stdout_ok(&inspect_in(fixtures(), &args));
        let want = std::fs::read_to_string(fixtures().join(recorded)).unwrap();
        assert!(ours == want, "{flags:?} differs from {recorded}:\n{ours}");
    }
}

#[test]
fn alignment_and_offset_are_the_files() {
    // sample.gguf sets general.alignment = 64: the data starts on a multiple of it
    let dir = fixtures();
    let off: u64 = stdout_ok(&inspect_in(dir, &["--data-offset", "sample.gguf"]))
        .trim()
        .parse()
        .unwrap();
    let align = stdout_ok(&inspect_in(dir, &["--data-alignment", "sample.gguf"]));
    assert_eq!(align, "64\n");
    assert_eq!(off % 64, 0);
    let len = std::fs::metadata(dir.join("sample.gguf")).unwrap().len();
    assert!(off < len);
}

#[test]
fn verbose_describes_the_layout_on_stderr_only() {
    let dir = fixtures();
    let plain = inspect_in(dir, &["sample.gguf"]);
    let verbose = inspect_in(dir, &["--verbose", "sample.gguf"]);
    assert_eq!(stdout_ok(&plain), stdout_ok(&verbose));
    let err = String::from_utf8_lossy(&verbose.stderr);
    assert!(err.contains("* Loading: sample.gguf\n"), "{err}");
    assert!(
        err.contains("* GGUF v3: 31 key/value pair(s), 9 tensor(s); alignment 64, tensor data at offset 1664 of 9408 bytes\n"),
        "{err}"
    );
    assert!(plain.stderr.is_empty());
}

#[test]
fn reference_model_matches_live_gguf_dump() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = model.parent().unwrap();
    let name = model.file_name().unwrap().to_str().unwrap();
    for flags in [
        &["--markdown"][..],
        &["--data-offset"][..],
        &["--data-alignment"][..],
    ] {
        let py = Command::new("python3")
            .args(["-m", "gguf.scripts.gguf_dump"])
            .args(flags)
            .arg(name)
            .current_dir(dir)
            .output();
        let want = match py {
            Ok(o) if o.status.success() => String::from_utf8(o.stdout).unwrap(),
            _ => {
                test_fixtures::skip("python3 -m gguf.scripts.gguf_dump does not run here");
                return;
            }
        };
        let mut args = flags.to_vec();
        args.push(name);
        let ours = stdout_ok(&inspect_in(dir, &args));
        assert!(ours == want, "{flags:?} differs from gguf_dump.py");
    }
}
