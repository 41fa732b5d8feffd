//! ggml's Vulkan backend on `ash`.
//!
//! - libvulkan is opened at run time (`ash::Entry::load`): building needs no Vulkan SDK, and a
//!   machine without a loader or device simply has no Vulkan device ([`reg`] lists none).
//! - `GGML_VK_VISIBLE_DEVICES=0,1` picks physical devices by index as in llama.cpp; without it
//!   CPU-type devices (lavapipe) are hidden.
//! - Each device `Vulkan<N>` has the device-local buffer type `Vulkan<N>` and the pinned host
//!   buffer type `Vulkan_Host`; tensors too large for a storage-buffer binding stay on the
//!   host, as in ggml-vulkan.
//! - Shaders are GLSL in `shaders/`, compiled by `scripts/build-vulkan-shaders` to the SPIR-V
//!   in `spirv/` that is committed and included with `include_bytes!`.
//! - Every transfer and graph completes before its call returns (one queue, one fence), so
//!   data handed to `set_tensor` may be freed right after.

mod backend;
mod buffer;
mod device;
mod gpu;
mod instance;
mod ops;
mod pipelines;

pub use backend::VkBackend;
pub use buffer::{VkBufferType, VkHostBufferType};
pub use device::{reg, VkDevice, VkReg};

/// Registers the Vulkan backend with ggml's registry (with no devices where Vulkan is absent).
pub fn init() {
    ggml::backend::register(reg());
}

/// The Vulkan devices, Vulkan0 first.
pub fn devices() -> Vec<ggml::backend::DeviceRef> {
    use ggml::backend::Reg;
    reg().devices()
}

/// Names of the committed shaders (for the test that the SPIR-V is current).
pub fn shader_names() -> Vec<&'static str> {
    pipelines::SHADERS.iter().map(|(n, _)| *n).collect()
}
