//! `llama_sampler_chain`: samplers applied in order, itself a sampler, with the timing and
//! accept count that `llama_perf_sampler` reports.

use std::time::Instant;

use super::array::TokenDataArray;
use super::{Sampler, DEFAULT_SEED};

/// `llama_perf_sampler_data`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PerfSamplerData {
    pub t_sample_ms: f64,
    pub n_sample: i32,
}

#[derive(Clone, Default)]
pub struct Chain {
    samplers: Vec<Box<dyn Sampler>>,
    no_perf: bool,
    t_sample_us: u64,
    n_sample: i32,
}

impl Chain {
    pub fn new(no_perf: bool) -> Self {
        Chain {
            samplers: Vec::new(),
            no_perf,
            t_sample_us: 0,
            n_sample: 0,
        }
    }

    pub fn add(&mut self, s: Box<dyn Sampler>) {
        self.samplers.push(s);
    }

    /// Builder form of [`Chain::add`].
    pub fn with(mut self, s: Box<dyn Sampler>) -> Self {
        self.add(s);
        self
    }

    pub fn len(&self) -> usize {
        self.samplers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samplers.is_empty()
    }

    pub fn get(&self, i: usize) -> Option<&dyn Sampler> {
        self.samplers.get(i).map(|s| s.as_ref())
    }

    pub fn remove(&mut self, i: usize) -> Option<Box<dyn Sampler>> {
        (i < self.samplers.len()).then(|| self.samplers.remove(i))
    }

    /// `llama_sampler_sample`: candidates from one row of logits (id = index), the chain applied,
    /// the selected token accepted and returned. None if no sampler selected a token.
    pub fn sample(&mut self, logits: &[f32]) -> Option<i32> {
        let mut cur = TokenDataArray::from_logits(logits);
        self.apply(&mut cur);
        let token = cur.selected_id()?;
        self.accept(token);
        Some(token)
    }

    /// `common_sampler_print`: "logits -> a -> b " (with the trailing space).
    pub fn describe(&self) -> String {
        let mut s = String::from("logits ");
        for smpl in &self.samplers {
            s.push_str("-> ");
            s.push_str(smpl.name());
            s.push(' ');
        }
        s
    }

    pub fn perf(&self) -> PerfSamplerData {
        PerfSamplerData {
            t_sample_ms: self.t_sample_us as f64 * 1e-3,
            n_sample: self.n_sample.max(0),
        }
    }

    pub fn perf_reset(&mut self) {
        self.t_sample_us = 0;
        self.n_sample = 0;
    }

    /// `llama_perf_sampler_print`.
    pub fn perf_print(&self) {
        let d = self.perf();
        ggml::log_info!(
            "{}:    samplers time = {:10.2} ms / {:5} runs\n",
            "llama_perf_sampler_print",
            d.t_sample_ms,
            d.n_sample
        );
    }

    fn timed<R>(&mut self, f: impl FnOnce(&mut Vec<Box<dyn Sampler>>) -> R) -> R {
        if self.no_perf {
            return f(&mut self.samplers);
        }
        let t0 = Instant::now();
        let r = f(&mut self.samplers);
        self.t_sample_us += t0.elapsed().as_micros() as u64;
        r
    }
}

impl Sampler for Chain {
    fn name(&self) -> &str {
        "chain"
    }

    fn apply(&mut self, cur: &mut TokenDataArray) {
        self.timed(|samplers| {
            for s in samplers.iter_mut() {
                s.apply(cur);
            }
        });
    }

    fn accept(&mut self, token: i32) {
        self.timed(|samplers| {
            for s in samplers.iter_mut() {
                s.accept(token);
            }
        });
        self.n_sample += 1;
    }

    fn reset(&mut self) {
        for s in self.samplers.iter_mut() {
            s.reset();
        }
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    /// The seed of the last member that has one (`llama_sampler_get_seed` on a chain).
    fn seed(&self) -> u32 {
        self.samplers
            .iter()
            .rev()
            .map(|s| s.seed())
            .find(|&s| s != DEFAULT_SEED)
            .unwrap_or(DEFAULT_SEED)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{dist, greedy, penalties, top_k};
    use super::*;

    #[test]
    fn chain_samples_and_counts_accepts() {
        let mut c = Chain::new(false).with(top_k(2)).with(greedy());
        assert_eq!(c.sample(&[0.0, 3.0, 1.0]), Some(1));
        assert_eq!(c.sample(&[5.0, 3.0, 1.0]), Some(0));
        assert_eq!(c.perf().n_sample, 2);
        c.perf_reset();
        assert_eq!(c.perf().n_sample, 0);
    }

    #[test]
    fn describe_matches_llama_cpp_format() {
        let c = Chain::new(false)
            .with(penalties(64, 1.0, 0.0, 0.0))
            .with(top_k(40))
            .with(dist(1));
        assert_eq!(c.describe(), "logits -> ?penalties -> top-k -> dist ");
    }

    #[test]
    fn a_chain_nests_as_a_sampler() {
        let inner = Chain::new(true).with(top_k(1));
        let mut outer = Chain::new(true).with(Box::new(inner)).with(greedy());
        assert_eq!(outer.sample(&[0.0, 2.0, 1.0]), Some(1));
    }

    #[test]
    fn chain_seed_is_the_last_seeded_member() {
        let c = Chain::new(true).with(top_k(5)).with(dist(1234));
        assert_eq!(c.seed(), 1234);
        assert_eq!(Chain::new(true).with(greedy()).seed(), DEFAULT_SEED);
    }

    #[test]
    fn empty_chain_selects_nothing() {
        let mut c = Chain::new(true);
        assert_eq!(c.sample(&[1.0, 2.0]), None);
    }
}
