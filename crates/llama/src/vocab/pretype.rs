//! The pre-tokenizer types of byte-level BPE vocabularies (`tokenizer.ggml.pre`), the settings
//! each implies, and the regular expressions each splits text with (llama.cpp's
//! `llm_tokenizer_bpe` table at the pinned commit).

use super::pretok::{
    RE_GPT2, RE_HAN, RE_LLAMA3, RE_NEWLINES, RE_QWEN2, RE_QWEN35, RE_TINY_AYA_DIGITS,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreType {
    Default,
    Llama3,
    DeepseekLlm,
    DeepseekCoder,
    Falcon,
    Mpt,
    Starcoder,
    Gpt2,
    Refact,
    CommandR,
    Stablelm2,
    Qwen2,
    Olmo,
    Dbrx,
    Smaug,
    Poro,
    Chatglm4,
    Viking,
    Jais,
    Tekken,
    Smollm,
    Codeshell,
    Bloom,
    Gpt3Finnish,
    Exaone,
    Chameleon,
    Minerva,
    Deepseek3Llm,
    Gpt4o,
    Superbpe,
    Trillion,
    Bailingmoe,
    SeedCoder,
    Hunyuan,
    KimiK2,
    HunyuanDense,
    Grok2,
    GraniteDocling,
    MinimaxM2,
    Afmoe,
    SolarOpen,
    Youtu,
    ExaoneMoe,
    Qwen35,
    TinyAya,
    JoyaiLlm,
    Jais2,
    Gemma4,
    SarvamMoe,
    Minicpm5,
    Whitespace,
    GraniteEmbMulti,
    Mellum2,
    Laguna,
    HyV4,
    Spark25,
    Ufakzeka,
}

/// What a `tokenizer.ggml.pre` name sets besides the type (llama.cpp's defaults for BPE are
/// clean_spaces = true and everything else false).
#[derive(Clone, Copy, Debug)]
pub struct PreSettings {
    pub pre: PreType,
    pub clean_spaces: bool,
    pub ignore_merges: bool,
    pub add_bos: bool,
    pub add_sep: bool,
    pub escape_whitespaces: bool,
    pub bos_null: bool,
    pub no_lowercase: bool,
}

pub fn settings_for(name: &str) -> Option<PreSettings> {
    use PreType::*;
    let mut s = PreSettings {
        pre: Default,
        clean_spaces: true,
        ignore_merges: false,
        add_bos: false,
        add_sep: false,
        escape_whitespaces: false,
        bos_null: false,
        no_lowercase: false,
    };
    let unclean = |s: &mut PreSettings, p: PreType| {
        s.pre = p;
        s.clean_spaces = false;
    };
    match name {
        "default" => s.pre = Default,
        "minicpm5" => {
            s.pre = Minicpm5;
            s.ignore_merges = true;
        }
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0"
        | "lfm2" | "jina-v5-nano" => {
            s.pre = Llama3;
            s.ignore_merges = true;
            s.add_bos = true;
        }
        "deepseek-llm" => unclean(&mut s, DeepseekLlm),
        "deepseek-coder" => unclean(&mut s, DeepseekCoder),
        "deepseek-v3" => unclean(&mut s, Deepseek3Llm),
        "spark2_5" => unclean(&mut s, Spark25),
        "youtu" => {
            unclean(&mut s, Youtu);
            s.ignore_merges = true;
        }
        "falcon" => s.pre = Falcon,
        "mpt" => s.pre = Mpt,
        "starcoder" => s.pre = Starcoder,
        "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es" | "jina-v2-de"
        | "a.x-4.0" | "mellum" | "modern-bert" => s.pre = Gpt2,
        "jais-2" => s.pre = Jais2,
        "gemma4" | "granite-embed-multi-311m" => {
            s.pre = Gemma4;
            s.escape_whitespaces = true;
        }
        "sarvam-moe" => {
            unclean(&mut s, SarvamMoe);
            s.escape_whitespaces = true;
        }
        "jina-v1-en" | "jina-v2-code" | "roberta-bpe" => {
            s.pre = Gpt2;
            s.add_sep = true;
        }
        "whitespace" => {
            s.pre = Whitespace;
            s.no_lowercase = true;
        }
        "refact" => s.pre = Refact,
        "command-r" => unclean(&mut s, CommandR),
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" => unclean(&mut s, Qwen2),
        "qwen35" => unclean(&mut s, Qwen35),
        "stablelm2" => s.pre = Stablelm2,
        "olmo" => s.pre = Olmo,
        "dbrx" => s.pre = Dbrx,
        "smaug-bpe" => s.pre = Smaug,
        "poro-chat" => unclean(&mut s, Poro),
        "chatglm-bpe" => {
            s.pre = Chatglm4;
            s.bos_null = true;
        }
        "glm4" | "glm5" => {
            s.pre = Chatglm4;
            s.bos_null = true;
            s.ignore_merges = true;
        }
        "viking" => unclean(&mut s, Viking),
        "jais" => s.pre = Jais,
        "tekken" => {
            unclean(&mut s, Tekken);
            s.ignore_merges = true;
            s.add_bos = true;
        }
        "smollm" => unclean(&mut s, Smollm),
        "codeshell" => s.pre = Codeshell,
        "bloom" => s.pre = Bloom,
        "gpt3-finnish" => s.pre = Gpt3Finnish,
        "exaone" => s.pre = Exaone,
        "exaone4" => s.pre = Gpt2,
        "exaone-moe" => s.pre = ExaoneMoe,
        "chameleon" => {
            unclean(&mut s, Chameleon);
            s.add_bos = true;
        }
        "minerva-7b" => s.pre = Minerva,
        "megrez" => s.pre = Qwen2,
        "gpt-4o" | "llama4" | "kanana2" | "talkie" => unclean(&mut s, Gpt4o),
        "granite-embed-multi-97m" => {
            unclean(&mut s, GraniteEmbMulti);
            s.ignore_merges = true;
        }
        "tiny_aya" | "cohere2moe" => unclean(&mut s, TinyAya),
        "superbpe" => unclean(&mut s, Superbpe),
        "trillion" => unclean(&mut s, Trillion),
        "granite-docling" => unclean(&mut s, GraniteDocling),
        "bailingmoe" | "bailingmoe2" | "llada-moe" => unclean(&mut s, Bailingmoe),
        "seed-coder" => unclean(&mut s, SeedCoder),
        "hunyuan" => unclean(&mut s, Hunyuan),
        "hunyuan-dense" => unclean(&mut s, HunyuanDense),
        "hy_v4" => unclean(&mut s, HyV4),
        "joyai-llm" => unclean(&mut s, JoyaiLlm),
        "kimi-k2" => unclean(&mut s, KimiK2),
        "ufakzeka" => unclean(&mut s, Ufakzeka),
        "grok-2" => unclean(&mut s, Grok2),
        "afmoe" => unclean(&mut s, Afmoe),
        "laguna" => unclean(&mut s, Laguna),
        "minimax-m2" => unclean(&mut s, MinimaxM2),
        "solar-open" => unclean(&mut s, SolarOpen),
        "mellum2" => s.pre = Mellum2,
        _ => return None,
    }
    Some(s)
}

const RE_CONTRACTIONS_LETTERS_DIGITS: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
const RE_DEEPSEEK3_MAIN: &str = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";
const RE_CJK_KANA: &str = "[\u{4E00}-\u{9FA5}\u{3040}-\u{309F}\u{30A0}-\u{30FF}]+";
const RE_CJK_HANGUL: &str = "[\u{4E00}-\u{9FA5}\u{800}-\u{4E00}\u{AC00}-\u{D7FF}]+";
const RE_GPT4O: &str = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const RE_FINNISH: &str = " ?[^(\\s|.,!?\u{2026}\u{3002}\u{FF0C}\u{3001}\u{964}\u{6D4}\u{60C})]+";

/// The regular expressions of a pre-tokenizer type and whether words are GPT-2 byte-encoded.
pub fn regexes(pre: PreType) -> (Vec<&'static str>, bool) {
    use PreType::*;
    let v: Vec<&'static str> = match pre {
        Llama3 | Dbrx | Smaug | Chatglm4 => vec![RE_LLAMA3],
        Jais2 => vec![
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}",
        ],
        DeepseekLlm => vec![
            "[\r\n]",
            "\\s?[A-Za-z\u{B5}\u{C0}-\u{D6}\u{D8}-\u{F6}\u{F8}-\u{1BA}\u{1BC}-\u{1BF}\u{1C4}-\u{293}\u{295}-\u{2AF}\u{370}-\u{373}\u{376}\u{377}\u{37B}-\u{37D}\u{37F}\u{386}\u{388}-\u{38A}\u{38C}\u{38E}-\u{3A1}\u{3A3}-\u{3F5}\u{3F7}-\u{481}\u{48A}-\u{52F}\u{531}-\u{556}\u{10A0}-\u{10C5}\u{13A0}-\u{13F5}\u{13F8}-\u{13FD}\u{1C90}-\u{1CBA}\u{1CBD}-\u{1CBF}\u{1D00}-\u{1D2B}\u{1D6B}-\u{1D77}\u{1D79}-\u{1D9A}\u{1E00}-\u{1F15}\u{1F18}-\u{1F1D}\u{1F20}-\u{1F45}\u{1F48}-\u{1F4D}\u{1F50}-\u{1F57}\u{1F59}\u{1F5B}\u{1F5D}\u{1F5F}-\u{1F7D}\u{1F80}-\u{1FB4}\u{1FB6}-\u{1FBC}\u{1FBE}\u{1FC2}-\u{1FC4}\u{1FC6}-\u{1FCC}\u{1FD0}-\u{1FD3}\u{1FD6}-\u{1FDB}\u{1FE0}-\u{1FEC}\u{1FF2}-\u{1FF4}\u{1FF6}-\u{1FFC}\u{2102}\u{2107}\u{210A}-\u{2113}\u{2115}\u{2119}-\u{211D}\u{2124}\u{2126}\u{2128}\u{212A}-\u{212D}\u{212F}-\u{2134}\u{2139}\u{213C}-\u{213F}\u{2145}-\u{2149}\u{214E}\u{2183}\u{2184}\u{2C00}-\u{2C7B}\u{2C7E}-\u{2CE4}\u{2CEB}-\u{2CEE}\u{2CF2}\u{2CF3}\u{A640}-\u{A66D}\u{A680}-\u{A69B}\u{A722}-\u{A76F}\u{A771}-\u{A787}\u{A78B}-\u{A78E}\u{AB70}-\u{ABBF}\u{FB00}-\u{FB06}\u{FB13}-\u{FB17}\u{FF21}-\u{FF3A}\u{FF41}-\u{FF5A}\u{10400}-\u{1044F}\u{104B0}-\u{104D3}\u{104D8}-\u{104FB}\u{10C80}-\u{10CB2}\u{10CC0}-\u{10CF2}\u{118A0}-\u{118DF}\u{1E900}-\u{1E943}]+",
            "\\s?[!-/:-~\u{FF01}-\u{FF0F}\u{FF1A}-\u{FF5E}\u{2018}-\u{201F}\u{3000}-\u{3002}]+",
            "\\s+$",
            RE_CJK_HANGUL,
            r"\p{N}+",
        ],
        Deepseek3Llm | HunyuanDense | JoyaiLlm | HyV4 => {
            vec![r"\p{N}{1,3}", RE_CJK_KANA, RE_DEEPSEEK3_MAIN]
        }
        Spark25 => vec![
            r"\p{N}{1,3}",
            RE_CJK_KANA,
            "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
            r"\p{N}",
        ],
        Youtu => vec![
            "[\u{AC00}-\u{D7A3}\u{3131}-\u{318E}]+|[\u{FF01}\u{2026}\u{201C}\u{201D}\u{2018}\u{2019}\u{2014}\u{FF1A}\u{FF1B}\u{FF0C}\u{3001}-\u{303F}\u{FE30}-\u{FE4F}]+|[\u{3105}-\u{312F}]+|[\u{4E00}-\u{9FA5}\u{3040}-\u{309F}\u{30A0}-\u{30FF}]+",
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
        DeepseekCoder => vec!["[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", RE_CJK_HANGUL, r"\p{N}"],
        Falcon => vec![
            r"[\p{P}\$\+<=>\^~\|`]+",
            RE_CONTRACTIONS_LETTERS_DIGITS,
            "[0-9][0-9][0-9]",
        ],
        Starcoder | Refact | CommandR | Smollm | Codeshell | Exaone | Minerva | Mellum2 => {
            vec![r"\p{N}", RE_CONTRACTIONS_LETTERS_DIGITS]
        }
        Gpt2 | Mpt | Olmo | Jais | Trillion | GraniteDocling => vec![RE_GPT2],
        Stablelm2 | Qwen2 | Hunyuan | SolarOpen => vec![RE_QWEN2],
        Qwen35 => vec![RE_QWEN35],
        Poro | Bloom | Gpt3Finnish => vec![RE_FINNISH],
        Viking => vec![RE_FINNISH, r"\p{N}"],
        Tekken => vec![
            r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
        Chameleon => vec![
            "<sentinel:[0-9]+>",
            "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
            "([\\t\\n]|    |  )",
            r"\p{N}",
            r"[\p{P}!-/:-@\[-`{-~]",
            RE_CONTRACTIONS_LETTERS_DIGITS,
        ],
        Gpt4o | MinimaxM2 => vec![RE_GPT4O],
        GraniteEmbMulti => vec![
            r"[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
        TinyAya => vec![
            RE_TINY_AYA_DIGITS,
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
        KimiK2 => vec![RE_HAN],
        Superbpe => vec![r"\p{N}+", r"(?=(\d{3})+(?!\d))"],
        Bailingmoe => vec![
            r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
        ],
        SeedCoder => vec![
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
        Ufakzeka => vec![
            r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
        Grok2 => vec![RE_QWEN2],
        Afmoe => vec![
            r"\p{AFMoE_digits}",
            "[\u{4E00}-\u{9FFF}\u{3400}-\u{4DBF}\u{8C48}-\u{FAFF}\u{3040}-\u{309F}\u{30A0}-\u{30FF}\u{FF65}-\u{FF9F}\u{2F00}-\u{2FDF}\u{E40}-\u{E7F}\u{E80}-\u{EFF}\u{1780}-\u{17FF}\u{1000}-\u{109F}\u{AA60}-\u{AA7F}\u{A9E0}-\u{A9FF}\u{AC00}-\u{D7AF}\u{1100}-\u{11FF}]+",
            "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        ],
        Laguna => vec![RE_NEWLINES, RE_QWEN2],
        ExaoneMoe => vec![
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+",
        ],
        Gemma4 | SarvamMoe => return (vec![RE_NEWLINES], false),
        Minicpm5 => vec![
            r"\p{N}{1,3}",
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
        Whitespace => return (vec![r"\S+"], false),
        Default => vec![
            r"[\p{P}\$\+<=>\^~\|]+",
            RE_CONTRACTIONS_LETTERS_DIGITS,
            r"\p{N}+",
            "[0-9][0-9][0-9]",
        ],
    };
    (v, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::pretok::PreTokenizer;

    const ALL_NAMES: &[&str] = &[
        "default",
        "minicpm5",
        "llama3",
        "llama-v3",
        "llama-bpe",
        "falcon3",
        "falcon-h1",
        "pixtral",
        "midm-2.0",
        "lfm2",
        "jina-v5-nano",
        "deepseek-llm",
        "deepseek-coder",
        "deepseek-v3",
        "spark2_5",
        "youtu",
        "falcon",
        "mpt",
        "starcoder",
        "gpt-2",
        "phi-2",
        "jina-es",
        "jina-de",
        "gigachat",
        "jina-v2-es",
        "jina-v2-de",
        "a.x-4.0",
        "mellum",
        "modern-bert",
        "jais-2",
        "gemma4",
        "granite-embed-multi-311m",
        "sarvam-moe",
        "jina-v1-en",
        "jina-v2-code",
        "roberta-bpe",
        "whitespace",
        "refact",
        "command-r",
        "qwen2",
        "deepseek-r1-qwen",
        "kormo",
        "f2llmv2",
        "qwen35",
        "stablelm2",
        "olmo",
        "dbrx",
        "smaug-bpe",
        "poro-chat",
        "chatglm-bpe",
        "glm4",
        "glm5",
        "viking",
        "jais",
        "tekken",
        "smollm",
        "codeshell",
        "bloom",
        "gpt3-finnish",
        "exaone",
        "exaone4",
        "exaone-moe",
        "chameleon",
        "minerva-7b",
        "megrez",
        "gpt-4o",
        "llama4",
        "kanana2",
        "talkie",
        "granite-embed-multi-97m",
        "tiny_aya",
        "cohere2moe",
        "superbpe",
        "trillion",
        "granite-docling",
        "bailingmoe",
        "bailingmoe2",
        "llada-moe",
        "seed-coder",
        "hunyuan",
        "hunyuan-dense",
        "hy_v4",
        "joyai-llm",
        "kimi-k2",
        "ufakzeka",
        "grok-2",
        "afmoe",
        "laguna",
        "minimax-m2",
        "solar-open",
        "mellum2",
    ];

    #[test]
    fn every_pre_tokenizer_compiles_and_splits() {
        let text =
            "Hello world! I'm 12345 ünïcödé 日本語 text\n\n  tabs\tand 3.14 — ok?".as_bytes();
        for name in ALL_NAMES {
            let s = settings_for(name).unwrap_or_else(|| panic!("{name}"));
            let (exprs, _) = regexes(s.pre);
            let pre = PreTokenizer::new(&exprs).unwrap_or_else(|e| panic!("{name}: {e}"));
            let cpts = crate::vocab::unicode::cpts_from_utf8(text);
            let total: usize = pre.split_offsets(&cpts).iter().sum();
            assert!(total <= cpts.len(), "{name}");
        }
        assert!(settings_for("no-such-pre").is_none());
    }
}
