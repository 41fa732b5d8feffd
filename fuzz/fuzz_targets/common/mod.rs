//! Shared by the tokenizer targets: finding and loading vocabularies once per process, a
//! minimal GGUF writer for the synthetic ones, and the checks every tokenizer must pass.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

use llama::vocab::Vocab;

/// Where ../shared/vocab and llama.cpp's models/ are: `LLAMA_SHARED_DIR` and
/// `LLAMACPP_MODELS_DIR` override the defaults, which are the layout of these machines
/// (fuzz/ inside the checkout, `shared` and `llamacpp-src` next to it).
pub fn vocab_path(name: &str) -> Option<PathBuf> {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(d) = std::env::var_os("LLAMA_SHARED_DIR") {
        dirs.push(PathBuf::from(d).join("vocab"));
    }
    if let Some(d) = std::env::var_os("LLAMACPP_MODELS_DIR") {
        dirs.push(PathBuf::from(d));
    }
    dirs.push(manifest.join("../../shared/vocab"));
    dirs.push(manifest.join("../../llamacpp-src/llama_cpp_python-0.3.36/vendor/llama.cpp/models"));
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

fn quiet() {
    // Load-time warnings and invalid-UTF-8 notes would flood the fuzzer's output.
    ggml::log::set_log_callback(Some(Box::new(|_, _| {})));
}

/// Load a vocabulary file, or stop the fuzzer with the reason: a target that silently fuzzed
/// nothing would report executions that tested nothing.
pub fn load_file(name: &str) -> Vocab {
    quiet();
    let Some(path) = vocab_path(name) else {
        eprintln!(
            "fuzz: vocabulary {name} not found (set LLAMA_SHARED_DIR or LLAMACPP_MODELS_DIR)"
        );
        std::process::exit(2);
    };
    let file = match gguf::GgufFile::open_metadata(&path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("fuzz: {}: {e}", path.display());
            std::process::exit(2);
        }
    };
    match Vocab::from_gguf(&file) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("fuzz: {}: {e}", path.display());
            std::process::exit(2);
        }
    }
}

/// One lazily loaded vocabulary per slot, so a target over several files only pays for the
/// ones its inputs pick.
pub struct Lazy {
    slots: Vec<(&'static str, OnceLock<Vocab>)>,
}

impl Lazy {
    pub fn new(names: &[&'static str]) -> Lazy {
        Lazy {
            slots: names.iter().map(|n| (*n, OnceLock::new())).collect(),
        }
    }
    pub fn len(&self) -> usize {
        self.slots.len()
    }
    pub fn get(&self, i: usize) -> (&'static str, &Vocab) {
        let (name, cell) = &self.slots[i % self.slots.len()];
        (name, cell.get_or_init(|| load_file(name)))
    }
}

/// A GGUF file with only metadata, written by hand so the synthetic vocabularies depend on the
/// file format rather than on the in-memory value types of the gguf crate.
#[derive(Default)]
pub struct MiniGguf {
    n_kv: u64,
    kv: Vec<u8>,
}

impl MiniGguf {
    fn key(&mut self, k: &str, ty: u32) {
        self.n_kv += 1;
        self.kv.extend_from_slice(&(k.len() as u64).to_le_bytes());
        self.kv.extend_from_slice(k.as_bytes());
        self.kv.extend_from_slice(&ty.to_le_bytes());
    }
    fn string(&mut self, s: &str) {
        self.kv.extend_from_slice(&(s.len() as u64).to_le_bytes());
        self.kv.extend_from_slice(s.as_bytes());
    }
    pub fn str(mut self, k: &str, v: &str) -> Self {
        self.key(k, 8);
        self.string(v);
        self
    }
    pub fn bool(mut self, k: &str, v: bool) -> Self {
        self.key(k, 7);
        self.kv.push(v as u8);
        self
    }
    pub fn u32(mut self, k: &str, v: u32) -> Self {
        self.key(k, 4);
        self.kv.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn array_head(&mut self, k: &str, elem: u32, n: usize) {
        self.key(k, 9);
        self.kv.extend_from_slice(&elem.to_le_bytes());
        self.kv.extend_from_slice(&(n as u64).to_le_bytes());
    }
    pub fn strs(mut self, k: &str, v: &[String]) -> Self {
        self.array_head(k, 8, v.len());
        for s in v {
            self.string(s);
        }
        self
    }
    pub fn f32s(mut self, k: &str, v: &[f32]) -> Self {
        self.array_head(k, 6, v.len());
        for x in v {
            self.kv.extend_from_slice(&x.to_le_bytes());
        }
        self
    }
    pub fn i32s(mut self, k: &str, v: &[i32]) -> Self {
        self.array_head(k, 5, v.len());
        for x in v {
            self.kv.extend_from_slice(&x.to_le_bytes());
        }
        self
    }
    pub fn vocab(self) -> Vocab {
        quiet();
        let mut b = Vec::new();
        b.extend_from_slice(b"GGUF");
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&self.n_kv.to_le_bytes());
        b.extend_from_slice(&self.kv);
        while b.len() % 32 != 0 {
            b.push(0);
        }
        let f = gguf::GgufFile::from_bytes(b).expect("the synthetic vocabulary is a valid GGUF");
        Vocab::from_gguf(&f).expect("the synthetic vocabulary loads")
    }
}

/// Words the synthetic vocabularies share: enough overlap (prefixes, suffixes, spaces) that
/// the tokenizers have real choices to make.
pub const WORDS: &[&str] = &[
    "a", "b", "c", "ab", "abc", "bc", "the", "th", "he", "e", "hello", "hell", "lo", "world",
    "wor", "ld", " ", "  ", "\n", "\t", "é", "日本", "日", "本", "語", "ing", "in", "g", "!", "?",
    ".", ",", "'s", "0", "1", "12", "123", "x", "y", "z", "zz", "q", "<", ">", "|",
];

/// How one input is run: the tokenize flags and whether the bytes go in raw (any bytes, as
/// through the C API) or as the lossy UTF-8 text a caller holding a `str` would pass.
pub struct Mode {
    pub add_special: bool,
    pub parse_special: bool,
    pub raw: bool,
}

/// Split the first byte off as the selector: bits 0-1 the flags, bit 2 raw bytes, the rest
/// (>> 3) for the target's own choice (which vocabulary).
pub fn split(data: &[u8]) -> Option<(Mode, u8, Vec<u8>)> {
    let (&sel, rest) = data.split_first()?;
    let mode = Mode {
        add_special: sel & 1 != 0,
        parse_special: sel & 2 != 0,
        raw: sel & 4 != 0,
    };
    let text = if mode.raw {
        rest.to_vec()
    } else {
        String::from_utf8_lossy(rest).into_owned().into_bytes()
    };
    Some((mode, sel >> 3, text))
}

/// Tokenize and detokenize; every id must be a token of the vocabulary, and every id's piece
/// must be computable. Returns the ids and the detokenized text.
pub fn check(v: &Vocab, mode: &Mode, text: &[u8]) -> (Vec<i32>, Vec<u8>) {
    let ids = v.tokenize(text, mode.add_special, mode.parse_special);
    let n = v.n_tokens();
    for &id in &ids {
        assert!(
            id >= 0 && (id as usize) < n,
            "id {id} out of range (n_vocab {n})"
        );
    }
    if let Some(&id) = ids.first() {
        let _ = v.token_to_piece(id, 1, mode.parse_special);
    }
    let back = v.detokenize(&ids, mode.add_special, mode.parse_special);
    (ids, back)
}

pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Detokenize `ids` (of `text`, tokenized without special handling) and compare. Control
/// tokens are rendered: without special parsing their texts are not split off, but PLaMo-2's
/// and SPM's searches can still pick a control token whose text the input spells out, as
/// llama.cpp's do, and unrendered it would vanish.
pub fn assert_round_trip(v: &Vocab, text: &[u8], ids: &[i32]) {
    let back = v.detokenize(ids, false, true);
    assert!(
        text == back,
        "round trip through {} changed {:?} into {:?}",
        v.tokenizer_pre(),
        String::from_utf8_lossy(text),
        String::from_utf8_lossy(&back)
    );
}
