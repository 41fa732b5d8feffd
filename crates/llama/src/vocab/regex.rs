//! A backtracking matcher for the ECMAScript regular expressions of llama.cpp's pre-tokenizers,
//! with the semantics of libstdc++'s `std::regex` as llama.cpp runs it: leftmost-first
//! alternation, greedy/lazy quantifiers, lookahead, `\s` `\d` `\w` limited to ASCII, `$` at the
//! end of the searched range, and `regex_iterator`'s rules for empty matches.
//!
//! Text and pattern are sequences of "units" (u32): code points, or the one-byte category
//! markers of llama.cpp's collapsed representation.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegexError(pub String);

impl std::error::Error for RegexError {}

impl fmt::Display for RegexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid regex: {}", self.0)
    }
}

#[derive(Debug, Clone)]
enum ClassItem {
    Range(u32, u32),
    Space(bool),
    Digit(bool),
    Word(bool),
}

#[derive(Debug, Clone)]
struct Class {
    negate: bool,
    items: Vec<ClassItem>,
}

fn is_space(u: u32) -> bool {
    matches!(u, 9..=13 | 32)
}
fn is_digit(u: u32) -> bool {
    (b'0' as u32..=b'9' as u32).contains(&u)
}
fn is_word(u: u32) -> bool {
    is_digit(u)
        || (b'a' as u32..=b'z' as u32).contains(&u)
        || (b'A' as u32..=b'Z' as u32).contains(&u)
        || u == b'_' as u32
}

impl Class {
    fn matches(&self, u: u32) -> bool {
        let hit = self.items.iter().any(|it| match *it {
            ClassItem::Range(a, b) => a <= u && u <= b,
            ClassItem::Space(neg) => is_space(u) != neg,
            ClassItem::Digit(neg) => is_digit(u) != neg,
            ClassItem::Word(neg) => is_word(u) != neg,
        });
        hit != self.negate
    }
}

#[derive(Debug, Clone)]
enum Node {
    Empty,
    Unit(u32),
    Class(Class),
    Any,
    Bol,
    Eol,
    WordBoundary(bool),
    Look(Box<Node>, bool),
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    Repeat {
        node: Box<Node>,
        min: u32,
        max: Option<u32>,
        greedy: bool,
    },
}

impl Node {
    fn nullable(&self) -> bool {
        match self {
            Node::Empty | Node::Bol | Node::Eol | Node::WordBoundary(_) | Node::Look(..) => true,
            Node::Unit(_) | Node::Class(_) | Node::Any => false,
            Node::Concat(v) => v.iter().all(Node::nullable),
            Node::Alt(v) => v.iter().any(Node::nullable),
            Node::Repeat { node, min, .. } => *min == 0 || node.nullable(),
        }
    }
}

struct Parser<'a> {
    p: &'a [u32],
    i: usize,
}

const MAX_REPEAT: u32 = 1000;

impl Parser<'_> {
    fn peek(&self) -> Option<u32> {
        self.p.get(self.i).copied()
    }
    fn peek_is(&self, c: char) -> bool {
        self.peek() == Some(c as u32)
    }
    fn err<T>(&self, what: &str) -> Result<T, RegexError> {
        Err(RegexError(format!("{what} at {}", self.i)))
    }

    fn disjunction(&mut self) -> Result<Node, RegexError> {
        let mut alts = vec![self.alternative()?];
        while self.peek_is('|') {
            self.i += 1;
            alts.push(self.alternative()?);
        }
        Ok(if alts.len() == 1 {
            alts.pop().unwrap_or(Node::Empty)
        } else {
            Node::Alt(alts)
        })
    }

    fn alternative(&mut self) -> Result<Node, RegexError> {
        let mut terms = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' as u32 || c == ')' as u32 {
                break;
            }
            terms.push(self.term()?);
        }
        Ok(match terms.len() {
            0 => Node::Empty,
            1 => terms.pop().unwrap_or(Node::Empty),
            _ => Node::Concat(terms),
        })
    }

    fn term(&mut self) -> Result<Node, RegexError> {
        let c = match self.peek() {
            Some(c) => c,
            None => return self.err("unexpected end"),
        };
        self.i += 1;
        let atom = match char::from_u32(c).unwrap_or('\0') {
            '^' => return Ok(Node::Bol),
            '$' => return Ok(Node::Eol),
            '\\' if self.peek_is('b') => {
                self.i += 1;
                return Ok(Node::WordBoundary(false));
            }
            '\\' if self.peek_is('B') => {
                self.i += 1;
                return Ok(Node::WordBoundary(true));
            }
            '\\' => self.atom_escape()?,
            '(' => {
                let node = if self.peek_is('?') {
                    let kind = self.p.get(self.i + 1).copied();
                    self.i += 2;
                    match kind.and_then(char::from_u32) {
                        Some(':') => self.disjunction()?,
                        Some('=') => Node::Look(Box::new(self.disjunction()?), false),
                        Some('!') => Node::Look(Box::new(self.disjunction()?), true),
                        _ => return self.err("unsupported group"),
                    }
                } else {
                    self.disjunction()?
                };
                if !self.peek_is(')') {
                    return self.err("missing )");
                }
                self.i += 1;
                node
            }
            '[' => Node::Class(self.class()?),
            '.' => Node::Any,
            '*' | '+' | '?' | '{' | ')' => return self.err("nothing to repeat"),
            _ => Node::Unit(c),
        };
        self.quantifier(atom)
    }

    fn number(&mut self) -> Option<u32> {
        let start = self.i;
        let mut v: u32 = 0;
        while let Some(d) = self.peek().filter(|&d| is_digit(d)) {
            v = v.saturating_mul(10).saturating_add(d - '0' as u32);
            self.i += 1;
        }
        (self.i > start).then_some(v)
    }

    fn quantifier(&mut self, atom: Node) -> Result<Node, RegexError> {
        let (min, max) = match self.peek().and_then(char::from_u32) {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => {
                self.i += 1;
                let min = match self.number() {
                    Some(n) => n,
                    None => return self.err("bad brace"),
                };
                let max = if self.peek_is(',') {
                    self.i += 1;
                    self.number()
                } else {
                    Some(min)
                };
                if !self.peek_is('}') {
                    return self.err("bad brace");
                }
                if max.is_some_and(|m| m < min) || min > MAX_REPEAT || max.unwrap_or(0) > MAX_REPEAT
                {
                    return self.err("bad repeat range");
                }
                (min, max)
            }
            _ => return Ok(atom),
        };
        self.i += 1;
        let greedy = if self.peek_is('?') {
            self.i += 1;
            false
        } else {
            true
        };
        Ok(Node::Repeat {
            node: Box::new(atom),
            min,
            max,
            greedy,
        })
    }

    /// The value of a character escape (after the backslash), or a class escape.
    fn escape(&mut self, in_class: bool) -> Result<Result<u32, ClassItem>, RegexError> {
        let c = match self.peek() {
            Some(c) => c,
            None => return self.err("trailing backslash"),
        };
        self.i += 1;
        let ch = char::from_u32(c).unwrap_or('\0');
        Ok(Ok(match ch {
            '0' => 0,
            'b' if in_class => 8,
            'f' => 12,
            'n' => 10,
            'r' => 13,
            't' => 9,
            'v' => 11,
            'd' => return Ok(Err(ClassItem::Digit(false))),
            'D' => return Ok(Err(ClassItem::Digit(true))),
            's' => return Ok(Err(ClassItem::Space(false))),
            'S' => return Ok(Err(ClassItem::Space(true))),
            'w' => return Ok(Err(ClassItem::Word(false))),
            'W' => return Ok(Err(ClassItem::Word(true))),
            'x' | 'u' => {
                let n = if ch == 'x' { 2 } else { 4 };
                let mut v = 0u32;
                for _ in 0..n {
                    let d = self
                        .peek()
                        .and_then(char::from_u32)
                        .and_then(|d| d.to_digit(16));
                    match d {
                        Some(d) => v = v * 16 + d,
                        None => return self.err("bad hex escape"),
                    }
                    self.i += 1;
                }
                v
            }
            'c' => {
                let l = self.peek().unwrap_or(0);
                self.i += 1;
                l % 32
            }
            '1'..='9' => return self.err("back-references are not supported"),
            _ => c,
        }))
    }

    fn atom_escape(&mut self) -> Result<Node, RegexError> {
        Ok(match self.escape(false)? {
            Ok(u) => Node::Unit(u),
            Err(item) => Node::Class(Class {
                negate: false,
                items: vec![item],
            }),
        })
    }

    fn class_atom(&mut self) -> Result<Result<u32, ClassItem>, RegexError> {
        let c = match self.peek() {
            Some(c) => c,
            None => return self.err("missing ]"),
        };
        self.i += 1;
        if c == '\\' as u32 {
            self.escape(true)
        } else {
            Ok(Ok(c))
        }
    }

    fn class(&mut self) -> Result<Class, RegexError> {
        let negate = self.peek_is('^');
        if negate {
            self.i += 1;
        }
        let mut items = Vec::new();
        loop {
            if self.peek_is(']') {
                self.i += 1;
                break;
            }
            let a = self.class_atom()?;
            let is_range =
                self.peek_is('-') && self.p.get(self.i + 1).is_some_and(|&n| n != ']' as u32);
            match a {
                Ok(lo) if is_range => {
                    self.i += 1;
                    match self.class_atom()? {
                        Ok(hi) if hi >= lo => items.push(ClassItem::Range(lo, hi)),
                        _ => return self.err("bad class range"),
                    }
                }
                Ok(u) => items.push(ClassItem::Range(u, u)),
                Err(item) => {
                    if is_range {
                        return self.err("class escape in range");
                    }
                    items.push(item)
                }
            }
        }
        Ok(Class { negate, items })
    }
}

#[derive(Debug, Clone)]
enum Inst {
    Unit(u32),
    Class(usize),
    Any,
    Split(usize, usize),
    Jmp(usize),
    Bol,
    Eol,
    WordBoundary(bool),
    /// Lookahead: sub-program at `start` (ending in Match), then continue at `next`.
    Look {
        start: usize,
        negate: bool,
        next: usize,
    },
    SavePos(usize),
    /// Fails when an iteration of a loop consumed nothing (ECMAScript's empty-check).
    Progress(usize),
    Match,
}

#[derive(Debug, Clone)]
pub struct Regex {
    prog: Vec<Inst>,
    classes: Vec<Class>,
    n_slots: usize,
}

struct Compiler {
    prog: Vec<Inst>,
    classes: Vec<Class>,
    n_slots: usize,
}

impl Compiler {
    fn emit(&mut self, i: Inst) -> usize {
        self.prog.push(i);
        self.prog.len() - 1
    }

    fn patch_split_second(&mut self, at: usize, target: usize) {
        if let Inst::Split(_, ref mut b) = self.prog[at] {
            *b = target;
        }
    }

    fn compile(&mut self, n: &Node) {
        match n {
            Node::Empty => {}
            Node::Unit(u) => {
                self.emit(Inst::Unit(*u));
            }
            Node::Class(c) => {
                self.classes.push(c.clone());
                let idx = self.classes.len() - 1;
                self.emit(Inst::Class(idx));
            }
            Node::Any => {
                self.emit(Inst::Any);
            }
            Node::Bol => {
                self.emit(Inst::Bol);
            }
            Node::Eol => {
                self.emit(Inst::Eol);
            }
            Node::WordBoundary(neg) => {
                self.emit(Inst::WordBoundary(*neg));
            }
            Node::Look(inner, negate) => {
                let at = self.emit(Inst::Look {
                    start: 0,
                    negate: *negate,
                    next: 0,
                });
                let start = self.prog.len();
                self.compile(inner);
                self.emit(Inst::Match);
                let next = self.prog.len();
                self.prog[at] = Inst::Look {
                    start,
                    negate: *negate,
                    next,
                };
            }
            Node::Concat(v) => v.iter().for_each(|x| self.compile(x)),
            Node::Alt(v) => {
                let mut jumps = Vec::new();
                for (k, alt) in v.iter().enumerate() {
                    if k + 1 < v.len() {
                        let split = self.emit(Inst::Split(0, 0));
                        let first = self.prog.len();
                        if let Inst::Split(ref mut a, _) = self.prog[split] {
                            *a = first;
                        }
                        self.compile(alt);
                        jumps.push(self.emit(Inst::Jmp(0)));
                        let next = self.prog.len();
                        self.patch_split_second(split, next);
                    } else {
                        self.compile(alt);
                    }
                }
                let end = self.prog.len();
                for j in jumps {
                    self.prog[j] = Inst::Jmp(end);
                }
            }
            Node::Repeat {
                node,
                min,
                max,
                greedy,
            } => {
                for _ in 0..*min {
                    self.compile(node);
                }
                match max {
                    None => {
                        let check = node.nullable();
                        let slot = self.n_slots;
                        if check {
                            self.n_slots += 1;
                        }
                        let split = self.emit(Inst::Split(0, 0));
                        let body = self.prog.len();
                        if check {
                            self.emit(Inst::SavePos(slot));
                        }
                        self.compile(node);
                        if check {
                            self.emit(Inst::Progress(slot));
                        }
                        self.emit(Inst::Jmp(split));
                        let out = self.prog.len();
                        self.prog[split] = if *greedy {
                            Inst::Split(body, out)
                        } else {
                            Inst::Split(out, body)
                        };
                    }
                    Some(m) => {
                        let mut splits = Vec::new();
                        for _ in *min..*m {
                            let split = self.emit(Inst::Split(0, 0));
                            splits.push((split, self.prog.len()));
                            self.compile(node);
                        }
                        let out = self.prog.len();
                        for (split, body) in splits {
                            self.prog[split] = if *greedy {
                                Inst::Split(body, out)
                            } else {
                                Inst::Split(out, body)
                            };
                        }
                    }
                }
            }
        }
    }
}

/// Flags of one search, as `std::regex_search` receives them.
#[derive(Clone, Copy, Default)]
struct SearchFlags {
    not_null: bool,
    continuous: bool,
    prev_avail: bool,
}

enum Frame {
    Try(usize, usize),
    Restore(usize, usize),
}

impl Regex {
    pub fn new(pattern: &[u32]) -> Result<Regex, RegexError> {
        let mut p = Parser { p: pattern, i: 0 };
        let node = p.disjunction()?;
        if p.i != pattern.len() {
            return p.err("unmatched )");
        }
        let mut c = Compiler {
            prog: Vec::new(),
            classes: Vec::new(),
            n_slots: 0,
        };
        c.compile(&node);
        c.emit(Inst::Match);
        Ok(Regex {
            prog: c.prog,
            classes: c.classes,
            n_slots: c.n_slots,
        })
    }

    pub fn from_pattern(pattern: &str) -> Result<Regex, RegexError> {
        let units: Vec<u32> = pattern.chars().map(|c| c as u32).collect();
        Regex::new(&units)
    }

    /// Run the program from `pc` at `pos`; `begin` is where this (sub-)search started, `lo` the
    /// start of the text that may be looked at behind. Returns the end of the match.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        text: &[u32],
        lo: usize,
        begin: usize,
        end: usize,
        pc0: usize,
        pos0: usize,
        flags: SearchFlags,
        slots: &mut Vec<usize>,
    ) -> Option<usize> {
        let mut stack = vec![Frame::Try(pc0, pos0)];
        while let Some(frame) = stack.pop() {
            let (mut pc, mut pos) = match frame {
                Frame::Try(pc, pos) => (pc, pos),
                Frame::Restore(slot, v) => {
                    slots[slot] = v;
                    continue;
                }
            };
            loop {
                match &self.prog[pc] {
                    Inst::Unit(u) => {
                        if pos < end && text[pos] == *u {
                            pos += 1;
                            pc += 1;
                        } else {
                            break;
                        }
                    }
                    Inst::Class(ci) => {
                        if pos < end && self.classes[*ci].matches(text[pos]) {
                            pos += 1;
                            pc += 1;
                        } else {
                            break;
                        }
                    }
                    Inst::Any => {
                        if pos < end && text[pos] != 10 && text[pos] != 13 {
                            pos += 1;
                            pc += 1;
                        } else {
                            break;
                        }
                    }
                    Inst::Split(a, b) => {
                        stack.push(Frame::Try(*b, pos));
                        pc = *a;
                    }
                    Inst::Jmp(t) => pc = *t,
                    Inst::Bol => {
                        if pos == begin && !flags.prev_avail {
                            pc += 1;
                        } else {
                            break;
                        }
                    }
                    Inst::Eol => {
                        if pos == end {
                            pc += 1;
                        } else {
                            break;
                        }
                    }
                    Inst::WordBoundary(neg) => {
                        let left = (pos != begin || flags.prev_avail)
                            && pos > lo
                            && is_word(text[pos - 1]);
                        let right = pos < end && is_word(text[pos]);
                        if (left != right) != *neg {
                            pc += 1;
                        } else {
                            break;
                        }
                    }
                    Inst::Look {
                        start,
                        negate,
                        next,
                    } => {
                        let sub_flags = SearchFlags {
                            continuous: true,
                            ..flags
                        };
                        let found = self
                            .run(text, lo, pos, end, *start, pos, sub_flags, slots)
                            .is_some();
                        if found != *negate {
                            pc = *next;
                        } else {
                            break;
                        }
                    }
                    Inst::SavePos(slot) => {
                        stack.push(Frame::Restore(*slot, slots[*slot]));
                        slots[*slot] = pos;
                        pc += 1;
                    }
                    Inst::Progress(slot) => {
                        if slots[*slot] == pos {
                            break;
                        }
                        pc += 1;
                    }
                    Inst::Match => {
                        if flags.not_null && pos == begin {
                            break;
                        }
                        return Some(pos);
                    }
                }
            }
        }
        None
    }

    /// `std::regex_search` over `text[from..end]`: the first (leftmost) match as (start, end).
    fn search(
        &self,
        text: &[u32],
        lo: usize,
        from: usize,
        end: usize,
        mut flags: SearchFlags,
    ) -> Option<(usize, usize)> {
        let mut slots = vec![usize::MAX; self.n_slots];
        let mut start = from;
        loop {
            if let Some(e) = self.run(text, lo, start, end, 0, start, flags, &mut slots) {
                return Some((start, e));
            }
            if flags.continuous || start >= end {
                return None;
            }
            flags.prev_avail = true;
            start += 1;
        }
    }

    /// The matches `std::regex_iterator` visits over `text[begin..end]`, as (start, end).
    pub fn find_iter(&self, text: &[u32], begin: usize, end: usize) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut flags = SearchFlags::default();
        let mut m = self.search(text, begin, begin, end, flags);
        while let Some((s, e)) = m {
            out.push((s, e));
            let mut start = e;
            if s == e {
                if start == end {
                    break;
                }
                let retry = SearchFlags {
                    not_null: true,
                    continuous: true,
                    ..flags
                };
                if let Some(hit) = self.search(text, begin, start, end, retry) {
                    m = Some(hit);
                    continue;
                }
                start += 1;
            }
            flags.prev_avail = true;
            m = self.search(text, begin, start, end, flags);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(s: &str) -> Vec<u32> {
        s.chars().map(|c| c as u32).collect()
    }

    fn split(re: &str, text: &str) -> Vec<String> {
        let r = Regex::from_pattern(re).unwrap();
        let t = units(text);
        r.find_iter(&t, 0, t.len())
            .into_iter()
            .map(|(s, e)| text.chars().skip(s).take(e - s).collect())
            .collect()
    }

    #[test]
    fn alternation_is_leftmost_first() {
        assert_eq!(split("a|ab", "ab"), vec!["a"]);
        assert_eq!(split("ab|a", "ab"), vec!["ab"]);
    }

    #[test]
    fn lookahead_and_whitespace() {
        assert_eq!(split(r"\s+(?!\S)|\s+", "a   b"), vec!["  ", " "]);
        assert_eq!(split(r"\s+(?!\S)", "a  "), vec!["  "]);
    }

    #[test]
    fn counted_and_lazy_repeats() {
        assert_eq!(split(r"\d{1,3}", "12345"), vec!["123", "45"]);
        assert_eq!(split(r"a+?", "aaa"), vec!["a", "a", "a"]);
        assert_eq!(
            split(r"(IMGIMG)((A|B){1,4})Z", "xIMGIMGABZ"),
            vec!["IMGIMGABZ"]
        );
    }

    #[test]
    fn empty_matches_advance() {
        let got = split(r"(?=(\d{3})+(?!\d))", "1234567");
        assert_eq!(got, vec!["", ""]);
        let r = Regex::from_pattern(r"(?=(\d{3})+(?!\d))").unwrap();
        let t = units("1234567");
        assert_eq!(r.find_iter(&t, 0, t.len()), vec![(1, 1), (4, 4)]);
    }

    #[test]
    fn classes_and_anchors() {
        assert_eq!(split(r"[^a-c\s]+", "abxy zc"), vec!["xy", "z"]);
        assert_eq!(split(r"\s+$", "a  b  "), vec!["  "]);
        assert_eq!(split(r"[\-\]]+", "a-]b"), vec!["-]"]);
        assert!(Regex::from_pattern(r"\p{Han}+").is_err());
    }
}
