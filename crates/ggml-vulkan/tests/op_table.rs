//! The op table on Vulkan0 against the f64 reference: every case whose nodes the device claims
//! must pass, and the ops the backend is meant to cover must be claimed.

mod common;

use ggml_op_tests::{run_cases, Outcome};

#[test]
fn vulkan_backend_passes_the_op_table() {
    let Some(dev) = common::device_or_skip() else {
        return;
    };
    let d = dev.clone();
    let make = move || d.clone().init_backend().expect("Vulkan backend");
    let report = run_cases(&make, dev.clone());
    eprintln!("{}", report.summary());
    let claimed: std::collections::BTreeSet<&str> = report
        .results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Pass { .. } | Outcome::Fail(_)))
        .map(|r| r.op)
        .collect();
    eprintln!("claimed ops: {claimed:?}");
    assert!(
        report.failures().is_empty(),
        "{} of the op table failed on {}",
        report.failures().len(),
        dev.name()
    );
    for op in [
        "MUL_MAT",
        "GET_ROWS",
        "SET_ROWS",
        "CPY",
        "ADD",
        "MUL",
        "SCALE",
        "RMS_NORM",
        "ROPE",
        "SOFT_MAX",
        "SILU",
        "SWIGLU",
        "GEGLU",
        "GELU",
        "TANH",
        "SUB",
        "DIV",
        "NORM",
        "DUP",
        "CONT",
        "FLASH_ATTN_EXT",
        "MUL_MAT_ID",
        "ADD_ID",
        "ARGSORT",
        "TOP_K",
        "SUM_ROWS",
        "CONCAT",
    ] {
        assert!(
            claimed.contains(op),
            "{op} is not claimed on {}",
            dev.name()
        );
    }
}
