//! The grammar sampler (`llama_sampler_init_grammar` / `_lazy` / `_lazy_patterns`) and the way
//! `common_sampler_sample` uses it: the grammar is not a member of the chain; the chain samples
//! first, the grammar checks the chosen token, and only if it refuses is the grammar applied to
//! all candidates and the chain run again.

use super::array::{TokenData, TokenDataArray};
use super::chain::Chain;
use super::Sampler;
use crate::grammar::{trigger_words_pattern, Grammar, GrammarError, GrammarVocab};

/// `llama_sampler_grammar`: a grammar and the state it resets to. An empty grammar text gives
/// a sampler that constrains nothing, as llama.cpp's does.
#[derive(Clone, Debug)]
pub struct GrammarSampler {
    grammar: Option<Grammar>,
    initial: Option<Grammar>,
}

impl GrammarSampler {
    /// `llama_sampler_init_grammar`.
    pub fn new(vocab: &dyn GrammarVocab, src: &str, root: &str) -> Result<Self, GrammarError> {
        Self::build(vocab, src, root, false, &[], &[])
    }

    /// `llama_sampler_init_grammar_lazy`: waits for one of the words (matched anywhere in the
    /// generated text) or tokens.
    pub fn lazy(
        vocab: &dyn GrammarVocab,
        src: &str,
        root: &str,
        trigger_words: &[&str],
        trigger_tokens: &[i32],
    ) -> Result<Self, GrammarError> {
        let patterns = if trigger_words.is_empty() {
            Vec::new()
        } else {
            vec![trigger_words_pattern(trigger_words)]
        };
        Self::build(vocab, src, root, true, &patterns, trigger_tokens)
    }

    /// `llama_sampler_init_grammar_lazy_patterns`: waits for a token or for a pattern to match
    /// the generated text; the grammar then takes the text from the pattern's first group on.
    pub fn lazy_patterns(
        vocab: &dyn GrammarVocab,
        src: &str,
        root: &str,
        trigger_tokens: &[i32],
        trigger_patterns: &[String],
    ) -> Result<Self, GrammarError> {
        Self::build(vocab, src, root, true, trigger_patterns, trigger_tokens)
    }

    fn build(
        vocab: &dyn GrammarVocab,
        src: &str,
        root: &str,
        lazy: bool,
        patterns: &[String],
        tokens: &[i32],
    ) -> Result<Self, GrammarError> {
        if src.is_empty() {
            return Ok(GrammarSampler {
                grammar: None,
                initial: None,
            });
        }
        let g = Grammar::new(Some(vocab), src, root, lazy, patterns, tokens)?;
        Ok(GrammarSampler {
            initial: Some(g.clone()),
            grammar: Some(g),
        })
    }

    pub fn name(&self) -> &str {
        "grammar"
    }

    pub fn grammar(&self) -> Option<&Grammar> {
        self.grammar.as_ref()
    }

    /// Masks (logit -inf) the candidates the grammar cannot take.
    pub fn apply(&self, cur: &mut TokenDataArray) {
        if let Some(g) = &self.grammar {
            // a grammar built with a vocabulary always applies
            let _ = g.apply(cur);
        }
    }

    /// Advances the grammar by the chosen token. Fails where llama.cpp throws or aborts: the
    /// token leaves no way to continue, or EOG comes where the grammar cannot end.
    pub fn accept(&mut self, token: i32) -> Result<(), GrammarError> {
        match &mut self.grammar {
            Some(g) => g.accept(token),
            None => Ok(()),
        }
    }

    /// Back to the state after building (llama.cpp re-parses the same text).
    pub fn reset(&mut self) {
        self.grammar = self.initial.clone();
    }
}

/// `common_sampler_sample` without a backend sampler or reasoning budget: the chain picks from
/// the raw candidates; with `grammar_first` (or no grammar) that pick stands. Otherwise the
/// grammar checks the pick alone, and if it refuses, the candidates are rebuilt, the grammar
/// masks them and the chain picks again (its RNG having moved on, as in llama.cpp).
pub fn sample_with_grammar(
    chain: &mut Chain,
    grammar: Option<&GrammarSampler>,
    logits: &[f32],
    grammar_first: bool,
) -> Option<i32> {
    let mut cur = TokenDataArray::from_logits(logits);
    if grammar_first {
        if let Some(g) = grammar {
            g.apply(&mut cur);
        }
    }
    chain.apply(&mut cur);
    let id = cur.selected_id()?;
    let Some(g) = grammar.filter(|_| !grammar_first) else {
        return Some(id);
    };
    let mut single = TokenDataArray {
        data: vec![TokenData {
            id,
            logit: 1.0,
            p: 0.0,
        }],
        selected: -1,
        sorted: false,
    };
    g.apply(&mut single);
    if single.data[0].logit != f32::NEG_INFINITY {
        return Some(id);
    }
    let mut cur = TokenDataArray::from_logits(logits);
    g.apply(&mut cur);
    chain.apply(&mut cur);
    cur.selected_id()
}

#[cfg(test)]
mod tests {
    use super::super::{dist, greedy};
    use super::*;

    struct Letters;
    impl GrammarVocab for Letters {
        fn n_tokens(&self) -> usize {
            4
        }
        fn piece(&self, id: i32) -> Vec<u8> {
            ["</s>", "a", "b", "ab"][id as usize].as_bytes().to_vec()
        }
        fn is_eog(&self, id: i32) -> bool {
            id == 0
        }
        fn tokenize_special(&self, _text: &[u8]) -> Vec<i32> {
            Vec::new()
        }
    }

    #[test]
    fn a_refused_pick_is_resampled_under_the_grammar() {
        let mut g = GrammarSampler::new(&Letters, "root ::= \"b\"+", "root").unwrap();
        let mut chain = Chain::new(true).with(greedy());
        // greedy wants "a" (id 1); the grammar only allows "b"
        let logits = [0.0, 5.0, 1.0, 2.0];
        assert_eq!(
            sample_with_grammar(&mut chain, Some(&g), &logits, false),
            Some(2)
        );
        g.accept(2).unwrap();
        // now EOG is allowed too and wins over "b"
        let logits = [3.0, 5.0, 1.0, 2.0];
        assert_eq!(
            sample_with_grammar(&mut chain, Some(&g), &logits, false),
            Some(0)
        );
        assert_eq!(
            sample_with_grammar(&mut chain, None, &logits, false),
            Some(1)
        );
        g.reset();
        assert!(!g.grammar().unwrap().can_end());
    }

    #[test]
    fn grammar_first_masks_before_the_chain() {
        let g = GrammarSampler::new(&Letters, "root ::= \"ab\"", "root").unwrap();
        let mut chain = Chain::new(true).with(dist(7));
        for _ in 0..20 {
            let id = sample_with_grammar(&mut chain, Some(&g), &[0.0, 0.0, 0.0, 0.0], true);
            assert!(matches!(id, Some(1) | Some(3)), "{id:?}");
        }
    }

    #[test]
    fn an_empty_grammar_constrains_nothing_and_a_bad_one_fails() {
        let mut g = GrammarSampler::new(&Letters, "", "root").unwrap();
        assert!(g.grammar().is_none());
        assert!(g.accept(1).is_ok());
        assert_eq!(g.name(), "grammar");
        assert!(GrammarSampler::new(&Letters, "root ::= (", "root").is_err());
        assert!(GrammarSampler::lazy(&Letters, "root ::= \"b\"", "root", &["x"], &[]).is_ok());
    }
}
