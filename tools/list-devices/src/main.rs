//! llama-list-devices: prints the offload devices of the compiled backends and their memory.

fn main() {
    // registers the compiled backends (the CPU one, which is never listed)
    ggml_cpu::init();
    print!("{}", llama_list_devices::available_devices_text());
}
