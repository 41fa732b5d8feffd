//! Samplers that look at the accepted history: repetition penalties (repeat, frequency,
//! presence over the last n tokens) and DRY ("don't repeat yourself", Koboldcpp's algorithm as
//! llama.cpp ported it).

use std::collections::{HashMap, VecDeque};

use super::array::TokenDataArray;
use super::basic::empty;
use super::params::TokenText;
use super::Sampler;

/// A fixed-capacity history: pushing onto a full buffer drops the oldest entry.
#[derive(Clone, Debug, Default)]
struct Ring {
    cap: usize,
    data: VecDeque<i32>,
}

impl Ring {
    fn new(cap: usize) -> Self {
        Ring {
            cap,
            data: VecDeque::with_capacity(cap),
        }
    }

    fn push(&mut self, v: i32) {
        if self.cap == 0 {
            return;
        }
        if self.data.len() == self.cap {
            self.data.pop_front();
        }
        self.data.push_back(v);
    }

    /// The i-th most recent entry (0 = newest).
    fn rat(&self, i: usize) -> i32 {
        self.data[self.data.len() - 1 - i]
    }

    fn len(&self) -> usize {
        self.data.len()
    }

    fn clear(&mut self) {
        self.data.clear();
    }
}

#[derive(Clone)]
pub struct Penalties {
    last_n: usize,
    repeat: f32,
    freq: f32,
    present: f32,
    prev: Ring,
    token_count: HashMap<i32, i32>,
}

/// Repetition penalties over the last `last_n` accepted tokens: logits of tokens seen are divided
/// (positive) or multiplied (negative) by `repeat`, then lowered by `count * freq + present`.
pub fn penalties(last_n: i32, repeat: f32, freq: f32, present: f32) -> Box<dyn Sampler> {
    let last_n = last_n.max(0) as usize;
    if last_n == 0 || (repeat == 1.0 && freq == 0.0 && present == 0.0) {
        return empty("?penalties");
    }
    Box::new(Penalties {
        last_n,
        repeat,
        freq,
        present,
        prev: Ring::new(last_n),
        token_count: HashMap::new(),
    })
}

impl Sampler for Penalties {
    fn name(&self) -> &str {
        "penalties"
    }

    fn accept(&mut self, token: i32) {
        *self.token_count.entry(token).or_insert(0) += 1;
        if self.prev.len() >= self.last_n {
            let old = self.prev.rat(self.prev.len() - 1);
            if let Some(c) = self.token_count.get_mut(&old) {
                *c -= 1;
                if *c == 0 {
                    self.token_count.remove(&old);
                }
            }
        }
        self.prev.push(token);
    }

    fn apply(&mut self, cur: &mut TokenDataArray) {
        for t in cur.data.iter_mut() {
            let Some(&count) = self.token_count.get(&t.id) else {
                continue;
            };
            if t.logit <= 0.0 {
                t.logit *= self.repeat;
            } else {
                t.logit /= self.repeat;
            }
            t.logit -= count as f32 * self.freq + (count > 0) as i32 as f32 * self.present;
        }
        cur.sorted = false;
    }

    fn reset(&mut self) {
        self.prev.clear();
        self.token_count.clear();
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

#[derive(Clone)]
pub struct Dry {
    total_context_size: i32,
    multiplier: f32,
    base: f32,
    allowed_length: i32,
    penalty_last_n: i32,
    /// head token -> tails (the rest of each restart sequence's tokenization)
    breakers: HashMap<i32, Vec<Vec<i32>>>,
    repeat_count: Vec<i32>,
    max_token_repeat: HashMap<i32, i32>,
    last_tokens: Ring,
}

const DRY_MAX_CHAR_LEN: usize = 40;
const DRY_MAX_SEQ_LEN: usize = 20;

fn dry_enabled(multiplier: f32, base: f32, penalty_last_n: i32) -> bool {
    multiplier != 0.0 && base >= 1.0 && penalty_last_n != 0
}

fn dry_state(
    n_ctx_train: i32,
    multiplier: f32,
    base: f32,
    allowed_length: i32,
    penalty_last_n: i32,
    breakers: HashMap<i32, Vec<Vec<i32>>>,
) -> Dry {
    let effective = if penalty_last_n == -1 {
        n_ctx_train
    } else {
        penalty_last_n.max(0)
    }
    .max(0) as usize;
    Dry {
        total_context_size: n_ctx_train,
        multiplier,
        base,
        allowed_length,
        penalty_last_n,
        breakers,
        repeat_count: vec![0; effective],
        max_token_repeat: HashMap::new(),
        last_tokens: Ring::new(effective),
    }
}

/// DRY with sequence breakers given as text, matched against every token of the vocabulary
/// (`get_overlapping_token_sequences`): a token containing a breaker restarts on its own; a
/// token ending in a breaker's prefix restarts when followed by the tokenized rest.
#[allow(clippy::too_many_arguments)]
pub fn dry(
    vocab: &dyn TokenText,
    n_ctx_train: i32,
    multiplier: f32,
    base: f32,
    allowed_length: i32,
    penalty_last_n: i32,
    seq_breakers: &[String],
) -> Box<dyn Sampler> {
    if !dry_enabled(multiplier, base, penalty_last_n) {
        return empty("?dry");
    }
    let mut breakers: HashMap<i32, Vec<Vec<i32>>> = HashMap::new();
    for (i, b) in seq_breakers.iter().enumerate() {
        if b.is_empty() {
            ggml::log_warn!(
                "skipping null or empty DRY sequence breaker at index {}\n",
                i
            );
            continue;
        }
        let mut bytes = b.as_bytes().to_vec();
        if bytes.len() > DRY_MAX_CHAR_LEN {
            ggml::log_warn!(
                "truncating DRY sequence breaker to {} characters\n",
                DRY_MAX_CHAR_LEN
            );
            bytes.truncate(DRY_MAX_CHAR_LEN);
        }
        overlapping_token_sequences(vocab, &bytes, &mut breakers, DRY_MAX_SEQ_LEN);
    }
    Box::new(dry_state(
        n_ctx_train,
        multiplier,
        base,
        allowed_length,
        penalty_last_n,
        breakers,
    ))
}

/// DRY with breakers already given as token sequences (`llama_sampler_init_dry_testing`).
pub fn dry_from_token_sequences(
    context_size: i32,
    multiplier: f32,
    base: f32,
    allowed_length: i32,
    penalty_last_n: i32,
    seq_breakers: &[Vec<i32>],
) -> Box<dyn Sampler> {
    if !dry_enabled(multiplier, base, penalty_last_n) {
        return empty("?dry");
    }
    let mut breakers: HashMap<i32, Vec<Vec<i32>>> = HashMap::new();
    for b in seq_breakers.iter().filter(|b| !b.is_empty()) {
        breakers.entry(b[0]).or_default().push(b[1..].to_vec());
    }
    Box::new(dry_state(
        context_size,
        multiplier,
        base,
        allowed_length,
        penalty_last_n,
        breakers,
    ))
}

fn find_bytes(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

fn overlapping_token_sequences(
    vocab: &dyn TokenText,
    s: &[u8],
    out: &mut HashMap<i32, Vec<Vec<i32>>>,
    max_tail_len: usize,
) {
    for id in 0..vocab.n_tokens() as i32 {
        let word = vocab.token_text(id);
        if find_bytes(&word, s) {
            out.entry(id).or_default().push(Vec::new());
            continue;
        }
        for pos in 0..word.len() {
            if word[pos] != s[0] {
                continue;
            }
            let mut i = 1;
            let mut matched = true;
            while i < s.len() && i + pos < word.len() {
                if word[pos + i] != s[i] {
                    matched = false;
                    break;
                }
                i += 1;
            }
            if !matched {
                continue;
            }
            let mut tail = vocab.tokenize(&s[i..]);
            tail.truncate(max_tail_len);
            let tails = out.entry(id).or_default();
            if !tails.contains(&tail) {
                tails.push(tail);
            }
        }
    }
}

impl Dry {
    fn enabled(&self) -> bool {
        dry_enabled(self.multiplier, self.base, self.penalty_last_n)
    }
}

impl Sampler for Dry {
    fn name(&self) -> &str {
        "dry"
    }

    fn accept(&mut self, token: i32) {
        if self.enabled() {
            self.last_tokens.push(token);
        }
    }

    fn apply(&mut self, cur: &mut TokenDataArray) {
        if !self.enabled() {
            return;
        }
        let effective = if self.penalty_last_n == -1 {
            self.total_context_size
        } else {
            self.penalty_last_n.max(0)
        };
        let last_n_repeat = (self.last_tokens.len() as i32)
            .min(effective)
            .min(self.total_context_size);
        if last_n_repeat <= self.allowed_length {
            return;
        }
        let n = last_n_repeat as usize;
        self.repeat_count.clear();
        self.repeat_count.resize(n, 0);
        self.max_token_repeat.clear();
        let lt_tok = |i: usize| self.last_tokens.rat(i);

        // Step 1: the most recent restart sequence limits how far back a repeat may reach.
        let mut rep_limit = last_n_repeat;
        for i in 0..n {
            let Some(tails) = self.breakers.get(&lt_tok(i)) else {
                continue;
            };
            let mut longest: i32 = -1;
            for tail in tails {
                let seq_len = tail.len() as i32;
                if seq_len > longest && seq_len <= i as i32 {
                    let ok = (0..tail.len()).all(|off| tail[off] == lt_tok(i - off - 1));
                    if ok {
                        longest = seq_len;
                    }
                }
            }
            if longest >= 0 {
                rep_limit = i as i32 - longest;
                break;
            }
        }
        if rep_limit < self.allowed_length {
            return;
        }

        // Step 2: reverse Z-algorithm: for each position, the length of the suffix of the
        // context that also ends there.
        {
            let last = n - 1;
            let (mut rt, mut lt) = (0usize, 0usize);
            for k in 1..n {
                if k > rt {
                    let mut m = 0usize;
                    while m + k < n && lt_tok(m) == lt_tok(m + k) {
                        m += 1;
                    }
                    self.repeat_count[last - k] = (m as i32).min(rep_limit);
                    if m > 0 {
                        lt = k;
                        rt = k + m - 1;
                    }
                } else {
                    let p = k - lt;
                    let right_part_len = (rt - k + 1) as i32;
                    if self.repeat_count[last - p] < right_part_len {
                        self.repeat_count[last - k] = self.repeat_count[last - p].min(rep_limit);
                    } else {
                        let mut i = rt + 1;
                        while i < n && lt_tok(i) == lt_tok(i - k) {
                            i += 1;
                        }
                        self.repeat_count[last - k] = ((i - k) as i32).min(rep_limit);
                        lt = k;
                        rt = i - 1;
                    }
                }
            }
        }

        // Step 3: the token following each long enough repeat would extend it.
        for i in 0..n - 1 {
            let repeat_len = self.repeat_count[i];
            if repeat_len >= self.allowed_length {
                let token = lt_tok(n - 2 - i);
                let e = self.max_token_repeat.entry(token).or_insert(repeat_len);
                if *e < repeat_len {
                    *e = repeat_len;
                }
            }
        }

        // Step 4: penalise, exponent clamped so base^exp stays finite in float.
        const FLOAT_MAX_LOG: f32 = 88.722_84;
        let mut max_exponent = 0i32;
        if self.base > 1.000001 {
            max_exponent = (FLOAT_MAX_LOG / self.base.ln()) as i32;
        }
        for t in cur.data.iter_mut() {
            let Some(&len) = self.max_token_repeat.get(&t.id) else {
                continue;
            };
            let single_token_breaker = self
                .breakers
                .get(&t.id)
                .is_some_and(|tails| tails.iter().any(|tail| tail.is_empty()));
            if single_token_breaker {
                continue;
            }
            let mut repeat_exp = len - self.allowed_length;
            if max_exponent > 0 && repeat_exp > max_exponent {
                repeat_exp = max_exponent;
            }
            // float * pow(float, int) is evaluated in double in llama.cpp
            let penalty =
                (self.multiplier as f64 * (self.base as f64).powf(repeat_exp as f64)) as f32;
            t.logit -= penalty;
        }
        cur.sorted = false;
    }

    fn reset(&mut self) {
        self.last_tokens.clear();
        self.repeat_count.clear();
        self.max_token_repeat.clear();
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::super::array::arr;
    use super::*;

    #[test]
    fn penalties_divide_positive_and_multiply_negative_logits() {
        let mut s = penalties(64, 2.0, 0.0, 0.0);
        s.accept(0);
        s.accept(1);
        let mut a = arr(&[4.0, -1.0, 3.0]);
        s.apply(&mut a);
        assert_eq!(a.data[0].logit, 2.0);
        assert_eq!(a.data[1].logit, -2.0);
        assert_eq!(a.data[2].logit, 3.0);
    }

    #[test]
    fn frequency_and_presence_scale_with_count() {
        let mut s = penalties(64, 1.0, 0.5, 0.25);
        for t in [2, 2, 2, 1] {
            s.accept(t);
        }
        let mut a = arr(&[0.0, 1.0, 2.0]);
        s.apply(&mut a);
        assert_eq!(a.data[0].logit, 0.0);
        assert_eq!(a.data[1].logit, 1.0 - 0.5 - 0.25);
        assert_eq!(a.data[2].logit, 2.0 - 1.5 - 0.25);
    }

    #[test]
    fn penalty_window_forgets_old_tokens() {
        let mut s = penalties(2, 1.0, 1.0, 0.0);
        for t in [0, 1, 2] {
            s.accept(t);
        }
        let mut a = arr(&[0.0, 0.0, 0.0]);
        s.apply(&mut a);
        assert_eq!(a.data[0].logit, 0.0);
        assert_eq!(a.data[1].logit, -1.0);
        assert_eq!(a.data[2].logit, -1.0);
        s.reset();
        let mut a = arr(&[0.0, 0.0, 0.0]);
        s.apply(&mut a);
        assert!(a.data.iter().all(|t| t.logit == 0.0));
    }

    #[test]
    fn neutral_penalties_are_empty() {
        assert_eq!(penalties(64, 1.0, 0.0, 0.0).name(), "?penalties");
        assert_eq!(penalties(0, 1.5, 0.0, 0.0).name(), "?penalties");
        assert_eq!(penalties(-1, 1.5, 0.0, 0.0).name(), "?penalties");
        assert_eq!(penalties(64, 1.1, 0.0, 0.0).name(), "penalties");
    }

    #[test]
    fn dry_penalises_the_token_that_would_extend_a_repeat() {
        // history 0 1 2 3 0 1: the suffix "0 1" also ends at position 1, followed by 2.
        // repeat length 2 >= allowed 2 -> exponent 0 -> penalty = multiplier * base^0 = 1.
        let mut s = dry_from_token_sequences(1024, 1.0, 1.75, 2, 64, &[vec![9]]);
        for t in [0, 1, 2, 3, 0, 1] {
            s.accept(t);
        }
        let mut a = arr(&[0.0; 5]);
        s.apply(&mut a);
        let l: Vec<f32> = a.data.iter().map(|t| t.logit).collect();
        assert_eq!(l, vec![0.0, 0.0, -1.0, 0.0, 0.0]);
    }

    #[test]
    fn dry_longer_repeat_grows_the_penalty() {
        // 0 1 2 3 0 1 2: suffix "0 1 2" (len 3) ends before 3 -> exponent 1 -> 2 * 1.75
        let mut s = dry_from_token_sequences(1024, 2.0, 1.75, 2, 64, &[vec![9]]);
        for t in [0, 1, 2, 3, 0, 1, 2] {
            s.accept(t);
        }
        let mut a = arr(&[0.0; 5]);
        s.apply(&mut a);
        assert_eq!(a.data[3].logit, -3.5);
        assert_eq!(a.data[0].logit, 0.0);
    }

    #[test]
    fn dry_sequence_breaker_stops_the_repeat() {
        // 0 1 2 3 0 1 with breaker 0: the restart at the last 0 (1 back from the end) limits
        // the repeat to 1 < allowed 2, so nothing is penalised
        let mut s = dry_from_token_sequences(1024, 1.0, 1.75, 2, 64, &[vec![0]]);
        for t in [0, 1, 2, 3, 0, 1] {
            s.accept(t);
        }
        let mut a = arr(&[0.0; 5]);
        s.apply(&mut a);
        assert!(a.data.iter().all(|t| t.logit == 0.0));
    }

    struct Letters;
    impl TokenText for Letters {
        fn n_tokens(&self) -> usize {
            4
        }
        fn token_text(&self, id: i32) -> Vec<u8> {
            [&b"a"[..], b"b\n", b"c", b":x"][id as usize].to_vec()
        }
        fn tokenize(&self, text: &[u8]) -> Vec<i32> {
            text.iter().map(|&c| (c as i32) + 100).collect()
        }
        fn is_eog(&self, _id: i32) -> bool {
            false
        }
    }

    #[test]
    fn dry_text_breakers_find_containing_tokens() {
        let breakers = ["\n".to_string(), ":".to_string()];
        // history 2 0 2 0: token 2 would extend "2 0" (len 2) and is penalised
        let mut s = dry(&Letters, 64, 1.0, 1.75, 2, 64, &breakers);
        for t in [2, 0, 2, 0] {
            s.accept(t);
        }
        let mut a = arr(&[0.0; 4]);
        s.apply(&mut a);
        assert_eq!(a.data[2].logit, -1.0);
        // history 1 0 1 0: token 1 ("b\n") contains a breaker, so it restarts the repeat and is
        // itself never penalised
        let mut s = dry(&Letters, 64, 1.0, 1.75, 2, 64, &breakers);
        for t in [3, 1, 0, 1, 0] {
            s.accept(t);
        }
        let mut a = arr(&[0.0; 4]);
        s.apply(&mut a);
        assert!(a.data.iter().all(|t| t.logit == 0.0));
        assert_eq!(dry(&Letters, 64, 0.0, 1.75, 2, 64, &[]).name(), "?dry");
    }
}
