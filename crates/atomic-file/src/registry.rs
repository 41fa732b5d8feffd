//! The temporaries a signal handler must remove: a fixed table of C strings that the handler
//! can read without allocating or locking.
//!
//! Each slot holds a pointer to a C string owned by the table. Whoever takes the pointer out of
//! the slot (an atomic swap or compare-exchange) owns it: `Slot::release` frees it only if it
//! took it back itself, and the handler never frees what it takes (the process is about to
//! die). So the handler, on whatever thread it runs, never reads freed memory.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// More temporaries than any of our tools keeps open at once (one per output shard).
const SLOTS: usize = 64;

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: AtomicPtr<libc::c_char> = AtomicPtr::new(ptr::null_mut());
static TABLE: [AtomicPtr<libc::c_char>; SLOTS] = [EMPTY; SLOTS];

/// A registered path; `release` unregisters it.
#[derive(Debug)]
pub(crate) struct Slot {
    index: usize,
    ptr: *mut libc::c_char,
}

// SAFETY: the pointer is only an identity for the compare-exchange in `release` and is
// dereferenced (freed) only after that exchange proves this Slot still owns it.
unsafe impl Send for Slot {}
unsafe impl Sync for Slot {}

/// Registers `path` for removal by the signal handler. None when the path has a NUL byte or
/// the table is full: the file is then still removed on drop, only not on a signal.
pub(crate) fn register(path: &Path) -> Option<Slot> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    let p = c.into_raw();
    for (index, slot) in TABLE.iter().enumerate() {
        if slot
            .compare_exchange(ptr::null_mut(), p, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return Some(Slot { index, ptr: p });
        }
    }
    // SAFETY: `p` came from CString::into_raw just above and was stored nowhere.
    drop(unsafe { CString::from_raw(p) });
    None
}

impl Slot {
    pub(crate) fn release(self) {
        let won = TABLE[self.index]
            .compare_exchange(
                self.ptr,
                ptr::null_mut(),
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_ok();
        if won {
            // SAFETY: the exchange took the pointer out of the table, so neither the handler
            // nor anyone else can reach it; it came from CString::into_raw in `register`.
            drop(unsafe { CString::from_raw(self.ptr) });
        }
    }
}

static INSTALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    for slot in &TABLE {
        let p = slot.swap(ptr::null_mut(), Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: the swap made this handler the pointer's only owner; it is a valid C
            // string from CString::into_raw. unlink is async-signal-safe.
            unsafe {
                libc::unlink(p);
            }
        }
    }
    // SAFETY: signal and raise are async-signal-safe. With the default action restored the
    // re-raised signal (pending until this handler returns) ends the process, so the exit
    // status reads "killed by SIGINT/SIGTERM" as it would without the handler.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// Installs the handler for SIGINT and SIGTERM that removes the live temporaries and then ends
/// the process by the same signal. A signal that already has a disposition other than the
/// default (ignored, as for a background job, or another handler) keeps it. Call it once, early,
/// in a program that writes files; calling it again does nothing.
pub fn install_signal_cleanup() {
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return;
    }
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: both sigaction structs are fully initialised (zeroed, then the handler and an
        // empty mask set); the old disposition is read before the new one is set.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, ptr::null(), &mut old) != 0 || old.sa_sigaction != libc::SIG_DFL
            {
                continue;
            }
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = libc::SA_RESTART;
            libc::sigaction(sig, &sa, ptr::null_mut());
        }
    }
}
