//! Registers every backend compiled into this build with ggml's registry: the GPU backends
//! first (Vulkan, when the `vulkan` feature is on; it lists no device where Vulkan is absent),
//! then the CPU, which the registry keeps last. libllama's `backend_init` and the tools that
//! list devices call this and nothing else.

/// Registers the compiled backends; safe to call more than once.
pub fn init() {
    #[cfg(feature = "vulkan")]
    ggml_vulkan::init();
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
