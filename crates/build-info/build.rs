//! Bakes the commit and commit count into this crate, for `version_text`.

#[path = "src/git.rs"]
mod git;

fn main() {
    git::emit();
}
