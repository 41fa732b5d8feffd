//! The tokenizer keys of a generated model: copied from another GGUF file (`--vocab`), or a small
//! byte-level BPE vocabulary of our own: the 256 byte tokens in GPT-2's byte-to-unicode form,
//! merges learned from a few built-in paragraphs, and the ChatML control tokens.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use gguf::{Array, GgufFile, Value};

/// llama.cpp's token types.
const TOKEN_NORMAL: i32 = 1;
const TOKEN_CONTROL: i32 = 3;

const CORPUS: &str = include_str!("corpus.txt");

/// ChatML, the format of the control tokens below.
const CHAT_TEMPLATE: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// The tokenizer keys copied from a vocab file, in the order make-tiny-model.py writes them.
const COPIED_KEYS: [&str; 13] = [
    "tokenizer.ggml.model",
    "tokenizer.ggml.pre",
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.token_type",
    "tokenizer.ggml.scores",
    "tokenizer.ggml.merges",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.padding_token_id",
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.unknown_token_id",
    "tokenizer.ggml.add_bos_token",
    "tokenizer.ggml.add_eos_token",
    "tokenizer.chat_template",
];

pub struct Vocab {
    pub kv: Vec<(String, Value)>,
    pub n_tokens: u64,
}

/// Every `tokenizer.*` key of `path`: the ones make-tiny-model.py copies first, in its order
/// (token ids written as u32, as gguf-py does), then any others in file order.
pub fn from_file(path: &Path) -> Result<Vocab, String> {
    let f = GgufFile::open_metadata(path).map_err(|e| e.to_string())?;
    let n_tokens = f
        .get("tokenizer.ggml.tokens")
        .and_then(Value::as_array)
        .map(|a| a.len() as u64)
        .ok_or_else(|| format!("{}: no tokenizer.ggml.tokens array", path.display()))?;
    let mut kv = Vec::new();
    for key in COPIED_KEYS {
        if let Some(v) = f.get(key) {
            let v = if key.ends_with("_token_id") {
                let id = v.as_u64().and_then(|x| u32::try_from(x).ok());
                Value::U32(
                    id.ok_or_else(|| format!("{}: {key} is not a token id", path.display()))?,
                )
            } else {
                v.clone()
            };
            kv.push((key.to_string(), v));
        }
    }
    for (k, v) in &f.kv {
        if k.starts_with("tokenizer.") && !COPIED_KEYS.contains(&k.as_str()) {
            kv.push((k.clone(), v.clone()));
        }
    }
    Ok(Vocab { kv, n_tokens })
}

/// GPT-2's byte-to-unicode table: printable bytes stand for themselves, the others are shifted
/// to code points from 256 up, so that every byte string is a printable string. Listed in the
/// order of GPT-2's (and Qwen2's) first 256 tokens.
pub fn byte_tokens() -> Vec<(u8, char)> {
    let printable = |b: u8| (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
    let mut out: Vec<(u8, char)> = (0..=255u8)
        .filter(|&b| printable(b))
        .map(|b| (b, char::from(b)))
        .collect();
    for (n, b) in (0..=255u8).filter(|&b| !printable(b)).enumerate() {
        out.push((b, char::from_u32(256 + n as u32).expect("valid code point")));
    }
    out
}

/// Split text as GPT-2's pre-tokenizer roughly does: a word with its leading space, a run of
/// digits, a run of other symbols, or whitespace.
fn pre_tokenize(text: &str) -> Vec<&str> {
    #[derive(PartialEq, Clone, Copy)]
    enum Class {
        Letter,
        Digit,
        Space,
        Other,
    }
    let class = |c: char| {
        if c.is_alphabetic() {
            Class::Letter
        } else if c.is_ascii_digit() {
            Class::Digit
        } else if c.is_whitespace() {
            Class::Space
        } else {
            Class::Other
        }
    };
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut pieces = Vec::new();
    let mut start = 0;
    for k in 1..chars.len() {
        let (i, c) = chars[k];
        let (j, p) = chars[k - 1];
        if class(c) == class(p) {
            continue;
        }
        if p == ' ' && class(c) != Class::Space {
            // The space right before a word belongs to the word.
            if j > start {
                pieces.push(&text[start..j]);
            }
            start = j;
            continue;
        }
        pieces.push(&text[start..i]);
        start = i;
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

/// Learn up to `max_merges` BPE merges from `text` (most frequent pair first, ties broken by
/// the pair's text so the result never varies).
fn learn_merges(text: &str, max_merges: usize) -> Vec<(String, String)> {
    let table: HashMap<u8, char> = byte_tokens().into_iter().collect();
    let mut words: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    for piece in pre_tokenize(text) {
        let symbols = piece.bytes().map(|b| table[&b].to_string()).collect();
        *words.entry(symbols).or_default() += 1;
    }
    let mut words: Vec<(Vec<String>, u64)> = words.into_iter().collect();
    let mut merges = Vec::new();
    while merges.len() < max_merges {
        let mut pairs: HashMap<(&str, &str), u64> = HashMap::new();
        for (w, n) in &words {
            for p in w.windows(2) {
                *pairs.entry((&p[0], &p[1])).or_default() += n;
            }
        }
        let best = pairs
            .into_iter()
            .filter(|&(_, n)| n >= 2)
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)));
        let Some(((a, b), _)) = best else { break };
        let (a, b) = (a.to_string(), b.to_string());
        for (w, _) in &mut words {
            let mut i = 0;
            while i + 1 < w.len() {
                if w[i] == a && w[i + 1] == b {
                    let joined = format!("{}{}", w[i], w[i + 1]);
                    w.splice(i..i + 2, [joined]);
                }
                i += 1;
            }
        }
        merges.push((a, b));
    }
    merges
}

/// Our own vocabulary of exactly `n_vocab` tokens (0: its natural size): fewer merges when
/// `n_vocab` is small, or padding with unreachable `[PAD<id>]` tokens when it is larger (so a
/// model gets the embedding shape of the real one it imitates). The pads are
/// normal tokens, not control ones: llama.cpp scans every special token when it tokenizes,
/// and a hundred thousand of them would make that slow.
pub fn builtin(n_vocab: u64, pre: &str) -> Vocab {
    let mut tokens: Vec<String> = byte_tokens()
        .into_iter()
        .map(|(_, c)| c.to_string())
        .collect();
    let mut seen: HashSet<String> = tokens.iter().cloned().collect();
    let mut merges = learn_merges(CORPUS, 2000);
    // A small --vocab-size keeps only the first merges: room for them and the 3 control tokens.
    let limit = if n_vocab == 0 {
        usize::MAX
    } else {
        n_vocab as usize
    };
    let mut kept = 0;
    for (a, b) in &merges {
        let t = format!("{a}{b}");
        if !seen.contains(&t) {
            if tokens.len() + 3 >= limit {
                break;
            }
            seen.insert(t.clone());
            tokens.push(t);
        }
        kept += 1;
    }
    merges.truncate(kept);
    let mut types = vec![TOKEN_NORMAL; tokens.len()];
    let first_special = tokens.len() as u32;
    for s in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] {
        tokens.push(s.to_string());
        types.push(TOKEN_CONTROL);
    }
    while (tokens.len() as u64) < n_vocab {
        tokens.push(format!("[PAD{}]", tokens.len()));
        types.push(TOKEN_NORMAL);
    }
    let (eot, im_end) = (first_special, first_special + 2);
    let strs = |v: Vec<String>| Value::Array(Array::from_strs(v));
    let n_tokens = tokens.len() as u64;
    let kv = vec![
        ("tokenizer.ggml.model", Value::from("gpt2")),
        ("tokenizer.ggml.pre", Value::from(pre)),
        ("tokenizer.ggml.tokens", strs(tokens)),
        (
            "tokenizer.ggml.token_type",
            Value::Array(Array::from(types)),
        ),
        (
            "tokenizer.ggml.merges",
            strs(merges.iter().map(|(a, b)| format!("{a} {b}")).collect()),
        ),
        ("tokenizer.ggml.eos_token_id", Value::U32(eot)),
        ("tokenizer.ggml.padding_token_id", Value::U32(eot)),
        ("tokenizer.ggml.bos_token_id", Value::U32(eot)),
        ("tokenizer.ggml.eot_token_id", Value::U32(im_end)),
        ("tokenizer.chat_template", Value::from(CHAT_TEMPLATE)),
    ];
    Vocab {
        kv: kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        n_tokens,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_tokens_follow_gpt2_order() {
        let t = byte_tokens();
        assert_eq!(t.len(), 256);
        assert_eq!(t[0], (b'!', '!'));
        assert_eq!(t[187], (0xFF, 'ÿ'));
        assert_eq!(t[188], (0, 'Ā'));
        // space and newline become the familiar 'Ġ' and 'Ċ'
        assert_eq!(t.iter().find(|(b, _)| *b == b' ').unwrap().1, 'Ġ');
        assert_eq!(t.iter().find(|(b, _)| *b == b'\n').unwrap().1, 'Ċ');
        let distinct: HashSet<char> = t.iter().map(|x| x.1).collect();
        assert_eq!(distinct.len(), 256);
    }

    #[test]
    fn pre_tokenizer_keeps_leading_spaces_with_words() {
        assert_eq!(
            pre_tokenize("the cat, 42 sat"),
            vec!["the", " cat", ",", " 42", " sat"]
        );
        assert_eq!(pre_tokenize("x\n\ny"), vec!["x", "\n\n", "y"]);
        assert_eq!(pre_tokenize("a  b"), vec!["a", " ", " b"]);
    }

    #[test]
    fn builtin_vocab_is_consistent() {
        let v = builtin(0, "default");
        let get = |k: &str| {
            v.kv.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v)
                .unwrap()
        };
        let tokens = get("tokenizer.ggml.tokens")
            .as_array()
            .unwrap()
            .strings()
            .unwrap();
        let merges = get("tokenizer.ggml.merges")
            .as_array()
            .unwrap()
            .strings()
            .unwrap();
        assert!(merges.len() > 200, "{} merges", merges.len());
        let set: HashSet<&str> = tokens.iter().collect();
        assert_eq!(set.len(), tokens.len(), "tokens are unique");
        for m in merges {
            let (a, b) = m.split_once(' ').unwrap();
            assert!(
                set.contains(a) && set.contains(b) && set.contains(format!("{a}{b}").as_str()),
                "{m}"
            );
        }
        assert!(set.contains("Ġthe"));
        let eos = get("tokenizer.ggml.eos_token_id").as_u64().unwrap() as usize;
        assert_eq!(&tokens[eos], "<|endoftext|>");
        assert_eq!(v.n_tokens as usize, tokens.len());
        let padded = builtin(5000, "qwen2");
        assert_eq!(padded.n_tokens, 5000);
        let small = builtin(300, "qwen2");
        assert_eq!(small.n_tokens, 300);
        let n_merges = small
            .kv
            .iter()
            .find(|(k, _)| k == "tokenizer.ggml.merges")
            .unwrap()
            .1
            .as_array()
            .unwrap()
            .len();
        assert!(n_merges >= 300 - 259, "{n_merges}");
        // Learning is deterministic.
        assert_eq!(builtin(0, "default").kv, v.kv);
    }
}
