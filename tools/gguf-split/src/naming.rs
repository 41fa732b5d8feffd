//! Shard file names, as llama.cpp's llama_split_path and llama_split_prefix make and check them:
//! the loader finds the other shards of a model by these names.

/// `<prefix>-<no>-of-<count>.gguf`, `split_no` counted from 0 and written from 1.
pub fn split_path(prefix: &str, split_no: usize, split_count: usize) -> String {
    format!("{prefix}-{:05}-of-{:05}.gguf", split_no + 1, split_count)
}

/// The prefix of `path` if it is named as shard `split_no` of `split_count`.
pub fn split_prefix(path: &str, split_no: usize, split_count: usize) -> Option<&str> {
    let postfix = format!("-{:05}-of-{:05}.gguf", split_no + 1, split_count);
    // llama.cpp refuses an empty prefix too
    if path.len() <= postfix.len() {
        return None;
    }
    path.strip_suffix(postfix.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_and_prefix_round_trip() {
        assert_eq!(split_path("out/m", 0, 3), "out/m-00001-of-00003.gguf");
        assert_eq!(split_path("m", 99999, 100000), "m-100000-of-100000.gguf");
        assert_eq!(
            split_prefix("out/m-00002-of-00003.gguf", 1, 3),
            Some("out/m")
        );
        assert_eq!(split_prefix("out/m-00002-of-00003.gguf", 0, 3), None);
        assert_eq!(split_prefix("-00001-of-00001.gguf", 0, 1), None);
        assert_eq!(split_prefix("m.gguf", 0, 1), None);
    }
}
