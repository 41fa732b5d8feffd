//! `llama_grammar`: the rules, the live stacks, the partial character between tokens, and the
//! lazy-grammar trigger state; building one from text or rules, masking candidates it cannot
//! take, and advancing it by an accepted token.

use std::sync::Arc;

use super::stacks::{self, advance_stack, elem, Candidate, Pos, Stack};
use super::trigger::TriggerPattern;
use super::utf8::{decode_utf8, PartialUtf8};
use super::{growth, parser};
use super::{Element, GrammarError, GreType, Rule};
use crate::sampling::TokenDataArray;

/// What a grammar needs from a vocabulary.
pub trait GrammarVocab {
    fn n_tokens(&self) -> usize;
    /// The token's text with special tokens rendered (`token_to_piece(id, special = true)`).
    fn piece(&self, id: i32) -> Vec<u8>;
    fn is_eog(&self, id: i32) -> bool;
    /// Tokenize with special tokens parsed, nothing added (for `<token>` in a grammar).
    fn tokenize_special(&self, text: &[u8]) -> Vec<i32>;
}

impl GrammarVocab for crate::vocab::Vocab {
    fn n_tokens(&self) -> usize {
        crate::vocab::Vocab::n_tokens(self)
    }
    fn piece(&self, id: i32) -> Vec<u8> {
        self.token_to_piece(id, 0, true)
    }
    fn is_eog(&self, id: i32) -> bool {
        crate::vocab::Vocab::is_eog(self, id)
    }
    fn tokenize_special(&self, text: &[u8]) -> Vec<i32> {
        self.tokenize(text, false, true)
    }
}

/// Every token's piece, EOG flag and code points (decoded once, for the common case of no
/// character left open by the previous token); shared by clones of a grammar.
#[derive(Debug)]
pub struct GrammarTokens {
    pieces: Vec<Box<[u8]>>,
    eog: Vec<bool>,
    decoded: Vec<(Box<[u32]>, PartialUtf8)>,
}

impl GrammarTokens {
    pub fn from_vocab(vocab: &dyn GrammarVocab) -> Self {
        let n = vocab.n_tokens();
        let pieces: Vec<Box<[u8]>> = (0..n)
            .map(|id| vocab.piece(id as i32).into_boxed_slice())
            .collect();
        let decoded = pieces
            .iter()
            .map(|p| {
                let (cps, partial) = decode_utf8(p, PartialUtf8::default());
                (cps.into_boxed_slice(), partial)
            })
            .collect();
        GrammarTokens {
            eog: (0..n).map(|id| vocab.is_eog(id as i32)).collect(),
            pieces,
            decoded,
        }
    }

    /// The piece of `id`; empty for an id outside the vocabulary.
    pub fn piece(&self, id: i32) -> &[u8] {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.pieces.get(i))
            .map_or(&[][..], |p| p)
    }

    pub fn is_eog(&self, id: i32) -> bool {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.eog.get(i))
            .copied()
            .unwrap_or(false)
    }
}

#[derive(Clone, Debug)]
pub struct Grammar {
    tokens: Option<Arc<GrammarTokens>>,
    rules: Arc<Vec<Rule>>,
    stacks: Vec<Stack>,
    partial_utf8: PartialUtf8,
    lazy: bool,
    awaiting_trigger: bool,
    trigger_buffer: Vec<u8>,
    trigger_buffer_positions: Vec<(i32, (usize, usize))>,
    trigger_tokens: Vec<i32>,
    trigger_patterns: Vec<TriggerPattern>,
}

/// Logs an error as llama.cpp does and returns it.
fn fail(msg: String) -> GrammarError {
    ggml::log_error!("{msg}\n");
    GrammarError(msg)
}

impl Grammar {
    /// `llama_grammar_init_impl` from text: parse, find `root`, refuse left recursion, and
    /// build the initial stacks. A lazy grammar waits for one of the trigger tokens or for a
    /// trigger pattern to match the generated text. Failures are logged with llama.cpp's
    /// messages (the parse error on stderr with the grammar text).
    pub fn new(
        vocab: Option<&dyn GrammarVocab>,
        src: &str,
        root: &str,
        lazy: bool,
        trigger_patterns: &[String],
        trigger_tokens: &[i32],
    ) -> Result<Self, GrammarError> {
        let parsed = match parser::parse(src, vocab) {
            Ok(p) if !p.rules.is_empty() => p,
            Ok(_) => return Err(fail("failed to parse grammar".into())),
            Err(e) => {
                eprint!("parse: error parsing grammar: {e}\n\n{src}\n");
                ggml::log_error!("failed to parse grammar\n");
                return Err(GrammarError(format!("failed to parse grammar: {e}")));
            }
        };
        let Some(&start) = parsed.symbol_ids.get(root) else {
            return Err(fail(format!("grammar does not contain a '{root}' symbol")));
        };
        let rules = parsed.rules;
        if let Some(i) = find_left_recursion(&rules)
            .or_else(|| growth::find_unbounded_expansion(&rules, start as usize))
        {
            return Err(fail(format!(
                "unsupported grammar, left recursion detected for nonterminal at index {i}"
            )));
        }
        let patterns = trigger_patterns
            .iter()
            .map(|p| TriggerPattern::new(p).map_err(|e| fail(e.0)))
            .collect::<Result<Vec<_>, _>>()?;
        let stacks = initial_stacks(&rules, start as usize);
        Ok(Grammar {
            tokens: vocab.map(|v| Arc::new(GrammarTokens::from_vocab(v))),
            rules: Arc::new(rules),
            stacks,
            partial_utf8: PartialUtf8::default(),
            lazy,
            awaiting_trigger: lazy,
            trigger_buffer: Vec::new(),
            trigger_buffer_positions: Vec::new(),
            trigger_tokens: trigger_tokens.to_vec(),
            trigger_patterns: patterns,
        })
    }

    /// `llama_grammar_init_impl` from rules (each read up to its End), starting at rule
    /// `start`: every reference must name a rule, and no rule may be left-recursive.
    pub fn from_rules(
        tokens: Option<Arc<GrammarTokens>>,
        rules: &[Rule],
        start: usize,
    ) -> Result<Self, GrammarError> {
        let rules: Vec<Rule> = rules
            .iter()
            .map(|r| {
                let mut v: Rule = r
                    .iter()
                    .take_while(|e| e.ty != GreType::End)
                    .copied()
                    .collect();
                v.push(Element::new(GreType::End, 0));
                v
            })
            .collect();
        for (i, rule) in rules.iter().enumerate() {
            for e in rule {
                if e.ty == GreType::RuleRef && e.value as usize >= rules.len() {
                    return Err(fail(format!(
                        "invalid grammar: rule {i} references undefined rule {}",
                        e.value
                    )));
                }
            }
        }
        if start >= rules.len() {
            return Err(GrammarError(format!("start rule {start} does not exist")));
        }
        if let Some(i) =
            find_left_recursion(&rules).or_else(|| growth::find_unbounded_expansion(&rules, start))
        {
            return Err(fail(format!(
                "unsupported grammar, left recursion detected for nonterminal at index {i}"
            )));
        }
        let stacks = initial_stacks(&rules, start);
        Ok(Grammar {
            tokens,
            rules: Arc::new(rules),
            stacks,
            partial_utf8: PartialUtf8::default(),
            lazy: false,
            awaiting_trigger: false,
            trigger_buffer: Vec::new(),
            trigger_buffer_positions: Vec::new(),
            trigger_tokens: Vec::new(),
            trigger_patterns: Vec::new(),
        })
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn stacks(&self) -> &[Stack] {
        &self.stacks
    }

    pub fn set_stacks(&mut self, stacks: Vec<Stack>) {
        self.stacks = stacks;
    }

    pub fn partial_utf8(&self) -> PartialUtf8 {
        self.partial_utf8
    }

    pub fn is_lazy(&self) -> bool {
        self.lazy
    }

    pub fn awaiting_trigger(&self) -> bool {
        self.awaiting_trigger
    }

    /// Whether the grammar may end here (some stack is empty).
    pub fn can_end(&self) -> bool {
        self.stacks.iter().any(|s| s.is_empty())
    }

    /// `llama_grammar_apply_impl`: set to -inf the logit of every candidate the grammar
    /// cannot take next (EOG only where the grammar may end, and never an empty piece).
    pub fn apply(&self, cur: &mut TokenDataArray) -> Result<(), GrammarError> {
        let Some(tokens) = &self.tokens else {
            return Err(GrammarError::new("the grammar has no vocabulary to apply"));
        };
        if self.awaiting_trigger {
            return Ok(());
        }
        let allow_eog = self.can_end();
        let cached = self.partial_utf8.n_remain == 0;
        let mut owned: Vec<(usize, Vec<u32>, PartialUtf8)> = Vec::new();
        let mut borrowed: Vec<usize> = Vec::new();
        for (i, t) in cur.data.iter_mut().enumerate() {
            let piece = tokens.piece(t.id);
            if tokens.is_eog(t.id) {
                if !allow_eog {
                    t.logit = f32::NEG_INFINITY;
                }
            } else if matches!(piece.first(), None | Some(0)) {
                t.logit = f32::NEG_INFINITY;
            } else if cached {
                borrowed.push(i);
            } else {
                let (cps, partial) = decode_utf8(piece, self.partial_utf8);
                owned.push((i, cps, partial));
            }
        }
        let mut candidates: Vec<Candidate> = Vec::with_capacity(borrowed.len() + owned.len());
        for &i in &borrowed {
            let id = cur.data[i].id;
            let (cps, partial) = &tokens.decoded[id as usize];
            candidates.push(Candidate {
                index: i,
                cps,
                at: 0,
                partial: *partial,
                id,
            });
        }
        for (i, cps, partial) in &owned {
            candidates.push(Candidate {
                index: *i,
                cps,
                at: 0,
                partial: *partial,
                id: cur.data[*i].id,
            });
        }
        for r in stacks::reject_candidates(&self.rules, &self.stacks, &candidates) {
            cur.data[r.index].logit = f32::NEG_INFINITY;
        }
        Ok(())
    }

    /// `llama_grammar_accept_impl`: advance by a sampled token. A lazy grammar buffers text
    /// until a trigger, then replays the triggering text. EOG is taken only where the grammar
    /// may end (llama.cpp aborts otherwise).
    pub fn accept(&mut self, token: i32) -> Result<(), GrammarError> {
        let Some(tokens) = self.tokens.clone() else {
            return Err(GrammarError::new(
                "the grammar has no vocabulary to accept tokens",
            ));
        };
        let piece = tokens.piece(token);
        if self.awaiting_trigger {
            if self.trigger_tokens.contains(&token) {
                self.awaiting_trigger = false;
                self.trigger_buffer.clear();
                self.accept_token(token, piece)?;
                ggml::log_debug!(
                    "Grammar triggered on token {} (`{}`)",
                    token,
                    String::from_utf8_lossy(piece)
                );
                return Ok(());
            }
            let start = self.trigger_buffer.len();
            self.trigger_buffer_positions
                .push((token, (start, start + piece.len())));
            self.trigger_buffer.extend_from_slice(piece);
            let found = self
                .trigger_patterns
                .iter()
                .find_map(|p| p.find(&self.trigger_buffer));
            if let Some(start) = found {
                self.awaiting_trigger = false;
                let buffer = std::mem::take(&mut self.trigger_buffer);
                let positions = std::mem::take(&mut self.trigger_buffer_positions);
                for (tok, (tok_start, tok_end)) in positions {
                    if tok_end <= start {
                        continue;
                    }
                    let piece_start = tok_start.max(start);
                    self.accept_token(tok, &buffer[piece_start..tok_end])?;
                }
                ggml::log_debug!(
                    "Grammar triggered on regex: '{}'\n",
                    String::from_utf8_lossy(&buffer[start..])
                );
                return Ok(());
            }
            ggml::log_debug!(
                "Grammar still awaiting trigger after token {} (`{}`)\n",
                token,
                String::from_utf8_lossy(piece)
            );
            return Ok(());
        }
        if tokens.is_eog(token) {
            if self.can_end() {
                return Ok(());
            }
            return Err(GrammarError::new(format!(
                "the grammar cannot end here, but the end-of-generation token {token} was accepted"
            )));
        }
        self.accept_token(token, piece)
    }

    /// `llama_grammar_accept_token`: advance by a token and its text (token elements match
    /// the id, char elements the text).
    pub fn accept_token(&mut self, token: i32, piece: &[u8]) -> Result<(), GrammarError> {
        let (cps, partial) = decode_utf8(piece, self.partial_utf8);
        let cps = &cps[..cps.len() - 1];
        let rules = &self.rules;
        let mut stacks_new: Vec<Stack> = Vec::with_capacity(self.stacks.len());
        for stack in &self.stacks {
            let Some(&pos) = stack.last() else {
                continue;
            };
            let e = elem(rules, pos);
            if matches!(e.ty, GreType::Token | GreType::TokenNot) {
                if stacks::match_token(e, token) {
                    let mut new_stack: Stack = stack[..stack.len() - 1].to_vec();
                    if !elem(rules, pos.next()).is_end_of_sequence() {
                        new_stack.push(pos.next());
                    }
                    advance_stack(rules, &new_stack, &mut stacks_new);
                }
                continue;
            }
            let mut current = vec![stack.clone()];
            for &c in cps {
                let mut next = Vec::new();
                for s in &current {
                    stacks::accept_chr(rules, s, c, &mut next);
                }
                current = next;
                if current.is_empty() {
                    break;
                }
            }
            for s in current {
                if !stacks_new.contains(&s) {
                    stacks_new.push(s);
                }
            }
        }
        self.stacks = stacks_new;
        self.partial_utf8 = partial;
        if self.stacks.is_empty() {
            return Err(GrammarError(format!(
                "Unexpected empty grammar stack after accepting piece: {} ({token})",
                String::from_utf8_lossy(piece)
            )));
        }
        Ok(())
    }

    /// `llama_grammar_accept_str`: advance by text alone.
    pub fn accept_str(&mut self, piece: &[u8]) -> Result<(), GrammarError> {
        let (cps, partial) = decode_utf8(piece, self.partial_utf8);
        for &c in &cps[..cps.len() - 1] {
            self.accept_chr(c);
        }
        self.partial_utf8 = partial;
        if self.stacks.is_empty() {
            return Err(GrammarError(format!(
                "Unexpected empty grammar stack after accepting piece: {}",
                String::from_utf8_lossy(piece)
            )));
        }
        Ok(())
    }

    /// `llama_grammar_accept`: advance every stack by one code point (stacks that cannot take
    /// it are dropped).
    pub fn accept_chr(&mut self, c: u32) {
        let mut new_stacks = Vec::with_capacity(self.stacks.len());
        for stack in &self.stacks {
            stacks::accept_chr(&self.rules, stack, c, &mut new_stacks);
        }
        self.stacks = new_stacks;
    }
}

/// The stacks of each alternate of the start rule, advanced to their first terminals.
fn initial_stacks(rules: &[Rule], start: usize) -> Vec<Stack> {
    let mut stacks = Vec::new();
    let mut pos = Pos::new(start, 0);
    loop {
        let mut stack = Stack::new();
        if !elem(rules, pos).is_end_of_sequence() {
            stack.push(pos);
        }
        advance_stack(rules, &stack, &mut stacks);
        while !elem(rules, pos).is_end_of_sequence() {
            pos = pos.next();
        }
        if elem(rules, pos).ty == GreType::Alt {
            pos = pos.next();
        } else {
            break;
        }
    }
    stacks
}

/// `llama_grammar_detect_left_recursion` over all rules: the first rule index (in order) from
/// which a left-recursive cycle is reached. Iterative, so a long chain of rules cannot
/// overflow the stack; a rule already cleared is not walked again (the answer is the same as
/// llama.cpp's re-walk, without its exponential cost on shared sub-rules).
pub(crate) fn find_left_recursion(rules: &[Rule]) -> Option<usize> {
    let n = rules.len();
    let mut visited = vec![false; n];
    let mut in_progress = vec![false; n];
    let mut may_be_empty = vec![false; n];

    struct Frame {
        rule: usize,
        i: usize,
        recurse: bool,
    }

    let enter = |r: usize, in_progress: &mut Vec<bool>, may_be_empty: &mut Vec<bool>| {
        in_progress[r] = true;
        let mut at_rule_start = true;
        for e in &rules[r] {
            if e.is_end_of_sequence() {
                if at_rule_start {
                    may_be_empty[r] = true;
                    break;
                }
                at_rule_start = true;
            } else {
                at_rule_start = false;
            }
        }
    };

    for root in 0..n {
        if visited[root] {
            continue;
        }
        enter(root, &mut in_progress, &mut may_be_empty);
        let mut frames = vec![Frame {
            rule: root,
            i: 0,
            recurse: true,
        }];
        while let Some(f) = frames.last_mut() {
            let rule = &rules[f.rule];
            if f.i >= rule.len() {
                in_progress[f.rule] = false;
                visited[f.rule] = true;
                frames.pop();
                if let Some(parent) = frames.last_mut() {
                    let child = rules[parent.rule][parent.i].value as usize;
                    if !may_be_empty[child] {
                        parent.recurse = false;
                    }
                    parent.i += 1;
                }
                continue;
            }
            let e = rule[f.i];
            if e.ty == GreType::RuleRef && f.recurse {
                let child = e.value as usize;
                if in_progress[child] {
                    return Some(root);
                }
                if visited[child] {
                    if !may_be_empty[child] {
                        f.recurse = false;
                    }
                    f.i += 1;
                    continue;
                }
                enter(child, &mut in_progress, &mut may_be_empty);
                frames.push(Frame {
                    rule: child,
                    i: 0,
                    recurse: true,
                });
                continue;
            }
            f.recurse = e.is_end_of_sequence();
            f.i += 1;
        }
    }
    None
}
