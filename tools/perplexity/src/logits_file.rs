//! The base log-probabilities file of `--kl-divergence-base` (llama.cpp's `--save-all-logits`
//! format, little-endian):
//!
//! ```text
//! "_logits_"                      8 bytes
//! n_ctx, n_vocab, n_chunk         3 x i32
//! tokens                          i32 x (n_chunk * n_ctx)
//! per chunk, per scored position  row_len(n_vocab) x u16   (n_ctx - 1 - n_ctx/2 rows a chunk)
//!   row = [scale: f32, min_log_prob: f32, q[0..n_vocab]: u16, pad to even]
//! ```

use crate::math::row_len;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use atomic_file::TmpGuard;

pub const MAGIC: &[u8; 8] = b"_logits_";

/// Scored positions per chunk: the second half of the context minus the last token.
pub fn rows_per_chunk(n_ctx: usize) -> usize {
    n_ctx - 1 - n_ctx / 2
}

/// Writes through `<path>.tmp<pid>`, renamed onto `path` by `finish`; dropped unfinished (or
/// killed by SIGINT/SIGTERM once `atomic_file::install_signal_cleanup` ran), the temporary file
/// is removed, so a failed run leaves no half file.
pub struct LogitsWriter {
    out: Option<BufWriter<File>>,
    tmp: Option<TmpGuard>,
    path: PathBuf,
}

impl LogitsWriter {
    pub fn create(path: &Path) -> std::io::Result<LogitsWriter> {
        // the rename at the end would fail after all the work
        if path.is_dir() {
            return Err(std::io::Error::other("is a directory"));
        }
        let (f, tmp) = atomic_file::create_tmp(path)?;
        Ok(LogitsWriter {
            out: Some(BufWriter::new(f)),
            tmp: Some(tmp),
            path: path.to_path_buf(),
        })
    }

    fn w(&mut self) -> std::io::Result<&mut BufWriter<File>> {
        self.out
            .as_mut()
            .ok_or_else(|| std::io::Error::other("logits file already finished"))
    }

    pub fn write_header(
        &mut self,
        n_ctx: i32,
        n_vocab: i32,
        n_chunk: i32,
        tokens: &[i32],
    ) -> std::io::Result<()> {
        let w = self.w()?;
        w.write_all(MAGIC)?;
        for v in [n_ctx, n_vocab, n_chunk] {
            w.write_all(&v.to_le_bytes())?;
        }
        let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
        w.write_all(&bytes)
    }

    pub fn write_rows(&mut self, rows: &[u16]) -> std::io::Result<()> {
        let bytes: Vec<u8> = rows.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.w()?.write_all(&bytes)
    }

    pub fn finish(mut self) -> std::io::Result<()> {
        if let Some(w) = self.out.take() {
            let f = w.into_inner().map_err(|e| e.into_error())?;
            f.sync_all()?;
        }
        match self.tmp.take() {
            Some(tmp) => tmp.commit(&self.path),
            None => Err(std::io::Error::other("logits file already finished")),
        }
    }
}

/// A read failure, worded as llama.cpp's messages (after `kl_divergence: `).
#[derive(Debug, PartialEq, Eq)]
pub enum ReadError {
    /// the path and the OS's reason
    Open(String, String),
    BadMagic(String),
    Header(String),
    Tokens(String),
    Chunk(usize),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Open(p, why) => write!(f, "failed to open {p}: {why}"),
            ReadError::BadMagic(p) => write!(
                f,
                "{p} does not look like a file containing log-probabilities"
            ),
            ReadError::Header(p) => write!(f, "failed reading n_vocab, n_chunk from {p}"),
            ReadError::Tokens(p) => write!(f, "failed reading evaluation tokens from {p}"),
            ReadError::Chunk(i) => write!(f, "failed reading log-probs for chunk {i}"),
        }
    }
}

pub struct LogitsReader {
    inp: BufReader<File>,
    pub n_ctx: u32,
    pub n_vocab: i32,
    pub n_chunk: i32,
    pub tokens: Vec<i32>,
}

fn read_i32(r: &mut impl Read) -> Option<i32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b).ok()?;
    Some(i32::from_le_bytes(b))
}

impl LogitsReader {
    /// Reads the header and the tokens; sizes are checked against the file's length before
    /// anything is allocated, so a damaged file is an error, not a huge allocation.
    pub fn open(path: &Path) -> Result<LogitsReader, ReadError> {
        let p = path.display().to_string();
        let f = File::open(path).map_err(|e| ReadError::Open(p.clone(), e.to_string()))?;
        let file_len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let mut inp = BufReader::new(f);
        let mut magic = [0u8; 8];
        if inp.read_exact(&mut magic).is_err() || &magic != MAGIC {
            return Err(ReadError::BadMagic(p));
        }
        let n_ctx = read_i32(&mut inp).ok_or_else(|| ReadError::Header(p.clone()))? as u32;
        let n_vocab = read_i32(&mut inp).ok_or_else(|| ReadError::Header(p.clone()))?;
        let n_chunk = read_i32(&mut inp).ok_or_else(|| ReadError::Header(p.clone()))?;
        if n_vocab <= 0 || n_chunk < 0 || n_ctx < 2 || n_ctx > i32::MAX as u32 {
            return Err(ReadError::Header(p));
        }
        let n_tokens = n_ctx as u64 * n_chunk as u64;
        if 20 + n_tokens * 4 > file_len {
            return Err(ReadError::Tokens(p));
        }
        let mut bytes = vec![0u8; n_tokens as usize * 4];
        inp.read_exact(&mut bytes)
            .map_err(|_| ReadError::Tokens(p.clone()))?;
        let tokens = bytes
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(LogitsReader {
            inp,
            n_ctx,
            n_vocab,
            n_chunk,
            tokens,
        })
    }

    /// u16 values of one chunk's rows.
    pub fn chunk_len(&self) -> usize {
        rows_per_chunk(self.n_ctx as usize) * row_len(self.n_vocab as usize)
    }

    /// Reads chunk `i` (0-based, in order) into `out` (`chunk_len()` values).
    pub fn read_chunk(&mut self, i: usize, out: &mut [u16]) -> Result<(), ReadError> {
        let mut bytes = vec![0u8; out.len() * 2];
        self.inp
            .read_exact(&mut bytes)
            .map_err(|_| ReadError::Chunk(i))?;
        for (o, c) in out.iter_mut().zip(bytes.chunks_exact(2)) {
            *o = u16::from_le_bytes([c[0], c[1]]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ppl-logits-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn round_trip_and_layout() {
        let d = dir("rt");
        let path = d.join("base.kld");
        let (n_ctx, n_vocab, n_chunk) = (8usize, 5usize, 2usize);
        let tokens: Vec<i32> = (0..(n_ctx * n_chunk) as i32).collect();
        let rows = rows_per_chunk(n_ctx) * row_len(n_vocab);
        assert_eq!(rows_per_chunk(n_ctx), 3);
        assert_eq!(row_len(n_vocab), 10);
        let mut w = LogitsWriter::create(&path).unwrap();
        w.write_header(n_ctx as i32, n_vocab as i32, n_chunk as i32, &tokens)
            .unwrap();
        for c in 0..n_chunk {
            let chunk: Vec<u16> = (0..rows).map(|i| (c * 1000 + i) as u16).collect();
            w.write_rows(&chunk).unwrap();
        }
        assert!(!path.exists(), "nothing at the final path before finish");
        w.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], b"_logits_");
        assert_eq!(&bytes[8..12], &8i32.to_le_bytes());
        assert_eq!(&bytes[12..16], &5i32.to_le_bytes());
        assert_eq!(&bytes[16..20], &2i32.to_le_bytes());
        assert_eq!(bytes.len(), 20 + 16 * 4 + 2 * rows * 2);

        let mut r = LogitsReader::open(&path).unwrap();
        assert_eq!((r.n_ctx, r.n_vocab, r.n_chunk), (8, 5, 2));
        assert_eq!(r.tokens, tokens);
        let mut buf = vec![0u16; r.chunk_len()];
        r.read_chunk(0, &mut buf).unwrap();
        assert_eq!(buf[29], 29);
        r.read_chunk(1, &mut buf).unwrap();
        assert_eq!(buf[0], 1000);
        assert_eq!(r.read_chunk(2, &mut buf), Err(ReadError::Chunk(2)));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn unfinished_writer_leaves_nothing() {
        let d = dir("drop");
        let path = d.join("x.kld");
        {
            let mut w = LogitsWriter::create(&path).unwrap();
            w.write_header(4, 3, 1, &[1, 2, 3, 4]).unwrap();
        }
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
        let e = LogitsWriter::create(&d)
            .err()
            .expect("a directory is refused");
        assert_eq!(e.to_string(), "is a directory");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn damaged_files_are_errors() {
        let d = dir("bad");
        let p = d.join("f");
        assert!(matches!(LogitsReader::open(&p), Err(ReadError::Open(..))));
        std::fs::write(&p, b"_logits").unwrap();
        assert!(matches!(
            LogitsReader::open(&p),
            Err(ReadError::BadMagic(_))
        ));
        std::fs::write(&p, b"_logits_\x08\x00").unwrap();
        assert!(matches!(LogitsReader::open(&p), Err(ReadError::Header(_))));
        // a header that claims two billion tokens in a tiny file
        let mut b = b"_logits_".to_vec();
        for v in [65536i32, 10, 32768] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        std::fs::write(&p, &b).unwrap();
        assert!(matches!(LogitsReader::open(&p), Err(ReadError::Tokens(_))));
        assert_eq!(
            ReadError::BadMagic("f".into()).to_string(),
            "f does not look like a file containing log-probabilities"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
