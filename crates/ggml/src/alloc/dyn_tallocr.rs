//! The dynamic tensor allocator of one buffer type (ggml's `ggml_dyn_tallocr`): a simulation that
//! hands out (chunk, offset) pairs from sorted free-block lists and records how large each chunk
//! must be. Nothing is allocated here; the graph allocator sizes real buffers from `max_size`.
//!
//! Byte-for-byte faithfulness matters: the compute-buffer sizes printed at start-up are compared
//! with llama.cpp's, so the block choice (best fit among the non-last blocks, else the last block
//! with the best "reuse factor"), the merge rules and the alignment rounding follow ggml exactly.

use super::AllocError;

pub(crate) const MAX_FREE_BLOCKS: usize = 256;
pub(crate) const MAX_CHUNKS: usize = 16;

/// A place inside a virtual buffer made of up to [`MAX_CHUNKS`] backend buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BufferAddress {
    pub chunk: usize,
    pub offset: usize,
}

#[derive(Clone, Copy, Debug)]
struct FreeBlock {
    offset: usize,
    size: usize,
}

#[derive(Clone, Debug)]
struct Chunk {
    /// Sorted by offset; the last block is the open end of the chunk.
    free_blocks: Vec<FreeBlock>,
    max_size: usize,
}

#[derive(Clone, Debug)]
pub(crate) struct DynTallocr {
    pub(crate) alignment: usize,
    max_chunk_size: usize,
    chunks: Vec<Chunk>,
}

/// Rounds `offset` up to a multiple of the (power of two) alignment.
pub(crate) fn align_up(offset: usize, alignment: usize) -> usize {
    debug_assert!(alignment.is_power_of_two());
    offset + (alignment - offset % alignment) % alignment
}

impl DynTallocr {
    pub(crate) fn new(alignment: usize, max_buffer_size: usize) -> DynTallocr {
        DynTallocr {
            alignment,
            max_chunk_size: max_buffer_size.min(usize::MAX / 2),
            chunks: Vec::new(),
        }
    }

    pub(crate) fn reset(&mut self) {
        self.chunks.clear();
    }

    pub(crate) fn n_chunks(&self) -> usize {
        self.chunks.len()
    }

    /// The bytes chunk `c` must hold (0 for a chunk that does not exist).
    pub(crate) fn max_size(&self, c: usize) -> usize {
        self.chunks.get(c).map_or(0, |ch| ch.max_size)
    }

    fn new_chunk(&mut self, min_size: usize) -> Option<usize> {
        if self.chunks.len() >= MAX_CHUNKS {
            return None;
        }
        // a chunk may exceed the maximum when one tensor does, and the last chunk is unbounded so
        // that the backend either manages the allocation or reports the error
        let mut size = min_size.max(self.max_chunk_size);
        if self.chunks.len() == MAX_CHUNKS - 1 {
            size = usize::MAX / 2;
        }
        self.chunks.push(Chunk {
            free_blocks: vec![FreeBlock { offset: 0, size }],
            max_size: 0,
        });
        Some(self.chunks.len() - 1)
    }

    pub(crate) fn alloc(&mut self, size: usize, name: &str) -> Result<BufferAddress, AllocError> {
        let size = align_up(size, self.alignment);
        let mut best: Option<(usize, usize)> = None;
        let mut max_avail = 0usize;

        // best fit among every block but the last one of each chunk
        for (c, chunk) in self.chunks.iter().enumerate() {
            let mut best_fit_size = usize::MAX;
            let n = chunk.free_blocks.len();
            for (i, block) in chunk
                .free_blocks
                .iter()
                .enumerate()
                .take(n.saturating_sub(1))
            {
                max_avail = max_avail.max(block.size);
                if block.size >= size && block.size <= best_fit_size {
                    best = Some((c, i));
                    best_fit_size = block.size;
                }
            }
        }

        if best.is_none() {
            // the last block of a chunk: prefer the one that wastes nothing or grows the chunk least
            let mut best_reuse = i64::MIN;
            for (c, chunk) in self.chunks.iter().enumerate() {
                if let Some(block) = chunk.free_blocks.last() {
                    max_avail = max_avail.max(block.size);
                    // size_t arithmetic reinterpreted as int64_t, as ggml computes it
                    let reuse = chunk.max_size.wrapping_sub(block.offset).wrapping_sub(size) as i64;
                    let better_reuse = best_reuse < 0 && reuse > best_reuse;
                    let better_fit = reuse >= 0 && reuse < best_reuse;
                    if block.size >= size && (better_reuse || better_fit) {
                        best = Some((c, chunk.free_blocks.len() - 1));
                        best_reuse = reuse;
                    }
                }
            }
        }

        let (c, b) = match best {
            Some(cb) => cb,
            None => match self.new_chunk(size) {
                Some(c) => (c, 0),
                None => {
                    crate::log_error!(
                        "{}: not enough space in the buffer to allocate {} bytes, largest block available {} bytes\n",
                        "ggml_dyn_tallocr_alloc",
                        size,
                        max_avail
                    );
                    return Err(AllocError::OutOfSpace {
                        tensor: name.to_string(),
                        size,
                        max_avail,
                    });
                }
            },
        };

        let chunk = &mut self.chunks[c];
        let block = &mut chunk.free_blocks[b];
        let addr = BufferAddress {
            chunk: c,
            offset: block.offset,
        };
        block.offset += size;
        block.size -= size;
        if block.size == 0 {
            chunk.free_blocks.remove(b);
        }
        chunk.max_size = chunk.max_size.max(addr.offset + size);
        Ok(addr)
    }

    /// Returns bytes to the chunk's free list, merging with the neighbouring blocks.
    pub(crate) fn free_bytes(
        &mut self,
        addr: BufferAddress,
        size: usize,
    ) -> Result<(), AllocError> {
        let size = align_up(size, self.alignment);
        let chunk = &mut self.chunks[addr.chunk];
        let blocks = &mut chunk.free_blocks;
        for i in 0..blocks.len() {
            if blocks[i].offset + blocks[i].size == addr.offset {
                blocks[i].size += size;
                if i + 1 < blocks.len() && blocks[i].offset + blocks[i].size == blocks[i + 1].offset
                {
                    blocks[i].size += blocks[i + 1].size;
                    blocks.remove(i + 1);
                }
                return Ok(());
            }
            if addr.offset + size == blocks[i].offset {
                blocks[i].offset = addr.offset;
                blocks[i].size += size;
                if i > 0 && blocks[i - 1].offset + blocks[i - 1].size == blocks[i].offset {
                    blocks[i - 1].size += blocks[i].size;
                    blocks.remove(i);
                }
                return Ok(());
            }
        }
        if blocks.len() >= MAX_FREE_BLOCKS {
            return Err(AllocError::OutOfFreeBlocks);
        }
        let pos = blocks
            .iter()
            .position(|b| b.offset >= addr.offset)
            .unwrap_or(blocks.len());
        blocks.insert(
            pos,
            FreeBlock {
                offset: addr.offset,
                size,
            },
        );
        Ok(())
    }

    #[cfg(test)]
    pub(crate) fn free_list(&self, c: usize) -> Vec<(usize, usize)> {
        self.chunks[c]
            .free_blocks
            .iter()
            .map(|b| (b.offset, b.size))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_fit_prefers_the_smallest_inner_block_and_the_last_of_equal_sizes() {
        let mut a = DynTallocr::new(32, usize::MAX);
        let x: Vec<_> = (0..6)
            .map(|i| a.alloc(64, &format!("t{i}")).unwrap())
            .collect();
        // free 64 @0, 128 @128.. (t2,t3), 64 @320 (t5 is the end -> merges into the last block)
        a.free_bytes(x[0], 64).unwrap();
        a.free_bytes(x[2], 64).unwrap();
        a.free_bytes(x[3], 64).unwrap();
        assert_eq!(
            a.free_list(0),
            vec![(0, 64), (128, 128), (384, usize::MAX / 2 - 384)]
        );
        a.free_bytes(x[5], 64).unwrap();
        assert_eq!(
            a.free_list(0),
            vec![(0, 64), (128, 128), (320, usize::MAX / 2 - 320)]
        );
        // 33 bytes round up to 64 and take the exact 64-byte hole at 0
        assert_eq!(
            a.alloc(33, "y").unwrap(),
            BufferAddress {
                chunk: 0,
                offset: 0
            }
        );
        // 96 bytes fit only the 128 hole
        assert_eq!(
            a.alloc(96, "z").unwrap(),
            BufferAddress {
                chunk: 0,
                offset: 128
            }
        );
        assert_eq!(a.max_size(0), 384);
    }

    #[test]
    fn the_last_block_reuses_freed_tail_memory_before_growing() {
        let mut a = DynTallocr::new(16, usize::MAX);
        let t0 = a.alloc(100, "t0").unwrap();
        let _t1 = a.alloc(100, "t1").unwrap();
        assert_eq!(a.max_size(0), 224);
        a.free_bytes(t0, 100).unwrap();
        // 200 bytes do not fit the 112 hole at 0, so they go to the end and grow the chunk
        assert_eq!(a.alloc(200, "t2").unwrap().offset, 112 + 112);
        assert_eq!(a.max_size(0), 224 + 208);
    }

    #[test]
    fn chunks_open_above_the_max_size_and_a_big_tensor_gets_its_own() {
        let mut a = DynTallocr::new(8, 100);
        assert_eq!(
            a.alloc(60, "a").unwrap(),
            BufferAddress {
                chunk: 0,
                offset: 0
            }
        );
        assert_eq!(
            a.alloc(60, "b").unwrap(),
            BufferAddress {
                chunk: 1,
                offset: 0
            }
        );
        assert_eq!(
            a.alloc(300, "c").unwrap(),
            BufferAddress {
                chunk: 2,
                offset: 0
            }
        );
        // the 300-byte chunk has no free block left; of the two equal tails the first one wins
        assert_eq!(
            a.alloc(32, "d").unwrap(),
            BufferAddress {
                chunk: 0,
                offset: 64
            }
        );
        assert_eq!((a.max_size(0), a.max_size(1), a.max_size(2)), (96, 64, 304));
        // 40 bytes fit no tail (36 left in chunks 0 and 1 minus d), so a fourth chunk opens
        assert_eq!(
            a.alloc(40, "e").unwrap(),
            BufferAddress {
                chunk: 3,
                offset: 0
            }
        );
    }
}
