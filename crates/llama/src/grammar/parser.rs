//! `llama_grammar_parser`: GBNF text to rules. Symbol ids are kept in name order (llama.cpp's
//! `std::map`), so tests and printing see the same order; the text is read as if NUL-terminated
//! (a NUL byte ends it), which is how llama.cpp reads it.

use std::collections::BTreeMap;

use super::state::GrammarVocab;
use super::{Element, GrammarError, GreType, Rule};

/// llama.cpp's `MAX_REPETITION_THRESHOLD`: the most copies a repetition may make.
const MAX_REPETITION_THRESHOLD: u64 = 2000;

/// How deep groups may nest. llama.cpp recurses without a limit and overflows its stack on
/// deep enough input; this refuses it instead.
const MAX_NESTING: usize = 512;

/// The parsed grammar: rules indexed by symbol id, and the symbol names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParsedGrammar {
    pub symbol_ids: BTreeMap<String, u32>,
    pub rules: Vec<Rule>,
}

/// Parse GBNF text. `vocab` resolves `<token>` references by tokenizing them; without one only
/// `<[id]>` tokens parse.
pub fn parse(src: &str, vocab: Option<&dyn GrammarVocab>) -> Result<ParsedGrammar, GrammarError> {
    let bytes = src.as_bytes();
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let mut p = Parser {
        src: &bytes[..end],
        vocab,
        out: ParsedGrammar::default(),
        depth: 0,
    };
    p.parse_all()?;
    Ok(p.out)
}

struct Parser<'a> {
    src: &'a [u8],
    vocab: Option<&'a dyn GrammarVocab>,
    out: ParsedGrammar,
    depth: usize,
}

fn is_digit_char(c: u8) -> bool {
    c.is_ascii_digit()
}

fn is_word_char(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'-' || is_digit_char(c)
}

type Res<T> = Result<T, GrammarError>;

impl<'a> Parser<'a> {
    /// The byte at `i`, 0 past the end (the C string's terminator).
    fn at(&self, i: usize) -> u8 {
        self.src.get(i).copied().unwrap_or(0)
    }

    /// The rest of the text from `i`, as llama.cpp appends it to its messages.
    fn rest(&self, i: usize) -> String {
        String::from_utf8_lossy(self.src.get(i..).unwrap_or_default()).into_owned()
    }

    fn err_at(&self, what: &str, i: usize) -> GrammarError {
        GrammarError::new(format!("{what}{}", self.rest(i)))
    }

    fn parse_space(&self, mut pos: usize, newline_ok: bool) -> usize {
        loop {
            let c = self.at(pos);
            if c == b'#' {
                while !matches!(self.at(pos), 0 | b'\r' | b'\n') {
                    pos += 1;
                }
            } else if c == b' ' || c == b'\t' || (newline_ok && (c == b'\r' || c == b'\n')) {
                pos += 1;
            } else {
                return pos;
            }
        }
    }

    fn parse_name(&self, src: usize) -> Res<usize> {
        let mut pos = src;
        while is_word_char(self.at(pos)) {
            pos += 1;
        }
        if pos == src {
            return Err(self.err_at("expecting name at ", src));
        }
        Ok(pos)
    }

    fn parse_int(&self, src: usize) -> Res<usize> {
        let mut pos = src;
        while is_digit_char(self.at(pos)) {
            pos += 1;
        }
        if pos == src {
            return Err(self.err_at("expecting integer at ", src));
        }
        Ok(pos)
    }

    /// `std::stoull` of the digits in `[start, end)`; its overflow message is the function name.
    fn digits_u64(&self, start: usize, end: usize, func: &str) -> Res<u64> {
        std::str::from_utf8(&self.src[start..end])
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| GrammarError::new(func))
    }

    fn parse_hex(&self, src: usize, size: usize) -> Res<(u32, usize)> {
        let mut pos = src;
        let end = src + size;
        let mut value: u32 = 0;
        while pos < end && self.at(pos) != 0 {
            let c = self.at(pos);
            let d = match c {
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                b'0'..=b'9' => c - b'0',
                _ => break,
            };
            value = (value << 4).wrapping_add(d as u32);
            pos += 1;
        }
        if pos != end {
            return Err(self.err_at(&format!("expecting {size} hex chars at "), src));
        }
        Ok((value, pos))
    }

    /// One UTF-8 character as llama.cpp's lenient decoder reads it (no validation, stops at
    /// the end of the text).
    fn decode_utf8(&self, src: usize) -> (u32, usize) {
        const LOOKUP: [usize; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4];
        let first = self.at(src);
        let len = LOOKUP[(first >> 4) as usize];
        let mask = (1u32 << (8 - len)) - 1;
        let mut value = first as u32 & mask;
        let end = src + len;
        let mut pos = src + 1;
        while pos < end && self.at(pos) != 0 {
            value = (value << 6) + (self.at(pos) as u32 & 0x3F);
            pos += 1;
        }
        (value, pos)
    }

    fn parse_char(&self, src: usize) -> Res<(u32, usize)> {
        let c = self.at(src);
        if c == b'\\' {
            return match self.at(src + 1) {
                b'x' => self.parse_hex(src + 2, 2),
                b'u' => self.parse_hex(src + 2, 4),
                b'U' => self.parse_hex(src + 2, 8),
                b't' => Ok(('\t' as u32, src + 2)),
                b'r' => Ok(('\r' as u32, src + 2)),
                b'n' => Ok(('\n' as u32, src + 2)),
                e @ (b'\\' | b'"' | b'[' | b']' | b'-') => Ok((e as u32, src + 2)),
                _ => Err(self.err_at("unknown escape at ", src)),
            };
        }
        if c != 0 {
            return Ok(self.decode_utf8(src));
        }
        Err(GrammarError::new("unexpected end of input"))
    }

    fn parse_token(&self, src: usize) -> Res<(u32, usize)> {
        let mut pos = src;
        if self.at(pos) != b'<' {
            return Err(self.err_at("expecting '<' at ", pos));
        }
        pos += 1;
        if self.at(pos) == b'[' {
            pos += 1;
            let int_end = self.parse_int(pos)?;
            let id = self.digits_u64(pos, int_end, "stoul")?;
            if id > u32::MAX as u64 {
                return Err(self.err_at("parsed token id is too big at ", pos));
            }
            pos = int_end;
            if self.at(pos) != b']' {
                return Err(self.err_at("expecting ']' at ", pos));
            }
            pos += 1;
            if self.at(pos) != b'>' {
                return Err(self.err_at("expecting '>' at ", pos));
            }
            return Ok((id as u32, pos + 1));
        }
        let Some(vocab) = self.vocab else {
            return Err(self.err_at("no vocab to parse token at ", src));
        };
        while self.at(pos) != 0 && self.at(pos) != b'>' {
            pos += 1;
        }
        if self.at(pos) != b'>' {
            return Err(self.err_at("expecting '>' at ", pos));
        }
        pos += 1;
        let text = &self.src[src..pos];
        let tokens = vocab.tokenize_special(text);
        if tokens.len() != 1 {
            return Err(GrammarError::new(format!(
                "invalid token '{}'",
                String::from_utf8_lossy(text)
            )));
        }
        Ok((tokens[0] as u32, pos))
    }

    fn get_symbol_id(&mut self, name: &[u8]) -> u32 {
        let next_id = self.out.symbol_ids.len() as u32;
        let name = String::from_utf8_lossy(name).into_owned();
        *self.out.symbol_ids.entry(name).or_insert(next_id)
    }

    fn generate_symbol_id(&mut self, base_name: &str) -> u32 {
        let next_id = self.out.symbol_ids.len() as u32;
        // an existing name is overwritten, as llama.cpp's map assignment does
        self.out
            .symbol_ids
            .insert(format!("{base_name}_{next_id}"), next_id);
        next_id
    }

    fn add_rule(&mut self, rule_id: u32, rule: Rule) {
        let id = rule_id as usize;
        if self.out.rules.len() <= id {
            self.out.rules.resize(id + 1, Vec::new());
        }
        self.out.rules[id] = rule;
    }

    fn parse_alternates(
        &mut self,
        src: usize,
        rule_name: &str,
        rule_id: u32,
        is_nested: bool,
    ) -> Res<usize> {
        let mut rule = Rule::new();
        let mut pos = self.parse_sequence(src, rule_name, &mut rule, is_nested)?;
        while self.at(pos) == b'|' {
            rule.push(Element::new(GreType::Alt, 0));
            pos = self.parse_space(pos + 1, true);
            pos = self.parse_sequence(pos, rule_name, &mut rule, is_nested)?;
        }
        rule.push(Element::new(GreType::End, 0));
        self.add_rule(rule_id, rule);
        Ok(pos)
    }

    /// Rewrites the last symbol for `S{min,max}` (`max` None: unbounded):
    /// `S{m,n}` becomes m copies of S then n-m nested optional rules `S' ::= S S'' |`, and
    /// `S{m,}` becomes m copies then `S' ::= S S' |`.
    #[allow(clippy::too_many_arguments)]
    fn handle_repetitions(
        &mut self,
        rule: &mut Rule,
        last_sym_start: usize,
        n_prev_rules: &mut u64,
        rule_name: &str,
        pos: usize,
        min_times: u64,
        max_times: Option<u64>,
    ) -> Res<()> {
        if last_sym_start == rule.len() {
            return Err(self.err_at("expecting preceding item to */+/?/{ at ", pos));
        }
        let prev_rule: Rule = rule[last_sym_start..].to_vec();
        let total_rules = match max_times {
            Some(m) if m > 0 => m,
            _ if min_times > 0 => min_times,
            _ => 1,
        };
        if n_prev_rules.saturating_mul(total_rules) > MAX_REPETITION_THRESHOLD {
            return Err(GrammarError::new("number of rules that are going to be repeated multiplied by the new repetition exceeds sane defaults, please reduce the number of repetitions or rule complexity"));
        }
        // llama.cpp would count n-m down from below zero here and never finish
        if let Some(max) = max_times {
            if max < min_times {
                return Err(self.err_at(
                    &format!(
                        "repetition {{{min_times},{max}}} has its maximum below its minimum at "
                    ),
                    pos,
                ));
            }
        }
        if min_times == 0 {
            rule.truncate(last_sym_start);
        } else {
            for _ in 1..min_times {
                rule.extend_from_slice(&prev_rule);
            }
        }
        let n_opt = match max_times {
            None => 1,
            Some(max) => max - min_times,
        };
        let mut last_rec_rule_id = 0;
        for i in 0..n_opt {
            let mut rec_rule = prev_rule.clone();
            let rec_rule_id = self.generate_symbol_id(rule_name);
            if i > 0 || max_times.is_none() {
                let target = if max_times.is_none() {
                    rec_rule_id
                } else {
                    last_rec_rule_id
                };
                rec_rule.push(Element::new(GreType::RuleRef, target));
            }
            rec_rule.push(Element::new(GreType::Alt, 0));
            rec_rule.push(Element::new(GreType::End, 0));
            self.add_rule(rec_rule_id, rec_rule);
            last_rec_rule_id = rec_rule_id;
        }
        if n_opt > 0 {
            rule.push(Element::new(GreType::RuleRef, last_rec_rule_id));
        }
        *n_prev_rules = n_prev_rules.saturating_mul(total_rules);
        Ok(())
    }

    fn parse_sequence(
        &mut self,
        src: usize,
        rule_name: &str,
        rule: &mut Rule,
        is_nested: bool,
    ) -> Res<usize> {
        let mut last_sym_start = rule.len();
        let mut pos = src;
        let mut n_prev_rules: u64 = 1;

        loop {
            let c = self.at(pos);
            if c == 0 {
                break;
            }
            if c == b'"' {
                pos += 1;
                last_sym_start = rule.len();
                n_prev_rules = 1;
                while self.at(pos) != b'"' {
                    if self.at(pos) == 0 {
                        return Err(GrammarError::new("unexpected end of input"));
                    }
                    let (ch, next) = self.parse_char(pos)?;
                    pos = next;
                    rule.push(Element::new(GreType::Char, ch));
                }
                pos = self.parse_space(pos + 1, is_nested);
            } else if c == b'[' {
                pos += 1;
                let mut start_type = GreType::Char;
                if self.at(pos) == b'^' {
                    pos += 1;
                    start_type = GreType::CharNot;
                }
                last_sym_start = rule.len();
                n_prev_rules = 1;
                while self.at(pos) != b']' {
                    if self.at(pos) == 0 {
                        return Err(GrammarError::new("unexpected end of input"));
                    }
                    let (ch, next) = self.parse_char(pos)?;
                    pos = next;
                    let ty = if last_sym_start < rule.len() {
                        GreType::CharAlt
                    } else {
                        start_type
                    };
                    rule.push(Element::new(ty, ch));
                    if self.at(pos) == b'-' && self.at(pos + 1) != b']' {
                        if self.at(pos + 1) == 0 {
                            return Err(GrammarError::new("unexpected end of input"));
                        }
                        let (end_ch, next) = self.parse_char(pos + 1)?;
                        pos = next;
                        rule.push(Element::new(GreType::CharRngUpper, end_ch));
                    }
                }
                pos = self.parse_space(pos + 1, is_nested);
            } else if c == b'<' || c == b'!' {
                let mut ty = GreType::Token;
                if c == b'!' {
                    ty = GreType::TokenNot;
                    pos += 1;
                }
                let (id, token_end) = self.parse_token(pos)?;
                last_sym_start = rule.len();
                n_prev_rules = 1;
                rule.push(Element::new(ty, id));
                pos = self.parse_space(token_end, is_nested);
            } else if is_word_char(c) {
                let name_end = self.parse_name(pos)?;
                let ref_rule_id = self.get_symbol_id(&self.src[pos..name_end]);
                pos = self.parse_space(name_end, is_nested);
                last_sym_start = rule.len();
                n_prev_rules = 1;
                rule.push(Element::new(GreType::RuleRef, ref_rule_id));
            } else if c == b'(' {
                if self.depth >= MAX_NESTING {
                    return Err(
                        self.err_at(&format!("groups nest deeper than {MAX_NESTING} at "), pos)
                    );
                }
                pos = self.parse_space(pos + 1, true);
                let n_rules_before = self.out.symbol_ids.len() as u32;
                let sub_rule_id = self.generate_symbol_id(rule_name);
                self.depth += 1;
                let parsed = self.parse_alternates(pos, rule_name, sub_rule_id, true);
                self.depth -= 1;
                pos = parsed?;
                let grown = (self.out.symbol_ids.len() as u32).wrapping_sub(n_rules_before);
                n_prev_rules = grown.max(1) as u64;
                last_sym_start = rule.len();
                rule.push(Element::new(GreType::RuleRef, sub_rule_id));
                if self.at(pos) != b')' {
                    return Err(self.err_at("expecting ')' at ", pos));
                }
                pos = self.parse_space(pos + 1, is_nested);
            } else if c == b'.' {
                last_sym_start = rule.len();
                n_prev_rules = 1;
                rule.push(Element::new(GreType::CharAny, 0));
                pos = self.parse_space(pos + 1, is_nested);
            } else if c == b'*' || c == b'+' || c == b'?' {
                pos = self.parse_space(pos + 1, is_nested);
                let (min, max) = match c {
                    b'*' => (0, None),
                    b'+' => (1, None),
                    _ => (0, Some(1)),
                };
                self.handle_repetitions(
                    rule,
                    last_sym_start,
                    &mut n_prev_rules,
                    rule_name,
                    pos,
                    min,
                    max,
                )?;
            } else if c == b'{' {
                pos = self.parse_space(pos + 1, is_nested);
                if !is_digit_char(self.at(pos)) {
                    return Err(self.err_at("expecting an int at ", pos));
                }
                let int_end = self.parse_int(pos)?;
                let min_times = self.digits_u64(pos, int_end, "stoull")?;
                pos = self.parse_space(int_end, is_nested);
                let mut max_times = None;
                if self.at(pos) == b'}' {
                    max_times = Some(min_times);
                    pos = self.parse_space(pos + 1, is_nested);
                } else if self.at(pos) == b',' {
                    pos = self.parse_space(pos + 1, is_nested);
                    if is_digit_char(self.at(pos)) {
                        let int_end = self.parse_int(pos)?;
                        max_times = Some(self.digits_u64(pos, int_end, "stoull")?);
                        pos = self.parse_space(int_end, is_nested);
                    }
                    if self.at(pos) != b'}' {
                        return Err(self.err_at("expecting '}' at ", pos));
                    }
                    pos = self.parse_space(pos + 1, is_nested);
                } else {
                    return Err(self.err_at("expecting ',' at ", pos));
                }
                if min_times > MAX_REPETITION_THRESHOLD {
                    return Err(GrammarError::new("number of repetitions exceeds sane defaults, please reduce the number of repetitions"));
                }
                // llama.cpp treats a maximum over the threshold as no maximum
                if max_times.is_some_and(|m| m > MAX_REPETITION_THRESHOLD) {
                    max_times = None;
                }
                self.handle_repetitions(
                    rule,
                    last_sym_start,
                    &mut n_prev_rules,
                    rule_name,
                    pos,
                    min_times,
                    max_times,
                )?;
            } else {
                break;
            }
        }
        Ok(pos)
    }

    fn parse_rule(&mut self, src: usize) -> Res<usize> {
        let name_end = self.parse_name(src)?;
        let mut pos = self.parse_space(name_end, false);
        let name_bytes = &self.src[src..name_end];
        let rule_id = self.get_symbol_id(name_bytes);
        let name = String::from_utf8_lossy(name_bytes).into_owned();
        if !(self.at(pos) == b':' && self.at(pos + 1) == b':' && self.at(pos + 2) == b'=') {
            return Err(self.err_at("expecting ::= at ", pos));
        }
        pos = self.parse_space(pos + 3, true);
        pos = self.parse_alternates(pos, &name, rule_id, false)?;
        match self.at(pos) {
            b'\r' => pos += if self.at(pos + 1) == b'\n' { 2 } else { 1 },
            b'\n' => pos += 1,
            0 => {}
            _ => return Err(self.err_at("expecting newline or end at ", pos)),
        }
        Ok(self.parse_space(pos, true))
    }

    fn parse_all(&mut self) -> Res<()> {
        let mut pos = self.parse_space(0, true);
        while self.at(pos) != 0 {
            pos = self.parse_rule(pos)?;
        }
        let rules = &self.out.rules;
        for rule in rules {
            if rule.is_empty() {
                return Err(GrammarError::new("Undefined rule"));
            }
            for elem in rule {
                if elem.ty != GreType::RuleRef {
                    continue;
                }
                let id = elem.value as usize;
                if id >= rules.len() || rules[id].is_empty() {
                    if let Some((name, _)) =
                        self.out.symbol_ids.iter().find(|(_, &v)| v == elem.value)
                    {
                        return Err(GrammarError::new(format!(
                            "Undefined rule identifier '{name}'"
                        )));
                    }
                    // the name was overwritten by a generated one; llama.cpp would read past
                    // its rules here
                    return Err(GrammarError::new("Undefined rule"));
                }
            }
        }
        Ok(())
    }
}
