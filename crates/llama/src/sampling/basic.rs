//! The stateless and RNG-driven samplers of llama-sampler.cpp: greedy, dist, top-k, top-p, min-p,
//! typical, temp, temp-ext, xtc, top-n-sigma and logit-bias, plus the `?name` no-op that a
//! disabled setting produces.

use super::array::{partial_sort_inplace, softmax, temp_impl, top_k_impl, TokenDataArray};
use super::rng::{random_seed, Mt19937};
use super::{Sampler, DEFAULT_SEED};

/// `get_rng_seed`: the default seed asks for a random one.
pub(crate) fn resolve_seed(seed: u32) -> u32 {
    if seed == DEFAULT_SEED {
        random_seed()
    } else {
        seed
    }
}

/// A sampler that does nothing, standing for one whose parameters disable it.
#[derive(Clone)]
pub struct Empty {
    name: String,
}

pub fn empty(name: &str) -> Box<dyn Sampler> {
    Box::new(Empty {
        name: name.to_string(),
    })
}

impl Sampler for Empty {
    fn name(&self) -> &str {
        &self.name
    }
    fn apply(&mut self, _cur: &mut TokenDataArray) {}
    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

/// Select the highest logit (the first of equal ones).
#[derive(Clone)]
pub struct Greedy;

pub fn greedy() -> Box<dyn Sampler> {
    Box::new(Greedy)
}

impl Sampler for Greedy {
    fn name(&self) -> &str {
        "greedy"
    }
    fn apply(&mut self, cur: &mut TokenDataArray) {
        if cur.data.is_empty() {
            cur.selected = -1;
            return;
        }
        let mut sel = 0;
        for i in 1..cur.data.len() {
            if cur.data[i].logit > cur.data[sel].logit {
                sel = i;
            }
        }
        cur.selected = sel as i64;
    }
    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

/// Sample from the softmax of the candidates with a seeded mt19937.
#[derive(Clone)]
pub struct Dist {
    seed_param: u32,
    seed_cur: u32,
    rng: Mt19937,
}

pub fn dist(seed: u32) -> Box<dyn Sampler> {
    let seed_cur = resolve_seed(seed);
    Box::new(Dist {
        seed_param: seed,
        seed_cur,
        rng: Mt19937::new(seed_cur),
    })
}

impl Sampler for Dist {
    fn name(&self) -> &str {
        "dist"
    }
    fn apply(&mut self, cur: &mut TokenDataArray) {
        if cur.data.is_empty() {
            cur.selected = -1;
            return;
        }
        cur.selected = 0;
        if cur.data.len() == 1 {
            cur.data[0].p = 1.0;
            return;
        }
        let mut max_l = cur.data[0].logit;
        if !cur.sorted {
            for t in &cur.data[1..] {
                max_l = max_l.max(t.logit);
            }
        }
        // probabilities are float, their sum double, as in llama.cpp's single-pass version
        let mut sum_cum = 0.0f64;
        for t in cur.data.iter_mut() {
            let p = (t.logit - max_l).exp();
            t.p = p;
            sum_cum += p as f64;
        }
        let rnd = self.rng.uniform_f64();
        let sum_tgt = sum_cum * rnd;
        let mut sum_run = 0.0f64;
        let mut found = false;
        for (i, t) in cur.data.iter_mut().enumerate() {
            if !found {
                sum_run += t.p as f64;
                if sum_run >= sum_tgt {
                    cur.selected = i as i64;
                    found = true;
                }
            }
            t.p = (t.p as f64 / sum_cum) as f32;
        }
        if !found {
            cur.selected = cur.data.len() as i64 - 1;
        }
    }
    fn reset(&mut self) {
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

/// Keep the k highest logits.
#[derive(Clone)]
pub struct TopK {
    k: i32,
}

pub fn top_k(k: i32) -> Box<dyn Sampler> {
    if k <= 0 {
        return empty("?top-k");
    }
    Box::new(TopK { k })
}

impl Sampler for TopK {
    fn name(&self) -> &str {
        "top-k"
    }
    fn apply(&mut self, cur: &mut TokenDataArray) {
        top_k_impl(cur, self.k);
    }
    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

/// Nucleus sampling: the smallest prefix (by probability) reaching p, at least min_keep long.
#[derive(Clone)]
pub struct TopP {
    p: f32,
    min_keep: usize,
}

pub fn top_p(p: f32, min_keep: usize) -> Box<dyn Sampler> {
    if p >= 1.0 {
        return empty("?top-p");
    }
    Box::new(TopP { p, min_keep })
}

impl Sampler for TopP {
    fn name(&self) -> &str {
        "top-p"
    }
    fn apply(&mut self, cur: &mut TokenDataArray) {
        if self.p >= 1.0 || cur.data.is_empty() {
            return;
        }
        // probabilities over the array in its current order, then the prefix over sorted data
        softmax(cur, false);
        if !cur.sorted {
            let n = cur.data.len();
            partial_sort_inplace(cur, n);
        }
        let mut cum_sum = 0.0f32;
        let mut last_idx = cur.data.len();
        for (i, t) in cur.data.iter().enumerate() {
            cum_sum += t.p;
            if cum_sum >= self.p && i + 1 >= self.min_keep {
                last_idx = i + 1;
                break;
            }
        }
        cur.data.truncate(last_idx);
    }
    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

/// Keep tokens whose probability is at least p times the best one's.
#[derive(Clone)]
pub struct MinP {
    p: f32,
    min_keep: usize,
}

pub fn min_p(p: f32, min_keep: usize) -> Box<dyn Sampler> {
    if p <= 0.0 {
        return empty("?min-p");
    }
    Box::new(MinP { p, min_keep })
}

impl Sampler for MinP {
    fn name(&self) -> &str {
        "min-p"
    }
    fn apply(&mut self, cur: &mut TokenDataArray) {
        if self.p <= 0.0 || cur.data.is_empty() {
            return;
        }
        let mut applied = false;
        if !cur.sorted {
            let max_logit = cur.data.iter().fold(-f32::MAX, |m, t| m.max(t.logit));
            let min_logit = max_logit + self.p.ln();
            let filtered: Vec<_> = cur
                .data
                .iter()
                .copied()
                .filter(|t| t.logit >= min_logit)
                .collect();
            if !filtered.is_empty() && filtered.len() >= self.min_keep {
                cur.data = filtered;
                applied = true;
            }
        }
        if !applied {
            if !cur.sorted {
                let n = cur.data.len();
                partial_sort_inplace(cur, n);
            }
            let min_logit = cur.data[0].logit + self.p.ln();
            let mut i = 1;
            while i < cur.data.len() {
                if cur.data[i].logit < min_logit && i >= self.min_keep {
                    break;
                }
                i += 1;
            }
            cur.data.truncate(i);
        }
    }
    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

/// Locally typical sampling: tokens whose surprise is closest to the entropy, up to mass p.
#[derive(Clone)]
pub struct Typical {
    p: f32,
    min_keep: usize,
}

pub fn typical(p: f32, min_keep: usize) -> Box<dyn Sampler> {
    if p >= 1.0 {
        return empty("?typical");
    }
    Box::new(Typical { p, min_keep })
}

impl Sampler for Typical {
    fn name(&self) -> &str {
        "typical"
    }
    fn apply(&mut self, cur: &mut TokenDataArray) {
        if self.p >= 1.0 || cur.data.is_empty() {
            return;
        }
        softmax(cur, true);
        let mut entropy = 0.0f32;
        for t in &cur.data {
            entropy += -t.p * t.p.ln();
        }
        let shifted: Vec<f32> = cur
            .data
            .iter()
            .map(|t| (-t.p.ln() - entropy).abs())
            .collect();
        let mut indices: Vec<usize> = (0..cur.data.len()).collect();
        indices.sort_by(|&a, &b| {
            shifted[a]
                .partial_cmp(&shifted[b])
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        let mut cum_sum = 0.0f32;
        let mut last_idx = indices.len();
        for (i, &idx) in indices.iter().enumerate() {
            cum_sum += cur.data[idx].p;
            if cum_sum > self.p && (self.min_keep == 0 || i + 1 >= self.min_keep) {
                last_idx = i + 1;
                break;
            }
        }
        cur.data = indices[..last_idx].iter().map(|&i| cur.data[i]).collect();
        cur.sorted = false;
    }
    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

/// Plain temperature (used before mirostat).
#[derive(Clone)]
pub struct Temp {
    temp: f32,
}

pub fn temp(t: f32) -> Box<dyn Sampler> {
    if t == 1.0 {
        return empty("?temp");
    }
    Box::new(Temp { temp: t })
}

impl Sampler for Temp {
    fn name(&self) -> &str {
        "temp"
    }
    fn apply(&mut self, cur: &mut TokenDataArray) {
        temp_impl(cur, self.temp);
    }
    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

/// Temperature with the dynamic-temperature extension: with delta > 0 the temperature moves in
/// [temp - delta, temp + delta] with the normalised entropy of the candidates.
#[derive(Clone)]
pub struct TempExt {
    temp: f32,
    delta: f32,
    exponent: f32,
}

pub fn temp_ext(t: f32, delta: f32, exponent: f32) -> Box<dyn Sampler> {
    if t == 1.0 && delta <= 0.0 {
        return empty("?temp-ext");
    }
    Box::new(TempExt {
        temp: t,
        delta,
        exponent,
    })
}

impl Sampler for TempExt {
    fn name(&self) -> &str {
        "temp-ext"
    }
    fn apply(&mut self, cur: &mut TokenDataArray) {
        if self.delta <= 0.0 {
            temp_impl(cur, self.temp);
            return;
        }
        let min_temp = (self.temp - self.delta).max(0.0);
        let max_temp = self.temp + self.delta;
        if cur.data.len() <= 1 {
            return;
        }
        let max_entropy = -(1.0f32 / cur.data.len() as f32).ln();
        softmax(cur, true);
        let mut entropy = 0.0f32;
        for t in &cur.data {
            if t.p > 0.0 {
                entropy -= t.p * t.p.ln();
            }
        }
        let normalized = entropy / max_entropy;
        let dyn_temp = min_temp + (max_temp - min_temp) * normalized.powf(self.exponent);
        temp_impl(cur, dyn_temp);
        let max_l = cur.data[0].logit as f64;
        let mut cum = 0.0f64;
        let mut ps = Vec::with_capacity(cur.data.len());
        for t in cur.data.iter_mut() {
            let p = (t.logit as f64 - max_l).exp();
            t.p = p as f32;
            ps.push(p);
            cum += p;
        }
        for t in cur.data.iter_mut() {
            t.p = (t.p as f64 / cum) as f32;
        }
    }
    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

/// Exclude Top Choices: with some probability drop every token above the threshold but the
/// least likely of them.
#[derive(Clone)]
pub struct Xtc {
    probability: f32,
    threshold: f32,
    min_keep: usize,
    seed_param: u32,
    seed_cur: u32,
    rng: Mt19937,
}

pub fn xtc(probability: f32, threshold: f32, min_keep: usize, seed: u32) -> Box<dyn Sampler> {
    if probability <= 0.0 || threshold > 0.5 {
        return empty("?xtc");
    }
    let seed_cur = resolve_seed(seed);
    Box::new(Xtc {
        probability,
        threshold,
        min_keep,
        seed_param: seed,
        seed_cur,
        rng: Mt19937::new(seed_cur),
    })
}

impl Sampler for Xtc {
    fn name(&self) -> &str {
        "xtc"
    }
    fn apply(&mut self, cur: &mut TokenDataArray) {
        if self.probability <= 0.0 || self.threshold > 0.5 || cur.data.len() < 2 {
            return;
        }
        let chance = self.rng.uniform_f32();
        if chance > self.probability {
            return;
        }
        softmax(cur, true);
        let mut pos_last = 0usize;
        for (i, t) in cur.data.iter().enumerate() {
            if t.p >= self.threshold {
                pos_last = i;
            } else {
                break;
            }
        }
        if cur.data.len() - pos_last >= self.min_keep && pos_last > 0 {
            cur.data.drain(..pos_last);
        }
    }
    fn reset(&mut self) {
        self.seed_cur = resolve_seed(self.seed_param);
        self.rng.seed(self.seed_cur);
    }
    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

/// Keep logits within n standard deviations of the maximum.
#[derive(Clone)]
pub struct TopNSigma {
    n: f32,
}

pub fn top_n_sigma(n: f32) -> Box<dyn Sampler> {
    if n <= 0.0 {
        return empty("?top-n-sigma");
    }
    Box::new(TopNSigma { n })
}

impl Sampler for TopNSigma {
    fn name(&self) -> &str {
        "top-n-sigma"
    }
    fn apply(&mut self, cur: &mut TokenDataArray) {
        if self.n <= 0.0 || cur.data.len() <= 1 {
            return;
        }
        let mut max = cur.data[0].logit;
        let mut sum = 0.0f32;
        let mut valid = 0usize;
        for t in &cur.data {
            if t.logit != f32::NEG_INFINITY {
                max = max.max(t.logit);
                sum += t.logit;
                valid += 1;
            }
        }
        let mean = if valid > 0 { sum / valid as f32 } else { 0.0 };
        // llama.cpp's pow(float, int) is the double overload, added into a float accumulator
        let mut acc = 0.0f32;
        for t in &cur.data {
            if t.logit != f32::NEG_INFINITY {
                let d = (t.logit - mean) as f64;
                acc = (acc as f64 + d * d) as f32;
            }
        }
        let std = if valid > 0 {
            (acc / valid as f32).sqrt()
        } else {
            0.0
        };
        let cut = max - self.n * std;
        for t in cur.data.iter_mut() {
            if t.logit < cut {
                t.logit = f32::NEG_INFINITY;
            }
        }
        softmax(cur, true);
    }
    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

/// Add fixed biases to given tokens' logits.
#[derive(Clone)]
pub struct LogitBias {
    biases: Vec<(i32, f32)>,
}

pub fn logit_bias(biases: &[(i32, f32)]) -> Box<dyn Sampler> {
    if biases.is_empty() {
        return empty("?logit-bias");
    }
    Box::new(LogitBias {
        biases: biases.to_vec(),
    })
}

impl Sampler for LogitBias {
    fn name(&self) -> &str {
        "logit-bias"
    }
    fn apply(&mut self, cur: &mut TokenDataArray) {
        let mut to_search = Vec::new();
        // candidates still at their vocabulary index are found directly
        for &(token, bias) in &self.biases {
            let direct = usize::try_from(token)
                .ok()
                .and_then(|i| cur.data.get_mut(i))
                .filter(|t| t.id == token);
            match direct {
                Some(t) => t.logit += bias,
                None => to_search.push((token, bias)),
            }
        }
        if to_search.is_empty() {
            return;
        }
        for t in cur.data.iter_mut() {
            if let Some(&(_, bias)) = to_search.iter().find(|(tok, _)| *tok == t.id) {
                t.logit += bias;
            }
        }
    }
    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::super::array::arr;
    use super::*;

    fn ids(a: &TokenDataArray) -> Vec<i32> {
        a.data.iter().map(|t| t.id).collect()
    }

    #[test]
    fn disabled_settings_give_question_mark_names() {
        assert_eq!(top_k(0).name(), "?top-k");
        assert_eq!(top_k(40).name(), "top-k");
        assert_eq!(top_p(1.0, 0).name(), "?top-p");
        assert_eq!(min_p(0.0, 0).name(), "?min-p");
        assert_eq!(typical(1.0, 0).name(), "?typical");
        assert_eq!(temp(1.0).name(), "?temp");
        assert_eq!(temp_ext(1.0, 0.0, 1.0).name(), "?temp-ext");
        assert_eq!(temp_ext(0.0, 0.0, 1.0).name(), "temp-ext");
        assert_eq!(xtc(0.0, 0.1, 0, 1).name(), "?xtc");
        assert_eq!(xtc(0.5, 0.6, 0, 1).name(), "?xtc");
        assert_eq!(top_n_sigma(-1.0).name(), "?top-n-sigma");
        assert_eq!(logit_bias(&[]).name(), "?logit-bias");
    }

    #[test]
    fn greedy_picks_first_maximum() {
        let mut a = arr(&[0.1, 0.9, 0.3, 0.9]);
        greedy().apply(&mut a);
        assert_eq!(a.selected, 1);
    }

    #[test]
    fn dist_single_candidate_is_certain() {
        let mut a = arr(&[0.3]);
        dist(7).apply(&mut a);
        assert_eq!(a.selected, 0);
        assert_eq!(a.data[0].p, 1.0);
    }

    #[test]
    fn dist_follows_the_seeded_draw() {
        // seed 5489: first canonical double ~0.1355. Ten equal logits -> unnormalised p = 1 each,
        // sum 10, target 1.355, first reached by the running sum (1, 2, ...) at index 1.
        let mut a = arr(&[1.0; 10]);
        dist(5489).apply(&mut a);
        assert_eq!(a.selected, 1);
        assert!(a.data.iter().all(|t| t.p == 0.1));
    }

    #[test]
    fn dist_with_zero_temperature_selects_the_argmax() {
        let mut a = arr(&[0.2, 5.0, 1.0]);
        temp_ext(0.0, 0.0, 1.0).apply(&mut a);
        dist(1).apply(&mut a);
        assert_eq!(a.selected, 1);
    }

    #[test]
    fn dist_reset_reseeds() {
        let mut d = dist(3);
        let draws = |d: &mut Box<dyn Sampler>| -> Vec<i64> {
            (0..8)
                .map(|_| {
                    let mut a = arr(&[0.0, 0.0, 0.0, 0.0, 0.0]);
                    d.apply(&mut a);
                    a.selected
                })
                .collect()
        };
        let first = draws(&mut d);
        d.reset();
        assert_eq!(first, draws(&mut d));
        assert_eq!(d.seed(), 3);
    }

    #[test]
    fn top_p_keeps_the_nucleus() {
        // probabilities 0.5, 0.25, 0.125, 0.125 (logits ln p): cumulative 0.5, 0.75 -> p=0.7
        // keeps two
        let l: Vec<f32> = [0.125f32, 0.5, 0.125, 0.25]
            .iter()
            .map(|p| p.ln())
            .collect();
        let mut a = arr(&l);
        top_p(0.7, 1).apply(&mut a);
        assert_eq!(ids(&a), vec![1, 3]);
        // min_keep forces more
        let mut a = arr(&l);
        top_p(0.3, 3).apply(&mut a);
        assert_eq!(a.len(), 3);
    }

    #[test]
    fn min_p_drops_tokens_below_the_ratio() {
        // p ratios to the best: 1, 0.5, 0.04 -> min_p 0.05 drops the last, keeps order
        let l: Vec<f32> = [0.5f32, 0.02, 0.25].iter().map(|p| p.ln()).collect();
        let mut a = arr(&l);
        min_p(0.05, 1).apply(&mut a);
        assert_eq!(ids(&a), vec![0, 2]);
        assert!(!a.sorted);
        // sorted input uses the prefix path
        let mut a = arr(&l);
        top_k(3).apply(&mut a);
        min_p(0.05, 1).apply(&mut a);
        assert_eq!(ids(&a), vec![0, 2]);
    }

    #[test]
    fn typical_prefers_tokens_near_the_entropy() {
        // p = [0.7, 0.2, 0.1]: entropy H = 0.8018; |-ln p - H| = 0.445, 0.808, 1.501, so the
        // order is 0, 1, 2 and p=0.5 stops after the first (0.7 > 0.5)
        let l: Vec<f32> = [0.7f32, 0.2, 0.1].iter().map(|p| p.ln()).collect();
        let mut a = arr(&l);
        typical(0.5, 1).apply(&mut a);
        assert_eq!(ids(&a), vec![0]);
        // p = [0.4, 0.3, 0.3]: H = 1.0889; distances 0.173, 0.115, 0.115 -> the 0.3 tokens
        // come first; cumulative 0.3, 0.6 > 0.5 keeps exactly those two
        let l: Vec<f32> = [0.4f32, 0.3, 0.3].iter().map(|p| p.ln()).collect();
        let mut a = arr(&l);
        typical(0.5, 1).apply(&mut a);
        let mut kept = ids(&a);
        kept.sort();
        assert_eq!(kept, vec![1, 2]);
    }

    #[test]
    fn temperature_divides_logits() {
        let mut a = arr(&[2.0, -4.0]);
        temp(2.0).apply(&mut a);
        assert_eq!(a.data[0].logit, 1.0);
        assert_eq!(a.data[1].logit, -2.0);
    }

    #[test]
    fn dynamic_temperature_with_uniform_candidates_uses_max_temp() {
        // equal logits -> normalised entropy 1 -> dyn_temp = temp + delta = 2; probs stay 1/3
        let mut a = arr(&[3.0, 3.0, 3.0]);
        temp_ext(1.5, 0.5, 1.0).apply(&mut a);
        for t in &a.data {
            assert_eq!(t.logit, 1.5);
            assert!((t.p - 1.0 / 3.0).abs() < 1e-7);
        }
    }

    #[test]
    fn xtc_removes_top_choices_when_triggered() {
        // probability 1 always triggers; p = [0.5, 0.3, 0.2], threshold 0.25 -> tokens 0 and 1
        // are above; all but the last of them (token 1) are dropped
        let l: Vec<f32> = [0.5f32, 0.3, 0.2].iter().map(|p| p.ln()).collect();
        let mut a = arr(&l);
        xtc(1.0, 0.25, 1, 9).apply(&mut a);
        assert_eq!(ids(&a), vec![1, 2]);
    }

    #[test]
    fn top_n_sigma_masks_far_logits() {
        // logits 0, 1, 2, 10: mean 3.25, std sqrt((10.5625+5.0625+1.5625+45.5625)/4) = 3.9607
        // n=1: cut at 10 - 3.96 = 6.04 -> only token 3 keeps a finite logit
        let mut a = arr(&[0.0, 1.0, 2.0, 10.0]);
        top_n_sigma(1.0).apply(&mut a);
        assert_eq!(a.data[0].id, 3);
        assert_eq!(a.data[0].p, 1.0);
        assert!(a.data[1..].iter().all(|t| t.logit == f32::NEG_INFINITY));
    }

    #[test]
    fn logit_bias_adds_to_direct_and_moved_candidates() {
        let mut a = arr(&[0.0, 1.0, 2.0]);
        logit_bias(&[(1, 0.5), (2, f32::NEG_INFINITY), (7, 3.0)]).apply(&mut a);
        assert_eq!(a.data[1].logit, 1.5);
        assert_eq!(a.data[2].logit, f32::NEG_INFINITY);
        // after sorting, ids are no longer at their index
        let mut a = arr(&[0.0, 1.0, 2.0]);
        top_k(3).apply(&mut a);
        logit_bias(&[(0, 10.0)]).apply(&mut a);
        assert_eq!(a.data[2].id, 0);
        assert_eq!(a.data[2].logit, 10.0);
    }
}
