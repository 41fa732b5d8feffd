//! llama-list-devices and the --list-devices flag of the other tools: llama.cpp's format, the
//! CPU never listed.

use std::process::Command;

/// "Available devices:" then "  (none)" or one "  name: desc (N MiB, M MiB free)" per device.
fn check_format(out: &str) {
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("Available devices:"), "{out}");
    let rest: Vec<&str> = lines.collect();
    assert!(!rest.is_empty(), "{out}");
    if rest == ["  (none)"] {
        return;
    }
    for l in rest {
        let body = l
            .strip_prefix("  ")
            .unwrap_or_else(|| panic!("indented: {l:?}"));
        let (name, tail) = body
            .split_once(": ")
            .unwrap_or_else(|| panic!("name: {l:?}"));
        assert!(!name.is_empty() && name != "CPU", "{l:?}");
        assert!(tail.ends_with(" MiB free)"), "{l:?}");
        let mem = &tail[tail.rfind(" (").unwrap() + 2..tail.len() - 1];
        let (total, free) = mem.split_once(" MiB, ").unwrap();
        let total: u64 = total.parse().unwrap();
        let free: u64 = free.trim_end_matches(" MiB free").parse().unwrap();
        assert!(free <= total, "{l:?}");
    }
}

#[test]
fn list_devices_tool() {
    let out = Command::new(test_fixtures::bin(
        "llama-list-devices",
        "llama-list-devices",
    ))
    .output()
    .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    check_format(&s);
    // this build has no offload backend: only the CPU, which is never listed
    let has_gpu_backend = ggml_has_offload_device(&s);
    if !has_gpu_backend {
        assert_eq!(s, "Available devices:\n  (none)\n");
    }
}

fn ggml_has_offload_device(s: &str) -> bool {
    !s.contains("  (none)")
}

#[test]
fn list_devices_flag_of_the_tools_prints_the_same() {
    let tool = Command::new(test_fixtures::bin(
        "llama-list-devices",
        "llama-list-devices",
    ))
    .output()
    .unwrap();
    for (pkg, name) in [
        ("llama-bench", "llama-bench"),
        ("llama-perplexity", "llama-perplexity"),
        ("llama-eval-callback", "llama-eval-callback"),
    ] {
        let out = Command::new(test_fixtures::bin(pkg, name))
            .arg("--list-devices")
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.stdout, tool.stdout, "{name}");
    }
}
