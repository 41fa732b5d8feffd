//! The git facts of the checkout being built, for build scripts (this crate's own and the
//! tools' that bake them in themselves).

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// Sets `LLAMA_BUILD_COMMIT` ("unknown" outside a git checkout) and `LLAMA_BUILD_NUMBER` ("0")
/// for the crate being built, and reruns the build script when HEAD moves.
pub fn emit() {
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".to_string());
    let number = git(&["rev-list", "--count", "HEAD"]).unwrap_or_else(|| "0".to_string());
    println!("cargo:rustc-env=LLAMA_BUILD_COMMIT={commit}");
    println!("cargo:rustc-env=LLAMA_BUILD_NUMBER={number}");
    if let Some(git_dir) = git(&["rev-parse", "--git-dir"]) {
        let dir = Path::new(&git_dir);
        for f in ["HEAD", "refs/heads", "packed-refs"] {
            let p = dir.join(f);
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
