//! Repetitions and integer ranges as grammar text (`build_repetition`, `build_min_max_int`):
//! an integer range becomes alternatives of digit ranges, digit by digit, as llama.cpp writes
//! them.

/// `item{min,max}` in its shortest GBNF form; `max == i32::MAX` is unbounded. With a
/// separator, items are joined by it.
pub(crate) fn build_repetition(item: &str, min: i32, max: i32, separator: &str) -> String {
    let has_max = max != i32::MAX;
    if max == 0 {
        return String::new();
    }
    if min == 0 && max == 1 {
        return format!("{item}?");
    }
    if separator.is_empty() {
        if min == 1 && !has_max {
            return format!("{item}+");
        }
        if min == 0 && !has_max {
            return format!("{item}*");
        }
        let max_s = if has_max {
            max.to_string()
        } else {
            String::new()
        };
        return format!("{item}{{{min},{max_s}}}");
    }
    let inner = build_repetition(
        &format!("({separator} {item})"),
        if min == 0 { 0 } else { min - 1 },
        if has_max { max - 1 } else { max },
        "",
    );
    let result = format!("{item} {inner}");
    if min == 0 {
        format!("({result})?")
    } else {
        result
    }
}

fn digit_range(out: &mut String, from: u8, to: u8) {
    out.push('[');
    out.push(from as char);
    if from != to {
        out.push('-');
        out.push(to as char);
    }
    out.push(']');
}

fn more_digits(out: &mut String, min: i32, max: i32) {
    out.push_str("[0-9]");
    if min == max && min == 1 {
        return;
    }
    out.push('{');
    out.push_str(&min.to_string());
    if max != min {
        out.push(',');
        if max != i32::MAX {
            out.push_str(&max.to_string());
        }
    }
    out.push('}');
}

/// Every number with as many digits as `from` and `to` (equal lengths), from `from` to `to`.
fn uniform_range(out: &mut String, from: &[u8], to: &[u8]) {
    let mut i = 0;
    while i < from.len() && i < to.len() && from[i] == to[i] {
        i += 1;
    }
    if i > 0 {
        out.push('"');
        out.push_str(std::str::from_utf8(&from[..i]).unwrap_or_default());
        out.push('"');
    }
    if i < from.len() && i < to.len() {
        if i > 0 {
            out.push(' ');
        }
        let sub_len = from.len() - i - 1;
        if sub_len > 0 {
            let from_sub = &from[i + 1..];
            let to_sub = &to[i + 1..];
            let zeros = vec![b'0'; sub_len];
            let nines = vec![b'9'; sub_len];
            let mut to_reached = false;
            out.push('(');
            if from_sub == zeros.as_slice() {
                digit_range(out, from[i], to[i] - 1);
                out.push(' ');
                more_digits(out, sub_len as i32, sub_len as i32);
            } else {
                out.push('[');
                out.push(from[i] as char);
                out.push_str("] (");
                uniform_range(out, from_sub, &nines);
                out.push(')');
                if from[i] < to[i] - 1 {
                    out.push_str(" | ");
                    if to_sub == nines.as_slice() {
                        digit_range(out, from[i] + 1, to[i]);
                        to_reached = true;
                    } else {
                        digit_range(out, from[i] + 1, to[i] - 1);
                    }
                    out.push(' ');
                    more_digits(out, sub_len as i32, sub_len as i32);
                }
            }
            if !to_reached {
                out.push_str(" | ");
                digit_range(out, to[i], to[i]);
                out.push(' ');
                uniform_range(out, &zeros, to_sub);
            }
            out.push(')');
        } else {
            out.push('[');
            out.push(from[i] as char);
            out.push('-');
            out.push(to[i] as char);
            out.push(']');
        }
    }
}

/// The integers from `min` to `max` (i64::MIN / i64::MAX: unbounded on that side), at most
/// `decimals_left` digits long where unbounded.
pub(crate) fn build_min_max_int(
    mut min: i64,
    max: i64,
    out: &mut String,
    decimals_left: i32,
    top_level: bool,
) -> Result<(), String> {
    let has_min = min != i64::MIN;
    let has_max = max != i64::MAX;

    if has_min && has_max {
        if min < 0 && max < 0 {
            out.push_str("\"-\" (");
            build_min_max_int(
                max.wrapping_neg(),
                min.wrapping_neg(),
                out,
                decimals_left,
                true,
            )?;
            out.push(')');
            return Ok(());
        }
        if min < 0 {
            out.push_str("\"-\" (");
            build_min_max_int(0, min.wrapping_neg(), out, decimals_left, true)?;
            out.push_str(") | ");
            min = 0;
        }
        let mut min_s = min.to_string().into_bytes();
        let max_s = max.to_string().into_bytes();
        for digits in min_s.len()..max_s.len() {
            uniform_range(out, &min_s, &vec![b'9'; digits]);
            min_s = format!("1{}", "0".repeat(digits)).into_bytes();
            out.push_str(" | ");
        }
        uniform_range(out, &min_s, &max_s);
        return Ok(());
    }

    let less_decimals = (decimals_left - 1).max(1);

    if has_min {
        if min < 0 {
            out.push_str("\"-\" (");
            build_min_max_int(i64::MIN, min.wrapping_neg(), out, decimals_left, false)?;
            out.push_str(") | [0] | [1-9] ");
            more_digits(out, 0, decimals_left - 1);
        } else if min == 0 {
            if top_level {
                out.push_str("[0] | [1-9] ");
                more_digits(out, 0, less_decimals);
            } else {
                more_digits(out, 1, decimals_left);
            }
        } else if min <= 9 {
            let c = b'0' + min as u8;
            let range_start = if top_level { b'1' } else { b'0' };
            if c > range_start {
                digit_range(out, range_start, c - 1);
                out.push(' ');
                more_digits(out, 1, less_decimals);
                out.push_str(" | ");
            }
            digit_range(out, c, b'9');
            out.push(' ');
            more_digits(out, 0, less_decimals);
        } else {
            let min_s = min.to_string().into_bytes();
            let len = min_s.len() as i32;
            let c = min_s[0];
            if c > b'1' {
                digit_range(out, if top_level { b'1' } else { b'0' }, c - 1);
                out.push(' ');
                more_digits(out, len, less_decimals);
                out.push_str(" | ");
            }
            digit_range(out, c, c);
            out.push_str(" (");
            let rest: i64 = std::str::from_utf8(&min_s[1..])
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            build_min_max_int(rest, i64::MAX, out, less_decimals, false)?;
            out.push(')');
            if c < b'9' {
                out.push_str(" | ");
                digit_range(out, c + 1, b'9');
                out.push(' ');
                more_digits(out, len - 1, less_decimals);
            }
        }
        return Ok(());
    }

    if has_max {
        if max >= 0 {
            if top_level {
                out.push_str("\"-\" [1-9] ");
                more_digits(out, 0, less_decimals);
                out.push_str(" | ");
            }
            build_min_max_int(0, max, out, decimals_left, true)?;
        } else {
            out.push_str("\"-\" (");
            build_min_max_int(max.wrapping_neg(), i64::MAX, out, decimals_left, false)?;
            out.push(')');
        }
        return Ok(());
    }

    Err("At least one of min_value or max_value must be set".into())
}
