//! The build facts llama.cpp's build-info carries (LLAMA_COMMIT, LLAMA_BUILD_NUMBER): baked into
//! this crate at build time, so that every tool's `--version` and "build: <commit> (<n>)" lines
//! say the same thing; `emit` gives them to build scripts of crates that bake them in
//! themselves.

mod git;

pub use git::emit;

/// The workspace version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The short commit hash of the build ("unknown" outside a git checkout).
pub fn commit() -> &'static str {
    env!("LLAMA_BUILD_COMMIT")
}

/// The number of commits up to the build's (0 outside a git checkout).
pub fn build_number() -> u64 {
    env!("LLAMA_BUILD_NUMBER").parse().unwrap_or(0)
}

/// What every tool prints for `--version`.
pub fn version_text() -> String {
    format!(
        "version: {VERSION} (build {}, commit {})\nbuilt with rustc for {} {}\n",
        build_number(),
        commit(),
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_text_names_version_build_and_commit() {
        let t = version_text();
        let first = t.lines().next().unwrap_or("");
        assert_eq!(
            first,
            format!(
                "version: {VERSION} (build {}, commit {})",
                build_number(),
                commit()
            )
        );
        assert!(!commit().is_empty());
        assert_eq!(t.lines().count(), 2);
    }
}
