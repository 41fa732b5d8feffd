//! `--override-kv KEY=TYPE:VALUE` (llama.cpp common's string_parse_kv_override) and how
//! llama_model_quantize writes the overrides into the output's metadata.

use gguf::Value;

/// The value of one override, as llama.cpp's `llama_model_kv_override` holds it.
#[derive(Clone, Debug, PartialEq)]
pub enum OverrideValue {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
}

impl OverrideValue {
    /// llama.cpp's override_type_to_str.
    pub fn type_name(&self) -> &'static str {
        match self {
            OverrideValue::Int(_) => "int",
            OverrideValue::Float(_) => "float",
            OverrideValue::Bool(_) => "bool",
            OverrideValue::Str(_) => "str",
        }
    }

    /// The value as the output file stores it: ints become u32 of their magnitude (llama.cpp
    /// writes `(uint32_t) abs(v)`), floats f32.
    pub fn to_gguf(&self) -> Value {
        match self {
            OverrideValue::Int(v) => Value::U32(v.unsigned_abs() as u32),
            OverrideValue::Float(v) => Value::F32(*v as f32),
            OverrideValue::Bool(b) => Value::Bool(*b),
            OverrideValue::Str(s) => Value::Str(s.clone()),
        }
    }

    /// The value as validate_override logs it.
    pub fn log_text(&self) -> String {
        match self {
            OverrideValue::Int(v) => v.to_string(),
            OverrideValue::Float(v) => format!("{v:.6}"),
            OverrideValue::Bool(b) => b.to_string(),
            OverrideValue::Str(s) => s.clone(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct KvOverride {
    pub key: String,
    pub value: OverrideValue,
}

/// Longest key llama.cpp's `char key[128]` holds; values of `str` are limited to 127 bytes.
const KEY_MAX: usize = 128;
const STR_MAX: usize = 127;

/// C's `atol`: optional blanks and sign, then digits up to the first other character
/// (nothing parsable gives 0; glibc's strtol saturates on overflow).
pub fn atol(s: &str) -> i64 {
    let s = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut v: i64 = 0;
    for b in digits.bytes().take_while(u8::is_ascii_digit) {
        let d = (b - b'0') as i64;
        v = match v.checked_mul(10).and_then(|x| {
            if neg {
                x.checked_sub(d)
            } else {
                x.checked_add(d)
            }
        }) {
            Some(x) => x,
            None => return if neg { i64::MIN } else { i64::MAX },
        };
    }
    v
}

/// C's `atof`: the longest leading part that reads as a number (0 if none).
pub fn atof(s: &str) -> f64 {
    let s = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    // Only ASCII can belong to a number, so the candidates end at char boundaries.
    let end = s.bytes().take_while(|b| b.is_ascii_graphic()).count();
    (1..=end)
        .rev()
        .find_map(|n| s[..n].parse::<f64>().ok())
        .unwrap_or(0.0)
}

impl KvOverride {
    /// Parses `KEY=TYPE:VALUE`; the error is llama.cpp's message (without a trailing newline).
    pub fn parse(data: &str) -> Result<KvOverride, String> {
        let name = "string_parse_kv_override";
        let Some(sep) = data.find('=').filter(|&p| p < KEY_MAX) else {
            return Err(format!("{name}: malformed KV override '{data}'"));
        };
        let key = data[..sep].to_string();
        let rest = &data[sep + 1..];
        let value = if let Some(v) = rest.strip_prefix("int:") {
            OverrideValue::Int(atol(v))
        } else if let Some(v) = rest.strip_prefix("float:") {
            OverrideValue::Float(atof(v))
        } else if let Some(v) = rest.strip_prefix("bool:") {
            match v {
                "true" => OverrideValue::Bool(true),
                "false" => OverrideValue::Bool(false),
                _ => {
                    return Err(format!(
                        "{name}: invalid boolean value for KV override '{data}'"
                    ))
                }
            }
        } else if let Some(v) = rest.strip_prefix("str:") {
            if v.len() > STR_MAX {
                return Err(format!(
                    "{name}: malformed KV override '{data}', value cannot exceed 127 chars"
                ));
            }
            OverrideValue::Str(v.to_string())
        } else {
            return Err(format!("{name}: invalid type for KV override '{data}'"));
        };
        Ok(KvOverride { key, value })
    }

    /// A string override cut to the 127 bytes llama.cpp's `val_str` holds (at a character
    /// boundary, so the value stays valid UTF-8).
    pub fn str_truncated(key: &str, value: &str) -> KvOverride {
        let mut end = value.len().min(STR_MAX);
        while !value.is_char_boundary(end) {
            end -= 1;
        }
        KvOverride {
            key: key.to_string(),
            value: OverrideValue::Str(value[..end].to_string()),
        }
    }
}

/// The overrides llama.cpp sees: its list ends at the first empty key.
pub fn effective(overrides: &[KvOverride]) -> &[KvOverride] {
    let n = overrides
        .iter()
        .position(|o| o.key.is_empty())
        .unwrap_or(overrides.len());
    &overrides[..n]
}

/// gguf_set_val_*: the key is removed wherever it is and appended with the new value.
pub fn set_kv(kv: &mut Vec<(String, Value)>, key: &str, value: Value) {
    kv.retain(|(k, _)| k != key);
    kv.push((key.to_string(), value));
}

/// validate_override for a key the quantizer reads: the override if its type is `expected`
/// (logged as llama.cpp logs it), else a warning and `None`.
pub fn lookup<'a>(
    overrides: &'a [KvOverride],
    key: &str,
    expected: &str,
) -> Option<&'a OverrideValue> {
    // llama.cpp keeps the overrides in a map; the first one given for a key wins.
    let o = effective(overrides).iter().find(|o| o.key == key)?;
    if o.value.type_name() == expected {
        ggml::log_info!(
            "validate_override: Using metadata override ({:>5}) '{}' = {}\n",
            o.value.type_name(),
            o.key,
            o.value.log_text()
        );
        Some(&o.value)
    } else {
        ggml::log_warn!(
            "validate_override: Warning: Bad metadata override type for key '{}', expected {} but got {}\n",
            o.key,
            expected,
            o.value.type_name()
        );
        None
    }
}
