//! adaptive-p: selects a token while steering the (exponentially averaged) probability of the
//! selected tokens toward a target, by reshaping the distribution around that probability.

use super::array::{softmax, TokenDataArray};
use super::basic::resolve_seed;
use super::rng::{discrete_sample, Mt19937};
use super::Sampler;

const DISTRIBUTION_WIDTH: f32 = 0.3;
const PEAK_LOGIT_VALUE: f32 = 5.0;
const SHARPNESS: f32 = 10.0;
const INV_WIDTH: f32 = 1.0 / DISTRIBUTION_WIDTH;

#[derive(Clone)]
pub struct AdaptiveP {
    target: f32,
    decay: f32,
    seed_param: u32,
    rng: Mt19937,
    weighted_sum: f32,
    total_weight: f32,
    original_probs: Vec<f32>,
    pending: Option<(i32, usize)>,
}

/// `llama_sampler_init_adaptive_p`: a negative target samples the distribution as it is.
pub fn adaptive_p(target: f32, decay: f32, seed: u32) -> Box<dyn Sampler> {
    let decay = decay.clamp(0.0, 0.99);
    Box::new(AdaptiveP {
        target,
        decay,
        seed_param: seed,
        rng: Mt19937::new(resolve_seed(seed)),
        weighted_sum: target / (1.0 - decay),
        total_weight: 1.0 / (1.0 - decay),
        original_probs: Vec::new(),
        pending: None,
    })
}

impl Sampler for AdaptiveP {
    fn name(&self) -> &str {
        "adaptive-p"
    }

    fn apply(&mut self, cur: &mut TokenDataArray) {
        if cur.data.is_empty() {
            cur.selected = -1;
            return;
        }
        softmax(cur, false);
        if self.target < 0.0 {
            cur.selected = discrete_sample(cur.data.iter().map(|t| t.p), &mut self.rng) as i64;
            return;
        }
        self.original_probs = cur.data.iter().map(|t| t.p).collect();
        let target = self.target.clamp(0.0, 1.0);
        let adapted = if self.total_weight == 0.0 {
            target
        } else {
            2.0 * target - self.weighted_sum / self.total_weight
        }
        .clamp(0.0, 1.0);
        for t in cur.data.iter_mut() {
            if t.logit == f32::NEG_INFINITY {
                continue;
            }
            let dist = ((t.p - adapted) * INV_WIDTH).abs();
            t.logit = PEAK_LOGIT_VALUE - SHARPNESS * dist * dist / (1.0 + dist);
        }
        softmax(cur, false);
        let idx = discrete_sample(cur.data.iter().map(|t| t.p), &mut self.rng);
        cur.selected = idx as i64;
        self.pending = Some((cur.data[idx].id, idx));
    }

    fn accept(&mut self, token: i32) {
        if let Some((id, idx)) = self.pending.take() {
            if id == token {
                let p = self.original_probs.get(idx).copied().unwrap_or(0.0);
                self.weighted_sum = p + self.decay * self.weighted_sum;
                self.total_weight = 1.0 + self.decay * self.total_weight;
            }
        }
    }

    fn reset(&mut self) {
        self.weighted_sum = self.target / (1.0 - self.decay);
        self.total_weight = 1.0 / (1.0 - self.decay);
        self.pending = None;
        self.rng.seed(resolve_seed(self.seed_param));
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::super::array::arr;
    use super::*;

    #[test]
    fn prefers_tokens_near_the_target_probability() {
        // p = 0.7, 0.2, 0.1 and target 0.2 (history at the target): the 0.2 token gets the peak
        // logit 5, the others 5 - 10 d^2/(1+d) with d = |p - 0.2| / 0.3
        let l: Vec<f32> = [0.7f32, 0.2, 0.1].iter().map(|p| p.ln()).collect();
        let mut s = adaptive_p(0.2, 0.9, 7);
        let mut a = arr(&l);
        s.apply(&mut a);
        let logit = |i: usize| a.data.iter().find(|t| t.id == i as i32).unwrap().logit;
        assert!((logit(1) - 5.0).abs() < 1e-4);
        let d0 = 0.5f32 / 0.3;
        assert!((logit(0) - (5.0 - 10.0 * d0 * d0 / (1.0 + d0))).abs() < 1e-3);
        assert!(logit(1) > logit(2) && logit(2) > logit(0));
        assert!(a.selected >= 0);
    }

    #[test]
    fn accepting_the_selected_token_updates_the_history() {
        let mut s = AdaptiveP {
            target: 0.5,
            decay: 0.5,
            seed_param: 1,
            rng: Mt19937::new(1),
            weighted_sum: 1.0,
            total_weight: 2.0,
            original_probs: Vec::new(),
            pending: None,
        };
        let mut a = arr(&[0.0, 0.0]);
        s.apply(&mut a);
        let id = a.selected_id().unwrap();
        s.accept(id);
        // original p = 0.5: sum = 0.5 + 0.5 * 1, weight = 1 + 0.5 * 2
        assert_eq!((s.weighted_sum, s.total_weight), (1.0, 2.0));
        s.accept(id);
        assert_eq!(
            (s.weighted_sum, s.total_weight),
            (1.0, 2.0),
            "no pending token"
        );
    }
}
