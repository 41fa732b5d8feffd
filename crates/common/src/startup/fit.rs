//! `common_fit_params` (llama.cpp's common/fit.cpp): trial loads of the model and context
//! without memory (no_alloc) measure what each device and the host would hold; when a device
//! would keep less free memory than its `--fit-target` margin, the context is shrunk (only when
//! the user left it unset) and then the layers are refilled back to front, device by device, by
//! false position on the measured memory per layer count, as llama.cpp does. With no device the
//! host's memory is compared instead. Messages and decisions are llama.cpp's (trace level).
//!
//! Not done: llama.cpp's step 4 for MoE models whose dense weights all fit (converting the
//! dense-only layers back to full layers front to back); such a model keeps the dense-only
//! placement of step 3, and the log says so.

use std::path::Path;
use std::time::Instant;

use ggml::backend::DeviceKind;
use ggml::log::LogLevel;
use llama::{Context, ContextParams, Model, ModelParams};

use crate::args::Params;
use crate::log::{
    VERBOSITY_DEBUG, VERBOSITY_ERROR, VERBOSITY_OUTPUT, VERBOSITY_TRACE, VERBOSITY_WARN,
};

const MIB: i64 = 1024 * 1024;
const F: &str = "common_params_fit_impl";

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

/// llama_device_memory_data: one device's memory and what the trial load put on it.
#[derive(Clone, Copy, Default)]
struct Dmd {
    free: i64,
    total: i64,
    model: i64,
    context: i64,
    compute: i64,
}

impl Dmd {
    fn used(&self) -> i64 {
        self.model + self.context + self.compute
    }
}

/// One trial load: the model's devices in order, then the host last.
struct Measured {
    dmds: Vec<Dmd>,
    /// "name (description)" of each device
    names: Vec<String>,
    n_layer: u32,
    n_ctx_train: u32,
    n_expert: u32,
}

/// What a trial load changes from the user's parameters: the GPU layers, the tensor split
/// and the buffer-type overrides.
#[derive(Clone)]
struct Placement {
    n_gpu_layers: i32,
    tensor_split: Vec<f32>,
    overrides: Vec<(String, String)>,
}

/// common_get_device_memory_data_impl
fn measure(
    path: &Path,
    mparams: &ModelParams,
    cparams: &ContextParams,
    pl: &Placement,
) -> Result<Measured, FitError> {
    let probe = ModelParams {
        no_alloc: true,
        load_mode: llama::LoadMode::None,
        n_gpu_layers: pl.n_gpu_layers,
        tensor_split: pl.tensor_split.clone(),
        tensor_buft_overrides: pl.overrides.clone(),
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
    // llama_model_n_devices: the model's GPU devices, not the CPU
    let devs: Vec<_> = model
        .devices()
        .iter()
        .filter(|d| d.kind() != DeviceKind::Cpu)
        .cloned()
        .collect();
    let mut dmds = vec![Dmd::default(); devs.len() + 1];
    for r in ctx.memory_breakdown() {
        let slot = if r.is_host {
            Some(devs.len())
        } else {
            r.device
                .as_ref()
                .and_then(|n| devs.iter().position(|d| d.name() == n))
        };
        if let Some(i) = slot {
            dmds[i].model += r.model as i64;
            dmds[i].context += r.context as i64;
            dmds[i].compute += r.compute as i64;
        }
    }
    let cpu = ggml::backend::devices()
        .into_iter()
        .find(|d| d.kind() == DeviceKind::Cpu)
        .ok_or_else(|| FitError::Other("no CPU backend found".into()))?;
    let (free, total) = cpu.memory();
    let host = devs.len();
    dmds[host].free = free as i64;
    dmds[host].total = total as i64;
    for (i, d) in devs.iter().enumerate() {
        let (mut free, mut total) = d.memory();
        if free == 0 && total == 0 {
            if matches!(d.kind(), DeviceKind::Gpu | DeviceKind::IGpu) {
                crate::log_wrn!(
                    "common_get_device_memory_data_impl: device {} did not report memory; --fit will not use it\n",
                    d.name()
                );
            } else {
                (free, total) = (dmds[host].free as usize, dmds[host].total as usize);
            }
        }
        dmds[i].free = free as i64;
        dmds[i].total = total as i64;
    }
    let names = devs
        .iter()
        .map(|d| format!("{} ({})", d.name(), d.description()))
        .collect();
    super::memory_breakdown_print(&ctx);
    Ok(Measured {
        dmds,
        names,
        n_layer: model.n_layer(),
        n_ctx_train: model.n_ctx_train(),
        n_expert: model.hparams().n_expert,
    })
}

/// llama.cpp's LAYER_FRACTION_MOE, the overflow type of every partial layer of step 3: all of
/// the layer but its sparse MoE weights stays on the device.
const LAYER_FRACTION_MOE: i32 = 4;

/// ngl_t: a device's layers, the last n_part of them partial (LAYER_FRACTION_MOE).
#[derive(Clone, Copy, Default)]
struct Ngl {
    n_layer: u32,
    n_part: u32,
}

impl Ngl {
    fn n_full(&self) -> u32 {
        self.n_layer - self.n_part
    }
}

/// The MoE weights of layer `il`, which a partial layer leaves in host memory.
fn moe_pattern(il: u32) -> String {
    format!("blk\\.{il}\\.ffn_(up|down|gate_up|gate)_(ch|)exps")
}

/// set_ngl_tensor_split_tbo: the placement that gives each device its layers.
fn placement(ngls: &[Ngl], n_layer: u32) -> Placement {
    let nd = ngls.len();
    let n_gpu_layers: u32 = ngls.iter().map(|n| n.n_layer).sum();
    let tensor_split = if nd > 1 {
        ngls.iter().map(|n| n.n_layer as f32).collect()
    } else {
        Vec::new()
    };
    let mut overrides = Vec::new();
    let mut il0 = n_layer + 1 - n_gpu_layers.min(n_layer + 1);
    for n in ngls {
        il0 += n.n_full();
        for il in il0..il0 + n.n_part {
            overrides.push((moe_pattern(il), "CPU".to_string()));
        }
        il0 += n.n_part;
    }
    Placement {
        n_gpu_layers: n_gpu_layers as i32,
        tensor_split,
        overrides,
    }
}

struct Fitter<'a> {
    path: &'a Path,
    mparams: &'a ModelParams,
}

impl Fitter<'_> {
    /// get_memory_for_layers: the memory each device would use with `ngls`.
    fn memory_for_layers(
        &self,
        cparams: &ContextParams,
        ngls: &[Ngl],
        n_layer: u32,
    ) -> Result<Vec<i64>, FitError> {
        let m = measure(self.path, self.mparams, cparams, &placement(ngls, n_layer))?;
        crate::log_trc!("{F}: memory for test allocation by device:\n");
        for (id, n) in ngls.iter().enumerate() {
            crate::log_trc!(
                "{F}: id={id}, n_layer={:2}, n_part={:2}, overflow_type={}, mem={:6} MiB\n",
                n.n_layer,
                n.n_part,
                LAYER_FRACTION_MOE,
                m.dmds[id].used() / MIB
            );
        }
        Ok(m.dmds[..ngls.len()].iter().map(Dmd::used).collect())
    }
}

fn fit_impl(
    p: &Params,
    mparams: &mut ModelParams,
    cparams: &mut ContextParams,
) -> Result<(), FitError> {
    if mparams.split_mode == llama::SplitMode::Tensor {
        return Err(FitError::Fit(
            "llama_params_fit is not implemented for SPLIT_MODE_TENSOR, abort".into(),
        ));
    }
    let path = Path::new(&p.model);
    let user = Placement {
        n_gpu_layers: mparams.n_gpu_layers,
        tensor_split: mparams.tensor_split.clone(),
        overrides: mparams.tensor_buft_overrides.clone(),
    };
    let n_streams = if cparams.kv_unified {
        1
    } else {
        cparams.n_seq_max.max(1)
    };
    let n_ctx_auto = cparams.n_ctx == 0;

    // step 1: the memory of the initial parameters, and whether anything must change
    crate::log_trc!("{F}: getting device memory data for initial parameters:\n");
    let mut full = measure(path, mparams, cparams, &user)?;
    let n_ctx_min = p.fit_params_min_ctx.max(0) as u32;
    let n_ctx_max = (full.n_ctx_train as u64 * n_streams as u64).min(u32::MAX as u64) as u32;
    let n_ctx_min_total = (n_ctx_min as u64 * n_streams as u64).min(u32::MAX as u64) as u32;
    if n_ctx_auto {
        cparams.n_ctx = n_ctx_max;
        if n_streams > 1 {
            crate::log_trc!(
                "{F}: context size unset and KV cache not unified -> using {n_ctx_max} for {n_streams} sequences:\n"
            );
            full = measure(path, mparams, cparams, &user)?;
        }
    }
    let nd = full.dmds.len() - 1;
    let margin_of = |id: usize| -> i64 {
        let t = &p.fit_params_target;
        let mib = t.get(id).or(t.last()).copied().unwrap_or(1024);
        mib as i64 * MIB
    };
    let margins: Vec<i64> = (0..nd.max(1)).map(margin_of).collect();
    let width = full.names.iter().map(String::len).max().unwrap_or(0);
    let names: Vec<String> = full.names.iter().map(|n| format!("{n:width$}")).collect();

    let (mut sum_free, mut sum_projected_free, mut sum_projected_used, mut sum_model) =
        (0i64, 0i64, 0i64, 0i64);
    if nd == 0 {
        let host = full.dmds[0];
        sum_projected_used = host.used();
        sum_free = host.total;
        sum_projected_free = sum_free - sum_projected_used;
        crate::log_trc!(
            "{F}: projected to use {} MiB of host memory vs. {} MiB of total host memory\n",
            sum_projected_used / MIB,
            sum_free / MIB
        );
        if sum_projected_free >= margins[0] {
            crate::log_trc!(
                "{F}: will leave {} >= {} MiB of system memory, no changes needed\n",
                sum_projected_free / MIB,
                margins[0] / MIB
            );
            return Ok(());
        }
    } else {
        if nd > 1 {
            crate::log_trc!("{F}: projected memory use with initial parameters [MiB]:\n");
        }
        let mut projected_free = Vec::with_capacity(nd);
        for id in 0..nd {
            let d = full.dmds[id];
            let used = d.used();
            projected_free.push(d.free - used);
            sum_free += d.free;
            sum_projected_used += used;
            sum_projected_free += d.free - used;
            sum_model += d.model;
            if nd > 1 {
                crate::log_trc!(
                    "{F}:   - {}: {:6} total, {:6} used, {:6} free vs. target of {:6}\n",
                    names[id],
                    d.total / MIB,
                    used / MIB,
                    (d.free - used) / MIB,
                    margins[id] / MIB
                );
            }
        }
        crate::log_trc!(
            "{F}: projected to use {} MiB of device memory vs. {} MiB of free device memory\n",
            sum_projected_used / MIB,
            sum_free / MIB
        );
        if nd == 1 {
            if projected_free[0] >= margins[0] {
                crate::log_trc!(
                    "{F}: will leave {} >= {} MiB of free device memory, no changes needed\n",
                    projected_free[0] / MIB,
                    margins[0] / MIB
                );
                return Ok(());
            }
        } else if (0..nd).all(|id| projected_free[id] >= margins[id]) {
            crate::log_trc!(
                "{F}: targets for free memory can be met on all devices, no changes needed\n"
            );
            return Ok(());
        }
    }

    // step 2: a smaller context, when the user left its size to us
    let global_surplus = sum_projected_free - margins.iter().sum::<i64>();
    if global_surplus < 0 {
        if nd <= 1 {
            crate::log_trc!(
                "{F}: cannot meet free memory target of {} MiB, need to reduce device memory by {} MiB\n",
                margins[0] / MIB,
                -global_surplus / MIB
            );
        } else {
            crate::log_trc!(
                "{F}: cannot meet free memory targets on all devices, need to use {} MiB less in total\n",
                -global_surplus / MIB
            );
        }
        if !n_ctx_auto {
            crate::log_trc!(
                "{F}: context size set by user to {} -> no change\n",
                cparams.n_ctx
            );
        } else if n_ctx_max <= n_ctx_min_total {
            if n_ctx_min == u32::MAX {
                crate::log_trc!(
                    "{F}: user has requested full context size of {n_ctx_max} -> no change\n"
                );
            } else {
                crate::log_trc!(
                    "{F}: default model context size is {n_ctx_max} which is <= the min. context size of {n_ctx_min_total} -> no change\n"
                );
            }
        } else {
            let mut sum_used_target = sum_free - margins.iter().sum::<i64>();
            if nd > 1 {
                // only whole layers (dense) or tensors (MoE, <= 1/3 layer) move: expect waste
                let ngl = (mparams.n_gpu_layers as u32).min(full.n_layer).max(1) as i64;
                let per_layer = sum_model / ngl;
                sum_used_target -=
                    (nd as i64 + 1) * per_layer / if full.n_expert == 0 { 2 } else { 6 };
            }
            cparams.n_ctx = n_ctx_min_total;
            let min_ctx = measure(path, mparams, cparams, &user)?;
            let used_min: i64 = if nd == 0 {
                min_ctx.dmds[0].used()
            } else {
                min_ctx.dmds[..nd].iter().map(Dmd::used).sum()
            };
            if sum_used_target > used_min {
                let span = (n_ctx_max - n_ctx_min_total) as i64;
                let add = span * (sum_used_target - used_min) / (sum_projected_used - used_min);
                cparams.n_ctx = (cparams.n_ctx as i64 + add) as u32;
                let align = 256 * n_streams;
                cparams.n_ctx = (cparams.n_ctx - cparams.n_ctx % align).max(n_ctx_min_total);
                let per_ctx = (sum_projected_used - used_min) / span;
                let reduction = (n_ctx_max - cparams.n_ctx) as i64 * per_ctx;
                crate::log_trc!(
                    "{F}: context size reduced from {n_ctx_max} to {} -> need {} MiB less memory in total\n",
                    cparams.n_ctx,
                    reduction / MIB
                );
                if nd <= 1 {
                    crate::log_trc!("{F}: entire model can be fit by reducing context\n");
                    return Ok(());
                }
                crate::log_trc!(
                    "{F}: entire model should be fit across devices by reducing context\n"
                );
            } else {
                crate::log_trc!(
                    "{F}: context size reduced from {n_ctx_max} to {} -> need {} MiB less memory in total\n",
                    cparams.n_ctx,
                    (sum_projected_used - used_min) / MIB
                );
            }
        }
    }
    if nd == 0 {
        return Err(FitError::Fit(
            "was unable to fit model into system memory by reducing context, abort".into(),
        ));
    }
    if mparams.n_gpu_layers != ModelParams::default().n_gpu_layers {
        return Err(FitError::Fit(format!(
            "n_gpu_layers already set by user to {}, abort",
            mparams.n_gpu_layers
        )));
    }
    if nd > 1 {
        if mparams.tensor_split.iter().any(|&v| v != 0.0) {
            return Err(FitError::Fit(
                "model_params::tensor_split already set by user, abort".into(),
            ));
        }
        if mparams.split_mode == llama::SplitMode::Row {
            return Err(FitError::Fit(
                "changing weight allocation for LLAMA_SPLIT_MODE_ROW not implemented, abort".into(),
            ));
        }
    }
    if !mparams.tensor_buft_overrides.is_empty() {
        return Err(FitError::Fit(
            "model_params::tensor_buft_overrides already set by user, abort".into(),
        ));
    }

    // step 3: fill the devices back to front with whole ("dense") layers; a MoE model keeps
    // its expert weights in host memory for now
    let hp_ngl = full.n_layer;
    let hp_nex = full.n_expert;
    let fitter = Fitter { path, mparams };
    if hp_nex > 0 {
        let all_moe = Placement {
            n_gpu_layers: mparams.n_gpu_layers,
            tensor_split: mparams.tensor_split.clone(),
            overrides: vec![(
                "blk\\.\\d+\\.ffn_(up|down|gate_up|gate)_(ch|)exps".to_string(),
                "CPU".to_string(),
            )],
        };
        crate::log_trc!(
            "{F}: getting device memory data with all MoE tensors moved to system memory:\n"
        );
        let cpu_moe = measure(path, mparams, cparams, &all_moe)?;
        let surplus: i64 = (0..nd)
            .map(|id| cpu_moe.dmds[id].free - cpu_moe.dmds[id].used() - margins[id])
            .sum();
        if surplus > 0 {
            crate::log_trc!(
                "{F}: with only dense weights in device memory there is a total surplus of {} MiB\n",
                surplus / MIB
            );
        } else {
            crate::log_trc!(
                "{F}: with only dense weights in device memory there is still a total deficit of {} MiB\n",
                -surplus / MIB
            );
        }
    }
    let targets: Vec<i64> = (0..nd).map(|id| full.dmds[id].free - margins[id]).collect();
    for (id, t) in targets.iter().enumerate() {
        crate::log_trc!("{F}: id={id}, target={} MiB\n", t / MIB);
    }
    let mut ngls = vec![Ngl::default(); nd];
    let mut mem = fitter.memory_for_layers(cparams, &ngls, hp_ngl)?;
    if hp_nex == 0 {
        crate::log_trc!("{F}: filling dense layers back-to-front:\n");
    } else {
        crate::log_trc!("{F}: filling dense-only layers back-to-front:\n");
    }
    for id in (0..nd).rev() {
        let n_unassigned = hp_ngl + 1 - ngls[id + 1..].iter().map(|n| n.n_layer).sum::<u32>();
        let mut high = ngls.clone();
        high[id].n_layer = n_unassigned;
        if hp_nex > 0 {
            high[id].n_part = if id < nd - 1 {
                high[id].n_layer
            } else {
                high[id].n_layer - 1
            };
        }
        if high[id].n_layer > 0 {
            let mut mem_high = fitter.memory_for_layers(cparams, &high, hp_ngl)?;
            if mem_high[id] > targets[id] {
                let mut delta = high[id].n_layer - ngls[id].n_layer;
                crate::log_trc!("{F}: start filling device {id}, delta={delta}\n");
                while delta > 1 {
                    let step =
                        (delta as i64 * (targets[id] - mem[id]) / (mem_high[id] - mem[id])) as u32;
                    let step = step.max(1).min(delta - 1);
                    let mut test = ngls.clone();
                    test[id].n_layer += step;
                    if hp_nex > 0 {
                        // the output layer, the first one filled, is always whole
                        test[id].n_part += if id == nd - 1 && test[id].n_part == 0 {
                            step - 1
                        } else {
                            step
                        };
                    }
                    let mem_test = fitter.memory_for_layers(cparams, &test, hp_ngl)?;
                    if mem_test[id] <= targets[id] {
                        ngls = test;
                        mem = mem_test;
                        crate::log_trc!(
                            "{F}: set ngl_per_device[{id}].n_layer={}\n",
                            ngls[id].n_layer
                        );
                    } else {
                        high = test;
                        mem_high = mem_test;
                        crate::log_trc!(
                            "{F}: set ngl_per_device_high[{id}].n_layer={}\n",
                            high[id].n_layer
                        );
                    }
                    delta = high[id].n_layer - ngls[id].n_layer;
                }
            } else {
                ngls = high;
                mem = mem_high;
                crate::log_trc!(
                    "{F}: set ngl_per_device[{id}].n_layer={}\n",
                    ngls[id].n_layer
                );
            }
        }
        crate::log_trc!(
            "{F}:   - {}: {:2} layers, {:6} MiB used, {:6} MiB free\n",
            names[id],
            ngls[id].n_layer,
            mem[id] / MIB,
            (full.dmds[id].free - mem[id]) / MIB
        );
    }
    if hp_nex > 0 && ngls.iter().any(|n| n.n_part > 0) {
        crate::log_wrn!(
            "{F}: converting dense-only layers to full layers (llama.cpp's step 4) is not implemented in this build: the expert weights of the partial layers stay in system memory\n"
        );
    }
    let pl = placement(&ngls, hp_ngl);
    mparams.n_gpu_layers = pl.n_gpu_layers;
    mparams.tensor_split = pl.tensor_split;
    mparams.tensor_buft_overrides = pl.overrides;
    Ok(())
}

/// `common_fit_params`: measure, and change the context size and GPU layers as llama.cpp does.
pub fn fit_params(p: &Params, mparams: &mut ModelParams, cparams: &mut ContextParams) {
    const G: &str = "common_fit_params";
    let t0 = Instant::now();
    let min = if p.verbosity >= VERBOSITY_DEBUG {
        LogLevel::Debug
    } else {
        LogLevel::Error
    };
    demote_library_logs(min);
    let result = fit_impl(p, mparams, cparams);
    crate::log::install_ggml_sink();
    match result {
        Ok(()) => {
            crate::log_trc!("{G}: successfully fit params to free device memory\n");
        }
        Err(FitError::Fit(e)) => {
            crate::log_wrn!("{G}: failed to fit params to free device memory: {e}\n");
        }
        Err(FitError::Other(e)) => {
            crate::log_err!(
                "{G}: encountered an error while trying to fit params to free device memory: {e}\n"
            );
        }
    }
    crate::log_trc!(
        "{G}: fitting params to free memory took {:.2} seconds\n",
        t0.elapsed().as_secs_f64()
    );
}
