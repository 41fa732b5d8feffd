//! Only regular files are read: a character device (/dev/zero reads forever), a FIFO (opening
//! it waits for a writer), a directory and a socket are refused by name through every way of
//! opening, at once; a regular file is read no further than the size it had when opened.
#![cfg(unix)]

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use gguf::{GgufError, GgufFile, ReadMode};

type Opener = fn(&Path) -> Result<GgufFile, GgufError>;

/// Each way of opening a file, by name.
const OPENERS: [(&str, Opener); 3] = [
    ("open", |p| GgufFile::open(p)),
    ("open_with(Read)", |p| {
        GgufFile::open_with(p, ReadMode::Read)
    }),
    ("open_metadata", |p| GgufFile::open_metadata(p)),
];

/// Opens `path` every way on another thread and returns the errors, failing the test if one
/// does not answer within 5 s (a FIFO opened for reading would block until a writer comes).
fn refusals(path: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for (name, open) in OPENERS {
        let (tx, rx) = mpsc::channel();
        let p = path.to_path_buf();
        std::thread::spawn(move || {
            let _ = tx.send(open(&p).map(|_| ()));
        });
        match rx.recv_timeout(Duration::from_secs(5)) {
            Ok(Err(e)) => {
                assert!(matches!(e, GgufError::NotAFile { .. }), "{name}: {e:?}");
                assert_eq!(e.kind(), None);
                out.push(e.to_string());
            }
            Ok(Ok(())) => panic!("{name} accepted {}", path.display()),
            Err(_) => panic!("{name} of {} did not return within 5 s", path.display()),
        }
    }
    out
}

fn expect_refused(path: &Path, what: &str) {
    let want = format!(
        "failed to open GGUF file '{}' ({what}, not a regular file)",
        path.display()
    );
    assert_eq!(refusals(path), [want.clone(), want.clone(), want]);
}

#[test]
fn dev_zero_is_refused() {
    expect_refused(Path::new("/dev/zero"), "a character device");
}

#[test]
fn a_symlink_is_judged_by_what_it_points_to() {
    let dir = test_fixtures::scratch_dir("gguf-special-symlink");
    let link = dir.join("zero.gguf");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    expect_refused(&link, "a character device");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_fifo_is_refused_without_waiting_for_a_writer() {
    let dir = test_fixtures::scratch_dir("gguf-special-fifo");
    let fifo = dir.join("model.gguf");
    match std::process::Command::new("mkfifo").arg(&fifo).status() {
        Ok(s) if s.success() => {}
        other => {
            test_fixtures::skip(&format!("mkfifo is not runnable ({other:?})"));
            return;
        }
    }
    expect_refused(&fifo, "a FIFO");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_directory_is_refused() {
    let dir = test_fixtures::scratch_dir("gguf-special-dir");
    expect_refused(&dir, "a directory");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_socket_is_refused() {
    let dir = test_fixtures::scratch_dir("gguf-special-socket");
    let sock = dir.join("model.gguf");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    expect_refused(&sock, "a socket");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_missing_file_says_so() {
    let e = GgufFile::open("/nonexistent/model.gguf").unwrap_err();
    assert_eq!(
        e.to_string(),
        "failed to open GGUF file '/nonexistent/model.gguf' (No such file or directory (os error 2))"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn a_regular_file_that_reports_size_0_is_read_no_further() {
    // procfs files are regular but report size 0 whatever they hold: the read stops at the size.
    let p = Path::new("/proc/self/status");
    assert_eq!(
        std::fs::metadata(p).unwrap().len(),
        0,
        "procfs reports size 0"
    );
    for (name, open) in OPENERS {
        let e = open(p).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid GGUF file: at byte 0, magic: needs 4 bytes but the file ends after 0 more",
            "{name}"
        );
    }
}
