//! Token samplers, as llama.cpp's `llama_sampler` family: each one transforms or selects from a
//! candidate array, and a [`Chain`] is itself a sampler that runs its members in order.
//!
//! Disabled settings give an [`Empty`] sampler named `?name` exactly as llama.cpp does, so the
//! printed chain ("logits -> ?penalties -> ... -> dist") matches.

mod adaptive;
mod array;
mod basic;
mod chain;
mod grammar;
mod mirostat;
mod params;
mod penalties;
pub mod rng;

pub use adaptive::{adaptive_p, AdaptiveP};
pub use array::{TokenData, TokenDataArray};
pub use basic::{
    dist, empty, greedy, logit_bias, min_p, temp, temp_ext, top_k, top_n_sigma, top_p, typical,
    xtc, Dist, Empty, Greedy, LogitBias, MinP, Temp, TempExt, TopK, TopNSigma, TopP, Typical, Xtc,
};
pub use chain::{Chain, PerfSamplerData};
pub use grammar::{sample_with_grammar, GrammarSampler};
pub use mirostat::{mirostat, mirostat_v2, Mirostat, MirostatV2};
pub use params::{GrammarTrigger, GrammarTriggerType, SamplerType, SamplingParams, TokenText};
pub use penalties::{dry, dry_from_token_sequences, penalties, Dry, Penalties};

/// `LLAMA_DEFAULT_SEED`: asks for a random seed.
pub const DEFAULT_SEED: u32 = 0xFFFF_FFFF;

/// A sampler: a step of the sampling chain. `apply` filters or reorders the candidates, or
/// selects one (setting `cur.selected`); `accept` tells it which token was finally chosen.
pub trait Sampler: Send {
    fn name(&self) -> &str;
    fn apply(&mut self, cur: &mut TokenDataArray);
    fn accept(&mut self, _token: i32) {}
    fn reset(&mut self) {}
    fn clone_box(&self) -> Box<dyn Sampler>;
    /// The seed in use (`llama_sampler_get_seed`); [`DEFAULT_SEED`] for samplers without one.
    fn seed(&self) -> u32 {
        DEFAULT_SEED
    }
}

impl Clone for Box<dyn Sampler> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}
