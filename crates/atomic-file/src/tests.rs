use super::*;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("atomic-file-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn names(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The pid of a process that has exited and been reaped.
fn dead_pid() -> u32 {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

#[test]
fn temporary_is_named_for_the_destination_and_the_process() {
    let p = tmp_path(Path::new("/a/b/model.gguf"));
    assert_eq!(
        p,
        PathBuf::from(format!("/a/b/model.gguf.tmp{}", std::process::id()))
    );
    assert_eq!(stale_pid("model.gguf", "model.gguf.tmp123"), Some(123));
    assert_eq!(stale_pid("model.gguf", "model.gguf.tmp"), None);
    assert_eq!(stale_pid("model.gguf", "model.gguf.tmp12x"), None);
    assert_eq!(stale_pid("model.gguf", "other.gguf.tmp12"), None);
    assert_eq!(stale_pid("model.gguf", "model.gguf.part12"), None);
}

#[test]
fn commit_renames_and_drop_removes() {
    let d = dir("commit");
    let dest = d.join("out.bin");
    let (mut f, g) = create_tmp(&dest).unwrap();
    std::io::Write::write_all(&mut f, b"data").unwrap();
    assert_eq!(g.path(), tmp_path(&dest));
    assert!(g.slot.is_some(), "registered for the signal handler");
    assert!(!dest.exists());
    g.commit(&dest).unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), b"data");
    assert_eq!(names(&d), ["out.bin"]);

    let dest2 = d.join("dropped.bin");
    {
        let (_f, _g) = create_tmp(&dest2).unwrap();
        assert!(tmp_path(&dest2).exists());
    }
    assert_eq!(names(&d), ["out.bin"]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn failed_commit_removes_the_temporary() {
    let d = dir("failcommit");
    let dest = d.join("x");
    let (_f, g) = create_tmp(&dest).unwrap();
    // a rename onto a non-empty directory fails
    std::fs::create_dir_all(dest.join("inner")).unwrap();
    assert!(g.commit(&dest).is_err());
    assert_eq!(names(&d), ["x"]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn stale_temporaries_of_dead_processes_are_removed() {
    let d = dir("stale");
    let dest = d.join("m.gguf");
    let dead = dead_pid();
    let stale = d.join(format!("m.gguf.tmp{dead}"));
    // pid 1 always runs; a temporary of a live process is not ours to remove
    let live = d.join("m.gguf.tmp1");
    let other = d.join(format!("n.gguf.tmp{dead}"));
    let unrelated = d.join(format!("m.gguf.part{dead}"));
    for p in [&stale, &live, &other, &unrelated] {
        std::fs::write(p, b"x").unwrap();
    }
    assert_eq!(remove_stale(&dest), vec![stale.clone()]);
    assert!(!stale.exists());
    assert!(live.exists() && other.exists() && unrelated.exists());
    // creating the temporary does the same clean-up
    std::fs::write(&stale, b"x").unwrap();
    let (_f, _g) = create_tmp(&dest).unwrap();
    assert!(!stale.exists());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn unwritable_destination_is_an_error_and_leaves_nothing() {
    let e = create_tmp(Path::new("/nonexistent-dir-atomic-file/x")).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn a_destination_that_is_a_device_or_fifo_is_refused_before_anything_is_created() {
    // as root, renaming onto /dev/null would replace the device node
    let e = create_tmp(Path::new("/dev/null")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "'/dev/null' exists and is a character device, not a regular file"
    );
    assert!(!tmp_path(Path::new("/dev/null")).exists());

    let d = dir("fifo-dest");
    let fifo = d.join("out.kld");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let e = create_tmp(&fifo).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("exists and is a FIFO, not a regular file"),
        "{e}"
    );
    assert_eq!(names(&d), ["out.kld"]);
    let _ = std::fs::remove_dir_all(&d);
}
