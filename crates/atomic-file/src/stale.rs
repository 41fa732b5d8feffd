//! Temporaries left by a killed run (SIGKILL, a power cut): `NAME.tmp<pid>` beside `NAME`
//! whose process is gone.

use std::path::{Path, PathBuf};

/// The pid in `name` if it is the temporary name of `dest_name` (`dest_name.tmp<digits>`).
pub fn stale_pid(dest_name: &str, name: &str) -> Option<u32> {
    let digits = name.strip_prefix(dest_name)?.strip_prefix(".tmp")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Whether no process has this pid. A process we may not signal (EPERM) exists.
fn is_dead(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let r = unsafe { libc::kill(pid, 0) };
    r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// Removes the temporaries of `dest` left by processes that no longer run, and returns them.
/// Only files named `NAME.tmp<pid>` in `dest`'s directory are considered; this process's own
/// pid and live ones are kept. Failures (an unreadable directory) remove nothing.
pub fn remove_stale(dest: &Path) -> Vec<PathBuf> {
    let Some(dest_name) = dest.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    let dir = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let me = std::process::id();
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| stale_pid(dest_name, n)) else {
            continue;
        };
        if pid == me || !is_dead(pid) {
            continue;
        }
        let is_file = e.file_type().map(|t| t.is_file()).unwrap_or(false);
        if is_file && std::fs::remove_file(e.path()).is_ok() {
            removed.push(e.path());
        }
    }
    removed
}
