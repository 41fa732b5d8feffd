//! `_visit_pattern` / `_pattern_to_rule`: a `^...$` regular expression of a string schema as a
//! GBNF rule. What GBNF cannot say (look-around, anchors inside, unknown escapes) falls back to
//! any string with a warning; a malformed regex is an error. The pattern is read byte by byte,
//! as llama.cpp reads it.

use std::collections::HashMap;

use super::converter::{primitive, Converter};
use super::int_range::build_repetition;

const MAX_PATTERN_DEPTH: i32 = 100;

enum PatternError {
    /// A valid regex with no grammar equivalent.
    Unsupported(String),
    /// Not a valid regex.
    Invalid(String),
}

fn is_non_literal(c: u8) -> bool {
    b"|.()[]{}*+?^$".contains(&c)
}

fn escaped_in_regexps_but_not_in_literals(c: u8) -> bool {
    b"^$.[]()|{}*+?".contains(&c)
}

/// `gbnf_escape_length`: how long the escape at `pos` is if GBNF's parser reads it too.
fn gbnf_escape_length(p: &[u8], pos: usize) -> usize {
    if pos + 1 >= p.len() || p[pos] != b'\\' {
        return 0;
    }
    let n_hex = match p[pos + 1] {
        b'x' => 2,
        b'u' => 4,
        b'U' => 8,
        b't' | b'r' | b'n' | b'\\' | b'"' | b'[' | b']' | b'-' => return 2,
        _ => return 0,
    };
    if pos + 2 + n_hex > p.len() {
        return 0;
    }
    if p[pos + 2..pos + 2 + n_hex]
        .iter()
        .all(|h| h.is_ascii_hexdigit())
    {
        2 + n_hex
    } else {
        0
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A piece of the sequence: text and whether it is a literal still to be quoted.
type Item = (Vec<u8>, bool);

fn to_rule(item: &Item) -> Vec<u8> {
    if item.1 {
        let mut v = Vec::with_capacity(item.0.len() + 2);
        v.push(b'"');
        v.extend_from_slice(&item.0);
        v.push(b'"');
        v
    } else {
        item.0.clone()
    }
}

struct PatternState<'p> {
    p: &'p [u8],
    i: usize,
    paren_depth: i32,
    sub_rule_ids: HashMap<Vec<u8>, String>,
    name: String,
}

impl Converter<'_> {
    pub(crate) fn visit_pattern(&mut self, pattern: &str, name: &str) -> String {
        let snapshot = self.rules.clone();
        match self.pattern_to_rule(pattern, name) {
            Ok(r) => r,
            Err(PatternError::Unsupported(what)) => {
                self.rules = snapshot;
                self.warnings.push(format!(
                    "pattern {pattern} is not supported ({what}), accepting any string"
                ));
                let string = primitive("string").map(|r| self.add_primitive("string", r));
                self.add_rule(name, &string.unwrap_or_default())
            }
            Err(PatternError::Invalid(what)) => {
                self.rules = snapshot;
                self.errors
                    .push(format!("Invalid pattern {pattern}: {what}"));
                String::new()
            }
        }
    }

    fn pattern_to_rule(&mut self, pattern: &str, name: &str) -> Result<String, PatternError> {
        let b = pattern.as_bytes();
        if b.len() < 2 || b[0] != b'^' || b[b.len() - 1] != b'$' {
            return Err(PatternError::Unsupported(
                "not anchored with '^' and '$'".into(),
            ));
        }
        let mut st = PatternState {
            p: &b[1..b.len() - 1],
            i: 0,
            paren_depth: 0,
            sub_rule_ids: HashMap::new(),
            name: name.to_string(),
        };
        let item = self.transform(&mut st)?;
        let rule = to_rule(&item);
        if st.paren_depth != 0 {
            return Err(PatternError::Invalid("unbalanced parentheses".into()));
        }
        Ok(self.add_rule(name, &format!("\"\\\"\" ({}) \"\\\"\"", lossy(&rule))))
    }

    fn get_dot(&mut self) -> Vec<u8> {
        let rule = if self.dotall {
            "[\\U00000000-\\U0010FFFF]"
        } else {
            "[^\\x0A\\x0D]"
        };
        self.add_rule("dot", rule).into_bytes()
    }

    /// Consecutive literals merged, then everything joined by spaces.
    fn join_seq(seq: &[Item]) -> Item {
        let mut ret: Vec<Item> = Vec::new();
        let mut literal: Vec<u8> = Vec::new();
        for item in seq {
            if item.1 {
                literal.extend_from_slice(&item.0);
            } else {
                if !literal.is_empty() {
                    ret.push((std::mem::take(&mut literal), true));
                }
                ret.push(item.clone());
            }
        }
        if !literal.is_empty() {
            ret.push((literal, true));
        }
        let mut out = Vec::new();
        for (i, item) in ret.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.extend_from_slice(&to_rule(item));
        }
        (out, false)
    }

    fn transform(&mut self, st: &mut PatternState) -> Result<Item, PatternError> {
        let p = st.p;
        let length = p.len();
        let mut seq: Vec<Item> = Vec::new();
        while st.i < length {
            let c = p[st.i];
            match c {
                b'.' => {
                    let dot = self.get_dot();
                    seq.push((dot, false));
                    st.i += 1;
                }
                b'(' => {
                    st.i += 1;
                    if st.i < length && p[st.i] == b'?' {
                        if st.i + 1 < length && p[st.i + 1] == b':' {
                            st.i += 2;
                        } else {
                            return Err(PatternError::Unsupported(
                                "unsupported group syntax".into(),
                            ));
                        }
                    }
                    st.paren_depth += 1;
                    if st.paren_depth > MAX_PATTERN_DEPTH {
                        return Err(PatternError::Unsupported("pattern nesting too deep".into()));
                    }
                    let inner = self.transform(st)?;
                    let mut v = b"(".to_vec();
                    v.extend_from_slice(&to_rule(&inner));
                    v.push(b')');
                    seq.push((v, false));
                }
                b')' => {
                    st.i += 1;
                    if st.paren_depth == 0 {
                        return Err(PatternError::Invalid("unbalanced parentheses".into()));
                    }
                    st.paren_depth -= 1;
                    return Ok(Self::join_seq(&seq));
                }
                b'^' | b'$' => {
                    return Err(PatternError::Unsupported(
                        "anchor inside the pattern".into(),
                    ))
                }
                b'[' => {
                    let mut sq = vec![c];
                    st.i += 1;
                    while st.i < length && p[st.i] != b']' {
                        if p[st.i] == b'\\' {
                            let n = gbnf_escape_length(p, st.i);
                            if n == 0 {
                                let end = (st.i + 2).min(length);
                                return Err(PatternError::Unsupported(format!(
                                    "unsupported escape in character class: {}",
                                    lossy(&p[st.i..end])
                                )));
                            }
                            sq.extend_from_slice(&p[st.i..st.i + n]);
                            st.i += n;
                        } else {
                            sq.push(p[st.i]);
                            st.i += 1;
                        }
                    }
                    if st.i >= length {
                        return Err(PatternError::Invalid("unterminated character class".into()));
                    }
                    sq.push(b']');
                    st.i += 1;
                    seq.push((sq, false));
                }
                b'|' => {
                    seq.push((b"|".to_vec(), false));
                    st.i += 1;
                }
                b'*' | b'+' | b'?' => {
                    let Some(last) = seq.last_mut() else {
                        return Err(PatternError::Invalid("nothing to repeat".into()));
                    };
                    let mut v = to_rule(last);
                    v.push(c);
                    *last = (v, false);
                    st.i += 1;
                }
                b'{' => {
                    let mut curly = vec![c];
                    st.i += 1;
                    while st.i < length && p[st.i] != b'}' {
                        curly.push(p[st.i]);
                        st.i += 1;
                    }
                    if st.i >= length {
                        return Err(PatternError::Unsupported(
                            "unterminated curly brackets".into(),
                        ));
                    }
                    st.i += 1;
                    let inner = lossy(&curly[1..]);
                    let nums: Vec<&str> = inner.split(',').collect();
                    if nums.len() != 1 && nums.len() != 2 {
                        return Err(PatternError::Unsupported(
                            "wrong number of values in curly brackets".into(),
                        ));
                    }
                    let bad =
                        || PatternError::Unsupported("invalid number in curly brackets".into());
                    let (min_times, max_times) = if nums.len() == 1 {
                        let n = stoi(nums[0]).ok_or_else(bad)?;
                        (n, n)
                    } else {
                        let min = if nums[0].is_empty() {
                            0
                        } else {
                            stoi(nums[0]).ok_or_else(bad)?
                        };
                        let max = if nums[1].is_empty() {
                            i32::MAX
                        } else {
                            stoi(nums[1]).ok_or_else(bad)?
                        };
                        (min, max)
                    };
                    if seq.is_empty() {
                        return Err(PatternError::Invalid("nothing to repeat".into()));
                    }
                    let last = seq.len() - 1;
                    let (sub, sub_is_literal) = seq[last].clone();
                    let item = if sub_is_literal {
                        format!("\"{}\"", lossy(&sub))
                    } else {
                        let n = st.sub_rule_ids.len();
                        let id = match st.sub_rule_ids.get(&sub) {
                            Some(id) => id.clone(),
                            None => {
                                let id =
                                    self.add_rule(&format!("{}-{}", st.name, n + 1), &lossy(&sub));
                                st.sub_rule_ids.insert(sub.clone(), id.clone());
                                id
                            }
                        };
                        id
                    };
                    seq[last] = (
                        build_repetition(&item, min_times, max_times, "").into_bytes(),
                        false,
                    );
                }
                _ => {
                    let mut literal: Vec<u8> = Vec::new();
                    while st.i < length {
                        let ch = p[st.i];
                        if ch == b'\\' {
                            if st.i == length - 1 {
                                return Err(PatternError::Invalid("trailing backslash".into()));
                            }
                            let next = p[st.i + 1];
                            if escaped_in_regexps_but_not_in_literals(next) {
                                st.i += 1;
                                literal.push(p[st.i]);
                                st.i += 1;
                            } else {
                                let n = gbnf_escape_length(p, st.i);
                                if n == 0 {
                                    return Err(PatternError::Unsupported(format!(
                                        "unsupported escape: {}",
                                        lossy(&p[st.i..st.i + 2])
                                    )));
                                }
                                literal.extend_from_slice(&p[st.i..st.i + n]);
                                st.i += n;
                            }
                        } else if ch == b'"' {
                            literal.extend_from_slice(b"\\\"");
                            st.i += 1;
                        } else if !is_non_literal(ch)
                            && (st.i == length - 1
                                || literal.is_empty()
                                || p[st.i + 1] == b'.'
                                || !is_non_literal(p[st.i + 1]))
                        {
                            literal.push(ch);
                            st.i += 1;
                        } else {
                            break;
                        }
                    }
                    if literal.is_empty() {
                        return Err(PatternError::Unsupported(format!(
                            "unsupported character: {}",
                            c as char
                        )));
                    }
                    seq.push((literal, true));
                }
            }
        }
        Ok(Self::join_seq(&seq))
    }
}

/// `std::stoi`: leading whitespace, an optional sign, digits; the rest ignored.
fn stoi(s: &str) -> Option<i32> {
    let t = s.trim_start();
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let end = digits
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    if end == 0 {
        return None;
    }
    let v: i64 = digits[..end].parse().ok()?;
    let v = if neg { -v } else { v };
    i32::try_from(v).ok()
}
