//! One benchmark result and its 42 fields in llama-bench's order (csv, json, jsonl and sql
//! print them all; the markdown table picks some).

use crate::params::{BuftOverride, Devices, FlashAttn, LazyMode, LoadMode, SplitMode, MAX_DEVICES};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldType {
    String,
    Bool,
    Int,
    Float,
}

/// Every field, in output order, with its type.
pub const FIELDS: [(&str, FieldType); 42] = [
    ("build_commit", FieldType::String),
    ("build_number", FieldType::Int),
    ("cpu_info", FieldType::String),
    ("gpu_info", FieldType::String),
    ("backends", FieldType::String),
    ("model_filename", FieldType::String),
    ("model_type", FieldType::String),
    ("model_size", FieldType::Int),
    ("model_n_params", FieldType::Int),
    ("n_batch", FieldType::Int),
    ("n_ubatch", FieldType::Int),
    ("n_threads", FieldType::Int),
    ("cpu_mask", FieldType::String),
    ("cpu_strict", FieldType::Bool),
    ("poll", FieldType::Int),
    ("type_k", FieldType::String),
    ("type_v", FieldType::String),
    ("n_gpu_layers", FieldType::Int),
    ("n_cpu_moe", FieldType::Int),
    ("split_mode", FieldType::String),
    ("main_gpu", FieldType::Int),
    ("no_kv_offload", FieldType::Bool),
    ("flash_attn", FieldType::Int),
    ("devices", FieldType::String),
    ("tensor_split", FieldType::String),
    ("tensor_buft_overrides", FieldType::String),
    ("load_mode", FieldType::String),
    ("lazy_mode", FieldType::String),
    ("embeddings", FieldType::Bool),
    ("no_op_offload", FieldType::Int),
    ("no_host", FieldType::Bool),
    ("repack", FieldType::Bool),
    ("fit_target", FieldType::Int),
    ("fit_min_ctx", FieldType::Int),
    ("n_prompt", FieldType::Int),
    ("n_gen", FieldType::Int),
    ("n_depth", FieldType::Int),
    ("test_time", FieldType::String),
    ("avg_ns", FieldType::Int),
    ("stddev_ns", FieldType::Int),
    ("avg_ts", FieldType::Float),
    ("stddev_ts", FieldType::Float),
];

pub fn field_type(name: &str) -> FieldType {
    FIELDS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(FieldType::String, |(_, t)| *t)
}

/// Facts about the machine and the build, shared by every result of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Machine {
    pub build_commit: String,
    pub build_number: i64,
    pub cpu_info: String,
    pub gpu_info: String,
    pub backends: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TestRecord {
    pub machine: Machine,
    pub model_filename: String,
    pub model_type: String,
    pub model_size: u64,
    pub model_n_params: u64,
    pub n_batch: i32,
    pub n_ubatch: i32,
    pub n_threads: i32,
    pub cpu_mask: String,
    pub cpu_strict: bool,
    pub poll: i32,
    pub type_k: ggml::Type,
    pub type_v: ggml::Type,
    pub n_gpu_layers: i32,
    pub n_cpu_moe: i32,
    pub split_mode: SplitMode,
    pub main_gpu: i32,
    pub no_kv_offload: bool,
    pub flash_attn: FlashAttn,
    pub devices: Devices,
    pub tensor_split: Vec<f32>,
    pub tensor_buft_overrides: Vec<BuftOverride>,
    pub load_mode: LoadMode,
    pub lazy_mode: LazyMode,
    pub embeddings: bool,
    pub no_op_offload: bool,
    pub no_host: bool,
    pub repack: bool,
    pub fit_target: u64,
    pub fit_min_ctx: u32,
    pub n_prompt: i32,
    pub n_gen: i32,
    pub n_depth: i32,
    pub test_time: String,
    pub samples_ns: Vec<u64>,
}

/// The mean with llama-bench's integer arithmetic for nanoseconds.
fn avg_u64(v: &[u64]) -> u64 {
    if v.is_empty() {
        return 0;
    }
    (v.iter().map(|&x| x as u128).sum::<u128>() / v.len() as u128) as u64
}

/// Sample standard deviation, `sqrt(sum(x²)/(n-1) - mean²·n/(n-1))`, in integer arithmetic as
/// llama-bench's `stdev<uint64_t>` (saturating where rounding would make it negative).
fn stdev_u64(v: &[u64]) -> u64 {
    if v.len() <= 1 {
        return 0;
    }
    let n = v.len() as u128;
    let mean = avg_u64(v) as u128;
    let sq_sum: u128 = v.iter().map(|&x| x as u128 * x as u128).sum();
    let var = (sq_sum / (n - 1)).saturating_sub(mean * mean * n / (n - 1));
    (var as f64).sqrt() as u64
}

pub fn avg_f64(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.iter().sum::<f64>() / v.len() as f64
}

pub fn stdev_f64(v: &[f64]) -> f64 {
    if v.len() <= 1 {
        return 0.0;
    }
    let n = v.len() as f64;
    let mean = avg_f64(v);
    let sq_sum: f64 = v.iter().map(|x| x * x).sum();
    (sq_sum / (n - 1.0) - mean * mean * n / (n - 1.0)).sqrt()
}

/// C's `%f` of a double (std::to_string).
fn to_string_f64(v: f64) -> String {
    format!("{v:.6}")
}

fn b(v: bool) -> String {
    u8::from(v).to_string()
}

impl TestRecord {
    pub fn avg_ns(&self) -> u64 {
        avg_u64(&self.samples_ns)
    }

    pub fn stdev_ns(&self) -> u64 {
        stdev_u64(&self.samples_ns)
    }

    /// Tokens per second of each sample.
    pub fn get_ts(&self) -> Vec<f64> {
        let n_tokens = (self.n_prompt + self.n_gen) as f64;
        self.samples_ns
            .iter()
            .map(|&t| 1e9 * n_tokens / t.max(1) as f64)
            .collect()
    }

    pub fn avg_ts(&self) -> f64 {
        avg_f64(&self.get_ts())
    }

    pub fn stdev_ts(&self) -> f64 {
        stdev_f64(&self.get_ts())
    }

    /// The test's name in the markdown table: `pp512`, `tg128`, `pp512+tg128`, plus ` @ dN`.
    pub fn test_name(&self) -> String {
        let mut s = if self.n_prompt > 0 && self.n_gen == 0 {
            format!("pp{}", self.n_prompt)
        } else if self.n_gen > 0 && self.n_prompt == 0 {
            format!("tg{}", self.n_gen)
        } else {
            format!("pp{}+tg{}", self.n_prompt, self.n_gen)
        };
        if self.n_depth > 0 {
            s += &format!(" @ d{}", self.n_depth);
        }
        s
    }

    /// `%.2f` values up to the last non-zero one, joined by `/`.
    fn tensor_split_str(&self) -> String {
        let max_nonzero = (0..MAX_DEVICES.min(self.tensor_split.len()))
            .rfind(|&i| self.tensor_split[i] > 0.0)
            .unwrap_or(0);
        (0..=max_nonzero)
            .map(|i| format!("{:.2}", self.tensor_split.get(i).copied().unwrap_or(0.0)))
            .collect::<Vec<_>>()
            .join("/")
    }

    fn overrides_str(&self) -> String {
        if self.tensor_buft_overrides.is_empty() {
            return "none".to_string();
        }
        self.tensor_buft_overrides
            .iter()
            .map(|o| format!("{}={}", o.pattern, o.buft))
            .collect::<Vec<_>>()
            .join(";")
    }

    /// Every field's value as text, in `FIELDS` order.
    pub fn values(&self) -> Vec<String> {
        let m = &self.machine;
        vec![
            m.build_commit.clone(),
            m.build_number.to_string(),
            m.cpu_info.clone(),
            m.gpu_info.clone(),
            m.backends.clone(),
            self.model_filename.clone(),
            self.model_type.clone(),
            self.model_size.to_string(),
            self.model_n_params.to_string(),
            self.n_batch.to_string(),
            self.n_ubatch.to_string(),
            self.n_threads.to_string(),
            self.cpu_mask.clone(),
            b(self.cpu_strict),
            self.poll.to_string(),
            self.type_k.name().to_string(),
            self.type_v.name().to_string(),
            self.n_gpu_layers.to_string(),
            self.n_cpu_moe.to_string(),
            self.split_mode.name().to_string(),
            self.main_gpu.to_string(),
            b(self.no_kv_offload),
            self.flash_attn.value().to_string(),
            self.devices.to_string(),
            self.tensor_split_str(),
            self.overrides_str(),
            self.load_mode.name().to_string(),
            self.lazy_mode.name().to_string(),
            b(self.embeddings),
            b(self.no_op_offload),
            b(self.no_host),
            b(self.repack),
            self.fit_target.to_string(),
            self.fit_min_ctx.to_string(),
            self.n_prompt.to_string(),
            self.n_gen.to_string(),
            self.n_depth.to_string(),
            self.test_time.clone(),
            self.avg_ns().to_string(),
            self.stdev_ns().to_string(),
            to_string_f64(self.avg_ts()),
            to_string_f64(self.stdev_ts()),
        ]
    }

    /// The value of one field by name.
    pub fn value(&self, field: &str) -> Option<String> {
        let i = FIELDS.iter().position(|(n, _)| *n == field)?;
        self.values().into_iter().nth(i)
    }
}

/// RFC 3339 UTC (`%FT%TZ`) of seconds since the Unix epoch.
pub fn rfc3339_utc(secs: u64) -> String {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    // civil-from-days (Howard Hinnant's algorithm)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn sample() -> TestRecord {
        TestRecord {
            machine: Machine {
                build_commit: "abc1234".into(),
                build_number: 42,
                cpu_info: "AMD EPYC \"Zen\" 4".into(),
                gpu_info: String::new(),
                backends: "CPU".into(),
            },
            model_filename: "tiny.gguf".into(),
            model_type: "llama ?B all F32".into(),
            model_size: 322_443_264,
            model_n_params: 80_609_024,
            n_batch: 2048,
            n_ubatch: 512,
            n_threads: 2,
            cpu_mask: "0x0".into(),
            cpu_strict: false,
            poll: 50,
            type_k: ggml::Type::F16,
            type_v: ggml::Type::F16,
            n_gpu_layers: -1,
            n_cpu_moe: 0,
            split_mode: SplitMode::Layer,
            main_gpu: 0,
            no_kv_offload: false,
            flash_attn: FlashAttn::Auto,
            devices: Devices::Auto,
            tensor_split: vec![0.0; MAX_DEVICES],
            tensor_buft_overrides: vec![],
            load_mode: LoadMode::Auto,
            lazy_mode: LazyMode::Auto,
            embeddings: false,
            no_op_offload: false,
            no_host: false,
            repack: true,
            fit_target: 0,
            fit_min_ctx: 0,
            n_prompt: 512,
            n_gen: 0,
            n_depth: 0,
            test_time: "2026-11-30T09:00:00Z".into(),
            samples_ns: vec![64_000_000, 66_000_000, 68_000_000],
        }
    }

    #[test]
    fn statistics() {
        let t = sample();
        assert_eq!(t.avg_ns(), 66_000_000);
        assert_eq!(t.stdev_ns(), 2_000_000);
        let ts = t.get_ts();
        assert!((ts[0] - 8000.0).abs() < 1e-9);
        assert!((t.avg_ts() - (8000.0 + 512e9 / 66e6 + 512e9 / 68e6) / 3.0).abs() < 1e-9);
        assert!(t.stdev_ts() > 0.0);
        assert_eq!(stdev_u64(&[5]), 0);
        assert_eq!(stdev_f64(&[5.0]), 0.0);
    }

    #[test]
    fn values_follow_field_order() {
        let t = sample();
        let v = t.values();
        assert_eq!(v.len(), FIELDS.len());
        assert_eq!(t.value("n_threads").unwrap(), "2");
        assert_eq!(t.value("tensor_split").unwrap(), "0.00");
        assert_eq!(t.value("tensor_buft_overrides").unwrap(), "none");
        assert_eq!(t.value("flash_attn").unwrap(), "-1");
        assert_eq!(
            t.value("avg_ts").unwrap().split('.').nth(1).unwrap().len(),
            6
        );
        assert_eq!(t.test_name(), "pp512");
        let mut g = sample();
        g.n_prompt = 0;
        g.n_gen = 128;
        g.n_depth = 256;
        assert_eq!(g.test_name(), "tg128 @ d256");
        g.n_prompt = 8;
        g.n_depth = 0;
        assert_eq!(g.test_name(), "pp8+tg128");
        g.tensor_split[1] = 0.5;
        assert_eq!(g.value("tensor_split").unwrap(), "0.00/0.50");
    }

    #[test]
    fn rfc3339() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_utc(1_798_706_096), "2026-12-31T08:34:56Z");
    }
}
