//! Every `.inp`/`.out` vector of ../shared/vocab, as llama.cpp's test-tokenizer-0 runs them
//! (no BOS/EOS, special tokens not parsed), plus round trips through detokenize.

use std::path::PathBuf;

use super::{Vocab, VocabType};

pub(crate) fn shared_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("LLAMA_SHARED_DIR") {
        return Some(PathBuf::from(d));
    }
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    [
        manifest.join("../../../shared"),
        manifest.join("../../shared"),
    ]
    .into_iter()
    .find(|p| p.join("vocab").is_dir())
}

/// The test texts of a `.inp` file, split exactly as test-tokenizer-0 splits them.
pub(crate) fn read_texts(raw: &[u8]) -> Vec<Vec<u8>> {
    let sep = b"\n__ggml_vocab_test__\n";
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < raw.len() {
        match memchr::memmem::find(&raw[pos..], sep) {
            Some(p) => {
                out.push(raw[pos..pos + p].to_vec());
                pos += p + sep.len();
            }
            None => {
                out.push(raw[pos..].to_vec());
                break;
            }
        }
    }
    out
}

fn vocab_files() -> Vec<PathBuf> {
    let Some(dir) = shared_dir() else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("vocab"))
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "gguf"));
    v.sort();
    v
}

fn load(path: &std::path::Path) -> Vocab {
    let file = gguf::GgufFile::open_metadata(path).expect("open vocab");
    Vocab::from_gguf(&file).expect("load vocab")
}

/// Every vocabulary of ../shared/vocab, loaded once for all tests.
pub(crate) fn shared_vocabs() -> &'static [(PathBuf, Vocab)] {
    static V: std::sync::OnceLock<Vec<(PathBuf, Vocab)>> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        vocab_files()
            .into_iter()
            .map(|p| {
                let v = load(&p);
                (p, v)
            })
            .collect()
    })
}

#[test]
fn vectors_of_every_vocab() {
    let vocabs = shared_vocabs();
    assert!(
        !vocabs.is_empty(),
        "no vocab files found (set LLAMA_SHARED_DIR)"
    );
    let mut failures = Vec::new();
    let mut n = 0;
    for (path, vocab) in vocabs {
        let inp = PathBuf::from(format!("{}.inp", path.display()));
        let out = PathBuf::from(format!("{}.out", path.display()));
        let (Ok(inp), Ok(out)) = (std::fs::read(&inp), std::fs::read_to_string(&out)) else {
            continue;
        };
        let texts = read_texts(&inp);
        let want: Vec<&str> = out.lines().collect();
        assert_eq!(
            texts.len(),
            want.len(),
            "{}: texts vs lines",
            path.display()
        );
        for (text, line) in texts.iter().zip(want) {
            n += 1;
            let expect: Vec<i32> = line
                .split_whitespace()
                .map(|t| t.parse().expect("token id"))
                .collect();
            let got = vocab.tokenize(text, false, false);
            if got != expect {
                failures.push(format!(
                    "{}: {:?}\n  want {:?}\n  got  {:?}",
                    path.file_name().unwrap_or_default().to_string_lossy(),
                    String::from_utf8_lossy(text),
                    expect,
                    got
                ));
            }
        }
    }
    assert!(n > 0);
    assert!(
        failures.is_empty(),
        "{} of {n} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn detokenize_round_trips() {
    let mut failures = Vec::new();
    for (path, vocab) in shared_vocabs() {
        let Ok(inp) = std::fs::read(format!("{}.inp", path.display())) else {
            continue;
        };
        // llama.cpp checks round trips for BPE and SPM only (test-tokenizer-1-*): WordPiece
        // and Unigram normalise (lowercase, accents, whitespace) by design.
        if !matches!(vocab.vocab_type(), VocabType::Bpe | VocabType::Spm) {
            continue;
        }
        for text in read_texts(&inp) {
            let toks = vocab.tokenize(&text, false, false);
            let back = vocab.detokenize(&toks, false, false);
            // What llama.cpp's decoding yields: BPE clean-up applied to the original text.
            let mut want = text.clone();
            if vocab.flags().clean_spaces {
                super::detok::clean_spaces_for_test(&mut want);
            }
            if vocab.vocab_type() == VocabType::Spm && text.is_empty() {
                continue;
            }
            if back != want {
                failures.push(format!(
                    "{}: {:?} -> {:?}",
                    path.display(),
                    String::from_utf8_lossy(&text),
                    String::from_utf8_lossy(&back)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn qwen2_vocab_metadata_matches_reference_log() {
    let Some((_, vocab)) = shared_vocabs()
        .iter()
        .find(|(p, _)| p.ends_with("ggml-vocab-qwen2.gguf"))
    else {
        panic!("ggml-vocab-qwen2.gguf not found");
    };
    assert_eq!(vocab.vocab_type(), VocabType::Bpe);
    assert_eq!(vocab.n_tokens(), 151936);
    assert_eq!(vocab.n_merges(), 151387);
    let s = vocab.special();
    assert_eq!(
        (s.bos, s.eos, s.pad, s.linefeed),
        (151643, 151643, 151643, 198)
    );
    // Both <|endoftext|> and <|im_end|> look like EOT; llama.cpp's hash-map order picks this.
    assert_eq!(s.eot, 151645);
    let eog: Vec<i32> = vocab.eog_tokens().iter().copied().collect();
    assert_eq!(eog, vec![128247, 151643, 151645]);
    assert_eq!(vocab.special_tokens_cache().len(), 294);
    assert_eq!(vocab.max_token_len(), 256);
    assert_eq!(
        vocab.tokenize(
            b"Hello world, this is a test of the tokenizer.",
            false,
            true
        ),
        vec![9707, 1879, 11, 419, 374, 264, 1273, 315, 279, 45958, 13]
    );
    assert_eq!(vocab.token_to_piece(1879, 0, true), b" world");
    assert_eq!(vocab.tokenize(b"<|im_start|>hi", false, true)[0], 151644);
    assert_ne!(vocab.tokenize(b"<|im_start|>hi", false, false)[0], 151644);
    // User-defined tokens are split out even when special tokens are not parsed.
    let user = vocab
        .special_tokens_cache()
        .iter()
        .copied()
        .find(|&id| vocab.token_attr(id) & super::attr::USER_DEFINED != 0)
        .expect("a user-defined token");
    let text = vocab.token_text(user).unwrap().as_bytes().to_vec();
    assert_eq!(vocab.tokenize(&text, false, false), vec![user]);
}
