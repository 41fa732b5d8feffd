//! One token's graph, node by node, against llama-eval-callback's log of the reference model:
//! names, types, ops, sources and shapes, and the sum of each node's values.

mod common;

use ggml::{Context as GgmlContext, TensorId, Type};
use llama::{Batch, Context, ContextParams, FlashAttnType};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, PartialEq)]
struct Node {
    name: String,
    ty: String,
    op: String,
    srcs: Vec<String>,
    ne: String,
    sum: f64,
}

fn shape(ne: &[i64; 4]) -> String {
    format!("{{{}, {}, {}, {}}}", ne[0], ne[1], ne[2], ne[3])
}

/// The sum of a tensor's elements, following its strides.
fn tensor_sum(ctx: &GgmlContext, t: TensorId) -> f64 {
    let x = &ctx[t];
    let mut bytes = vec![0u8; x.nbytes()];
    ggml::backend::get_tensor(x, &mut bytes, 0).unwrap();
    let mut sum = 0.0f64;
    for i3 in 0..x.ne[3] as usize {
        for i2 in 0..x.ne[2] as usize {
            for i1 in 0..x.ne[1] as usize {
                for i0 in 0..x.ne[0] as usize {
                    let o = i3 * x.nb[3] + i2 * x.nb[2] + i1 * x.nb[1] + i0 * x.nb[0];
                    let v = match x.ty {
                        Type::F32 => f32::from_le_bytes(bytes[o..o + 4].try_into().unwrap()) as f64,
                        Type::F16 => half::f16::from_le_bytes([bytes[o], bytes[o + 1]]).to_f64(),
                        Type::I32 => i32::from_le_bytes(bytes[o..o + 4].try_into().unwrap()) as f64,
                        _ => return f64::NAN,
                    };
                    sum += v;
                }
            }
        }
    }
    sum
}

fn parse_reference(name: &str) -> Vec<Node> {
    let mut out: Vec<Node> = Vec::new();
    for l in common::reference_log(name) {
        if let Some(rest) = l.strip_prefix("common_debug_cb_eval:") {
            // "<name> = (<type>) <OP>(<src>{..}, <src>{..}}) = {..}"
            let (name, rest) = rest.split_once(" = (").unwrap();
            let (ty, rest) = rest.split_once(") ").unwrap();
            let (op, rest) = rest.trim_start().split_once('(').unwrap();
            let (args, ne) = rest.rsplit_once(") = ").unwrap();
            let srcs = args
                .split("}, ")
                .map(|s| s.trim_end_matches('}').to_string())
                .filter(|s| !s.is_empty())
                .map(|s| format!("{s}}}"))
                .collect();
            out.push(Node {
                name: name.trim().to_string(),
                ty: ty.to_string(),
                op: op.to_string(),
                srcs,
                ne: ne.to_string(),
                sum: f64::NAN,
            });
        } else if let Some(s) = l.trim().strip_prefix("sum = ") {
            out.last_mut().unwrap().sum = s.parse().unwrap();
        }
    }
    out
}

fn run(fa: FlashAttnType) -> Vec<Node> {
    let loaded = common::model().unwrap();
    let nodes: Arc<Mutex<Vec<Node>>> = Arc::default();
    let sink = nodes.clone();
    let cb: llama::EvalCallback = Box::new(move |ctx: &GgmlContext, t: TensorId, ask: bool| {
        if ask {
            return true;
        }
        let x = &ctx[t];
        let srcs = x
            .src
            .iter()
            .take(2)
            .flatten()
            .map(|&s| format!("{}{}", ctx[s].name, shape(&ctx[s].ne)))
            .collect();
        sink.lock().unwrap().push(Node {
            name: x.name.clone(),
            ty: x.ty.name().to_string(),
            op: x.op.desc().to_string(),
            srcs,
            ne: shape(&x.ne),
            sum: tensor_sum(ctx, t),
        });
        true
    });
    let params = ContextParams {
        n_ctx: 256,
        flash_attn_type: fa,
        cb_eval: Some(cb),
        ..Default::default()
    };
    let (ctx, _) = common::capture(|| Context::new(loaded.model.clone(), params));
    let mut ctx = ctx.unwrap();
    // "hi"
    assert_eq!(ctx.decode(&Batch::get_one(&[6023])), 0);
    let v = nodes.lock().unwrap().clone();
    v
}

fn compare(ours: &[Node], want: &[Node]) {
    assert_eq!(ours.len(), want.len(), "node count");
    for (i, (a, b)) in ours.iter().zip(want).enumerate() {
        assert_eq!(
            (&a.name, &a.ty, &a.op, &a.ne),
            (&b.name, &b.ty, &b.op, &b.ne),
            "node {i}"
        );
        assert_eq!(
            a.srcs,
            b.srcs.iter().take(2).cloned().collect::<Vec<_>>(),
            "node {i} ({}) sources",
            a.name
        );
        let tol = 1e-3 + 1e-3 * b.sum.abs();
        assert!(
            (a.sum - b.sum).abs() <= tol,
            "node {i} ({}): sum {} vs llama.cpp's {}",
            a.name,
            a.sum,
            b.sum
        );
    }
}

#[test]
fn one_token_graph_matches_llama_cpp_with_flash_attention() {
    if common::model().is_none() {
        return;
    }
    let want = parse_reference("eval-callback-hi.log");
    assert_eq!(want.len(), 130);
    compare(&run(FlashAttnType::Auto), &want);
}

#[test]
fn one_token_graph_matches_llama_cpp_without_flash_attention() {
    if common::model().is_none() {
        return;
    }
    let want = parse_reference("eval-callback-hi-fa-off.log");
    assert_eq!(want.len(), 150);
    compare(&run(FlashAttnType::Disabled), &want);
}
