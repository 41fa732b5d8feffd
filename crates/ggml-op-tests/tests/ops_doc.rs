//! docs/ops.md must match what the backends' supports_op say about the case table: the CPU and
//! Vulkan0 (lavapipe, named by GGML_VK_VISIBLE_DEVICES=0; the Vulkan column depends on the
//! device's limits, and docs/ops.md records lavapipe's).

use std::path::PathBuf;

#[test]
fn ops_doc_is_up_to_date() {
    if std::env::var_os("GGML_VK_VISIBLE_DEVICES").is_none() {
        std::env::set_var("GGML_VK_VISIBLE_DEVICES", "0");
    }
    let Some(vk) = ggml_vulkan::devices().into_iter().next() else {
        test_fixtures::skip("no Vulkan device for the Vulkan column (install mesa-vulkan-drivers)");
        return;
    };
    let devices = vec![ggml_cpu::device(), vk];
    let doc = ggml_op_tests::coverage::ops_markdown(&ggml_op_tests::cases::all(), &devices);
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/ops.md");
    if std::env::var_os("UPDATE_OPS_DOC").is_some() {
        let tmp = path.with_extension("md.tmp");
        std::fs::write(&tmp, &doc).expect("write docs/ops.md.tmp");
        std::fs::rename(&tmp, &path).expect("rename docs/ops.md");
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        current == doc,
        "docs/ops.md is out of date: run `UPDATE_OPS_DOC=1 cargo test -p ggml-op-tests --test ops_doc` and commit it"
    );
}
