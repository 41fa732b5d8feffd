//! Ctrl+C as completion.cpp handles it: while generating in interactive mode it hands control
//! back to the user; otherwise the run stops with the timings and "Interrupted by user"
//! (exit status 130). llama.cpp does all of that inside the signal handler; here the handler
//! only records the signal: a stop also raises the context's abort callback, so a long prompt
//! stops after the graph node being computed, and the loop prints the timings and exits.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Whether the next Ctrl+C hands control back to the user (interactive mode, while the model
/// has it) instead of stopping the run.
static INTERJECT_ARMED: AtomicBool = AtomicBool::new(false);
static INTERJECTED: AtomicBool = AtomicBool::new(false);
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_signo: libc::c_int) {
    // like llama.cpp's is_interacting = true: a second Ctrl+C stops the run
    if INTERJECT_ARMED.swap(false, Ordering::SeqCst) {
        INTERJECTED.store(true, Ordering::SeqCst);
    } else {
        STOP.store(true, Ordering::SeqCst);
    }
}

/// Install the SIGINT handler. As in llama.cpp it is installed without SA_RESTART, so a read
/// of stdin waiting for the user returns (EINTR) and the run can stop.
pub fn install() {
    #[cfg(unix)]
    // SAFETY: the handler only touches atomics, which is async-signal-safe; the sigaction
    // struct is fully initialised (zeroed, then the handler and an empty mask set).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigint as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = 0;
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
    }
}

/// Whether a Ctrl+C from now on hands control back (true) or stops the run (false).
pub fn arm_interject(on: bool) {
    INTERJECT_ARMED.store(on, Ordering::SeqCst);
}

/// Whether a Ctrl+C handed control back to the user since the last call.
pub fn take_interject() -> bool {
    INTERJECTED.swap(false, Ordering::SeqCst)
}

/// Whether a Ctrl+C asked the run to stop.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// The context's abort callback: a decode stops as soon as a stop is requested.
pub fn abort_callback() -> llama::AbortCallback {
    Arc::new(stop_requested)
}
