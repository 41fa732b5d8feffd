//! The text of the KL-divergence mode: the per-chunk table row and the statistics block
//! (llama.cpp's `kl_divergence()` output, on stdout).

use crate::math::{covariance, mean_and_uncertainty, median, percentile, KldSums};

pub const CHUNK_HEADER: &str =
    "chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p\n";

/// One row of the running statistics after chunk `i` (1-based).
pub fn chunk_row(i: usize, k: &KldSums) -> String {
    let mut s = format!("{i:4}");
    let log_ppl = mean_and_uncertainty(k.sum_nll, k.sum_nll2, k.count);
    let ppl_val = log_ppl.0.exp();
    let ppl_unc = ppl_val * log_ppl.1;
    s += &format!("    {:>9} ± {:>9}", f(ppl_val, 4), f(ppl_unc, 4));

    let log_ppl_base = mean_and_uncertainty(k.sum_nll_base, k.sum_nll_base2, k.count);
    let cov = covariance(k.sum_nll, k.sum_nll_base, k.sum_nll_nll_base, k.count);
    let ratio_val = log_ppl.0 - log_ppl_base.0;
    let ratio_unc = (log_ppl.1 * log_ppl.1 + log_ppl_base.1 * log_ppl_base.1 - 2.0 * cov).sqrt();
    s += &format!("    {:>10} ± {:>10}", f(ratio_val, 5), f(ratio_unc, 5));

    let kl = mean_and_uncertainty(k.sum_kld, k.sum_kld2, k.count);
    s += &format!("    {:>10} ± {:>10}", f(kl.0, 5), f(kl.1, 5));

    let mse = mean_and_uncertainty(k.sum_p_diff2, k.sum_p_diff4, k.count);
    let rms_val = mse.0.sqrt();
    let rms_unc = 0.5 / rms_val * mse.1;
    s += &format!(
        "    {:>6} ± {:>6} %",
        f(100.0 * rms_val, 3),
        f(100.0 * rms_unc, 3)
    );

    let top = k.n_same_top as f64 / k.count as f64;
    let top_unc = (top * (1.0 - top) / (k.count as f64 - 1.0)).sqrt();
    s += &format!(
        "    {:>6} ± {:>6} %",
        f(100.0 * top, 3),
        f(100.0 * top_unc, 3)
    );
    s += "\n";
    s
}

/// printf `%.<p>f` with C's spelling of NaN and infinity (0/0 appears for a single token).
pub fn f(v: f64, p: usize) -> String {
    if v.is_nan() {
        if v.is_sign_negative() { "-nan" } else { "nan" }.to_string()
    } else if v.is_infinite() {
        if v < 0.0 { "-inf" } else { "inf" }.to_string()
    } else {
        format!("{v:.p$}")
    }
}

/// The three statistics blocks; `kld_values` and `p_diff_values` are sorted here.
pub fn summary(k: &KldSums, kld_values: &mut [f32], p_diff_values: &mut [f32]) -> String {
    kld_values.sort_by(|a, b| a.total_cmp(b));
    p_diff_values.sort_by(|a, b| a.total_cmp(b));
    let mut s = String::from("====== Perplexity statistics ======\n");
    let log_ppl = mean_and_uncertainty(k.sum_nll, k.sum_nll2, k.count);
    let ppl_val = log_ppl.0.exp();
    let ppl_unc = ppl_val * log_ppl.1;
    s += &format!(
        "Mean PPL(Q)                   : {:>10} ± {:>10}\n",
        f(ppl_val, 6),
        f(ppl_unc, 6)
    );
    let log_base = mean_and_uncertainty(k.sum_nll_base, k.sum_nll_base2, k.count);
    let base_val = log_base.0.exp();
    let base_unc = base_val * log_base.1;
    s += &format!(
        "Mean PPL(base)                : {:>10} ± {:>10}\n",
        f(base_val, 6),
        f(base_unc, 6)
    );
    let cov = covariance(k.sum_nll, k.sum_nll_base, k.sum_nll_nll_base, k.count);
    let cor = cov / (log_ppl.1 * log_base.1);
    s += &format!(
        "Cor(ln(PPL(Q)), ln(PPL(base))): {:>6}%\n",
        f(100.0 * cor, 2)
    );
    let ratio_val = log_ppl.0 - log_base.0;
    let ratio_unc = (log_ppl.1 * log_ppl.1 + log_base.1 * log_base.1 - 2.0 * cov).sqrt();
    s += &format!(
        "Mean ln(PPL(Q)/PPL(base))     : {:>10} ± {:>10}\n",
        f(ratio_val, 6),
        f(ratio_unc, 6)
    );
    let pr_val = ratio_val.exp();
    let pr_unc = pr_val * ratio_unc;
    s += &format!(
        "Mean PPL(Q)/PPL(base)         : {:>10} ± {:>10}\n",
        f(pr_val, 6),
        f(pr_unc, 6)
    );
    let ppl_cov = ppl_val * base_val * cov;
    let diff_val = ppl_val - base_val;
    let diff_unc = (ppl_unc * ppl_unc + base_unc * base_unc - 2.0 * ppl_cov).sqrt();
    s += &format!(
        "Mean PPL(Q)-PPL(base)         : {:>10} ± {:>10}\n",
        f(diff_val, 6),
        f(diff_unc, 6)
    );
    s += "\n";

    s += "====== KL divergence statistics ======\n";
    let kl = mean_and_uncertainty(k.sum_kld, k.sum_kld2, k.count);
    s += &format!("Mean    KLD: {:>10} ± {:>10}\n", f(kl.0, 6), f(kl.1, 6));
    let kv = &*kld_values;
    let g = |v: f32| format!("{:>10}", f(v as f64, 6));
    s += &format!("Maximum KLD: {}\n", g(kv[kv.len() - 1]));
    for (label, frac) in [
        ("99.9%", 0.999f32),
        ("99.0%", 0.990),
        ("95.0%", 0.950),
        ("90.0%", 0.900),
    ] {
        s += &format!("{label}   KLD: {}\n", g(percentile(kv, frac)));
    }
    s += &format!("Median  KLD: {}\n", g(median(kv)));
    for (label, frac) in [
        ("10.0%", 0.100f32),
        (" 5.0%", 0.050),
        (" 1.0%", 0.010),
        (" 0.1%", 0.001),
    ] {
        s += &format!("{label}   KLD: {}\n", g(percentile(kv, frac)));
    }
    s += &format!("Minimum KLD: {}\n", g(kv[0]));
    s += "\n";

    s += "====== Token probability statistics ======\n";
    let pd = mean_and_uncertainty(k.sum_p_diff, k.sum_p_diff2, k.count);
    s += &format!(
        "Mean    Δp: {:>6} ± {:>5} %\n",
        f(100.0 * pd.0, 3),
        f(100.0 * pd.1, 3)
    );
    let pv = &*p_diff_values;
    let h = |v: f32| format!("{:>6}%", f(100.0 * v as f64, 3));
    s += &format!("Maximum Δp: {}\n", h(pv[pv.len() - 1]));
    for (label, frac) in [
        ("99.9%", 0.999f32),
        ("99.0%", 0.990),
        ("95.0%", 0.950),
        ("90.0%", 0.900),
        ("75.0%", 0.750),
    ] {
        s += &format!("{label}   Δp: {}\n", h(percentile(pv, frac)));
    }
    s += &format!("Median  Δp: {}\n", h(median(pv)));
    for (label, frac) in [
        ("25.0%", 0.250f32),
        ("10.0%", 0.100),
        (" 5.0%", 0.050),
        (" 1.0%", 0.010),
        (" 0.1%", 0.001),
    ] {
        s += &format!("{label}   Δp: {}\n", h(percentile(pv, frac)));
    }
    s += &format!("Minimum Δp: {}\n", h(pv[0]));
    let mse = mean_and_uncertainty(k.sum_p_diff2, k.sum_p_diff4, k.count);
    let rms_val = mse.0.sqrt();
    let rms_unc = 0.5 / rms_val * mse.1;
    s += &format!(
        "RMS Δp    : {:>6} ± {:>5} %\n",
        f(100.0 * rms_val, 3),
        f(100.0 * rms_unc, 3)
    );
    let same = k.n_same_top as f64 / k.count as f64;
    let same_unc = (same * (1.0 - same) / (k.count as f64 - 1.0)).sqrt();
    s += &format!(
        "Same top p: {:>6} ± {:>5} %\n",
        f(100.0 * same, 3),
        f(100.0 * same_unc, 3)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::{kld_token, quantize_log_probs, row_len};

    /// Identical logits on both sides, over enough tokens for the summary.
    fn identical(n: usize) -> (KldSums, Vec<f32>, Vec<f32>) {
        let mut k = KldSums::default();
        let (mut kv, mut pv) = (vec![], vec![]);
        for t in 0..n {
            let logits: Vec<f32> = (0..50)
                .map(|i| ((i * 7 + t * 3) % 17) as f32 * 0.5)
                .collect();
            let mut row = vec![0u16; row_len(50)];
            quantize_log_probs(&logits, &mut row, t % 50);
            let (a, b) = kld_token(&logits, &row, t % 50, &mut k);
            kv.push(a as f32);
            pv.push(b);
        }
        (k, kv, pv)
    }

    #[test]
    fn chunk_row_layout() {
        let (k, _, _) = identical(63);
        let row = chunk_row(1, &k);
        assert!(row.starts_with("   1    "), "{row:?}");
        // PPL ± unc, ratio ± unc, KLD ± unc, RMS ± unc %, same top ± unc %
        assert_eq!(row.matches(" ± ").count(), 5);
        assert!(row.contains("   100.000 ±  0.000 %"), "{row}");
        assert!(row.ends_with(" %\n"));
    }

    #[test]
    fn summary_of_identical_models() {
        let (k, mut kv, mut pv) = identical(127);
        let s = summary(&k, &mut kv, &mut pv);
        assert!(
            s.starts_with("====== Perplexity statistics ======\nMean PPL(Q)                   : ")
        );
        assert!(s.contains("Mean PPL(Q)/PPL(base)         :   1.00"), "{s}");
        assert!(s.contains("Same top p: 100.000 ± 0.000 %\n"), "{s}");
        let max_kld: f64 = s
            .lines()
            .find_map(|l| l.strip_prefix("Maximum KLD:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(max_kld.abs() < 1e-4, "{s}");
        assert!(s.contains("99.9%   KLD: "));
        assert!(s.contains(" 0.1%   Δp: "));
        assert!(s.contains("Median  Δp: "));
        assert_eq!(s.lines().count(), 7 + 1 + 13 + 1 + 17);
    }

    #[test]
    fn c_spellings() {
        assert_eq!(f(f64::NAN, 3), "nan");
        assert_eq!(f(-0.0004, 3), "-0.000");
        assert_eq!(f(1.23456, 2), "1.23");
    }
}
