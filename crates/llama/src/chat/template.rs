//! The built-in chat templates and their names (llama.cpp's `LLM_CHAT_TEMPLATES`).

/// A chat layout that libllama formats without a Jinja engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChatTemplate {
    Chatml,
    Llama2,
    Llama2Sys,
    Llama2SysBos,
    Llama2SysStrip,
    MistralV1,
    MistralV3,
    MistralV3Tekken,
    MistralV7,
    MistralV7Tekken,
    Phi3,
    Phi4,
    Falcon3,
    Zephyr,
    Monarch,
    Gemma,
    Orion,
    Openchat,
    Vicuna,
    VicunaOrca,
    Deepseek,
    Deepseek2,
    Deepseek3,
    DeepseekOcr,
    CommandR,
    Llama3,
    Chatglm3,
    Chatglm4,
    Glmedge,
    Minicpm,
    Exaone3,
    Exaone4,
    ExaoneMoe,
    RwkvWorld,
    Granite3X,
    Granite40,
    Granite41,
    Gigachat,
    Megrez,
    Yandex,
    Bailing,
    BailingThink,
    Bailing2,
    Llama4,
    Smolvlm,
    /// dots.llm1: detected from the template text only; llama.cpp gives it no name.
    Dots1,
    HunyuanMoe,
    OpenaiMoe,
    HunyuanDense,
    HunyuanVl,
    KimiK2,
    SeedOss,
    Grok2,
    PanguEmbed,
    SolarOpen,
}

use ChatTemplate::*;

/// Every named template, in llama.cpp's declaration order.
const NAMES: [(ChatTemplate, &str); 54] = [
    (Chatml, "chatml"),
    (Llama2, "llama2"),
    (Llama2Sys, "llama2-sys"),
    (Llama2SysBos, "llama2-sys-bos"),
    (Llama2SysStrip, "llama2-sys-strip"),
    (MistralV1, "mistral-v1"),
    (MistralV3, "mistral-v3"),
    (MistralV3Tekken, "mistral-v3-tekken"),
    (MistralV7, "mistral-v7"),
    (MistralV7Tekken, "mistral-v7-tekken"),
    (Phi3, "phi3"),
    (Phi4, "phi4"),
    (Falcon3, "falcon3"),
    (Zephyr, "zephyr"),
    (Monarch, "monarch"),
    (Gemma, "gemma"),
    (Orion, "orion"),
    (Openchat, "openchat"),
    (Vicuna, "vicuna"),
    (VicunaOrca, "vicuna-orca"),
    (Deepseek, "deepseek"),
    (Deepseek2, "deepseek2"),
    (Deepseek3, "deepseek3"),
    (DeepseekOcr, "deepseek-ocr"),
    (CommandR, "command-r"),
    (Llama3, "llama3"),
    (Chatglm3, "chatglm3"),
    (Chatglm4, "chatglm4"),
    (Glmedge, "glmedge"),
    (Minicpm, "minicpm"),
    (Exaone3, "exaone3"),
    (Exaone4, "exaone4"),
    (ExaoneMoe, "exaone-moe"),
    (RwkvWorld, "rwkv-world"),
    (Granite3X, "granite"),
    (Granite40, "granite-4.0"),
    (Granite41, "granite-4.1"),
    (Gigachat, "gigachat"),
    (Megrez, "megrez"),
    (Yandex, "yandex"),
    (Bailing, "bailing"),
    (BailingThink, "bailing-think"),
    (Bailing2, "bailing2"),
    (Llama4, "llama4"),
    (Smolvlm, "smolvlm"),
    (HunyuanMoe, "hunyuan-moe"),
    (OpenaiMoe, "gpt-oss"),
    (HunyuanDense, "hunyuan-dense"),
    (HunyuanVl, "hunyuan-vl"),
    (KimiK2, "kimi-k2"),
    (SeedOss, "seed_oss"),
    (Grok2, "grok-2"),
    (PanguEmbed, "pangu-embedded"),
    (SolarOpen, "solar-open"),
];

impl ChatTemplate {
    /// `llm_chat_template_from_str`: the template a built-in name stands for.
    pub fn from_name(name: &str) -> Option<ChatTemplate> {
        NAMES.iter().find(|(_, n)| *n == name).map(|(t, _)| *t)
    }

    /// The built-in name, where llama.cpp gives the template one.
    pub fn name(self) -> Option<&'static str> {
        NAMES.iter().find(|(t, _)| *t == self).map(|(_, n)| *n)
    }
}

/// `llama_chat_builtin_templates`: the names in the order llama.cpp lists them (its table is
/// a `std::map`, so byte-wise sorted).
pub fn builtin_templates() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = NAMES.iter().map(|(_, n)| *n).collect();
    names.sort_unstable();
    names
}
