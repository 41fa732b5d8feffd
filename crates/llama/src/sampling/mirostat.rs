//! Mirostat v1 and v2: samplers that select a token while steering the observed surprise toward
//! a target tau, drawing with `std::discrete_distribution` semantics.

use super::array::{softmax, top_k_impl, TokenDataArray};
use super::basic::resolve_seed;
use super::rng::{discrete_sample, Mt19937};
use super::Sampler;

#[derive(Clone)]
pub struct Mirostat {
    n_vocab: i32,
    seed_param: u32,
    seed_cur: u32,
    tau: f32,
    eta: f32,
    m: i32,
    mu: f32,
    rng: Mt19937,
}

/// Mirostat 1.0: estimates the Zipf exponent from the top `m` tokens to choose k.
pub fn mirostat(n_vocab: i32, seed: u32, tau: f32, eta: f32, m: i32) -> Box<dyn Sampler> {
    let seed_cur = resolve_seed(seed);
    Box::new(Mirostat {
        n_vocab,
        seed_param: seed,
        seed_cur,
        tau,
        eta,
        m,
        mu: 2.0 * tau,
        rng: Mt19937::new(seed_cur),
    })
}

fn select_and_update(
    cur: &mut TokenDataArray,
    rng: &mut Mt19937,
    mu: &mut f32,
    tau: f32,
    eta: f32,
) {
    let idx = discrete_sample(cur.data.iter().map(|t| t.p), rng);
    cur.selected = idx as i64;
    let observed_surprise = -cur.data[idx].p.log2();
    let e = observed_surprise - tau;
    *mu -= eta * e;
}

impl Sampler for Mirostat {
    fn name(&self) -> &str {
        "mirostat"
    }

    fn apply(&mut self, cur: &mut TokenDataArray) {
        if cur.data.is_empty() {
            cur.selected = -1;
            return;
        }
        softmax(cur, true);
        let mut sum_ti_bi = 0.0f32;
        let mut sum_ti_sq = 0.0f32;
        let limit = (self.m - 1).max(0) as usize;
        let mut i = 0usize;
        while i < limit && i < cur.data.len() - 1 {
            let t_i = ((i + 2) as f32 / (i + 1) as f32).ln();
            let b_i = (cur.data[i].p / cur.data[i + 1].p).ln();
            sum_ti_bi += t_i * b_i;
            sum_ti_sq += t_i * t_i;
            i += 1;
        }
        let s_hat = sum_ti_bi / sum_ti_sq;
        let epsilon_hat = s_hat - 1.0;
        let k = ((epsilon_hat * 2f32.powf(self.mu))
            / (1.0 - (self.n_vocab as f32).powf(-epsilon_hat)))
        .powf(1.0 / s_hat);
        // C's int(k): truncation; NaN and out-of-range saturate here where C is undefined
        top_k_impl(cur, (k as i32).max(1));
        softmax(cur, true);
        select_and_update(cur, &mut self.rng, &mut self.mu, self.tau, self.eta);
    }

    fn reset(&mut self) {
        self.mu = 2.0 * self.tau;
        self.seed_cur = resolve_seed(self.seed_param);
        self.rng.seed(self.seed_cur);
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn seed(&self) -> u32 {
        self.seed_cur
    }
}

#[derive(Clone)]
pub struct MirostatV2 {
    seed_param: u32,
    seed_cur: u32,
    tau: f32,
    eta: f32,
    mu: f32,
    rng: Mt19937,
}

/// Mirostat 2.0: truncates tokens whose surprise exceeds mu.
pub fn mirostat_v2(seed: u32, tau: f32, eta: f32) -> Box<dyn Sampler> {
    let seed_cur = resolve_seed(seed);
    Box::new(MirostatV2 {
        seed_param: seed,
        seed_cur,
        tau,
        eta,
        mu: 2.0 * tau,
        rng: Mt19937::new(seed_cur),
    })
}

impl Sampler for MirostatV2 {
    fn name(&self) -> &str {
        "mirostat-v2"
    }

    fn apply(&mut self, cur: &mut TokenDataArray) {
        if cur.data.is_empty() {
            cur.selected = -1;
            return;
        }
        softmax(cur, true);
        let keep = cur
            .data
            .iter()
            .position(|t| -t.p.log2() > self.mu)
            .unwrap_or(cur.data.len())
            .max(1);
        cur.data.truncate(keep);
        softmax(cur, true);
        select_and_update(cur, &mut self.rng, &mut self.mu, self.tau, self.eta);
    }

    fn reset(&mut self) {
        self.mu = 2.0 * self.tau;
        self.seed_cur = resolve_seed(self.seed_param);
        self.rng.seed(self.seed_cur);
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn seed(&self) -> u32 {
        self.seed_cur
    }
}

#[cfg(test)]
mod tests {
    use super::super::array::arr;
    use super::*;

    #[test]
    fn mirostat_v2_truncates_by_surprise_and_updates_mu() {
        // p = 0.5, 0.25, 0.25: surprises 1, 2, 2 bits; tau 1 -> mu 2 keeps all three (2 > 2 is
        // false). Seed 5489's first canonical double 0.1355 < 0.5 picks index 0, surprise 1:
        // mu = 2 - 0.1 * (1 - 1) = 2.
        let l: Vec<f32> = [0.5f32, 0.25, 0.25].iter().map(|p| p.ln()).collect();
        let mut s = MirostatV2 {
            seed_param: 5489,
            seed_cur: 5489,
            tau: 1.0,
            eta: 0.1,
            mu: 2.0,
            rng: Mt19937::new(5489),
        };
        let mut a = arr(&l);
        s.apply(&mut a);
        assert_eq!(a.len(), 3);
        assert_eq!(a.selected, 0);
        assert_eq!(a.data[0].id, 0);
        assert!((s.mu - 2.0).abs() < 1e-6);
        // tau 0.5 -> mu 1: only the 1-bit token survives
        let mut s = mirostat_v2(5489, 0.5, 0.1);
        let mut a = arr(&l);
        s.apply(&mut a);
        assert_eq!(a.len(), 1);
        assert_eq!(a.data[0].p, 1.0);
    }

    #[test]
    fn mirostat_v1_selects_and_is_reproducible() {
        let l: Vec<f32> = (0..50).map(|i| -(i as f32) * 0.3).collect();
        let run = || {
            let mut s = mirostat(50, 42, 5.0, 0.1, 100);
            (0..5)
                .map(|_| {
                    let mut a = arr(&l);
                    s.apply(&mut a);
                    a.selected_id().unwrap()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
        assert_eq!(mirostat(50, 42, 5.0, 0.1, 100).seed(), 42);
    }
}
