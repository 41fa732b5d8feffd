//! The user's turns from stdin, as console.cpp's readline_simple reads them: a trailing '\'
//! asks for another line (with `-mli`, the roles of '\' and plain Return are swapped); '/'
//! returns control without a newline. Lines are bytes: one that is not valid UTF-8 is decoded
//! with U+FFFD and a warning, and the turn goes on; only the end of stdin ends the chat.
//!
//! Without `--simple-io`, llama.cpp reads through console.cpp's readline_advanced, which turns
//! the terminal's echo off and writes each character it reads itself: to /dev/tty, or to
//! stdout where there is no terminal. When stdin is not a terminal (piped input) the typed
//! text therefore reaches the terminal or stdout only through that echo; this reader writes
//! the same bytes ([`echo_of`]) to the same place. On a terminal the terminal echoes.

use std::fs::File;
use std::io::{BufRead, ErrorKind, IsTerminal, Write};

use common::log_wrn;

use crate::interrupt;

const F: &str = "llama_completion";

pub enum Input {
    /// what the user typed: its lines, each ending with '\n' (a line "\n" alone: an empty
    /// line, which passes control back)
    Text(String),
    /// stdin ended (or cannot be read) before anything was typed
    Eof,
    /// Ctrl+C stopped the run while it waited for input
    Interrupted,
}

/// Where readline_advanced's echo of what it reads goes.
enum Echo {
    /// `--simple-io`, or stdin is a terminal (which echoes itself)
    None,
    Tty(File),
    /// no terminal: the caller writes [`Reader::take_echo`] to stdout, in its order
    Stdout(String),
}

/// Counts the lines read, for the warnings; echoes them as llama.cpp's console does.
pub struct Reader {
    n_lines: usize,
    echo: Echo,
}

enum Line {
    Bytes(Vec<u8>),
    Eof,
    Interrupted,
}

impl Reader {
    pub fn new(simple_io: bool) -> Reader {
        let echo = if simple_io || std::io::stdin().is_terminal() {
            Echo::None
        } else {
            match std::fs::OpenOptions::new().write(true).open("/dev/tty") {
                Ok(f) => Echo::Tty(f),
                Err(_) => Echo::Stdout(String::new()),
            }
        };
        Reader { n_lines: 0, echo }
    }

    /// The echo of the last read, for stdout (empty unless the echo goes there).
    pub fn take_echo(&mut self) -> String {
        match &mut self.echo {
            Echo::Stdout(s) => std::mem::take(s),
            _ => String::new(),
        }
    }

    fn echo(&mut self, line: &str, ended: bool) {
        match &mut self.echo {
            Echo::None => {}
            Echo::Tty(f) => {
                // the terminal is a courtesy copy: a failed write changes nothing read
                let _ = f.write_all(echo_of(line, ended).as_bytes());
                let _ = f.flush();
            }
            Echo::Stdout(s) => s.push_str(&echo_of(line, ended)),
        }
    }

    pub fn read(&mut self, multiline: bool) -> Input {
        let mut buffer = String::new();
        loop {
            let bytes = match read_line(&mut std::io::stdin().lock()) {
                Line::Bytes(b) => b,
                // as readline_simple: what was typed before the end still counts
                Line::Eof if buffer.is_empty() => return Input::Eof,
                Line::Eof => return Input::Text(buffer),
                Line::Interrupted => return Input::Interrupted,
            };
            self.n_lines += 1;
            let (mut line, n_bad) = decode_lossy(&bytes);
            if n_bad > 0 {
                log_wrn!(
                    "{F}: warning: input line {} is not valid UTF-8: {} byte{} replaced with U+FFFD\n",
                    self.n_lines,
                    n_bad,
                    if n_bad == 1 { "" } else { "s" }
                );
            }
            let ended = line.ends_with('\n');
            if ended {
                line.pop();
            }
            self.echo(&line, ended);
            let mut another = multiline;
            if line.ends_with('\\') {
                line.pop();
                another = !multiline;
            } else if line.ends_with('/') {
                // readline_simple turns the '/' into the newline the caller then drops
                line.pop();
                buffer.push_str(&line);
                buffer.push('\n');
                return Input::Text(buffer);
            }
            buffer.push_str(&line);
            buffer.push('\n');
            if !another {
                return Input::Text(buffer);
            }
        }
    }
}

/// What readline_advanced writes while it reads `line` (without its newline; `ended`: the
/// newline came, rather than the end of input): each character as it comes, a trailing '\\'
/// or '/' marked by writing it again after a backspace (and again before the next character),
/// at the end such a mark wiped ("\x08 \x08") and a newline after a plain line or a '\\'.
fn echo_of(line: &str, ended: bool) -> String {
    let mut out = String::new();
    let mut special = false;
    let mut last = None;
    for c in line.chars() {
        if special {
            out.push('\x08');
            out.extend(last);
            special = false;
        }
        out.push(c);
        if c == '\\' || c == '/' {
            out.push('\x08');
            out.push(c);
            special = true;
        }
        last = Some(c);
    }
    if special {
        out.push_str("\x08 \x08");
        if last == Some('\\') {
            out.push('\n');
        }
    } else if ended {
        out.push('\n');
    }
    out
}

/// One line with its '\n' (none at the end of the input). A Ctrl+C that stops the run ends
/// the wait (the handler has no SA_RESTART, so the read returns EINTR).
fn read_line(r: &mut impl BufRead) -> Line {
    let mut line = Vec::new();
    loop {
        if interrupt::stop_requested() {
            return Line::Interrupted;
        }
        let (done, used) = match r.fill_buf() {
            Ok([]) => {
                return if line.is_empty() {
                    Line::Eof
                } else {
                    Line::Bytes(line)
                };
            }
            Ok(buf) => match buf.iter().position(|&c| c == b'\n') {
                Some(i) => {
                    line.extend_from_slice(&buf[..=i]);
                    (true, i + 1)
                }
                None => {
                    line.extend_from_slice(buf);
                    (false, buf.len())
                }
            },
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                log_wrn!("{F}: warning: cannot read stdin ({e}): taking it as the end of input\n");
                return if line.is_empty() {
                    Line::Eof
                } else {
                    Line::Bytes(line)
                };
            }
        };
        r.consume(used);
        if done {
            return Line::Bytes(line);
        }
    }
}

/// The bytes as text, each byte where no valid UTF-8 character starts replaced with U+FFFD,
/// as llama.cpp's tokenizer reads them (unicode_cpts_from_utf8); and how many were replaced.
fn decode_lossy(mut b: &[u8]) -> (String, usize) {
    let mut s = String::with_capacity(b.len());
    let mut n_bad = 0;
    loop {
        match std::str::from_utf8(b) {
            Ok(t) => {
                s.push_str(t);
                return (s, n_bad);
            }
            Err(e) => {
                let (good, rest) = b.split_at(e.valid_up_to());
                s.push_str(std::str::from_utf8(good).unwrap_or_default());
                s.push('\u{FFFD}');
                n_bad += 1;
                b = &rest[1..];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_bytes_become_one_replacement_each() {
        assert_eq!(decode_lossy(b"plain"), ("plain".to_string(), 0));
        assert_eq!(decode_lossy(b"a\xffb"), ("a\u{FFFD}b".to_string(), 1));
        // a truncated 3-byte character: its lead and its continuation byte, one each
        assert_eq!(
            decode_lossy(b"\xe2\x82A\xc3\xa9"),
            ("\u{FFFD}\u{FFFD}Aé".to_string(), 2)
        );
        assert_eq!(decode_lossy(b"end\xf0"), ("end\u{FFFD}".to_string(), 1));
    }

    #[test]
    fn the_echo_is_readline_advanced_s() {
        assert_eq!(echo_of("hi", true), "hi\n");
        assert_eq!(echo_of("hi", false), "hi");
        assert_eq!(echo_of("", true), "\n");
        assert_eq!(echo_of("a\\", true), "a\\\x08\\\x08 \x08\n");
        assert_eq!(echo_of("a/", true), "a/\x08/\x08 \x08");
        assert_eq!(echo_of("a/b", true), "a/\x08/\x08/b\n");
    }

    #[test]
    fn lines_keep_their_newline_and_the_last_may_lack_one() {
        let mut r = std::io::BufReader::with_capacity(4, &b"one\n\xfftwo\nlast"[..]);
        let mut got = Vec::new();
        loop {
            match read_line(&mut r) {
                Line::Bytes(b) => got.push(b),
                Line::Eof => break,
                Line::Interrupted => panic!("no signal was sent"),
            }
        }
        assert_eq!(
            got,
            [b"one\n".to_vec(), b"\xfftwo\n".to_vec(), b"last".to_vec()]
        );
    }
}
