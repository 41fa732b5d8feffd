//! Left recursion that llama.cpp's check lets through: a recursive reference reached after
//! rules that match only through their own sub-rules' empty alternatives (`root ::= ("a"*) root
//! ("a"*)`: the group's rule has no empty alternative itself, so `llama_grammar_detect_left_
//! recursion`'s may-be-empty test says no). When such a reference is followed by more of its
//! alternative, every expansion of the stacks pushes that remainder and reaches the reference
//! again without consuming input, so llama.cpp's advance_stack grows its stacks until memory
//! runs out. We refuse those grammars with llama.cpp's left-recursion message. The same cycle
//! through references in tail position leaves the stacks as they were (the seen set ends it),
//! so those grammars stay accepted, as llama.cpp accepts them.

use super::{GreType, Rule};

/// A rule index (reachable from `start`) on a cycle of references, each reached without
/// consuming input, at least one of them followed by more of its alternative; None if there is
/// no such cycle.
pub(crate) fn find_unbounded_expansion(rules: &[Rule], start: usize) -> Option<usize> {
    let n = rules.len();
    let nullable = nullable_rules(rules);
    // edges[r]: (s, grows) for each reference to s that r can reach without consuming input;
    // grows when more of the alternative follows it (the expansion pushes that position)
    let mut edges: Vec<Vec<(usize, bool)>> = vec![Vec::new(); n];
    for (r, rule) in rules.iter().enumerate() {
        let mut at_prefix = true;
        for (i, e) in rule.iter().enumerate() {
            if e.is_end_of_sequence() {
                at_prefix = true;
                continue;
            }
            if !at_prefix {
                continue;
            }
            if e.ty == GreType::RuleRef && (e.value as usize) < n {
                let s = e.value as usize;
                let grows = rule.get(i + 1).is_some_and(|x| !x.is_end_of_sequence());
                edges[r].push((s, grows));
                at_prefix = nullable[s];
            } else {
                at_prefix = false;
            }
        }
    }
    let reachable = reachable_from(rules, start);
    for r in (0..n).filter(|&r| reachable[r]) {
        for &(s, grows) in &edges[r] {
            if grows && reaches(&edges, s, r) {
                return Some(r);
            }
        }
    }
    None
}

/// Rules that can match the empty string: an alternative of only such rules' references (or
/// none at all), to a fixed point.
fn nullable_rules(rules: &[Rule]) -> Vec<bool> {
    let n = rules.len();
    let mut nullable = vec![false; n];
    loop {
        let mut changed = false;
        for (r, rule) in rules.iter().enumerate() {
            if nullable[r] {
                continue;
            }
            let mut all = true;
            for e in rule {
                if e.is_end_of_sequence() {
                    if all {
                        nullable[r] = true;
                        changed = true;
                        break;
                    }
                    all = true;
                } else if !(e.ty == GreType::RuleRef
                    && (e.value as usize) < n
                    && nullable[e.value as usize])
                {
                    all = false;
                }
            }
        }
        if !changed {
            return nullable;
        }
    }
}

fn reachable_from(rules: &[Rule], start: usize) -> Vec<bool> {
    let mut seen = vec![false; rules.len()];
    let mut todo = vec![start];
    while let Some(r) = todo.pop() {
        if r >= rules.len() || seen[r] {
            continue;
        }
        seen[r] = true;
        for e in &rules[r] {
            if e.ty == GreType::RuleRef {
                todo.push(e.value as usize);
            }
        }
    }
    seen
}

/// Whether `to` is reached from `from` over the no-input edges.
fn reaches(edges: &[Vec<(usize, bool)>], from: usize, to: usize) -> bool {
    let mut seen = vec![false; edges.len()];
    let mut todo = vec![from];
    while let Some(r) = todo.pop() {
        if r == to {
            return true;
        }
        if seen[r] {
            continue;
        }
        seen[r] = true;
        todo.extend(edges[r].iter().map(|&(s, _)| s));
    }
    false
}
