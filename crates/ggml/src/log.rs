//! The log sink shared by ggml and libllama, shaped like `ggml_log_set`: a message carries a
//! level and its own text (newline included, as llama.cpp writes them), and one process-wide
//! callback decides where it goes. The tools' common crate installs its own filtering sink.

use std::sync::RwLock;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    None = 0,
    Debug = 1,
    Info = 2,
    Warn = 3,
    Error = 4,
    /// Continues the previous message (progress dots).
    Cont = 5,
}

pub type LogCallback = Box<dyn Fn(LogLevel, &str) + Send + Sync>;

static CALLBACK: RwLock<Option<LogCallback>> = RwLock::new(None);

/// Install a sink; `None` restores the default, which writes every level to stderr unfiltered
/// (llama.cpp's `llama_log_callback_default`).
pub fn set_log_callback(cb: Option<LogCallback>) {
    let mut guard = CALLBACK.write().unwrap_or_else(|e| e.into_inner());
    *guard = cb;
}

thread_local! {
    static MUTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with this thread's messages dropped: for code run for its verdict rather than its
/// log (llama-quantize checking that the model it writes would load).
pub fn muted<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            MUTED.with(|m| m.set(self.0));
        }
    }
    let _restore = Restore(MUTED.with(|m| m.replace(true)));
    f()
}

pub fn log(level: LogLevel, text: &str) {
    if MUTED.with(|m| m.get()) {
        return;
    }
    let guard = CALLBACK.read().unwrap_or_else(|e| e.into_inner());
    match guard.as_ref() {
        Some(cb) => cb(level, text),
        None => {
            use std::io::Write;
            let _ = std::io::stderr().write_all(text.as_bytes());
        }
    }
}

#[macro_export]
macro_rules! log_info { ($($arg:tt)*) => { $crate::log::log($crate::log::LogLevel::Info, &format!($($arg)*)) }; }
#[macro_export]
macro_rules! log_warn { ($($arg:tt)*) => { $crate::log::log($crate::log::LogLevel::Warn, &format!($($arg)*)) }; }
#[macro_export]
macro_rules! log_error { ($($arg:tt)*) => { $crate::log::log($crate::log::LogLevel::Error, &format!($($arg)*)) }; }
#[macro_export]
macro_rules! log_debug { ($($arg:tt)*) => { $crate::log::log($crate::log::LogLevel::Debug, &format!($($arg)*)) }; }
#[macro_export]
macro_rules! log_cont { ($($arg:tt)*) => { $crate::log::log($crate::log::LogLevel::Cont, &format!($($arg)*)) }; }
