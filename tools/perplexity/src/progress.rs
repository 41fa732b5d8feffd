//! A progress bar for long runs, on stderr. It is drawn only when stderr is a terminal and
//! stdout is not: the per-chunk values stream on stdout without newlines, so a bar on the same
//! terminal would overwrite them, while with stdout redirected the bar is the only sign of life.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar of `total` steps named `unit`; hidden for fewer than two steps.
    pub fn new(total: u64, unit: &str) -> Progress {
        let show = total > 1 && std::io::stderr().is_terminal() && !std::io::stdout().is_terminal();
        if !show {
            return Progress { bar: None };
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        let template =
            format!("{{bar:40}} {{pos}}/{{len}} {unit} [{{elapsed_precise}} < {{eta_precise}}]");
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style);
        }
        Progress { bar: Some(bar) }
    }

    pub fn inc(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }

    /// Runs `f` (which prints) with the bar cleared.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.bar {
            Some(b) => b.suspend(f),
            None => f(),
        }
    }

    pub fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
