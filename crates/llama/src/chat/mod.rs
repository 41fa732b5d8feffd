//! Chat templates without a Jinja engine (libllama's llama-chat.cpp): the built-in layouts by
//! name, their detection from a model's Jinja template text, and the formatting of a chat in
//! each, byte for byte as llama.cpp does it.

mod apply;
mod detect;
mod template;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod upstream_cases;

pub use apply::apply_template;
pub use detect::detect_template;
pub use template::{builtin_templates, ChatTemplate};

use crate::vocab::PreType;
use crate::Model;

/// One turn of a chat (`llama_chat_message`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: &str, content: &str) -> ChatMessage {
        ChatMessage {
            role: role.to_string(),
            content: content.to_string(),
        }
    }
}

/// `llama_chat_apply_template`: `tmpl` is a built-in name or a Jinja template's text (`None`
/// means ChatML); `None` back where no built-in layout matches it.
pub fn chat_apply_template(
    tmpl: Option<&str>,
    chat: &[ChatMessage],
    add_ass: bool,
) -> Option<String> {
    let t = detect_template(tmpl.unwrap_or("chatml"))?;
    Some(apply_template(t, chat, add_ass))
}

/// `llama_model_chat_template`: the model's `tokenizer.chat_template` (or the named variant,
/// e.g. `tool_use`, at `tokenizer.chat_template.NAME`).
pub fn model_chat_template(model: &Model, name: Option<&str>) -> Option<String> {
    let key = match name {
        Some(n) => format!("tokenizer.chat_template.{n}"),
        None => "tokenizer.chat_template".to_string(),
    };
    if let Some(t) = model.meta_get(&key) {
        return Some(t);
    }
    // llama.cpp's one-off for Mistral-Small-2503, whose GGUFs carry no template
    let n_layer = model.hparams().n_layer;
    if name.is_none() && model.vocab().pre_type() == PreType::Tekken && n_layer == 40 {
        return Some("mistral-v7-tekken".to_string());
    }
    None
}
