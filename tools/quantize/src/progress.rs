//! A progress bar over the tensors when stderr is a terminal. The log lines keep flowing
//! above it: the log sink collects each line (llama.cpp prints them in pieces) and prints it
//! whole while the bar is hidden, so bar and text never share a line.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};

use ggml::log::{set_log_callback, LogLevel};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Bar {
    bar: Option<ProgressBar>,
    pending: Arc<Mutex<String>>,
}

impl Bar {
    /// A bar on stderr, or nothing when stderr is not a terminal (logs are then untouched).
    pub fn new() -> Bar {
        let pending = Arc::new(Mutex::new(String::new()));
        if !std::io::stderr().is_terminal() {
            return Bar { bar: None, pending };
        }
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        if let Ok(style) =
            ProgressStyle::with_template("{bar:40} {pos}/{len} tensors [{elapsed_precise}]")
        {
            bar.set_style(style);
        }
        let (b, p) = (bar.clone(), pending.clone());
        set_log_callback(Some(Box::new(move |_level: LogLevel, text: &str| {
            let mut buf = p.lock().unwrap_or_else(|e| e.into_inner());
            buf.push_str(text);
            while let Some(pos) = buf.find('\n') {
                let line: String = buf.drain(..=pos).collect();
                b.suspend(|| eprint!("{line}"));
            }
        })));
        Bar {
            bar: Some(bar),
            pending,
        }
    }

    pub fn set(&self, done: usize, total: usize) {
        if let Some(b) = &self.bar {
            b.set_length(total as u64);
            b.set_position(done as u64);
        }
    }

    /// Removes the bar and prints any unfinished log line.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            set_log_callback(None);
            b.finish_and_clear();
            let rest = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
            eprint!("{rest}");
        }
    }
}
