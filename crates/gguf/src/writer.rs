//! Writing GGUF files: KV pairs and tensor infos first, then the tensor data streamed in order,
//! each tensor starting at a multiple of the alignment and padded with zeros as ggml does.
//! Files are written to a temporary file beside the target and renamed when complete.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use atomic_file::TmpGuard;

use crate::array::Array;
use crate::error::GgufError;
use crate::parse::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT, MAGIC, MAX_ARRAY_DEPTH, VERSION};
use crate::reader::GgufFile;
use crate::tensor::TensorInfo;
use crate::value::{Value, ValueRef};

/// Collects KV pairs and tensor infos, then writes the file.
#[derive(Clone, Debug)]
pub struct GgufWriter {
    kv: Vec<(String, Value)>,
    keys: HashSet<String>,
    tensors: Vec<TensorInfo>,
    names: HashSet<String>,
    alignment: u64,
    /// End of the last tensor's data, relative to the data section.
    data_end: u64,
    /// ggml pads after every tensor, the last one included (and a file without tensors up to
    /// its empty data section); a copy of a file that did not can turn this off to stay
    /// byte-identical.
    pad_end: bool,
}

impl Default for GgufWriter {
    fn default() -> Self {
        GgufWriter::new()
    }
}

fn unwritable<T>(msg: String) -> Result<T, GgufError> {
    Err(GgufError::Unwritable(msg))
}

fn pad_to(x: u64, alignment: u64) -> u64 {
    x.div_ceil(alignment) * alignment
}

impl GgufWriter {
    pub fn new() -> GgufWriter {
        GgufWriter {
            kv: Vec::new(),
            keys: HashSet::new(),
            tensors: Vec::new(),
            names: HashSet::new(),
            alignment: DEFAULT_ALIGNMENT,
            data_end: 0,
            pad_end: true,
        }
    }

    /// A writer holding `file`'s KV pairs and tensor infos with their offsets unchanged, so that
    /// writing it with the same data reproduces the file byte for byte.
    pub fn from_gguf(file: &GgufFile) -> Result<GgufWriter, GgufError> {
        let mut w = GgufWriter::new();
        for (k, v) in &file.kv {
            w.add_kv(k.clone(), v.clone())?;
        }
        let mut order: Vec<&TensorInfo> = file.tensors.iter().collect();
        order.sort_by_key(|t| t.offset);
        if order
            .iter()
            .map(|t| &t.name)
            .ne(file.tensors.iter().map(|t| &t.name))
        {
            return unwritable("tensor data is not in the order of the tensor infos".into());
        }
        for t in &file.tensors {
            w.add_tensor_info(t.clone())?;
        }
        w.pad_end = file.file_size >= file.data_offset + pad_to(w.data_end, w.alignment);
        Ok(w)
    }

    pub fn kv(&self) -> &[(String, Value)] {
        &self.kv
    }

    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Add a KV pair; `general.alignment` (a u32 power of two) also sets the alignment, and must
    /// come before any tensor.
    pub fn add_kv(
        &mut self,
        key: impl Into<String>,
        value: impl Into<Value>,
    ) -> Result<(), GgufError> {
        let key = key.into();
        let value = value.into();
        if key.is_empty() {
            return unwritable("key is empty".into());
        }
        if self.keys.contains(&key) {
            return unwritable(format!("duplicate key '{key}'"));
        }
        check_value(&key, &value, 0)?;
        if key == ALIGNMENT_KEY {
            let Value::U32(a) = value else {
                return unwritable(format!(
                    "key '{key}' must be of type u32 but is {}",
                    value.value_type()
                ));
            };
            if a == 0 || !a.is_power_of_two() {
                return unwritable(format!("alignment {a} is not a power of 2"));
            }
            if !self.tensors.is_empty() {
                return unwritable(format!("'{key}' must be set before tensors are added"));
            }
            self.alignment = a as u64;
        }
        self.keys.insert(key.clone());
        self.kv.push((key, value));
        Ok(())
    }

    /// Add a tensor placed right after the previous one (at the next aligned offset).
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        ty: ggml::Type,
        shape: &[u64],
    ) -> Result<&TensorInfo, GgufError> {
        let mut info = TensorInfo::new(name, ty, shape)?;
        info.offset = pad_to(self.data_end, self.alignment);
        self.add_tensor_info(info)?;
        Ok(self.tensors.last().expect("just added"))
    }

    /// Add a tensor at the offset it carries, which must be aligned and not before the end of
    /// the previous tensor. Its size must match its shape and type.
    pub fn add_tensor_info(&mut self, info: TensorInfo) -> Result<(), GgufError> {
        let check = TensorInfo::new(info.name.clone(), info.ty, info.shape())?;
        if check.ne != info.ne || check.size != info.size {
            return unwritable(format!(
                "tensor '{}': size does not match shape and type",
                info.name
            ));
        }
        if self.names.contains(&info.name) {
            return unwritable(format!("duplicate tensor name '{}'", info.name));
        }
        if !info.offset.is_multiple_of(self.alignment) || info.offset < self.data_end {
            return unwritable(format!(
                "tensor '{}': offset {} is not aligned to {} or lies before the end of the previous tensor ({})",
                info.name, info.offset, self.alignment, self.data_end
            ));
        }
        self.data_end = info.offset.checked_add(info.size).ok_or_else(|| {
            GgufError::Unwritable(format!("tensor '{}': offset overflows", info.name))
        })?;
        self.names.insert(info.name.clone());
        self.tensors.push(info);
        Ok(())
    }

    /// Header, KV pairs, tensor infos and the padding up to the data section.
    pub fn header_bytes(&self) -> Vec<u8> {
        // Sized first: a metadata array of many megabytes is then written in place, not
        // through a doubling buffer's copies.
        let mut b = Vec::with_capacity(self.header_len() as usize);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        b.extend_from_slice(&(self.kv.len() as u64).to_le_bytes());
        for (k, v) in &self.kv {
            encode_str(k, &mut b);
            b.extend_from_slice(&v.value_type().id().to_le_bytes());
            encode_value(v, &mut b);
        }
        for t in &self.tensors {
            encode_str(&t.name, &mut b);
            b.extend_from_slice(&t.n_dims.to_le_bytes());
            for d in t.shape() {
                b.extend_from_slice(&d.to_le_bytes());
            }
            b.extend_from_slice(&t.ty.id().to_le_bytes());
            b.extend_from_slice(&t.offset.to_le_bytes());
        }
        // A file without tensors may end right after its infos (gguf-py writes vocab files so).
        if !self.tensors.is_empty() || self.pad_end {
            b.resize(pad_to(b.len() as u64, self.alignment) as usize, 0);
        }
        b
    }

    /// The length of `header_bytes`, counted without encoding anything.
    fn header_len(&self) -> u64 {
        let kv: u64 = self
            .kv
            .iter()
            .map(|(k, v)| 8 + k.len() as u64 + 4 + encoded_len(v.view()))
            .sum();
        let infos: u64 = self
            .tensors
            .iter()
            .map(|t| 8 + t.name.len() as u64 + 4 + 8 * t.shape().len() as u64 + 4 + 8)
            .sum();
        let len = 4 + 4 + 8 + 8 + kv + infos;
        if !self.tensors.is_empty() || self.pad_end {
            pad_to(len, self.alignment)
        } else {
            len
        }
    }

    /// Total size of the file this writer produces.
    pub fn file_size(&self) -> u64 {
        let data = if self.pad_end {
            pad_to(self.data_end, self.alignment)
        } else {
            self.data_end
        };
        self.header_len() + data
    }

    /// Start writing to any sink; tensor data follows through `TensorStream::write_data`.
    pub fn stream<W: Write>(self, mut sink: W) -> io::Result<TensorStream<W>> {
        sink.write_all(&self.header_bytes())?;
        Ok(TensorStream {
            sink,
            writer: self,
            current: 0,
            written: 0,
            pos: 0,
        })
    }

    /// The whole file in memory; `data[i]` is the data of tensor `i`.
    pub fn to_bytes(self, data: &[&[u8]]) -> Result<Vec<u8>, GgufError> {
        if data.len() != self.tensors.len() {
            return unwritable(format!(
                "{} tensors but {} data slices",
                self.tensors.len(),
                data.len()
            ));
        }
        let mut s = self
            .stream(Vec::new())
            .map_err(|e| GgufError::Unwritable(e.to_string()))?;
        for d in data {
            s.write_tensor(d)?;
        }
        s.finish()
    }

    /// Create `path` atomically: the data goes to a temporary file (`<path>.tmp<pid>`, removed
    /// on SIGINT/SIGTERM where the program installed `atomic_file::install_signal_cleanup`)
    /// that `FileStream::finish` renames into place; dropping the stream unfinished removes it.
    pub fn create(self, path: impl AsRef<Path>) -> Result<FileStream, GgufError> {
        let path = path.as_ref().to_path_buf();
        let werr = |source| GgufError::Write {
            path: path.clone(),
            source,
        };
        let (file, guard) = atomic_file::create_tmp(&path).map_err(werr)?;
        let stream = self
            .stream(BufWriter::with_capacity(1 << 20, file))
            .map_err(werr)?;
        Ok(FileStream {
            stream,
            path,
            tmp: guard,
        })
    }
}

fn check_value(key: &str, v: &Value, depth: usize) -> Result<(), GgufError> {
    if let Value::Array(a) = v {
        check_array(key, a, depth)?;
    }
    Ok(())
}

fn check_array(key: &str, a: &Array, depth: usize) -> Result<(), GgufError> {
    if depth >= MAX_ARRAY_DEPTH {
        return unwritable(format!(
            "key '{key}': arrays nested deeper than {MAX_ARRAY_DEPTH} levels"
        ));
    }
    for inner in a.arrays().unwrap_or_default() {
        check_array(key, inner, depth + 1)?;
    }
    Ok(())
}

fn encode_str(s: &str, b: &mut Vec<u8>) {
    b.extend_from_slice(&(s.len() as u64).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
}

/// Bytes `encode_ref` writes for `v`.
fn encoded_len(v: ValueRef) -> u64 {
    match v {
        ValueRef::Str(s) => 8 + s.len() as u64,
        ValueRef::Array(a) => {
            let elems = match (a.elem_type().fixed_size(), a.strings(), a.arrays()) {
                (Some(size), _, _) => size as u64 * a.len() as u64,
                (None, Some(s), _) => s.iter().map(|x| 8 + x.len() as u64).sum(),
                (None, None, Some(inner)) => {
                    inner.iter().map(|x| encoded_len(ValueRef::Array(x))).sum()
                }
                (None, None, None) => 0,
            };
            4 + 8 + elems
        }
        other => other.value_type().fixed_size().unwrap_or(0) as u64,
    }
}

fn encode_value(v: &Value, b: &mut Vec<u8>) {
    encode_ref(v.view(), b);
}

fn encode_ref(v: ValueRef, b: &mut Vec<u8>) {
    match v {
        ValueRef::U8(x) => b.push(x),
        ValueRef::I8(x) => b.push(x as u8),
        ValueRef::U16(x) => b.extend_from_slice(&x.to_le_bytes()),
        ValueRef::I16(x) => b.extend_from_slice(&x.to_le_bytes()),
        ValueRef::U32(x) => b.extend_from_slice(&x.to_le_bytes()),
        ValueRef::I32(x) => b.extend_from_slice(&x.to_le_bytes()),
        ValueRef::F32(x) => b.extend_from_slice(&x.to_le_bytes()),
        ValueRef::Bool(x) => b.push(x as u8),
        ValueRef::Str(s) => encode_str(s, b),
        ValueRef::Array(a) => {
            b.extend_from_slice(&a.elem_type().id().to_le_bytes());
            b.extend_from_slice(&(a.len() as u64).to_le_bytes());
            // The common big array, a byte blob, goes in one copy.
            if let Some(bytes) = a.as_slice::<u8>() {
                b.extend_from_slice(bytes);
                return;
            }
            for x in a {
                encode_ref(x, b);
            }
        }
        ValueRef::U64(x) => b.extend_from_slice(&x.to_le_bytes()),
        ValueRef::I64(x) => b.extend_from_slice(&x.to_le_bytes()),
        ValueRef::F64(x) => b.extend_from_slice(&x.to_le_bytes()),
    }
}

/// Receives tensor data in the order of the tensor infos, in chunks of any size.
pub struct TensorStream<W: Write> {
    sink: W,
    writer: GgufWriter,
    /// Index of the tensor being written.
    current: usize,
    /// Bytes of the current tensor written so far.
    written: u64,
    /// Position in the data section.
    pos: u64,
}

const ZEROS: [u8; 4096] = [0; 4096];

impl<W: Write> TensorStream<W> {
    fn zeros(&mut self, n: u64) -> io::Result<()> {
        let mut left = n;
        while left > 0 {
            let k = left.min(ZEROS.len() as u64);
            self.sink.write_all(&ZEROS[..k as usize])?;
            left -= k;
        }
        self.pos += n;
        Ok(())
    }

    /// The tensor the next bytes belong to, if any is left.
    pub fn current(&self) -> Option<&TensorInfo> {
        self.writer.tensors.get(self.current)
    }

    /// Append bytes of tensor data; a chunk may span tensors.
    pub fn write_data(&mut self, mut bytes: &[u8]) -> Result<(), GgufError> {
        while !bytes.is_empty() {
            let Some(t) = self.writer.tensors.get(self.current) else {
                return unwritable(format!(
                    "{} bytes of data past the last tensor",
                    bytes.len()
                ));
            };
            let (offset, size) = (t.offset, t.size);
            if self.written == size {
                // Only an empty tensor is current and complete here: it takes no bytes.
                self.current += 1;
                self.written = 0;
                continue;
            }
            if self.written == 0 && self.pos < offset {
                self.zeros(offset - self.pos).map_err(io_err)?;
            }
            let n = (size - self.written).min(bytes.len() as u64) as usize;
            self.sink.write_all(&bytes[..n]).map_err(io_err)?;
            self.written += n as u64;
            self.pos += n as u64;
            bytes = &bytes[n..];
            if self.written == size {
                self.current += 1;
                self.written = 0;
            }
        }
        Ok(())
    }

    /// Write the whole data of the next tensor; its length must be the tensor's size.
    pub fn write_tensor(&mut self, bytes: &[u8]) -> Result<(), GgufError> {
        let Some(t) = self.current() else {
            return unwritable("data for a tensor that was not declared".into());
        };
        if self.written != 0 || t.size != bytes.len() as u64 {
            return unwritable(format!(
                "tensor '{}' needs {} bytes, got {}",
                t.name,
                t.size - self.written,
                bytes.len()
            ));
        }
        if bytes.is_empty() {
            self.current += 1;
            return Ok(());
        }
        self.write_data(bytes)
    }

    /// Check that every tensor got its data, write the final padding and return the sink.
    pub fn finish(mut self) -> Result<W, GgufError> {
        while self.current().is_some_and(|t| t.size == 0) {
            self.current += 1;
        }
        if let Some(t) = self.current() {
            return unwritable(format!(
                "tensor '{}' got {} of its {} bytes",
                t.name, self.written, t.size
            ));
        }
        let end = if self.writer.pad_end {
            pad_to(self.writer.data_end, self.writer.alignment)
        } else {
            self.writer.data_end
        };
        self.zeros(end.saturating_sub(self.pos)).map_err(io_err)?;
        self.sink.flush().map_err(io_err)?;
        Ok(self.sink)
    }
}

fn io_err(e: io::Error) -> GgufError {
    GgufError::Unwritable(e.to_string())
}

/// A `TensorStream` into a temporary file that becomes `path` on `finish`.
pub struct FileStream {
    stream: TensorStream<BufWriter<File>>,
    path: PathBuf,
    tmp: TmpGuard,
}

/// A complete, synced file still under its temporary name: `commit` moves it into place,
/// dropping it removes it. Lets several files be completed before any is renamed.
pub struct PendingFile {
    path: PathBuf,
    tmp: TmpGuard,
}

impl PendingFile {
    /// The final path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn commit(self) -> Result<(), GgufError> {
        let PendingFile { path, tmp } = self;
        tmp.commit(&path)
            .map_err(|source| GgufError::Write { path, source })
    }
}

impl FileStream {
    pub fn current(&self) -> Option<&TensorInfo> {
        self.stream.current()
    }

    pub fn write_data(&mut self, bytes: &[u8]) -> Result<(), GgufError> {
        self.stream.write_data(bytes).map_err(|e| self.with_path(e))
    }

    pub fn write_tensor(&mut self, bytes: &[u8]) -> Result<(), GgufError> {
        self.stream
            .write_tensor(bytes)
            .map_err(|e| self.with_path(e))
    }

    fn with_path(&self, e: GgufError) -> GgufError {
        match e {
            GgufError::Unwritable(msg) => {
                GgufError::Unwritable(format!("{}: {msg}", self.path.display()))
            }
            other => other,
        }
    }

    /// Complete the file: pad, flush, sync and rename into place.
    pub fn finish(self) -> Result<(), GgufError> {
        self.finish_pending()?.commit()
    }

    /// Pad, flush and sync, keeping the temporary name until `PendingFile::commit`.
    pub fn finish_pending(self) -> Result<PendingFile, GgufError> {
        let FileStream { stream, path, tmp } = self;
        let werr = |source| GgufError::Write {
            path: path.clone(),
            source,
        };
        let buf = stream.finish()?;
        let file = buf.into_inner().map_err(|e| werr(e.into_error()))?;
        file.sync_all().map_err(werr)?;
        drop(file);
        Ok(PendingFile { path, tmp })
    }
}

/// Write a complete file: KV pairs, then tensors placed one after another, each with its data.
pub fn write_gguf(
    path: impl AsRef<Path>,
    kv: &[(String, Value)],
    tensors: &[(TensorInfo, &[u8])],
) -> Result<(), GgufError> {
    let mut w = GgufWriter::new();
    for (k, v) in kv {
        w.add_kv(k.clone(), v.clone())?;
    }
    for (t, _) in tensors {
        w.add_tensor(t.name.clone(), t.ty, t.shape())?;
    }
    let mut f = w.create(path)?;
    for (_, d) in tensors {
        f.write_tensor(d)?;
    }
    f.finish()
}
