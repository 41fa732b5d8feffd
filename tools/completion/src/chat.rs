//! Chat formatting for conversation mode without a Jinja engine: llama.cpp's built-in template
//! for ChatML (what Qwen-family models carry), used for any template the model declares.

use llama::Model;

#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: &str, content: &str) -> Message {
        Message {
            role: role.to_string(),
            content: content.to_string(),
        }
    }
}

/// The chat template of a model, as far as this build can apply it.
#[derive(Clone, Debug, Default)]
pub struct Template;

impl Template {
    /// The model's explicit template, if it has one (`common_chat_templates_was_explicit`).
    pub fn from_model(model: &Model) -> Option<Template> {
        model
            .meta_get("tokenizer.chat_template")
            .filter(|t| !t.is_empty())
            .map(|_| Template)
    }

    /// `llama_chat_apply_template` with the ChatML layout.
    pub fn apply(&self, msgs: &[Message], add_assistant: bool) -> String {
        let mut s = String::new();
        for m in msgs {
            s.push_str(&format!(
                "<|im_start|>{}\n{}<|im_end|>\n",
                m.role, m.content
            ));
        }
        if add_assistant {
            s.push_str("<|im_start|>assistant\n");
        }
        s
    }

    /// `common_chat_format_single`: the text a new message adds to the formatted history.
    pub fn format_single(&self, past: &[Message], role: &str, content: &str) -> String {
        let add_ass = role == "user";
        let fmt_past = if past.is_empty() {
            String::new()
        } else {
            self.apply(past, false)
        };
        let mut all = past.to_vec();
        all.push(Message::new(role, content));
        let fmt_new = self.apply(&all, add_ass);
        let mut out = String::new();
        if add_ass && fmt_past.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&fmt_new[fmt_past.len().min(fmt_new.len())..]);
        out
    }

    /// `common_chat_format_example`.
    pub fn example(&self) -> String {
        let msgs = [
            Message::new("system", "You are a helpful assistant"),
            Message::new("user", "Hello"),
            Message::new("assistant", "Hi there"),
            Message::new("user", "How are you?"),
        ];
        self.apply(&msgs, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatml_layout() {
        let t = Template;
        assert_eq!(
            t.apply(&[Message::new("user", "hi")], true),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        );
        let past = [Message::new("user", "hi"), Message::new("assistant", "yo")];
        assert_eq!(
            t.format_single(&past, "user", "again"),
            "\n<|im_start|>user\nagain<|im_end|>\n<|im_start|>assistant\n"
        );
        assert!(t
            .example()
            .starts_with("<|im_start|>system\nYou are a helpful assistant<|im_end|>\n"));
    }
}
