//! Weight buffers and tensor data (load_all_data): a buffer per buffer type, the mapped file
//! wrapped as a CPU_Mapped buffer where possible, otherwise plain, locked or direct reads, with
//! the progress callback (the dots of the startup log) called before each tensor.

use crate::error::{LlamaError, Result};
use crate::loader::{LoadMode, ModelLoader};
use crate::model::{Model, ModelParams};
use crate::model_tensors::PlannedTensor;
use ggml::backend::{same_buft, Buffer, BufferType, BufferTypeRef, BufferUsage};
use ggml::tensor::TensorData;
use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;

const MIB: f64 = 1024.0 * 1024.0;
/// Reads go through a bounce buffer of at most this size.
const READ_CHUNK: usize = 64 << 20;
const DIO_ALIGN: usize = 4096;

/// Pages locked in RAM (mlock), unlocked when the model goes.
#[derive(Default)]
pub struct LockedMemory {
    ranges: Vec<(usize, usize)>,
}

impl LockedMemory {
    fn lock(&mut self, addr: usize, size: usize) {
        if size == 0 {
            return;
        }
        let before: usize = self.ranges.iter().map(|r| r.1).sum();
        // SAFETY: addr..addr+size is a live allocation or mapping owned by the model; mlock only
        // pins its pages and reads nothing.
        let rc = unsafe { libc::mlock(addr as *const libc::c_void, size) };
        if rc == 0 {
            self.ranges.push((addr, size));
        } else {
            let err = std::io::Error::last_os_error();
            ggml::log_warn!(
                "warning: failed to mlock {}-byte buffer (after previously locking {} bytes): {}\n",
                size,
                before,
                err
            );
            ggml::log_warn!("Try increasing RLIMIT_MEMLOCK ('ulimit -l' as root).\n");
        }
    }
}

impl Drop for LockedMemory {
    fn drop(&mut self) {
        for &(addr, size) in &self.ranges {
            // SAFETY: unlocking a range this object locked; failure is harmless.
            unsafe { libc::munlock(addr as *const libc::c_void, size) };
        }
    }
}

struct Group {
    buft: BufferTypeRef,
    members: Vec<usize>,
}

/// Tensor data source for the non-mapped modes.
enum Reader {
    Buffered(File),
    Direct(File),
}

fn open_reader(path: &Path, mode: LoadMode) -> Result<Reader> {
    let io = |e| LlamaError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    if mode == LoadMode::Dio {
        match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
        {
            Ok(f) => return Ok(Reader::Direct(f)),
            Err(e) => {
                ggml::log_warn!(
                    "llama_model_loader: direct I/O is not available for {} ({}), falling back to buffered reads\n",
                    path.display(),
                    e
                );
            }
        }
    }
    Ok(Reader::Buffered(File::open(path).map_err(io)?))
}

fn read_exact_at(f: &File, buf: &mut [u8], mut offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], offset) {
            Ok(0) => break,
            Ok(n) => {
                done += n;
                offset += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// A heap block aligned for O_DIRECT.
struct AlignedBuf {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl AlignedBuf {
    fn new(size: usize) -> Option<AlignedBuf> {
        let layout = std::alloc::Layout::from_size_align(size.max(DIO_ALIGN), DIO_ALIGN).ok()?;
        // SAFETY: non-zero size layout.
        let ptr = unsafe { std::alloc::alloc(layout) };
        (!ptr.is_null()).then_some(AlignedBuf { ptr, layout })
    }
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: ptr is a live allocation of layout.size() bytes owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in new.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

impl Reader {
    /// Copy `size` bytes at absolute file offset `abs` into the buffer at `addr`.
    fn copy_into(
        &mut self,
        path: &Path,
        buffer: &Buffer,
        addr: usize,
        abs: u64,
        size: usize,
    ) -> Result<()> {
        let io = |e| LlamaError::Io {
            path: path.to_path_buf(),
            source: e,
        };
        let short = || LlamaError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
        };
        let mut done = 0usize;
        match self {
            Reader::Buffered(f) => {
                let mut tmp = vec![0u8; size.min(READ_CHUNK)];
                while done < size {
                    let n = (size - done).min(READ_CHUNK);
                    let got = read_exact_at(f, &mut tmp[..n], abs + done as u64).map_err(io)?;
                    if got < n {
                        return Err(short());
                    }
                    buffer.set(addr + done, &tmp[..n])?;
                    done += n;
                }
            }
            Reader::Direct(f) => {
                let mut tmp = AlignedBuf::new(READ_CHUNK + 2 * DIO_ALIGN).ok_or_else(|| {
                    LlamaError::Alloc {
                        what: "direct I/O bounce buffer".into(),
                        buft: "host".into(),
                        size: READ_CHUNK,
                        why: "out of memory".into(),
                    }
                })?;
                while done < size {
                    let n = (size - done).min(READ_CHUNK);
                    let pos = abs + done as u64;
                    let start = pos - pos % DIO_ALIGN as u64;
                    let lead = (pos - start) as usize;
                    let span = (lead + n).div_ceil(DIO_ALIGN) * DIO_ALIGN;
                    let buf = &mut tmp.as_mut()[..span];
                    match read_exact_at(f, buf, start) {
                        Ok(got) if got >= lead + n => {}
                        Ok(_) => return Err(short()),
                        Err(e) => {
                            // some file systems accept O_DIRECT at open and refuse the reads
                            ggml::log_warn!(
                                "llama_model_loader: direct I/O read failed ({}), falling back to buffered reads\n",
                                e
                            );
                            let file = File::open(path).map_err(io)?;
                            *self = Reader::Buffered(file);
                            return self.copy_into(path, buffer, addr + done, pos, size - done);
                        }
                    }
                    buffer.set(addr + done, &buf[lead..lead + n])?;
                    done += n;
                }
            }
        }
        Ok(())
    }
}

/// Host memory for one tensor's file bytes on their way to a buffer that takes whole tensors.
fn staging_buffer(size: usize) -> Result<Arc<Buffer>> {
    let buft = Arc::new(ggml::backend::HostBufferType {
        name: "staging".into(),
        alignment: 64,
        max_size: usize::MAX,
    });
    Ok(buft.alloc_buffer(size)?)
}

pub fn allocate_and_load(
    model: &mut Model,
    ml: &ModelLoader,
    plan: &[PlannedTensor],
    params: &mut ModelParams,
) -> Result<()> {
    let mode = model.load_mode;
    let mut groups: Vec<Group> = Vec::new();
    for (i, p) in plan.iter().enumerate() {
        match groups.iter_mut().find(|g| same_buft(&g.buft, &p.buft)) {
            Some(g) => g.members.push(i),
            None => groups.push(Group {
                buft: p.buft.clone(),
                members: vec![i],
            }),
        }
    }

    // tensors whose bytes are the mapped file itself need no copy
    let mut in_place = vec![false; plan.len()];
    let mut locked = LockedMemory::default();
    for g in &groups {
        let ids: Vec<_> = g.members.iter().map(|&i| plan[i].id).collect();
        if params.no_alloc {
            let size = crate::buffers::place_tensors(&mut model.ctx, &ids, &g.buft);
            // the dummy buffer holds weights too: the scheduler places their ops by it
            if let Some(d) = ids.first().and_then(|&t| model.ctx[t].data.as_ref()) {
                d.buffer.set_usage(BufferUsage::Weights);
            }
            ggml::log_info!(
                "load_tensors: {:>12} model buffer size = {:8.2} MiB\n",
                g.buft.name(),
                0.0
            );
            model.buffer_sizes.push((g.buft.name().to_string(), size));
            continue;
        }
        let dev = &plan[g.members[0]].dev;
        let mut mapped: Vec<Arc<Buffer>> = Vec::new();
        if mode.uses_mmap()
            && dev.caps().buffer_from_host_ptr
            && same_buft(&dev.buffer_type(), &g.buft)
        {
            // one buffer per file: only the range of the file that holds this group's tensors
            for (si, shard) in ml.shards.iter().enumerate() {
                let mine: Vec<usize> = g
                    .members
                    .iter()
                    .copied()
                    .filter(|&i| plan[i].shard == si)
                    .collect();
                let first = mine.iter().map(|&i| plan[i].file_offset).min();
                let last = mine
                    .iter()
                    .map(|&i| plan[i].file_offset + plan[i].size)
                    .max();
                let (Some(first), Some(last)) = (first, last) else {
                    continue;
                };
                if first >= last {
                    continue;
                }
                let data = shard.gguf.data();
                if (last as usize) > data.len() {
                    continue;
                }
                let base = data.as_ptr() as usize + first as usize;
                if let Some(b) = dev.buffer_from_host_ptr(base, (last - first) as usize) {
                    for &i in &mine {
                        let addr = b.base() + (plan[i].file_offset - first) as usize;
                        model.ctx[plan[i].id].data = Some(TensorData {
                            buffer: b.clone(),
                            addr,
                        });
                        in_place[i] = true;
                    }
                    mapped.push(b);
                }
            }
        }
        // tensors no mapping took (or every tensor, without mmap) go to an allocated buffer
        let rest: Vec<_> = g
            .members
            .iter()
            .filter(|&&i| !in_place[i])
            .map(|&i| plan[i].id)
            .collect();
        let mut buffers = mapped;
        if !rest.is_empty() {
            buffers.push(crate::buffers::alloc_tensors(
                &mut model.ctx,
                &rest,
                &g.buft,
                "model weights",
            )?);
        }
        for buffer in buffers {
            buffer.set_usage(BufferUsage::Weights);
            ggml::log_info!(
                "load_tensors: {:>12} model buffer size = {:8.2} MiB\n",
                buffer.name(),
                ggml::meta::reported_size(&buffer) as f64 / MIB
            );
            // what each device of a meta buffer holds
            for (name, size) in ggml::meta::device_buffer_sizes(&buffer).unwrap_or_default() {
                ggml::log_info!(
                    "load_tensors: {:>12} model buffer size = {:8.2} MiB\n",
                    name,
                    size as f64 / MIB
                );
            }
            if mode.uses_mlock() && buffer.is_host() {
                locked.lock(buffer.base(), buffer.size());
            }
            model.buffer_sizes.push((
                buffer.name().to_string(),
                ggml::meta::reported_size(&buffer),
            ));
            model.buffers.push(buffer);
        }
    }
    model.locked = locked;
    if params.no_alloc {
        return Ok(());
    }

    let size_data: u64 = plan.iter().map(|p| p.size).sum();
    let mut size_done = 0u64;
    let mut cur_percentage = 0u32;
    let mut progress = |f: f32, cb: &mut Option<crate::model::ProgressCallback>| -> bool {
        match cb {
            Some(cb) => cb(f),
            None => {
                let percentage = (100.0 * f) as u32;
                while percentage > cur_percentage {
                    cur_percentage = percentage;
                    ggml::log_cont!(".");
                    if percentage >= 100 {
                        ggml::log_cont!("\n");
                    }
                }
                true
            }
        }
    };
    // one reader per file, opened when its first tensor is read
    let mut readers: Vec<Option<Reader>> = ml.shards.iter().map(|_| None).collect();
    let cancelled =
        || LlamaError::Unsupported("model loading was cancelled by the progress callback".into());
    for (i, p) in plan.iter().enumerate() {
        let f = if size_data == 0 {
            0.0
        } else {
            size_done as f32 / size_data as f32
        };
        if !progress(f, &mut params.progress_callback) {
            return Err(cancelled());
        }
        let t = &model.ctx[p.id];
        let size = p.size as usize;
        if params.check_tensors && in_place[i] {
            let range = p.file_offset as usize..(p.file_offset + p.size) as usize;
            let data = ml.shards[p.shard].gguf.data().get(range).unwrap_or(&[]);
            if let Some(why) = crate::validate::find_invalid(t.ty, data, t.ne[0] as u64) {
                return Err(LlamaError::InvalidData {
                    name: t.name.clone(),
                    why,
                });
            }
        }
        if !in_place[i] && size > 0 {
            let d = t.data.clone().expect("allocated above");
            let shard = &ml.shards[p.shard];
            if !mode.uses_mmap() && readers[p.shard].is_none() {
                readers[p.shard] = Some(open_reader(&shard.path, mode)?);
            }
            // buffers whose layout depends on the tensor (CPU_REPACK, a meta device's slices)
            // take the whole tensor at once
            let whole = d.buffer.tensor_io().is_some();
            match readers[p.shard].as_mut() {
                None => {
                    let bytes = shard.gguf.data();
                    let range = p.file_offset as usize..(p.file_offset + p.size) as usize;
                    let src = bytes
                        .get(range)
                        .ok_or_else(|| LlamaError::TensorOutOfBounds {
                            name: t.name.clone(),
                        })?;
                    if whole {
                        ggml::backend::set_tensor(t, src, 0)?;
                    } else {
                        d.buffer.set(d.addr, src)?;
                    }
                }
                Some(r) if whole => {
                    let staging = staging_buffer(size)?;
                    r.copy_into(
                        &shard.path,
                        &staging,
                        staging.base(),
                        shard.gguf.data_offset + p.file_offset,
                        size,
                    )?;
                    let mut bytes = vec![0u8; size];
                    staging.get(staging.base(), &mut bytes)?;
                    ggml::backend::set_tensor(t, &bytes, 0)?;
                }
                Some(r) => r.copy_into(
                    &shard.path,
                    &d.buffer,
                    d.addr,
                    shard.gguf.data_offset + p.file_offset,
                    size,
                )?,
            }
            if params.check_tensors {
                let mut data = vec![0u8; size];
                d.buffer.get(d.addr, &mut data)?;
                if let Some(why) = crate::validate::find_invalid(t.ty, &data, t.ne[0] as u64) {
                    return Err(LlamaError::InvalidData {
                        name: t.name.clone(),
                        why,
                    });
                }
            }
        }
        size_done += p.size;
    }
    if !progress(1.0, &mut params.progress_callback) {
        return Err(cancelled());
    }
    Ok(())
}
