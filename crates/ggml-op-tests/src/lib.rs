//! The backend op test table, in the spirit of llama.cpp's test-backend-ops: every case builds
//! its own tiny graph, runs it on a backend and on an f64 reference, and compares. A new backend
//! gets every case by calling [`run_cases`] with its device.

pub mod alloc;
pub mod case;
pub mod cases;
pub mod coverage;
pub mod reference;
pub mod runner;
pub mod shadow;

pub use case::{Built, Case, Compare, Init};
pub use runner::{run_cases, run_table, CaseResult, Outcome, Report};
