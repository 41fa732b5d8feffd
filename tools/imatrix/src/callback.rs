//! The scheduler eval callback (`ik_collect_imatrix`): asks for the weight MUL_MAT and every
//! MUL_MAT_ID node, and once each is computed hands its activations (src1) and, for
//! MUL_MAT_ID, its expert ids to the collector.

use std::sync::{Arc, Mutex};

use ggml::{Context as Graph, Op, TensorId, Type};

use crate::collector::{filter_tensor_name, Collector, Operand};

fn bytes_of(g: &Graph, id: TensorId) -> Option<Vec<u8>> {
    let t = &g[id];
    t.data.as_ref()?;
    let mut b = vec![0u8; t.nbytes()];
    if let Err(e) = ggml::backend::get_tensor(t, &mut b, 0) {
        ggml::log_error!("imatrix: reading {} failed: {}\n", t.name, e);
        return None;
    }
    Some(b)
}

fn collect(c: &mut Collector, g: &Graph, id: TensorId) -> Result<(), String> {
    let t = &g[id];
    let (Some(s0), Some(s1)) = (t.src[0], t.src[1]) else {
        return Ok(());
    };
    let (w, x) = (&g[s0], &g[s1]);
    let wname = filter_tensor_name(&w.name).to_string();
    if x.nb[0] != x.ty.type_size() || x.ty != Type::F32 {
        return Err(format!(
            "collect_imatrix: the activations of {wname} are not contiguous F32 rows"
        ));
    }
    let data = bytes_of(g, s1)
        .ok_or_else(|| format!("collect_imatrix: the activations of {wname} have no data"))?;
    let src1 = Operand {
        ne: x.ne,
        nb: x.nb,
        data: &data,
    };
    if matches!(t.op, Op::MulMatId) {
        let ids_id =
            t.src[2].ok_or_else(|| format!("collect_imatrix: MUL_MAT_ID of {wname} has no ids"))?;
        let ids_t = &g[ids_id];
        let ids_data = bytes_of(g, ids_id)
            .ok_or_else(|| format!("collect_imatrix: the expert ids of {wname} have no data"))?;
        let ids = Operand {
            ne: ids_t.ne,
            nb: ids_t.nb,
            data: &ids_data,
        };
        c.add_mul_mat_id(&wname, w.ne[2], &src1, &ids)
    } else {
        c.add_mul_mat(&wname, [w.ne[2], w.ne[3]], &src1)
    }
}

/// The callback for `ContextParams::cb_eval`, feeding `collector`.
pub fn make(collector: Arc<Mutex<Collector>>) -> llama::EvalCallback {
    Box::new(move |g: &Graph, id: TensorId, ask: bool| {
        let mut c = collector.lock().unwrap_or_else(|e| e.into_inner());
        if c.error.is_some() {
            return false;
        }
        let t = &g[id];
        let is_id = matches!(t.op, Op::MulMatId);
        if ask {
            if !is_id && !matches!(t.op, Op::MulMat { .. }) {
                return false;
            }
            let (Some(s0), Some(s1)) = (t.src[0], t.src[1]) else {
                return false;
            };
            let wname = filter_tensor_name(&g[s0].name);
            return c.wants(is_id, wname, g[s1].ne[1], g[s1].ty == Type::F32);
        }
        match collect(&mut c, g, id) {
            Ok(()) => true,
            Err(e) => {
                c.error = Some(e);
                false
            }
        }
    })
}
