//! `GgufFile`: a parsed GGUF file and access to its tensor data, through a memory map, a plain
//! read into memory, or no data at all (metadata only).

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::error::GgufError;
use crate::parse::{parse, ParseError, Parsed};
use crate::value::Value;
use crate::TensorInfo;

/// How the bytes of a file are brought into memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadMode {
    /// Memory-map the file (the default).
    Mmap,
    /// Read the whole file into an owned buffer.
    Read,
}

enum Source {
    Mmap(memmap2::Mmap),
    Bytes(Vec<u8>),
    /// Only the metadata was read; tensor data is not available.
    None,
}

pub struct GgufFile {
    pub version: u32,
    pub kv: Vec<(String, Value)>,
    pub tensors: Vec<TensorInfo>,
    pub alignment: u64,
    /// Absolute byte offset of the data section.
    pub data_offset: u64,
    pub file_size: u64,
    source: Source,
    kv_index: HashMap<String, usize>,
    tensor_index: HashMap<String, usize>,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("version", &self.version)
            .field("n_kv", &self.kv.len())
            .field("n_tensors", &self.tensors.len())
            .field("alignment", &self.alignment)
            .field("data_offset", &self.data_offset)
            .field("file_size", &self.file_size)
            .finish()
    }
}

/// Files smaller than this are read rather than mapped (mapping an empty file fails).
const MIN_MMAP_SIZE: u64 = 4096;
/// First read size for metadata-only opening; doubled until the metadata fits.
const METADATA_CHUNK: u64 = 1 << 20;

fn open_file(path: &Path) -> Result<(File, u64), GgufError> {
    let open_err = |source| GgufError::Open {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(open_err)?;
    let meta = file.metadata().map_err(open_err)?;
    if meta.is_dir() {
        let source = std::io::Error::other("is a directory");
        return Err(GgufError::Open {
            path: path.to_path_buf(),
            source,
        });
    }
    Ok((file, meta.len()))
}

fn read_err(path: &Path) -> impl Fn(std::io::Error) -> GgufError + '_ {
    move |source| GgufError::Read {
        path: path.to_path_buf(),
        source,
    }
}

impl GgufFile {
    /// Open through a memory map.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile, GgufError> {
        GgufFile::open_with(path, ReadMode::Mmap)
    }

    pub fn open_with(path: impl AsRef<Path>, mode: ReadMode) -> Result<GgufFile, GgufError> {
        let path = path.as_ref();
        let (mut file, size) = open_file(path)?;
        let source = if mode == ReadMode::Mmap && size >= MIN_MMAP_SIZE {
            // SAFETY: the map is read-only; as with every mmap-based loader (llama.cpp included),
            // another process truncating the file while it is mapped is outside our control.
            let map = unsafe { memmap2::Mmap::map(&file) }.map_err(read_err(path))?;
            Source::Mmap(map)
        } else {
            let mut bytes = Vec::with_capacity(size as usize);
            file.read_to_end(&mut bytes).map_err(read_err(path))?;
            Source::Bytes(bytes)
        };
        GgufFile::from_source(source)
    }

    /// Read the header, KV pairs and tensor infos only; `tensor_data` and `data` return empty
    /// slices. Reads only as much of the file as the metadata occupies.
    pub fn open_metadata(path: impl AsRef<Path>) -> Result<GgufFile, GgufError> {
        let path = path.as_ref();
        let (file, size) = open_file(path)?;
        let mut buf = Vec::new();
        let mut want = METADATA_CHUNK.min(size);
        loop {
            let have = buf.len() as u64;
            if want > have {
                (&file)
                    .take(want - have)
                    .read_to_end(&mut buf)
                    .map_err(read_err(path))?;
            }
            let file_size = if (buf.len() as u64) < want {
                buf.len() as u64
            } else {
                size
            };
            match parse(&buf, file_size) {
                Ok(parsed) => return Ok(GgufFile::assemble(parsed, file_size, Source::None)),
                Err(ParseError::Invalid(e)) => return Err(e),
                Err(ParseError::NeedMore(n)) => want = n.max(want.saturating_mul(2)).min(size),
            }
        }
    }

    /// Parse a whole file held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
        GgufFile::from_source(Source::Bytes(bytes))
    }

    fn from_source(source: Source) -> Result<GgufFile, GgufError> {
        let bytes: &[u8] = match &source {
            Source::Mmap(m) => m,
            Source::Bytes(b) => b,
            Source::None => &[],
        };
        let size = bytes.len() as u64;
        match parse(bytes, size) {
            Ok(parsed) => Ok(GgufFile::assemble(parsed, size, source)),
            Err(ParseError::Invalid(e)) => Err(e),
            Err(ParseError::NeedMore(_)) => unreachable!("the whole file was given to the parser"),
        }
    }

    fn assemble(p: Parsed, file_size: u64, source: Source) -> GgufFile {
        let kv_index =
            p.kv.iter()
                .enumerate()
                .map(|(i, (k, _))| (k.clone(), i))
                .collect();
        let tensor_index = p
            .tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        GgufFile {
            version: p.version,
            kv: p.kv,
            tensors: p.tensors,
            alignment: p.alignment,
            data_offset: p.data_offset,
            file_size,
            source,
            kv_index,
            tensor_index,
        }
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        // The fields are public, so the index may be stale: confirm, else search.
        match self.kv_index.get(key).and_then(|&i| self.kv.get(i)) {
            Some((k, v)) if k == key => Some(v),
            _ => self.kv.iter().find(|(k, _)| k == key).map(|(_, v)| v),
        }
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        match self
            .tensor_index
            .get(name)
            .and_then(|&i| self.tensors.get(i))
        {
            Some(t) if t.name == name => Some(t),
            _ => self.tensors.iter().find(|t| t.name == name),
        }
    }

    /// The whole data section (empty when opened with `open_metadata`).
    pub fn data(&self) -> &[u8] {
        let bytes: &[u8] = match &self.source {
            Source::Mmap(m) => m,
            Source::Bytes(b) => b,
            Source::None => return &[],
        };
        bytes.get(self.data_offset as usize..).unwrap_or(&[])
    }

    /// The bytes of one tensor; empty if the data is not available or `t` does not fit.
    pub fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        let start = t.offset as usize;
        let end = t.offset.saturating_add(t.size) as usize;
        self.data().get(start..end).unwrap_or(&[])
    }

    /// Whether tensor data can be read (false after `open_metadata`).
    pub fn has_data(&self) -> bool {
        !matches!(self.source, Source::None)
    }

    pub fn is_mmapped(&self) -> bool {
        matches!(self.source, Source::Mmap(_))
    }
}
