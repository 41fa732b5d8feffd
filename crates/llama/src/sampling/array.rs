//! The candidate array and the helpers every sampler shares (sorting, softmax, temperature),
//! with llama.cpp's arithmetic: float softmax summed in array order, `sorted` tracked as a flag.

use std::cmp::Ordering;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenData {
    pub id: i32,
    pub logit: f32,
    pub p: f32,
}

/// `llama_token_data_array`: the live candidates are all of `data` (samplers truncate it).
#[derive(Clone, Debug, Default)]
pub struct TokenDataArray {
    pub data: Vec<TokenData>,
    /// Index into `data` of the chosen token, -1 while none is chosen.
    pub selected: i64,
    /// Whether `data` is sorted by descending logit.
    pub sorted: bool,
}

impl TokenDataArray {
    /// One candidate per vocabulary entry, id = index, as `llama_sampler_sample` builds it.
    pub fn from_logits(logits: &[f32]) -> Self {
        TokenDataArray {
            data: logits
                .iter()
                .enumerate()
                .map(|(i, &logit)| TokenData {
                    id: i as i32,
                    logit,
                    p: 0.0,
                })
                .collect(),
            selected: -1,
            sorted: false,
        }
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The selected token's id, if a sampler selected one in range.
    pub fn selected_id(&self) -> Option<i32> {
        usize::try_from(self.selected)
            .ok()
            .and_then(|i| self.data.get(i))
            .map(|t| t.id)
    }
}

fn by_logit_desc(a: &TokenData, b: &TokenData) -> Ordering {
    b.logit.partial_cmp(&a.logit).unwrap_or(Ordering::Equal)
}

/// Keep the `n` highest logits, sorted descending (`llama_token_data_array_partial_sort_inplace`).
pub(crate) fn partial_sort_inplace(cur: &mut TokenDataArray, n: usize) {
    let n = n.min(cur.data.len());
    if n < cur.data.len() && n > 0 {
        cur.data.select_nth_unstable_by(n - 1, by_logit_desc);
    }
    cur.data.truncate(n);
    cur.data.sort_by(by_logit_desc);
    cur.sorted = true;
}

/// `llama_sampler_softmax_impl`: probabilities from logits, optionally sorting first.
pub(crate) fn softmax(cur: &mut TokenDataArray, do_sort: bool) {
    if cur.data.is_empty() {
        return;
    }
    if do_sort && !cur.sorted {
        let n = cur.data.len();
        partial_sort_inplace(cur, n);
    }
    let mut max_l = cur.data[0].logit;
    if !cur.sorted {
        for t in &cur.data[1..] {
            max_l = max_l.max(t.logit);
        }
    }
    let mut cum_sum = 0.0f32;
    for t in cur.data.iter_mut() {
        let p = (t.logit - max_l).exp();
        t.p = p;
        cum_sum += p;
    }
    for t in cur.data.iter_mut() {
        t.p /= cum_sum;
    }
}

/// `llama_sampler_temp_impl`: divide by the temperature; at or below zero keep only the first
/// maximum and push every other logit to -inf.
pub(crate) fn temp_impl(cur: &mut TokenDataArray, temp: f32) {
    if temp <= 0.0 {
        if cur.data.is_empty() {
            return;
        }
        let mut max_i = 0;
        let mut max_l = cur.data[0].logit;
        for i in 1..cur.data.len() {
            if cur.data[i].logit > max_l {
                cur.data[max_i].logit = f32::NEG_INFINITY;
                max_i = i;
                max_l = cur.data[i].logit;
            } else {
                cur.data[i].logit = f32::NEG_INFINITY;
            }
        }
        return;
    }
    for t in cur.data.iter_mut() {
        t.logit /= temp;
    }
}

/// `llama_sampler_top_k_impl`.
pub(crate) fn top_k_impl(cur: &mut TokenDataArray, k: i32) {
    if k <= 0 {
        return;
    }
    let k = (k as usize).min(cur.data.len());
    if !cur.sorted {
        partial_sort_inplace(cur, k);
    }
    cur.data.truncate(k);
}

#[cfg(test)]
pub(crate) fn arr(logits: &[f32]) -> TokenDataArray {
    TokenDataArray::from_logits(logits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_of_two_equal_logits_is_half() {
        let mut a = arr(&[1.0, 1.0]);
        softmax(&mut a, false);
        assert_eq!(a.data[0].p, 0.5);
        assert_eq!(a.data[1].p, 0.5);
    }

    #[test]
    fn softmax_with_sort_orders_descending() {
        let mut a = arr(&[0.0, 2.0, 1.0]);
        softmax(&mut a, true);
        let ids: Vec<i32> = a.data.iter().map(|t| t.id).collect();
        assert_eq!(ids, vec![1, 2, 0]);
        assert!(a.sorted);
        // e^0 / (e^0 + e^-1 + e^-2)
        let want = 1.0 / (1.0 + (-1.0f32).exp() + (-2.0f32).exp());
        assert!((a.data[0].p - want).abs() < 1e-6);
    }

    #[test]
    fn zero_temperature_keeps_the_first_maximum_only() {
        let mut a = arr(&[1.0, 3.0, 2.0, 3.0]);
        temp_impl(&mut a, 0.0);
        let l: Vec<f32> = a.data.iter().map(|t| t.logit).collect();
        assert_eq!(l[1], 3.0);
        assert!(l[0].is_infinite() && l[2].is_infinite() && l[3].is_infinite());
    }

    #[test]
    fn top_k_keeps_k_sorted() {
        let mut a = arr(&[0.5, 3.0, 2.0, 1.0, 4.0]);
        top_k_impl(&mut a, 2);
        let ids: Vec<i32> = a.data.iter().map(|t| t.id).collect();
        assert_eq!(ids, vec![4, 1]);
        assert!(a.sorted);
    }
}
