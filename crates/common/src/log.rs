//! The tools' logger, after llama.cpp's common_log: every message has a level and a verbosity;
//! it is shown when its verbosity is at most the threshold (`-lv N`, default 3; `-v` = all).
//! Output (level NONE) goes to stdout, everything else to stderr, optionally prefixed with a
//! timestamp and a level tag ("I ", "W ", "E ", "D "). `init` also installs this logger as the
//! ggml/libllama sink, where library levels map to verbosities DEBUG 5, INFO 4, WARN 2, ERROR 1.

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::Instant;

pub use ggml::log::LogLevel;

/// Verbosities of the tool macros (llama.cpp's LOG_*).
pub const VERBOSITY_OUTPUT: i32 = 0;
pub const VERBOSITY_ERROR: i32 = 1;
pub const VERBOSITY_WARN: i32 = 2;
pub const VERBOSITY_INFO: i32 = 3;
pub const VERBOSITY_TRACE: i32 = 4;
pub const VERBOSITY_DEBUG: i32 = 5;
/// The default threshold.
pub const DEFAULT_VERBOSITY: i32 = VERBOSITY_INFO;

const COL_DEFAULT: &str = "\x1b[0m";
const COL_RED: &str = "\x1b[31m";
const COL_GREEN: &str = "\x1b[32m";
const COL_YELLOW: &str = "\x1b[33m";
const COL_BLUE: &str = "\x1b[34m";
const COL_MAGENTA: &str = "\x1b[35m";

/// Where a formatted message goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// A replacement for the real stdout/stderr, for tests that check what is printed.
pub type Capture = Box<dyn Fn(Stream, &str) + Send>;

struct State {
    verbosity: i32,
    prefix: bool,
    timestamps: bool,
    colors: bool,
    disabled: bool,
    /// `--log-jsonl`: every message a JSON object on stdout
    jsonl: bool,
    /// Verbosity of the last message, which a CONT message inherits.
    last_verbosity: i32,
    t_start: Instant,
    file: Option<File>,
    capture: Option<Capture>,
}

static STATE: LazyLock<Mutex<State>> = LazyLock::new(|| {
    Mutex::new(State {
        verbosity: DEFAULT_VERBOSITY,
        prefix: false,
        timestamps: false,
        colors: false,
        disabled: false,
        jsonl: false,
        last_verbosity: VERBOSITY_INFO,
        t_start: Instant::now(),
        file: None,
        capture: None,
    })
});

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Set up logging as llama.cpp's `common_init` does: prefixes and timestamps on, colours when
/// stderr is a terminal, and this logger installed as the ggml/libllama log sink.
pub fn init() {
    {
        let mut s = state();
        s.prefix = true;
        s.timestamps = true;
        s.colors = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        s.t_start = Instant::now();
    }
    install_ggml_sink();
}

/// Route ggml/libllama messages through this logger (without changing any setting).
pub fn install_ggml_sink() {
    ggml::log::set_log_callback(Some(Box::new(|level, text| {
        let verbosity = match level {
            LogLevel::None => VERBOSITY_OUTPUT,
            LogLevel::Error => VERBOSITY_ERROR,
            LogLevel::Warn => VERBOSITY_WARN,
            LogLevel::Info => VERBOSITY_TRACE,
            LogLevel::Debug => VERBOSITY_DEBUG,
            LogLevel::Cont => state().last_verbosity,
        };
        log(level, verbosity, text);
    })));
}

/// The threshold: messages with a higher verbosity are dropped. `i32::MAX` shows everything.
pub fn set_verbosity(v: i32) {
    state().verbosity = v;
}

pub fn verbosity() -> i32 {
    state().verbosity
}

pub fn set_prefix(on: bool) {
    state().prefix = on;
}

pub fn set_timestamps(on: bool) {
    state().timestamps = on;
}

pub fn set_colors(on: bool) {
    state().colors = on;
}

/// `--log-jsonl`: from now on every shown message is one line `{"type":"log","time":T,
/// "level":L,"msg":M}` on stdout (also in the log file), and `log_json` objects are written.
pub fn set_jsonl(on: bool) {
    state().jsonl = on;
}

pub fn jsonl() -> bool {
    state().jsonl
}

/// A JSON string literal as nlohmann's dump writes it: `"` and `\` escaped, the short escapes
/// for \b \f \n \r \t, other control bytes as \u00xx, everything else (UTF-8) as is.
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn level_str(level: LogLevel) -> &'static str {
    match level {
        LogLevel::Debug => "debug",
        LogLevel::Info => "info",
        LogLevel::Warn => "warn",
        LogLevel::Error => "error",
        LogLevel::Cont => "cont",
        LogLevel::None => "none",
    }
}

/// `LOG_JSON(type, data)`: with `--log-jsonl`, the line `{"type":TYPE,"data":DATA}` on stdout
/// whatever the verbosity (`data` is serialized JSON); nothing otherwise.
pub fn log_json(ty: &str, data: &str) {
    let mut s = state();
    if !s.jsonl || s.disabled {
        return;
    }
    let line = format!("{{\"type\":{},\"data\":{data}}}\n", json_string(ty));
    emit(&mut s, Stream::Stdout, &line, &line);
}

fn emit(s: &mut State, stream: Stream, text: &str, plain: &str) {
    if let Some(f) = s.file.as_mut() {
        let _ = f.write_all(plain.as_bytes());
    }
    if let Some(capture) = &s.capture {
        capture(stream, text);
        return;
    }
    // Errors writing to a closed pipe are ignored, as fprintf's are.
    match stream {
        Stream::Stdout => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
        Stream::Stderr => {
            let _ = std::io::stderr().lock().write_all(text.as_bytes());
        }
    }
}

/// Drop every message from now on, output included (`--log-disable`).
pub fn disable() {
    state().disabled = true;
}

pub fn enable() {
    state().disabled = false;
}

/// Also write every shown message (without colours) to a file (`--log-file`); `None` stops.
pub fn set_file(path: Option<&Path>) -> std::io::Result<()> {
    let file = path.map(File::create).transpose()?;
    state().file = file;
    Ok(())
}

/// Send messages to `capture` instead of stdout/stderr; `None` restores the real streams.
pub fn set_capture(capture: Option<Capture>) {
    state().capture = capture;
}

/// Whether a message of this level and verbosity would be shown now.
pub fn enabled(level: LogLevel, verbosity: i32) -> bool {
    let s = state();
    shown(&s, level, verbosity)
}

fn shown(s: &State, level: LogLevel, verbosity: i32) -> bool {
    // DEBUG entries reach the terminal only at debug verbosity, whatever their own verbosity.
    !s.disabled
        && verbosity <= s.verbosity
        && (level != LogLevel::Debug || s.verbosity >= VERBOSITY_DEBUG)
}

/// The text of one message as common_log prints it: `[timestamp ][tag ]msg[reset]`.
pub fn format_entry(
    level: LogLevel,
    prefix: bool,
    timestamp_us: Option<i64>,
    colors: bool,
    msg: &str,
) -> String {
    let col = |c: &'static str| if colors { c } else { "" };
    let mut out = String::with_capacity(msg.len() + 24);
    if prefix && level != LogLevel::None && level != LogLevel::Cont {
        if let Some(t) = timestamp_us {
            out.push_str(&format!(
                "{}{}.{:02}.{:03}.{:03}{} ",
                col(COL_BLUE),
                t / 1_000_000 / 60,
                t / 1_000_000 % 60,
                t / 1000 % 1000,
                t % 1000,
                col(COL_DEFAULT)
            ));
        }
        let tag = match level {
            LogLevel::Info => Some((COL_GREEN, "I ", col(COL_DEFAULT))),
            LogLevel::Warn => Some((COL_MAGENTA, "W ", "")),
            LogLevel::Error => Some((COL_RED, "E ", "")),
            LogLevel::Debug => Some((COL_YELLOW, "D ", "")),
            LogLevel::None | LogLevel::Cont => None,
        };
        if let Some((c, t, reset)) = tag {
            out.push_str(col(c));
            out.push_str(t);
            out.push_str(reset);
        }
    }
    out.push_str(msg);
    if matches!(level, LogLevel::Warn | LogLevel::Error | LogLevel::Debug) {
        out.push_str(col(COL_DEFAULT));
    }
    out
}

/// Log one message (its text carries its own newline, as in llama.cpp).
pub fn log(level: LogLevel, verbosity: i32, msg: &str) {
    let mut s = state();
    let verbosity = if level == LogLevel::Cont {
        s.last_verbosity
    } else {
        verbosity
    };
    s.last_verbosity = verbosity;
    if !shown(&s, level, verbosity) {
        return;
    }
    let timestamp = s.timestamps.then(|| s.t_start.elapsed().as_micros() as i64);
    if s.jsonl {
        let line = format!(
            "{{\"type\":\"log\",\"time\":{},\"level\":\"{}\",\"msg\":{}}}\n",
            timestamp.unwrap_or(0),
            level_str(level),
            json_string(msg)
        );
        emit(&mut s, Stream::Stdout, &line, &line);
        return;
    }
    let stream = if level == LogLevel::None {
        Stream::Stdout
    } else {
        Stream::Stderr
    };
    let text = format_entry(level, s.prefix, timestamp, s.colors, msg);
    let plain = format_entry(level, s.prefix, timestamp, false, msg);
    emit(&mut s, stream, &text, &plain);
}

/// `LOG`: output text to stdout (verbosity 0), no prefix.
#[macro_export]
macro_rules! log_out { ($($arg:tt)*) => { $crate::log::log($crate::log::LogLevel::None, $crate::log::VERBOSITY_OUTPUT, &format!($($arg)*)) }; }
/// `LOG_ERR`
#[macro_export]
macro_rules! log_err { ($($arg:tt)*) => { $crate::log::log($crate::log::LogLevel::Error, $crate::log::VERBOSITY_ERROR, &format!($($arg)*)) }; }
/// `LOG_WRN`
#[macro_export]
macro_rules! log_wrn { ($($arg:tt)*) => { $crate::log::log($crate::log::LogLevel::Warn, $crate::log::VERBOSITY_WARN, &format!($($arg)*)) }; }
/// `LOG_INF`
#[macro_export]
macro_rules! log_inf { ($($arg:tt)*) => { $crate::log::log($crate::log::LogLevel::Info, $crate::log::VERBOSITY_INFO, &format!($($arg)*)) }; }
/// `LOG_TRC`: info shown from `-lv 4`.
#[macro_export]
macro_rules! log_trc { ($($arg:tt)*) => { $crate::log::log($crate::log::LogLevel::Info, $crate::log::VERBOSITY_TRACE, &format!($($arg)*)) }; }
/// `LOG_DBG`
#[macro_export]
macro_rules! log_dbg { ($($arg:tt)*) => { $crate::log::log($crate::log::LogLevel::Debug, $crate::log::VERBOSITY_DEBUG, &format!($($arg)*)) }; }
/// `LOG_CNT`: continues the previous message, shown when it was.
#[macro_export]
macro_rules! log_cnt { ($($arg:tt)*) => { $crate::log::log($crate::log::LogLevel::Cont, $crate::log::VERBOSITY_INFO, &format!($($arg)*)) }; }

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex as StdMutex};

    #[test]
    fn formats_like_common_log() {
        let f = |level, prefix, ts, colors| format_entry(level, prefix, ts, colors, "msg\n");
        assert_eq!(f(LogLevel::Info, true, None, false), "I msg\n");
        assert_eq!(f(LogLevel::Warn, true, None, false), "W msg\n");
        assert_eq!(f(LogLevel::Error, true, None, false), "E msg\n");
        assert_eq!(f(LogLevel::Debug, true, None, false), "D msg\n");
        assert_eq!(f(LogLevel::None, true, Some(5), false), "msg\n");
        assert_eq!(f(LogLevel::Cont, true, Some(5), false), "msg\n");
        assert_eq!(f(LogLevel::Info, false, Some(5), false), "msg\n");
        // 1 minute, 2 s, 34 ms, 567 us
        assert_eq!(
            f(LogLevel::Info, true, Some(62_034_567), false),
            "1.02.034.567 I msg\n"
        );
        assert_eq!(
            f(LogLevel::Info, true, Some(0), false),
            "0.00.000.000 I msg\n"
        );
        assert_eq!(
            f(LogLevel::Warn, true, Some(1), true),
            "\x1b[34m0.00.000.001\x1b[0m \x1b[35mW msg\n\x1b[0m"
        );
        assert_eq!(
            f(LogLevel::Info, true, None, true),
            "\x1b[32mI \x1b[0mmsg\n"
        );
    }

    /// One test drives the global logger so that parallel tests do not race on it.
    #[test]
    fn routes_by_verbosity_and_level() {
        let seen: Arc<StdMutex<Vec<(Stream, String)>>> = Arc::default();
        let sink = seen.clone();
        set_capture(Some(Box::new(move |s, t| {
            sink.lock().unwrap().push((s, t.to_string()))
        })));
        install_ggml_sink();
        set_prefix(true);
        set_timestamps(false);
        set_colors(false);
        let take = || std::mem::take(&mut *seen.lock().unwrap());

        set_verbosity(DEFAULT_VERBOSITY);
        crate::log_out!("out {}\n", 1);
        crate::log_err!("err\n");
        crate::log_wrn!("wrn\n");
        crate::log_inf!("inf");
        crate::log_cnt!(" more\n");
        crate::log_trc!("trc\n");
        crate::log_cnt!(" hidden continuation\n");
        crate::log_dbg!("dbg\n");
        ggml::log_info!("{}: library info\n", "llama_context");
        ggml::log_warn!("library warn\n");
        ggml::log_debug!("library debug\n");
        assert_eq!(
            take(),
            vec![
                (Stream::Stdout, "out 1\n".to_string()),
                (Stream::Stderr, "E err\n".to_string()),
                (Stream::Stderr, "W wrn\n".to_string()),
                (Stream::Stderr, "I inf".to_string()),
                (Stream::Stderr, " more\n".to_string()),
                (Stream::Stderr, "W library warn\n".to_string()),
            ]
        );

        set_verbosity(4);
        ggml::log_info!("{}: library info", "llama_context");
        ggml::log_cont!(".");
        ggml::log_debug!("library debug\n");
        assert_eq!(
            take(),
            vec![
                (Stream::Stderr, "I llama_context: library info".to_string()),
                (Stream::Stderr, ".".to_string()),
            ]
        );

        set_verbosity(i32::MAX);
        crate::log_dbg!("dbg\n");
        ggml::log_debug!("library debug\n");
        assert_eq!(take().len(), 2);

        set_verbosity(0);
        crate::log_err!("err\n");
        crate::log_out!("out\n");
        assert_eq!(take(), vec![(Stream::Stdout, "out\n".to_string())]);

        set_verbosity(DEFAULT_VERBOSITY);
        set_jsonl(true);
        crate::log_inf!("a \"q\" \\ tab\t\u{1} é\n");
        crate::log_out!("out");
        crate::log_trc!("hidden\n");
        log_json("fit_memory_breakdown", "{\"unit\":\"MiB\"}");
        assert_eq!(
            take(),
            vec![
                (
                    Stream::Stdout,
                    "{\"type\":\"log\",\"time\":0,\"level\":\"info\",\"msg\":\"a \\\"q\\\" \\\\ tab\\t\\u0001 é\\n\"}\n"
                        .to_string()
                ),
                (
                    Stream::Stdout,
                    "{\"type\":\"log\",\"time\":0,\"level\":\"none\",\"msg\":\"out\"}\n".to_string()
                ),
                (
                    Stream::Stdout,
                    "{\"type\":\"fit_memory_breakdown\",\"data\":{\"unit\":\"MiB\"}}\n".to_string()
                ),
            ]
        );
        set_jsonl(false);

        disable();
        crate::log_out!("out\n");
        assert!(take().is_empty());
        enable();
        set_capture(None);
        ggml::log::set_log_callback(None);
        set_verbosity(DEFAULT_VERBOSITY);
    }
}
