//! `common_fit_params` for the host-only case: a trial load of the model and context without
//! memory (no_alloc) measures what they will use, which is compared with the host's memory and
//! the `--fit-target` margin. Only a CPU backend exists in this build, so there are no device
//! layers or tensor splits to adjust; the measurement and its verdict are reported as llama.cpp
//! reports them (trace level), and a failure leaves the parameters as they were.

use std::path::Path;
use std::time::Instant;

use ggml::log::LogLevel;
use llama::{Context, ContextParams, Model, ModelParams};

use crate::args::Params;
use crate::log::{
    VERBOSITY_DEBUG, VERBOSITY_ERROR, VERBOSITY_OUTPUT, VERBOSITY_TRACE, VERBOSITY_WARN,
};

const MIB: i64 = 1024 * 1024;

enum FitError {
    /// The parameters cannot be made to fit (a warning).
    Fit(String),
    /// Measuring failed (an error).
    Other(String),
}

/// Route libllama's messages below `min` to the debug level while measuring, as
/// `common_get_device_memory_data_impl` does (they show only with `-v`).
fn demote_library_logs(min: LogLevel) {
    ggml::log::set_log_callback(Some(Box::new(move |level, text| {
        let level = if level >= min { level } else { LogLevel::Debug };
        let verbosity = match level {
            LogLevel::None => VERBOSITY_OUTPUT,
            LogLevel::Error => VERBOSITY_ERROR,
            LogLevel::Warn => VERBOSITY_WARN,
            LogLevel::Info => VERBOSITY_TRACE,
            LogLevel::Debug | LogLevel::Cont => VERBOSITY_DEBUG,
        };
        crate::log::log(level, verbosity, text);
    })));
}

/// Host memory the model and context would use: (bytes used, host total bytes, n_ctx_train).
fn measure(
    path: &Path,
    mparams: &ModelParams,
    cparams: &ContextParams,
) -> Result<(i64, i64, u32), FitError> {
    let probe = ModelParams {
        no_alloc: true,
        load_mode: llama::LoadMode::None,
        tensor_split: mparams.tensor_split.clone(),
        tensor_buft_overrides: mparams.tensor_buft_overrides.clone(),
        devices: mparams.devices.clone(),
        kv_overrides: mparams.kv_overrides.clone(),
        progress_callback: None,
        ..*mparams
    };
    let model =
        Model::load(path, &probe).map_err(|_| FitError::Other("failed to load model".into()))?;
    let cp = ContextParams {
        cb_eval: None,
        abort_callback: None,
        ..*cparams
    };
    let ctx = Context::new(model.clone(), cp)
        .map_err(|_| FitError::Other("failed to create llama_context from model".into()))?;
    let used: usize = ctx
        .memory_breakdown()
        .iter()
        .filter(|r| r.is_host)
        .map(|r| r.model + r.context + r.compute)
        .sum();
    let total = ggml::backend::devices()
        .iter()
        .find(|d| d.kind() == ggml::backend::DeviceKind::Cpu)
        .map(|d| d.memory().1)
        .ok_or_else(|| FitError::Other("no CPU backend found".into()))?;
    super::memory_breakdown_print(&ctx);
    Ok((used as i64, total as i64, model.n_ctx_train()))
}

fn fit_impl(
    p: &Params,
    mparams: &ModelParams,
    cparams: &mut ContextParams,
) -> Result<(), FitError> {
    const F: &str = "common_params_fit_impl";
    if mparams.split_mode == llama::SplitMode::Tensor {
        return Err(FitError::Fit(
            "llama_params_fit is not implemented for SPLIT_MODE_TENSOR, abort".into(),
        ));
    }
    crate::log_trc!("{F}: getting device memory data for initial parameters:\n");
    let (used, total, n_ctx_train) = measure(Path::new(&p.model), mparams, cparams)?;
    let n_streams = if cparams.kv_unified {
        1
    } else {
        cparams.n_seq_max.max(1)
    };
    if cparams.n_ctx == 0 {
        cparams.n_ctx = n_ctx_train.saturating_mul(n_streams);
    }
    let margin = p.fit_params_target.first().copied().unwrap_or(1024) as i64 * MIB;
    crate::log_trc!(
        "{F}: projected to use {} MiB of host memory vs. {} MiB of total host memory\n",
        used / MIB,
        total / MIB
    );
    let left = total - used;
    if left >= margin {
        crate::log_trc!(
            "{F}: will leave {} >= {} MiB of system memory, no changes needed\n",
            left / MIB,
            margin / MIB
        );
        return Ok(());
    }
    crate::log_trc!(
        "{F}: cannot meet free memory target of {} MiB, need to reduce host memory by {} MiB\n",
        margin / MIB,
        (margin - left) / MIB
    );
    Err(FitError::Fit(
        "was unable to fit model into system memory, abort".to_string(),
    ))
}

/// `common_fit_params`: measure and report; on failure the parameters stay as they were.
pub fn fit_params(p: &Params, mparams: &ModelParams, cparams: &mut ContextParams) {
    const F: &str = "common_fit_params";
    let t0 = Instant::now();
    let min = if p.verbosity >= VERBOSITY_DEBUG {
        LogLevel::Debug
    } else {
        LogLevel::Error
    };
    demote_library_logs(min);
    let original = cparams.n_ctx;
    let result = fit_impl(p, mparams, cparams);
    crate::log::install_ggml_sink();
    match result {
        Ok(()) => {
            crate::log_trc!("{F}: successfully fit params to free device memory\n");
        }
        Err(FitError::Fit(e)) => {
            cparams.n_ctx = original;
            crate::log_wrn!("{F}: failed to fit params to free device memory: {e}\n");
        }
        Err(FitError::Other(e)) => {
            cparams.n_ctx = original;
            crate::log_err!(
                "{F}: encountered an error while trying to fit params to free device memory: {e}\n"
            );
        }
    }
    crate::log_trc!(
        "{F}: fitting params to free memory took {:.2} seconds\n",
        t0.elapsed().as_secs_f64()
    );
}
