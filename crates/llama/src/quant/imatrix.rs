//! Importance matrix files as llama-imatrix writes them (common_imatrix_load): the GGUF format
//! (`<tensor>.in_sum2` and `<tensor>.counts` F32 tensors, keys `imatrix.datasets`,
//! `imatrix.chunk_count`, `imatrix.chunk_size`) and the legacy binary `.dat` format, and
//! llama-quantize's reduction of them to one weight per column (load_imatrix).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use ggml::Type;
use gguf::{GgufFile, Value};

/// One tensor's accumulated statistics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImatrixEntry {
    /// Sums of squared activations, one per column of each matrix (experts one after another).
    pub sums: Vec<f32>,
    /// How many rows each matrix saw (the legacy format has one count: the number of calls).
    pub counts: Vec<i64>,
}

/// A loaded file (llama.cpp's `common_imatrix`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Imatrix {
    pub entries: BTreeMap<String, ImatrixEntry>,
    pub datasets: Vec<String>,
    pub chunk_count: i32,
    pub chunk_size: i32,
    pub is_legacy: bool,
    /// The GGUF file had all three imatrix.* keys.
    pub has_metadata: bool,
}

/// Why a file could not be read; the texts are llama.cpp's log lines.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ImatrixError {
    #[error("common_imatrix_load_legacy: failed to open {0}")]
    Open(String),
    #[error("{0}: no data in file {1}")]
    NoData(&'static str, String),
    #[error("common_imatrix_load_legacy: failed reading name for entry {0} from {1}")]
    Name(usize, String),
    #[error("common_imatrix_load_legacy: failed reading number of values for entry {0}")]
    NumValues(usize),
    #[error("common_imatrix_load_legacy: failed reading data for entry {0}")]
    Data(usize),
    #[error("common_imatrix_load: mismatched sums and counts for {0}")]
    Mismatched(String),
    #[error("common_imatrix_load: sums and counts for {0} must be F32")]
    NotF32(String),
}

/// A little-endian reader that reports running out as `None`, like a failed ifstream.
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.data.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    fn i32(&mut self) -> Option<i32> {
        self.take(4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

fn load_legacy(path: &Path) -> Result<Imatrix, ImatrixError> {
    let name = path.display().to_string();
    let data = std::fs::read(path).map_err(|_| ImatrixError::Open(name.clone()))?;
    let mut c = Cursor {
        data: &data,
        pos: 0,
    };
    let n_entries = match c.i32() {
        Some(n) if n >= 1 => n as usize,
        _ => return Err(ImatrixError::NoData("common_imatrix_load_legacy", name)),
    };
    let mut m = Imatrix {
        is_legacy: true,
        ..Default::default()
    };
    for i in 0..n_entries {
        let len = c.i32().unwrap_or(-1);
        let bytes = usize::try_from(len)
            .ok()
            .and_then(|l| c.take(l))
            .ok_or_else(|| ImatrixError::Name(i + 1, name.clone()))?;
        // The name is read as a C string: it ends at the first NUL.
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        let tname = String::from_utf8_lossy(&bytes[..end]).into_owned();
        let ncall = c.i32();
        let nval = c.i32();
        let (Some(ncall), Some(nval)) = (ncall, nval) else {
            return Err(ImatrixError::NumValues(i));
        };
        if nval < 1 {
            return Err(ImatrixError::NumValues(i));
        }
        let raw = c.take(nval as usize * 4).ok_or(ImatrixError::Data(i))?;
        let sums = raw
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        m.entries.insert(
            tname,
            ImatrixEntry {
                sums,
                counts: vec![ncall as i64],
            },
        );
    }
    // Optional trailer: the chunk count and the dataset's name.
    if c.pos < data.len() {
        if let Some(n) = c.i32() {
            m.chunk_count = n;
            if let Some(len) = c.i32().filter(|&l| l > 0) {
                if let Some(b) = c.take(len as usize) {
                    let end = b.iter().position(|&x| x == 0).unwrap_or(b.len());
                    m.datasets
                        .push(String::from_utf8_lossy(&b[..end]).into_owned());
                }
            }
        }
    }
    Ok(m)
}

fn f32s(f: &GgufFile, t: &gguf::TensorInfo) -> Vec<f32> {
    f.tensor_data(t)
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// Reads an imatrix file: GGUF if it parses as one, else the legacy format.
pub fn load(path: &Path) -> Result<Imatrix, ImatrixError> {
    let Ok(f) = GgufFile::open(path) else {
        return load_legacy(path);
    };
    let name = path.display().to_string();
    if f.tensors.is_empty() {
        return Err(ImatrixError::NoData("common_imatrix_load", name));
    }
    let mut m = Imatrix::default();
    let datasets = f.get("imatrix.datasets");
    if let Some(Value::Array(a)) = datasets {
        if let Some(strs) = a.strings() {
            m.datasets = strs.into_iter().map(String::from).collect();
        }
    }
    let chunk_count = f.get("imatrix.chunk_count");
    let chunk_size = f.get("imatrix.chunk_size");
    m.has_metadata = datasets.is_some() && chunk_count.is_some() && chunk_size.is_some();
    m.chunk_count = chunk_count.and_then(|v| v.as_u64()).unwrap_or(0) as i32;
    m.chunk_size = chunk_size.and_then(|v| v.as_u64()).unwrap_or(0) as i32;

    type Pair<'a> = (Option<&'a gguf::TensorInfo>, Option<&'a gguf::TensorInfo>);
    let mut pairs: BTreeMap<&str, Pair> = BTreeMap::new();
    for t in &f.tensors {
        if let Some(base) = t.name.strip_suffix(".in_sum2") {
            pairs.entry(base).or_default().0 = Some(t);
        } else if let Some(base) = t.name.strip_suffix(".counts") {
            pairs.entry(base).or_default().1 = Some(t);
        }
    }
    for (base, pair) in pairs {
        if base.is_empty() {
            continue;
        }
        let (Some(sums), Some(counts)) = pair else {
            return Err(ImatrixError::Mismatched(base.to_string()));
        };
        if sums.ty != Type::F32 || counts.ty != Type::F32 {
            return Err(ImatrixError::NotF32(base.to_string()));
        }
        m.entries.insert(
            base.to_string(),
            ImatrixEntry {
                sums: f32s(&f, sums),
                counts: f32s(&f, counts)
                    .into_iter()
                    .map(|c| c.round() as i64)
                    .collect(),
            },
        );
    }
    Ok(m)
}

/// What llama-quantize takes from a file: per tensor, the mean squared activation of each
/// column (load_imatrix). Entries without counts are skipped with the message returned in
/// the second element.
pub fn importance(m: &Imatrix) -> (HashMap<String, Vec<f32>>, Vec<String>) {
    let mut out = HashMap::new();
    let mut skipped = Vec::new();
    for (name, e) in &m.entries {
        let ncounts = e.counts.len();
        if ncounts == 0 {
            skipped.push(format!(
                "load_imatrix: no counts for entry '{name}', skipping"
            ));
            continue;
        }
        let nsums = e.sums.len();
        if nsums == 0 {
            continue;
        }
        let ne0 = nsums / ncounts;
        let mut values = vec![0f32; nsums];
        if !m.is_legacy {
            for j in 0..ncounts {
                let count = e.counts[j] as f32;
                for i in 0..ne0 {
                    values[j * ne0 + i] = if count > 0.0 {
                        e.sums[j * ne0 + i] / count
                    } else {
                        1.0
                    };
                }
            }
        } else {
            let ncall = e.counts[0];
            for i in 0..nsums {
                values[i] = if ncall > 0 {
                    e.sums[i] / ncall as f32
                } else {
                    e.sums[i]
                };
            }
        }
        out.insert(name.clone(), values);
    }
    (out, skipped)
}

/// prepare_imatrix's filters: drop entries whose name contains any `exclude` string, or
/// (when `include` is not empty) keep only those containing an `include` string.
pub fn filter(data: &mut HashMap<String, Vec<f32>>, include: &[String], exclude: &[String]) {
    if !exclude.is_empty() {
        data.retain(|k, _| !exclude.iter().any(|x| k.contains(x.as_str())));
    }
    if !include.is_empty() {
        data.retain(|k, _| include.iter().any(|x| k.contains(x.as_str())));
    }
}
