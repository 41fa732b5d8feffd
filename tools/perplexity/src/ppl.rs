//! Standard perplexity (`perplexity()` of llama.cpp) and the strided variant
//! (`perplexity_v2`, `--ppl-stride`). The text is tokenized whole and cut into chunks of n_ctx
//! tokens; each chunk starts from an empty KV cache with its first token replaced by BOS, and
//! only the second half of each chunk is scored, so every scored token has context. Several
//! chunks are decoded together as separate sequences when the batch holds them.

use crate::logits_file::LogitsWriter;
use crate::math::{log_softmax, quantize_log_probs, row_len, NllSums};
use crate::progress::Progress;
use common::{log_err, log_inf, log_out};
use llama::{Batch, Context};
use rayon::prelude::*;
use std::path::PathBuf;
use std::time::Instant;

/// What the scoring loops need from the command line.
#[derive(Clone, Debug)]
pub struct PplOptions {
    /// Tokens per chunk (the `-c` given, not the context's total).
    pub n_ctx: usize,
    /// `-b` after llama-perplexity's adjustment to the total context.
    pub n_batch: usize,
    /// `--chunks`, < 0 for all.
    pub n_chunks: i32,
    pub ppl_stride: i32,
    pub ppl_output_type: i32,
    /// `--kl-divergence-base`: where to save the log-probabilities (ppl mode) or read them.
    pub logits_file: Option<PathBuf>,
}

/// `%g` of printf for the tokenization time.
pub fn fmt_g(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let e_form = format!("{:.5e}", v);
    let x: i32 = e_form
        .split_once('e')
        .map_or(0, |(_, e)| e.parse().unwrap_or(0));
    let strip = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if !(-4..6).contains(&x) {
        let (m, _) = e_form.split_once('e').unwrap_or((&e_form, ""));
        format!(
            "{}e{}{:02}",
            strip(m.to_string()),
            if x < 0 { '-' } else { '+' },
            x.abs()
        )
    } else {
        strip(format!("{:.*}", (5 - x).max(0) as usize, v))
    }
}

/// "<func>: X seconds per pass - ETA [N hours ]M minutes" after the first pass.
pub fn print_eta(func: &str, t_total: f32, passes: f32) {
    log_inf!("{}: {:.2} seconds per pass - ETA ", func, t_total);
    let mut total_seconds = (t_total * passes) as i32;
    if total_seconds >= 60 * 60 {
        log_out!("{} hours ", total_seconds / (60 * 60));
        total_seconds %= 60 * 60;
    }
    log_out!("{:.2} minutes\n", total_seconds as f64 / 60.0);
}

/// The model's tokens of the whole text (common_tokenize with add_special = true).
fn tokenize(ctx: &Context, text: &[u8]) -> Vec<i32> {
    ctx.model().vocab().tokenize(text, true, false)
}

/// The rows of `logits` (n_vocab each) starting at output row `first_row`.
fn rows(logits: &[f32], first_row: usize, n_rows: usize, n_vocab: usize) -> Option<&[f32]> {
    logits.get(first_row * n_vocab..(first_row + n_rows) * n_vocab)
}

/// Runs the selected perplexity and returns the final estimate; errors were printed.
pub fn perplexity(ctx: &mut Context, prompt: &[u8], o: &PplOptions) -> Option<f64> {
    if o.ppl_stride > 0 {
        return perplexity_v2(ctx, prompt, o);
    }
    let model = ctx.model().clone();
    let vocab = model.vocab();
    let add_bos = vocab.add_bos();
    let n_ctx = o.n_ctx;

    let mut writer = None;
    if let Some(path) = &o.logits_file {
        match LogitsWriter::create(path) {
            Ok(w) => writer = Some(w),
            Err(e) => {
                log_err!(
                    "perplexity: failed to open {} for writing: {}\n",
                    path.display(),
                    e
                );
                return None;
            }
        }
        log_inf!("perplexity: saving all logits to {}\n", path.display());
    }

    let t1 = Instant::now();
    log_inf!("perplexity: tokenizing the input ..\n");
    let tokens = tokenize(ctx, prompt);
    let us = t1.elapsed().as_micros() as f64;
    log_inf!("perplexity: tokenization took {} ms\n", fmt_g(1e-3 * us));

    if tokens.len() < 2 * n_ctx {
        log_err!(
            "perplexity: you need at least {} tokens to evaluate perplexity with a context of {}\n",
            2 * n_ctx,
            n_ctx
        );
        log_err!(
            "perplexity: the data file you provided tokenizes to only {} tokens\n",
            tokens.len()
        );
        return None;
    }

    let n_chunk_max = tokens.len() / n_ctx;
    let n_chunk = if o.n_chunks < 0 {
        n_chunk_max
    } else {
        (o.n_chunks as usize).min(n_chunk_max)
    };
    let n_batch = o.n_batch;
    let n_vocab = vocab.n_tokens();
    let num_batches = n_ctx.div_ceil(n_batch);
    let n_seq = (n_batch / n_ctx).max(1);
    if !(n_batch < n_ctx || n_batch.is_multiple_of(n_ctx)) {
        log_err!(
            "perplexity: the batch size {} must be below the context size {} or a multiple of it\n",
            n_batch,
            n_ctx
        );
        return None;
    }

    log_inf!(
        "perplexity: calculating perplexity over {} chunks, n_ctx={}, batch_size={}, n_seq={}\n",
        n_chunk,
        n_ctx,
        n_batch,
        n_seq
    );

    let nv = row_len(n_vocab);
    if let Some(w) = writer.as_mut() {
        if let Err(e) = w.write_header(
            n_ctx as i32,
            n_vocab as i32,
            n_chunk as i32,
            &tokens[..n_chunk * n_ctx],
        ) {
            log_err!("perplexity: failed to write the logits file: {}\n", e);
            return None;
        }
    }

    // only the second half of each chunk is scored
    let first = n_ctx / 2;
    let n_scored = n_ctx - 1 - first;
    let mut sums = NllSums::default();
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
                    // the first token of a chunk is BOS, as the model saw it in training
                    let tok = if add_bos && j == 0 && k == 0 {
                        vocab.bos()
                    } else {
                        tokens[seq_start + k]
                    };
                    let pos = (j * n_batch + k) as i32;
                    let out = pos as usize >= first;
                    batch.add(tok, pos, &[seq as i32], out);
                    n_outputs += usize::from(out);
                }
            }
            if ctx.decode(&batch) != 0 {
                progress.finish();
                log_inf!("perplexity : failed to decode\n");
                return None;
            }
            if num_batches > 1 && n_outputs > 0 {
                logits.extend_from_slice(
                    rows(ctx.get_logits(), 0, n_outputs, n_vocab).unwrap_or(&[]),
                );
            }
        }

        if i == 0 {
            let t_total = t_start.elapsed().as_secs_f32();
            progress.suspend(|| print_eta("perplexity", t_total, n_chunk as f32 / n_seq as f32));
        }

        for seq in 0..n_seq_batch {
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
            let Some(chunk_logits) = rows(all, first_row, n_scored, n_vocab) else {
                progress.finish();
                log_err!("perplexity: the context returned fewer logits than requested\n");
                return None;
            };
            let toks = &tokens[start + seq * n_ctx + first..start + seq * n_ctx + n_ctx];
            if let Some(w) = writer.as_mut() {
                let mut log_probs = vec![0u16; n_scored * nv];
                let nlls: Vec<f64> = log_probs
                    .par_chunks_mut(nv)
                    .enumerate()
                    .map(|(r, row)| {
                        quantize_log_probs(
                            &chunk_logits[r * n_vocab..(r + 1) * n_vocab],
                            row,
                            toks[r + 1] as usize,
                        )
                    })
                    .collect();
                nlls.iter().for_each(|&v| sums.add(v));
                if let Err(e) = w.write_rows(&log_probs) {
                    progress.finish();
                    log_err!("perplexity: failed to write the logits file: {}\n", e);
                    return None;
                }
            } else {
                let nlls: Vec<f64> = (0..n_scored)
                    .into_par_iter()
                    .map(|r| {
                        -log_softmax(
                            &chunk_logits[r * n_vocab..(r + 1) * n_vocab],
                            toks[r + 1] as usize,
                        )
                        .log_softmax
                    })
                    .collect();
                nlls.iter().for_each(|&v| sums.add(v));
            }
            progress.suspend(|| {
                if o.ppl_output_type == 0 {
                    log_out!("[{}]{:.4},", i + seq + 1, sums.ppl());
                } else {
                    let (av, av2) = sums.mean_and_stderr();
                    log_out!(
                        "{:8}  {:.4}  {:.6}  {:.6}\n",
                        i * n_ctx,
                        sums.ppl(),
                        av,
                        av2
                    );
                }
            });
        }
        logits.clear();
        progress.inc(n_seq_batch as u64);
        i += n_seq;
    }
    progress.finish();
    log_out!("\n");

    if let Some(w) = writer.take() {
        if let Err(e) = w.finish() {
            log_err!("perplexity: failed to write the logits file: {}\n", e);
            return None;
        }
    }

    match sums.final_estimate() {
        Some((ppl, unc)) => {
            log_inf!("Final estimate: PPL = {:.4} +/- {:.5}\n", ppl, unc);
            Some(ppl)
        }
        None => {
            log_err!("Unexpected negative standard deviation of log(prob)\n");
            Some(sums.ppl())
        }
    }
}

/// `--ppl-stride S`: windows of n_ctx tokens every S tokens, scoring the last S of each.
fn perplexity_v2(ctx: &mut Context, prompt: &[u8], o: &PplOptions) -> Option<f64> {
    let model = ctx.model().clone();
    let vocab = model.vocab();
    log_inf!("perplexity_v2: tokenizing the input ..\n");
    let tokens = tokenize(ctx, prompt);
    let n_ctx = ctx.n_ctx() as usize;
    if tokens.len() < 2 * n_ctx {
        log_err!("perplexity_v2: you need at least {} tokens to evaluate perplexity with a context of {}\n", 2 * n_ctx, n_ctx);
        log_err!(
            "perplexity_v2: the data file you provided tokenizes to only {} tokens\n",
            tokens.len()
        );
        return None;
    }
    let stride = o.ppl_stride as usize;
    let calc_chunk = n_ctx;
    log_inf!(
        "perplexity_v2: have {} tokens. Calculation chunk = {}\n",
        tokens.len(),
        calc_chunk
    );
    if tokens.len() <= calc_chunk {
        log_err!(
            "perplexity_v2: there are only {} tokens, this is not enough for a context size of {} and stride {}\n",
            tokens.len(),
            n_ctx,
            stride
        );
        return None;
    }
    let n_chunk_max = (tokens.len() - calc_chunk).div_ceil(stride);
    let n_chunk = if o.n_chunks < 0 {
        n_chunk_max
    } else {
        (o.n_chunks as usize).min(n_chunk_max)
    };
    let n_batch = o.n_batch;
    let n_vocab = vocab.n_tokens();
    log_inf!(
        "perplexity_v2: calculating perplexity over {} chunks, batch_size={}\n",
        n_chunk,
        n_batch
    );

    let mut nll = 0.0f64;
    let mut count = 0usize;
    let mut batch = Batch::new();
    let mut progress = Progress::new(n_chunk as u64, "windows");
    for i in 0..n_chunk {
        let start = i * stride;
        let end = start + calc_chunk;
        let num_batches = calc_chunk.div_ceil(n_batch);
        let mut logits: Vec<f32> = Vec::with_capacity(calc_chunk * n_vocab);
        let t_start = Instant::now();
        ctx.memory_clear(true);
        for j in 0..num_batches {
            let batch_start = start + j * n_batch;
            let batch_size = (end - batch_start).min(n_batch);
            batch.clear();
            for k in 0..batch_size {
                batch.add(
                    tokens[batch_start + k],
                    (j * n_batch + k) as i32,
                    &[0],
                    true,
                );
            }
            if ctx.decode(&batch) != 0 {
                progress.finish();
                return None;
            }
            // llama.cpp swaps BOS in only after this decode, so the model never sees it here
            logits.extend_from_slice(rows(ctx.get_logits(), 0, batch_size, n_vocab).unwrap_or(&[]));
        }
        if i == 0 {
            let t_total = t_start.elapsed().as_secs_f32();
            progress.suspend(|| print_eta("perplexity_v2", t_total, n_chunk as f32));
        }
        let from = n_ctx.saturating_sub(stride + 1);
        let scored: Vec<f64> = (from..n_ctx - 1)
            .into_par_iter()
            .map(|j| {
                let row = &logits[j * n_vocab..(j + 1) * n_vocab];
                let tok = tokens[start + j + 1] as usize;
                // llama.cpp's softmax: probabilities in float, then -log
                let p = log_softmax(row, tok).prob;
                -(p as f64).ln()
            })
            .collect();
        for v in scored {
            nll += v;
            count += 1;
        }
        progress.suspend(|| {
            if o.ppl_output_type == 0 {
                log_out!("[{}]{:.4},", i + 1, (nll / count as f64).exp());
            } else {
                log_out!("{:8}  {:.4}\n", i * stride, (nll / count as f64).exp());
            }
        });
        progress.inc(1);
    }
    progress.finish();
    log_out!("\n");
    Some((nll / count as f64).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_format_of_milliseconds() {
        assert_eq!(fmt_g(17.062), "17.062");
        assert_eq!(fmt_g(1234.5678), "1234.57");
        assert_eq!(fmt_g(0.5), "0.5");
        assert_eq!(fmt_g(2_500_000.0), "2.5e+06");
    }
}
