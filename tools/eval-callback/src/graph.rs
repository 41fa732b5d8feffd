//! `--graph FILE.svg|FILE.dot` (not in llama.cpp): the computed graph as the eval callback saw
//! it, nodes coloured by the backend whose buffer holds them and the scheduler's splits marked.
//! Nodes are recorded in execution order, so a split (a run of nodes on one backend) is a
//! contiguous range: the SVG draws them top to bottom with a rule at every split boundary.

use std::collections::HashMap;
use std::fmt::Write as _;

/// A source of a node: another computed node, or a leaf (weight, input, cache).
#[derive(Clone, Debug, PartialEq)]
pub struct Src {
    pub key: u32,
    pub name: String,
    pub is_leaf: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub key: u32,
    pub name: String,
    pub op: String,
    pub ty: String,
    pub ne: [i64; 4],
    pub srcs: Vec<Src>,
    /// The buffer (backend) holding the node's result.
    pub backend: String,
}

/// The nodes of the first graph the callback reports.
#[derive(Default, Debug)]
pub struct GraphRecord {
    pub nodes: Vec<Node>,
    seen: HashMap<u32, usize>,
    /// Set when a second graph starts (a node key comes round again); later nodes are ignored.
    done: bool,
}

impl GraphRecord {
    pub fn push(&mut self, node: Node) {
        if self.done {
            return;
        }
        if self.seen.contains_key(&node.key) {
            self.done = true;
            return;
        }
        self.seen.insert(node.key, self.nodes.len());
        self.nodes.push(node);
    }

    /// Runs of consecutive nodes on one backend: (backend, first index, one past the last).
    pub fn splits(&self) -> Vec<(String, usize, usize)> {
        let mut out: Vec<(String, usize, usize)> = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            match out.last_mut() {
                Some(last) if last.0 == n.backend => last.2 = i + 1,
                _ => out.push((n.backend.clone(), i, i + 1)),
            }
        }
        out
    }

    fn backends(&self) -> Vec<String> {
        let mut b: Vec<String> = Vec::new();
        for n in &self.nodes {
            if !b.contains(&n.backend) {
                b.push(n.backend.clone());
            }
        }
        b
    }

    /// Graphviz text: one cluster a split, leaves as ellipses.
    pub fn to_dot(&self) -> String {
        let palette = self.palette();
        let mut s = String::from("digraph ggml_graph {\n  rankdir=TB;\n  node [shape=box, style=filled, fontname=\"monospace\", fontsize=10];\n");
        for (k, (backend, a, b)) in self.splits().iter().enumerate() {
            let _ = writeln!(
                s,
                "  subgraph cluster_split_{k} {{\n    label=\"split {k}: {}\";\n    style=dashed;",
                dot_esc(backend)
            );
            for n in &self.nodes[*a..*b] {
                let _ = writeln!(
                    s,
                    "    n{} [label=\"{}\\n{} {}\\n{{{}}}\", fillcolor=\"{}\"];",
                    n.key,
                    dot_esc(&n.name),
                    dot_esc(&n.op),
                    n.ty,
                    ne_short(&n.ne),
                    palette[backend]
                );
            }
            s += "  }\n";
        }
        let mut leaves: Vec<&Src> = Vec::new();
        for n in &self.nodes {
            for src in &n.srcs {
                if (src.is_leaf || !self.seen.contains_key(&src.key))
                    && !leaves.iter().any(|l| l.key == src.key)
                {
                    leaves.push(src);
                }
            }
        }
        for l in &leaves {
            let _ = writeln!(
                s,
                "  l{} [label=\"{}\", shape=ellipse, fillcolor=\"white\"];",
                l.key,
                dot_esc(&l.name)
            );
        }
        for n in &self.nodes {
            for src in &n.srcs {
                let from = if src.is_leaf || !self.seen.contains_key(&src.key) {
                    "l"
                } else {
                    "n"
                };
                let _ = writeln!(s, "  {from}{} -> n{};", src.key, n.key);
            }
        }
        s += "}\n";
        s
    }

    fn palette(&self) -> HashMap<String, &'static str> {
        const COLORS: [&str; 6] = [
            "#cfe2ff", "#ffd8a8", "#d3f9d8", "#e5dbff", "#ffc9c9", "#fff3bf",
        ];
        self.backends()
            .into_iter()
            .enumerate()
            .map(|(i, b)| (b, COLORS[i % COLORS.len()]))
            .collect()
    }

    /// A self-contained SVG: nodes top to bottom in execution order, edges between computed
    /// nodes as arcs on the right, leaf sources listed in the box, split boundaries as rules.
    pub fn to_svg(&self, title: &str) -> String {
        let palette = self.palette();
        let (row_h, box_w, box_h, left, top) = (58.0, 330.0, 46.0, 20.0, 60.0);
        let max_span = self
            .nodes
            .iter()
            .enumerate()
            .flat_map(|(i, n)| {
                n.srcs
                    .iter()
                    .filter_map(move |s| self.seen.get(&s.key).map(|&j| i.saturating_sub(j)))
            })
            .max()
            .unwrap_or(0) as f64;
        let width = left + box_w + 60.0 + arc_width(max_span) + 200.0;
        let height = top + self.nodes.len() as f64 * row_h + 40.0;
        let mut s = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" font-family=\"monospace\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        );
        let _ = writeln!(
            s,
            "<text x=\"{left}\" y=\"24\" font-size=\"15\">{}</text>",
            xml_esc(title)
        );
        // legend
        let mut lx = left;
        for b in self.backends() {
            let _ = writeln!(
                s,
                "<rect x=\"{lx}\" y=\"34\" width=\"14\" height=\"14\" fill=\"{}\" stroke=\"#333\"/><text x=\"{}\" y=\"45\">{}</text>",
                palette[&b],
                lx + 18.0,
                xml_esc(&b)
            );
            lx += 30.0 + 8.0 * b.len() as f64;
        }
        let y_of = |i: usize| top + i as f64 * row_h;
        for (k, (backend, a, _)) in self.splits().iter().enumerate() {
            let y = y_of(*a) - (row_h - box_h) / 2.0;
            let _ = writeln!(
                s,
                "<line x1=\"0\" y1=\"{y:.1}\" x2=\"{width:.0}\" y2=\"{y:.1}\" stroke=\"#888\" stroke-dasharray=\"6 4\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"#555\">split {k}: {}</text>",
                width - 190.0,
                y + 14.0,
                xml_esc(backend)
            );
        }
        // edges first so the boxes cover their ends
        for (i, n) in self.nodes.iter().enumerate() {
            for src in &n.srcs {
                if let Some(&j) = self.seen.get(&src.key) {
                    if j >= i {
                        continue;
                    }
                    let (y0, y1) = (y_of(j) + box_h / 2.0, y_of(i) + box_h / 2.0);
                    let x = left + box_w;
                    let d = arc_width((i - j) as f64);
                    let _ = writeln!(
                        s,
                        "<path d=\"M{x:.1},{y0:.1} C{:.1},{y0:.1} {:.1},{y1:.1} {x:.1},{y1:.1}\" fill=\"none\" stroke=\"#666\" stroke-width=\"1\" marker-end=\"url(#arrow)\"/>",
                        x + d,
                        x + d
                    );
                }
            }
        }
        s += "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"6\" markerHeight=\"6\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#666\"/></marker></defs>\n";
        for (i, n) in self.nodes.iter().enumerate() {
            let y = y_of(i);
            let leaves: Vec<&str> = n
                .srcs
                .iter()
                .filter(|s| s.is_leaf || !self.seen.contains_key(&s.key))
                .map(|s| s.name.as_str())
                .collect();
            let _ = writeln!(
                s,
                "<g><title>{}</title><rect x=\"{left}\" y=\"{y:.1}\" width=\"{box_w}\" height=\"{box_h}\" rx=\"4\" fill=\"{}\" stroke=\"#333\"/>",
                xml_esc(&format!("{} = {}({})", n.name, n.op, n.srcs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", "))),
                palette[&n.backend]
            );
            let _ = writeln!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-weight=\"bold\">{}</text><text x=\"{:.1}\" y=\"{:.1}\">{} {} {{{}}}</text>",
                left + 6.0,
                y + 14.0,
                xml_esc(&n.name),
                left + 6.0,
                y + 28.0,
                xml_esc(&n.op),
                n.ty,
                ne_short(&n.ne)
            );
            if !leaves.is_empty() {
                let _ = writeln!(
                    s,
                    "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#555\">← {}</text>",
                    left + 6.0,
                    y + 41.0,
                    xml_esc(&leaves.join(", "))
                );
            }
            s += "</g>\n";
        }
        s += "</svg>\n";
        s
    }
}

fn arc_width(span: f64) -> f64 {
    16.0 + 10.0 * span.sqrt()
}

fn ne_short(ne: &[i64; 4]) -> String {
    ne.iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn dot_esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn xml_esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Writes `.dot` or `.svg` (by extension) through a temporary file and a rename.
pub fn write(path: &std::path::Path, g: &GraphRecord, title: &str) -> Result<(), String> {
    let text = match path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
    {
        Some(e) if e == "dot" || e == "gv" => g.to_dot(),
        Some(e) if e == "svg" => g.to_svg(title),
        _ => {
            return Err(format!(
                "--graph: '{}' must end in .svg or .dot",
                path.display()
            ))
        }
    };
    let tmp = path.with_file_name(format!(
        ".{}.tmp{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("graph"),
        std::process::id()
    ));
    std::fs::write(&tmp, text).map_err(|e| format!("failed to write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("failed to write {}: {e}", path.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(key: u32, name: &str, backend: &str, srcs: &[(u32, &str, bool)]) -> Node {
        Node {
            key,
            name: name.into(),
            op: "MUL".into(),
            ty: "f32".into(),
            ne: [4, 1, 1, 1],
            srcs: srcs
                .iter()
                .map(|&(k, n, l)| Src {
                    key: k,
                    name: n.into(),
                    is_leaf: l,
                })
                .collect(),
            backend: backend.into(),
        }
    }

    fn sample() -> GraphRecord {
        let mut g = GraphRecord::default();
        g.push(node(
            5,
            "embd",
            "CPU",
            &[(0, "token_embd.weight", true), (1, "inp_tokens", true)],
        ));
        g.push(node(6, "norm-0", "CUDA0", &[(5, "embd", false)]));
        g.push(node(
            7,
            "attn_norm-0",
            "CUDA0",
            &[(6, "norm-0", false), (2, "blk.0.attn_norm.weight", true)],
        ));
        g.push(node(
            8,
            "out",
            "CPU",
            &[(7, "attn_norm-0", false), (5, "embd", false)],
        ));
        g
    }

    #[test]
    fn splits_are_backend_runs() {
        let g = sample();
        assert_eq!(
            g.splits(),
            vec![
                ("CPU".to_string(), 0, 1),
                ("CUDA0".to_string(), 1, 3),
                ("CPU".to_string(), 3, 4)
            ]
        );
    }

    #[test]
    fn a_second_graph_is_not_recorded() {
        let mut g = sample();
        g.push(node(5, "embd", "CPU", &[]));
        g.push(node(9, "late", "CPU", &[]));
        assert_eq!(g.nodes.len(), 4);
    }

    #[test]
    fn dot_has_clusters_nodes_and_edges() {
        let d = sample().to_dot();
        assert!(d.starts_with("digraph ggml_graph {"));
        assert_eq!(d.matches("subgraph cluster_split_").count(), 3);
        assert!(d.contains("label=\"split 1: CUDA0\""));
        assert!(d.contains("l0 -> n5;"));
        assert!(d.contains("n5 -> n6;"));
        assert!(d.contains("n5 -> n8;"));
        assert!(d.contains("l2 [label=\"blk.0.attn_norm.weight\""));
        assert_eq!(d.matches('{').count(), d.matches('}').count());
    }

    #[test]
    fn svg_draws_every_node_and_split() {
        let s = sample().to_svg("hi <1 token>");
        assert!(s.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("rx=\"4\"").count(), 4);
        assert_eq!(s.matches("stroke-dasharray").count(), 3);
        // edges between computed nodes: 5->6, 6->7, 7->8, 5->8
        assert_eq!(s.matches("marker-end=").count(), 4);
        assert!(s.contains("hi &lt;1 token&gt;"));
        assert!(s.contains("← token_embd.weight, inp_tokens"));
    }

    #[test]
    fn write_checks_the_extension() {
        let dir = std::env::temp_dir().join(format!("evalcb-graph-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let g = sample();
        assert!(write(&dir.join("g.png"), &g, "t").is_err());
        write(&dir.join("g.dot"), &g, "t").unwrap();
        assert!(std::fs::read_to_string(dir.join("g.dot"))
            .unwrap()
            .starts_with("digraph"));
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
