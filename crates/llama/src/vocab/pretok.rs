//! Pre-tokenization of byte-level BPE (llama.cpp's `unicode_regex_split`): a list of regular
//! expressions applied one after the other, each splitting the chunks the previous one left.
//! The common expressions (GPT-2, Llama 3, Qwen2, ...) have hand-written splitters, exactly as
//! llama.cpp dispatches them by the expression's text; every other expression runs on our
//! ECMAScript matcher over llama.cpp's "collapsed" text, where each non-ASCII code point is
//! replaced by one marker unit for its Unicode category.

use super::regex::{Regex, RegexError};
use super::unicode::{self, Flags};

pub const RE_GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
const RE_LLAMA3_ORIG: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
pub const RE_LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
pub const RE_QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
pub const RE_QWEN35: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
pub const RE_HAN: &str = r"\p{Han}+";
pub const RE_AFMOE_DIGITS: &str = r"\p{AFMoE_digits}";
pub const RE_NEWLINES: &str = r"[^\n]+|[\n]+";
pub const RE_TINY_AYA_DIGITS: &str = r"\d{1,3}(?=(?:\d{3})*\b)";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Custom {
    Gpt2,
    Llama3,
    Qwen2,
    Qwen35,
    KimiK2,
    Afmoe,
    Newlines,
}

fn custom_for(expr: &str) -> Option<Custom> {
    Some(match expr {
        RE_GPT2 => Custom::Gpt2,
        RE_LLAMA3_ORIG | RE_LLAMA3 => Custom::Llama3,
        RE_QWEN2 => Custom::Qwen2,
        RE_QWEN35 => Custom::Qwen35,
        RE_HAN => Custom::KimiK2,
        RE_AFMOE_DIGITS | RE_TINY_AYA_DIGITS => Custom::Afmoe,
        RE_NEWLINES => Custom::Newlines,
        _ => return None,
    })
}

/// The unicode categories llama.cpp recognises in expressions, and the marker of each.
const UCAT: [(&str, u32); 10] = [
    (r"\p{N}", 0xD1),
    (r"\p{L}", 0xD2),
    (r"\p{P}", 0xD3),
    (r"\p{M}", 0xD4),
    (r"\p{S}", 0xD5),
    (r"\p{Lu}", 0xD2),
    (r"\p{Ll}", 0xD2),
    (r"\p{Lt}", 0xD2),
    (r"\p{Lm}", 0xD2),
    (r"\p{Lo}", 0xD2),
];

/// The ASCII members of each category, added next to the marker in a collapsed expression.
fn ucat_ascii(marker: u32) -> &'static str {
    match marker {
        0xD1 => "0-9",
        0xD2 => "A-Za-z",
        0xD3 => r"!-#%-*,-/:-;?-@\[-\]_\{\}",
        0xD5 => r"\$\+<->^`\|\~",
        _ => "",
    }
}

fn uses_categories(expr: &str) -> bool {
    UCAT.iter().any(|(p, _)| expr.contains(p))
}

/// The collapsed form of an ASCII expression (llama.cpp's rewriting, bracket tracking included).
fn collapse_expr(expr: &str) -> Vec<u32> {
    let b = expr.as_bytes();
    let mut out: Vec<u32> = Vec::with_capacity(b.len() * 2);
    let mut inside = false;
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'[' && (i == 0 || b[i - 1] != b'\\') {
            out.push('[' as u32);
            inside = true;
            i += 1;
            continue;
        }
        if inside && b[i] == b']' && b[i - 1] != b'\\' {
            out.push(']' as u32);
            inside = false;
            i += 1;
            continue;
        }
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1] == b'p' && b[i + 2] == b'{' {
            if let Some(close) = b[i + 3..]
                .iter()
                .position(|&c| c == b'}')
                .map(|p| p + i + 3)
            {
                if close <= i + 10 {
                    let pat = &expr[i..=close];
                    if let Some(&(_, marker)) = UCAT.iter().find(|(p, _)| *p == pat) {
                        if !inside {
                            out.push('[' as u32);
                        }
                        out.push(marker);
                        out.extend(ucat_ascii(marker).chars().map(|c| c as u32));
                        if !inside {
                            out.push(']' as u32);
                        }
                        i = close + 1;
                        continue;
                    }
                }
            }
        }
        out.push(b[i] as u32);
        i += 1;
    }
    out
}

struct Step {
    custom: Option<Custom>,
    /// The general matcher; `None` when llama.cpp's std::regex would reject the expression
    /// (only the expressions that exist to trigger a custom splitter).
    regex: Option<Regex>,
    collapsed: bool,
}

pub struct PreTokenizer {
    steps: Vec<Step>,
    need_collapse: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("failed to process regex '{expr}': {source}")]
pub struct PreTokError {
    pub expr: String,
    pub source: RegexError,
}

impl PreTokenizer {
    pub fn new(exprs: &[&str]) -> Result<PreTokenizer, PreTokError> {
        let mut steps = Vec::new();
        for &e in exprs {
            let custom = custom_for(e);
            let collapsed = uses_categories(e);
            let units: Vec<u32> = if collapsed {
                if !e.is_ascii() {
                    return Err(PreTokError {
                        expr: e.to_string(),
                        source: RegexError("unicode categories with non-ASCII characters".into()),
                    });
                }
                collapse_expr(e)
            } else {
                e.chars().map(|c| c as u32).collect()
            };
            let regex = match Regex::new(&units) {
                Ok(r) => Some(r),
                Err(_) if custom.is_some() => None,
                Err(err) => {
                    return Err(PreTokError {
                        expr: e.to_string(),
                        source: err,
                    })
                }
            };
            steps.push(Step {
                custom,
                regex,
                collapsed,
            });
        }
        let need_collapse = exprs.iter().any(|e| uses_categories(e));
        Ok(PreTokenizer {
            steps,
            need_collapse,
        })
    }

    /// Split `text` into words, returned as code point lengths.
    pub fn split_offsets(&self, cpts: &[u32]) -> Vec<usize> {
        let ftab = unicode::flags_table();
        let mut collapsed: Vec<u32> = Vec::new();
        if self.need_collapse {
            collapsed = cpts
                .iter()
                .map(|&c| {
                    if c < 128 {
                        return c;
                    }
                    let f = flag_of(ftab, c);
                    if f.is_whitespace() {
                        return 0x0B;
                    }
                    match f.category() {
                        unicode::FLAG_NUMBER => 0xD1,
                        unicode::FLAG_LETTER => 0xD2,
                        unicode::FLAG_PUNCTUATION => 0xD3,
                        unicode::FLAG_ACCENT_MARK => 0xD4,
                        unicode::FLAG_SYMBOL => 0xD5,
                        _ => 0xD0,
                    }
                })
                .collect();
        }
        let mut wide: Option<Vec<u32>> = None;
        let mut offsets = vec![cpts.len()];
        for step in &self.steps {
            if let Some(kind) = step.custom {
                let tmp = run_custom(kind, cpts, &offsets, ftab);
                if !tmp.is_empty() {
                    offsets = tmp;
                    continue;
                }
            }
            let Some(re) = &step.regex else {
                offsets = Vec::new();
                continue;
            };
            let units: &[u32] = if step.collapsed {
                &collapsed
            } else {
                wide.get_or_insert_with(|| {
                    cpts.iter()
                        .map(|&c| {
                            if c > 0x7F && flag_of(ftab, c).is_whitespace() {
                                0x0B
                            } else {
                                c
                            }
                        })
                        .collect()
                })
            };
            offsets = regex_split(re, units, &offsets);
        }
        offsets
    }
}

#[inline]
fn flag_of(ftab: &[u16], c: u32) -> Flags {
    Flags(
        ftab.get(c as usize)
            .copied()
            .unwrap_or(unicode::FLAG_UNDEFINED),
    )
}

fn regex_split(re: &Regex, units: &[u32], offsets: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(offsets.len());
    let mut start = 0;
    for &len in offsets {
        let mut prev = start;
        for (s, e) in re.find_iter(units, start, start + len) {
            if s > prev {
                out.push(s - prev);
            }
            out.push(e - s);
            prev = e;
        }
        if prev < start + len {
            out.push(start + len - prev);
        }
        start += len;
    }
    out
}

const OUT_OF_RANGE: u32 = 0xFFFF_FFFF;

/// One chunk of text as llama.cpp's custom splitters see it: code points and flags inside the
/// chunk, OUT_OF_RANGE and empty flags outside.
struct Chunk<'a> {
    cpts: &'a [u32],
    ftab: &'a [u16],
    ini: usize,
    end: usize,
    prev_end: usize,
    out: &'a mut Vec<usize>,
}

impl Chunk<'_> {
    #[inline]
    fn cpt(&self, pos: usize) -> u32 {
        if self.ini <= pos && pos < self.end {
            self.cpts[pos]
        } else {
            OUT_OF_RANGE
        }
    }
    #[inline]
    fn flags(&self, pos: usize) -> Flags {
        if self.ini <= pos && pos < self.end {
            flag_of(self.ftab, self.cpts[pos])
        } else {
            Flags(0)
        }
    }
    #[inline]
    fn add(&mut self, end: usize) -> usize {
        let len = end - self.prev_end;
        if len > 0 {
            self.out.push(len);
        }
        self.prev_end = end;
        len
    }

    /// `'s|'t|'re|'ve|'m|'ll|'d` at `pos` (ASCII case folded when `fold`): its length.
    fn contraction(&self, pos: usize, fold: bool) -> usize {
        if self.cpt(pos) != '\'' as u32 || pos + 1 >= self.end {
            return 0;
        }
        let low = |c: u32| if fold { unicode::to_lower(c) } else { c };
        let n = low(self.cpt(pos + 1));
        if [b's', b't', b'm', b'd'].iter().any(|&c| n == c as u32) {
            return 2;
        }
        if pos + 2 < self.end {
            let nn = low(self.cpt(pos + 2));
            let pair = |a: u8, b: u8| n == a as u32 && nn == b as u32;
            if pair(b'r', b'e') || pair(b'v', b'e') || pair(b'l', b'l') {
                return 3;
            }
        }
        0
    }

    /// The whitespace alternatives shared by the Llama 3 family:
    /// `\s*[\r\n]+|\s+(?!\S)|\s+`, or a single unmatched code point.
    fn whitespace_tail(&mut self, pos: &mut usize, with_newlines: bool) {
        let mut num_ws = 0;
        let mut last_rn = 0;
        while self.flags(*pos + num_ws).is_whitespace() {
            let c = self.cpt(*pos + num_ws);
            if c == '\r' as u32 || c == '\n' as u32 {
                last_rn = *pos + num_ws + 1;
            }
            num_ws += 1;
        }
        if with_newlines && last_rn > 0 {
            *pos = last_rn;
            self.add(*pos);
            return;
        }
        if num_ws > 1 && self.cpt(*pos + num_ws) != OUT_OF_RANGE {
            *pos += num_ws - 1;
            self.add(*pos);
            return;
        }
        if num_ws > 0 {
            *pos += num_ws;
            self.add(*pos);
            return;
        }
        *pos += 1;
        self.add(*pos);
    }

    fn is_rn(c: u32) -> bool {
        c == '\r' as u32 || c == '\n' as u32
    }

    /// ` ?[^\s\p{L}\p{N}]+[\r\n]*` (with `\p{M}` excluded too when `marks`); `cond_flags` is
    /// what llama.cpp tests for "is a code point here".
    fn punct_run(&mut self, pos: &mut usize, marks: bool, trailing_rn: bool) -> bool {
        let cpt = self.cpt(*pos);
        let flags = self.flags(*pos);
        let mut f2 = if cpt == ' ' as u32 {
            self.flags(*pos + 1)
        } else {
            flags
        };
        let word = |f: Flags| {
            f.is_whitespace() || f.is_letter() || f.is_number() || (marks && f.is_accent_mark())
        };
        if word(f2) || !flags.any() {
            return false;
        }
        if cpt == ' ' as u32 {
            *pos += 1;
        }
        while !word(f2) && f2.any() {
            *pos += 1;
            f2 = self.flags(*pos);
        }
        if trailing_rn {
            while Self::is_rn(self.cpt(*pos)) {
                *pos += 1;
            }
        }
        self.add(*pos);
        true
    }
}

fn run_custom(kind: Custom, cpts: &[u32], offsets: &[usize], ftab: &[u16]) -> Vec<usize> {
    let mut out = Vec::with_capacity(offsets.len());
    let mut start = 0;
    for &len in offsets {
        let mut ch = Chunk {
            cpts,
            ftab,
            ini: start,
            end: start + len,
            prev_end: start,
            out: &mut out,
        };
        match kind {
            Custom::Gpt2 => split_gpt2(&mut ch),
            Custom::Llama3 => split_llama3(&mut ch, true),
            Custom::Qwen2 => split_llama3(&mut ch, false),
            Custom::Qwen35 => split_qwen35(&mut ch),
            Custom::KimiK2 => split_kimi_k2(&mut ch),
            Custom::Afmoe => split_afmoe(&mut ch),
            Custom::Newlines => split_newlines(&mut ch),
        }
        start += len;
    }
    out
}

fn split_gpt2(ch: &mut Chunk) {
    let mut pos = ch.ini;
    while pos < ch.end {
        let cpt = ch.cpt(pos);
        let flags = ch.flags(pos);
        let n = ch.contraction(pos, false);
        if n > 0 {
            pos += ch.add(pos + n);
            continue;
        }
        let space = cpt == ' ' as u32;
        let mut f2 = if space { ch.flags(pos + 1) } else { flags };
        if f2.is_letter() {
            pos += space as usize;
            while f2.is_letter() {
                pos += 1;
                f2 = ch.flags(pos);
            }
            ch.add(pos);
            continue;
        }
        if f2.is_number() {
            pos += space as usize;
            while f2.is_number() {
                pos += 1;
                f2 = ch.flags(pos);
            }
            ch.add(pos);
            continue;
        }
        let other = |f: Flags| !(f.is_whitespace() || f.is_letter() || f.is_number()) && f.any();
        if other(f2) {
            pos += space as usize;
            while other(f2) {
                pos += 1;
                f2 = ch.flags(pos);
            }
            ch.add(pos);
            continue;
        }
        ch.whitespace_tail(&mut pos, false);
    }
}

/// Llama 3 (`\p{N}{1,3}`) and Qwen2 (`\p{N}`): the same expression but for the digit groups.
fn split_llama3(ch: &mut Chunk, digit_triples: bool) {
    let mut pos = ch.ini;
    while pos < ch.end {
        let cpt = ch.cpt(pos);
        let flags = ch.flags(pos);
        let n = ch.contraction(pos, true);
        if n > 0 {
            pos += ch.add(pos + n);
            continue;
        }
        if !(Chunk::is_rn(cpt) || flags.is_number())
            && (flags.is_letter() || ch.flags(pos + 1).is_letter())
        {
            pos += 1;
            while ch.flags(pos).is_letter() {
                pos += 1;
            }
            ch.add(pos);
            continue;
        }
        if flags.is_number() {
            if digit_triples {
                let mut ini = pos;
                while ch.flags(pos).is_number() {
                    pos += 1;
                    if pos - ini >= 3 {
                        ch.add(pos);
                        ini = pos;
                    }
                }
            } else {
                pos += 1;
            }
            ch.add(pos);
            continue;
        }
        if ch.punct_run(&mut pos, false, true) {
            continue;
        }
        ch.whitespace_tail(&mut pos, true);
    }
}

fn split_qwen35(ch: &mut Chunk) {
    let mut pos = ch.ini;
    while pos < ch.end {
        let cpt = ch.cpt(pos);
        let flags = ch.flags(pos);
        let n = ch.contraction(pos, true);
        if n > 0 {
            pos += ch.add(pos + n);
            continue;
        }
        let lm = |f: Flags| f.is_letter() || f.is_accent_mark();
        if !(Chunk::is_rn(cpt) || flags.is_number()) && (lm(flags) || lm(ch.flags(pos + 1))) {
            pos += 1;
            while lm(ch.flags(pos)) {
                pos += 1;
            }
            ch.add(pos);
            continue;
        }
        if flags.is_number() {
            pos += 1;
            ch.add(pos);
            continue;
        }
        if ch.punct_run(&mut pos, true, true) {
            continue;
        }
        ch.whitespace_tail(&mut pos, true);
    }
}

fn split_kimi_k2(ch: &mut Chunk) {
    let mut pos = ch.ini;
    while pos < ch.end {
        let cpt = ch.cpt(pos);
        let flags = ch.flags(pos);
        if unicode::is_han(cpt) {
            while unicode::is_han(ch.cpt(pos)) {
                pos += 1;
            }
            ch.add(pos);
            continue;
        }
        let letter_not_han =
            |c: &Chunk, p: usize| c.flags(p).is_letter() && !unicode::is_han(c.cpt(p));
        let lead_ok = !(Chunk::is_rn(cpt) || flags.is_letter() || flags.is_number());
        let is_letter_pattern = (flags.is_letter() && !unicode::is_han(cpt))
            || (lead_ok && letter_not_han(ch, pos + 1));
        if is_letter_pattern {
            let mut has_leading = false;
            if lead_ok {
                has_leading = true;
                pos += 1;
            }
            let mut has_letters = false;
            while letter_not_han(ch, pos) {
                has_letters = true;
                pos += 1;
            }
            if has_letters || (!has_leading && letter_not_han(ch, pos)) {
                if !has_letters {
                    pos += 1;
                }
                while letter_not_han(ch, pos) {
                    pos += 1;
                }
                if ch.cpt(pos) == '\'' as u32 && pos + 1 < ch.end {
                    let n = unicode::to_lower(ch.cpt(pos + 1));
                    if [b's', b't', b'm', b'd'].iter().any(|&c| n == c as u32) {
                        pos += 2;
                    } else if pos + 2 < ch.end {
                        let nn = unicode::to_lower(ch.cpt(pos + 2));
                        let pair = |a: u8, b: u8| n == a as u32 && nn == b as u32;
                        if pair(b'r', b'e') || pair(b'v', b'e') || pair(b'l', b'l') {
                            pos += 3;
                        }
                    }
                }
                ch.add(pos);
                continue;
            } else if has_leading {
                pos -= 1;
            }
        }
        if flags.is_number() {
            let mut ini = pos;
            while ch.flags(pos).is_number() {
                pos += 1;
                if pos - ini >= 3 {
                    ch.add(pos);
                    ini = pos;
                }
            }
            ch.add(pos);
            continue;
        }
        // llama.cpp tests the flags after the optional space here, not those of `cpt`.
        let space = cpt == ' ' as u32;
        let mut f2 = if space { ch.flags(pos + 1) } else { flags };
        let other = |f: Flags| !(f.is_whitespace() || f.is_letter() || f.is_number()) && f.any();
        if other(f2) {
            pos += space as usize;
            while other(f2) {
                pos += 1;
                f2 = ch.flags(pos);
            }
            while Chunk::is_rn(ch.cpt(pos)) {
                pos += 1;
            }
            ch.add(pos);
            continue;
        }
        ch.whitespace_tail(&mut pos, true);
    }
}

fn split_afmoe(ch: &mut Chunk) {
    let mut pos = ch.ini;
    while pos < ch.end {
        if ch.flags(pos).is_number() {
            let digit_start = pos;
            let mut count = 0;
            while ch.flags(pos).is_number() && pos < ch.end {
                count += 1;
                pos += 1;
            }
            let rem = count % 3;
            let mut cur = digit_start;
            if rem > 0 {
                ch.add(cur + rem);
                cur += rem;
            }
            while cur < digit_start + count {
                ch.add(cur + 3);
                cur += 3;
            }
            continue;
        }
        pos += 1;
    }
    if ch.prev_end < ch.end {
        let end = ch.end;
        ch.add(end);
    }
}

fn split_newlines(ch: &mut Chunk) {
    let mut pos = ch.ini;
    while pos < ch.end {
        let nl = ch.cpts[pos] == '\n' as u32;
        let run = pos;
        while pos < ch.end && (ch.cpts[pos] == '\n' as u32) == nl {
            pos += 1;
        }
        ch.out.push(pos - run);
    }
}

/// The words of `text` in UTF-8 (invalid input bytes become U+FFFD), GPT-2 byte-encoded when
/// `byte_encode`.
pub fn words(pre: &PreTokenizer, text: &[u8], byte_encode: bool) -> Vec<Vec<u8>> {
    let cpts = unicode::cpts_from_utf8(text);
    let offsets = pre.split_offsets(&cpts);
    let mut out = Vec::with_capacity(offsets.len());
    let mut start = 0;
    let mut buf = Vec::new();
    for len in offsets {
        buf.clear();
        for &c in &cpts[start..start + len] {
            unicode::push_utf8(&mut buf, c);
        }
        if byte_encode {
            let mut enc = Vec::with_capacity(buf.len() * 2);
            for &b in &buf {
                unicode::push_utf8(&mut enc, unicode::byte_to_cpt(b));
            }
            out.push(enc);
        } else {
            out.push(buf.clone());
        }
        start += len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(exprs: &[&str], text: &str) -> Vec<String> {
        let pre = PreTokenizer::new(exprs).unwrap();
        words(&pre, text.as_bytes(), false)
            .into_iter()
            .map(|w| String::from_utf8(w).unwrap())
            .collect()
    }

    #[test]
    fn custom_splitters_agree_with_the_general_matcher() {
        let texts = [
            "Hello world, this is a test!",
            "  leading and trailing   ",
            "I'm here, you're there; we'll SEE'S 12345 numbers\n\n\tok\r\n",
            "ünïcödé 日本語 text — with punctuation!!! ...\u{00A0}nbsp",
            "tabs\t\tand  double  spaces 3.14159",
            "",
            " ",
            "\n \n  x",
        ];
        for expr in [RE_GPT2, RE_LLAMA3, RE_QWEN2, RE_QWEN35] {
            let custom = PreTokenizer::new(&[expr]).unwrap();
            let units = collapse_expr(expr);
            let generic = Regex::new(&units).unwrap();
            for t in texts {
                let cpts = unicode::cpts_from_utf8(t.as_bytes());
                let got = custom.split_offsets(&cpts);
                let mut pre = PreTokenizer::new(&[expr]).unwrap();
                pre.steps[0].custom = None;
                let want = pre.split_offsets(&cpts);
                assert_eq!(got, want, "expr {expr} text {t:?}");
                let _ = &generic;
            }
        }
    }

    #[test]
    fn gpt2_words() {
        assert_eq!(
            split(&[RE_GPT2], "Hello world's  end"),
            vec!["Hello", " world", "'s", " ", " end"]
        );
    }

    #[test]
    fn collapse_matches_llama_cpp() {
        let c: String = collapse_expr(r"[^\s\p{L}]\p{N}")
            .into_iter()
            .map(|u| char::from_u32(u).unwrap())
            .collect();
        assert_eq!(c, "[^\\s\u{D2}A-Za-z][\u{D1}0-9]");
    }

    #[test]
    fn general_expressions_compile() {
        for e in [
            r"[\p{P}\$\+<=>\^~\|]+",
            r"\p{N}+",
            "[0-9][0-9][0-9]",
            r" ?[^(\s|.,!?…。，、।۔،)]+",
            r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|\p{N}",
            r"(?=(\d{3})+(?!\d))",
        ] {
            PreTokenizer::new(&[e]).unwrap();
        }
    }
}
