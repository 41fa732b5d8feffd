//! A persistent thread pool: threads are created once per backend and run one closure per graph
//! on every thread, which then steps through the nodes separated by a spinning barrier. Idle
//! threads spin briefly for the next graph (generation calls back-to-back), then park.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::placement::{self, ThreadpoolParams};

/// Spins before yielding in barriers, and before parking between graphs.
const BARRIER_SPINS: u32 = 2_000;
const IDLE_SPINS: u32 = 20_000;

/// The idle spins for a polling level: `--poll` 50 (the default) keeps the tuned count, 0
/// sleeps at once, 100 spins twice as long (llama.cpp scales its rounds linearly the same way).
pub(crate) fn idle_spins(poll: u32) -> u32 {
    (IDLE_SPINS as u64 * poll.min(100) as u64 / 50) as u32
}

/// A reusable barrier for the threads of one job (sense by generation count).
pub(crate) struct SpinBarrier {
    arrived: CacheLine<AtomicUsize>,
    /// on a line of its own, as ggml keeps n_barrier_passed: the waiters spin on it without
    /// taking the line the arrivals increment
    generation: CacheLine<AtomicUsize>,
    /// Set when a thread of the job panicked: waits return at once so no thread hangs.
    poisoned: AtomicBool,
}

/// A value alone on a 64-byte cache line.
#[repr(align(64))]
struct CacheLine<T>(T);

impl<T> std::ops::Deref for CacheLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl SpinBarrier {
    fn new() -> SpinBarrier {
        SpinBarrier {
            arrived: CacheLine(AtomicUsize::new(0)),
            generation: CacheLine(AtomicUsize::new(0)),
            poisoned: AtomicBool::new(false),
        }
    }

    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// Waits until `n` threads have arrived.
    pub fn wait(&self, n: usize) {
        if n <= 1 {
            return;
        }
        let gen = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) == n - 1 {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation
                .store(gen.wrapping_add(1), Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == gen {
            if self.is_poisoned() {
                return;
            }
            if spins < BARRIER_SPINS {
                std::hint::spin_loop();
                spins += 1;
            } else {
                // the machine may have fewer free cores than threads: let the others run
                std::thread::yield_now();
            }
        }
    }
}

type Job = dyn Fn(usize, usize, &SpinBarrier) + Sync;

/// The job being run: a pointer to a closure that lives on the caller's stack for the whole
/// run (the caller waits for every worker to finish before returning).
#[derive(Clone, Copy)]
struct JobPtr(*const Job);
// SAFETY: the closure is Sync and outlives every use (see `Pool::run`).
unsafe impl Send for JobPtr {}

struct Shared {
    epoch: AtomicU64,
    /// (epoch of the job, the job and its thread count); None between jobs
    job: Mutex<(u64, Option<(JobPtr, usize)>)>,
    wake: Condvar,
    done: AtomicUsize,
    shutdown: AtomicBool,
    barrier: SpinBarrier,
}

pub(crate) struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    params: Arc<ThreadpoolParams>,
    /// where strict placement takes the next CPU (ggml's cpumask_iter)
    mask_iter: usize,
    /// the calling thread's CPUs, taken after the first workers' as ggml places it last
    main_mask: Option<Vec<bool>>,
}

impl Pool {
    /// A pool meant to run `n_threads` threads (the caller's thread is thread 0). Threads the
    /// OS refuses now are retried, and reported, by `reserve` and `run`.
    #[cfg(test)]
    pub fn new(n_threads: usize) -> Pool {
        Pool::with_params(n_threads, ThreadpoolParams::default())
    }

    /// A pool whose threads run where and how `params` say (ggml_threadpool_new).
    pub fn with_params(n_threads: usize, params: ThreadpoolParams) -> Pool {
        // only settings someone chose are worth a line (llama.cpp logs none)
        if params != ThreadpoolParams::default() {
            ggml::log_debug!(
                "ggml_threadpool_new: cpumask = {}, strict_cpu = {}, prio = {}, poll = {}\n",
                params.mask_hex(),
                params.strict_cpu as i32,
                params.prio,
                params.poll
            );
        }
        let shared = Arc::new(Shared {
            epoch: AtomicU64::new(0),
            job: Mutex::new((0, None)),
            wake: Condvar::new(),
            done: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            barrier: SpinBarrier::new(),
        });
        let mut pool = Pool {
            shared,
            workers: Vec::new(),
            params: Arc::new(params),
            mask_iter: 0,
            main_mask: None,
        };
        let _ = pool.reserve(n_threads);
        pool
    }

    /// Gives the calling thread (thread 0 of every job) this pool's priority and CPUs, as ggml
    /// does when a pool starts or resumes.
    pub fn place_caller(&mut self) {
        let p = self.params.clone();
        placement::apply_priority(p.prio);
        if p.mask_valid() {
            let mask = self
                .main_mask
                .get_or_insert_with(|| {
                    placement::cpumask_next(&p.cpumask, p.strict_cpu, &mut self.mask_iter)
                })
                .clone();
            placement::apply_affinity(&mask);
        }
    }

    /// Makes sure `n_threads` threads can run (the caller's plus `n_threads - 1` workers);
    /// a thread the OS cannot create (memory or process limits) is an error, not a panic.
    pub fn reserve(&mut self, n_threads: usize) -> Result<(), String> {
        while self.workers.len() + 1 < n_threads {
            let ith = self.workers.len() + 1;
            let shared = self.shared.clone();
            let params = self.params.clone();
            let mask = params.mask_valid().then(|| {
                placement::cpumask_next(&params.cpumask, params.strict_cpu, &mut self.mask_iter)
            });
            address_space_headroom()
                .map_err(|e| format!("failed to create {n_threads} threads: {e}"))?;
            let handle = std::thread::Builder::new()
                .name(format!("ggml-cpu-{ith}"))
                .spawn(move || {
                    placement::apply_priority(params.prio);
                    if let Some(m) = &mask {
                        placement::apply_affinity(m);
                    }
                    worker(shared, ith, idle_spins(params.poll))
                })
                .map_err(|e| format!("failed to create {n_threads} threads: {e}"))?;
            self.workers.push(handle);
        }
        Ok(())
    }

    /// Runs `f(ith, nth, barrier)` on `nth` threads (growing the pool if needed) and returns
    /// when all of them have finished: Ok(false) if a worker thread panicked (a panic on the
    /// calling thread is resumed once the workers are done), Err if the threads could not be
    /// created (nothing ran then).
    pub fn run(
        &mut self,
        nth: usize,
        f: &(dyn Fn(usize, usize, &SpinBarrier) + Sync),
    ) -> Result<bool, String> {
        let nth = nth.max(1);
        self.reserve(nth)?;
        let barrier = &self.shared.barrier;
        barrier.poisoned.store(false, Ordering::Release);
        barrier.arrived.store(0, Ordering::Release);
        if nth == 1 {
            f(0, 1, barrier);
            return Ok(true);
        }
        // SAFETY: erase the closure's lifetime; it is only called until `done` reaches
        // nth - 1 below, which happens before this function returns.
        let ptr: *const Job = unsafe {
            std::mem::transmute::<*const (dyn Fn(usize, usize, &SpinBarrier) + Sync + '_), *const Job>(
                f,
            )
        };
        self.shared.done.store(0, Ordering::Relaxed);
        {
            let mut job = self.shared.job.lock().unwrap_or_else(|e| e.into_inner());
            let e = self.shared.epoch.fetch_add(1, Ordering::AcqRel) + 1;
            *job = (e, Some((JobPtr(ptr), nth)));
            self.shared.wake.notify_all();
        }
        let mine = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            f(0, nth, &self.shared.barrier)
        }));
        if mine.is_err() {
            self.shared.barrier.poisoned.store(true, Ordering::Release);
        }
        let mut spins = 0u32;
        while self.shared.done.load(Ordering::Acquire) < nth - 1 {
            if spins < BARRIER_SPINS {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
        {
            let mut job = self.shared.job.lock().unwrap_or_else(|e| e.into_inner());
            job.1 = None;
        }
        if let Err(p) = mine {
            std::panic::resume_unwind(p);
        }
        Ok(!self.shared.barrier.is_poisoned())
    }
}

fn worker(shared: Arc<Shared>, ith: usize, idle_spins: u32) {
    let mut seen = 0u64;
    loop {
        // wait for a new epoch: spin first, then park
        let mut spins = 0u32;
        loop {
            if shared.shutdown.load(Ordering::Acquire) {
                return;
            }
            if shared.epoch.load(Ordering::Acquire) != seen {
                break;
            }
            if spins < idle_spins {
                std::hint::spin_loop();
                spins += 1;
                continue;
            }
            let guard = shared.job.lock().unwrap_or_else(|e| e.into_inner());
            if shared.epoch.load(Ordering::Acquire) == seen
                && !shared.shutdown.load(Ordering::Acquire)
            {
                drop(shared.wake.wait(guard).unwrap_or_else(|e| e.into_inner()));
            }
        }
        // read the epoch with the job so that a job is never run twice
        let (e, job) = *shared.job.lock().unwrap_or_else(|e| e.into_inner());
        seen = e;
        let Some((JobPtr(f), nth)) = job else {
            continue;
        };
        if ith < nth {
            // SAFETY: the job pointer stays valid until every participating worker has
            // incremented `done` (Pool::run waits for that).
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
                (*f)(ith, nth, &shared.barrier)
            }));
            if r.is_err() {
                shared.barrier.poisoned.store(true, Ordering::Release);
            }
            shared.done.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        {
            let _guard = self.shared.job.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.shutdown.store(true, Ordering::Release);
            self.shared.wake.notify_all();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// Address space a new worker needs beyond its stack: the Rust runtime maps the thread's
/// signal stack inside the thread, and aborts the process if that fails, so a spawn that only
/// just fits under a memory limit (`ulimit -v`) must be refused before it starts.
const SPAWN_HEADROOM: usize = 3 << 20;

/// Ok when SPAWN_HEADROOM bytes of address space can still be mapped (they are unmapped at
/// once), else the OS's error, as the spawn would have failed or aborted.
fn address_space_headroom() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        // SAFETY: an anonymous, inaccessible, private mapping that nothing reads or writes,
        // unmapped before returning; a failed mmap returns MAP_FAILED and maps nothing.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                SPAWN_HEADROOM,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                return Err(std::io::Error::last_os_error());
            }
            libc::munmap(p, SPAWN_HEADROOM);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_thread_runs_and_barriers_order_the_steps() {
        let mut pool = Pool::new(3);
        let hits = AtomicUsize::new(0);
        let after = AtomicUsize::new(0);
        for _ in 0..50 {
            hits.store(0, Ordering::SeqCst);
            after.store(0, Ordering::SeqCst);
            let ok = pool.run(3, &|_ith, nth, barrier| {
                hits.fetch_add(1, Ordering::SeqCst);
                barrier.wait(nth);
                // every thread sees all three arrivals after the barrier
                if hits.load(Ordering::SeqCst) == 3 {
                    after.fetch_add(1, Ordering::SeqCst);
                }
                barrier.wait(nth);
            });
            assert_eq!(ok, Ok(true));
            assert_eq!(after.load(Ordering::SeqCst), 3);
        }
    }

    /// Each thread's CPUs and scheduling policy, as seen from inside a job.
    fn placements(pool: &mut Pool, nth: usize) -> Vec<(Vec<usize>, i32)> {
        let seen = Mutex::new(vec![(Vec::new(), -1); nth]);
        pool.place_caller();
        let ok = pool.run(nth, &|ith, nth, barrier| {
            let me = (placement::current_affinity(), placement::current_policy());
            seen.lock().unwrap()[ith] = me;
            barrier.wait(nth);
        });
        assert_eq!(ok, Ok(true));
        seen.into_inner().unwrap()
    }

    #[test]
    fn threads_run_on_the_mask_and_at_the_priority() {
        // in a thread of its own: placing the caller must not pin the test harness
        std::thread::spawn(|| {
            let cpus = placement::current_affinity();
            assert!(!cpus.is_empty());
            let mut mask = vec![false; placement::MAX_CPUS];
            for &c in cpus.iter().take(2) {
                mask[c] = true;
            }
            // strict: one CPU each, round robin, the caller last (ggml's order)
            let mut pool = Pool::with_params(
                2,
                ThreadpoolParams {
                    cpumask: mask.clone(),
                    strict_cpu: true,
                    prio: placement::PRIO_LOW,
                    poll: 0,
                },
            );
            let seen = placements(&mut pool, 2);
            let second = *cpus.get(1).unwrap_or(&cpus[0]);
            assert_eq!(seen[1].0, vec![cpus[0]], "worker 1 takes the first CPU");
            assert_eq!(seen[0].0, vec![second], "the caller takes the next");
            // SCHED_BATCH for the low priority, on every thread (no privilege needed)
            assert!(seen.iter().all(|s| s.1 == libc::SCHED_BATCH), "{seen:?}");
            drop(pool);
            // not strict: every thread may use the whole mask
            let mut pool = Pool::with_params(
                2,
                ThreadpoolParams {
                    cpumask: mask,
                    ..Default::default()
                },
            );
            let want: Vec<usize> = cpus.iter().take(2).copied().collect();
            for s in placements(&mut pool, 2) {
                assert_eq!(s.0, want);
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn poll_scales_the_idle_spins() {
        assert_eq!(idle_spins(0), 0);
        assert_eq!(idle_spins(50), IDLE_SPINS);
        assert_eq!(idle_spins(100), 2 * IDLE_SPINS);
        assert_eq!(idle_spins(1000), 2 * IDLE_SPINS);
        // a pool that never spins still runs every job
        let mut pool = Pool::with_params(
            2,
            ThreadpoolParams {
                poll: 0,
                ..Default::default()
            },
        );
        for _ in 0..20 {
            let n = AtomicUsize::new(0);
            let ok = pool.run(2, &|_, nth, b| {
                n.fetch_add(1, Ordering::SeqCst);
                b.wait(nth);
            });
            assert_eq!(ok, Ok(true));
            assert_eq!(n.load(Ordering::SeqCst), 2);
        }
    }

    #[test]
    fn a_panicking_worker_fails_the_run_without_hanging() {
        let mut pool = Pool::new(2);
        let ok = pool.run(2, &|ith, nth, barrier| {
            if ith == 1 {
                panic!("kernel bug");
            }
            barrier.wait(nth);
            barrier.wait(nth);
        });
        assert_eq!(ok, Ok(false));
        // the pool still works afterwards
        let count = AtomicUsize::new(0);
        let again = pool.run(2, &|_, nth, barrier| {
            count.fetch_add(1, Ordering::SeqCst);
            barrier.wait(nth);
        });
        assert_eq!(again, Ok(true));
        assert_eq!(count.load(Ordering::SeqCst), 2);
    }
}
