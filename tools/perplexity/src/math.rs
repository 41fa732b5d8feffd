//! The arithmetic of llama-perplexity, operation for operation as tools/perplexity/perplexity.cpp
//! does it (float where it uses float, double where it uses double), so the printed figures
//! agree to the last digit with the same logits.

/// Round to nearest (ties to even) for |x| < 2^22, by the float-add trick llama.cpp uses.
pub fn nearest_int(fval: f32) -> i32 {
    let val = fval + 12_582_912.0;
    let i = val.to_bits() as i32;
    (i & 0x007f_ffff) - 0x0040_0000
}

fn max_of(logits: &[f32]) -> f32 {
    logits[1..].iter().fold(logits[0], |m, &v| m.max(v))
}

/// Σ exp(logit - max) with each term in float and the sum in double.
fn sum_exp(logits: &[f32], max_logit: f32) -> f64 {
    logits.iter().map(|&l| (l - max_logit).exp() as f64).sum()
}

/// The log-probability of `tok`, its logit and its probability (`results_log_softmax`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogSoftmax {
    pub log_softmax: f64,
    pub logit: f32,
    pub prob: f32,
}

pub fn log_softmax(logits: &[f32], tok: usize) -> LogSoftmax {
    let max_logit = max_of(logits);
    let sum = sum_exp(logits, max_logit);
    LogSoftmax {
        log_softmax: (logits[tok] - max_logit) as f64 - sum.ln(),
        logit: logits[tok],
        prob: (logits[tok] - max_logit).exp() / sum as f32,
    }
}

/// u16 values stored per scored position of a logits file: 4 for the two floats (scale,
/// min_log_prob), n_vocab quantized log-probs, and one pad when n_vocab is odd.
pub fn row_len(n_vocab: usize) -> usize {
    2 * n_vocab.div_ceil(2) + 4
}

/// Quantizes the log-probabilities of one position into `out` (`row_len(n_vocab)` values) and
/// returns the negative log-likelihood of `tok`. Log-probs below max - 16 are stored as the
/// minimum; `log p_i = scale * q_i + min_log_prob`.
pub fn quantize_log_probs(logits: &[f32], out: &mut [u16], tok: usize) -> f64 {
    let n_vocab = logits.len();
    let max_logit = max_of(logits);
    let min_logit = logits[1..]
        .iter()
        .fold(logits[0], |m, &v| m.min(v))
        .max(max_logit - 16.0);
    let log_sum_exp = sum_exp(logits, max_logit).ln() as f32;
    let min_log_prob = min_logit - max_logit - log_sum_exp;
    let scale = (max_logit - min_logit) / 65535.0;
    let (head, rest) = out.split_at_mut(4);
    let sb = scale.to_bits();
    let mb = min_log_prob.to_bits();
    head.copy_from_slice(&[sb as u16, (sb >> 16) as u16, mb as u16, (mb >> 16) as u16]);
    let q = &mut rest[..n_vocab];
    if scale != 0.0 {
        let inv_scale = 1.0 / scale;
        for (o, &l) in q.iter_mut().zip(logits) {
            *o = if l > min_logit {
                nearest_int(inv_scale * (l - min_logit)) as u16
            } else {
                0
            };
        }
    } else {
        q.fill(0);
    }
    rest[n_vocab..].fill(0);
    (max_logit + log_sum_exp - logits[tok]) as f64
}

/// The two floats at the head of a quantized row.
pub fn row_header(row: &[u16]) -> (f32, f32) {
    let scale = f32::from_bits(row[0] as u32 | (row[1] as u32) << 16);
    let min_log_prob = f32::from_bits(row[2] as u32 | (row[3] as u32) << 16);
    (scale, min_log_prob)
}

/// Running sums of the KL-divergence mode (`kl_divergence_result`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KldSums {
    pub sum_nll: f64,
    pub sum_nll2: f64,
    pub sum_nll_base: f64,
    pub sum_nll_base2: f64,
    pub sum_nll_nll_base: f64,
    pub sum_kld: f64,
    pub sum_kld2: f64,
    pub sum_p_diff: f64,
    pub sum_p_diff2: f64,
    pub sum_p_diff4: f64,
    pub max_p_diff: f32,
    pub n_same_top: usize,
    pub count: usize,
}

impl KldSums {
    pub fn merge(&mut self, o: &KldSums) {
        self.sum_nll += o.sum_nll;
        self.sum_nll2 += o.sum_nll2;
        self.sum_nll_base += o.sum_nll_base;
        self.sum_nll_base2 += o.sum_nll_base2;
        self.sum_nll_nll_base += o.sum_nll_nll_base;
        self.sum_kld += o.sum_kld;
        self.sum_kld2 += o.sum_kld2;
        self.sum_p_diff += o.sum_p_diff;
        self.sum_p_diff2 += o.sum_p_diff2;
        self.sum_p_diff4 += o.sum_p_diff4;
        self.max_p_diff = self.max_p_diff.max(o.max_p_diff);
        self.n_same_top += o.n_same_top;
        self.count += o.count;
    }
}

/// Compares one position's logits with the base model's quantized row: adds to `kld` and
/// returns (KL divergence, p(tok) - p_base(tok)).
pub fn kld_token(logits: &[f32], base: &[u16], tok: usize, kld: &mut KldSums) -> (f64, f32) {
    let n_vocab = logits.len();
    let mut max_logit = logits[0];
    let mut imax = 0;
    for (i, &l) in logits.iter().enumerate().skip(1) {
        if l > max_logit {
            max_logit = l;
            imax = i;
        }
    }
    let log_sum_exp = sum_exp(logits, max_logit).ln() as f32;
    let (scale, min_log_prob) = row_header(base);
    let q = &base[4..4 + n_vocab];

    let nll = max_logit + log_sum_exp - logits[tok];
    kld.sum_nll += nll as f64;
    kld.sum_nll2 += (nll * nll) as f64;

    let nll_base = -(scale * q[tok] as f32 + min_log_prob);
    kld.sum_nll_base += nll_base as f64;
    kld.sum_nll_base2 += (nll_base * nll_base) as f64;
    kld.sum_nll_nll_base += (nll * nll_base) as f64;

    max_logit += log_sum_exp;
    let mut sum = 0.0f64;
    let mut imax_base = 0usize;
    let mut p_log_base_max = 0.0f32;
    for i in 0..n_vocab {
        let p_log_base = scale * q[i] as f32 + min_log_prob;
        if i == 0 || p_log_base > p_log_base_max {
            p_log_base_max = p_log_base;
            imax_base = i;
        }
        if p_log_base > -16.0 {
            let p_base = p_log_base.exp();
            sum += (p_base * (p_log_base - logits[i] + max_logit)) as f64;
        }
    }
    kld.sum_kld += sum;
    kld.sum_kld2 += sum * sum;
    kld.count += 1;
    if imax == imax_base {
        kld.n_same_top += 1;
    }

    let p_base = (-nll_base).exp();
    let p = (-nll).exp();
    let p_diff = p - p_base;
    kld.sum_p_diff += p_diff as f64;
    let p_diff2 = (p_diff * p_diff) as f64;
    kld.sum_p_diff2 += p_diff2;
    kld.sum_p_diff4 += p_diff2 * p_diff2;
    kld.max_p_diff = kld.max_p_diff.max(p_diff.abs());
    (sum, p_diff)
}

/// (mean, uncertainty of the mean); the uncertainty is 0 for ten values or fewer.
pub fn mean_and_uncertainty(sum: f64, sum2: f64, count: usize) -> (f64, f64) {
    if count < 1 {
        return (0.0, 0.0);
    }
    let f = sum / count as f64;
    let df = sum2 / count as f64 - f * f;
    let df = if df > 0.0 && count > 10 {
        (df / (count - 1) as f64).sqrt()
    } else {
        0.0
    };
    (f, df)
}

pub fn covariance(suma: f64, sumb: f64, sumab: f64, count: usize) -> f64 {
    if count < 10 {
        return 0.0;
    }
    let c = count as f64;
    (sumab / c - (suma / c) * (sumb / c)) / (c - 1.0)
}

/// Linear interpolation between sorted values, in float as llama.cpp computes it.
pub fn percentile(sorted: &[f32], fraction: f32) -> f32 {
    if fraction <= 0.0 {
        return sorted[0];
    }
    if fraction >= 1.0 {
        return sorted[sorted.len() - 1];
    }
    let mut p = fraction * (sorted.len() - 1) as f32;
    let ip = p as usize;
    p -= ip as f32;
    (1.0 - p) * sorted[ip] + p * sorted[(ip + 1).min(sorted.len() - 1)]
}

pub fn median(sorted: &[f32]) -> f32 {
    let n = sorted.len();
    if n.is_multiple_of(2) {
        0.5 * (sorted[n / 2] + sorted[n / 2 - 1])
    } else {
        sorted[n / 2]
    }
}

/// The perplexity accumulator of the standard mode: Σ nll and Σ nll² over scored tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NllSums {
    pub nll: f64,
    pub nll2: f64,
    pub count: usize,
}

impl NllSums {
    pub fn add(&mut self, v: f64) {
        self.nll += v;
        self.nll2 += v * v;
        self.count += 1;
    }

    pub fn ppl(&self) -> f64 {
        (self.nll / self.count as f64).exp()
    }

    /// The `--ppl-output-type 1` statistics: (mean nll, its uncertainty or the raw variance
    /// when that is not positive, as llama.cpp prints it).
    pub fn mean_and_stderr(&self) -> (f64, f64) {
        let c = self.count as f64;
        let av = self.nll / c;
        let mut av2 = self.nll2 / c - av * av;
        if av2 > 0.0 {
            av2 = (av2 / (c - 1.0)).sqrt();
        }
        (av, av2)
    }

    /// `Final estimate`: (PPL, its uncertainty), or None when the variance is not positive.
    pub fn final_estimate(&self) -> Option<(f64, f64)> {
        let c = self.count as f64;
        let nll = self.nll / c;
        let ppl = nll.exp();
        let var = self.nll2 / c - nll * nll;
        (var > 0.0).then(|| (ppl, (var / (c - 1.0)).sqrt() * ppl))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_rounds_half_to_even() {
        assert_eq!(nearest_int(0.4), 0);
        assert_eq!(nearest_int(0.5), 0);
        assert_eq!(nearest_int(1.5), 2);
        assert_eq!(nearest_int(65534.7), 65535);
        assert_eq!(nearest_int(-3.2), -3);
    }

    #[test]
    fn log_softmax_is_normalised() {
        let logits = [1.0f32, 2.0, 3.0, -1.0];
        let total: f64 = (0..4)
            .map(|t| log_softmax(&logits, t).log_softmax.exp())
            .sum();
        assert!((total - 1.0).abs() < 1e-6);
        let r = log_softmax(&logits, 2);
        assert_eq!(r.logit, 3.0);
        assert!((r.prob as f64 - r.log_softmax.exp()).abs() < 1e-6);
    }

    #[test]
    fn quantized_rows_round_trip() {
        let logits: Vec<f32> = (0..101)
            .map(|i| ((i * 37) % 23) as f32 * 0.7 - 5.0)
            .collect();
        let mut row = vec![7u16; row_len(logits.len())];
        assert_eq!(row.len(), 2 * 51 + 4);
        let nll = quantize_log_probs(&logits, &mut row, 5);
        assert!((nll + log_softmax(&logits, 5).log_softmax).abs() < 1e-5);
        assert_eq!(
            *row.last().unwrap(),
            0,
            "the pad of an odd vocabulary is zero"
        );
        let (scale, min_lp) = row_header(&row);
        for (i, &l) in logits.iter().enumerate() {
            let back = scale * row[4 + i] as f32 + min_lp;
            let exact = log_softmax(&logits, i).log_softmax as f32;
            assert!(
                (back - exact).abs() <= scale,
                "token {i}: {back} vs {exact}"
            );
            let _ = l;
        }
    }

    #[test]
    fn same_logits_give_zero_divergence() {
        let logits: Vec<f32> = (0..64).map(|i| (i as f32 * 0.37).sin() * 4.0).collect();
        let mut row = vec![0u16; row_len(64)];
        quantize_log_probs(&logits, &mut row, 3);
        let mut k = KldSums::default();
        let (kld, p_diff) = kld_token(&logits, &row, 3, &mut k);
        assert!(kld.abs() < 1e-4, "kld {kld}");
        assert!(p_diff.abs() < 1e-4);
        assert_eq!(k.n_same_top, 1);
        assert_eq!(k.count, 1);
        // a different distribution diverges
        let other: Vec<f32> = logits.iter().map(|l| -l).collect();
        let (kld2, _) = kld_token(&other, &row, 3, &mut k);
        assert!(kld2 > 0.5);
        assert_eq!(k.n_same_top, 1);
    }

    #[test]
    fn statistics_helpers() {
        assert_eq!(mean_and_uncertainty(5.0, 5.0, 5), (1.0, 0.0));
        let v: Vec<f64> = (1..=20).map(|x| x as f64).collect();
        let (m, u) = mean_and_uncertainty(v.iter().sum(), v.iter().map(|x| x * x).sum(), 20);
        assert_eq!(m, 10.5);
        assert!((u - (33.25f64 / 19.0).sqrt()).abs() < 1e-12);
        let s = [1.0f32, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(percentile(&s, 0.5), 3.0);
        assert_eq!(percentile(&s, 0.9), 4.6);
        assert_eq!(percentile(&s, 0.0), 1.0);
        assert_eq!(percentile(&s, 1.0), 5.0);
        assert_eq!(median(&s), 3.0);
        assert_eq!(median(&s[..4]), 2.5);
        assert_eq!(covariance(1.0, 1.0, 1.0, 5), 0.0);
    }

    #[test]
    fn final_estimate_formula() {
        let mut s = NllSums::default();
        for v in [1.0, 2.0, 3.0, 4.0] {
            s.add(v);
        }
        let (ppl, err) = s.final_estimate().unwrap();
        assert!((ppl - 2.5f64.exp()).abs() < 1e-12);
        assert!((err - (1.25f64 / 3.0).sqrt() * ppl).abs() < 1e-12);
        let mut z = NllSums::default();
        z.add(1.0);
        z.add(1.0);
        assert!(z.final_estimate().is_none());
    }
}
