//! The model loader (llama_model_loader): opens the GGUF file in the chosen load mode, dumps the
//! metadata to the log, hands out tensor infos to the architecture's tensor list, and fills the
//! weight buffers (mapped, read, locked, or read with direct I/O) with progress dots.

use crate::error::{LlamaError, Result};
use crate::ftype;
use crate::kv_override::{KvOverride, KvView};
use gguf::display::{self, version_name};
use gguf::{GgufFile, TensorInfo, Value, ValueType};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

/// How tensor data gets into memory (`-lm` / `--load-mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LoadMode {
    #[default]
    Auto,
    None,
    Mmap,
    Mlock,
    MmapMlock,
    Dio,
}

impl LoadMode {
    pub fn name(self) -> &'static str {
        match self {
            LoadMode::Auto => "auto",
            LoadMode::None => "none",
            LoadMode::Mmap => "mmap",
            LoadMode::Mlock => "mlock",
            LoadMode::MmapMlock => "mmap+mlock",
            LoadMode::Dio => "dio",
        }
    }
    pub fn uses_mmap(self) -> bool {
        matches!(self, LoadMode::Mmap | LoadMode::MmapMlock)
    }
    pub fn uses_mlock(self) -> bool {
        matches!(self, LoadMode::Mlock | LoadMode::MmapMlock)
    }
    /// `auto` maps the file: it is what llama.cpp does where mmap is available.
    pub fn resolve(self) -> LoadMode {
        match self {
            LoadMode::Auto => LoadMode::Mmap,
            m => m,
        }
    }
}

impl FromStr for LoadMode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<LoadMode, String> {
        match s {
            "auto" => Ok(LoadMode::Auto),
            "none" => Ok(LoadMode::None),
            "mmap" => Ok(LoadMode::Mmap),
            "mlock" => Ok(LoadMode::Mlock),
            "mmap+mlock" => Ok(LoadMode::MmapMlock),
            "dio" => Ok(LoadMode::Dio),
            _ => Err(format!(
                "unknown load mode '{s}' (expected auto, none, mmap, mlock, mmap+mlock or dio)"
            )),
        }
    }
}

impl std::fmt::Display for LoadMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One file of the model: the only one, or a shard of a split model (`split.*` keys).
pub(crate) struct Shard {
    pub path: PathBuf,
    pub gguf: Arc<GgufFile>,
}

pub(crate) struct ModelLoader {
    /// the first (or only) file: the metadata the model is read from
    pub gguf: Arc<GgufFile>,
    /// every file, the first one included, in split order
    pub shards: Vec<Shard>,
    /// tensor name -> (shard, index in that shard's tensor list)
    weights: std::collections::HashMap<String, (usize, usize)>,
    pub ftype: u32,
    pub n_elements: u64,
    pub n_bytes: u64,
    /// `--override-kv`, consulted by the typed getters through [`ModelLoader::view`]
    pub overrides: Vec<KvOverride>,
    /// general.architecture as the constructor read it (with its override)
    pub arch: Option<Value>,
}

impl ModelLoader {
    pub fn open(path: &Path, mode: LoadMode) -> Result<ModelLoader> {
        ModelLoader::open_with(path, mode, &[])
    }

    /// As `open`, with metadata overrides: like llama.cpp's constructor it reads
    /// general.architecture and general.file_type through them.
    pub fn open_with(path: &Path, mode: LoadMode, overrides: &[KvOverride]) -> Result<ModelLoader> {
        let opened = if mode.uses_mmap() {
            GgufFile::open_with(path, gguf::ReadMode::MmapPopulate)
        } else {
            GgufFile::open_metadata(path)
        };
        let gguf = opened.map_err(|e| LlamaError::Gguf {
            path: path.to_path_buf(),
            source: Box::new(e),
        })?;
        let gguf = Arc::new(gguf);

        let view = KvView::new(&gguf, overrides);
        let arch = view.get("general.architecture").cloned();
        let mut shards = vec![Shard {
            path: path.to_path_buf(),
            gguf: gguf.clone(),
        }];
        crate::split_load::open_shards(path, mode, &view, &mut shards)?;
        let weights = crate::split_load::index_weights(&shards)?;
        let all = || shards.iter().flat_map(|s| s.gguf.tensors.iter());
        let n_elements: u64 = all().map(|t| t.n_elements()).sum();
        let n_bytes: u64 = all().map(|t| t.size).sum();

        ggml::log_info!(
            "llama_model_loader: loaded meta data with {} key-value pairs and {} tensors from {} (version {})\n",
            gguf.kv.len(),
            weights.len(),
            path.display(),
            version_name(gguf.version)
        );

        // the most common tensor type decides the guessed file type
        let mut counts: Vec<(ggml::Type, u32)> = Vec::new();
        let (mut n_type_max, mut type_max) = (0u32, ggml::Type::F32);
        for t in all() {
            let c = match counts.iter_mut().find(|(ty, _)| *ty == t.ty) {
                Some((_, c)) => {
                    *c += 1;
                    *c
                }
                None => {
                    counts.push((t.ty, 1));
                    1
                }
            };
            if n_type_max < c {
                n_type_max = c;
                type_max = t.ty;
            }
        }
        let mut ftype = ftype::from_type(type_max) | ftype::GUESSED;
        if let Some(v) = view.get("general.file_type").and_then(|v| v.as_u64()) {
            ftype = v as u32;
        }

        ggml::log_info!(
            "llama_model_loader: Dumping metadata keys/values. Note: KV overrides do not apply in this output.\n"
        );
        for (i, (key, value)) in gguf.kv.iter().enumerate() {
            ggml::log_info!(
                "llama_model_loader: {}\n",
                display::kv_line_string(i, key, value)
            );
        }
        counts.sort_by_key(|(ty, _)| ty.id());
        for (ty, n) in &counts {
            ggml::log_info!(
                "llama_model_loader: - type {:>4}: {:4} tensors\n",
                ty.name(),
                n
            );
        }

        drop(view);
        Ok(ModelLoader {
            gguf,
            shards,
            weights,
            ftype,
            n_elements,
            n_bytes,
            overrides: overrides.to_vec(),
            arch,
        })
    }

    /// A loader over one file already read, without log lines or overrides (the checks that
    /// only need the tensor list and the metadata).
    pub fn for_file(file: Arc<GgufFile>) -> Result<ModelLoader> {
        let shards = vec![Shard {
            path: PathBuf::new(),
            gguf: file.clone(),
        }];
        let weights = crate::split_load::index_weights(&shards)?;
        Ok(ModelLoader {
            arch: file.get("general.architecture").cloned(),
            gguf: file,
            shards,
            weights,
            ftype: 0,
            n_elements: 0,
            n_bytes: 0,
            overrides: Vec::new(),
        })
    }

    /// The metadata as the typed getters read it: the file with the overrides.
    pub fn view(&self) -> KvView<'_> {
        KvView::new(&self.gguf, &self.overrides)
    }

    pub fn arch_name(&self) -> Result<String> {
        match &self.arch {
            Some(Value::Str(s)) => Ok(s.clone()),
            Some(_) => Err(LlamaError::BadKey {
                key: "general.architecture".into(),
                why: "expected a string".into(),
            }),
            None => Err(LlamaError::MissingKey("general.architecture".into())),
        }
    }

    /// The tensor and the index of the shard that holds its data.
    pub fn tensor_in_shard(&self, name: &str) -> Option<(usize, &TensorInfo)> {
        let &(shard, i) = self.weights.get(name)?;
        Some((shard, &self.shards[shard].gguf.tensors[i]))
    }

    /// The number of tensors over all shards.
    pub fn n_tensors(&self) -> usize {
        self.weights.len()
    }

    /// Every tensor of every shard, in file order.
    pub fn all_tensors(&self) -> impl Iterator<Item = &TensorInfo> {
        self.shards.iter().flat_map(|s| s.gguf.tensors.iter())
    }

    /// llama_model_loader::print_info
    pub fn print_info(&self) {
        ggml::log_info!(
            "print_info: file format = {}\n",
            version_name(self.gguf.version)
        );
        ggml::log_info!("print_info: file type   = {}\n", ftype::name(self.ftype));
        let bpw = if self.n_elements == 0 {
            0.0
        } else {
            self.n_bytes as f64 * 8.0 / self.n_elements as f64
        };
        if self.n_bytes < (1 << 30) {
            ggml::log_info!(
                "print_info: file size   = {:.2} MiB ({:.2} BPW) \n",
                self.n_bytes as f64 / 1024.0 / 1024.0,
                bpw
            );
        } else {
            ggml::log_info!(
                "print_info: file size   = {:.2} GiB ({:.2} BPW) \n",
                self.n_bytes as f64 / 1024.0 / 1024.0 / 1024.0,
                bpw
            );
        }
    }

    /// Metadata as strings (llama_model_meta_val_str).
    pub fn meta_strings(&self) -> Vec<(String, String)> {
        self.gguf
            .kv
            .iter()
            .filter(|(_, v)| !matches!(v, Value::Array(a) if a.elem_type() == ValueType::Array))
            .map(|(k, v)| {
                (
                    k.clone(),
                    display::kv_to_str(v, Some(4 * display::MAX_VALUE_LEN)),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_mode_names_round_trip() {
        for m in [
            LoadMode::Auto,
            LoadMode::None,
            LoadMode::Mmap,
            LoadMode::Mlock,
            LoadMode::MmapMlock,
            LoadMode::Dio,
        ] {
            assert_eq!(m.name().parse::<LoadMode>().unwrap(), m);
        }
        assert!("--mmap".parse::<LoadMode>().is_err());
    }
}
