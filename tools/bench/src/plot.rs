//! `--plot FILE.svg` (not in llama.cpp): throughput against the swept parameter, one line per
//! test, with the standard deviation as error bars, so scaling is seen at a glance.

use crate::record::TestRecord;
use std::collections::BTreeMap;

/// Parameters a sweep can run along, in the order they are preferred as the x axis.
const SWEEPABLE: [(&str, &str); 10] = [
    ("n_threads", "threads"),
    ("n_depth", "depth (tokens)"),
    ("n_ubatch", "ubatch size"),
    ("n_batch", "batch size"),
    ("n_gpu_layers", "GPU layers"),
    ("poll", "poll"),
    ("n_cpu_moe", "CPU MoE layers"),
    ("main_gpu", "main GPU"),
    ("n_prompt", "prompt tokens"),
    ("n_gen", "generated tokens"),
];

/// One plotted line: a label and its (x, mean t/s, stddev) points in x order.
#[derive(Debug, PartialEq)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64, f64)>,
}

/// The swept parameter (the first one with several values) and the series along it.
pub fn series(records: &[TestRecord]) -> (Option<&'static str>, Vec<Series>) {
    let distinct = |field: &str| {
        let mut v: Vec<String> = records.iter().filter_map(|r| r.value(field)).collect();
        v.sort();
        v.dedup();
        v.len()
    };
    // n_prompt / n_gen name the test itself; they are an axis only when nothing else varies
    let swept = SWEEPABLE
        .iter()
        .find(|(f, _)| !matches!(*f, "n_prompt" | "n_gen") && distinct(f) > 1)
        .or_else(|| SWEEPABLE.iter().find(|(f, _)| distinct(f) > 1));
    let mut lines: BTreeMap<String, Series> = BTreeMap::new();
    let mut order = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let x = match swept {
            Some((f, _)) => r
                .value(f)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(i as f64),
            None => i as f64,
        };
        let label = line_label(r, swept.map(|s| s.0), records);
        if !lines.contains_key(&label) {
            order.push(label.clone());
        }
        let s = lines.entry(label.clone()).or_insert(Series {
            label,
            points: vec![],
        });
        s.points.push((x, r.avg_ts(), r.stdev_ts()));
    }
    let mut out: Vec<Series> = order.into_iter().filter_map(|l| lines.remove(&l)).collect();
    for s in &mut out {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    (swept.map(|s| s.1), out)
}

/// The test name, plus the model and any other varying parameter that separates lines.
fn line_label(r: &TestRecord, swept: Option<&str>, all: &[TestRecord]) -> String {
    let mut t = r.clone();
    match swept {
        Some("n_depth") => t.n_depth = 0,
        Some("n_prompt") if r.n_gen == 0 => t.n_prompt = 0,
        Some("n_gen") if r.n_prompt == 0 => t.n_gen = 0,
        _ => {}
    }
    let mut label = match swept {
        Some("n_prompt") if r.n_gen == 0 => "pp".to_string(),
        Some("n_gen") if r.n_prompt == 0 => "tg".to_string(),
        _ => t.test_name(),
    };
    let models: std::collections::BTreeSet<&str> =
        all.iter().map(|r| r.model_filename.as_str()).collect();
    if models.len() > 1 {
        label = format!("{} {}", r.model_type, label);
    }
    for field in [
        "type_k",
        "type_v",
        "flash_attn",
        "n_threads",
        "n_ubatch",
        "n_batch",
        "n_depth",
    ] {
        if Some(field) == swept {
            continue;
        }
        let vals: std::collections::BTreeSet<String> =
            all.iter().filter_map(|x| x.value(field)).collect();
        if vals.len() > 1 {
            label += &format!(" {}={}", field, r.value(field).unwrap_or_default());
        }
    }
    label
}

/// A "nice" step (1, 2 or 5 times a power of ten) that cuts `range` into about `n` parts.
fn nice_step(range: f64, n: f64) -> f64 {
    if range <= 0.0 || !range.is_finite() {
        return 1.0;
    }
    let raw = range / n;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn tick_label(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// The whole SVG document.
pub fn render_svg(records: &[TestRecord], title: &str) -> String {
    let (axis, series) = series(records);
    let (w, h) = (860.0, 520.0);
    let (left, right, top, bottom) = (80.0, 240.0, 50.0, 60.0);
    let (pw, ph) = (w - left - right, h - top - bottom);

    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let (mut x0, mut x1) = xs
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    if xs.is_empty() {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 <= x0 {
        (x0, x1) = (x0 - 1.0, x1 + 1.0);
    }
    // keep the end points off the frame
    let pad = (x1 - x0) * 0.05;
    let (x0, x1) = (x0 - pad, x1 + pad);
    let ymax = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1 + p.2))
        .fold(0.0f64, f64::max);
    let ystep = nice_step(if ymax > 0.0 { ymax } else { 1.0 }, 5.0);
    let y1 = (ymax / ystep).ceil().max(1.0) * ystep;
    let px = |x: f64| left + (x - x0) / (x1 - x0) * pw;
    let py = |y: f64| top + ph - y / y1 * ph;

    let mut s = String::new();
    s += &format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">\n"
    );
    s += &format!("<rect x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"white\"/>\n");
    s += &format!(
        "<text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
        left + pw / 2.0,
        esc(title)
    );
    // grid and y ticks
    let mut y = 0.0;
    while y <= y1 + ystep * 1e-9 {
        let yy = py(y);
        s += &format!(
            "<line x1=\"{left}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"#ddd\"/>\n",
            left + pw
        );
        s += &format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            left - 6.0,
            yy + 4.0,
            tick_label(y)
        );
        y += ystep;
    }
    // x ticks: the measured values themselves when few, else nice steps
    let mut xt: Vec<f64> = xs.clone();
    xt.sort_by(|a, b| a.total_cmp(b));
    xt.dedup();
    if xt.len() > 12 {
        let step = nice_step(x1 - x0, 8.0);
        xt = (0..)
            .map(|k| (x0 / step).ceil() * step + k as f64 * step)
            .take_while(|v| *v <= x1)
            .collect();
    }
    for x in &xt {
        let xx = px(*x);
        s += &format!(
            "<line x1=\"{xx:.1}\" y1=\"{:.1}\" x2=\"{xx:.1}\" y2=\"{:.1}\" stroke=\"#333\"/>\n",
            top + ph,
            top + ph + 5.0
        );
        s += &format!(
            "<text x=\"{xx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
            top + ph + 18.0,
            tick_label(*x)
        );
    }
    s += &format!("<rect x=\"{left}\" y=\"{top}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#333\"/>\n");
    s += &format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
        left + pw / 2.0,
        h - 16.0,
        esc(axis.unwrap_or("test"))
    );
    s += &format!(
        "<text x=\"20\" y=\"{:.1}\" text-anchor=\"middle\" transform=\"rotate(-90 20 {:.1})\">tokens / second</text>\n",
        top + ph / 2.0,
        top + ph / 2.0
    );
    for (i, se) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let pts: Vec<String> = se
            .points
            .iter()
            .map(|p| format!("{:.1},{:.1}", px(p.0), py(p.1)))
            .collect();
        s += &format!("<g class=\"series\" data-label=\"{}\">\n", esc(&se.label));
        if pts.len() > 1 {
            s += &format!(
                "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>\n",
                pts.join(" ")
            );
        }
        for p in &se.points {
            let (xx, yy) = (px(p.0), py(p.1));
            if p.2 > 0.0 {
                let (lo, hi) = (py(p.1 - p.2), py(p.1 + p.2));
                s += &format!(
                    "<path d=\"M{xx:.1},{lo:.1} V{hi:.1} M{:.1},{lo:.1} h8 M{:.1},{hi:.1} h8\" stroke=\"{c}\" fill=\"none\"/>\n",
                    xx - 4.0,
                    xx - 4.0
                );
            }
            s += &format!(
                "<circle cx=\"{xx:.1}\" cy=\"{yy:.1}\" r=\"3.5\" fill=\"{c}\"><title>{}: {:.2} ± {:.2} t/s</title></circle>\n",
                esc(&se.label),
                p.1,
                p.2
            );
        }
        s += "</g>\n";
        let ly = top + 10.0 + i as f64 * 20.0;
        let lx = left + pw + 16.0;
        s += &format!("<line x1=\"{lx:.1}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke=\"{c}\" stroke-width=\"3\"/>\n", lx + 24.0);
        s += &format!(
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
            lx + 30.0,
            ly + 4.0,
            esc(&se.label)
        );
    }
    s += "</svg>\n";
    s
}

/// Writes the plot through a temporary file and a rename, so a failed run leaves no half file.
pub fn write_svg(
    path: &std::path::Path,
    records: &[TestRecord],
    title: &str,
) -> std::io::Result<()> {
    let svg = render_svg(records, title);
    let tmp = path.with_extension(format!("svg.tmp{}", std::process::id()));
    std::fs::write(&tmp, svg)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::sample;

    fn rec(threads: i32, pp: i32, tg: i32, ns: u64) -> TestRecord {
        let mut r = sample();
        r.n_threads = threads;
        r.n_prompt = pp;
        r.n_gen = tg;
        r.samples_ns = vec![ns, ns];
        r
    }

    #[test]
    fn threads_sweep_gives_one_line_per_test() {
        let rs = vec![
            rec(1, 512, 0, 100_000_000),
            rec(1, 0, 128, 1_000_000_000),
            rec(2, 512, 0, 50_000_000),
            rec(2, 0, 128, 800_000_000),
        ];
        let (axis, s) = series(&rs);
        assert_eq!(axis, Some("threads"));
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].label, "pp512");
        assert_eq!(s[1].label, "tg128");
        assert_eq!(
            s[0].points.iter().map(|p| p.0).collect::<Vec<_>>(),
            vec![1.0, 2.0]
        );
        assert!((s[0].points[1].1 - 10240.0).abs() < 1e-6);
        assert_eq!(s[0].points[1].2, 0.0);
    }

    #[test]
    fn depth_sweep_merges_depths_into_one_line() {
        let mut a = rec(2, 0, 128, 1_000_000_000);
        let mut b = a.clone();
        a.n_depth = 0;
        b.n_depth = 512;
        let (axis, s) = series(&[a, b]);
        assert_eq!(axis, Some("depth (tokens)"));
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].label, "tg128");
    }

    #[test]
    fn svg_is_well_formed() {
        let rs = vec![rec(1, 512, 0, 100_000_000), rec(2, 512, 0, 60_000_000)];
        let svg = render_svg(&rs, "llama-bench <tiny>");
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("&lt;tiny&gt;"));
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert_eq!(svg.matches("<circle").count(), 2);
        // tags balance
        assert_eq!(svg.matches("<g ").count(), svg.matches("</g>").count());
        assert_eq!(
            svg.matches("<circle").count(),
            svg.matches("</circle>").count()
        );
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(10_000.0, 5.0), 2000.0);
        assert_eq!(nice_step(7.0, 5.0), 2.0);
        assert_eq!(nice_step(0.0, 5.0), 1.0);
    }
}
