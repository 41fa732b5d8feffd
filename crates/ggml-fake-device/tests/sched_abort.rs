//! The scheduler's abort callback: a backend that cannot stop inside its graph (the fake GPU,
//! like a real one) still stops the graph at the next split boundary, with Status::Aborted.

mod common;

use common::*;
use ggml::backend::{Backend, BufferTypeRef, Device, Status};
use ggml::sched::Sched;
use ggml_fake_device::{Counters, TestDevice, TestDeviceConfig};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const GPU: usize = 0;

fn cpu_backend() -> Box<dyn Backend> {
    let mut b = ggml_cpu::init_backend();
    b.set_n_threads(2);
    b
}

fn cpu_buft() -> BufferTypeRef {
    ggml_cpu::device().buffer_type()
}

#[test]
fn an_abort_stops_the_graph_after_the_split_that_saw_it() {
    let gpu = TestDevice::new(TestDeviceConfig::gpu("GPU0"));
    let counters = gpu.counters();
    let mut s = Sched::new(
        vec![gpu.backend(cpu_backend()), cpu_backend()],
        None,
        4096,
        false,
        true,
    )
    .unwrap();
    s.set_debug(0);
    s.set_debug_realloc(0);
    // layer 1's FFN stays on the CPU: GPU, CPU and GPU splits after the embedding
    let mut toy = toy(2, 3, &[1], &cpu_buft(), &gpu.buffer_type());
    fill_weights(&toy.g);
    s.alloc_graph(&mut toy.g).unwrap();
    // the input lives in compute memory that a run reuses: set it before each one
    let set_token = |toy: &Toy| {
        ggml::backend::set_tensor(&toy.g.ctx[toy.inp_tokens], &3i32.to_le_bytes(), 0).unwrap()
    };
    let gpu_splits = s.splits().iter().filter(|p| p.backend_id == GPU).count();
    let first_gpu = s.splits().iter().position(|p| p.backend_id == GPU);
    assert!(gpu_splits >= 2, "the toy graph has two GPU splits");
    assert!(first_gpu.is_some_and(|i| i + 1 < s.n_splits()));

    // without an abort every split runs
    set_token(&toy);
    assert_eq!(s.graph_compute(&mut toy.g), Status::Success);
    assert_eq!(Counters::get(&counters.graph_computes), gpu_splits);

    // asks to stop once the first GPU split ran: the GPU cannot stop inside it, the scheduler
    // stops right after it
    let before = Counters::get(&counters.graph_computes);
    let c = counters.clone();
    let checks = Arc::new(AtomicUsize::new(0));
    let n = checks.clone();
    s.set_abort_callback(Some(Arc::new(move || {
        n.fetch_add(1, Ordering::SeqCst);
        Counters::get(&c.graph_computes) > before
    })));
    // only the scheduler checks: the CPU backend would otherwise stop after its first node
    let cpu = s.n_backends() - 1;
    s.backend(cpu).set_abort_callback(None);
    set_token(&toy);
    assert_eq!(s.graph_compute(&mut toy.g), Status::Aborted);
    assert_eq!(Counters::get(&counters.graph_computes), before + 1);
    // one check after each split up to and including the first GPU split
    assert_eq!(checks.load(Ordering::SeqCst), first_gpu.unwrap() + 1);
    assert!(s.abort_requested());

    // cleared, the same graph runs to the end again
    s.set_abort_callback(None);
    assert!(!s.abort_requested());
    set_token(&toy);
    assert_eq!(s.graph_compute(&mut toy.g), Status::Success);
    assert_eq!(
        Counters::get(&counters.graph_computes),
        before + 1 + gpu_splits
    );
}
