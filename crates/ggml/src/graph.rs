//! A compute graph: the context that owns its tensors plus the nodes in execution order and the
//! leafs (inputs and weights), as ggml_build_forward_expand records them.

use crate::context::Context;
use crate::tensor::{flags, TensorId};

#[derive(Clone, Default, Debug)]
pub struct Graph {
    pub ctx: Context,
    pub nodes: Vec<TensorId>,
    pub leafs: Vec<TensorId>,
    visited: Vec<bool>,
}

impl Graph {
    pub fn new(ctx: Context) -> Graph {
        Graph {
            ctx,
            nodes: Vec::new(),
            leafs: Vec::new(),
            visited: Vec::new(),
        }
    }

    pub fn n_nodes(&self) -> usize {
        self.nodes.len()
    }

    fn is_visited(&self, t: TensorId) -> bool {
        self.visited.get(t.index()).copied().unwrap_or(false)
    }

    /// Appends t and every tensor it depends on that is not in the graph yet, sources first, so
    /// the node list is an execution order. Unnamed tensors get ggml's "node_N" / "leaf_N" names.
    pub fn build_forward_expand(&mut self, t: TensorId) {
        if self.visited.len() < self.ctx.len() {
            self.visited.resize(self.ctx.len(), false);
        }
        // iterative post-order walk, sources in index order as ggml's LEFT_TO_RIGHT visit
        let mut stack: Vec<(TensorId, usize)> = vec![(t, 0)];
        if self.is_visited(t) {
            return;
        }
        self.visited[t.index()] = true;
        while let Some((id, next)) = stack.pop() {
            let srcs = self.ctx[id].src;
            let mut pushed = false;
            for (k, s) in srcs.iter().enumerate().skip(next) {
                if let Some(s) = *s {
                    if !self.is_visited(s) {
                        self.visited[s.index()] = true;
                        stack.push((id, k + 1));
                        stack.push((s, 0));
                        pushed = true;
                        break;
                    }
                }
            }
            if pushed {
                continue;
            }
            let node = &mut self.ctx[id];
            if node.op.is_none() && node.flags & flags::PARAM == 0 {
                self.leafs.push(id);
                if node.name.is_empty() {
                    node.set_name(&format!("leaf_{}", self.leafs.len() - 1));
                }
            } else {
                if node.name.is_empty() {
                    node.set_name(&format!("node_{}", self.nodes.len()));
                }
                node.flags |= flags::COMPUTE;
                self.nodes.push(id);
            }
        }
    }

    /// Tensors created in the context after the graph was last expanded are not in `visited`.
    pub fn contains(&self, t: TensorId) -> bool {
        self.is_visited(t)
    }
}
