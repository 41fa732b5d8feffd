//! Whether a model would load, decided from its metadata and tensor infos alone, with the
//! loader's own code: the architecture, `HParams::load`, `Vocab::from_gguf` and the
//! architecture's tensor list (names, shapes, count) through a check-only `TensorCreator`. No
//! device, no buffer, no tensor data. llama-quantize runs it on the file it is about to write,
//! so it never writes a model that llama-completion rejects.

use crate::arch::Arch;
use crate::error::{LlamaError, Result};
use crate::hparams::HParams;
use crate::loader::{LoadMode, ModelLoader};
use crate::model::Model;
use crate::model_tensors::{create_decoder_tensors, Placement, TensorCreator};
use crate::vocab::Vocab;
use gguf::GgufFile;
use std::sync::Arc;
use std::time::Instant;

/// Checks `file` (its `kv` and `tensors`; tensor data is not read) as `Model::load` would and
/// returns the warnings a load gives for it, or the error that would stop the load.
pub fn check_loadable(file: Arc<GgufFile>) -> Result<Vec<String>> {
    // the vocabulary's and the loader's log lines belong to a real load, not to this check
    ggml::log::muted(|| check(file))
}

fn check(file: Arc<GgufFile>) -> Result<Vec<String>> {
    let ml = ModelLoader::for_file(file.clone())?;
    let arch_name = ml.arch_name()?;
    let arch =
        Arch::from_name(&arch_name).ok_or_else(|| LlamaError::UnknownArch(arch_name.clone()))?;
    let hparams = HParams::load(&|k| file.get(k), arch)?;
    let vocab = Vocab::from_gguf(&file).map_err(|e| LlamaError::Vocab(e.to_string()))?;
    let mut model = Model {
        arch: Some(arch),
        arch_name,
        vocab,
        vocab_only: false,
        hparams: hparams.clone(),
        name: String::new(),
        type_name: "?B",
        ftype: 0,
        n_elements: 0,
        n_bytes: 0,
        meta: Vec::new(),
        ctx: ggml::Context::new(),
        tok_embd: None,
        output_norm: None,
        output: None,
        output_b: None,
        output_norm_b: None,
        layers: Vec::new(),
        locked: Default::default(),
        buffers: Vec::new(),
        buffer_sizes: Vec::new(),
        placement: Placement::default(),
        n_gpu_layers: 0,
        t_start: Instant::now(),
        t_load_us: 0,
        load_mode: LoadMode::None,
        no_alloc: true,
        _files: vec![file.clone()],
        lora_nodes: Default::default(),
        n_ctx_train_adjusted: Default::default(),
    };
    let mut creator = TensorCreator::check_only(&ml, &hparams);
    create_decoder_tensors(&mut model, &mut creator)?;
    creator.check_count()?;
    Ok(ignored_keys(&file, arch))
}

/// Keys that describe a structure the model does not have, so the loader does not use them:
/// the expert counts of a model without expert tensors (a dense model is loaded as dense; a
/// model with expert tensors fails the tensor count instead).
pub fn ignored_keys(file: &GgufFile, arch: Arch) -> Vec<String> {
    let has_experts = file
        .tensors
        .iter()
        .any(|t| t.name.contains("_exps.") || t.name.contains(".ffn_gate_inp."));
    if has_experts {
        return Vec::new();
    }
    let mut out = Vec::new();
    for key in ["expert_count", "expert_used_count"] {
        let full = format!("{}.{key}", arch.name());
        if let Some(n) = file.get(&full).and_then(|v| v.as_u64()).filter(|&n| n > 0) {
            out.push(format!(
                "{full} = {n} but the model has no expert tensors: it is loaded as a dense model"
            ));
        }
    }
    out
}
