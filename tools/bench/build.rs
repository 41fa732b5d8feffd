//! The "build: <commit> (<n>)" footer's git info, shared with llama-quantize.

fn main() {
    build_info::emit();
}
