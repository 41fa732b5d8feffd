//! A context's state and session files (llama_state_get_data / set_data, llama_state_save_file
//! / load_file), byte-compatible with llama.cpp: the state is the architecture's name followed
//! by the memory module (the KV cache); logits are not part of it, which is why a session's
//! user replays its last token. A session file is
//!
//! ```text
//! u32 magic 'ggsn', u32 version 10, u32 n_token_count, n_token_count x i32 tokens, state
//! ```
//!
//! Saving goes through a temporary file renamed into place, so an interrupted save never leaves
//! a truncated session that the next run would refuse.

use crate::context::Context;
use crate::error::{LlamaError, Result};
use crate::kv_state::StateReader;
use std::io::{BufReader, Read, Write};
use std::path::Path;

/// LLAMA_FILE_MAGIC_GGSN
pub const SESSION_MAGIC: u32 = 0x6767_736e;
/// LLAMA_SESSION_VERSION
pub const SESSION_VERSION: u32 = 10;

fn fail(why: impl Into<String>) -> LlamaError {
    LlamaError::Unsupported(why.into())
}

impl Context {
    fn arch_name(&self) -> &str {
        self.model.arch().map_or("unknown", |a| a.name())
    }

    fn check_streams(&self) -> Result<()> {
        // llama.cpp keeps one stream per sequence when the cache is not unified; ours is one
        if !self.cparams.kv_unified && self.cparams.n_seq_max > 1 {
            return Err(fail(
                "the state of a non-unified KV cache with several sequences cannot be saved by this build",
            ));
        }
        Ok(())
    }

    /// llama_state_get_data: the whole state as bytes.
    pub fn state_get_data(&self) -> Result<Vec<u8>> {
        self.check_streams()?;
        let mut out = Vec::new();
        let arch = self.arch_name().as_bytes();
        out.extend_from_slice(&(arch.len() as u32).to_le_bytes());
        out.extend_from_slice(arch);
        self.kv
            .state_write(&self.model, self.cparams.n_seq_max, &mut out);
        Ok(out)
    }

    /// llama_state_set_data: restores a state; returns the bytes it read.
    pub fn state_set_data(&mut self, data: &[u8]) -> Result<usize> {
        let mut r = StateReader::new(data);
        self.state_read(&mut r)?;
        Ok(r.n_read)
    }

    fn state_read<R: Read>(&mut self, r: &mut StateReader<R>) -> Result<()> {
        self.check_streams()?;
        let cur = self.arch_name().to_string();
        let arch = r.string(1 << 16)?;
        if arch != cur {
            return Err(fail(format!(
                "wrong model arch: '{arch}' instead of '{cur}'"
            )));
        }
        let n_seq_max = self.cparams.n_seq_max;
        let model = self.model.clone();
        self.kv.state_read(&model, n_seq_max, r)?;
        // the graph kept for reuse was built for the old contents
        self.prev = None;
        Ok(())
    }

    /// llama_state_save_file: the prompt's tokens and the state.
    pub fn state_save_file(&self, path: &Path, tokens: &[i32]) -> Result<()> {
        let state = self.state_get_data()?;
        let io = |e: std::io::Error| LlamaError::Io {
            path: path.to_path_buf(),
            source: e,
        };
        let (file, guard) = atomic_file::create_tmp(path).map_err(io)?;
        let mut w = std::io::BufWriter::new(file);
        let mut head = Vec::with_capacity(12 + tokens.len() * 4);
        for v in [SESSION_MAGIC, SESSION_VERSION, tokens.len() as u32] {
            head.extend_from_slice(&v.to_le_bytes());
        }
        for t in tokens {
            head.extend_from_slice(&t.to_le_bytes());
        }
        w.write_all(&head).map_err(io)?;
        w.write_all(&state).map_err(io)?;
        let file = w.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)?;
        guard.commit(path).map_err(io)
    }

    /// llama_state_load_file: restores the state and returns the tokens it was saved with (at
    /// most `n_token_capacity`). The error text is llama.cpp's.
    pub fn state_load_file(&mut self, path: &Path, n_token_capacity: usize) -> Result<Vec<i32>> {
        let io = |e: std::io::Error| LlamaError::Io {
            path: path.to_path_buf(),
            source: e,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        let size = file.metadata().map_err(io)?.len() as usize;
        let mut r = StateReader::new(BufReader::new(file));
        let magic = r.u32()?;
        let version = r.u32()?;
        if magic != SESSION_MAGIC || version != SESSION_VERSION {
            return Err(fail(format!(
                "unknown (magic, version) for session file: {magic:08x}, {version:08x}"
            )));
        }
        let n_token_count = r.u32()? as usize;
        if n_token_count > n_token_capacity {
            return Err(fail(format!(
                "token count in session file exceeded capacity! {n_token_count} > {n_token_capacity}"
            )));
        }
        let mut raw = vec![0u8; n_token_count * 4];
        r.bytes(&mut raw)?;
        let tokens = raw
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let n_state = size.saturating_sub(r.n_read);
        let start = r.n_read;
        self.state_read(&mut r)?;
        let got = r.n_read - start;
        if got != n_state {
            return Err(fail(format!(
                "did not read all of the session file data! size {n_state}, got {got}"
            )));
        }
        Ok(tokens)
    }
}
