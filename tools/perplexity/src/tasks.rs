//! The task-score modes of llama-perplexity: `--hellaswag`, `--winogrande` and
//! `--multiple-choice`. Each task is a shared context followed by several endings; the endings
//! are decoded as separate sequences that share the context's tokens, many tasks to a batch,
//! and the ending with the highest mean log-probability is the model's answer.

use common::{log_err, log_inf, log_out};
use llama::sampling::rng::Mt19937;
use llama::{Batch, Context};
use rayon::prelude::*;

/// `std::uniform_int_distribution<size_t>(0, n - 1)` over mt19937 as libstdc++ computes it
/// (Lemire's method with a 64-bit product), so the same tasks are drawn as by llama.cpp.
fn uniform_below(rng: &mut Mt19937, n: u32) -> u32 {
    let mut product = rng.next_u32() as u64 * n as u64;
    let mut low = product as u32;
    if low < n {
        let threshold = n.wrapping_neg() % n;
        while low < threshold {
            product = rng.next_u32() as u64 * n as u64;
            low = product as u32;
        }
    }
    (product >> 32) as u32
}

/// `int(scale * rng() * size)` in float, llama.cpp's draw for winogrande and multiple choice.
fn float_draw(rng: &mut Mt19937, size: usize) -> usize {
    let scale = 1.0f32 / (1.0 + u32::MAX as f32);
    ((scale * rng.next_u32() as f32 * size as f32) as usize).min(size.saturating_sub(1))
}

/// llama.cpp's `softmax`: probabilities in float, normalised by a double sum.
fn softmax_prob(logits: &[f32], tok: usize) -> f32 {
    let max = logits.iter().fold(logits[0], |m, &v| m.max(v));
    let sum: f64 = logits.iter().map(|&l| (l - max).exp() as f64).sum();
    ((logits[tok] - max).exp() as f64 / sum) as f32
}

/// `compute_logprobs`: log p(tok) with the sum in float.
fn logprob(logits: &[f32], tok: usize) -> f32 {
    let max = logits.iter().fold(logits[0], |m, &v| m.max(v));
    let sum: f32 = logits.iter().map(|&l| (l - max).exp()).sum();
    logits[tok] - max - sum.ln()
}

/// Decodes `batch` in pieces of `n_batch` tokens and gathers every requested output row.
fn decode_all(
    ctx: &mut Context,
    batch: &Batch,
    n_batch: usize,
    n_vocab: usize,
    out: &mut Vec<f32>,
) -> bool {
    out.clear();
    let n = batch.n_tokens();
    let mut i = 0;
    while i < n {
        let m = n_batch.min(n - i);
        let sub = Batch {
            token: batch.token[i..i + m].to_vec(),
            pos: batch.pos[i..i + m].to_vec(),
            seq_id: batch.seq_id[i..i + m].to_vec(),
            logits: batch.logits[i..i + m].to_vec(),
        };
        let ret = ctx.decode(&sub);
        if ret != 0 {
            log_err!(
                "failed to decode the batch, n_batch = {}, ret = {}\n",
                n_batch,
                ret
            );
            return false;
        }
        let n_out = sub.logits.iter().filter(|&&b| b).count();
        match ctx.get_logits().get(..n_out * n_vocab) {
            Some(rows) => out.extend_from_slice(rows),
            None => return false,
        }
        i += m;
    }
    true
}

/// A context with several endings, tokenized.
struct Task {
    seq_tokens: Vec<Vec<i32>>,
    common_prefix: usize,
    required_tokens: usize,
    i_logits: usize,
}

impl Task {
    fn new(seq_tokens: Vec<Vec<i32>>) -> Task {
        let min_len = seq_tokens.iter().map(|s| s.len()).min().unwrap_or(0);
        let common_prefix = (0..min_len)
            .take_while(|&k| seq_tokens.iter().all(|s| s[k] == seq_tokens[0][k]))
            .count();
        let required_tokens = common_prefix
            + seq_tokens
                .iter()
                .map(|s| s.len() - common_prefix)
                .sum::<usize>();
        Task {
            seq_tokens,
            common_prefix,
            required_tokens,
            i_logits: 0,
        }
    }
}

/// Per task of a batch, per ending: (log p of the first ending token from the prefix's last
/// logits, log p of each following token).
type EndingScores = Vec<Vec<(f32, Vec<f32>)>>;

/// Batches as many tasks as fit (context size, sequences), decodes them and scores every
/// ending; `each` gets the scores of one batch of tasks. False after an error (printed).
fn score_endings(
    ctx: &mut Context,
    func: &str,
    tasks: &mut [Task],
    n_batch: usize,
    max_seq: usize,
    fixed_seqs: Option<usize>,
    mut each: impl FnMut(usize, EndingScores),
) -> bool {
    let n_ctx = ctx.n_ctx() as usize;
    let n_vocab = ctx.model().vocab().n_tokens();
    let mut batch = Batch::new();
    let mut batch_logits = Vec::new();
    let mut i0 = 0;
    while i0 < tasks.len() {
        let (mut n_cur, mut i1, mut i_logits, mut s0) = (0usize, i0, 0usize, 0usize);
        batch.clear();
        while n_cur + tasks[i1].required_tokens <= n_ctx {
            let t = &mut tasks[i1];
            let n_answers = t.seq_tokens.len();
            let s_next = fixed_seqs.map_or(s0, |k| k * (i1 - i0));
            if s_next + n_answers > max_seq {
                if s_next == 0 {
                    log_err!(
                        "{} : task {} requires a higher -np|--parallel value (at least {})\n",
                        func,
                        i0,
                        n_answers
                    );
                    return false;
                }
                break;
            }
            if t.common_prefix == 0 {
                log_err!(
                    "{} : task {} has no tokens in common between its endings\n",
                    func,
                    i1
                );
                return false;
            }
            let seqs: Vec<i32> = (0..n_answers).map(|s| (s_next + s) as i32).collect();
            for i in 0..t.common_prefix {
                batch.add(t.seq_tokens[0][i], i as i32, &seqs, false);
            }
            if let Some(last) = batch.logits.last_mut() {
                *last = true;
            }
            let mut n_logits = 1;
            for (s, seq) in t.seq_tokens.iter().enumerate() {
                for (i, &tok) in seq.iter().enumerate().skip(t.common_prefix) {
                    let needs = i < seq.len() - 1;
                    batch.add(tok, i as i32, &[(s_next + s) as i32], needs);
                    n_logits += usize::from(needs);
                }
            }
            s0 = s_next + n_answers;
            t.i_logits = i_logits;
            i_logits += n_logits;
            n_cur += t.required_tokens;
            i1 += 1;
            if i1 == tasks.len() {
                break;
            }
        }
        if i0 == i1 {
            log_err!(
                "{} : task {} does not fit in the context window (requires {} tokens)\n",
                func,
                i0,
                tasks[i0].required_tokens
            );
            return false;
        }
        ctx.memory_clear(true);
        if !decode_all(ctx, &batch, n_batch, n_vocab, &mut batch_logits) {
            log_err!("{}: llama_decode() failed\n", func);
            return false;
        }
        let row = |r: usize| &batch_logits[r * n_vocab..(r + 1) * n_vocab];
        let scores: EndingScores = tasks[i0..i1]
            .par_iter()
            .map(|t| {
                let first = row(t.i_logits);
                let mut li = 1;
                t.seq_tokens
                    .iter()
                    .map(|seq| {
                        let lp0 = softmax_prob(first, seq[t.common_prefix] as usize).ln();
                        let rest: Vec<f32> = (t.common_prefix..seq.len() - 1)
                            .map(|j| {
                                let v = logprob(row(t.i_logits + li), seq[j + 1] as usize);
                                li += 1;
                                v
                            })
                            .collect();
                        (lp0, rest)
                    })
                    .collect()
            })
            .collect();
        each(i0, scores);
        i0 = i1;
    }
    true
}

/// `--hellaswag`: 6 lines a task (context, gold ending index, four endings), tasks drawn at
/// random (mt19937 seeded with 1, as llama.cpp), accuracy with a Wilson 95% interval.
pub fn hellaswag(ctx: &mut Context, prompt: &str, n_tasks: usize, n_batch: usize) {
    let func = "hellaswag_score";
    let mut lines: Vec<&str> = prompt.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    if !lines.len().is_multiple_of(6) {
        log_err!(
            "{} : number of lines in prompt not a multiple of 6.\n",
            func
        );
        return;
    }
    let mut count = lines.len() / 6;
    log_inf!("{} : loaded {} tasks from prompt.\n", func, count);
    let model = ctx.model().clone();
    let vocab = model.vocab();
    let is_spm = vocab.vocab_type() == llama::vocab::VocabType::Spm;
    log_inf!(
        "================================= is_spm = {}\n",
        i32::from(is_spm)
    );
    count = count.min(n_tasks);
    log_inf!("{} : selecting {} randomized tasks.\n", func, count);
    let mut rng = Mt19937::new(1);
    let mut tasks = Vec::with_capacity(count);
    let mut gold = Vec::with_capacity(count);
    for _ in 0..count {
        let idx = uniform_below(&mut rng, (lines.len() / 6) as u32) as usize;
        let ctx_line = lines[idx * 6];
        gold.push(
            lines[idx * 6 + 1]
                .trim()
                .parse::<usize>()
                .unwrap_or(usize::MAX),
        );
        let seqs = (0..4)
            .map(|j| {
                vocab.tokenize(
                    format!("{} {}", ctx_line, lines[idx * 6 + 2 + j]).as_bytes(),
                    true,
                    false,
                )
            })
            .collect();
        tasks.push(Task::new(seqs));
        lines.drain(idx * 6..idx * 6 + 6);
    }
    log_inf!(
        "{} : calculating hellaswag score over selected tasks.\n",
        func
    );
    log_out!("\ntask\tacc_norm\t95% confidence interval\n");
    let max_seq = (4 * 32).min(ctx.n_seq_max() as usize);
    let mut acc = 0.0f64;
    score_endings(
        ctx,
        func,
        &mut tasks,
        n_batch,
        max_seq,
        Some(4),
        |i0, scores| {
            for (k, endings) in scores.iter().enumerate() {
                let i = i0 + k;
                let lp: Vec<f64> = endings
                    .iter()
                    .map(|(first, rest)| {
                        let mut v = *first as f64;
                        for r in rest {
                            v += *r as f64;
                        }
                        v / (rest.len() + 1) as f64
                    })
                    .collect();
                let best = (1..lp.len()).fold(0, |b, s| if lp[s] > lp[b] { s } else { b });
                if best == gold[i] {
                    acc += 1.0;
                }
                let n = (i + 1) as f64;
                let freq = acc / n;
                let za = 1.95996398454f64;
                let z = za * za / n;
                let cnf = z * (n * (4.0 * freq * (1.0 - freq) + z)).sqrt() / (za + za);
                let a = (freq + z * 0.5 - cnf) / (1.0 + z);
                let b = (freq + z * 0.5 + cnf) / (1.0 + z);
                log_out!(
                    "{}\t{:3.8}%\t[{:3.4}%, {:3.4}%]\n",
                    i + 1,
                    freq * 100.0,
                    a * 100.0,
                    b * 100.0
                );
            }
        },
    );
    log_out!("\n");
}

/// One winogrande row: the sentence split at `_`, two choices, the answer (1 or 2).
struct WinograndeRow {
    first: String,
    second: String,
    choices: [String; 2],
    answer: usize,
}

/// The CSV of llama.cpp's winogrande format: `index,sentence,choice1,choice2,answer`, the
/// sentence possibly quoted.
fn load_winogrande(prompt: &str) -> Vec<WinograndeRow> {
    let mut out = Vec::new();
    let mut lines: Vec<&str> = prompt.split('\n').collect();
    // std::getline stops at the last newline-terminated line
    lines.pop();
    for line in lines {
        let b = line.as_bytes();
        let mut commas = Vec::with_capacity(4);
        let mut quote = false;
        for (i, &c) in b.iter().enumerate() {
            if !quote {
                if c == b',' {
                    commas.push(i);
                    if commas.len() == 4 {
                        break;
                    }
                } else if c == b'"' {
                    quote = true;
                }
            } else if c == b'"' {
                quote = false;
            }
        }
        if commas.len() != 4 {
            log_err!(
                "load_winogrande_from_csv: failed to find comma separators in <{}>\n",
                line
            );
            continue;
        }
        let sentence = if b.get(commas[0] + 1) == Some(&b'"') && commas[1] >= commas[0] + 3 {
            &line[commas[0] + 2..commas[1] - 1]
        } else {
            &line[commas[0] + 1..commas[1]]
        };
        let choice1 = &line[commas[1] + 1..commas[2]];
        let choice2 = &line[commas[2] + 1..commas[3]];
        let answer = line[commas[3] + 1..].trim();
        let Some(where_) = sentence.find('_') else {
            log_err!("load_winogrande_from_csv: no _ in <{}>\n", sentence);
            continue;
        };
        let ans: usize = match answer.parse() {
            Ok(a @ 1..=2) => a,
            _ => {
                log_err!(
                    "load_winogrande_from_csv: failed to parse answer <{}>\n",
                    answer
                );
                continue;
            }
        };
        out.push(WinograndeRow {
            first: sentence[..where_].to_string(),
            second: sentence[where_ + 1..].to_string(),
            choices: [choice1.to_string(), choice2.to_string()],
            answer: ans,
        });
    }
    out
}

/// `--winogrande`: the choice whose sentence continuation is more likely.
pub fn winogrande(ctx: &mut Context, prompt: &str, n_tasks: usize, n_batch: usize) {
    let func = "winogrande_score";
    const K_MIN_TRAILING_CTX: usize = 3;
    let mut data = load_winogrande(prompt);
    if data.is_empty() {
        log_err!("{}: no tasks\n", func);
        return;
    }
    log_inf!("{} : loaded {} tasks from prompt.\n", func, data.len());
    if n_tasks > 0 && n_tasks < data.len() {
        log_inf!("{} : selecting {} random tasks\n", func, n_tasks);
        let mut rng = Mt19937::new(1);
        let mut aux: Vec<usize> = (0..data.len()).collect();
        let mut slots: Vec<Option<WinograndeRow>> = data.into_iter().map(Some).collect();
        let mut selected = Vec::with_capacity(n_tasks);
        for _ in 0..n_tasks {
            let j = float_draw(&mut rng, aux.len());
            if let Some(row) = slots[aux[j]].take() {
                selected.push(row);
            }
            aux.swap_remove(j);
        }
        data = selected;
    }
    log_inf!("{} : tokenizing selected tasks\n", func);
    let model = ctx.model().clone();
    let vocab = model.vocab();
    let mut tasks = Vec::with_capacity(data.len());
    let mut bases = Vec::with_capacity(data.len());
    for d in &data {
        let s0 = vocab.tokenize(
            format!("{}{}{}", d.first, d.choices[0], d.second).as_bytes(),
            true,
            false,
        );
        let s1 = vocab.tokenize(
            format!("{}{}{}", d.first, d.choices[1], d.second).as_bytes(),
            true,
            false,
        );
        let n_base1 = vocab
            .tokenize(
                format!("{}{}", d.first, d.choices[0]).as_bytes(),
                true,
                false,
            )
            .len();
        let n_base2 = vocab
            .tokenize(
                format!("{}{}", d.first, d.choices[1]).as_bytes(),
                true,
                false,
            )
            .len();
        tasks.push(Task::new(vec![s0, s1]));
        bases.push((n_base1, n_base2));
    }
    log_inf!(
        "{} : calculating winogrande score over selected tasks.\n",
        func
    );

    let n_ctx = ctx.n_ctx() as usize;
    let n_vocab = vocab.n_tokens();
    let max_seq = (2 * 128).min(ctx.n_seq_max() as usize);
    let (mut n_correct, mut n_done) = (0usize, 0usize);
    let mut batch = Batch::new();
    let mut logits = Vec::new();
    let mut i0 = 0;
    while i0 < tasks.len() {
        let (mut n_cur, mut i1, mut i_logits) = (0usize, i0, 0usize);
        batch.clear();
        while n_cur + tasks[i1].required_tokens <= n_ctx {
            let s0 = 2 * (i1 - i0);
            if s0 + 2 > max_seq {
                break;
            }
            let t = &mut tasks[i1];
            if t.common_prefix == 0 {
                log_err!(
                    "{} : task {} has no tokens in common between its choices\n",
                    func,
                    i1
                );
                return;
            }
            for i in 0..t.common_prefix {
                batch.add(
                    t.seq_tokens[0][i],
                    i as i32,
                    &[s0 as i32, s0 as i32 + 1],
                    false,
                );
            }
            if let Some(l) = batch.logits.last_mut() {
                *l = true;
            }
            let mut n_logits = 1;
            for s in 0..2 {
                for i in t.common_prefix..t.seq_tokens[s].len() {
                    batch.add(t.seq_tokens[s][i], i as i32, &[(s0 + s) as i32], true);
                    n_logits += 1;
                }
            }
            t.i_logits = i_logits;
            i_logits += n_logits;
            n_cur += t.required_tokens;
            i1 += 1;
            if i1 == tasks.len() {
                break;
            }
        }
        if i0 == i1 {
            log_err!(
                "{} : task {} does not fit in the context window (requires {} tokens)\n",
                func,
                i0,
                tasks[i0].required_tokens
            );
            return;
        }
        ctx.memory_clear(true);
        if !decode_all(ctx, &batch, n_batch, n_vocab, &mut logits) {
            log_err!("{}: llama_decode() failed\n", func);
            return;
        }
        for i in i0..i1 {
            let t = &tasks[i];
            let (l0, l1) = (t.seq_tokens[0].len(), t.seq_tokens[1].len());
            let cp = t.common_prefix;
            let skip_choice = l0 - cp > K_MIN_TRAILING_CTX && l1 - cp > K_MIN_TRAILING_CTX;
            let n_base1 = if skip_choice { bases[i].0 } else { cp };
            let n_base2 = if skip_choice { bases[i].1 } else { cp };
            let score = |seq: &[i32], n_base: usize, mut li: usize| -> Option<f32> {
                let last = usize::from(seq.len().saturating_sub(n_base) > 1);
                let mut sum = 0.0f32;
                let end = seq.len().checked_sub(1 + last)?;
                for j in n_base.checked_sub(1)?..end {
                    let row =
                        logits.get((t.i_logits + li) * n_vocab..(t.i_logits + li + 1) * n_vocab)?;
                    sum += logprob(row, seq[j + 1] as usize);
                    li += 1;
                }
                Some(sum / (seq.len() - n_base - last) as f32)
            };
            // llama.cpp's indexing, including its FIXME for the second choice
            let li2 = l0 - cp + n_base2 - cp;
            let (Some(score_1st), Some(score_2nd)) = (
                score(&t.seq_tokens[0], n_base1, n_base1 - cp),
                score(&t.seq_tokens[1], n_base2, li2),
            ) else {
                log_err!("{} : task {} is too short to score\n", func, i);
                return;
            };
            let result = if score_1st > score_2nd { 1 } else { 2 };
            if result == data[i].answer {
                n_correct += 1;
            }
            n_done += 1;
            log_out!(
                "{}\t{:.4}\t{:10.6}  {:10.6}  {}  {}\n",
                i + 1,
                100.0 * n_correct as f64 / n_done as f64,
                score_1st,
                score_2nd,
                result,
                data[i].answer
            );
        }
        i0 = i1;
    }
    log_out!("\n");
    if n_done < 100 {
        return;
    }
    let p = n_correct as f32 / n_done as f32;
    let sigma = 100.0 * (p * (1.0 - p) / (n_done - 1) as f32).sqrt();
    log_inf!(
        "Final Winogrande score({} tasks): {:.4} +/- {:.4}\n",
        n_done,
        100.0 * p,
        sigma
    );
}

/// A little-endian reader over the binary task file.
struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn u32(&mut self) -> Option<u32> {
        let v = self.b.get(self.pos..self.pos + 4)?;
        self.pos += 4;
        Some(u32::from_le_bytes([v[0], v[1], v[2], v[3]]))
    }
    fn string(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        let v = self.b.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(String::from_utf8_lossy(v).into_owned())
    }
    /// (answers, labels), at most 100 answers.
    fn answers(&mut self) -> Option<(Vec<String>, Vec<i32>)> {
        let n = self.u32()?;
        if n > 100 {
            return None;
        }
        let answers = (0..n).map(|_| self.string()).collect::<Option<Vec<_>>>()?;
        let labels = (0..n)
            .map(|_| self.u32().map(|v| v as i32))
            .collect::<Option<Vec<_>>>()?;
        Some((answers, labels))
    }
    /// question, mc1 (single correct answer), mc2 (read and unused, as in llama.cpp)
    fn task(&mut self) -> Option<(String, Vec<String>, Vec<i32>)> {
        let q = self.string()?;
        let (a, l) = self.answers()?;
        self.answers()?;
        Some((q, a, l))
    }
}

/// `--multiple-choice`: llama.cpp's binary task file (TruthfulQA, ARC, MMLU exports).
pub fn multiple_choice(ctx: &mut Context, prompt_bytes: &[u8], n_tasks: usize, n_batch: usize) {
    let func = "multiple_choice_score";
    let mut r = Reader {
        b: prompt_bytes,
        pos: 0,
    };
    let n_task = match r.u32() {
        Some(n) if n > 0 => n as usize,
        _ => {
            log_err!("{}: no tasks\n", func);
            return;
        }
    };
    log_inf!("{}: there are {} tasks in prompt\n", func, n_task);
    let Some(task_pos) = (0..n_task).map(|_| r.u32()).collect::<Option<Vec<u32>>>() else {
        log_err!("{}: failed to read task positions from prompt\n", func);
        return;
    };
    let mut raw = Vec::new();
    if n_tasks == 0 || n_tasks >= n_task {
        log_inf!("{}: reading tasks", func);
        for i in 0..n_task {
            match r.task() {
                Some(t) => raw.push(t),
                None => {
                    log_err!("{}: failed to read task {} of {}\n", func, i + 1, n_task);
                    return;
                }
            }
        }
        log_out!("done\n");
    } else {
        log_inf!(
            "{}: selecting {} random tasks from {} tasks available\n",
            func,
            n_tasks,
            n_task
        );
        let mut rng = Mt19937::new(1);
        let mut aux: Vec<usize> = (0..n_task).collect();
        for _ in 0..n_tasks {
            let j = float_draw(&mut rng, aux.len());
            let idx = aux[j];
            aux.swap_remove(j);
            r.pos = task_pos[idx] as usize;
            match r.task() {
                Some(t) => raw.push(t),
                None => {
                    log_err!(
                        "{}: failed to read task {} at position {}\n",
                        func,
                        idx,
                        task_pos[idx]
                    );
                    return;
                }
            }
        }
    }
    log_inf!("{}: preparing task data", func);
    let model = ctx.model().clone();
    let vocab = model.vocab();
    let mut tasks = Vec::with_capacity(raw.len());
    for (q, answers, _) in &raw {
        if q.is_empty() || answers.is_empty() || answers.iter().any(|a| a.is_empty()) {
            log_out!("\n");
            log_err!("multiple_choice_prepare_one_task: found bad task with empty question and/or answers\n");
            return;
        }
        tasks.push(Task::new(
            answers
                .iter()
                .map(|a| vocab.tokenize(format!("{q} {a}").as_bytes(), true, false))
                .collect(),
        ));
    }
    log_out!("done\n");
    log_inf!(
        "{} : calculating TruthfulQA score over {} tasks.\n",
        func,
        tasks.len()
    );
    log_out!("\ntask\tacc_norm\n");
    let max_seq = (4 * 32).min(ctx.n_seq_max() as usize);
    let (mut n_done, mut n_correct, mut n_tot_answers) = (0usize, 0usize, 0usize);
    let ok = score_endings(
        ctx,
        func,
        &mut tasks,
        n_batch,
        max_seq,
        None,
        |i0, scores| {
            for (k, endings) in scores.iter().enumerate() {
                let lp: Vec<f32> = endings
                    .iter()
                    .map(|(first, rest)| {
                        let mut v = *first;
                        for x in rest {
                            v += *x;
                        }
                        v / (rest.len() + 1) as f32
                    })
                    .collect();
                let best = (1..lp.len()).fold(0, |b, s| if lp[s] > lp[b] { s } else { b });
                n_tot_answers += lp.len();
                if raw[i0 + k].2.get(best) == Some(&1) {
                    n_correct += 1;
                }
                n_done += 1;
                log_out!(
                    "{}\t{:.8}\n",
                    n_done,
                    100.0 * n_correct as f64 / n_done as f64
                );
            }
        },
    );
    if !ok || (n_done < 100 && n_tasks != 0 && n_tasks < n_task) {
        return;
    }
    let mut p = n_correct as f32 / n_done as f32;
    let mut sigma = (p * (1.0 - p) / (n_done as f32 - 1.0)).sqrt();
    log_out!("\n");
    log_inf!("Final result: {:.4} +/- {:.4}\n", 100.0 * p, 100.0 * sigma);
    p = n_done as f32 / n_tot_answers as f32;
    sigma = (p * (1.0 - p) / (n_done as f32 - 1.0)).sqrt();
    log_inf!("Random chance: {:.4} +/- {:.4}\n", 100.0 * p, 100.0 * sigma);
    log_inf!("\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lemire_draws_stay_in_range_and_match_the_reference_stream() {
        let mut rng = Mt19937::new(1);
        let draws: Vec<u32> = (0..1000).map(|_| uniform_below(&mut rng, 7)).collect();
        assert!(draws.iter().all(|&d| d < 7));
        // every value occurs
        for v in 0..7 {
            assert!(draws.contains(&v));
        }
        // mt19937(1)'s first output is 1791095845: (1791095845 * 10) >> 32 = 4
        let mut rng = Mt19937::new(1);
        assert_eq!(uniform_below(&mut rng, 10), 4);
    }

    #[test]
    fn task_prefix_and_size() {
        let t = Task::new(vec![vec![1, 2, 3, 4], vec![1, 2, 5], vec![1, 2, 3, 9, 9]]);
        assert_eq!(t.common_prefix, 2);
        assert_eq!(t.required_tokens, 2 + 2 + 1 + 3);
    }

    #[test]
    fn winogrande_csv() {
        let rows = load_winogrande(
            "0,Sarah was a much better surgeon than Maria so _ always got the easier cases.,Sarah,Maria,2\n1,\"Quoted, with comma _ here.\",a,b,1\nbad line\n",
        );
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[0].first,
            "Sarah was a much better surgeon than Maria so "
        );
        assert_eq!(rows[0].second, " always got the easier cases.");
        assert_eq!(rows[0].choices[1], "Maria");
        assert_eq!(rows[0].answer, 2);
        assert_eq!(rows[1].first, "Quoted, with comma ");
        assert_eq!(rows[1].answer, 1);
    }

    #[test]
    fn binary_task_reader() {
        let mut b = Vec::new();
        let s = |b: &mut Vec<u8>, x: &str| {
            b.extend_from_slice(&(x.len() as u32).to_le_bytes());
            b.extend_from_slice(x.as_bytes());
        };
        s(&mut b, "Q?");
        b.extend_from_slice(&2u32.to_le_bytes());
        s(&mut b, "yes");
        s(&mut b, "no");
        b.extend_from_slice(&1i32.to_le_bytes());
        b.extend_from_slice(&0i32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        let mut r = Reader { b: &b, pos: 0 };
        let (q, a, l) = r.task().unwrap();
        assert_eq!((q.as_str(), a.len(), l), ("Q?", 2, vec![1, 0]));
        let mut bad = Reader {
            b: &b[..10],
            pos: 0,
        };
        assert!(bad.task().is_none());
    }

    #[test]
    fn probabilities() {
        let l = [1.0f32, 2.0, 3.0];
        let p: f32 = (0..3).map(|t| softmax_prob(&l, t)).sum();
        assert!((p - 1.0).abs() < 1e-6);
        assert!((logprob(&l, 2) - softmax_prob(&l, 2).ln()).abs() < 1e-6);
    }
}
