//! Conversation-mode formatting for llama-completion: the model's chat template (or the one
//! `--chat-template`/`--chat-template-file` gives) applied through common's chat layer, with
//! libllama's built-in layouts or, under `--jinja`, the template itself.

use common::args::Params;
use common::chat::{ChatTemplates, TemplateKwargs};
use llama::Model;

pub use common::chat::ChatMessage as Message;

/// The chat templates and how completion applies them.
pub struct Template {
    templates: ChatTemplates,
    use_jinja: bool,
    /// `--skip-chat-parsing` (`force_pure_content_parser`): changes nothing in the prompt;
    /// llama.cpp only warns when it applies the initial prompt with Jinja.
    force_pure_content: bool,
    /// `params.default_template_kwargs`: what -rea, --reasoning-effort and
    /// --[no-]reasoning-preserve hand the template (llama-completion passes them to the
    /// example it prints only).
    kwargs: TemplateKwargs,
}

impl Template {
    /// `common_chat_templates_init(model, params.chat_template)`; an error is logged as
    /// llama.cpp logs it.
    pub fn init(model: &Model, params: &Params) -> Result<Template, ()> {
        let templates = match ChatTemplates::init(model, &params.chat_template, params.use_jinja) {
            Ok(t) => t,
            Err(e) => {
                common::log_err!("common_chat_templates_init: error: {e}\n");
                common::log_err!(
                    "common_chat_templates_init: failed to initialize chat template\n"
                );
                common::log_err!("common_chat_templates_init: please consider disabling jinja via --no-jinja, or using another chat template\n");
                return Err(());
            }
        };
        Ok(Template {
            templates,
            use_jinja: params.use_jinja,
            force_pure_content: params.skip_chat_parsing,
            kwargs: default_template_kwargs(params),
        })
    }

    /// `common_chat_templates_was_explicit`.
    pub fn was_explicit(&self) -> bool {
        self.templates.was_explicit()
    }

    /// `common_chat_templates_apply(...).prompt` for the whole chat (completion's initial
    /// prompt).
    pub fn apply(&self, msgs: &[Message], add_assistant: bool) -> Result<String, String> {
        if self.force_pure_content && self.use_jinja {
            // llama.cpp's message, without a newline
            common::log_wrn!(
                "Forcing pure content template, will not render reasoning or tools separately."
            );
        }
        self.templates
            .apply(msgs, add_assistant, self.use_jinja, &TemplateKwargs::new())
    }

    /// `common_chat_format_single`: the text a new message adds to the formatted history.
    pub fn format_single(
        &self,
        past: &[Message],
        role: &str,
        content: &str,
    ) -> Result<String, String> {
        let add_ass = role == "user";
        self.templates
            .format_single(past, &Message::new(role, content), add_ass, self.use_jinja)
    }

    /// `common_chat_format_example`.
    pub fn example(&self) -> Result<String, String> {
        self.templates.format_example(self.use_jinja, &self.kwargs)
    }
}

/// The kwargs common/arg.cpp collects: `enable_thinking` from -rea on/off,
/// `reasoning_effort` unless `default`, `preserve_reasoning` (on unless turned off).
fn default_template_kwargs(p: &Params) -> TemplateKwargs {
    let mut kw = TemplateKwargs::new();
    match p.reasoning.as_str() {
        "on" | "enabled" | "true" | "1" => {
            kw.insert("enable_thinking".into(), "true".into());
        }
        "off" | "disabled" | "false" | "0" => {
            kw.insert("enable_thinking".into(), "false".into());
        }
        _ => {}
    }
    if p.reasoning_effort != "default" {
        kw.insert(
            "reasoning_effort".into(),
            serde_json::Value::from(p.reasoning_effort.as_str()).to_string(),
        );
    }
    kw.insert(
        "preserve_reasoning".into(),
        p.reasoning_preserve.to_string(),
    );
    kw
}

/// What llama-completion does not act on, said rather than ignored: llama.cpp hands the
/// reasoning budget and format only to llama-server/llama-cli, which parse the model's
/// thinking; its completion tool takes the flags and leaves them unused.
pub fn warn_unused_reasoning_flags(p: &Params) {
    if p.reasoning_format != "auto" {
        common::log_wrn!("warning: --reasoning-format has no effect in llama-completion (llama.cpp applies it in llama-server and llama-cli only)\n");
    }
    if p.reasoning_budget != -1 {
        common::log_wrn!("warning: --reasoning-budget has no effect in llama-completion (llama.cpp applies it in llama-server and llama-cli only)\n");
    }
    if !p.reasoning_budget_message.is_empty() {
        common::log_wrn!("warning: --reasoning-budget-message has no effect in llama-completion (llama.cpp applies it in llama-server and llama-cli only)\n");
    }
    if p.reasoning != "auto" || p.reasoning_effort != "default" {
        common::log_wrn!("warning: -rea/--reasoning-effort reach only the chat template example llama-completion prints, and only with --jinja (as in llama.cpp)\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::args::Example;

    #[test]
    fn kwargs_as_common_arg_collects_them() {
        let mut p = Params::for_example(Example::Completion);
        let kw = default_template_kwargs(&p);
        assert_eq!(kw.len(), 1);
        assert_eq!(kw["preserve_reasoning"], "true");
        p.reasoning = "off".into();
        p.reasoning_effort = "high \"x\"".into();
        p.reasoning_preserve = false;
        let kw = default_template_kwargs(&p);
        assert_eq!(kw["enable_thinking"], "false");
        assert_eq!(kw["reasoning_effort"], r#""high \"x\"""#);
        assert_eq!(kw["preserve_reasoning"], "false");
        p.reasoning = "auto".into();
        assert!(!default_template_kwargs(&p).contains_key("enable_thinking"));
    }
}
