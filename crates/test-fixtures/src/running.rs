//! A tool run that a test interrupts: started with its stderr read by a thread, signalled only
//! once stderr shows that the tool has reached the point under test, and waited for with a
//! bound. A fixed sleep before the signal is a race: on a loaded machine the signal can arrive
//! while the model still loads, before the tool's handler exists (and where the test runner
//! was started with SIGINT ignored, the signal is then lost and an endless generation never
//! ends).

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::text;

/// How long a tool may take to reach the marker, and to exit after the signal.
const MARKER_LIMIT: Duration = Duration::from_secs(120);
const EXIT_LIMIT: Duration = Duration::from_secs(20);

/// Sends `signal` ("INT", "TERM", ...) to the process `pid` with kill(1).
pub fn signal(pid: u32, signal: &str) {
    let st = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .expect("run kill");
    assert!(st.success(), "kill -{signal} {pid} failed");
}

/// Waits for the child's exit and all its output, killing it and failing the test when it has
/// not exited within `limit`.
pub fn wait_with_timeout(child: Child, limit: Duration) -> Output {
    let (tx, rx) = mpsc::channel();
    let id = child.id();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(o) => o.expect("wait for the child"),
        Err(_) => {
            signal(id, "KILL");
            panic!("the child did not exit within {limit:?}");
        }
    }
}

/// A started tool whose stderr has shown the marker `start` waited for.
pub struct Running {
    child: Option<Child>,
    err: mpsc::Receiver<String>,
    seen: String,
}

/// What an interrupted run ended with.
pub struct Interrupted {
    /// seconds from the signal to the exit
    pub secs: f64,
    /// the exit status; None when a signal ended it
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Running {
    /// Spawns `cmd` with stdout and stderr piped and returns once stderr has shown `marker`;
    /// fails the test (and kills the child) when it has not within two minutes or the child
    /// closed stderr first.
    pub fn start(cmd: &mut Command, marker: &str) -> Running {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the tool");
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stderr);
            let mut line = Vec::new();
            while r.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                if tx.send(text(&line)).is_err() {
                    break;
                }
                line.clear();
            }
        });
        let mut run = Running {
            child: Some(child),
            err: rx,
            seen: String::new(),
        };
        let t0 = Instant::now();
        while !run.seen.contains(marker) {
            let left = MARKER_LIMIT.saturating_sub(t0.elapsed());
            match run.err.recv_timeout(left) {
                Ok(l) => run.seen.push_str(&l),
                Err(e) => {
                    let _ = run.child.as_mut().unwrap().kill();
                    panic!(
                        "no {marker:?} after {:?} ({e}); stderr:\n{}",
                        t0.elapsed(),
                        run.seen
                    )
                }
            }
        }
        run
    }

    /// Sends `sig`, then waits (at most 20 s, else the child is killed and the test fails);
    /// returns how it ended with all of stdout and stderr. stdout is drained meanwhile, so a
    /// child blocked on a full pipe still sees the signal's effect.
    pub fn signal(mut self, sig: &str) -> Interrupted {
        let mut child = self.child.take().unwrap();
        signal(child.id(), sig);
        let t0 = Instant::now();
        let mut stdout = child.stdout.take().unwrap();
        let out = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = stdout.read_to_end(&mut v);
            v
        });
        let status = loop {
            if let Some(st) = child.try_wait().expect("wait") {
                break st;
            }
            if t0.elapsed() > EXIT_LIMIT {
                let _ = child.kill();
                panic!(
                    "no exit {EXIT_LIMIT:?} after SIG{sig}; stderr:\n{}",
                    self.seen
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let secs = t0.elapsed().as_secs_f64();
        while let Ok(l) = self.err.recv_timeout(Duration::from_secs(5)) {
            self.seen.push_str(&l);
        }
        Interrupted {
            secs,
            code: status.code(),
            stdout: text(&out.join().unwrap()),
            stderr: std::mem::take(&mut self.seen),
        }
    }

    /// SIGINT, as Ctrl+C sends it.
    pub fn interrupt(self) -> Interrupted {
        self.signal("INT")
    }
}

impl Drop for Running {
    /// A test that fails between start and the signal leaves no tool running behind it.
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
