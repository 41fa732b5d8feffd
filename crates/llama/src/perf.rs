//! Timing counters of a context (llama_perf_context) and their printout.

use std::time::Instant;

/// llama_perf_context_data
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PerfContextData {
    pub t_start_ms: f64,
    pub t_load_ms: f64,
    pub t_p_eval_ms: f64,
    pub t_eval_ms: f64,
    pub n_p_eval: i32,
    pub n_eval: i32,
    pub n_reused: i32,
}

pub(crate) struct Perf {
    /// the model's load start: load time runs from there to the first evaluation
    pub t_origin: Instant,
    pub t_start_us: u64,
    pub t_load_us: u64,
    pub t_p_eval_us: u64,
    pub t_eval_us: u64,
    pub n_p_eval: i32,
    pub n_eval: i32,
    pub n_reused: i32,
    pub has_evaluated_once: bool,
}

impl Perf {
    pub fn new(t_origin: Instant, t_load_us: u64) -> Perf {
        Perf {
            t_origin,
            t_start_us: 0,
            t_load_us,
            t_p_eval_us: 0,
            t_eval_us: 0,
            n_p_eval: 0,
            n_eval: 0,
            n_reused: 0,
            has_evaluated_once: false,
        }
    }

    pub fn now_us(&self) -> u64 {
        self.t_origin.elapsed().as_micros() as u64
    }

    /// What llama_context::synchronize records for the tokens queued since the last call.
    pub fn record(&mut self, n_queued: usize, t_compute_start_us: u64, no_perf: bool) {
        let now = self.now_us();
        let dt = now.saturating_sub(t_compute_start_us);
        if n_queued == 1 {
            if !no_perf {
                self.t_eval_us += dt;
            }
            self.n_eval += 1;
        } else if n_queued > 1 {
            if !no_perf {
                self.t_p_eval_us += dt;
            }
            self.n_p_eval += n_queued as i32;
        }
        if n_queued > 0 && !self.has_evaluated_once {
            self.t_load_us = now.saturating_sub(self.t_start_us);
            self.has_evaluated_once = true;
        }
    }

    pub fn data(&self) -> PerfContextData {
        PerfContextData {
            t_start_ms: self.t_start_us as f64 / 1e3,
            t_load_ms: self.t_load_us as f64 / 1e3,
            t_p_eval_ms: self.t_p_eval_us as f64 / 1e3,
            t_eval_ms: self.t_eval_us as f64 / 1e3,
            n_p_eval: self.n_p_eval.max(1),
            n_eval: self.n_eval.max(1),
            n_reused: self.n_reused.max(0),
        }
    }

    pub fn reset(&mut self) {
        self.t_start_us = self.now_us();
        self.t_eval_us = 0;
        self.n_eval = 0;
        self.t_p_eval_us = 0;
        self.n_p_eval = 0;
        self.n_reused = 0;
    }
}

/// printf's rendering of a float with `prec` decimals in `width` (inf, -nan as glibc prints).
pub fn cfloat(v: f64, width: usize, prec: usize) -> String {
    let s = if v.is_nan() {
        "-nan".to_string()
    } else if v.is_infinite() {
        if v > 0.0 {
            "inf".to_string()
        } else {
            "-inf".to_string()
        }
    } else {
        format!("{:.*}", prec, v)
    };
    format!("{:>width$}", s)
}
