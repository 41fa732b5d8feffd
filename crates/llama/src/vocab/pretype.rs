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
const RE_CJK_KANA: &str = "[一-龥぀-ゟ゠-ヿ]+";
const RE_CJK_HANGUL: &str = "[一-龥ࠀ-一가-퟿]+";
const RE_GPT4O: &str = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const RE_FINNISH: &str = " ?[^(\\s|.,!?…。，、।۔،)]+";

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
            "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
            "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
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
            "[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
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
            "[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+",
            "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
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
