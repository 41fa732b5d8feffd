//! Records the git commit and commit count for the "version: ... (build N, commit C)" line.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let number = git(&["rev-list", "--count", "HEAD"]).unwrap_or_else(|| "0".into());
    println!("cargo:rustc-env=QUANTIZE_BUILD_COMMIT={commit}");
    println!("cargo:rustc-env=QUANTIZE_BUILD_NUMBER={number}");
    println!("cargo:rerun-if-changed=build.rs");
}
