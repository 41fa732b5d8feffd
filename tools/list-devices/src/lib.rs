//! llama-list-devices and the `--list-devices` flag of the tools
//! (`common_print_available_devices` in llama.cpp's common/arg.cpp): every device that is not
//! the CPU, with its memory.

use ggml::backend::{DeviceKind, DeviceRef};

pub mod cli;

/// One listed device: name, description, total and free bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub name: String,
    pub description: String,
    pub total: usize,
    pub free: usize,
}

/// The offload devices (GPU, iGPU, accelerators) among `devices`, in registry order.
pub fn offload_devices(devices: &[DeviceRef]) -> Vec<DeviceInfo> {
    devices
        .iter()
        .filter(|d| d.kind() != DeviceKind::Cpu)
        .map(|d| {
            let (free, total) = d.memory();
            DeviceInfo {
                name: d.name().to_string(),
                description: d.description().to_string(),
                total,
                free,
            }
        })
        .collect()
}

/// "Available devices:" then `  name: description (N MiB, M MiB free)` per device, or
/// `  (none)`.
pub fn render(devices: &[DeviceInfo]) -> String {
    let mut s = String::from("Available devices:\n");
    if devices.is_empty() {
        s += "  (none)\n";
    }
    for d in devices {
        s += &format!(
            "  {}: {} ({} MiB, {} MiB free)\n",
            d.name,
            d.description,
            d.total / 1024 / 1024,
            d.free / 1024 / 1024
        );
    }
    s
}

/// The list for the devices registered in this process.
pub fn available_devices_text() -> String {
    render(&offload_devices(&ggml::backend::devices()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_when_only_the_cpu() {
        assert_eq!(render(&[]), "Available devices:\n  (none)\n");
    }

    #[test]
    fn one_line_per_device_in_mib() {
        let d = DeviceInfo {
            name: "CUDA0".into(),
            description: "NVIDIA H200".into(),
            total: 143_167 * 1024 * 1024 + 5,
            free: 142_600 * 1024 * 1024 + 1024 * 1024 - 1,
        };
        assert_eq!(
            render(&[d]),
            "Available devices:\n  CUDA0: NVIDIA H200 (143167 MiB, 142600 MiB free)\n"
        );
    }
}
