//! A guard in front of minijinja's two string formatters (the `format` filter, printf style,
//! and pycompat's `str.format`). minijinja 3.1.0 reads a mapping key (`%(key)s`, or
//! `{x[key]}`) one byte at a time and slices the string at each byte, so a key holding a
//! non-ASCII character panics inside the crate. Templates pass such keys nowhere in
//! llama.cpp's models/templates; a format string that has one is refused with an error, as
//! minijinja refuses other format strings it cannot read, instead of panicking.

use minijinja::value::{Rest, ValueOrKwargs};
use minijinja::{Error, ErrorKind, State, Value};

/// Where `str.format`'s field `{...}` holds an index key `[...]` with a non-ASCII character.
fn str_format_key_is_unsafe(s: &str) -> bool {
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '{' {
            continue;
        }
        if chars.peek() == Some(&'{') {
            chars.next();
            continue;
        }
        // inside a replacement field, up to its `}`
        while let Some(c) = chars.next() {
            match c {
                '}' => break,
                '[' => {
                    for c in chars.by_ref() {
                        if c == ']' {
                            break;
                        }
                        if !c.is_ascii() {
                            return true;
                        }
                    }
                }
                _ => {}
            }
        }
    }
    false
}

/// Where a printf-style `%(...)` mapping key holds a non-ASCII character.
fn printf_key_is_unsafe(s: &str) -> bool {
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            continue;
        }
        match chars.peek() {
            Some('%') => {
                chars.next();
            }
            Some('(') => {
                chars.next();
                for c in chars.by_ref() {
                    if c == ')' {
                        break;
                    }
                    if !c.is_ascii() {
                        return true;
                    }
                }
            }
            _ => {}
        }
    }
    false
}

fn refusal() -> Error {
    Error::new(
        ErrorKind::InvalidOperation,
        "format keys with non-ASCII characters are not supported",
    )
}

/// The `format` filter: minijinja's, refusing what would panic in it.
pub(super) fn format_filter(
    state: &mut State,
    format_str: &Value,
    args: Rest<ValueOrKwargs>,
) -> Result<Value, Error> {
    if format_str.as_str().is_some_and(printf_key_is_unsafe) {
        return Err(refusal());
    }
    minijinja::filters::format(state, format_str, args)
}

/// pycompat's method callback (Python's str and dict methods), refusing a `str.format`
/// that would panic in it.
pub(super) fn unknown_method(
    state: &mut State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    if method == "format" && value.as_str().is_some_and(str_format_key_is_unsafe) {
        return Err(refusal());
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_would_panic_are_found_and_others_pass() {
        assert!(str_format_key_is_unsafe("{x[\u{ff5c}]}"));
        assert!(str_format_key_is_unsafe("a {0[b\u{e9}]:>3}"));
        assert!(!str_format_key_is_unsafe("{x[a]} \u{ff5c} [\u{e9}]"));
        assert!(!str_format_key_is_unsafe("{{[\u{e9}]}}"));
        assert!(!str_format_key_is_unsafe("{}, {name}! \u{65e5}"));
        assert!(printf_key_is_unsafe("%(\u{ff5c})s"));
        assert!(!printf_key_is_unsafe("%%(\u{ff5c})s %s \u{e9}"));
        assert!(!printf_key_is_unsafe("%(name)s \u{e9}"));
    }
}
