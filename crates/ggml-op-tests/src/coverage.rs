//! docs/ops.md: which op x type combinations of the case table each backend supports, derived
//! from the devices' supports_op so the table cannot drift from the code.

use crate::case::Case;
use crate::runner::case_supported;
use ggml::backend::DeviceRef;
use ggml::Type;
use std::collections::BTreeMap;

/// The markdown document for the given devices.
pub fn ops_markdown(cases: &[Case], devices: &[DeviceRef]) -> String {
    // (op, type) -> per device (supported cases, total cases)
    let mut cells: BTreeMap<(&'static str, String), Vec<(usize, usize)>> = BTreeMap::new();
    let mut types: BTreeMap<&'static str, Vec<Type>> = BTreeMap::new();
    for c in cases {
        let entry = cells
            .entry((c.op, c.ty.name().to_string()))
            .or_insert_with(|| vec![(0, 0); devices.len()]);
        for (i, d) in devices.iter().enumerate() {
            entry[i].1 += 1;
            if case_supported(c, d) {
                entry[i].0 += 1;
            }
        }
        let list = types.entry(c.op).or_default();
        if !list.contains(&c.ty) {
            list.push(c.ty);
        }
    }
    let mut s = String::new();
    s.push_str("# Op coverage by backend\n\n");
    s.push_str(
        "Generated from each device's `supports_op` over the cases of `crates/ggml-op-tests`\n",
    );
    s.push_str("(`cargo test -p ggml-op-tests --test ops_doc`; set `UPDATE_OPS_DOC=1` to rewrite this file).\n");
    s.push_str("✅ every case of that op and type is supported, 🟡 some are, ❌ none.\n\n");
    s.push_str("| op | type |");
    for d in devices {
        s.push_str(&format!(" {} |", d.name()));
    }
    s.push_str("\n|---|---|");
    for _ in devices {
        s.push_str("---|");
    }
    s.push('\n');
    for (op, tys) in &types {
        let mut tys = tys.clone();
        tys.sort();
        for ty in tys {
            let v = &cells[&(*op, ty.name().to_string())];
            s.push_str(&format!("| {op} | {} |", ty.name()));
            for &(ok, total) in v {
                let mark = if ok == total {
                    "✅"
                } else if ok == 0 {
                    "❌"
                } else {
                    "🟡"
                };
                s.push_str(&format!(" {mark} |"));
            }
            s.push('\n');
        }
    }
    s
}
