//! The CPU threadpool settings of `-C`/`-Cr`/`--cpu-strict`/`--prio`/`--poll` and their
//! `-batch` forms (common's cpu params: parse_cpu_mask, parse_cpu_range,
//! ggml_threadpool_params_from_cpu_params, set_process_priority), and what `--numa` can do here.

use ggml_cpu::placement::{self, numa_nodes, parse_cpu_mask, ThreadpoolParams, MAX_CPUS};

use crate::args::Params;

/// parse_cpu_range: `lo-hi`, either end may be left out (0, 511).
pub fn parse_cpu_range(s: &str, mask: &mut [bool]) -> Result<(), String> {
    let (lo, hi) = s
        .split_once('-')
        .ok_or("Format of CPU range is invalid! Expected [<start>]-[<end>].")?;
    let lo: usize = if lo.is_empty() {
        0
    } else {
        lo.trim().parse().map_err(|_| "stoull".to_string())?
    };
    let hi: usize = if hi.is_empty() {
        MAX_CPUS - 1
    } else {
        hi.trim().parse().map_err(|_| "stoull".to_string())?
    };
    if lo >= MAX_CPUS {
        return Err("Start index out of bounds!".into());
    }
    if hi >= MAX_CPUS {
        return Err("End index out of bounds!".into());
    }
    for m in mask.iter_mut().take(hi + 1).skip(lo) {
        *m = true;
    }
    Ok(())
}

fn build(mask: &str, range: &str, strict: bool, prio: i32, poll: u64) -> ThreadpoolParams {
    let mut p = ThreadpoolParams::default();
    // the option handlers already checked both forms
    if !mask.is_empty() {
        let _ = parse_cpu_mask(mask, &mut p.cpumask);
    }
    if !range.is_empty() {
        let _ = parse_cpu_range(range, &mut p.cpumask);
    }
    p.strict_cpu = strict;
    p.prio = prio;
    p.poll = poll.min(u32::MAX as u64) as u32;
    p
}

/// (generation, batch) threadpool settings. The batch ones were made a copy of the
/// generation ones at parse time unless `-tb` was given (postprocess_cpu_params).
pub fn threadpool_params(p: &Params) -> (ThreadpoolParams, ThreadpoolParams) {
    let gen = build(
        &p.cpu_mask,
        &p.cpu_range,
        p.cpu_strict != 0,
        p.priority,
        p.poll,
    );
    let batch = build(
        &p.cpu_mask_batch,
        &p.cpu_range_batch,
        p.cpu_strict_batch != 0,
        p.priority_batch,
        p.poll_batch.max(0) as u64,
    );
    (gen, batch)
}

/// postprocess_cpu_params for the batch settings: without `-tb` they are the generation
/// settings, whatever `-Cb`, `--prio-batch` etc. said (as in llama.cpp).
pub fn inherit_batch(p: &mut Params) {
    p.cpu_mask_batch = p.cpu_mask.clone();
    p.cpu_range_batch = p.cpu_range.clone();
    p.cpu_strict_batch = p.cpu_strict.min(i32::MAX as u64) as i32;
    p.priority_batch = p.priority;
    p.poll_batch = p.poll.min(i32::MAX as u64) as i32;
}

/// postprocess_cpu_params's warning when the mask has fewer CPUs than threads.
pub fn warn_mask_bits(p: &Params) {
    let (gen, batch) = threadpool_params(p);
    // llama.cpp checks its draft model's settings too, which are copies of these
    let all = [
        (gen.clone(), p.n_threads),
        (batch.clone(), p.n_threads_batch),
        (gen, p.n_threads),
        (batch, p.n_threads_batch),
    ];
    for (tp, n) in all {
        let set = tp.cpumask.iter().filter(|&&b| b).count() as i32;
        if set > 0 && set < n {
            crate::log_wrn!(
                "{}Not enough set bits in CPU mask ({}) to satisfy requested thread count: {}\n",
                super::cmn("postprocess_cpu_params"),
                set,
                n
            );
        }
    }
}

/// Hands the settings to the CPU backends the next context makes.
pub fn configure(p: &Params) {
    let (gen, batch) = threadpool_params(p);
    placement::set_threadpool_params(gen, batch);
}

/// set_process_priority, with common's warning when the OS refuses.
pub fn set_process_priority(prio: i32) {
    if let Err((why, errno)) = placement::set_process_priority(prio) {
        crate::log_wrn!(
            "{}failed to set process priority {} : {} ({})\n",
            super::cmn("set_process_priority"),
            prio,
            why,
            errno
        );
    }
}

/// `--numa`: ggml places threads per node only on a machine with more than one node (its
/// ggml_is_numa), which this build does not do; it says so instead of ignoring the flag.
pub fn numa_note(mode: &str) {
    if mode.is_empty() {
        return;
    }
    let nodes = numa_nodes();
    if nodes <= 1 {
        crate::log_inf!(
            "{}--numa {}: this machine has a single NUMA node, so there is nothing to place (as in llama.cpp)\n",
            super::cmn("numa_init"),
            mode
        );
    } else {
        crate::log_wrn!(
            "{}--numa {}: {} NUMA nodes found, but this build does not place threads or memory per node; use -C/-Cr or numactl instead\n",
            super::cmn("numa_init"),
            mode,
            nodes
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(m: &[bool]) -> Vec<usize> {
        m.iter()
            .enumerate()
            .filter(|(_, &b)| b)
            .map(|(i, _)| i)
            .collect()
    }

    #[test]
    fn masks_and_ranges_as_common() {
        let mut m = vec![false; MAX_CPUS];
        parse_cpu_mask("0x5", &mut m).unwrap();
        assert_eq!(cpus(&m), [0, 2]);
        let mut m = vec![false; MAX_CPUS];
        parse_cpu_mask("10", &mut m).unwrap();
        assert_eq!(cpus(&m), [4]);
        parse_cpu_range("6-7", &mut m).unwrap();
        assert_eq!(cpus(&m), [4, 6, 7]);
        let mut m = vec![false; MAX_CPUS];
        parse_cpu_range("510-", &mut m).unwrap();
        assert_eq!(cpus(&m), [510, 511]);
        assert!(parse_cpu_range("512-", &mut m).is_err());
        assert!(parse_cpu_mask("0xg", &mut m).is_err());
    }
}
