//! `compute_imatrix`: the text is tokenized whole and cut into chunks of n_ctx tokens, as
//! llama-perplexity does; each chunk starts from an empty KV cache with its first token
//! replaced by BOS, every token is an output (the output matrix sees all of them), and the
//! perplexity of the second half of each chunk is printed as the chunks go.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use common::{log_err, log_inf, log_out};
use llama::{Batch, Context};
use llama_perplexity::math::log_softmax;
use llama_perplexity::ppl::{fmt_g, print_eta};
use llama_perplexity::progress::Progress;
use rayon::prelude::*;

use crate::collector::Collector;

/// What the chunk loop needs from the command line.
#[derive(Clone, Debug)]
pub struct ComputeOptions {
    /// Tokens per chunk (the `-c` given).
    pub n_ctx: usize,
    /// `-b` after the adjustment to the total context.
    pub n_batch: usize,
    /// `--chunks`, < 0 for all.
    pub n_chunks: i32,
    /// `--chunk`: chunks skipped at the start.
    pub i_chunk: i32,
    pub compute_ppl: bool,
    pub parse_special: bool,
}

/// The negative log-likelihood sums of the scored tokens.
#[derive(Default)]
struct Nll {
    nll: f64,
    nll2: f64,
    count: usize,
}

/// Runs the chunks; false after an error was printed (a decode failure, too few tokens, a
/// collection error).
pub fn compute_imatrix(
    ctx: &mut Context,
    prompt: &[u8],
    o: &ComputeOptions,
    collector: &Arc<Mutex<Collector>>,
) -> bool {
    let model = ctx.model().clone();
    let vocab = model.vocab();
    let add_bos = vocab.add_bos();
    let n_ctx = o.n_ctx;

    let t1 = Instant::now();
    log_inf!("compute_imatrix: tokenizing the input ..\n");
    let mut tokens = vocab.tokenize(prompt, true, o.parse_special);
    log_inf!(
        "compute_imatrix: tokenization took {} ms\n",
        fmt_g(1e-3 * t1.elapsed().as_micros() as f64)
    );

    if o.i_chunk > 0 {
        let skip = o.i_chunk as usize * n_ctx;
        if (o.i_chunk as usize + 2) * n_ctx >= tokens.len() {
            log_err!(
                "compute_imatrix: there will be not enough tokens left after removing {} chunks\n",
                o.i_chunk
            );
            return false;
        }
        log_inf!(
            "compute_imatrix: removing initial {} chunks ({} tokens)\n",
            o.i_chunk,
            skip
        );
        tokens.drain(..skip);
    }
    if tokens.len() < 2 * n_ctx {
        log_err!(
            "compute_imatrix: you need at least {} tokens for a context of {} tokens\n",
            2 * n_ctx,
            n_ctx
        );
        log_err!(
            "compute_imatrix: the data file you provided tokenizes to only {} tokens\n",
            tokens.len()
        );
        return false;
    }

    let n_chunk_max = tokens.len() / n_ctx;
    let n_chunk = if o.n_chunks < 0 {
        n_chunk_max
    } else {
        (o.n_chunks as usize).min(n_chunk_max)
    };
    let n_vocab = vocab.n_tokens();
    let n_batch = o.n_batch;
    let num_batches = n_ctx.div_ceil(n_batch);
    let n_seq = (n_batch / n_ctx).max(1);
    if !(n_batch < n_ctx || n_batch.is_multiple_of(n_ctx)) {
        log_err!(
            "compute_imatrix: the batch size {} must be below the context size {} or a multiple of it\n",
            n_batch,
            n_ctx
        );
        return false;
    }
    log_inf!(
        "compute_imatrix: computing over {} chunks, n_ctx={}, batch_size={}, n_seq={}\n",
        n_chunk,
        n_ctx,
        n_batch,
        n_seq
    );

    let first = n_ctx / 2;
    let n_scored = n_ctx - 1 - first;
    let mut sums = Nll::default();
    let mut logits: Vec<f32> = Vec::new();
    let mut batch = Batch::new();
    let mut progress = Progress::new(n_chunk as u64, "chunks");
    let failed = |progress: &mut Progress, c: &Arc<Mutex<Collector>>| -> bool {
        let g = c.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = &g.error {
            progress.finish();
            log_err!("{}\n", e);
            return true;
        }
        false
    };

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
            batch.clear();
            for seq in 0..n_seq_batch {
                let seq_start = batch_start + seq * n_ctx;
                for k in 0..batch_size {
                    let tok = if add_bos && j == 0 && k == 0 {
                        vocab.bos()
                    } else {
                        tokens[seq_start + k]
                    };
                    // every token an output: the output matrix's activations and the perplexity
                    batch.add(tok, (j * n_batch + k) as i32, &[seq as i32], true);
                }
            }
            let rc = ctx.decode(&batch);
            if failed(&mut progress, collector) {
                return false;
            }
            if rc != 0 {
                progress.finish();
                log_err!("compute_imatrix : failed to eval\n");
                return false;
            }
            if o.compute_ppl && num_batches > 1 {
                let all = ctx.get_logits();
                logits.extend_from_slice(&all[..(batch_size * n_vocab).min(all.len())]);
            }
        }

        if i == 0 {
            let t_total = t_start.elapsed().as_secs_f32();
            progress
                .suspend(|| print_eta("compute_imatrix", t_total, n_chunk as f32 / n_seq as f32));
        }

        if o.compute_ppl {
            for seq in 0..n_seq_batch {
                let (all, from): (&[f32], usize) = if num_batches > 1 {
                    (&logits, first)
                } else {
                    (ctx.get_logits(), seq * n_ctx + first)
                };
                let Some(chunk) = all.get(from * n_vocab..(from + n_scored) * n_vocab) else {
                    progress.finish();
                    log_err!("compute_imatrix: the context returned fewer logits than requested\n");
                    return false;
                };
                let toks = &tokens[start + seq * n_ctx + first..start + seq * n_ctx + n_ctx];
                let nlls: Vec<f64> = (0..n_scored)
                    .into_par_iter()
                    .map(|r| {
                        -log_softmax(&chunk[r * n_vocab..(r + 1) * n_vocab], toks[r + 1] as usize)
                            .log_softmax
                    })
                    .collect();
                for v in nlls {
                    sums.nll += v;
                    sums.nll2 += v * v;
                }
                sums.count += n_scored;
                let ppl = (sums.nll / sums.count as f64).exp();
                progress.suspend(|| log_out!("[{}]{:.4},", i + seq + 1, ppl));
            }
            logits.clear();
        }
        progress.inc(n_seq_batch as u64);
        i += n_seq;
    }
    progress.finish();
    log_out!("\n");

    if o.compute_ppl {
        let count = sums.count as f64;
        let nll = sums.nll / count;
        let mut nll2 = sums.nll2 / count;
        let ppl = nll.exp();
        nll2 -= nll * nll;
        if nll2 > 0.0 {
            nll2 = (nll2 / (count - 1.0)).sqrt();
            log_out!("Final estimate: PPL = {:.4} +/- {:.5}\n", ppl, nll2 * ppl);
        } else {
            log_out!("Unexpected negative standard deviation of log(prob)\n");
        }
    }
    true
}
