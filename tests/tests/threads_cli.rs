//! The threadpool flags have their effect: with `-C`/`--cpu-strict` the running llama-completion's
//! compute threads are pinned (read from /proc/PID/task/*/status while it generates), the
//! settings reach the pool (its debug line), the `-batch` forms follow llama.cpp's rule that they
//! count only with `-tb`, llama-bench records what it ran with, and `--numa` says what it does.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn completion(args: &[&str]) -> Output {
    let bin = test_fixtures::bin("llama-completion", "llama-completion");
    Command::new(bin)
        .args(args)
        .env_remove("LLAMA_ARG_MODEL")
        .output()
        .expect("run llama-completion")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The CPUs this test process may use.
fn my_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is the empty set; pid 0 is this thread.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    assert_eq!(rc, 0);
    // SAFETY: i is below the set's capacity.
    (0..8 * std::mem::size_of::<libc::cpu_set_t>())
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect()
}

/// (thread name, Cpus_allowed_list) of every thread of `pid`.
fn threads_of(pid: u32) -> Vec<(String, String)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| {
            let tid = e.file_name().to_string_lossy().into_owned();
            // the main thread is the task whose id is the process's
            let comm = if tid == pid.to_string() {
                "main".to_string()
            } else {
                std::fs::read_to_string(e.path().join("comm")).ok()?
            };
            let status = std::fs::read_to_string(e.path().join("status")).ok()?;
            let cpus = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
                .trim()
                .to_string();
            Some((comm.trim().to_string(), cpus))
        })
        .collect()
}

fn model_or_skip() -> Option<std::path::PathBuf> {
    test_fixtures::reference_model_or_skip()
}

#[test]
fn strict_mask_pins_each_compute_thread_to_its_cpu() {
    let Some(model) = model_or_skip() else {
        return;
    };
    let cpus = my_cpus();
    if cpus.len() < 2 {
        test_fixtures::skip("needs two CPUs to tell strict placement apart");
        return;
    }
    let (a, b) = (cpus[0], cpus[1]);
    let mask = format!("{:x}", (1u128 << a) | (1u128 << b));
    let bin = test_fixtures::bin("llama-completion", "llama-completion");
    let mut child = Command::new(bin)
        .args([
            "-m",
            model.to_str().unwrap(),
            "-p",
            "hi",
            "-n",
            "100000",
            "--ignore-eos",
        ])
        .args([
            "-no-cnv",
            "-fit",
            "off",
            "-t",
            "2",
            "-C",
            &mask,
            "--cpu-strict",
            "1",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start llama-completion");
    let pid = child.id();
    // ggml's order: worker 1 takes the first CPU of the mask, the main thread the next
    let want = [a.to_string(), b.to_string()];
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        seen = threads_of(pid);
        let main = seen.iter().find(|(n, _)| n == "main").cloned();
        let worker = seen.iter().find(|(n, _)| n == "ggml-cpu-1").cloned();
        if let (Some(m), Some(w)) = (main, worker) {
            if w.1 == want[0] && m.1 == want[1] {
                break;
            }
        }
        if child.try_wait().ok().flatten().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    let worker = seen.iter().find(|(n, _)| n == "ggml-cpu-1");
    let main = seen.iter().find(|(n, _)| n == "main");
    assert_eq!(
        worker.map(|w| w.1.clone()),
        Some(want[0].clone()),
        "{seen:?}"
    );
    assert_eq!(main.map(|m| m.1.clone()), Some(want[1].clone()), "{seen:?}");
}

fn pool_lines(o: &Output) -> Vec<String> {
    stderr(o)
        .lines()
        .filter_map(|l| {
            l.split_once("ggml_threadpool_new: ")
                .map(|(_, r)| r.to_string())
        })
        .collect()
}

fn run_v(model: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "-m",
        model.to_str().unwrap(),
        "-v",
        "-p",
        "hi",
        "-n",
        "1",
        "-no-cnv",
        "-fit",
        "off",
    ];
    args.extend_from_slice(extra);
    let o = completion(&args);
    assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
    o
}

#[test]
fn settings_reach_the_pool_and_batch_ones_need_tb() {
    let Some(model) = model_or_skip() else {
        return;
    };
    // defaults: no placement, no line
    assert!(pool_lines(&run_v(&model, &[])).is_empty());
    let o = run_v(
        &model,
        &[
            "-Cr",
            "0-0",
            "--cpu-strict",
            "1",
            "--prio",
            "-1",
            "--poll",
            "0",
            "-t",
            "1",
        ],
    );
    assert_eq!(
        pool_lines(&o),
        ["cpumask = 0x1, strict_cpu = 1, prio = -1, poll = 0"],
        "one pool for both roles"
    );
    // without -tb the batch settings are copies of these (postprocess_cpu_params)
    let o = run_v(&model, &["-Cb", "0x1", "--poll-batch", "0"]);
    assert!(pool_lines(&o).is_empty(), "{:?}", pool_lines(&o));
    // with -tb they stand: a batch pool of its own
    let o = run_v(
        &model,
        &[
            "-tb",
            "1",
            "-Cb",
            "0x1",
            "--poll-batch",
            "0",
            "--prio-batch",
            "0",
        ],
    );
    assert_eq!(
        pool_lines(&o),
        ["cpumask = 0x1, strict_cpu = 0, prio = 0, poll = 0"]
    );
    // fewer CPUs than threads: llama.cpp's warning (once per settings it checks)
    let o = run_v(&model, &["-C", "0x1", "-t", "2"]);
    let n = stderr(&o)
        .matches("Not enough set bits in CPU mask (1) to satisfy requested thread count: 2")
        .count();
    assert_eq!(n, 4);
}

#[test]
fn numa_says_what_it_does() {
    let Some(model) = model_or_skip() else {
        return;
    };
    let o = run_v(&model, &["--numa", "distribute"]);
    let err = stderr(&o);
    let nodes = std::fs::read_dir("/sys/devices/system/node")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.strip_prefix("node")
                        .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
                })
                .count()
        })
        .unwrap_or(0);
    if nodes <= 1 {
        assert!(
            err.contains("--numa distribute: this machine has a single NUMA node"),
            "{err}"
        );
    } else {
        assert!(
            err.contains("this build does not place threads or memory per node"),
            "{err}"
        );
    }
}

#[test]
fn bench_runs_with_and_records_its_thread_settings() {
    let Some(model) = model_or_skip() else {
        return;
    };
    let bin = test_fixtures::bin("llama-bench", "llama-bench");
    let o = Command::new(bin)
        .args([
            "-m",
            model.to_str().unwrap(),
            "-p",
            "0",
            "-n",
            "1",
            "-r",
            "1",
            "-t",
            "1",
        ])
        .args([
            "-C",
            "0x1",
            "--cpu-strict",
            "1",
            "--poll",
            "0",
            "-o",
            "json",
            "-v",
        ])
        .output()
        .expect("run llama-bench");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        pool_lines(&o),
        ["cpumask = 0x1, strict_cpu = 1, prio = 0, poll = 0"]
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v[0]["cpu_mask"], "0x1");
    assert_eq!(v[0]["cpu_strict"], true);
    assert_eq!(v[0]["poll"], 0);
}
