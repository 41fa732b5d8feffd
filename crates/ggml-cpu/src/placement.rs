//! Where and how the pool's threads run (ggml_threadpool_params): a CPU mask, strict placement
//! (one CPU per thread, round robin over the mask), a scheduling priority and a polling level
//! (how long an idle thread spins for the next graph before it sleeps). The OS calls are
//! ggml-cpu.c's ggml_thread_apply_affinity / ggml_thread_apply_priority for Linux, with their
//! warnings when the OS refuses.

use std::sync::Mutex;

/// ggml's GGML_MAX_N_THREADS: the CPUs a mask can name.
pub const MAX_CPUS: usize = 512;

/// GGML_SCHED_PRIO_*.
pub const PRIO_LOW: i32 = -1;
pub const PRIO_NORMAL: i32 = 0;
pub const PRIO_MEDIUM: i32 = 1;
pub const PRIO_HIGH: i32 = 2;
pub const PRIO_REALTIME: i32 = 3;

#[derive(Clone, Debug, PartialEq)]
pub struct ThreadpoolParams {
    /// CPU i may run the threads when `cpumask[i]`; no CPU set means no affinity is applied.
    pub cpumask: Vec<bool>,
    pub strict_cpu: bool,
    pub prio: i32,
    /// 0 (sleep at once) to 100; 50 is the default
    pub poll: u32,
}

impl Default for ThreadpoolParams {
    /// ggml_threadpool_params_init's defaults.
    fn default() -> Self {
        ThreadpoolParams {
            cpumask: vec![false; MAX_CPUS],
            strict_cpu: false,
            prio: PRIO_NORMAL,
            poll: 50,
        }
    }
}

impl ThreadpoolParams {
    pub fn mask_valid(&self) -> bool {
        self.cpumask.iter().any(|&b| b)
    }

    /// The mask as hex (CPU 0 is bit 0), for log lines.
    pub fn mask_hex(&self) -> String {
        let mut nibbles: Vec<u8> = self
            .cpumask
            .chunks(4)
            .map(|c| {
                c.iter()
                    .enumerate()
                    .fold(0u8, |a, (i, &b)| a | ((b as u8) << i))
            })
            .collect();
        while nibbles.len() > 1 && nibbles.last() == Some(&0) {
            nibbles.pop();
        }
        let digits: String = nibbles.iter().rev().map(|n| format!("{n:x}")).collect();
        format!("0x{digits}")
    }
}

/// The parameters of the pools CPU backends are made with from now on: (generation, batch).
/// llama.cpp makes these pools in common_init and attaches them to the context; here the
/// context's CPU backend makes its own, so the tools set them before creating a context.
static CONFIG: Mutex<Option<(ThreadpoolParams, ThreadpoolParams)>> = Mutex::new(None);

pub fn set_threadpool_params(generation: ThreadpoolParams, batch: ThreadpoolParams) {
    *CONFIG.lock().unwrap_or_else(|e| e.into_inner()) = Some((generation, batch));
}

pub(crate) fn threadpool_params() -> (ThreadpoolParams, ThreadpoolParams) {
    CONFIG
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .unwrap_or_default()
}

/// ggml_thread_cpumask_next: the whole mask, or with strict placement the next CPU of it
/// after `*iter` (wrapping).
pub(crate) fn cpumask_next(global: &[bool], strict: bool, iter: &mut usize) -> Vec<bool> {
    if !strict {
        return global.to_vec();
    }
    let mut local = vec![false; global.len()];
    for i in 0..global.len() {
        let idx = (*iter + i) % global.len();
        if global[idx] {
            local[idx] = true;
            *iter = idx + 1;
            break;
        }
    }
    local
}

fn errno_text(err: i32) -> String {
    std::io::Error::from_raw_os_error(err)
        .to_string()
        .split(" (os error")
        .next()
        .unwrap_or("")
        .to_string()
}

/// Pins the calling thread to the CPUs of `mask`; false (after ggml's warning) if refused.
pub(crate) fn apply_affinity(mask: &[bool]) -> bool {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let capacity = 8 * std::mem::size_of::<libc::cpu_set_t>();
    for (i, _) in mask.iter().enumerate().filter(|(_, &b)| b) {
        if i < capacity {
            // SAFETY: i is below the set's capacity.
            unsafe { libc::CPU_SET(i, &mut set) };
        }
    }
    // SAFETY: pid 0 is the calling thread; the set is valid for its size.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        let err = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        let hex = ThreadpoolParams {
            cpumask: mask.to_vec(),
            ..Default::default()
        }
        .mask_hex();
        eprintln!(
            "warn: failed to set affinity mask {hex} : {} ({err})",
            errno_text(err)
        );
        return false;
    }
    true
}

/// ggml_thread_apply_priority for the calling thread: low is SCHED_BATCH, medium, high and
/// realtime SCHED_FIFO 40, 80, 90; normal keeps what the thread inherited.
pub(crate) fn apply_priority(prio: i32) -> bool {
    let (policy, level) = match prio {
        PRIO_LOW => (libc::SCHED_BATCH, 0),
        PRIO_MEDIUM => (libc::SCHED_FIFO, 40),
        PRIO_HIGH => (libc::SCHED_FIFO, 80),
        PRIO_REALTIME => (libc::SCHED_FIFO, 90),
        _ => return true,
    };
    let param = libc::sched_param {
        sched_priority: level,
    };
    // SAFETY: pid 0 is the calling thread; param is a valid sched_param.
    let rc = unsafe { libc::sched_setscheduler(0, policy, &param) };
    if rc != 0 {
        let err = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        eprintln!(
            "warn: failed to set thread priority {prio} : {} ({err})",
            errno_text(err)
        );
        return false;
    }
    true
}

/// common's set_process_priority: the nice value for the whole process (low 5, medium -5,
/// high -10, realtime -20); Err(strerror, errno) when refused.
pub fn set_process_priority(prio: i32) -> Result<(), (String, i32)> {
    let nice = match prio {
        PRIO_LOW => 5,
        PRIO_MEDIUM => -5,
        PRIO_HIGH => -10,
        PRIO_REALTIME => -20,
        _ => return Ok(()),
    };
    // SAFETY: plain syscall on this process.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
    if rc != 0 {
        let err = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        return Err((errno_text(err), err));
    }
    Ok(())
}

/// The CPUs the calling thread may run on (sched_getaffinity), for checks and logs.
pub fn current_affinity() -> Vec<usize> {
    // SAFETY: zeroed cpu_set_t is valid; pid 0 is the calling thread.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    let capacity = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: i is below the set's capacity.
    (0..capacity)
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect()
}

/// The calling thread's scheduling policy (SCHED_OTHER 0, SCHED_BATCH 3, SCHED_FIFO 1).
pub fn current_policy() -> i32 {
    // SAFETY: plain syscall on the calling thread.
    unsafe { libc::sched_getscheduler(0) }
}

/// common's parse_cpu_mask: hex digits, CPU 0 the lowest bit of the last digit (up to 128 digits);
/// the bits are added to `mask`.
pub fn parse_cpu_mask(s: &str, mask: &mut [bool]) -> Result<(), String> {
    let hex = s.strip_prefix("0x").unwrap_or(s);
    let digits: Vec<u8> = hex.bytes().take(128).collect();
    for (k, &c) in digits.iter().enumerate() {
        let v = (c as char)
            .to_digit(16)
            .ok_or_else(|| format!("Invalid hex character '{}' at position {}", c as char, k))?;
        // the first digit holds the highest CPUs
        let top = (digits.len() - k) * 4 - 1;
        for b in 0..4 {
            if v & (8 >> b) != 0 {
                mask[top - b] = true;
            }
        }
    }
    Ok(())
}

/// The NUMA nodes this machine has (/sys/devices/system/node/nodeN), 1 when it says nothing.
pub fn numa_nodes() -> usize {
    let n = std::fs::read_dir("/sys/devices/system/node")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    name.strip_prefix("node")
                        .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
                })
                .count()
        })
        .unwrap_or(0);
    n.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_placement_walks_the_mask() {
        let mut m = vec![false; 8];
        m[1] = true;
        m[3] = true;
        let mut it = 0;
        let picks: Vec<usize> = (0..3)
            .map(|_| {
                cpumask_next(&m, true, &mut it)
                    .iter()
                    .position(|&b| b)
                    .unwrap()
            })
            .collect();
        assert_eq!(picks, [1, 3, 1]);
        assert_eq!(cpumask_next(&m, false, &mut it), m);
        let p = ThreadpoolParams {
            cpumask: m,
            ..Default::default()
        };
        assert_eq!(p.mask_hex(), "0xa");
    }
}
