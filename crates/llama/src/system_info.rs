//! llama_print_system_info: each backend's features, "CPU : SSE3 = 1 | ... | ".
//!
//! ggml lists the instruction sets its CPU backend was compiled for; this CPU backend picks its
//! kernels at run time, so the list is what the running machine offers, in ggml's order, plus
//! REPACK when the CPU device has extra (repacking) buffer types.

fn cpu_isa_features() -> Vec<&'static str> {
    let mut f = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! check {
            ($name:literal, $feat:tt) => {
                if std::arch::is_x86_feature_detected!($feat) {
                    f.push($name);
                }
            };
        }
        check!("SSE3", "sse3");
        check!("SSSE3", "ssse3");
        check!("AVX", "avx");
        check!("AVX_VNNI", "avxvnni");
        check!("AVX2", "avx2");
        check!("F16C", "f16c");
        check!("FMA", "fma");
        check!("BMI2", "bmi2");
        check!("AVX512", "avx512f");
        check!("AVX512_VBMI", "avx512vbmi");
        check!("AVX512_VNNI", "avx512vnni");
        check!("AVX512_BF16", "avx512bf16");
    }
    #[cfg(target_arch = "aarch64")]
    {
        macro_rules! check {
            ($name:literal, $feat:tt) => {
                if std::arch::is_aarch64_feature_detected!($feat) {
                    f.push($name);
                }
            };
        }
        check!("NEON", "neon");
        check!("ARM_FMA", "neon");
        check!("FP16_VA", "fp16");
        check!("MATMUL_INT8", "i8mm");
        check!("SVE", "sve");
        check!("DOTPROD", "dotprod");
    }
    f
}

/// The features line of every registered backend that reports some.
pub fn print_system_info() -> String {
    let mut s = String::new();
    for dev in ggml::backend::devices() {
        if dev.kind() != ggml::backend::DeviceKind::Cpu {
            continue;
        }
        s.push_str("CPU : ");
        for name in cpu_isa_features() {
            s.push_str(name);
            s.push_str(" = 1 | ");
        }
        if !dev.extra_buffer_types().is_empty() {
            s.push_str("REPACK = 1 | ");
        }
        break;
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_features_line() {
        crate::backend_init();
        let s = super::print_system_info();
        assert!(s.starts_with("CPU : "), "{s}");
        assert!(s.ends_with(" | ") || s == "CPU : ", "{s}");
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            assert!(s.contains("| AVX2 = 1 | "), "{s}");
        }
    }
}
