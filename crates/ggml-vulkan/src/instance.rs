//! The Vulkan instance and the list of devices this process may use, made once.
//!
//! libvulkan is opened at run time (ash's `loaded` feature): a machine without a loader, or with
//! no usable device, has no Vulkan devices and no error. `GGML_VK_VISIBLE_DEVICES` names physical
//! devices by index as in llama.cpp; without it only discrete and integrated GPUs are used (or,
//! when there are none, the first device that is not a CPU), so lavapipe (a CPU-type device)
//! appears only when the variable names it.

use ash::vk;
use std::ffi::CStr;
use std::sync::OnceLock;

pub(crate) struct Instance {
    /// keeps libvulkan loaded for the instance's lifetime
    _entry: ash::Entry,
    pub instance: ash::Instance,
    /// the physical devices in use, in ggml's order (Vulkan0, Vulkan1, ...)
    pub devices: Vec<vk::PhysicalDevice>,
}

static INSTANCE: OnceLock<Option<Instance>> = OnceLock::new();

/// The process's instance, or None where Vulkan cannot be used here.
pub(crate) fn get() -> Option<&'static Instance> {
    INSTANCE.get_or_init(create).as_ref()
}

fn create() -> Option<Instance> {
    // SAFETY: loading libvulkan runs its initialisers; the loader is a well-behaved library and
    // the Entry is kept for as long as anything made from it.
    let entry = match unsafe { ash::Entry::load() } {
        Ok(e) => e,
        Err(e) => {
            ggml::log_debug!("ggml_vulkan: no Vulkan loader ({e})\n");
            return None;
        }
    };
    let app = vk::ApplicationInfo::default()
        .application_name(c"ggml-vulkan")
        .api_version(vk::API_VERSION_1_2);
    let info = vk::InstanceCreateInfo::default().application_info(&app);
    // SAFETY: the create info and what it points to live across the call.
    let instance = match unsafe { entry.create_instance(&info, None) } {
        Ok(i) => i,
        Err(e) => {
            ggml::log_debug!("ggml_vulkan: vkCreateInstance failed ({e})\n");
            return None;
        }
    };
    // SAFETY: the instance is valid.
    let all = unsafe { instance.enumerate_physical_devices() }.unwrap_or_default();
    let devices = match visible(&instance, &all) {
        Ok(d) => d,
        Err(e) => {
            ggml::log_error!("ggml_vulkan: {e}\n");
            Vec::new()
        }
    };
    Some(Instance {
        _entry: entry,
        instance,
        devices,
    })
}

fn device_type(instance: &ash::Instance, pd: vk::PhysicalDevice) -> vk::PhysicalDeviceType {
    // SAFETY: pd came from this instance.
    unsafe { instance.get_physical_device_properties(pd) }.device_type
}

/// ggml_vk_instance_init's device choice.
fn visible(
    instance: &ash::Instance,
    all: &[vk::PhysicalDevice],
) -> Result<Vec<vk::PhysicalDevice>, String> {
    if let Ok(list) = std::env::var("GGML_VK_VISIBLE_DEVICES") {
        let mut out = Vec::new();
        for tok in list.split([',', ' ']).filter(|s| !s.is_empty()) {
            let i: usize = tok
                .parse()
                .map_err(|_| format!("Invalid device index {tok} in GGML_VK_VISIBLE_DEVICES."))?;
            let Some(&pd) = all.get(i) else {
                return Err(format!(
                    "Invalid device index {i} in GGML_VK_VISIBLE_DEVICES."
                ));
            };
            out.push(pd);
        }
        return Ok(out.into_iter().filter(|&pd| usable(instance, pd)).collect());
    }
    let gpus: Vec<_> = all
        .iter()
        .copied()
        .filter(|&pd| {
            matches!(
                device_type(instance, pd),
                vk::PhysicalDeviceType::DISCRETE_GPU | vk::PhysicalDeviceType::INTEGRATED_GPU
            ) && usable(instance, pd)
        })
        .collect();
    if !gpus.is_empty() {
        return Ok(gpus);
    }
    Ok(all
        .iter()
        .copied()
        .find(|&pd| {
            device_type(instance, pd) != vk::PhysicalDeviceType::CPU && usable(instance, pd)
        })
        .into_iter()
        .collect())
}

/// What the shaders need: Vulkan 1.2, 8- and 16-bit storage, push descriptors, a compute queue.
fn usable(instance: &ash::Instance, pd: vk::PhysicalDevice) -> bool {
    // SAFETY: pd came from this instance.
    let props = unsafe { instance.get_physical_device_properties(pd) };
    if props.api_version < vk::API_VERSION_1_2 {
        return false;
    }
    let mut f11 = vk::PhysicalDeviceVulkan11Features::default();
    let mut f12 = vk::PhysicalDeviceVulkan12Features::default();
    let mut f2 = vk::PhysicalDeviceFeatures2::default()
        .push_next(&mut f11)
        .push_next(&mut f12);
    // SAFETY: the chained structs live across the call.
    unsafe { instance.get_physical_device_features2(pd, &mut f2) };
    let storage =
        f11.storage_buffer16_bit_access == vk::TRUE && f12.storage_buffer8_bit_access == vk::TRUE;
    storage
        && has_extension(instance, pd, ash::khr::push_descriptor::NAME)
        && compute_queue_family(instance, pd).is_some()
}

/// Whether shaders may use 64-bit floats and integers (shaderFloat64, shaderInt64).
pub(crate) fn has_float64_int64(instance: &ash::Instance, pd: vk::PhysicalDevice) -> bool {
    // SAFETY: pd came from this instance.
    let f = unsafe { instance.get_physical_device_features(pd) };
    f.shader_float64 == vk::TRUE && f.shader_int64 == vk::TRUE
}

pub(crate) fn has_extension(instance: &ash::Instance, pd: vk::PhysicalDevice, name: &CStr) -> bool {
    // SAFETY: pd came from this instance.
    let exts = unsafe { instance.enumerate_device_extension_properties(pd) }.unwrap_or_default();
    exts.iter()
        .any(|e| e.extension_name_as_c_str().is_ok_and(|n| n == name))
}

/// A queue family with compute (ggml prefers one with compute and transfer).
pub(crate) fn compute_queue_family(
    instance: &ash::Instance,
    pd: vk::PhysicalDevice,
) -> Option<u32> {
    // SAFETY: pd came from this instance.
    let fams = unsafe { instance.get_physical_device_queue_family_properties(pd) };
    fams.iter()
        .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
        .map(|i| i as u32)
}
