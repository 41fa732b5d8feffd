//! End-to-end tests live in tests/tests/*.rs; they run the built binaries.
