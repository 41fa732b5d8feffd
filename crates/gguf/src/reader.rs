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
    /// Memory-map the file and fault every page in at once (llama.cpp's model mappings:
    /// MAP_POPULATE where the OS has it), so a run never stops on a first touch of a weight.
    MmapPopulate,
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

/// Opens `path` for reading if it is a regular file. Anything else is refused before it is
/// read: a FIFO or a character device such as /dev/zero reports size 0 and never ends, a
/// directory cannot be read, and a FIFO cannot even be opened without a writer.
fn open_file(path: &Path) -> Result<(File, u64), GgufError> {
    let open_err = |source| GgufError::Open {
        path: path.to_path_buf(),
        source,
    };
    // Checked on the path first, so that a device is not even opened (opening some has effects).
    check_regular(path, &std::fs::metadata(path).map_err(open_err)?)?;
    let file = open_no_wait(path).map_err(open_err)?;
    // The path may have been replaced in between: what was opened is what counts.
    let meta = file.metadata().map_err(open_err)?;
    check_regular(path, &meta)?;
    Ok((file, meta.len()))
}

/// Opening does not wait, should the path have become a FIFO after it was checked.
#[cfg(unix)]
fn open_no_wait(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK changes nothing for a regular file, the only kind that is then read.
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_no_wait(path: &Path) -> std::io::Result<File> {
    File::open(path)
}

fn check_regular(path: &Path, meta: &std::fs::Metadata) -> Result<(), GgufError> {
    if meta.is_file() {
        return Ok(());
    }
    Err(GgufError::NotAFile {
        path: path.to_path_buf(),
        what: file_kind(&meta.file_type()),
    })
}

/// What a path that is not a regular file is, in words.
fn file_kind(t: &std::fs::FileType) -> &'static str {
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "a special file"
}

/// Reads at most `n` more bytes of `file` into `buf`, with the room for them reserved first so
/// that a size the machine cannot hold is an error, not an abort.
fn read_up_to(file: &File, n: u64, buf: &mut Vec<u8>, path: &Path) -> Result<(), GgufError> {
    let room = usize::try_from(n)
        .ok()
        .filter(|&r| buf.try_reserve_exact(r).is_ok());
    if room.is_none() {
        let source = std::io::Error::new(
            std::io::ErrorKind::OutOfMemory,
            format!("cannot allocate {n} bytes to read it into memory"),
        );
        return Err(read_err(path)(source));
    }
    file.take(n).read_to_end(buf).map_err(read_err(path))?;
    Ok(())
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
        let (file, size) = open_file(path)?;
        let mapped = matches!(mode, ReadMode::Mmap | ReadMode::MmapPopulate);
        let source = if mapped && size >= MIN_MMAP_SIZE {
            let mut opts = memmap2::MmapOptions::new();
            if mode == ReadMode::MmapPopulate {
                opts.populate();
            }
            // SAFETY: the map is read-only; as with every mmap-based loader (llama.cpp included),
            // another process truncating the file while it is mapped is outside our control.
            let map = unsafe { opts.map(&file) }.map_err(read_err(path))?;
            Source::Mmap(map)
        } else {
            // At most the size the file had when opened: it may grow while being read.
            let mut bytes = Vec::new();
            read_up_to(&file, size, &mut bytes, path)?;
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
                read_up_to(&file, want - have, &mut buf, path)?;
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
