//! The split.* keys and gguf_set_val's order rule: setting a key removes it and appends it, so
//! a key set twice moves to the end. Byte-identical shards depend on following that rule.

use gguf::Value;

pub const SPLIT_NO: &str = "split.no";
pub const SPLIT_COUNT: &str = "split.count";
pub const SPLIT_TENSORS_COUNT: &str = "split.tensors.count";

pub fn set(kv: &mut Vec<(String, Value)>, key: &str, value: Value) {
    kv.retain(|(k, _)| k != key);
    kv.push((key.to_string(), value));
}

pub fn get<'a>(kv: &'a [(String, Value)], key: &str) -> Option<&'a Value> {
    kv.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_moves_an_existing_key_to_the_end() {
        let mut kv = vec![
            ("a".to_string(), Value::U32(1)),
            ("b".to_string(), Value::U32(2)),
        ];
        set(&mut kv, "a", Value::U32(3));
        assert_eq!(
            kv,
            vec![
                ("b".to_string(), Value::U32(2)),
                ("a".to_string(), Value::U32(3))
            ]
        );
        assert_eq!(get(&kv, "a"), Some(&Value::U32(3)));
    }
}
