//! Out of device memory on Vulkan (lavapipe, named by GGML_VK_VISIBLE_DEVICES=0): a KV cache
//! larger than the device's heap fails with llama.cpp's own error lines and exit status 1,
//! before any of it is allocated. Skips without a Vulkan device (fails under CI=true).

use std::process::Output;

use test_fixtures::llama_logs::unprefixed;
use test_fixtures::vulkan::vulkan0_or_skip as vulkan_or_skip;

fn run(name: &str, args: &[&str]) -> Output {
    test_fixtures::vulkan::run(name, args, Some("0"))
}

#[test]
fn kv_cache_past_the_device_heap_fails_with_llama_cpp_lines() {
    if !vulkan_or_skip() {
        return;
    }
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    // lavapipe's heap is 2 GiB: 20M cells make each K/V tensor 2.56 GB, one buffer each
    let o = run(
        "llama-completion",
        &[
            "-m",
            model.to_str().unwrap(),
            "-ngl",
            "99",
            "-c",
            "20000000",
            "-fit",
            "off",
            "-n",
            "4",
            "-p",
            "hello",
            "-no-cnv",
        ],
    );
    let err = test_fixtures::text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let ours: Vec<&str> = err.lines().map(unprefixed).collect();
    let want = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/vulkan-oom/c20000000-fit-off.txt"),
    )
    .expect("fixture");
    for line in want.lines() {
        assert!(
            ours.contains(&line),
            "llama.cpp's line {line:?} is missing:\n{err}"
        );
    }
}
