//! `--override-kv` in the model loader: llama_model_loader::get_key consults the overrides
//! before the file. [`KvView`] is the metadata as the loader's typed getters see it: a key with
//! an override of the matching type reads as the override (and logs validate_override's
//! "Using metadata override" line each time it is read); one of another type logs llama.cpp's
//! warning and reads as the file's value. Arrays are never overridden (get_arr ignores them).

use crate::quant::kv_override::effective;
pub use crate::quant::kv_override::{KvOverride, OverrideValue};
use gguf::{GgufFile, Value};

/// One override, resolved against the type of the key in the file.
struct Entry {
    key: String,
    given: OverrideValue,
    /// The type the getter expects: the file's value decides it, as a getter of another type
    /// than the file's would fail anyway; a key the file lacks takes the override's type.
    expected: &'static str,
    /// The override as a value of the file's type, when the types agree.
    value: Option<Value>,
}

/// The metadata of one file with the overrides applied.
pub struct KvView<'a> {
    file: &'a GgufFile,
    entries: Vec<Entry>,
}

/// The override type a GGUF value is read with (override_type_to_str of its getter).
fn kind(v: &Value) -> Option<&'static str> {
    Some(match v {
        Value::U8(_)
        | Value::I8(_)
        | Value::U16(_)
        | Value::I16(_)
        | Value::U32(_)
        | Value::I32(_)
        | Value::U64(_)
        | Value::I64(_) => "int",
        Value::F32(_) | Value::F64(_) => "float",
        Value::Bool(_) => "bool",
        Value::Str(_) => "str",
        Value::Array(_) => return None,
    })
}

/// The override stored as `like`'s type, converted as C's assignment to the getter's type
/// does (integers wrap, doubles round to float).
fn convert(o: &OverrideValue, like: Option<&Value>) -> Value {
    match (o, like) {
        (OverrideValue::Int(v), Some(l)) => {
            let v = *v;
            match l {
                Value::U8(_) => Value::U8(v as u8),
                Value::I8(_) => Value::I8(v as i8),
                Value::U16(_) => Value::U16(v as u16),
                Value::I16(_) => Value::I16(v as i16),
                Value::I32(_) => Value::I32(v as i32),
                Value::U64(_) => Value::U64(v as u64),
                Value::I64(_) => Value::I64(v),
                _ => Value::U32(v as u32),
            }
        }
        // libllama's integer getters are uint32_t
        (OverrideValue::Int(v), None) => Value::U32(*v as u32),
        (OverrideValue::Float(v), Some(Value::F64(_))) => Value::F64(*v),
        (OverrideValue::Float(v), _) => Value::F32(*v as f32),
        (OverrideValue::Bool(b), _) => Value::Bool(*b),
        (OverrideValue::Str(s), _) => Value::Str(s.clone()),
    }
}

impl<'a> KvView<'a> {
    pub fn new(file: &'a GgufFile, overrides: &[KvOverride]) -> KvView<'a> {
        let mut entries: Vec<Entry> = Vec::new();
        for o in effective(overrides) {
            // llama.cpp keeps them in a map: the first one given for a key wins
            if entries.iter().any(|e| e.key == o.key) {
                continue;
            }
            let in_file = file.get(&o.key);
            let expected = match in_file {
                Some(v) => match kind(v) {
                    Some(k) => k,
                    None => continue,
                },
                None => o.value.type_name(),
            };
            let value = (expected == o.value.type_name()).then(|| convert(&o.value, in_file));
            entries.push(Entry {
                key: o.key.clone(),
                given: o.value.clone(),
                expected,
                value,
            });
        }
        KvView { file, entries }
    }

    /// The value a getter reads for `key`, logging the override it uses or rejects.
    pub fn get(&self, key: &str) -> Option<&Value> {
        let in_file = self.file.get(key);
        let Some(e) = self.entries.iter().find(|e| e.key == key) else {
            return in_file;
        };
        match &e.value {
            Some(v) => {
                // two messages, as llama.cpp logs the value with a second LLAMA_LOG_INFO (a
                // prefixed log shows its own timestamp before the value)
                ggml::log_info!(
                    "validate_override: Using metadata override ({:>5}) '{}' = ",
                    e.given.type_name(),
                    e.key
                );
                ggml::log_info!("{}\n", e.given.log_text());
                Some(v)
            }
            None => {
                ggml::log_warn!(
                    "validate_override: Warning: Bad metadata override type for key '{}', expected {} but got {}\n",
                    e.key,
                    e.expected,
                    e.given.type_name()
                );
                in_file
            }
        }
    }
}
