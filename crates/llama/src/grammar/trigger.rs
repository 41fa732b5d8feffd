//! `llama_grammar_trigger_pattern`: a regular expression that wakes a lazy grammar. llama.cpp
//! compiles these with std::regex (ECMAScript); here the `regex` crate reads them, which
//! accepts the patterns llama.cpp's chat formats build (no look-around or back-references).
//! The buffer is bytes: a piece may end inside a character.

use super::GrammarError;

#[derive(Clone, Debug)]
pub struct TriggerPattern {
    pub pattern: String,
    regex: regex::bytes::Regex,
    /// The whole-input form, for patterns written `^...$`.
    full: Option<regex::bytes::Regex>,
}

impl TriggerPattern {
    pub fn new(pattern: &str) -> Result<Self, GrammarError> {
        let bad = |e: regex::Error| {
            GrammarError::new(format!("invalid trigger pattern '{pattern}': {e}"))
        };
        let regex = regex::bytes::Regex::new(pattern).map_err(bad)?;
        let full = if pattern.starts_with('^') && pattern.ends_with('$') {
            Some(regex::bytes::Regex::new(&format!("^(?:{pattern})$")).map_err(bad)?)
        } else {
            None
        };
        Ok(TriggerPattern {
            pattern: pattern.to_string(),
            regex,
            full,
        })
    }

    /// Where the constrained text starts: the first non-empty capture group of the match, or
    /// the match itself; None without a match.
    pub fn find(&self, input: &[u8]) -> Option<usize> {
        let start_of = |caps: regex::bytes::Captures| {
            (1..caps.len())
                .filter_map(|i| caps.get(i))
                .find(|m| !m.is_empty())
                .map(|m| m.start())
                .or_else(|| caps.get(0).map(|m| m.start()))
        };
        if let Some(full) = &self.full {
            if let Some(caps) = full.captures(input) {
                return start_of(caps);
            }
        }
        self.regex.captures(input).and_then(start_of)
    }
}

/// The pattern llama.cpp builds from trigger words: any text, then one of the words (regex
/// specials escaped), then anything.
pub fn words_pattern(words: &[&str]) -> String {
    let mut p = String::from("[\\s\\S]*?(");
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            p.push('|');
        }
        for c in w.chars() {
            if ".^$|()*+?[]{}\\".contains(c) {
                p.push('\\');
            }
            p.push(c);
        }
    }
    p.push_str(")[\\s\\S]*");
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_group_marks_the_start() {
        let t = TriggerPattern::new(&words_pattern(&["<tool_call>", "a.b"])).unwrap();
        assert_eq!(t.find(b"hello <tool_call>{"), Some(6));
        assert_eq!(t.find(b"xa.by"), Some(1));
        assert_eq!(t.find(b"axb"), None);
        let full = TriggerPattern::new("^\\s*(\\{)[\\s\\S]*$").unwrap();
        assert_eq!(full.find(b"  {\"a\":1"), Some(2));
    }
}
