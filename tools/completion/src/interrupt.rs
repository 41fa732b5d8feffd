//! Ctrl+C as completion.cpp handles it: while generating in interactive mode it hands control
//! back to the user; otherwise the run stops with the timings and "Interrupted by user"
//! (exit status 130). The signal handler only records the signal; the generation loop acts on
//! it between tokens.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_signo: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Install the SIGINT handler.
pub fn install() {
    #[cfg(unix)]
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe; the sigaction
    // struct is fully initialised (zeroed, then the handler and an empty mask set).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigint as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
    }
}

/// Whether Ctrl+C was pressed since the last call.
pub fn take() -> bool {
    INTERRUPTED.swap(false, Ordering::SeqCst)
}
