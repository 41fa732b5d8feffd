//! `common_params_sampling` with llama.cpp's defaults, its "sampler params:" text, and the
//! chain `common_sampler_init` builds from it.

use super::{
    adaptive_p, dist, dry, logit_bias, min_p, mirostat, mirostat_v2, penalties, temp, temp_ext,
    top_k, top_n_sigma, top_p, typical, xtc, Chain, GrammarSampler, DEFAULT_SEED,
};
use crate::grammar::{GrammarError, GrammarVocab};

/// What the samplers that read text need from a vocabulary (DRY's breakers, EOG biases).
pub trait TokenText {
    fn n_tokens(&self) -> usize;
    /// The token's text with special tokens rendered (`detokenize({id}, true)`).
    fn token_text(&self, id: i32) -> Vec<u8>;
    /// Tokenize without adding or parsing special tokens.
    fn tokenize(&self, text: &[u8]) -> Vec<i32>;
    fn is_eog(&self, id: i32) -> bool;
}

/// `common_sampler_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SamplerType {
    Dry,
    TopK,
    TopP,
    MinP,
    TypicalP,
    Temperature,
    Xtc,
    Infill,
    Penalties,
    TopNSigma,
    AdaptiveP,
}

impl SamplerType {
    pub fn to_chr(self) -> char {
        match self {
            SamplerType::Dry => 'd',
            SamplerType::TopK => 'k',
            SamplerType::TypicalP => 'y',
            SamplerType::TopP => 'p',
            SamplerType::TopNSigma => 's',
            SamplerType::MinP => 'm',
            SamplerType::Temperature => 't',
            SamplerType::Xtc => 'x',
            SamplerType::Infill => 'i',
            SamplerType::Penalties => 'e',
            SamplerType::AdaptiveP => 'a',
        }
    }

    pub fn to_str(self) -> &'static str {
        match self {
            SamplerType::Dry => "dry",
            SamplerType::TopK => "top_k",
            SamplerType::TypicalP => "typ_p",
            SamplerType::TopP => "top_p",
            SamplerType::TopNSigma => "top_n_sigma",
            SamplerType::MinP => "min_p",
            SamplerType::Temperature => "temperature",
            SamplerType::Xtc => "xtc",
            SamplerType::Infill => "infill",
            SamplerType::Penalties => "penalties",
            SamplerType::AdaptiveP => "adaptive_p",
        }
    }

    const ALL: [SamplerType; 11] = [
        SamplerType::Dry,
        SamplerType::TopK,
        SamplerType::TopP,
        SamplerType::TopNSigma,
        SamplerType::TypicalP,
        SamplerType::MinP,
        SamplerType::Temperature,
        SamplerType::Xtc,
        SamplerType::Infill,
        SamplerType::Penalties,
        SamplerType::AdaptiveP,
    ];

    /// `common_sampler_types_from_names`; the alternative spellings ("top-k", "nucleus", ...)
    /// only with `allow_alt`. Unknown names are reported and skipped, as llama.cpp does.
    pub fn from_names(names: &[&str], allow_alt: bool) -> Vec<SamplerType> {
        let mut out = Vec::new();
        for &name in names {
            if let Some(t) = Self::ALL.iter().find(|t| t.to_str() == name) {
                out.push(*t);
                continue;
            }
            if allow_alt {
                let alt = match name {
                    "top-k" => Some(SamplerType::TopK),
                    "top-p" | "nucleus" => Some(SamplerType::TopP),
                    "top-n-sigma" => Some(SamplerType::TopNSigma),
                    "typical-p" | "typical" | "typ-p" | "typ" => Some(SamplerType::TypicalP),
                    "min-p" => Some(SamplerType::MinP),
                    "temp" => Some(SamplerType::Temperature),
                    "adaptive-p" => Some(SamplerType::AdaptiveP),
                    _ => None,
                };
                if let Some(t) = alt {
                    out.push(t);
                    continue;
                }
            }
            ggml::log_warn!(
                "{}: unable to match sampler by name '{}'\n",
                "common_sampler_types_from_names",
                name
            );
        }
        out
    }

    /// `common_sampler_types_from_chars`.
    pub fn from_chars(chars: &str) -> Vec<SamplerType> {
        let mut out = Vec::new();
        for c in chars.chars() {
            match Self::ALL.iter().find(|t| t.to_chr() == c) {
                Some(t) => out.push(*t),
                None => ggml::log_warn!(
                    "{}: unable to match sampler by char '{}'\n",
                    "common_sampler_types_from_chars",
                    c
                ),
            }
        }
        out
    }
}

/// `common_grammar_trigger_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrammarTriggerType {
    Token,
    Word,
    Pattern,
    PatternFull,
}

/// `common_grammar_trigger`: what wakes a lazy grammar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrammarTrigger {
    pub ty: GrammarTriggerType,
    pub value: String,
    /// The token, for [`GrammarTriggerType::Token`].
    pub token: i32,
}

/// `common_params_sampling`.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingParams {
    pub seed: u32,
    pub n_prev: i32,
    pub n_probs: i32,
    pub min_keep: i32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub xtc_probability: f32,
    pub xtc_threshold: f32,
    pub typ_p: f32,
    pub temp: f32,
    pub dynatemp_range: f32,
    pub dynatemp_exponent: f32,
    pub penalty_last_n: i32,
    pub penalty_repeat: f32,
    pub penalty_freq: f32,
    pub penalty_present: f32,
    pub dry_multiplier: f32,
    pub dry_base: f32,
    pub dry_allowed_length: i32,
    pub dry_penalty_last_n: i32,
    pub mirostat: i32,
    pub top_n_sigma: f32,
    pub mirostat_tau: f32,
    pub mirostat_eta: f32,
    pub adaptive_target: f32,
    pub adaptive_decay: f32,
    pub ignore_eos: bool,
    pub no_perf: bool,
    pub dry_sequence_breakers: Vec<String>,
    pub samplers: Vec<SamplerType>,
    pub logit_bias: Vec<(i32, f32)>,
    pub logit_bias_eog: Vec<(i32, f32)>,
    /// GBNF text (`--grammar`, `--grammar-file`, or converted from `-j` / `-jf`); empty for
    /// none.
    pub grammar: String,
    /// Whether the grammar waits for one of `grammar_triggers`.
    pub grammar_lazy: bool,
    pub grammar_triggers: Vec<GrammarTrigger>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            seed: DEFAULT_SEED,
            n_prev: 64,
            n_probs: 0,
            min_keep: 0,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            xtc_probability: 0.0,
            xtc_threshold: 0.10,
            typ_p: 1.0,
            temp: 0.80,
            dynatemp_range: 0.0,
            dynatemp_exponent: 1.0,
            penalty_last_n: 64,
            penalty_repeat: 1.0,
            penalty_freq: 0.0,
            penalty_present: 0.0,
            dry_multiplier: 0.0,
            dry_base: 1.75,
            dry_allowed_length: 2,
            dry_penalty_last_n: 64,
            mirostat: 0,
            top_n_sigma: -1.0,
            mirostat_tau: 5.0,
            mirostat_eta: 0.1,
            adaptive_target: -1.0,
            adaptive_decay: 0.90,
            ignore_eos: false,
            no_perf: false,
            dry_sequence_breakers: vec!["\n".into(), ":".into(), "\"".into(), "*".into()],
            samplers: vec![
                SamplerType::Penalties,
                SamplerType::Dry,
                SamplerType::TopNSigma,
                SamplerType::TopK,
                SamplerType::TypicalP,
                SamplerType::TopP,
                SamplerType::MinP,
                SamplerType::Xtc,
                SamplerType::Temperature,
            ],
            logit_bias: Vec::new(),
            logit_bias_eog: Vec::new(),
            grammar: String::new(),
            grammar_lazy: false,
            grammar_triggers: Vec::new(),
        }
    }
}

/// Why a chain could not be built from the parameters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SamplingError {
    #[error("unknown mirostat version {0}")]
    Mirostat(i32),
    #[error("the {0} sampler is not supported")]
    Unsupported(&'static str),
}

impl SamplingParams {
    /// `common_params_sampling::print`: the four tab-indented lines after "sampler params: ".
    pub fn print(&self) -> String {
        format!(
            "\trepeat_last_n = {}, repeat_penalty = {:.3}, frequency_penalty = {:.3}, presence_penalty = {:.3}\n\
             \tdry_multiplier = {:.3}, dry_base = {:.3}, dry_allowed_length = {}, dry_penalty_last_n = {}\n\
             \ttop_k = {}, top_p = {:.3}, min_p = {:.3}, xtc_probability = {:.3}, xtc_threshold = {:.3}, typical_p = {:.3}, top_n_sigma = {:.3}, temp = {:.3}\n\
             \tmirostat = {}, mirostat_lr = {:.3}, mirostat_ent = {:.3}, adaptive_target = {:.3}, adaptive_decay = {:.3}",
            self.penalty_last_n,
            self.penalty_repeat,
            self.penalty_freq,
            self.penalty_present,
            self.dry_multiplier,
            self.dry_base,
            self.dry_allowed_length,
            self.dry_penalty_last_n,
            self.top_k,
            self.top_p,
            self.min_p,
            self.xtc_probability,
            self.xtc_threshold,
            self.typ_p,
            self.top_n_sigma,
            self.temp,
            self.mirostat,
            self.mirostat_eta,
            self.mirostat_tau,
            self.adaptive_target,
            self.adaptive_decay
        )
    }

    /// The `--samplers` string form ("penalties;dry;...") of the configured order.
    pub fn samplers_string(&self) -> String {
        self.samplers
            .iter()
            .map(|s| s.to_str())
            .collect::<Vec<_>>()
            .join(";")
    }

    /// The grammar sampler of `common_sampler_init`: None without a grammar. Trigger words are
    /// escaped into patterns, full patterns anchored, tokens kept; a lazy grammar waits for
    /// them. A grammar that does not build fails with llama.cpp's "failed to parse grammar"
    /// (its cause already logged).
    pub fn build_grammar(
        &self,
        vocab: &dyn GrammarVocab,
    ) -> Result<Option<GrammarSampler>, GrammarError> {
        if self.grammar.is_empty() {
            return Ok(None);
        }
        if self.grammar.starts_with("%llguidance") {
            return Err(GrammarError(
                "failed to parse grammar: llguidance is not enabled".into(),
            ));
        }
        let mut patterns = Vec::new();
        let mut tokens = Vec::new();
        for t in &self.grammar_triggers {
            match t.ty {
                GrammarTriggerType::Word => patterns.push(regex_escape(&t.value)),
                GrammarTriggerType::Pattern => patterns.push(t.value.clone()),
                GrammarTriggerType::PatternFull => {
                    let p = &t.value;
                    patterns.push(if p.is_empty() {
                        "^$".to_string()
                    } else {
                        format!(
                            "{}{p}{}",
                            if p.starts_with('^') { "" } else { "^" },
                            if p.ends_with('$') { "" } else { "$" }
                        )
                    });
                }
                GrammarTriggerType::Token => tokens.push(t.token),
            }
        }
        let built = if self.grammar_lazy {
            GrammarSampler::lazy_patterns(vocab, &self.grammar, "root", &tokens, &patterns)
        } else {
            GrammarSampler::new(vocab, &self.grammar, "root")
        };
        built
            .map(Some)
            .map_err(|_| GrammarError("failed to parse grammar".into()))
    }

    /// `common_sampler_init`: logit-bias first when any bias is set, then either the configured
    /// order ending in dist, or temp + mirostat.
    pub fn build_chain(
        &self,
        vocab: &dyn TokenText,
        n_ctx_train: i32,
    ) -> Result<Chain, SamplingError> {
        let mut chain = Chain::new(self.no_perf);
        let min_keep = self.min_keep.max(0) as usize;
        if !self.logit_bias.is_empty() {
            chain.add(logit_bias(&self.logit_bias));
        }
        match self.mirostat {
            0 => {
                let mut use_adaptive_p = false;
                for s in &self.samplers {
                    match s {
                        SamplerType::Dry => chain.add(dry(
                            vocab,
                            n_ctx_train,
                            self.dry_multiplier,
                            self.dry_base,
                            self.dry_allowed_length,
                            self.dry_penalty_last_n,
                            &self.dry_sequence_breakers,
                        )),
                        SamplerType::TopK => chain.add(top_k(self.top_k)),
                        SamplerType::TopP => chain.add(top_p(self.top_p, min_keep)),
                        SamplerType::TopNSigma => chain.add(top_n_sigma(self.top_n_sigma)),
                        SamplerType::MinP => chain.add(min_p(self.min_p, min_keep)),
                        SamplerType::Xtc => chain.add(xtc(
                            self.xtc_probability,
                            self.xtc_threshold,
                            min_keep,
                            self.seed,
                        )),
                        SamplerType::TypicalP => chain.add(typical(self.typ_p, min_keep)),
                        SamplerType::Temperature => chain.add(temp_ext(
                            self.temp,
                            self.dynatemp_range,
                            self.dynatemp_exponent,
                        )),
                        SamplerType::Penalties => chain.add(penalties(
                            self.penalty_last_n,
                            self.penalty_repeat,
                            self.penalty_freq,
                            self.penalty_present,
                        )),
                        SamplerType::Infill => return Err(SamplingError::Unsupported("infill")),
                        SamplerType::AdaptiveP => use_adaptive_p = true,
                    }
                }
                // adaptive-p selects the token itself, so it takes dist's place at the end
                if use_adaptive_p {
                    chain.add(adaptive_p(
                        self.adaptive_target,
                        self.adaptive_decay,
                        self.seed,
                    ));
                } else {
                    chain.add(dist(self.seed));
                }
            }
            1 => {
                chain.add(temp(self.temp));
                chain.add(mirostat(
                    vocab.n_tokens() as i32,
                    self.seed,
                    self.mirostat_tau,
                    self.mirostat_eta,
                    100,
                ));
            }
            2 => {
                chain.add(temp(self.temp));
                chain.add(mirostat_v2(self.seed, self.mirostat_tau, self.mirostat_eta));
            }
            v => return Err(SamplingError::Mirostat(v)),
        }
        Ok(chain)
    }
}

/// `regex_escape` of llama.cpp's common: regex specials get a backslash.
fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if ".^$|()*+?[]{}\\".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::Sampler;
    use super::*;

    struct NoText;
    impl TokenText for NoText {
        fn n_tokens(&self) -> usize {
            8
        }
        fn token_text(&self, _id: i32) -> Vec<u8> {
            Vec::new()
        }
        fn tokenize(&self, _text: &[u8]) -> Vec<i32> {
            Vec::new()
        }
        fn is_eog(&self, id: i32) -> bool {
            id == 7
        }
    }

    #[test]
    fn default_chain_prints_as_llama_cpp() {
        let p = SamplingParams {
            seed: 1,
            ..Default::default()
        };
        let c = p.build_chain(&NoText, 4096).unwrap();
        assert_eq!(
            c.describe(),
            "logits -> ?penalties -> ?dry -> ?top-n-sigma -> top-k -> ?typical -> top-p -> min-p -> ?xtc -> temp-ext -> dist "
        );
        assert_eq!(c.seed(), 1);
    }

    #[test]
    fn logit_bias_and_mirostat_chains() {
        let p = SamplingParams {
            logit_bias: vec![(7, f32::NEG_INFINITY)],
            mirostat: 2,
            seed: 3,
            ..Default::default()
        };
        let c = p.build_chain(&NoText, 64).unwrap();
        assert_eq!(c.describe(), "logits -> logit-bias -> temp -> mirostat-v2 ");
        let p = SamplingParams {
            mirostat: 1,
            temp: 1.0,
            ..Default::default()
        };
        assert_eq!(
            p.build_chain(&NoText, 64).unwrap().describe(),
            "logits -> ?temp -> mirostat "
        );
        let p = SamplingParams {
            mirostat: 3,
            ..Default::default()
        };
        assert!(p.build_chain(&NoText, 64).is_err());
    }

    #[test]
    fn adaptive_p_takes_the_place_of_dist() {
        let p = SamplingParams {
            samplers: SamplerType::from_names(&["top_k", "adaptive_p"], false),
            adaptive_target: 0.3,
            ..Default::default()
        };
        let c = p.build_chain(&NoText, 64).unwrap();
        assert_eq!(c.describe(), "logits -> top-k -> adaptive-p ");
    }

    #[test]
    fn params_print_matches_the_reference_log() {
        let p = SamplingParams {
            temp: 0.0,
            ..Default::default()
        };
        assert_eq!(
            p.print(),
            "\trepeat_last_n = 64, repeat_penalty = 1.000, frequency_penalty = 0.000, presence_penalty = 0.000\n\
             \tdry_multiplier = 0.000, dry_base = 1.750, dry_allowed_length = 2, dry_penalty_last_n = 64\n\
             \ttop_k = 40, top_p = 0.950, min_p = 0.050, xtc_probability = 0.000, xtc_threshold = 0.100, typical_p = 1.000, top_n_sigma = -1.000, temp = 0.000\n\
             \tmirostat = 0, mirostat_lr = 0.100, mirostat_ent = 5.000, adaptive_target = -1.000, adaptive_decay = 0.900"
        );
    }

    #[test]
    fn greedy_chain_takes_the_argmax() {
        let p = SamplingParams {
            temp: 0.0,
            seed: 4282679774,
            ..Default::default()
        };
        let mut c = p.build_chain(&NoText, 256).unwrap();
        let logits = [0.1, 2.0, -1.0, 1.9, 0.0, 0.5, 0.3, 1.0];
        for _ in 0..5 {
            assert_eq!(c.sample(&logits), Some(1));
        }
    }

    #[test]
    fn sampler_names_and_chars_round_trip() {
        let p = SamplingParams::default();
        assert_eq!(
            p.samplers_string(),
            "penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature"
        );
        let chars: String = p.samplers.iter().map(|s| s.to_chr()).collect();
        assert_eq!(chars, "edskypmxt");
        assert_eq!(SamplerType::from_chars("edskypmxt"), p.samplers);
        assert_eq!(
            SamplerType::from_names(&["top-k", "nucleus", "bogus"], true),
            vec![SamplerType::TopK, SamplerType::TopP]
        );
        assert_eq!(SamplerType::from_names(&["top-k"], false), vec![]);
    }

    struct Pieces;
    impl crate::grammar::GrammarVocab for Pieces {
        fn n_tokens(&self) -> usize {
            4
        }
        fn piece(&self, id: i32) -> Vec<u8> {
            ["</s>", "so: ", "{", "}"][id as usize].as_bytes().to_vec()
        }
        fn is_eog(&self, id: i32) -> bool {
            id == 0
        }
        fn tokenize_special(&self, _text: &[u8]) -> Vec<i32> {
            Vec::new()
        }
    }

    #[test]
    fn build_grammar_makes_lazy_samplers_from_triggers() {
        let none = SamplingParams::default();
        assert!(none.build_grammar(&Pieces).unwrap().is_none());
        let p = SamplingParams {
            grammar: "root ::= \"{}\"".into(),
            grammar_lazy: true,
            grammar_triggers: vec![GrammarTrigger {
                ty: GrammarTriggerType::Word,
                value: "{".into(),
                token: -1,
            }],
            ..Default::default()
        };
        let mut g = p.build_grammar(&Pieces).unwrap().unwrap();
        g.accept(1).unwrap();
        assert!(g.grammar().unwrap().awaiting_trigger());
        g.accept(2).unwrap();
        assert!(!g.grammar().unwrap().awaiting_trigger());
        g.accept(3).unwrap();
        assert!(g.grammar().unwrap().can_end());
        let bad = SamplingParams {
            grammar: "root ::= [".into(),
            ..Default::default()
        };
        assert_eq!(
            bad.build_grammar(&Pieces).unwrap_err().0,
            "failed to parse grammar"
        );
        assert_eq!(regex_escape("a.b*(c)"), "a\\.b\\*\\(c\\)");
    }
}
