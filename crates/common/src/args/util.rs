//! The C library conversions llama.cpp's argument handlers rely on (`std::stoi`, `std::stof`,
//! `std::stoul`: a numeric prefix is enough, trailing text is ignored, no digits is an error
//! named after the function) and `string_process_escapes`.

/// Leading whitespace as `isspace` sees it.
fn skip_space(s: &str) -> &str {
    s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c'])
}

/// The longest prefix of `s` (after whitespace) that is an optionally signed decimal integer.
fn int_prefix(s: &str) -> Option<&str> {
    let t = skip_space(s);
    let b = t.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let digits_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    (i > digits_start).then(|| &t[..i])
}

/// `std::stoi`: errors are reported as "stoi", as the exception's what() is.
pub fn stoi(s: &str) -> Result<i32, String> {
    let p = int_prefix(s).ok_or_else(|| "stoi".to_string())?;
    p.parse::<i32>().map_err(|_| "stoi".to_string())
}

/// `std::stoul` (unsigned long is 64-bit here; a leading '-' wraps as strtoul does).
pub fn stoul(s: &str) -> Result<u64, String> {
    let p = int_prefix(s).ok_or_else(|| "stoul".to_string())?;
    if let Some(neg) = p.strip_prefix('-') {
        let v: u64 = neg.parse().map_err(|_| "stoul".to_string())?;
        return Ok(v.wrapping_neg());
    }
    p.trim_start_matches('+')
        .parse::<u64>()
        .map_err(|_| "stoul".to_string())
}

/// `std::stof`: a decimal or hex float prefix, "inf"/"infinity"/"nan" in any case.
pub fn stof(s: &str) -> Result<f32, String> {
    let t = skip_space(s);
    let b = t.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let rest = t[i..].to_ascii_lowercase();
    for word in ["infinity", "inf", "nan"] {
        if rest.starts_with(word) {
            let v = if word == "nan" {
                f32::NAN
            } else {
                f32::INFINITY
            };
            return Ok(if t.starts_with('-') { -v } else { v });
        }
    }
    let mut j = i;
    let mut digits = 0;
    while j < b.len() && b[j].is_ascii_digit() {
        j += 1;
        digits += 1;
    }
    if j < b.len() && b[j] == b'.' {
        j += 1;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return Err("stof".to_string());
    }
    if j < b.len() && (b[j] == b'e' || b[j] == b'E') {
        let mut k = j + 1;
        if k < b.len() && (b[k] == b'+' || b[k] == b'-') {
            k += 1;
        }
        let exp_start = k;
        while k < b.len() && b[k].is_ascii_digit() {
            k += 1;
        }
        if k > exp_start {
            j = k;
        }
    }
    let v: f64 = t[..j].parse().map_err(|_| "stof".to_string())?;
    let f = v as f32;
    if f.is_infinite() && v.is_finite() {
        // strtof sets ERANGE and stof throws out_of_range
        return Err("stof".to_string());
    }
    Ok(f)
}

pub fn is_truthy(v: &str) -> bool {
    matches!(v, "on" | "enabled" | "true" | "1")
}

pub fn is_falsey(v: &str) -> bool {
    matches!(v, "off" | "disabled" | "false" | "0")
}

pub fn is_autoy(v: &str) -> bool {
    matches!(v, "auto" | "-1")
}

fn strtol_hex2(x: [u8; 2]) -> Option<u8> {
    // strtol(x, &end, 16) consuming exactly both characters: optional whitespace/sign then hex
    let s = std::str::from_utf8(&x).ok()?;
    let t = skip_space(s);
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let v = i64::from_str_radix(digits, 16).ok()?;
    Some((if neg { -v } else { v }) as u8)
}

/// `string_process_escapes`: \n \r \t \' \" \\ and \xHH; any other escape is kept as written.
pub fn process_escapes(input: &str) -> String {
    String::from_utf8_lossy(&process_escapes_bytes(input.as_bytes())).into_owned()
}

/// `string_process_escapes` on raw bytes, for text that need not be UTF-8 (llama-tokenize's
/// prompt as the shell passed it).
pub fn process_escapes_bytes(b: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            i += 1;
            match b[i] {
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b't' => out.push(b'\t'),
                b'\'' => out.push(b'\''),
                b'"' => out.push(b'"'),
                b'\\' => out.push(b'\\'),
                b'x' if i + 2 < b.len() && strtol_hex2([b[i + 1], b[i + 2]]).is_some() => {
                    out.push(strtol_hex2([b[i + 1], b[i + 2]]).unwrap_or(0));
                    i += 2;
                }
                c => {
                    out.push(b'\\');
                    out.push(c);
                }
            }
        } else {
            out.push(b[i]);
        }
        i += 1;
    }
    out
}

/// Physical cores, as `cpu_get_num_physical_cores` counts them on Linux (distinct
/// thread-sibling sets), else the logical count.
pub fn num_physical_cores() -> i32 {
    let mut siblings = std::collections::BTreeSet::new();
    for cpu in 0.. {
        let path = format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings");
        match std::fs::read_to_string(&path) {
            Ok(s) => {
                siblings.insert(s.trim().to_string());
            }
            Err(_) => break,
        }
    }
    if !siblings.is_empty() {
        return siblings.len() as i32;
    }
    hardware_concurrency()
}

/// `std::thread::hardware_concurrency()`.
pub fn hardware_concurrency() -> i32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as i32)
        .unwrap_or(4)
}

/// arg.cpp's `parse_csv_row`: fields split at commas, a field that starts with `"` runs to the
/// closing quote (`""` inside is a quote, commas inside are kept); a quote elsewhere is literal.
pub fn parse_csv_row(input: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut in_quotes = false;
    let mut chars = input.chars().peekable();
    while let Some(ch) = chars.next() {
        match ch {
            '"' if !in_quotes => {
                if field.is_empty() {
                    in_quotes = true;
                } else {
                    field.push('"');
                }
            }
            '"' => {
                if chars.peek() == Some(&'"') {
                    field.push('"');
                    chars.next();
                } else {
                    in_quotes = false;
                }
            }
            ',' if !in_quotes => fields.push(std::mem::take(&mut field)),
            c => field.push(c),
        }
    }
    fields.push(field);
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_row_splits_as_arg_cpp() {
        assert_eq!(parse_csv_row("a,b"), ["a", "b"]);
        assert_eq!(parse_csv_row(""), [""]);
        assert_eq!(parse_csv_row("a,"), ["a", ""]);
        assert_eq!(parse_csv_row("\"x,y\",z"), ["x,y", "z"]);
        assert_eq!(parse_csv_row("\"say \"\"hi\"\"\""), ["say \"hi\""]);
        // a quote inside an unquoted field is a literal character
        assert_eq!(parse_csv_row("a\"b,c"), ["a\"b", "c"]);
    }

    #[test]
    fn stoi_takes_a_numeric_prefix() {
        assert_eq!(stoi("42"), Ok(42));
        assert_eq!(stoi("  -7xyz"), Ok(-7));
        assert_eq!(stoi("+3"), Ok(3));
        assert_eq!(stoi("abc"), Err("stoi".into()));
        assert_eq!(stoi(""), Err("stoi".into()));
        assert_eq!(stoi("99999999999"), Err("stoi".into()));
    }

    #[test]
    fn stof_parses_like_strtof() {
        assert_eq!(stof("0.8"), Ok(0.8));
        assert_eq!(stof("1e-3x"), Ok(0.001));
        assert_eq!(stof(".5"), Ok(0.5));
        assert_eq!(stof("2."), Ok(2.0));
        assert_eq!(stof("-inf"), Ok(f32::NEG_INFINITY));
        assert_eq!(stof("1e"), Ok(1.0));
        assert_eq!(stof("x"), Err("stof".into()));
        assert_eq!(stof("1e99"), Err("stof".into()));
    }

    #[test]
    fn stoul_wraps_negative() {
        assert_eq!(stoul("5"), Ok(5));
        assert_eq!(stoul("-1"), Ok(u64::MAX));
        assert_eq!(stoul("q"), Err("stoul".into()));
    }

    #[test]
    fn escapes_follow_string_process_escapes() {
        assert_eq!(process_escapes(r"a\nb\tc\\d\'\x41"), "a\nb\tc\\d'A");
        assert_eq!(process_escapes(r"\q"), r"\q");
        assert_eq!(process_escapes(r"end\"), r"end\");
        // \x needs two more characters after it
        assert_eq!(process_escapes(r"\x4"), r"\x4");
        assert_eq!(process_escapes(r"\xzz"), r"\xzz");
    }

    #[test]
    fn byte_escapes_keep_non_utf8() {
        let p = process_escapes_bytes;
        assert_eq!(p(br"a\nb\tc\\d\q"), b"a\nb\tc\\d\\q");
        assert_eq!(p(br"\xff\x41\x4"), b"\xffA\\x4");
        assert_eq!(p(br"\x 5\x+5\x-1\x0x"), b"\x05\x05\xff\\x0x");
        assert_eq!(p(b"end\\"), b"end\\");
    }

    #[test]
    fn truthiness() {
        assert!(is_truthy("on") && is_truthy("1") && !is_truthy("yes"));
        assert!(is_falsey("disabled") && is_falsey("0"));
        assert!(is_autoy("auto") && is_autoy("-1"));
    }
}
