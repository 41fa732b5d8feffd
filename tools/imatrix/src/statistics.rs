//! `--show-statistics`: per tensor, the distribution of its mean squared activations (sum,
//! extremes, mean, deviation, the share above 1e-5, entropy, the share more than one deviation
//! above the mean, the cosine similarity with the same tensor of the previous layer), then
//! the element-weighted averages per layer; in f32 as imatrix.cpp computes them.

use std::collections::BTreeMap;

use crate::collector::Stats;

/// One tensor's figures (`tensor_statistics`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TensorStatistics {
    pub tensor: String,
    pub values: Vec<f32>,
    pub total_sqract: f32,
    pub mean_sqract: f32,
    pub max_sqract: f32,
    pub min_sqract: f32,
    pub elements: i32,
    pub stddev: f32,
    pub active: f32,
    pub entropy: f32,
    pub zd: f32,
    pub cossim: f32,
}

/// `process_tensor_name`: the layer (after "blk", "-" when none) and the short tensor name
/// (before "weight", the whole name when none).
pub fn process_tensor_name(input: &str) -> (String, String) {
    let mut parts: Vec<&str> = input.split('.').collect();
    // getline yields no empty item after a trailing separator
    if parts.last() == Some(&"") {
        parts.pop();
    }
    let layer = parts
        .iter()
        .position(|&p| p == "blk")
        .and_then(|i| parts.get(i + 1))
        .map_or("-".to_string(), |s| s.to_string());
    let tensor = parts
        .iter()
        .enumerate()
        .find(|&(i, &p)| p == "weight" && i > 0)
        .map_or(input.to_string(), |(i, _)| parts[i - 1].to_string());
    let layer = if layer.is_empty() { "-".into() } else { layer };
    let tensor = if tensor.is_empty() {
        input.to_string()
    } else {
        tensor
    };
    (layer, tensor)
}

/// `compute_statistics`; None (with llama.cpp's message) when the tensor has no usable data.
pub fn compute(name: &str, e: &Stats) -> Result<TensorStatistics, String> {
    if e.counts.is_empty() {
        return Err(format!(
            "compute_statistics: there are no activations for tensor {name}. The imatrix may be suboptimal"
        ));
    }
    if !e.values.len().is_multiple_of(e.counts.len()) {
        return Err(format!(
            "compute_statistics: activation size mismatch for tensor {} ({} vs {})",
            name,
            e.counts.len(),
            e.values.len()
        ));
    }
    let n_mat = e.counts.len();
    let row_size = e.values.len() / n_mat;
    let mut act: Vec<f32> = Vec::with_capacity(e.values.len());
    for i in 0..n_mat {
        if e.counts[i] == 0 {
            continue;
        }
        let c = e.counts[i] as f32;
        act.extend(
            e.values[i * row_size..(i + 1) * row_size]
                .iter()
                .map(|v| v / c),
        );
    }
    if act.is_empty() {
        return Err(format!(
            "compute_statistics: all counts are zero for tensor {name}, skipping statistics computation"
        ));
    }
    let n = act.len() as f32;
    let total = act.iter().fold(0.0f32, |s, &v| s + v);
    let max = act[1..]
        .iter()
        .fold(act[0], |m, &v| if v > m { v } else { m });
    let min = act[1..]
        .iter()
        .fold(act[0], |m, &v| if v < m { v } else { m });
    let mean = total / n;
    let sqr_total = act.iter().fold(0.0f32, |s, &v| s + v * v);
    let var = (sqr_total / n) - (mean * mean);
    let dev = var.max(0.0).sqrt();
    let inactive = act.iter().filter(|v| v.abs() <= 1e-5).count();
    let active = 1.0 - inactive as f32 / n;
    let mut entropy = 0.0f32;
    if total > 0.0 {
        for &a in &act {
            let p = a / total;
            if p > 0.0 {
                entropy -= p * p.log2();
            }
        }
    }
    let mut z = 0;
    if dev > 0.0 {
        z = act.iter().filter(|&&a| (a - mean) / dev > 1.0).count();
    }
    Ok(TensorStatistics {
        tensor: name.to_string(),
        values: e.values.clone(),
        total_sqract: total,
        mean_sqract: mean,
        max_sqract: max,
        min_sqract: min,
        elements: act.len() as i32,
        stddev: dev,
        active,
        entropy,
        zd: z as f32 / act.len() as i32 as f32,
        cossim: 0.0,
    })
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).fold(0.0f32, |s, (x, y)| s + x * y)
}

/// The layer number of `blk.N.` in a name and where N sits.
fn blk_number(name: &str) -> Option<(usize, usize, i64)> {
    let mut from = 0;
    while let Some(i) = name[from..].find("blk.") {
        let start = from + i + 4;
        let digits = name[start..].bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && name[start + digits..].starts_with('.') {
            let n = name[start..start + digits].parse().ok()?;
            return Some((start, digits, n));
        }
        from = start;
    }
    None
}

/// `compute_cossim`: each tensor against the same tensor one layer earlier.
pub fn compute_cossim(ts: &mut [TensorStatistics]) {
    for k in 0..ts.len() {
        let Some((start, len, blk)) = blk_number(&ts[k].tensor) else {
            ts[k].cossim = 0.0;
            continue;
        };
        let mut prev_name = ts[k].tensor.clone();
        prev_name.replace_range(start..start + len, &(blk - 1).to_string());
        if let Some(p) = ts.iter().position(|t| t.tensor == prev_name) {
            let (cur, prev) = (&ts[k].values, &ts[p].values);
            let dp = dot(cur, prev);
            let cur_mag = dot(cur, cur).sqrt();
            let prev_mag = dot(prev, prev).sqrt();
            ts[k].cossim = dp / (cur_mag * prev_mag);
        }
    }
}

/// printf's `%W.Pf` (nan and inf as C prints them).
fn f(v: f32, width: usize, prec: usize) -> String {
    let s = if v.is_nan() {
        if v.is_sign_negative() {
            "-nan".to_string()
        } else {
            "nan".to_string()
        }
    } else if v.is_infinite() {
        if v < 0.0 {
            "-inf".to_string()
        } else {
            "inf".to_string()
        }
    } else {
        format!("{:.*}", prec, v)
    };
    format!("{s:>width$}")
}

/// The report printed on stderr, sorted by short name and then by falling Σ(Act²): one entry
/// per LOG_INF of imatrix.cpp, each of which gets its own log prefix.
pub fn report(file: &str, mut ts: Vec<TensorStatistics>) -> Vec<String> {
    ts.sort_by(|a, b| {
        let (_, na) = process_tensor_name(&a.tensor);
        let (_, nb) = process_tensor_name(&b.tensor);
        na.cmp(&nb).then(
            b.total_sqract
                .partial_cmp(&a.total_sqract)
                .unwrap_or(std::cmp::Ordering::Equal),
        )
    });
    #[derive(Default)]
    struct Weighted {
        bias: f32,
        zd: f32,
        cossim: f32,
        elements: i32,
    }
    let mut ws: BTreeMap<i64, Weighted> = BTreeMap::new();
    let mut out = vec![format!(
        "\nComputing statistics for {} ({} tensors)\n",
        file,
        ts.len()
    )];
    out.push(format!(
        "\n{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
        " Layer",
        "       Tensor",
        "          Σ(Act²)",
        "  Min",
        "            Max",
        "           μ",
        "   σ",
        " % Active",
        "N",
        "   Entropy",
        "E (norm)",
        "ZD",
        "  CosSim"
    ));
    out.push(format!("{}\n", "=".repeat(169)));
    for t in &ts {
        let (layer, name) = process_tensor_name(&t.tensor);
        let blk = stoi(&layer).unwrap_or(-1);
        let entropy_norm = if t.elements > 0 {
            (100.0f64 * (t.entropy as f64 / (t.elements as f64).log2())) as f32
        } else {
            0.0
        };
        out.push(format!(
            "{:>5}\t{:<20}\t{}\t{}\t{}\t{}\t{}\t{}%\t{:6}\t{}\t{}%\t{}%\t{}\n",
            layer,
            name,
            f(t.total_sqract, 10, 2),
            f(t.min_sqract, 8, 4),
            f(t.max_sqract, 11, 4),
            f(t.mean_sqract, 6, 2),
            f(t.stddev, 6, 2),
            f(t.active * 100.0, 8, 2),
            t.elements,
            f(t.entropy, 10, 4),
            f(entropy_norm, 6, 2),
            f(100.0 * t.zd, 10, 2),
            f(t.cossim, 8, 4)
        ));
        let w = ws.entry(blk).or_default();
        w.bias += t.elements as f32 * t.total_sqract;
        w.zd += t.elements as f32 * t.zd;
        w.cossim += t.elements as f32 * t.cossim;
        w.elements += t.elements;
    }
    let layers = ws.keys().filter(|&&k| k >= 0).count();
    out.push(format!(
        "\nComputing weighted average statistics per layer ({layers} layers)\n"
    ));
    out.push(format!(
        "\n{}\t{}\t{}\t{}\n",
        "  Layer", "     μΣ(Act²)", "      μZD", "μCosSim"
    ));
    out.push("================================================\n".to_string());
    for (&layer, w) in &ws {
        if w.elements == 0 || layer < 0 {
            continue;
        }
        let n = w.elements as f32;
        out.push(format!(
            "{:5}\t{}\t{}%\t{}\n",
            layer,
            f(w.bias / n, 14, 2),
            f(100.0 * (w.zd / n), 10, 4),
            f(w.cossim / n, 6, 4)
        ));
    }
    out.push("\n".to_string());
    out
}

/// `std::stoi`: optional space and sign, then at least one digit.
fn stoi(s: &str) -> Option<i64> {
    let t = s.trim_start();
    let (neg, rest) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let d: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let v: i64 = d.parse().ok()?;
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_into_layer_and_short_name() {
        assert_eq!(
            process_tensor_name("blk.12.attn_k.weight"),
            ("12".into(), "attn_k".into())
        );
        assert_eq!(
            process_tensor_name("output.weight"),
            ("-".into(), "output".into())
        );
        assert_eq!(process_tensor_name("odd"), ("-".into(), "odd".into()));
    }

    #[test]
    fn figures_of_a_small_tensor() {
        let e = Stats {
            values: vec![2.0, 4.0, 0.0, 10.0],
            counts: vec![2],
        };
        let t = compute("blk.1.x.weight", &e).unwrap();
        // means 1, 2, 0, 5
        assert_eq!(t.total_sqract, 8.0);
        assert_eq!(t.min_sqract, 0.0);
        assert_eq!(t.max_sqract, 5.0);
        assert_eq!(t.mean_sqract, 2.0);
        assert_eq!(t.elements, 4);
        assert_eq!(t.active, 0.75);
        // only 5 lies more than one deviation (sqrt(3.5)) above the mean
        assert_eq!(t.zd, 0.25);
        assert!(compute(
            "z",
            &Stats {
                values: vec![1.0],
                counts: vec![0]
            }
        )
        .is_err());
    }

    #[test]
    fn cosine_similarity_is_against_the_previous_layer() {
        let mk = |name: &str, v: Vec<f32>| TensorStatistics {
            tensor: name.into(),
            values: v,
            ..Default::default()
        };
        let mut ts = vec![
            mk("blk.1.a.weight", vec![1.0, 0.0]),
            mk("blk.0.a.weight", vec![1.0, 1.0]),
            mk("output.weight", vec![1.0, 1.0]),
        ];
        compute_cossim(&mut ts);
        assert!((ts[0].cossim - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert_eq!(ts[1].cossim, 0.0);
        assert_eq!(ts[2].cossim, 0.0);
    }
}
