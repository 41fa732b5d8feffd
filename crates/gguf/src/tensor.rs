//! Tensor infos: name, shape, type and where the data lies in the data section.

use crate::error::GgufError;
use crate::parse::{MAX_DIMS, MAX_NAME};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    pub n_dims: u32,
    /// ggml order (ne[0] is the row length); dimensions past `n_dims` are 1.
    pub ne: [u64; 4],
    pub ty: ggml::Type,
    /// Relative to the start of the data section.
    pub offset: u64,
    /// Bytes of data.
    pub size: u64,
}

impl TensorInfo {
    /// A tensor info with its size computed from shape and type; `offset` is 0 until a writer
    /// places it.
    pub fn new(
        name: impl Into<String>,
        ty: ggml::Type,
        shape: &[u64],
    ) -> Result<TensorInfo, GgufError> {
        let name = name.into();
        let bad = |what: String| Err(GgufError::Unwritable(format!("tensor '{name}': {what}")));
        if name.len() as u64 >= MAX_NAME {
            return bad(format!("name is too long: {} >= {MAX_NAME}", name.len()));
        }
        if shape.len() > MAX_DIMS as usize {
            return bad(format!(
                "invalid number of dimensions: {} > {MAX_DIMS}",
                shape.len()
            ));
        }
        let mut ne = [1u64; 4];
        ne[..shape.len()].copy_from_slice(shape);
        let block = ty.block_size() as u64;
        if !ne[0].is_multiple_of(block) {
            return bad(format!(
                "type {} has {} elements per row, not a multiple of block size ({block})",
                ty.name(),
                ne[0]
            ));
        }
        let n: Option<u64> = ne.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
        let size = n
            .filter(|&n| n <= i64::MAX as u64)
            .and_then(|n| (n / block).checked_mul(ty.type_size() as u64));
        let Some(size) = size else {
            return bad("too many elements".to_string());
        };
        Ok(TensorInfo {
            name,
            n_dims: shape.len() as u32,
            ne,
            ty,
            offset: 0,
            size,
        })
    }

    pub fn n_elements(&self) -> u64 {
        self.ne.iter().fold(1u64, |acc, &d| acc.saturating_mul(d))
    }

    /// The first `n_dims` dimensions.
    pub fn shape(&self) -> &[u64] {
        &self.ne[..(self.n_dims as usize).min(4)]
    }
}
