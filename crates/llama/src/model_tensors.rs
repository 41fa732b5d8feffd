//! Creating the weight tensors (create_tensor): shape checks against the file, the device of
//! each layer, the buffer type each weight prefers (and the one it gets), `-ot` overrides,
//! then the buffers themselves and the data load.

use crate::error::{LlamaError, Result};
use crate::hparams::HParams;
use crate::loader::ModelLoader;
use crate::model::{Model, ModelParams};
use ggml::backend::{same_buft, BufferTypeRef, DeviceKind, DeviceRef};
use ggml::tensor::TensorData;
use ggml::{Context, Op, RopeParams, TensorId, Type};
use regex::Regex;
use std::sync::Arc;

/// The devices of the model: which one holds each layer, and the buffer types to try, best first.
#[derive(Default)]
pub struct Placement {
    pub devices: Vec<DeviceRef>,
    pub cpu: Option<DeviceRef>,
    /// n_layer entries
    pub dev_layer: Vec<DeviceRef>,
    pub dev_output: Option<DeviceRef>,
    pub cpu_buft_list: Vec<(DeviceRef, BufferTypeRef)>,
    pub gpu_buft_lists: Vec<Vec<(DeviceRef, BufferTypeRef)>>,
}

/// Which part of the model a weight belongs to (its device and buffer list).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerKind {
    Input,
    Output,
    Repeating(usize),
}

pub const REQUIRED: u32 = 0;
pub const NOT_REQUIRED: u32 = 1;
pub const DUPLICATED: u32 = 2;
/// TENSOR_SKIP: the tensor is checked (present unless NOT_REQUIRED, its shape) and counted,
/// but not loaded: the NextN/MTP layers, which no graph here runs.
pub const SKIP: u32 = 4;

struct Created {
    id: TensorId,
    shard: usize,
    file_offset: u64,
    size: u64,
    buft: BufferTypeRef,
    dev: DeviceRef,
}

pub struct TensorCreator<'a> {
    ml: &'a ModelLoader,
    hp: &'a HParams,
    ctx: Context,
    created: Vec<Created>,
    names: Vec<String>,
    overrides: Vec<(Regex, BufferTypeRef)>,
    /// The first tensor placed off the head of its buffer-type list: (preferred buft name,
    /// used buft name, tensor name, type, how many others); at most one entry
    fallbacks: Vec<(String, String, String, Type, usize)>,
    placement: Placement,
    /// Only names and shapes are checked (`check_only`): no device, no buffer choice.
    check_only: bool,
    /// the weights are read from a memory map (llama.cpp's use_mmap)
    mmap: bool,
    /// (n_gpu_layers, n_layer) for the offload lines, where any GPU takes layers
    offload_summary: Option<(i32, i32)>,
}

/// llama.cpp prints its warning about CPU overrides with mmap once per process.
static WARNED_CPU_OVERRIDE: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

fn fmt_shape(ne: &[i64]) -> String {
    ne.iter()
        .map(|n| format!("{n:5}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every buffer type the registered devices offer, by name (for -ot).
fn all_bufts(devices: &[DeviceRef]) -> Vec<BufferTypeRef> {
    let mut out: Vec<BufferTypeRef> = Vec::new();
    for d in devices {
        let mut list = vec![d.buffer_type()];
        list.extend(d.host_buffer_type());
        list.extend(d.extra_buffer_types());
        for b in list {
            if !out.iter().any(|o| same_buft(o, &b)) {
                out.push(b);
            }
        }
    }
    out
}

fn select_devices(params: &ModelParams) -> Result<Vec<DeviceRef>> {
    let all = ggml::backend::devices();
    if all.is_empty() {
        return Err(LlamaError::NoDevice(
            "no backend is registered (call llama::backend_init() first)".into(),
        ));
    }
    let Some(names) = &params.devices else {
        return Ok(all);
    };
    let mut out = Vec::new();
    for n in names {
        match all.iter().find(|d| d.name().eq_ignore_ascii_case(n)) {
            Some(d) => out.push(d.clone()),
            None => return Err(LlamaError::NoDevice(format!("invalid device: {n}"))),
        }
    }
    // the CPU is always available for the input layer and the fallback
    if !out.iter().any(|d| d.kind() == DeviceKind::Cpu) {
        out.extend(all.iter().filter(|d| d.kind() == DeviceKind::Cpu).cloned());
    }
    Ok(out)
}

/// llama_prepare_model_devices' account of the devices behind the meta device: those named by
/// -dev, or every device but the CPU-memory ones.
fn log_meta_members(params: &ModelParams, devices: &[DeviceRef], gpus: &[DeviceRef]) {
    const F: &str = "llama_prepare_model_devices";
    if gpus.is_empty() {
        return;
    }
    if params.devices.is_some() {
        ggml::log_info!("{F}: creating a Meta device with {} devices\n", gpus.len());
        for (i, d) in gpus.iter().enumerate() {
            ggml::log_info!("{F}: - device {i}: {}\n", d.name());
        }
        return;
    }
    for d in devices.iter().filter(|d| d.kind() == DeviceKind::Cpu) {
        ggml::log_info!(
            "{F}: skipping {} ({}) for tensor parallelism\n",
            d.name(),
            d.description()
        );
    }
    ggml::log_info!(
        "{F}: creating a Meta device for tensor parallelism from {} devices:\n",
        gpus.len()
    );
    for (i, d) in gpus.iter().enumerate() {
        ggml::log_info!("{F}: - device {i}: {} ({})\n", d.name(), d.description());
    }
}

/// The meta device over the selected GPUs, its weights split by libllama's table with `-ts`
/// as the proportions.
pub(crate) fn meta_over(
    ml: &ModelLoader,
    hp: &HParams,
    params: &ModelParams,
    gpus: &[DeviceRef],
) -> Result<DeviceRef> {
    if gpus.is_empty() {
        let why = "split mode 'tensor' needs at least one GPU device (none is selected)";
        ggml::log_error!("llama_model_load: error loading model: {}\n", why);
        return Err(LlamaError::BadParams(why.into()));
    }
    let types = ml.all_tensors().map(|t| (t.name.clone(), t.ty)).collect();
    let split = crate::meta_split::MetaSplit::new(gpus.len(), &params.tensor_split, hp, types);
    let meta = ggml::meta::meta_device(gpus.to_vec(), split.into_fn());
    Ok(meta)
}

/// llama_prepare_model_devices: the CPU, every device the model may use, and the GPUs its layers
/// go to (-dev, -sm none with -mg); with -sm tensor these GPUs are what the meta device spans.
pub(crate) fn placement_devices(params: &ModelParams) -> Result<PlacementDevices> {
    let devices = select_devices(params)?;
    let cpu = devices
        .iter()
        .find(|d| d.kind() == DeviceKind::Cpu)
        .cloned()
        .ok_or_else(|| LlamaError::NoDevice("no CPU device".into()))?;
    let mut gpus: Vec<DeviceRef> = devices
        .iter()
        .filter(|d| matches!(d.kind(), DeviceKind::Gpu | DeviceKind::IGpu))
        .cloned()
        .collect();
    // -sm none: everything on the main GPU (a negative main GPU: none at all)
    if params.split_mode == crate::model::SplitMode::None && !gpus.is_empty() {
        if params.main_gpu < 0 {
            gpus.clear();
        } else if params.main_gpu as usize >= gpus.len() {
            ggml::log_error!(
                "llama_model_load_from_file_impl: invalid value for main_gpu: {} (available devices: {})\n",
                params.main_gpu,
                gpus.len()
            );
            return Err(LlamaError::BadParams(format!(
                "invalid value for main_gpu: {} (available devices: {})",
                params.main_gpu,
                gpus.len()
            )));
        } else {
            gpus = vec![gpus[params.main_gpu as usize].clone()];
        }
    }
    let devices: Vec<DeviceRef> = devices
        .into_iter()
        .filter(|d| {
            !matches!(d.kind(), DeviceKind::Gpu | DeviceKind::IGpu)
                || gpus
                    .iter()
                    .any(|g| std::ptr::addr_eq(Arc::as_ptr(g), Arc::as_ptr(d)))
        })
        .collect();
    Ok(PlacementDevices { cpu, devices, gpus })
}

/// What llama_prepare_model_devices chose: found once, logged before the vocabulary is read,
/// then used to place the tensors.
pub(crate) struct PlacementDevices {
    cpu: DeviceRef,
    devices: Vec<DeviceRef>,
    gpus: Vec<DeviceRef>,
}

/// The device lines llama_prepare_model_devices prints before the vocabulary is read: the
/// members of a meta device, then each device the layers use with its free memory.
pub(crate) fn log_devices(params: &ModelParams, chosen: &PlacementDevices) {
    let (devices, gpus) = (&chosen.devices, &chosen.gpus);
    let line = |name: &str, desc: &str, free: usize| {
        ggml::log_info!(
            "llama_prepare_model_devices: using device {} ({}) (unknown id) - {} MiB free\n",
            name,
            desc,
            free / 1024 / 1024
        );
    };
    if params.split_mode == crate::model::SplitMode::Tensor {
        if gpus.is_empty() {
            return;
        }
        log_meta_members(params, devices, gpus);
        let (name, desc) = ggml::meta::meta_names(gpus);
        let free: usize = gpus.iter().map(|d| d.memory().0).sum();
        line(&name, &desc, free);
        return;
    }
    for d in gpus {
        line(d.name(), d.description(), d.memory().0);
    }
}

impl<'a> TensorCreator<'a> {
    pub fn new(
        ml: &'a ModelLoader,
        hp: &'a HParams,
        params: &ModelParams,
        chosen: PlacementDevices,
    ) -> Result<TensorCreator<'a>> {
        let PlacementDevices {
            cpu,
            devices,
            mut gpus,
        } = chosen;
        // -sm tensor: the GPUs become one meta device that holds a slice of every layer
        let devices = if params.split_mode == crate::model::SplitMode::Tensor {
            let meta = meta_over(ml, hp, params, &gpus)?;
            gpus = vec![meta.clone()];
            devices
                .into_iter()
                .filter(|d| !matches!(d.kind(), DeviceKind::Gpu | DeviceKind::IGpu))
                .chain(std::iter::once(meta))
                .collect()
        } else {
            devices
        };

        // make_cpu_buft_list: accelerators, a GPU's pinned host memory, the CPU's extras, the CPU
        let mut cpu_list: Vec<(DeviceRef, BufferTypeRef)> = Vec::new();
        for d in devices.iter().filter(|d| d.kind() == DeviceKind::Accel) {
            cpu_list.push((d.clone(), d.buffer_type()));
        }
        if let Some((d, b)) = gpus
            .iter()
            .find_map(|d| d.host_buffer_type().map(|b| (d.clone(), b)))
        {
            cpu_list.push((d, b));
        }
        if params.use_extra_bufts {
            for b in cpu.extra_buffer_types() {
                cpu_list.push((cpu.clone(), b));
            }
        }
        cpu_list.push((cpu.clone(), cpu.buffer_type()));

        let gpu_buft_lists: Vec<Vec<(DeviceRef, BufferTypeRef)>> = gpus
            .iter()
            .map(|d| {
                let mut l = vec![(d.clone(), d.buffer_type())];
                l.extend(cpu_list.iter().cloned());
                l
            })
            .collect();

        // layer placement: the last n_gpu_layers layers (the output layer counted) go to the
        // GPUs; the NextN layers count, as llama.cpp places over n_layer_all
        let n_layer = hp.n_layer_all() as i32;
        let n_gpu_layers = if params.n_gpu_layers >= 0 {
            params.n_gpu_layers
        } else {
            n_layer + 1
        };
        let i_gpu_start = (n_layer + 1 - n_gpu_layers).max(0);
        let act_gpu_layers = if gpus.is_empty() {
            0
        } else {
            n_gpu_layers.min(n_layer + 1)
        };
        let mut splits: Vec<f32> = if params
            .tensor_split
            .iter()
            .take(gpus.len())
            .all(|&x| x == 0.0)
        {
            gpus.iter().map(|d| d.memory().0 as f32).collect()
        } else {
            (0..gpus.len())
                .map(|i| params.tensor_split.get(i).copied().unwrap_or(0.0))
                .collect()
        };
        let mut sum = 0.0f32;
        for s in splits.iter_mut() {
            sum += *s;
            *s = sum;
        }
        if sum > 0.0 {
            for s in splits.iter_mut() {
                *s /= sum;
            }
        }
        let layer_dev = |il: i32| -> (DeviceRef, usize) {
            if il < i_gpu_start || (il - i_gpu_start) >= act_gpu_layers {
                ggml::log_debug!(
                    "load_tensors: layer {:3} assigned to device {}, is_swa = 0\n",
                    il,
                    cpu.name()
                );
                return (cpu.clone(), usize::MAX);
            }
            let x = (il - i_gpu_start) as f32 / act_gpu_layers as f32;
            let idx = splits.iter().position(|&s| s > x).unwrap_or(gpus.len() - 1);
            ggml::log_debug!(
                "load_tensors: layer {:3} assigned to device {}, is_swa = 0\n",
                il,
                gpus[idx].name()
            );
            (gpus[idx].clone(), idx)
        };
        let mut dev_layer: Vec<DeviceRef> = (0..=n_layer).map(|il| layer_dev(il).0).collect();
        let dev_output = dev_layer.pop();
        // printed after done_getting_tensors, as load_tensors does
        let offload_summary = (!gpus.is_empty()).then_some((n_gpu_layers, n_layer));

        let known = all_bufts(&devices);
        let mut overrides = Vec::new();
        for (pattern, buft_name) in &params.tensor_buft_overrides {
            let re = Regex::new(pattern).map_err(|e| LlamaError::BadOverride {
                pattern: pattern.clone(),
                why: regex_error_line(&e),
            })?;
            let buft = known
                .iter()
                .find(|b| b.name() == buft_name)
                .cloned()
                .ok_or_else(|| LlamaError::UnknownBufferType(buft_name.clone()))?;
            overrides.push((re, buft));
        }

        Ok(TensorCreator {
            ml,
            hp,
            ctx: Context::new(),
            created: Vec::new(),
            names: Vec::new(),
            overrides,
            fallbacks: Vec::new(),
            placement: Placement {
                devices,
                cpu: Some(cpu),
                dev_layer,
                dev_output,
                cpu_buft_list: cpu_list,
                gpu_buft_lists,
            },
            check_only: false,
            mmap: !params.no_alloc && !params.vocab_only && params.load_mode.resolve().uses_mmap(),
            offload_summary,
        })
    }

    /// A creator that checks the file's tensors against the architecture's list (names,
    /// shapes, count) and nothing else, for a model that is not loaded (llama-quantize's check
    /// of what it writes, `model_check`). `finish` is not for it: use `check_count`.
    pub(crate) fn check_only(ml: &'a ModelLoader, hp: &'a HParams) -> TensorCreator<'a> {
        TensorCreator {
            ml,
            hp,
            ctx: Context::new(),
            created: Vec::new(),
            names: Vec::new(),
            overrides: Vec::new(),
            fallbacks: Vec::new(),
            placement: Placement::default(),
            check_only: true,
            mmap: false,
            offload_summary: None,
        }
    }

    /// done_getting_tensors' count check: every tensor of the file was asked for.
    pub(crate) fn check_count(&self) -> Result<()> {
        let n_file = self.ml.n_tensors();
        if self.names.len() != n_file {
            return Err(LlamaError::TensorCount {
                expected: n_file,
                got: self.names.len(),
            });
        }
        Ok(())
    }

    fn buft_list(&self, kind: LayerKind) -> (DeviceRef, Vec<(DeviceRef, BufferTypeRef)>) {
        let cpu = self.placement.cpu.clone().expect("cpu device");
        let dev = match kind {
            LayerKind::Input => return (cpu, self.placement.cpu_buft_list.clone()),
            LayerKind::Output => self.placement.dev_output.clone().unwrap_or(cpu.clone()),
            LayerKind::Repeating(il) => self
                .placement
                .dev_layer
                .get(il)
                .cloned()
                .unwrap_or(cpu.clone()),
        };
        let gpu = self
            .placement
            .devices
            .iter()
            .filter(|d| matches!(d.kind(), DeviceKind::Gpu | DeviceKind::IGpu));
        match gpu
            .enumerate()
            .find(|(_, d)| std::ptr::addr_eq(Arc::as_ptr(d), Arc::as_ptr(&dev)))
        {
            Some((i, _)) => (dev, self.placement.gpu_buft_lists[i].clone()),
            None => (dev, self.placement.cpu_buft_list.clone()),
        }
    }

    /// weight_buft_supported: can `dev` run the op this weight is used in, with the weight in `buft`?
    fn weight_supported(
        &self,
        dev: &DeviceRef,
        buft: &BufferTypeRef,
        ty: Type,
        ne: [i64; 4],
        op: Op,
    ) -> bool {
        // no supports_buft check, as weight_buft_supported: a GPU's pinned host memory is in
        // the CPU's list under that GPU, which may well run the op on weights held there
        let Ok(dummy) = buft.clone().alloc_buffer(0) else {
            return false;
        };
        let mut c = Context::new();
        let w = c.new_tensor(ty, &ne);
        c[w].data = Some(TensorData {
            buffer: dummy.clone(),
            addr: dummy.base(),
        });
        let n = 512;
        let node = match op {
            Op::GetRows => {
                let b = c.new_tensor_1d(Type::I32, n);
                c.get_rows(w, b)
            }
            Op::MulMat { .. } => {
                let b = c.new_tensor_4d(Type::F32, ne[0], n, ne[2], ne[3]);
                c.mul_mat(w, b)
            }
            Op::MulMatId => {
                let used = (self.hp.n_expert_used as i64).max(1);
                let b = c.new_tensor_3d(Type::F32, ne[0], used, n);
                let ids = c.new_tensor_2d(Type::I32, used, n);
                c.mul_mat_id(w, b, ids)
            }
            Op::Mul => {
                let a = c.new_tensor_4d(Type::F32, ne[0], n, ne[2], ne[3]);
                c.mul(a, w)
            }
            Op::Add => {
                let a = c.new_tensor_4d(Type::F32, ne[0], n, ne[2], ne[3]);
                c.add(a, w)
            }
            Op::Rope(_) => {
                let head = self.hp.n_embd_head_k as i64;
                let a = c.new_tensor_3d(Type::F32, head, self.hp.n_head(0) as i64, n);
                let b = c.new_tensor_1d(Type::I32, n);
                let p = RopeParams {
                    n_dims: self.hp.n_rot as i32,
                    ..Default::default()
                };
                c.rope_ext(a, b, Some(w), p)
            }
            // other ops read their weights by address: plain memory only (not an extra
            // buffer type such as CPU_REPACK, whose layout only its matmuls know)
            _ => {
                return !dev
                    .extra_buffer_types()
                    .iter()
                    .any(|b| ggml::backend::same_buft(b, buft))
            }
        };
        dev.supports_op(&c, node)
    }

    /// create_tensor: None for an absent optional tensor.
    pub fn create(
        &mut self,
        name: &str,
        dims: &[i64],
        flags: u32,
        kind: LayerKind,
        op: Op,
    ) -> Result<Option<TensorId>> {
        ggml::log_debug!("create_tensor: loading tensor {}\n", name);
        let Some((shard, info)) = self.ml.tensor_in_shard(name) else {
            if flags & NOT_REQUIRED != 0 {
                return Ok(None);
            }
            return Err(LlamaError::MissingTensor(name.to_string()));
        };
        if flags & DUPLICATED != 0 {
            if let Some(i) = self.names.iter().position(|n| n == name) {
                // a check-only creator keeps no tensors to share: the second use is not needed
                return Ok(self.created.get(i).map(|c| c.id));
            }
        }
        let got: [i64; 4] = [
            info.ne[0] as i64,
            info.ne[1] as i64,
            info.ne[2] as i64,
            info.ne[3] as i64,
        ];
        let ok = got
            .iter()
            .enumerate()
            .all(|(i, &g)| g == dims.get(i).copied().unwrap_or(1));
        if !ok {
            return Err(LlamaError::WrongShape {
                name: name.to_string(),
                expected: fmt_shape(dims),
                got: fmt_shape(&got),
            });
        }
        if info.size == 0 && got.iter().product::<i64>() != 0 {
            return Err(LlamaError::TensorOutOfBounds {
                name: name.to_string(),
            });
        }

        if self.check_only {
            let id = self
                .ctx
                .new_tensor(info.ty, &got[..(info.n_dims.max(1) as usize).min(4)]);
            self.names.push(name.to_string());
            return Ok(Some(id));
        }
        // skipped (after the check-only creator above, llama-quantize's, which takes them as
        // any other tensor: llama.cpp quantizes with load_mtp on)
        if flags & SKIP != 0 {
            ggml::log_warn!(
                "model has unused tensor {} (size = {} bytes) -- ignoring\n",
                name,
                info.size
            );
            self.names.push(name.to_string());
            return Ok(None);
        }
        let (dev, list) = self.buft_list(kind);
        let mut chosen: Option<(DeviceRef, BufferTypeRef)> = None;
        let cpu = self.placement.cpu.clone().expect("cpu device");
        for (re, buft) in &self.overrides {
            if re.is_match(name) {
                let to_cpu = same_buft(buft, &cpu.buffer_type());
                let pick = if to_cpu {
                    // an override to the CPU (-cmoe, -ncmoe) takes the CPU's list: a GPU's
                    // host memory or the CPU's extra buffer types when they hold the weight
                    let once = std::sync::atomic::Ordering::Relaxed;
                    if self.mmap && !WARNED_CPU_OVERRIDE.swap(true, once) {
                        ggml::log_warn!("llama_model_loader: tensor overrides to CPU are used with mmap enabled - consider using --load-mode none for better performance\n");
                    }
                    self.placement
                        .cpu_buft_list
                        .iter()
                        .find(|(d, b)| self.weight_supported(d, b, info.ty, got, op))
                        .cloned()
                        .unwrap_or((cpu.clone(), buft.clone()))
                } else {
                    let owner = self
                        .placement
                        .devices
                        .iter()
                        .find(|d| d.supports_buft(buft))
                        .cloned()
                        .unwrap_or(dev.clone());
                    (owner, buft.clone())
                };
                ggml::log_debug!(
                    "tensor {} ({} MiB {}) buffer type overridden to {}\n",
                    name,
                    info.size / 1024 / 1024,
                    info.ty.name(),
                    pick.1.name()
                );
                chosen = Some(pick);
                break;
            }
        }
        let chosen = match chosen {
            Some(c) => c,
            None => {
                let found = list
                    .iter()
                    .find(|(d, b)| self.weight_supported(d, b, info.ty, got, op))
                    .cloned();
                let Some(found) = found else {
                    return Err(LlamaError::Unsupported(format!(
                        "no suitable buffer type found for tensor {name}"
                    )));
                };
                found
            }
        };
        // a GPU's host memory gains nothing over the mapped file (llama.cpp: "avoid using a
        // host buffer when using mmap")
        let chosen = match chosen.0.host_buffer_type() {
            Some(h) if self.mmap && same_buft(&h, &chosen.1) => (cpu.clone(), cpu.buffer_type()),
            _ => chosen,
        };
        // llama.cpp counts every tensor that did not get the head of its list, overrides
        // included, and names the first
        let preferred = &list[0].1;
        if !same_buft(preferred, &chosen.1) {
            match self.fallbacks.first_mut() {
                Some(f) => f.4 += 1,
                None => self.fallbacks.push((
                    preferred.name().to_string(),
                    chosen.1.name().to_string(),
                    name.to_string(),
                    info.ty,
                    0,
                )),
            }
        }

        let id = self
            .ctx
            .new_tensor(info.ty, &got[..(info.n_dims.max(1) as usize).min(4)]);
        self.ctx.set_name(id, name);
        self.created.push(Created {
            id,
            shard,
            file_offset: info.offset,
            size: info.size,
            buft: chosen.1,
            dev: chosen.0,
        });
        self.names.push(name.to_string());
        Ok(Some(id))
    }

    /// Whether the file holds a tensor of this name (for an architecture whose layout the file
    /// decides, as llama's dense or expert feed-forward).
    pub fn has(&self, name: &str) -> bool {
        self.ml.tensor_in_shard(name).is_some()
    }

    pub fn require(
        &mut self,
        name: &str,
        dims: &[i64],
        kind: LayerKind,
        op: Op,
    ) -> Result<TensorId> {
        self.create(name, dims, REQUIRED, kind, op)?
            .ok_or_else(|| LlamaError::MissingTensor(name.to_string()))
    }

    /// done_getting_tensors, then the buffers and the data.
    pub fn finish(self, model: &mut Model, params: &mut ModelParams) -> Result<()> {
        self.check_count()?;
        for (pref, used, first, ty, others) in &self.fallbacks {
            ggml::log_debug!(
                "done_getting_tensors: tensor '{}' ({}) (and {} others) cannot be used with preferred buffer type {}, using {} instead\n",
                first,
                ty.name(),
                others,
                pref,
                used
            );
        }
        if let Some((n_gpu_layers, n_layer)) = self.offload_summary {
            // the pinned llama.cpp counts the output layer into min(ngl, n_layer) for this
            // line: -ngl 99 on 4 layers says "output layer" and "3 repeating layers"
            let mut n_repeating = n_gpu_layers.min(n_layer);
            if n_repeating > 0 {
                ggml::log_info!("load_tensors: offloading output layer to GPU\n");
                n_repeating -= 1;
            }
            ggml::log_info!(
                "load_tensors: offloading {} repeating layers to GPU\n",
                n_repeating
            );
            ggml::log_info!(
                "load_tensors: offloaded {}/{} layers to GPU\n",
                n_gpu_layers.min(n_layer + 1),
                n_layer + 1
            );
        }
        let TensorCreator {
            ml,
            ctx,
            created,
            placement,
            ..
        } = self;
        model.ctx = ctx;
        model.placement = placement;
        crate::load_data::allocate_and_load(model, ml, &created_to_plan(&created), params)
    }
}

/// What the data loader needs of each weight.
pub struct PlannedTensor {
    pub id: TensorId,
    /// the file of a split model that holds the data
    pub shard: usize,
    /// offset in that file's data section
    pub file_offset: u64,
    pub size: u64,
    pub buft: BufferTypeRef,
    pub dev: DeviceRef,
}

fn created_to_plan(c: &[Created]) -> Vec<PlannedTensor> {
    c.iter()
        .map(|c| PlannedTensor {
            id: c.id,
            shard: c.shard,
            file_offset: c.file_offset,
            size: c.size,
            buft: c.buft.clone(),
            dev: c.dev.clone(),
        })
        .collect()
}

/// A regex syntax error on one line: the regex crate draws the pattern with a caret over
/// several lines, ending with "error: <what>".
fn regex_error_line(e: &regex::Error) -> String {
    let text = e.to_string();
    match text.lines().last() {
        Some(last) if text.lines().count() > 1 => {
            last.trim().trim_start_matches("error: ").to_string()
        }
        _ => text,
    }
}

/// The tensors of the model's architecture (its `tensors` in arch/), in llama.cpp's creation
/// order (which is also the order of the debug log and of the data load).
pub fn create_decoder_tensors(model: &mut Model, c: &mut TensorCreator) -> Result<()> {
    let arch = model.arch.ok_or_else(|| {
        LlamaError::UnknownArch(format!("{} (no tensor list for it)", model.arch_name))
    })?;
    arch.create_tensors(model, c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regex_error_fits_on_one_line() {
        // the patterns come from the command line (-ot); built here at run time
        let bad = |p: &str| Regex::new(p).unwrap_err();
        assert_eq!(regex_error_line(&bad("(")), "unclosed group");
        assert!(!regex_error_line(&bad("a{99999999999}")).contains('\n'));
    }
}
