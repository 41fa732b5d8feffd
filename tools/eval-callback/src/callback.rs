//! The scheduler eval callback (`common_debug_cb_eval`): asks for every node, prints each one
//! when its data is ready and records it for `--graph`.

use llama_eval_callback::graph::{GraphRecord, Node, Src};
use llama_eval_callback::printer::{header_line, is_printable, values_block};
use std::sync::{Arc, Mutex};

/// What the callback is to do besides printing.
pub struct CallbackOptions {
    /// `--filter`: print only nodes whose name matches (anchored at the start, as llama.cpp's
    /// tensor filters are).
    pub filter: Option<regex::Regex>,
    /// `--graph`: where the nodes are recorded.
    pub graph: Option<Arc<Mutex<GraphRecord>>>,
    /// Items shown at each end of a dimension.
    pub n: i64,
}

fn src_of(g: &ggml::Context, id: Option<ggml::TensorId>) -> Option<(String, [i64; 4])> {
    let id = id?;
    let t = &g[id];
    Some((t.name.clone(), t.ne))
}

/// The text printed for one node (header and, for plain types, the values), or None when the
/// filter hides it.
pub fn node_text(g: &ggml::Context, id: ggml::TensorId, o: &CallbackOptions) -> Option<String> {
    let t = &g[id];
    if let Some(re) = &o.filter {
        if !re.is_match(&t.name) {
            return None;
        }
    }
    let s0 = src_of(g, t.src[0]);
    let s1 = src_of(g, t.src[1]);
    let mut text = header_line(
        &t.name,
        t.ty.name(),
        t.op.desc(),
        s0.as_ref().map(|(n, ne)| (n.as_str(), ne)),
        s1.as_ref().map(|(n, ne)| (n.as_str(), ne)),
        &t.ne,
    );
    if !t.ty.is_quantized() && is_printable(t.ty) && t.data.is_some() {
        let mut data = vec![0u8; t.nbytes()];
        let read = ggml::backend::get_tensor(t, &mut data, 0).map_err(|e| e.to_string());
        match read
            .and_then(|()| values_block(&data, t.ty, &t.ne, &t.nb, o.n).map_err(|e| e.to_string()))
        {
            Ok(v) => text += &v,
            Err(e) => text += &format!("    ({e})\n"),
        }
    }
    Some(text)
}

fn record(g: &ggml::Context, id: ggml::TensorId, rec: &Mutex<GraphRecord>) {
    let t = &g[id];
    let srcs = t
        .srcs()
        .map(|s| Src {
            key: s.0,
            name: g[s].name.clone(),
            is_leaf: g[s].op.is_none(),
        })
        .collect();
    let node = Node {
        key: id.0,
        name: t.name.clone(),
        op: t.op.desc().to_string(),
        ty: t.ty.name().to_string(),
        ne: t.ne,
        srcs,
        // the backend that computed the node: host memory (CPU, CPU_Mapped, a GPU's pinned
        // Vulkan_Host) is the CPU's; a device buffer is named after its device
        backend: t.buffer().map_or_else(
            || "?".to_string(),
            |b| {
                if b.is_host() {
                    "CPU".to_string()
                } else {
                    b.name().to_string()
                }
            },
        ),
    };
    rec.lock().unwrap_or_else(|e| e.into_inner()).push(node);
}

/// The callback for `ContextParams::cb_eval`.
pub fn make(o: CallbackOptions) -> llama::EvalCallback {
    Box::new(move |g: &ggml::Context, id: ggml::TensorId, ask: bool| {
        if ask {
            // always retrieve the data
            return true;
        }
        if let Some(rec) = &o.graph {
            record(g, id, rec);
        }
        if let Some(text) = node_text(g, id, &o) {
            common::log_out!("{}", text);
        }
        true
    })
}
