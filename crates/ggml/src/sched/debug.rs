//! GGML_SCHED_DEBUG output (ggml_backend_sched_print_assignments): split headers with their
//! inputs, and with level 2 one line per non-view node with its backend, cause and sources.

use super::Sched;
use crate::graph::Graph;
use crate::tensor::{flags, TensorId};

/// ggml's fmt_size: whole MiB from 1 MiB up, whole KiB below.
pub fn fmt_size(size: usize) -> String {
    if size >= 1024 * 1024 {
        format!("{}M", size / 1024 / 1024)
    } else {
        format!("{}K", size / 1024)
    }
}

impl Sched {
    fn backend_name_of(&self, t: TensorId) -> &str {
        match self.bid(t) {
            -1 => "NULL",
            b => self.backends[b as usize].name(),
        }
    }

    /// The text GGML_SCHED_DEBUG prints after a split (level 1: split headers; level 2: nodes
    /// too), for the graph last split.
    pub fn assignments_text(&self, g: &Graph) -> String {
        self.assignment_pieces(g).concat()
    }

    /// ggml_backend_sched_print_assignments: one log message per piece, as ggml makes one
    /// GGML_LOG_DEBUG call per piece (so a prefixing log sink shows what llama.cpp's shows).
    pub(super) fn print_assignments(&self, g: &Graph) {
        for piece in self.assignment_pieces(g) {
            crate::log::log(crate::log::LogLevel::Debug, &piece);
        }
    }

    fn assignment_pieces(&self, g: &Graph) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut cur_split = 0;
        for (i, &node) in g.nodes.iter().enumerate() {
            if cur_split < self.n_splits && i == self.splits[cur_split].i_start {
                let split = &self.splits[cur_split];
                out.push(format!(
                    "\n## SPLIT #{}: {} # {} inputs",
                    cur_split,
                    self.backends[split.backend_id].name(),
                    split.inputs.len()
                ));
                for (j, &input) in split.inputs.iter().enumerate() {
                    if j == 0 {
                        out.push(": ".into());
                    }
                    out.push(format!(
                        "[{} ({:>5.5})] ",
                        g.ctx[input].name,
                        fmt_size(g.ctx[input].nbytes())
                    ));
                }
                out.push("\n".into());
                cur_split += 1;
            }
            let t = &g.ctx[node];
            if t.op.is_view() || self.debug <= 1 {
                continue;
            }
            out.push(format!(
                "node #{:>3} ({:>10.10}): {:>20.20} ({:>5.5}) [{:>5.5} {:>8.8}] use={},c={}:",
                i,
                t.op.desc(),
                t.name,
                fmt_size(t.nbytes()),
                self.backend_name_of(node),
                self.cause(node),
                self.use_counts.get(node.index()).copied().unwrap_or(0),
                u8::from(t.has_flag(flags::COMPUTE))
            ));
            for src in t.srcs() {
                out.push(format!(
                    " {:>20.20} ({:>5.5}) [{:>5.5} {:>8.8}]",
                    g.ctx[src].name,
                    fmt_size(g.ctx[src].nbytes()),
                    self.backend_name_of(src),
                    self.cause(src)
                ));
            }
            out.push("\n".into());
        }
        out
    }

    /// The graph's use counts (how many node sources name each tensor), as ggml records them
    /// while building the graph; taken before the input rewrite.
    pub(super) fn count_uses(&mut self, g: &Graph) {
        self.use_counts.clear();
        self.use_counts.resize(g.ctx.len(), 0);
        for &n in &g.nodes {
            for s in g.ctx[n].srcs() {
                self.use_counts[s.index()] += 1;
            }
        }
    }
}
