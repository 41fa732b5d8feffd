//! The tools' chat layer (llama.cpp's common/chat.cpp): the model's templates, formatting a
//! chat either with libllama's built-in layouts or, with `--jinja`, by rendering the model's
//! own Jinja template, and the incremental formatting conversation mode needs.

mod clock;
mod format_guard;
pub mod jinja;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use minijinja::Value;

pub use llama::chat::ChatMessage;
use llama::vocab::TOKEN_NULL;
use llama::Model;

use jinja::JinjaTemplate;

/// llama.cpp's `CHATML_TEMPLATE_SRC`: what a model without a template is formatted with.
pub const CHATML_TEMPLATE_SRC: &str = "{%- for message in messages -%}\n  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n{%- endfor -%}\n{%- if add_generation_prompt -%}\n  {{- '<|im_start|>assistant\n' -}}\n{%- endif -%}";

/// `common_chat_templates`: the template a chat is formatted with and the model's special
/// token texts the Jinja context carries.
#[derive(Debug)]
pub struct ChatTemplates {
    has_explicit_template: bool,
    default_src: String,
    bos_token: String,
    eos_token: String,
    add_bos: bool,
    add_eos: bool,
    /// Parsed only when `--jinja` asks for it: llama.cpp parses always, but without
    /// `--jinja` nothing of the parse is used.
    jinja: Option<JinjaTemplate>,
}

/// Key/value pairs handed to the Jinja template besides the chat (`chat_template_kwargs`),
/// each value JSON text as llama.cpp keeps them.
pub type TemplateKwargs = BTreeMap<String, String>;

impl ChatTemplates {
    /// `common_chat_templates_init`: `override_src` (a `--chat-template` name or Jinja text)
    /// wins over the model's `tokenizer.chat_template`; neither, or `chatml`, means ChatML.
    pub fn init(
        model: &Model,
        override_src: &str,
        use_jinja: bool,
    ) -> Result<ChatTemplates, String> {
        let (mut src, mut explicit) = (override_src.to_string(), !override_src.is_empty());
        let mut tool_use = String::new();
        if override_src.is_empty() {
            if let Some(t) = llama::chat::model_chat_template(model, None) {
                src = t;
                explicit = true;
            }
            if let Some(t) = llama::chat::model_chat_template(model, Some("tool_use")) {
                tool_use = t;
                explicit = true;
            }
        }
        let vocab = model.vocab();
        let token = |id: i32, name: &str, var: &str, src: &str| {
            if id == TOKEN_NULL {
                if src.contains(var) || tool_use.contains(var) {
                    crate::log_wrn!("common_chat_templates_init: warning: vocab does not have a {name} token, jinja template won't work as intended.\n");
                }
                return String::new();
            }
            crate::startup::token_to_piece(vocab, id, true)
        };
        if src.is_empty() || src == "chatml" {
            src = if tool_use.is_empty() {
                CHATML_TEMPLATE_SRC.to_string()
            } else {
                tool_use.clone()
            };
        }
        let bos = token(vocab.bos(), "BOS", "bos_token", &src);
        let eos = token(vocab.eos(), "EOS", "eos_token", &src);
        let mut t = ChatTemplates::from_source(&src, &bos, &eos, use_jinja)?;
        t.has_explicit_template = explicit;
        t.add_bos = vocab.add_bos();
        t.add_eos = vocab.add_eos();
        Ok(t)
    }

    /// The template `src` with the given BOS/EOS texts and no model (llama.cpp's
    /// `common_chat_templates_init(nullptr, src, bos, eos)`).
    pub fn from_source(
        src: &str,
        bos: &str,
        eos: &str,
        use_jinja: bool,
    ) -> Result<ChatTemplates, String> {
        Self::from_source_with_fuel(src, bos, eos, use_jinja, jinja::RENDER_FUEL)
    }

    /// The same with another bound on each Jinja render's work (`jinja::RENDER_FUEL` by
    /// default; the fuzz target's is small, so that each input stays fast).
    pub fn from_source_with_fuel(
        src: &str,
        bos: &str,
        eos: &str,
        use_jinja: bool,
        fuel: u64,
    ) -> Result<ChatTemplates, String> {
        let src = if src.is_empty() || src == "chatml" {
            CHATML_TEMPLATE_SRC
        } else {
            src
        };
        let src = patch_known_templates(src);
        let jinja = if use_jinja {
            Some(JinjaTemplate::with_fuel(&src, fuel)?)
        } else {
            None
        };
        Ok(ChatTemplates {
            has_explicit_template: true,
            default_src: src,
            bos_token: bos.to_string(),
            eos_token: eos.to_string(),
            add_bos: false,
            add_eos: false,
            jinja,
        })
    }

    /// `common_chat_templates_was_explicit`: the model (or the user) gave a template.
    pub fn was_explicit(&self) -> bool {
        self.has_explicit_template
    }

    pub fn source(&self) -> &str {
        &self.default_src
    }

    /// `common_chat_templates_apply(...).prompt`: the chat formatted, with the Jinja template
    /// when `use_jinja`, else with the built-in layout detected from the template.
    pub fn apply(
        &self,
        msgs: &[ChatMessage],
        add_generation_prompt: bool,
        use_jinja: bool,
        kwargs: &TemplateKwargs,
    ) -> Result<String, String> {
        if !use_jinja {
            return llama::chat::chat_apply_template(
                Some(&self.default_src),
                msgs,
                add_generation_prompt,
            )
            .ok_or_else(|| "this custom template is not supported, try using --jinja".to_string());
        }
        let Some(tmpl) = &self.jinja else {
            return Err(
                "the Jinja template was not parsed (use_jinja was off at init)".to_string(),
            );
        };
        self.apply_jinja(tmpl, msgs, add_generation_prompt, kwargs)
    }

    fn apply_jinja(
        &self,
        tmpl: &JinjaTemplate,
        msgs: &[ChatMessage],
        add_generation_prompt: bool,
        kwargs: &TemplateKwargs,
    ) -> Result<String, String> {
        let mut msgs: Vec<ChatMessage> = msgs.to_vec();
        if !tmpl.source().contains("<|channel|>") {
            // every model but GPT-OSS reads a developer message as a system one
            for m in &mut msgs {
                if m.role == "developer" {
                    m.role = "system".to_string();
                }
            }
        }
        if !tmpl.supports_system_role && msgs.first().is_some_and(|m| m.role == "system") {
            let sys = msgs.remove(0);
            match msgs.first_mut() {
                Some(next) => next.content = format!("{}\n{}", sys.content, next.content),
                None => crate::log_wrn!(
                    "Removing system prompt due to template not supporting system role\n"
                ),
            }
        }
        let as_value = if tmpl.typed_content_only {
            jinja::typed_message
        } else {
            jinja::message
        };
        let messages: Vec<Value> = msgs.iter().map(|m| as_value(&m.role, &m.content)).collect();
        let mut ctx: Vec<(String, Value)> = vec![
            ("messages".into(), Value::from(messages)),
            ("bos_token".into(), Value::from(self.bos_token.as_str())),
            ("eos_token".into(), Value::from(self.eos_token.as_str())),
            ("enable_thinking".into(), Value::from(true)),
        ];

        set(
            &mut ctx,
            "datetime",
            Value::from(clock::strftime_now("%b %d %Y").unwrap_or_default()),
        );
        set(
            &mut ctx,
            "date_string",
            Value::from(clock::strftime_now("%d %b %Y").unwrap_or_default()),
        );
        for (k, v) in kwargs {
            let j: serde_json::Value =
                serde_json::from_str(v).map_err(|e| format!("chat template kwarg {k}: {e}"))?;
            set(&mut ctx, k, json_to_value(&j));
        }
        if add_generation_prompt {
            set(&mut ctx, "add_generation_prompt", Value::from(true));
        }
        if let Some(p) = ctx
            .iter()
            .find(|(k, _)| k == "preserve_reasoning")
            .map(|(_, v)| v.clone())
        {
            if p.kind() == minijinja::value::ValueKind::Bool {
                let on = p.is_true();
                set(&mut ctx, "preserve_thinking", Value::from(on));
                set(&mut ctx, "clear_thinking", Value::from(!on));
                set(&mut ctx, "truncate_history_thinking", Value::from(!on));
                set(&mut ctx, "drop_thinking", Value::from(!on));
            }
        }
        if let Some(e) = ctx
            .iter()
            .find(|(k, _)| k == "reasoning_effort")
            .and_then(|(_, v)| v.as_str().map(str::to_string))
        {
            if !e.is_empty() {
                set(&mut ctx, "reasoning_effort", Value::from(e.as_str()));
                set(&mut ctx, "reasoning_strength", Value::from(e.as_str()));
            }
        }
        let mut out = tmpl.render(Value::from_pairs(ctx))?;
        // the tokenizer adds BOS/EOS itself: drop the template's own copy
        if self.add_bos && !self.bos_token.is_empty() && out.starts_with(&self.bos_token) {
            out.drain(..self.bos_token.len());
        }
        if self.add_eos && !self.eos_token.is_empty() && out.ends_with(&self.eos_token) {
            out.truncate(out.len() - self.eos_token.len());
        }
        Ok(out)
    }

    /// `common_chat_format_single`: the text `new_msg` adds to the formatted `past`.
    pub fn format_single(
        &self,
        past: &[ChatMessage],
        new_msg: &ChatMessage,
        add_ass: bool,
        use_jinja: bool,
    ) -> Result<String, String> {
        let none = TemplateKwargs::new();
        let fmt_past = if past.is_empty() {
            String::new()
        } else {
            self.apply(past, false, use_jinja, &none)?
        };
        let mut all = past.to_vec();
        all.push(new_msg.clone());
        let fmt_new = self.apply(&all, add_ass, use_jinja, &none)?;
        let mut out = String::new();
        // a past that ends in a newline keeps it in the formatted version
        if add_ass && fmt_past.ends_with('\n') {
            out.push('\n');
        }
        // llama.cpp takes the bytes past the old prompt's length; at a char boundary here
        let cut = fmt_past.len().min(fmt_new.len());
        let tail = fmt_new
            .get(cut..)
            .unwrap_or_else(|| &fmt_new[floor_boundary(&fmt_new, cut)..]);
        out.push_str(tail);
        Ok(out)
    }

    /// `common_chat_format_example`: the sample conversation the tools print.
    pub fn format_example(
        &self,
        use_jinja: bool,
        kwargs: &TemplateKwargs,
    ) -> Result<String, String> {
        let msgs = [
            ChatMessage::new("system", "You are a helpful assistant"),
            ChatMessage::new("user", "Hello"),
            ChatMessage::new("assistant", "Hi there"),
            ChatMessage::new("user", "How are you?"),
        ];
        self.apply(&msgs, true, use_jinja, kwargs)
    }
}

/// `common_chat_verify_template`: whether `tmpl` (a built-in name or Jinja text) can format
/// a one-message chat; with `use_jinja` the Jinja error is logged as llama.cpp does.
pub fn verify_template(tmpl: &str, use_jinja: bool) -> bool {
    let msg = [ChatMessage::new("user", "test")];
    if use_jinja {
        let r = ChatTemplates::from_source(tmpl, "", "", true)
            .and_then(|t| t.apply(&msg, false, true, &TemplateKwargs::new()));
        return match r {
            Ok(_) => true,
            Err(e) => {
                crate::log_err!("common_chat_verify_template: failed to apply template: {e}\n");
                false
            }
        };
    }
    llama::chat::chat_apply_template(Some(tmpl), &msg, true).is_some()
}

/// llama.cpp's two source patches (GPT-OSS and a Mistral template) that keep known
/// templates from raising on llama.cpp's own message layout.
fn patch_known_templates(src: &str) -> String {
    let mut s = src.to_string();
    if s.contains("<|channel|>") && s.contains("in message.content or") {
        s = s.replace(
            "{%- if \"<|channel|>analysis<|message|>\" in message.content or \"<|channel|>final<|message|>\" in message.content %}",
            "{%- if false %}",
        );
    }
    if s.contains("[TOOL_CALLS]") && s.contains("if (message['content'] is none or") {
        s = s.replace(
            "{%- if (message['content'] is none or message['content'] == '' or message['content']|length == 0) and (message['tool_calls'] is not defined or message['tool_calls'] is none or message['tool_calls']|length == 0) %}",
            "{%- if false %}",
        );
    }
    s
}

/// Sets `k` in the context, replacing an earlier value as llama.cpp's JSON object does.
fn set(ctx: &mut Vec<(String, Value)>, k: &str, v: Value) {
    match ctx.iter_mut().find(|(key, _)| key == k) {
        Some(slot) => slot.1 = v,
        None => ctx.push((k.to_string(), v)),
    }
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn json_to_value(j: &serde_json::Value) -> Value {
    use serde_json::Value as J;
    match j {
        J::Null => Value::from(()),
        J::Bool(b) => Value::from(*b),
        J::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Value::from(i),
            (None, Some(f)) => Value::from(f),
            _ => Value::from(n.to_string()),
        },
        J::String(s) => Value::from(s.as_str()),
        J::Array(a) => Value::from(a.iter().map(json_to_value).collect::<Vec<_>>()),
        J::Object(o) => Value::from_pairs(o.iter().map(|(k, v)| (k.clone(), json_to_value(v)))),
    }
}
