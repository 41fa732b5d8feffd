//! The user's turns from stdin, as console.cpp's readline_simple reads them: a trailing '\'
//! asks for another line (with `-mli`, the roles of '\' and plain Return are swapped); '/'
//! returns control without a newline. Lines are bytes: one that is not valid UTF-8 is decoded
//! with U+FFFD and a warning, and the turn goes on; only the end of stdin ends the chat.

use std::io::{BufRead, ErrorKind};

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

/// Counts the lines read, for the warnings.
#[derive(Default)]
pub struct Reader {
    n_lines: usize,
}

enum Line {
    Bytes(Vec<u8>),
    Eof,
    Interrupted,
}

impl Reader {
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
            if line.ends_with('\n') {
                line.pop();
            }
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
