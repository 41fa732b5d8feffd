//! Registers every backend compiled into this build with ggml's registry: the GPU backends
//! first (Vulkan, when the `vulkan` feature is on; it lists no device where Vulkan is absent),
//! then the CPU, which the registry keeps last. libllama's `backend_init` and the tools that
//! list devices call this and nothing else.

/// Registers the compiled backends; safe to call more than once. A GPU backend without a
/// device here is not registered, so a machine without Vulkan sees exactly the CPU-only build
/// (llama-bench's backend column says CPU there, as before).
pub fn init() {
    // Vulkan is enumerated on first use of the device list: loading the driver is the costly
    // part of start-up, and a run that stops at its arguments or its model file needs no device
    #[cfg(feature = "vulkan")]
    ggml::backend::register_lazy(|| {
        use ggml::backend::Reg;
        let vk = ggml_vulkan::reg();
        if vk.devices().is_empty() {
            None
        } else {
            Some(vk as std::sync::Arc<dyn Reg>)
        }
    });
    ggml_cpu::init();
}

/// Names of the compiled backends, in registration order.
pub fn compiled() -> &'static [&'static str] {
    &[
        #[cfg(feature = "vulkan")]
        "Vulkan",
        "CPU",
    ]
}
