//! The pushdown stacks of a grammar: expanding a stack until it stands on a terminal,
//! matching characters and tokens there, and filtering candidate tokens by what every stack
//! allows (llama.cpp's `llama_grammar_advance_stack`, `_match_char`, `_match_partial_char`,
//! `_reject_candidates`).

use std::collections::HashSet;

use super::utf8::PartialUtf8;
use super::{Element, GreType, Rule};

/// A position in the rules: element `i` of rule `rule` (llama.cpp's element pointer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pos {
    pub rule: u32,
    pub i: u32,
}

impl Pos {
    pub fn new(rule: usize, i: usize) -> Self {
        Pos {
            rule: rule as u32,
            i: i as u32,
        }
    }

    pub(crate) fn next(self) -> Self {
        Pos {
            rule: self.rule,
            i: self.i + 1,
        }
    }
}

/// A stack of positions still to match; the top is the last element.
pub type Stack = Vec<Pos>;

pub(crate) fn elem(rules: &[Rule], p: Pos) -> Element {
    rules[p.rule as usize][p.i as usize]
}

/// Whether `c` satisfies the char range at `pos`, and the position after the range.
pub(crate) fn match_char(rules: &[Rule], mut pos: Pos, c: u32) -> (bool, Pos) {
    let first = elem(rules, pos);
    let is_positive = matches!(first.ty, GreType::Char | GreType::CharAny);
    let mut found = false;
    loop {
        let e = elem(rules, pos);
        let next = elem(rules, pos.next());
        if next.ty == GreType::CharRngUpper {
            found = found || (e.value <= c && c <= next.value);
            pos = pos.next().next();
        } else if e.ty == GreType::CharAny {
            found = true;
            pos = pos.next();
        } else {
            found = found || e.value == c;
            pos = pos.next();
        }
        if elem(rules, pos).ty != GreType::CharAlt {
            break;
        }
    }
    (found == is_positive, pos)
}

/// Whether some completion of the partial character could satisfy the char range at `pos`.
pub(crate) fn match_partial_char(rules: &[Rule], mut pos: Pos, partial: PartialUtf8) -> bool {
    let first = elem(rules, pos);
    let is_positive = matches!(first.ty, GreType::Char | GreType::CharAny);
    let value = partial.value;
    let n_remain = partial.n_remain;
    // invalid sequence, or a 7-bit char split across 2 bytes (overlong)
    if n_remain < 0 || (n_remain == 1 && value < 2) {
        return false;
    }
    let shift = (n_remain * 6) as u32;
    let mut low = value.checked_shl(shift).unwrap_or(0);
    let high = low | ((1u32 << shift) - 1);
    if low == 0 {
        if n_remain == 2 {
            low = 1 << 11;
        } else if n_remain == 3 {
            low = 1 << 16;
        }
    }
    loop {
        let e = elem(rules, pos);
        let next = elem(rules, pos.next());
        if next.ty == GreType::CharRngUpper {
            if e.value <= high && low <= next.value {
                return is_positive;
            }
            pos = pos.next().next();
        } else if e.ty == GreType::CharAny {
            return true;
        } else {
            if low <= e.value && e.value <= high {
                return is_positive;
            }
            pos = pos.next();
        }
        if elem(rules, pos).ty != GreType::CharAlt {
            break;
        }
    }
    !is_positive
}

pub(crate) fn match_token(e: Element, token: i32) -> bool {
    match e.ty {
        GreType::Token => e.value == token as u32,
        GreType::TokenNot => e.value != token as u32,
        _ => false,
    }
}

fn push_unique(stacks: &mut Vec<Stack>, s: &Stack) {
    if !stacks.contains(s) {
        stacks.push(s.clone());
    }
}

/// `llama_grammar_advance_stack`: every stack `stack` can become by expanding rule references,
/// each ending on a terminal (or empty: the grammar may end there), appended to `new_stacks`.
pub(crate) fn advance_stack(rules: &[Rule], stack: &Stack, new_stacks: &mut Vec<Stack>) {
    let mut todo: Vec<Stack> = vec![stack.clone()];
    let mut seen: HashSet<Stack> = HashSet::new();
    while let Some(curr) = todo.pop() {
        if seen.contains(&curr) {
            continue;
        }
        let Some(&pos) = curr.last() else {
            push_unique(new_stacks, &curr);
            seen.insert(curr);
            continue;
        };
        let e = elem(rules, pos);
        match e.ty {
            GreType::RuleRef => {
                let rule_id = e.value as usize;
                let mut sub = Pos::new(rule_id, 0);
                loop {
                    let mut next_stack: Stack = curr[..curr.len() - 1].to_vec();
                    if !elem(rules, pos.next()).is_end_of_sequence() {
                        next_stack.push(pos.next());
                    }
                    if !elem(rules, sub).is_end_of_sequence() {
                        next_stack.push(sub);
                    }
                    todo.push(next_stack);
                    while !elem(rules, sub).is_end_of_sequence() {
                        sub = sub.next();
                    }
                    if elem(rules, sub).ty == GreType::Alt {
                        sub = sub.next();
                    } else {
                        break;
                    }
                }
            }
            GreType::Char
            | GreType::CharNot
            | GreType::CharAny
            | GreType::Token
            | GreType::TokenNot => push_unique(new_stacks, &curr),
            // the parser never leaves a stack on the end of an alternate or inside a range
            GreType::End | GreType::Alt | GreType::CharAlt | GreType::CharRngUpper => {}
        }
        seen.insert(curr);
    }
}

/// A token being checked against the grammar: its code points from `at` on (the list ends
/// with a 0) and the partial character it ends in.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Candidate<'a> {
    pub index: usize,
    pub cps: &'a [u32],
    pub at: usize,
    pub partial: PartialUtf8,
    pub id: i32,
}

impl Candidate<'_> {
    fn cp(&self) -> u32 {
        self.cps[self.at]
    }
}

/// `llama_grammar_reject_candidates`: the candidates no stack accepts.
pub(crate) fn reject_candidates<'a>(
    rules: &[Rule],
    stacks: &[Stack],
    candidates: &[Candidate<'a>],
) -> Vec<Candidate<'a>> {
    if candidates.is_empty() || stacks.is_empty() {
        return candidates.to_vec();
    }
    let mut rejects = reject_candidates_for_stack(rules, &stacks[0], candidates);
    for stack in &stacks[1..] {
        rejects = reject_candidates_for_stack(rules, stack, &rejects);
    }
    rejects
}

/// `llama_grammar_reject_candidates_for_stack`.
pub(crate) fn reject_candidates_for_stack<'a>(
    rules: &[Rule],
    stack: &Stack,
    candidates: &[Candidate<'a>],
) -> Vec<Candidate<'a>> {
    let mut rejects = Vec::with_capacity(candidates.len());
    let Some(&stack_pos) = stack.last() else {
        for tok in candidates {
            if tok.cp() != 0 || tok.partial.n_remain != 0 {
                rejects.push(*tok);
            }
        }
        return rejects;
    };
    let top = elem(rules, stack_pos);
    if matches!(top.ty, GreType::Token | GreType::TokenNot) {
        for tok in candidates {
            if tok.cp() == 0 {
                if tok.partial.n_remain != 0 {
                    rejects.push(*tok);
                }
            } else if tok.at > 0 || !match_token(top, tok.id) {
                // llama.cpp lets a token whose text reaches a token element midway through
                // (`"a" <[5]>` and the piece "ab") pass here, though accepting it then leaves
                // no stack and aborts; only a whole token can match a token element
                rejects.push(*tok);
            }
        }
        return rejects;
    }

    let mut next_candidates = Vec::with_capacity(candidates.len());
    for tok in candidates {
        if tok.cp() == 0 {
            if tok.partial.n_remain != 0 && !match_partial_char(rules, stack_pos, tok.partial) {
                rejects.push(*tok);
            }
        } else if match_char(rules, stack_pos, tok.cp()).0 {
            next_candidates.push(Candidate {
                at: tok.at + 1,
                ..*tok
            });
        } else {
            rejects.push(*tok);
        }
    }
    if next_candidates.is_empty() {
        return rejects;
    }

    let after = match_char(rules, stack_pos, 0).1;
    let mut stack_after: Stack = stack[..stack.len() - 1].to_vec();
    if !elem(rules, after).is_end_of_sequence() {
        stack_after.push(after);
    }
    let mut next_stacks = Vec::new();
    advance_stack(rules, &stack_after, &mut next_stacks);

    for tok in reject_candidates(rules, &next_stacks, &next_candidates) {
        rejects.push(Candidate {
            at: tok.at - 1,
            ..tok
        });
    }
    rejects
}

/// `llama_grammar_accept_chr`: the stacks `stack` becomes after matching `c`.
pub(crate) fn accept_chr(rules: &[Rule], stack: &Stack, c: u32, new_stacks: &mut Vec<Stack>) {
    let Some(&pos) = stack.last() else {
        return;
    };
    if matches!(elem(rules, pos).ty, GreType::Token | GreType::TokenNot) {
        return;
    }
    let (ok, after) = match_char(rules, pos, c);
    if ok {
        let mut new_stack: Stack = stack[..stack.len() - 1].to_vec();
        if !elem(rules, after).is_end_of_sequence() {
            new_stack.push(after);
        }
        advance_stack(rules, &new_stack, new_stacks);
    }
}
