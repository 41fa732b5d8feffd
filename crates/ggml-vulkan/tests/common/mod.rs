//! The Vulkan device the tests run on: lavapipe is a CPU-type device, hidden unless
//! GGML_VK_VISIBLE_DEVICES names it, so the tests name device 0 unless the caller chose.

use ggml::backend::DeviceRef;

/// Vulkan0, or None after test_fixtures::skip said why (under CI=true that fails the test).
pub fn device_or_skip() -> Option<DeviceRef> {
    if std::env::var_os("GGML_VK_VISIBLE_DEVICES").is_none() {
        std::env::set_var("GGML_VK_VISIBLE_DEVICES", "0");
    }
    let dev = ggml_vulkan::devices().into_iter().next();
    if dev.is_none() {
        test_fixtures::skip(
            "no Vulkan device (install mesa-vulkan-drivers and libvulkan1 for lavapipe)",
        );
    }
    dev
}
