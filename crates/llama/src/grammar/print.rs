//! `llama_grammar_parser::print`: the parsed rules written back as GBNF, one rule a line, the
//! way llama.cpp's gbnf tools show what a grammar became.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::parser::ParsedGrammar;
use super::{GrammarError, GreType, Rule};

fn print_char(out: &mut String, c: u32) {
    if (0x20..=0x7f).contains(&c) {
        out.push(c as u8 as char);
    } else {
        let _ = write!(out, "<U+{c:04X}>");
    }
}

fn print_rule(
    out: &mut String,
    rule_id: u32,
    rule: &Rule,
    names: &BTreeMap<u32, &str>,
) -> Result<(), GrammarError> {
    if rule.last().map(|e| e.ty) != Some(GreType::End) {
        return Err(GrammarError(format!(
            "malformed rule, does not end with LLAMA_GRETYPE_END: {rule_id}"
        )));
    }
    let name = |id: u32| names.get(&id).copied().unwrap_or("");
    let _ = write!(out, "{} ::= ", name(rule_id));
    for i in 0..rule.len() - 1 {
        let e = rule[i];
        let prev_is_char = i > 0 && rule[i - 1].is_char();
        match e.ty {
            GreType::End => {
                return Err(GrammarError(format!(
                    "unexpected end of rule: {rule_id},{i}"
                )))
            }
            GreType::Alt => out.push_str("| "),
            GreType::RuleRef => {
                let _ = write!(out, "{} ", name(e.value));
            }
            GreType::Char => {
                out.push('[');
                print_char(out, e.value);
            }
            GreType::CharNot => {
                out.push_str("[^");
                print_char(out, e.value);
            }
            GreType::CharRngUpper | GreType::CharAlt => {
                if !prev_is_char {
                    let what = if e.ty == GreType::CharAlt {
                        "LLAMA_GRETYPE_CHAR_ALT"
                    } else {
                        "LLAMA_GRETYPE_CHAR_RNG_UPPER"
                    };
                    return Err(GrammarError(format!(
                        "{what} without preceding char: {rule_id},{i}"
                    )));
                }
                if e.ty == GreType::CharRngUpper {
                    out.push('-');
                }
                print_char(out, e.value);
            }
            GreType::CharAny => out.push('.'),
            GreType::Token => {
                let _ = write!(out, "<[{}]> ", e.value);
            }
            GreType::TokenNot => {
                let _ = write!(out, "!<[{}]> ", e.value);
            }
        }
        if e.is_char()
            && !matches!(
                rule[i + 1].ty,
                GreType::CharAlt | GreType::CharRngUpper | GreType::CharAny
            )
        {
            out.push_str("] ");
        }
    }
    out.push('\n');
    Ok(())
}

/// Every rule as `name ::= ...`, in rule order.
pub fn print_grammar(g: &ParsedGrammar) -> Result<String, GrammarError> {
    let names: BTreeMap<u32, &str> = g.symbol_ids.iter().map(|(k, &v)| (v, k.as_str())).collect();
    let mut out = String::new();
    for (i, rule) in g.rules.iter().enumerate() {
        print_rule(&mut out, i as u32, rule, &names)?;
    }
    Ok(out)
}
