//! `--kl-divergence`: decode the chunks saved in a base log-probabilities file and compare this
//! model's distribution at every scored position with the base model's (llama.cpp's
//! `kl_divergence()`), printing the running statistics per chunk and the summary blocks.

use crate::logits_file::{rows_per_chunk, LogitsReader};
use crate::math::{kld_token, row_len, KldSums};
use crate::ppl::{print_eta, PplOptions};
use crate::progress::Progress;
use crate::report::{chunk_row, summary, CHUNK_HEADER};
use common::{log_err, log_out, log_wrn};
use llama::{Batch, Context};
use rayon::prelude::*;
use std::time::Instant;

/// Returns false after logging why when the comparison could not be made (no, unreadable or
/// mismatched base file, a failed decode).
pub fn kl_divergence(ctx: &mut Context, o: &PplOptions) -> bool {
    let Some(path) = &o.logits_file else {
        log_err!("kl_divergence: you must provide a name of a file containing the log probabilities of the base model\n");
        return false;
    };
    let mut file = match LogitsReader::open(path) {
        Ok(f) => f,
        Err(e) => {
            log_err!("kl_divergence: {}\n", e);
            return false;
        }
    };
    let model = ctx.model().clone();
    let vocab = model.vocab();
    let n_ctx = file.n_ctx as usize;
    if file.n_ctx > ctx.n_ctx() {
        log_err!(
            "kl_divergence: {} has been computed with {}, while the current context is {}. Increase it with -c and retry\n",
            path.display(),
            file.n_ctx,
            o.n_ctx
        );
    }
    let n_vocab = vocab.n_tokens();
    if file.n_vocab as usize != n_vocab {
        // llama.cpp carries on and reads past the rows; a mismatched file cannot be compared
        log_err!(
            "kl_divergence: inconsistent vocabulary ({} vs {})\n",
            file.n_vocab,
            n_vocab
        );
        return false;
    }
    let n_chunk = file.n_chunk as usize;
    let n_batch = o.n_batch;
    let num_batches = n_ctx.div_ceil(n_batch);
    let nv = row_len(n_vocab);
    let add_bos = vocab.add_bos();
    let first = n_ctx / 2;
    let n_scored = rows_per_chunk(n_ctx);

    let mut n_seq = (n_batch / n_ctx).max(1);
    let n_seq_max = ctx.n_seq_max() as usize;
    if n_seq > n_seq_max {
        log_wrn!(
            "kl_divergence: calculated n_seq={} exceeds context's n_seq_max={}, capping at {}\n",
            n_seq,
            n_seq_max,
            n_seq_max
        );
        n_seq = n_seq_max;
    }
    common::log_inf!(
        "kl_divergence: computing over {} chunks, n_ctx={}, batch_size={}, n_seq={}\n",
        n_chunk,
        n_ctx,
        n_batch,
        n_seq
    );

    let mut kld = KldSums::default();
    let mut kld_values: Vec<f32> = Vec::with_capacity(n_scored * n_chunk);
    let mut p_diff_values: Vec<f32> = Vec::with_capacity(n_scored * n_chunk);
    let mut base = vec![0u16; file.chunk_len()];
    let mut logits: Vec<f32> = Vec::new();
    let mut batch = Batch::new();
    let mut progress = Progress::new(n_chunk as u64, "chunks");

    let mut i = 0;
    while i < n_chunk {
        let start = i * n_ctx;
        let end = start + n_ctx;
        let n_seq_batch = n_seq.min(n_chunk - i);
        let t_start = Instant::now();
        ctx.memory_clear(true);
        for j in 0..num_batches {
            let batch_start = start + j * n_batch;
            let batch_size = (end - batch_start).min(n_batch);
            let mut n_outputs = 0;
            batch.clear();
            for seq in 0..n_seq_batch {
                let seq_start = batch_start + seq * n_ctx;
                for k in 0..batch_size {
                    let tok = if add_bos && j == 0 && k == 0 {
                        vocab.bos()
                    } else {
                        file.tokens[seq_start + k]
                    };
                    let pos = (j * n_batch + k) as i32;
                    let out = pos as usize >= first;
                    batch.add(tok, pos, &[seq as i32], out);
                    n_outputs += usize::from(out);
                }
            }
            if ctx.decode(&batch) != 0 {
                progress.finish();
                log_err!("kl_divergence : failed to eval\n");
                return false;
            }
            if num_batches > 1 && n_outputs > 0 {
                if let Some(r) = ctx.get_logits().get(..n_outputs * n_vocab) {
                    logits.extend_from_slice(r);
                }
            }
        }
        if i == 0 {
            let t_total = t_start.elapsed().as_secs_f32();
            progress.suspend(|| print_eta("kl_divergence", t_total, n_chunk as f32 / n_seq as f32));
        }

        for seq in 0..n_seq_batch {
            if let Err(e) = file.read_chunk(i + seq, &mut base) {
                progress.finish();
                log_err!("kl_divergence: {}\n", e);
                return false;
            }
            let all: &[f32] = if num_batches > 1 {
                &logits
            } else {
                ctx.get_logits()
            };
            let first_row = if num_batches > 1 {
                0
            } else {
                seq * (n_ctx - first)
            };
            let Some(chunk_logits) = all.get(first_row * n_vocab..(first_row + n_scored) * n_vocab)
            else {
                progress.finish();
                log_err!("kl_divergence: the context returned fewer logits than requested\n");
                return false;
            };
            let toks = &file.tokens[start + seq * n_ctx + first..start + seq * n_ctx + n_ctx];
            if toks.iter().any(|&t| t < 0 || t as usize >= n_vocab) {
                progress.finish();
                log_err!(
                    "kl_divergence: {} holds tokens outside the vocabulary\n",
                    path.display()
                );
                return false;
            }
            let per_token: Vec<(KldSums, f64, f32)> = (0..n_scored)
                .into_par_iter()
                .map(|r| {
                    let mut k = KldSums::default();
                    let (v, d) = kld_token(
                        &chunk_logits[r * n_vocab..(r + 1) * n_vocab],
                        &base[r * nv..(r + 1) * nv],
                        toks[r + 1] as usize,
                        &mut k,
                    );
                    (k, v, d)
                })
                .collect();
            for (k, v, d) in per_token {
                kld.merge(&k);
                kld_values.push(v as f32);
                p_diff_values.push(d);
            }
            progress.suspend(|| {
                log_out!("\n");
                log_out!("{}", CHUNK_HEADER);
                log_out!("{}", chunk_row(i + seq + 1, &kld));
            });
        }
        logits.clear();
        progress.inc(n_seq_batch as u64);
        i += n_seq;
    }
    progress.finish();
    log_out!("\n");
    if kld.count < 100 {
        // too few values for statistics
        return true;
    }
    log_out!("{}", summary(&kld, &mut kld_values, &mut p_diff_values));
    true
}
