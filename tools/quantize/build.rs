//! The git info of the "version: ... (build N, commit C)" line, shared with llama-bench.

fn main() {
    build_info::emit();
}
