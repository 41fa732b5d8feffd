//! Fuzz the built-in chat templates (llama-chat.cpp): detection from arbitrary template text,
//! and formatting of arbitrary chats (any roles, any contents) in every layout. The input is
//! fields split on NUL: a selector byte, the template text, then role/content pairs.
//! Detection must give a layout or none, formatting a string; a built-in name always detects.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use llama::chat::{builtin_templates, chat_apply_template, ChatMessage};

fn names() -> &'static [&'static str] {
    static N: OnceLock<Vec<&'static str>> = OnceLock::new();
    N.get_or_init(builtin_templates)
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let mut fields = rest.split(|&b| b == 0).map(String::from_utf8_lossy);
    let text = fields.next().unwrap_or_default();
    let chat: Vec<ChatMessage> = {
        let f: Vec<_> = fields.collect();
        f.chunks(2)
            .map(|p| ChatMessage::new(&p[0], p.get(1).map(|c| c.as_ref()).unwrap_or("")))
            .collect()
    };
    let add_ass = sel & 1 != 0;
    // Half the inputs format with a built-in layout picked by the selector, so each layout's
    // formatting code sees arbitrary chats without the fuzzer first finding its markers.
    if sel & 2 != 0 {
        let n = names();
        let name = n[(sel >> 2) as usize % n.len()];
        let out = chat_apply_template(Some(name), &chat, add_ass);
        assert!(out.is_some(), "the built-in name {name} did not detect");
    } else {
        let _ = chat_apply_template(Some(&text), &chat, add_ass);
    }
});
