//! GBNF grammars (llama.cpp's `llama-grammar.cpp`): the parser that turns grammar text into
//! rules of elements, and the pushdown state that constrains sampling to strings the grammar
//! accepts. The sampler that applies a grammar to candidates lives in `sampling::grammar`.
//!
//! Positions in the rules are (rule, index) pairs where llama.cpp keeps element pointers, so a
//! grammar clones without re-pointing its stacks.

mod growth;
mod parser;
mod print;
mod stacks;
mod state;
mod trigger;
mod utf8;

#[cfg(test)]
mod tests;

pub use parser::{parse, ParsedGrammar};
pub use print::print_grammar;
pub use stacks::{Pos, Stack};
pub use state::{Grammar, GrammarTokens, GrammarVocab};
pub use trigger::{words_pattern as trigger_words_pattern, TriggerPattern};
pub use utf8::PartialUtf8;

/// `llama_gretype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GreType {
    /// End of a rule definition.
    End,
    /// Start of an alternate definition of the rule.
    Alt,
    /// Non-terminal: the value is a rule id.
    RuleRef,
    /// Terminal: the value is a code point.
    Char,
    /// Inverse char(s): `[^a]`, `[^a-b]`, `[^abc]`.
    CharNot,
    /// Makes the preceding Char or CharAlt an inclusive range (`[a-z]`).
    CharRngUpper,
    /// Adds an alternate char to the preceding Char or CharRngUpper (`[ab]`, `[a-zA]`).
    CharAlt,
    /// Any character (`.`).
    CharAny,
    /// Terminal token (`<[id]>`): the value is a token id.
    Token,
    /// Any token but this one (`!<[id]>`).
    TokenNot,
}

/// `llama_grammar_element`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Element {
    pub ty: GreType,
    /// Code point, rule id or token id.
    pub value: u32,
}

impl Element {
    pub const fn new(ty: GreType, value: u32) -> Self {
        Element { ty, value }
    }

    fn is_end_of_sequence(self) -> bool {
        matches!(self.ty, GreType::End | GreType::Alt)
    }

    fn is_char(self) -> bool {
        matches!(
            self.ty,
            GreType::Char
                | GreType::CharNot
                | GreType::CharAlt
                | GreType::CharRngUpper
                | GreType::CharAny
        )
    }
}

pub type Rule = Vec<Element>;

/// Why a grammar could not be built or could not take a token; the text is llama.cpp's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct GrammarError(pub String);

impl GrammarError {
    fn new(msg: impl Into<String>) -> Self {
        GrammarError(msg.into())
    }
}
