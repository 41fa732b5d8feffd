//! Runs cases on a backend and on the f64 reference and compares the results.

use crate::alloc::alloc_ctx;
use crate::case::{seed_of, Case, Compare, Init, Rng};
use crate::reference;
use crate::shadow::{ne, Shadow};
use ggml::backend::{Backend, DeviceRef, GraphView, Status};
use ggml::{Context, Graph, TensorId, Type};

#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Pass {
        err: f64,
    },
    Fail(String),
    /// The device does not support some node of the case.
    Unsupported,
}

#[derive(Clone, Debug)]
pub struct CaseResult {
    pub op: &'static str,
    pub ty: Type,
    pub desc: String,
    pub outcome: Outcome,
}

#[derive(Clone, Debug, Default)]
pub struct Report {
    pub results: Vec<CaseResult>,
}

impl Report {
    pub fn passed(&self) -> usize {
        self.results
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Pass { .. }))
            .count()
    }
    pub fn unsupported(&self) -> usize {
        self.results
            .iter()
            .filter(|r| r.outcome == Outcome::Unsupported)
            .count()
    }
    pub fn failures(&self) -> Vec<&CaseResult> {
        self.results
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Fail(_)))
            .collect()
    }
    /// One line per failure plus the counts.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        for f in self.failures() {
            if let Outcome::Fail(why) = &f.outcome {
                s.push_str(&format!("FAIL {}: {}\n", f.desc, why));
            }
        }
        s.push_str(&format!(
            "{} passed, {} failed, {} not supported, of {}\n",
            self.passed(),
            self.failures().len(),
            self.unsupported(),
            self.results.len()
        ));
        s
    }
}

/// Values for an input tensor of `n` elements with rows of `ne0`.
fn init_values(init: &Init, n: usize, ne0: usize, rng: &mut Rng, shape: [usize; 4]) -> Vec<f32> {
    match init {
        Init::Uniform(lo, hi) => (0..n).map(|_| lo + (hi - lo) * rng.unit()).collect(),
        Init::Index { max, unique } => {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n / ne0.max(1) {
                if *unique {
                    let mut all: Vec<usize> = (0..*max).collect();
                    for i in 0..ne0 {
                        let j = i + rng.below(all.len() - i);
                        all.swap(i, j);
                        v.push(all[i] as f32);
                    }
                } else {
                    v.extend((0..ne0).map(|_| rng.below(*max) as f32));
                }
            }
            v
        }
        Init::CausalMask => {
            let (n_kv, n_q) = (shape[0], shape[1]);
            let mut v = Vec::with_capacity(n);
            for _ in 0..n / (n_kv * n_q).max(1) {
                for i in 0..n_q {
                    for j in 0..n_kv {
                        let visible = j + n_q <= n_kv + i;
                        v.push(if visible { 0.0 } else { f32::NEG_INFINITY });
                    }
                }
            }
            v
        }
        Init::Values(vals) => vals.clone(),
    }
}

/// The reference quantizer of `ty`, or for the types ggml only quantizes with an importance
/// matrix (IQ2_XXS, IQ2_XS, IQ1_S), their quantizer with flat importance, row by row.
pub(crate) fn quantize_values(ty: Type, vals: &[f32], out: &mut [u8]) {
    if !ggml::quants::requires_imatrix(ty) {
        ggml::quants::quantize_row_ref(ty, vals, out);
        return;
    }
    // these types have 256-value blocks and the tensors here rows of 256
    let n = ty.block_size();
    let ones = vec![1.0f32; n];
    ggml::quants::quantize_chunk(ty, vals, out, 0, vals.len() / n, n, Some(&ones));
}

/// Encodes f32 values (whole rows) as bytes of `ty`.
fn encode(ty: Type, vals: &[f32]) -> Vec<u8> {
    match ty {
        Type::I64 => vals
            .iter()
            .flat_map(|&v| (v as i64).to_le_bytes())
            .collect(),
        _ => {
            let mut out = vec![0u8; ty.row_size(vals.len() as i64)];
            quantize_values(ty, vals, &mut out);
            out
        }
    }
}

fn fill_inputs(
    ctx: &Context,
    leafs: &[TensorId],
    inits: &[(TensorId, Init)],
    rng: &mut Rng,
) -> Result<(), String> {
    for &id in leafs {
        let t = &ctx[id];
        if t.view_src.is_some() || t.data.is_none() {
            continue;
        }
        let init = inits
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, x)| x.clone())
            .unwrap_or(Init::Uniform(-1.0, 1.0));
        let shape = ne(t);
        let n: usize = shape.iter().product();
        let vals = init_values(&init, n, shape[0], rng, shape);
        // leafs are contiguous roots: their bytes are the rows in order
        ggml::backend::set_tensor(t, &encode(t.ty, &vals), 0).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn nmse(out: &[f64], expect: &[f64]) -> f64 {
    let mut num = 0.0;
    let mut den = 0.0;
    for (&a, &b) in out.iter().zip(expect) {
        if a.is_nan() != b.is_nan() || (a.is_infinite() || b.is_infinite()) && a != b {
            return f64::INFINITY;
        }
        if a.is_finite() && b.is_finite() {
            num += (a - b) * (a - b);
            den += b * b;
        }
    }
    if den == 0.0 {
        num
    } else {
        num / den
    }
}

/// Runs one case on a backend of `dev`.
pub fn run_case(
    case: &Case,
    make_backend: &dyn Fn() -> Box<dyn Backend>,
    dev: &DeviceRef,
) -> Outcome {
    let mut ctx = Context::new();
    let built = (case.build)(&mut ctx);
    let mut graph = Graph::new(ctx);
    graph.build_forward_expand(built.out);
    if !graph.nodes.iter().all(|&n| dev.supports_op(&graph.ctx, n)) {
        return Outcome::Unsupported;
    }
    if let Err(e) = alloc_ctx(&mut graph.ctx, &dev.buffer_type()) {
        return Outcome::Fail(format!("allocation: {e}"));
    }
    let mut rng = Rng::new(seed_of(&case.desc));
    if let Err(e) = fill_inputs(&graph.ctx, &graph.leafs, &built.init, &mut rng) {
        return Outcome::Fail(format!("inputs: {e}"));
    }

    let mut expect = Shadow::default();
    for &l in &graph.leafs {
        if graph.ctx[l].view_src.is_none() {
            if let Err(e) = expect.load(&graph.ctx, l) {
                return Outcome::Fail(format!("reading inputs: {e}"));
            }
        }
    }
    for &n in &graph.nodes {
        reference::eval(&graph.ctx, &mut expect, n);
    }

    let mut backend = make_backend();
    let status = backend.graph_compute(GraphView {
        ctx: &graph.ctx,
        nodes: &graph.nodes,
    });
    let synced = backend.synchronize();
    if status != Status::Success {
        return Outcome::Fail(format!("graph_compute returned {status}"));
    }
    if let Err(e) = synced {
        return Outcome::Fail(format!("synchronize: {e}"));
    }
    let mut got = Shadow::default();
    for id in graph.ctx.ids() {
        if graph.ctx[id].view_src.is_none() && graph.ctx[id].data.is_some() {
            if let Err(e) = got.load(&graph.ctx, id) {
                return Outcome::Fail(format!("reading results: {e}"));
            }
        }
    }
    let (o, e) = (
        got.dense(&graph.ctx, built.out),
        expect.dense(&graph.ctx, built.out),
    );
    match case.compare {
        Compare::Nmse(max) => {
            let err = nmse(&o, &e);
            if err <= max {
                Outcome::Pass { err }
            } else {
                let worst = o
                    .iter()
                    .zip(&e)
                    .enumerate()
                    .max_by(|a, b| {
                        (a.1 .0 - a.1 .1)
                            .abs()
                            .partial_cmp(&(b.1 .0 - b.1 .1).abs())
                            .unwrap_or(std::cmp::Ordering::Less)
                    })
                    .map(|(i, (a, b))| format!("worst at {i}: got {a}, want {b}"))
                    .unwrap_or_default();
                Outcome::Fail(format!("NMSE {err:.3e} > {max:.1e} ({worst})"))
            }
        }
        Compare::SortedRows => {
            let ne0 = ne(&graph.ctx[built.out])[0].max(1);
            let sorted = |v: &[f64]| -> Vec<Vec<i64>> {
                v.chunks(ne0)
                    .map(|r| {
                        let mut r: Vec<i64> = r.iter().map(|&x| x as i64).collect();
                        r.sort();
                        r
                    })
                    .collect()
            };
            if sorted(&o) == sorted(&e) {
                Outcome::Pass { err: 0.0 }
            } else {
                Outcome::Fail("rows differ as sets".into())
            }
        }
    }
}

/// Runs every case of the table on backends made by `make_backend` for device `dev`.
pub fn run_cases(make_backend: &dyn Fn() -> Box<dyn Backend>, dev: DeviceRef) -> Report {
    run_table(&crate::cases::all(), make_backend, dev)
}

pub fn run_table(
    cases: &[Case],
    make_backend: &dyn Fn() -> Box<dyn Backend>,
    dev: DeviceRef,
) -> Report {
    let mut report = Report::default();
    for c in cases {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_case(c, make_backend, &dev)
        }))
        .unwrap_or_else(|p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Outcome::Fail(format!("panicked: {msg}"))
        });
        report.results.push(CaseResult {
            op: c.op,
            ty: c.ty,
            desc: c.desc.clone(),
            outcome,
        });
    }
    report
}

/// Whether `dev` supports every node of a case (without running it).
pub fn case_supported(case: &Case, dev: &DeviceRef) -> bool {
    let mut ctx = Context::new();
    let built = (case.build)(&mut ctx);
    let mut graph = Graph::new(ctx);
    graph.build_forward_expand(built.out);
    graph.nodes.iter().all(|&n| dev.supports_op(&graph.ctx, n))
}
