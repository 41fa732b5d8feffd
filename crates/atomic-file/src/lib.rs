//! Files written under a temporary name and renamed onto their destination once complete, so
//! that no way of stopping a run leaves a half-written file or a stray temporary:
//!
//! - an error or an early return drops the `TmpGuard`, which removes the temporary;
//! - SIGINT and SIGTERM (Drop does not run for them) are caught by `install_signal_cleanup`,
//!   whose handler unlinks every live temporary and then dies of the same signal;
//! - after SIGKILL (nothing runs), the next `create_tmp` for the same destination removes the
//!   temporaries of that name whose process no longer exists.
//!
//! The temporary of `DIR/NAME` is `DIR/NAME.tmp<pid>`: beside the destination, so the rename
//! never crosses a file system, and named for its process, so the stale ones can be told apart.

mod registry;
mod stale;

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

pub use registry::install_signal_cleanup;
pub use stale::{remove_stale, stale_pid};

/// `DIR/NAME.tmp<pid>` for `DIR/NAME`.
pub fn tmp_path(dest: &Path) -> PathBuf {
    tmp_path_for(dest, std::process::id())
}

fn tmp_path_for(dest: &Path, pid: u32) -> PathBuf {
    let mut name = dest
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(format!(".tmp{pid}"));
    dest.with_file_name(name)
}

/// Creates the temporary for `dest` (after removing stale ones of the same name) and registers
/// it for removal on SIGINT/SIGTERM. Write the data to the file, then `TmpGuard::commit`.
pub fn create_tmp(dest: &Path) -> io::Result<(File, TmpGuard)> {
    check_dest(dest)?;
    remove_stale(dest);
    let tmp = tmp_path(dest);
    // A file of our own name can only be left by an earlier process with our pid; never follow
    // a link planted at that name.
    let _ = std::fs::remove_file(&tmp);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)?;
    let slot = registry::register(&tmp);
    Ok((
        file,
        TmpGuard {
            tmp: Some(tmp),
            slot,
        },
    ))
}

/// Refuses a destination that exists but is not a regular file (or a link to one): renaming
/// the temporary onto a device such as /dev/full, a FIFO or a socket would replace it.
fn check_dest(dest: &Path) -> io::Result<()> {
    let Ok(meta) = std::fs::metadata(dest) else {
        return Ok(());
    };
    let ft = meta.file_type();
    if ft.is_file() {
        return Ok(());
    }
    use std::os::unix::fs::FileTypeExt;
    let what = if ft.is_dir() {
        "a directory"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(io::Error::other(format!(
        "'{}' exists and is {what}, not a regular file",
        dest.display()
    )))
}

/// Owns a temporary file: removes it when dropped, unless `commit` moved it into place.
#[derive(Debug)]
pub struct TmpGuard {
    tmp: Option<PathBuf>,
    /// The signal handler's registration; None when the path did not fit a slot.
    slot: Option<registry::Slot>,
}

impl TmpGuard {
    /// The temporary file's path.
    pub fn path(&self) -> &Path {
        self.tmp.as_deref().expect("set until commit or drop")
    }

    /// Renames the temporary onto `dest`; on failure the temporary is removed.
    pub fn commit(mut self, dest: &Path) -> io::Result<()> {
        let tmp = self.tmp.take().expect("set until commit or drop");
        let res = check_dest(dest).and_then(|()| std::fs::rename(&tmp, dest));
        // A signal between the rename and here unlinks a path that no longer exists: harmless.
        if let Some(s) = self.slot.take() {
            s.release();
        }
        if res.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        res
    }
}

impl Drop for TmpGuard {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let _ = std::fs::remove_file(&tmp);
        }
        if let Some(s) = self.slot.take() {
            s.release();
        }
    }
}

#[cfg(test)]
mod tests;
