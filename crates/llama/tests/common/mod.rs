//! Shared by the llama integration tests: the reference model loaded once per test binary,
//! and log capture (the log sink is process-wide, so captures are serialised).

#![allow(dead_code)]

use ggml::log::LogLevel;
use llama::{Model, ModelParams};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

static LOCK: Mutex<()> = Mutex::new(());

/// The log lines printed while `f` runs (continuations appended to the previous line).
pub fn capture<T>(f: impl FnOnce() -> T) -> (T, Vec<(LogLevel, String)>) {
    let _guard: MutexGuard<()> = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let lines: Arc<Mutex<Vec<(LogLevel, String)>>> = Arc::default();
    let sink = lines.clone();
    ggml::log::set_log_callback(Some(Box::new(move |level, text| {
        sink.lock().unwrap().push((level, text.to_string()));
    })));
    let out = f();
    ggml::log::set_log_callback(None);
    let v = std::mem::take(&mut *lines.lock().unwrap());
    (out, v)
}

/// The text of captured messages of the given minimum level, as lines.
pub fn text(lines: &[(LogLevel, String)], debug: bool) -> Vec<String> {
    let mut s = String::new();
    for (level, t) in lines {
        if *level == LogLevel::Debug && !debug {
            continue;
        }
        s.push_str(t);
    }
    s.lines().map(|l| l.to_string()).collect()
}

pub struct Loaded {
    pub model: Arc<Model>,
    pub log: Vec<(LogLevel, String)>,
}

static MODEL: OnceLock<Option<Loaded>> = OnceLock::new();

/// The reference model, loaded once with the default parameters (None: skipped).
pub fn model() -> Option<&'static Loaded> {
    MODEL
        .get_or_init(|| {
            let path = test_fixtures::reference_model_or_skip()?;
            llama::backend_init();
            let (model, log) = capture(|| Model::load(&path, &ModelParams::default()));
            Some(Loaded {
                model: model.expect("reference model loads"),
                log,
            })
        })
        .as_ref()
}

/// Lines of a reference log (the command line dropped, level letters removed).
pub fn reference_log(name: &str) -> Vec<String> {
    let path = test_fixtures::shared_dir()
        .join("reference/logs")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .skip(1)
        .map(|l| {
            for p in ["I ", "W ", "E ", "D "] {
                if let Some(rest) = l.strip_prefix(p) {
                    return rest.to_string();
                }
            }
            l.to_string()
        })
        .collect()
}
