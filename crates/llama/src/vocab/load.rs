//! Building a [`Vocab`] from a model's `tokenizer.*` metadata, step for step as llama.cpp's
//! `llama_vocab::impl::load`, including its log lines (function name `load`).

use std::collections::{BTreeSet, HashMap};

use gguf::{Value, ValueType};

use super::bpe::Bpe;
use super::plamo2::Plamo2;
use super::pretok::{PreTokError, PreTokenizer};
use super::pretype::{self, PreType};
use super::rwkv::Rwkv;
use super::ugm::Ugm;
use super::{attr, Engine, SpecialTokens, TokenData, TokenMap, Vocab, VocabFlags, VocabType};
use super::{Token, TOKEN_NULL};

#[derive(Debug, thiserror::Error)]
pub enum VocabError {
    #[error("key not found in model: {0}")]
    MissingKey(String),
    #[error("invalid gguf type for {0}")]
    BadType(String),
    #[error("unknown tokenizer: '{0}'")]
    UnknownTokenizer(String),
    #[error("unknown pre-tokenizer type: '{0}'")]
    UnknownPre(String),
    #[error("cannot find tokenizer vocab in model file")]
    NoTokens,
    #[error("cannot find tokenizer merges in model file")]
    NoMerges,
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Regex(#[from] PreTokError),
}

const KV_MODEL: &str = "tokenizer.ggml.model";
const KV_PRE: &str = "tokenizer.ggml.pre";
const KV_TOKENS: &str = "tokenizer.ggml.tokens";
const KV_TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
const KV_TOKEN_TYPE_COUNT: &str = "tokenizer.ggml.token_type_count";
const KV_SCORES: &str = "tokenizer.ggml.scores";
const KV_MERGES: &str = "tokenizer.ggml.merges";
const KV_ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
const KV_ADD_EOS: &str = "tokenizer.ggml.add_eos_token";
const KV_ADD_SEP: &str = "tokenizer.ggml.add_sep_token";
const KV_ADD_PREFIX: &str = "tokenizer.ggml.add_space_prefix";
const KV_REMOVE_EXTRA_WS: &str = "tokenizer.ggml.remove_extra_whitespaces";
const KV_CHARSMAP: &str = "tokenizer.ggml.precompiled_charsmap";
const KV_LOWERCASE: &str = "tokenizer.ggml.normalizer.lowercase";
const KV_STRIP_ACCENTS: &str = "tokenizer.ggml.normalizer.strip_accents";
const KV_SUPPRESS: &str = "tokenizer.ggml.suppress_tokens";

/// Metadata access: a GGUF file's `get`, or any map of keys to values.
pub type Meta<'a> = &'a dyn Fn(&str) -> Option<&'a Value>;

fn get_str(meta: Meta, key: &str) -> Result<Option<String>, VocabError> {
    match meta(key) {
        None => Ok(None),
        Some(v) => v
            .as_str()
            .map(|s| Some(s.to_string()))
            .ok_or_else(|| VocabError::BadType(key.into())),
    }
}

fn get_bool(meta: Meta, key: &str) -> Result<Option<bool>, VocabError> {
    match meta(key) {
        None => Ok(None),
        Some(v) => v
            .as_bool()
            .map(Some)
            .ok_or_else(|| VocabError::BadType(key.into())),
    }
}

fn get_u32(meta: Meta, key: &str) -> Result<Option<u32>, VocabError> {
    match meta(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|x| u32::try_from(x).ok())
            .map(Some)
            .ok_or_else(|| VocabError::BadType(key.into())),
    }
}

fn get_array<'a>(meta: Meta<'a>, key: &str) -> Option<&'a gguf::Array> {
    meta(key).and_then(Value::as_array)
}

fn token_type_attr(t: i32) -> u32 {
    match t {
        2 => attr::UNKNOWN,
        5 => attr::UNUSED,
        1 => attr::NORMAL,
        3 => attr::CONTROL,
        4 => attr::USER_DEFINED,
        6 => attr::BYTE,
        _ => attr::UNDEFINED,
    }
}

const DNA_KMER_MARKER: &str = "\u{E000}";

/// Whether U+2581 follows some other character in `text`.
fn space_mark_inside_word(text: &str) -> bool {
    let mut prev: Option<char> = None;
    for c in text.chars() {
        if c == '\u{2581}' && prev.is_some_and(|p| p != '\u{2581}') {
            return true;
        }
        prev = Some(c);
    }
    false
}

impl Vocab {
    /// Load the vocabulary of a GGUF file (its metadata is enough).
    pub fn from_gguf(file: &gguf::GgufFile) -> Result<Vocab, VocabError> {
        Vocab::from_meta(&|k| file.get(k))
    }

    /// Load from any source of metadata values keyed like GGUF.
    pub fn from_meta<'a>(meta: Meta<'a>) -> Result<Vocab, VocabError> {
        let model =
            get_str(meta, KV_MODEL)?.ok_or_else(|| VocabError::MissingKey(KV_MODEL.into()))?;
        let mut pre = get_str(meta, KV_PRE)?.unwrap_or_default();
        let n_token_types = get_u32(meta, KV_TOKEN_TYPE_COUNT)?.unwrap_or(0);

        let mut s = SpecialTokens {
            bos: 1,
            eos: 2,
            eot: TOKEN_NULL,
            eom: TOKEN_NULL,
            unk: 0,
            sep: TOKEN_NULL,
            pad: TOKEN_NULL,
            mask: TOKEN_NULL,
            linefeed: 13,
            fim_pre: TOKEN_NULL,
            fim_suf: TOKEN_NULL,
            fim_mid: TOKEN_NULL,
            fim_pad: TOKEN_NULL,
            fim_rep: TOKEN_NULL,
            fim_sep: TOKEN_NULL,
        };
        let mut f = VocabFlags {
            add_space_prefix: false,
            add_bos: false,
            add_eos: false,
            add_sep: false,
            ignore_merges: false,
            clean_spaces: false,
            remove_extra_whitespaces: false,
            escape_whitespaces: true,
            treat_whitespace_as_suffix: false,
            lowercase: true,
            strip_accents: true,
        };
        let mut merges: Option<Vec<&str>> = None;
        let mut charsmap: Vec<u8> = Vec::new();
        let set_ids = |s: &mut SpecialTokens, bos, eos, unk, sep, pad, mask| {
            s.bos = bos;
            s.eos = eos;
            s.unk = unk;
            s.sep = sep;
            s.pad = pad;
            s.mask = mask;
        };
        let n = TOKEN_NULL;
        let vtype = match model.as_str() {
            "no_vocab" | "none" => return Vocab::no_vocab(meta, model, pre),
            "llama" => {
                set_ids(&mut s, 1, 2, 0, n, n, n);
                VocabType::Spm
            }
            "bert" => {
                set_ids(&mut s, 101, n, 100, 102, 0, 103);
                f.add_sep = true;
                VocabType::Wpm
            }
            "gpt2" | "hybriddna" | "whitespace" | "gemma4" => {
                if model == "gemma4" {
                    pre = "gemma4".into();
                }
                merges = read_merges(meta, model != "gemma4" && pre == "kimi-k2")?;
                if model == "gemma4" {
                    set_ids(&mut s, n, n, n, n, n, n);
                } else {
                    set_ids(&mut s, 11, 11, n, n, n, n);
                }
                VocabType::Bpe
            }
            "t5" => {
                set_ids(&mut s, n, 1, 2, n, 0, n);
                charsmap = read_charsmap(meta)?;
                VocabType::Ugm
            }
            "rwkv" => {
                s.bos = n;
                s.eos = n;
                s.unk = n;
                s.sep = n;
                s.pad = n;
                VocabType::Rwkv
            }
            "test" => {
                set_ids(&mut s, n, n, n, n, n, n);
                VocabType::Test
            }
            "plamo2" => {
                set_ids(&mut s, 1, 2, 0, n, 3, n);
                VocabType::Plamo2
            }
            _ => return Err(VocabError::UnknownTokenizer(model)),
        };

        let mut pre_type = PreType::Default;
        match vtype {
            VocabType::Bpe => {
                f.add_space_prefix = false;
                f.escape_whitespaces = false;
                f.clean_spaces = true;
                if pre.is_empty() {
                    for line in [
                        "missing pre-tokenizer type, using: 'default'",
                        "                                             ",
                        "************************************        ",
                        "GENERATION QUALITY WILL BE DEGRADED!        ",
                        "CONSIDER REGENERATING THE MODEL             ",
                        "************************************        ",
                        "                                             ",
                    ] {
                        ggml::log_warn!("load: {}\n", line);
                    }
                } else {
                    let st = pretype::settings_for(&pre)
                        .ok_or_else(|| VocabError::UnknownPre(pre.clone()))?;
                    pre_type = st.pre;
                    f.clean_spaces = st.clean_spaces;
                    f.ignore_merges |= st.ignore_merges;
                    f.add_bos |= st.add_bos;
                    f.add_sep |= st.add_sep;
                    f.escape_whitespaces |= st.escape_whitespaces;
                    if st.bos_null {
                        s.bos = TOKEN_NULL;
                    }
                    if st.no_lowercase {
                        f.lowercase = false;
                    }
                }
            }
            VocabType::Spm => {
                f.add_space_prefix = true;
                f.clean_spaces = false;
                f.add_bos = true;
                f.add_eos = false;
            }
            VocabType::Wpm => {
                f.add_space_prefix = false;
                f.clean_spaces = true;
                f.add_bos = true;
                f.add_eos = false;
                f.add_sep = true;
            }
            VocabType::Ugm => {
                f.add_bos = false;
                f.add_eos = true;
            }
            VocabType::Rwkv => {
                f.add_space_prefix = false;
                f.clean_spaces = false;
                f.add_bos = false;
                f.add_eos = false;
            }
            _ => {}
        }
        if let Some(v) = get_bool(meta, KV_ADD_PREFIX)? {
            f.add_space_prefix = v;
        }
        if let Some(v) = get_bool(meta, KV_REMOVE_EXTRA_WS)? {
            f.remove_extra_whitespaces = v;
        }

        let tokens = read_tokens(meta)?;
        let n_tokens = tokens.len();
        let mut token_to_id: TokenMap = HashMap::default();
        token_to_id.reserve(n_tokens);
        let mut max_token_len = 0;
        for (i, t) in tokens.iter().enumerate() {
            max_token_len = max_token_len.max(t.text.len());
            if token_to_id
                .insert(t.text.as_bytes().into(), i as Token)
                .is_some()
            {
                return Err(VocabError::Invalid(format!(
                    "duplicate token text '{}' at index {i}",
                    t.text
                )));
            }
        }
        let mut tokens = tokens;
        if model == "hybriddna" {
            if let Some(&oov) = token_to_id.get("<oov>".as_bytes()) {
                for t in tokens.iter_mut().skip(oov as usize + 1) {
                    if t.text.len() > DNA_KMER_MARKER.len() && t.text.ends_with(DNA_KMER_MARKER) {
                        let keep = t.text.len() - DNA_KMER_MARKER.len();
                        t.text.truncate(keep);
                    }
                }
            }
        }

        ggml::log_debug!(
            "init_tokenizer: initializing tokenizer for type {}\n",
            vtype.id()
        );
        let (engine, n_merges) = match vtype {
            VocabType::Spm => (
                Engine::Spm {
                    split_words: tokens.iter().all(|t| !space_mark_inside_word(&t.text)),
                },
                0,
            ),
            VocabType::Wpm => (Engine::Wpm, 0),
            VocabType::Test => (Engine::Test, 0),
            VocabType::Ugm => (Engine::Ugm(Box::new(Ugm::new(&tokens, charsmap))), 0),
            VocabType::Rwkv => (Engine::Rwkv(Box::new(Rwkv::new(&tokens))), 0),
            VocabType::Bpe => {
                let (exprs, byte_encode) = pretype::regexes(pre_type);
                let pt = PreTokenizer::new(&exprs)?;
                let m: &[&str] = merges.as_deref().unwrap_or(&[]);
                let bpe = Bpe::new(
                    &token_to_id,
                    tokens.len(),
                    pt,
                    pre_type,
                    byte_encode,
                    f.ignore_merges,
                    m,
                );
                let nm = bpe.n_merges;
                (Engine::Bpe(Box::new(bpe)), nm)
            }
            VocabType::Plamo2 => (
                Engine::Plamo2(Box::new(Plamo2::new(&tokens).map_err(VocabError::Invalid)?)),
                0,
            ),
            VocabType::None => (Engine::None, 0),
        };

        let mut v = Vocab {
            model,
            pre,
            vtype,
            pre_type,
            n_token_types,
            max_token_len,
            tokens,
            token_to_id,
            special: s,
            flags: f,
            n_merges,
            cache_special: Vec::new(),
            piece_cache: Vec::new(),
            eog: BTreeSet::new(),
            suppress: Vec::new(),
            engine,
            special_matcher: Default::default(),
        };
        v.find_linefeed();
        v.read_special_ids(meta)?;
        v.detect_special_tokens();
        v.build_caches();
        v.apply_model_attrs(meta)?;
        // Tokenizing "\n" above cached a matcher built before the special tokens were known.
        v.special_matcher = Default::default();
        Ok(v)
    }

    fn no_vocab(meta: Meta, model: String, pre: String) -> Result<Vocab, VocabError> {
        let arch = get_str(meta, "general.architecture")?.unwrap_or_default();
        let mut tokens = Vec::new();
        if let Some(n) = get_u32(meta, &format!("{arch}.vocab_size"))? {
            ggml::log_warn!("load: adding {} dummy tokens\n", n);
            tokens = vec![
                TokenData {
                    text: String::new(),
                    score: 0.0,
                    attr: attr::UNDEFINED,
                };
                n as usize
            ];
        }
        let n = TOKEN_NULL;
        Ok(Vocab {
            model,
            pre,
            vtype: VocabType::None,
            pre_type: PreType::Default,
            n_token_types: 0,
            max_token_len: 0,
            tokens,
            token_to_id: HashMap::default(),
            special: SpecialTokens {
                bos: n,
                eos: n,
                eot: n,
                eom: n,
                unk: n,
                sep: n,
                pad: n,
                mask: n,
                linefeed: n,
                fim_pre: n,
                fim_suf: n,
                fim_mid: n,
                fim_pad: n,
                fim_rep: n,
                fim_sep: n,
            },
            flags: VocabFlags {
                add_space_prefix: false,
                add_bos: false,
                add_eos: false,
                add_sep: false,
                ignore_merges: false,
                clean_spaces: false,
                remove_extra_whitespaces: false,
                escape_whitespaces: true,
                treat_whitespace_as_suffix: false,
                lowercase: true,
                strip_accents: true,
            },
            n_merges: 0,
            cache_special: Vec::new(),
            piece_cache: Vec::new(),
            eog: BTreeSet::new(),
            suppress: Vec::new(),
            engine: Engine::None,
            special_matcher: Default::default(),
        })
    }

    fn find_linefeed(&mut self) {
        match self.vtype {
            VocabType::Spm => match self.byte_to_token(b'\n') {
                Some(id) => self.special.linefeed = id,
                None => {
                    // llama.cpp prints the exception text of std::unordered_map::at, unterminated.
                    ggml::log_warn!(
                        "load: SPM vocabulary, but newline token not found: _Map_base::at! Using special_pad_id instead."
                    );
                    self.special.linefeed = self.special.pad;
                }
            },
            VocabType::Wpm => self.special.linefeed = self.special.pad,
            _ => {
                let ids = self.tokenize(b"\n", false, false);
                match ids.first() {
                    Some(&id) => self.special.linefeed = id,
                    None => {
                        ggml::log_warn!(
                            "load: model vocab missing newline token, using special_pad_id instead\n"
                        );
                        self.special.linefeed = self.special.pad;
                    }
                }
            }
        }
    }

    fn read_special_ids(&mut self, meta: Meta) -> Result<(), VocabError> {
        let n_tokens = self.tokens.len();
        // (key, field); the deprecated prefix/suffix/middle keys alias the FIM fields.
        const KEYS: [(&str, usize); 17] = [
            ("tokenizer.ggml.bos_token_id", 0),
            ("tokenizer.ggml.eos_token_id", 1),
            ("tokenizer.ggml.eot_token_id", 2),
            ("tokenizer.ggml.eom_token_id", 3),
            ("tokenizer.ggml.unknown_token_id", 4),
            ("tokenizer.ggml.seperator_token_id", 5),
            ("tokenizer.ggml.padding_token_id", 6),
            ("tokenizer.ggml.mask_token_id", 7),
            ("tokenizer.ggml.fim_pre_token_id", 8),
            ("tokenizer.ggml.fim_suf_token_id", 9),
            ("tokenizer.ggml.fim_mid_token_id", 10),
            ("tokenizer.ggml.fim_pad_token_id", 11),
            ("tokenizer.ggml.fim_rep_token_id", 12),
            ("tokenizer.ggml.fim_sep_token_id", 13),
            ("tokenizer.ggml.prefix_token_id", 8),
            ("tokenizer.ggml.suffix_token_id", 9),
            ("tokenizer.ggml.middle_token_id", 10),
        ];
        for (key, field) in KEYS {
            let s = &mut self.special;
            let id = match field {
                0 => &mut s.bos,
                1 => &mut s.eos,
                2 => &mut s.eot,
                3 => &mut s.eom,
                4 => &mut s.unk,
                5 => &mut s.sep,
                6 => &mut s.pad,
                7 => &mut s.mask,
                8 => &mut s.fim_pre,
                9 => &mut s.fim_suf,
                10 => &mut s.fim_mid,
                11 => &mut s.fim_pad,
                12 => &mut s.fim_rep,
                _ => &mut s.fim_sep,
            };
            if *id >= 0 && *id as usize >= n_tokens {
                ggml::log_warn!(
                    "load: default special token '{}' = {} out of vocab range, disabling\n",
                    key,
                    *id
                );
                *id = TOKEN_NULL;
            }
            let Some(new_id) = get_u32(meta, key)? else {
                continue;
            };
            if new_id as usize >= n_tokens {
                ggml::log_warn!(
                    "load: bad special token: '{}' = {}, using default id {}\n",
                    key,
                    new_id,
                    *id
                );
            } else {
                *id = new_id as Token;
            }
        }
        let f = &mut self.flags;
        if let Some(v) = get_bool(meta, KV_ADD_BOS)? {
            f.add_bos = v;
        }
        if let Some(v) = get_bool(meta, KV_ADD_EOS)? {
            f.add_eos = v;
        }
        if let Some(v) = get_bool(meta, KV_ADD_SEP)? {
            f.add_sep = v;
        }
        if self.pre_type == PreType::Gemma4 && !f.add_bos {
            f.add_bos = true;
            ggml::log_warn!("load: override '{}' to 'true' for Gemma4\n", KV_ADD_BOS);
        }
        if let Some(v) = get_bool(meta, KV_LOWERCASE)? {
            f.lowercase = v;
        }
        f.strip_accents = f.lowercase;
        if let Some(v) = get_bool(meta, KV_STRIP_ACCENTS)? {
            f.strip_accents = v;
        }
        if let Some(v) = meta(KV_SUPPRESS) {
            let arr = v
                .as_array()
                .filter(|a| a.elem_type() == ValueType::I32)
                .and_then(|a| a.i32s())
                .ok_or_else(|| VocabError::BadType(KV_SUPPRESS.into()))?;
            self.suppress = arr
                .into_iter()
                .filter(|&id| id >= 0 && (id as usize) < n_tokens)
                .collect();
        }
        Ok(())
    }

    fn build_caches(&mut self) {
        let mut cache: Vec<Token> = (0..self.tokens.len() as Token)
            .filter(|&id| {
                self.tokens[id as usize].attr & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN)
                    != 0
            })
            .collect();
        cache.sort_by(|&a, &b| {
            self.tokens[b as usize]
                .text
                .len()
                .cmp(&self.tokens[a as usize].text.len())
        });
        ggml::log_info!("load: special tokens cache size = {}\n", cache.len());
        self.cache_special = cache;

        let pieces: Vec<Vec<u8>> = (0..self.tokens.len() as Token)
            .map(|id| self.token_to_piece_uncached(id, true))
            .collect();
        let size: usize = pieces.iter().map(Vec::len).sum();
        self.piece_cache = pieces;
        ggml::log_info!(
            "load: token to piece cache size = {:.4} MB\n",
            size as f64 / 1024.0 / 1024.0
        );
    }

    /// Per-model attribute fixes llama.cpp applies by model/tokenizer/architecture name.
    fn apply_model_attrs(&mut self, meta: Meta) -> Result<(), VocabError> {
        let name = get_str(meta, "general.name")?
            .unwrap_or_default()
            .to_ascii_lowercase();
        let pre = get_str(meta, KV_PRE)?.unwrap_or_default();
        let arch = get_str(meta, "general.architecture")?.unwrap_or_default();
        let any = |s: &str, subs: &[&str]| subs.iter().any(|x| s.contains(x));
        let set = |v: &mut Vocab, text: &str, a: u32, on: bool| {
            if let Some(&id) = v.token_to_id.get(text.as_bytes()) {
                let t = &mut v.tokens[id as usize];
                t.attr = if on { t.attr | a } else { t.attr & !a };
            }
        };
        if any(&pre, &["jina-v2-de", "jina-v2-es", "jina-v2-code"])
            || any(&arch, &["nomic-bert-moe", "jina-bert-v3"])
        {
            if self.token_to_id.contains_key("<mask>".as_bytes()) {
                set(self, "<mask>", attr::LSTRIP, true);
            } else {
                ggml::log_warn!("load: Mask token is missing in vocab, please reconvert model!\n");
            }
        } else if any(&name, &["phi-3", "phi3"]) {
            for id in self.cache_special.clone() {
                self.tokens[id as usize].attr |= attr::RSTRIP;
            }
            set(self, "</s>", attr::RSTRIP, true);
            for t in ["<unk>", "<s>", "<|endoftext|>"] {
                set(self, t, attr::RSTRIP, false);
            }
        } else if any(&name, &["modern-bert"]) {
            if self.token_to_id.contains_key("[MASK]".as_bytes()) {
                set(self, "[MASK]", attr::LSTRIP, true);
            } else {
                ggml::log_warn!("load: Mask token missing in vocab!\n");
            }
        }
        Ok(())
    }
}

fn read_merges<'a>(meta: Meta<'a>, optional: bool) -> Result<Option<Vec<&'a str>>, VocabError> {
    match meta(KV_MERGES) {
        None if optional => {
            ggml::log_info!("load: Kimi-K2 tokenizer detected, skipping BPE merges\n");
            Ok(None)
        }
        None => Err(VocabError::NoMerges),
        Some(v) => {
            let arr = v
                .as_array()
                .and_then(|a| a.strings())
                .ok_or_else(|| VocabError::BadType(KV_MERGES.into()))?;
            Ok(Some(arr.iter().collect()))
        }
    }
}

fn read_charsmap(meta: Meta) -> Result<Vec<u8>, VocabError> {
    let Some(v) = meta(KV_CHARSMAP) else {
        return Ok(Vec::new());
    };
    let arr = v
        .as_array()
        .ok_or_else(|| VocabError::BadType(KV_CHARSMAP.into()))?;
    let bytes: Vec<u8> = match (arr.as_slice::<u8>(), arr.as_slice::<i8>()) {
        (Some(b), _) => b.to_vec(),
        (_, Some(b)) => b.iter().map(|&x| x as u8).collect(),
        _ => return Err(VocabError::BadType(KV_CHARSMAP.into())),
    };
    if bytes.len() < 4 {
        return Err(VocabError::Invalid(
            "precompiled_charsmap too small for xcda_blob_size header!".into(),
        ));
    }
    let blob = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    if blob + 4 >= bytes.len() {
        return Err(VocabError::Invalid(
            "Index out of array bounds in precompiled charsmap!".into(),
        ));
    }
    Ok(bytes)
}

fn read_tokens(meta: Meta) -> Result<Vec<TokenData>, VocabError> {
    let arr = get_array(meta, KV_TOKENS).ok_or(VocabError::NoTokens)?;
    let texts = arr
        .strings()
        .ok_or_else(|| VocabError::BadType(KV_TOKENS.into()))?;
    let n = texts.len();
    let scores: Option<Vec<f32>> = match meta(KV_SCORES) {
        None => None,
        Some(v) => {
            let a = v
                .as_array()
                .ok_or_else(|| VocabError::BadType(KV_SCORES.into()))?;
            let sc: Vec<f32> = match (a.as_slice::<f32>(), a.as_slice::<i32>()) {
                (Some(f), _) => f.to_vec(),
                (_, Some(i)) => i.iter().map(|&x| x as f32).collect(),
                _ => return Err(VocabError::BadType(KV_SCORES.into())),
            };
            if sc.len() < n {
                return Err(VocabError::Invalid(format!(
                    "Index out of array bounds for scores ({} < {})",
                    sc.len(),
                    n
                )));
            }
            Some(sc)
        }
    };
    let types: Option<Vec<i32>> = match meta(KV_TOKEN_TYPE) {
        None => None,
        Some(v) => {
            let a = v
                .as_array()
                .filter(|a| a.elem_type() == ValueType::I32)
                .and_then(|a| a.i32s())
                .ok_or_else(|| VocabError::BadType(KV_TOKEN_TYPE.into()))?;
            if a.len() < n {
                return Err(VocabError::Invalid(format!(
                    "Index out of array bounds for toktypes ({} < {})",
                    a.len(),
                    n
                )));
            }
            Some(a)
        }
    };
    let mut out = Vec::with_capacity(n);
    for (i, text) in texts.into_iter().enumerate() {
        let text = if text.is_empty() {
            ggml::log_warn!("load: empty token at index {}\n", i);
            format!("[EMPTY_{i}]")
        } else {
            text.to_string()
        };
        out.push(TokenData {
            text,
            score: scores.as_ref().map_or(0.0, |s| s[i]),
            attr: types
                .as_ref()
                .map_or(attr::NORMAL, |t| token_type_attr(t[i])),
        });
    }
    Ok(out)
}
