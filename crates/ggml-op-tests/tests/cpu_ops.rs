//! The op table on the CPU backend.

use ggml_op_tests::run_cases;

#[test]
fn cpu_backend_passes_the_op_table() {
    let dev = ggml_cpu::device();
    let make = || -> Box<dyn ggml::backend::Backend> {
        let mut b = ggml_cpu::CpuBackend::new(ggml_cpu::device());
        b.set_threads(2);
        Box::new(b)
    };
    let report = run_cases(&make, dev.clone());
    eprintln!("{}", report.summary());
    assert!(
        report.failures().is_empty(),
        "{} of the op table failed on {}",
        report.failures().len(),
        dev.name()
    );
    assert!(report.passed() > 0);
}
