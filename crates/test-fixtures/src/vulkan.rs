//! Running the tools on Vulkan in the e2e tests: lavapipe is a CPU-type device, which
//! ggml-vulkan hides unless GGML_VK_VISIBLE_DEVICES names it, so each run says which devices it
//! sees.

use std::process::{Command, Output};

/// Runs tool `name` with GGML_VK_VISIBLE_DEVICES set to `devices` ("0", "0,0"), or unset for
/// None (the CPU alone on a machine whose only Vulkan device is lavapipe).
pub fn run(name: &str, args: &[&str], devices: Option<&str>) -> Output {
    let mut c = Command::new(crate::bin(name, name));
    c.args(args).env_remove("LLAMA_ARG_MODEL");
    match devices {
        Some(d) => c.env("GGML_VK_VISIBLE_DEVICES", d),
        None => c.env_remove("GGML_VK_VISIBLE_DEVICES"),
    };
    c.output().unwrap_or_else(|e| panic!("run {name}: {e}"))
}

/// True when llama-list-devices shows every one of `names` ("Vulkan0", ...) with
/// GGML_VK_VISIBLE_DEVICES=`devices`; otherwise skips (which fails under CI=true).
pub fn devices_or_skip(devices: &str, names: &[&str]) -> bool {
    let o = run("llama-list-devices", &[], Some(devices));
    assert!(o.status.success(), "{}", crate::text(&o.stderr));
    let out = crate::text(&o.stdout);
    if names.iter().all(|n| out.contains(&format!("{n}: "))) {
        return true;
    }
    crate::skip("no Vulkan device (install mesa-vulkan-drivers and libvulkan1)");
    false
}

/// True when Vulkan0 exists with GGML_VK_VISIBLE_DEVICES=0; otherwise skips.
pub fn vulkan0_or_skip() -> bool {
    devices_or_skip("0", &["Vulkan0"])
}
