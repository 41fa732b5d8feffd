//! Fuzz the Jinja chat templates (`common::chat` with minijinja, what --jinja renders): parse
//! arbitrary template text, probe what it supports, and format a fixed small chat with it.
//!
//! Input: a selector byte, then the template text. The selector picks whether a generation
//! prompt is added (bit 0), which chat is formatted (bits 1-2), which template kwargs are set
//! (bits 3-4) and whether the incremental formatting of conversation mode runs (bit 5).
//! Each render is bounded by `FUEL` (the library's default is far larger; it is the same
//! mechanism), so a runaway template ends with an error, fast.
//!
//! Invariant beyond "no panic": a render that fails says why (a non-empty message).
#![no_main]

use common::chat::{ChatMessage, ChatTemplates, TemplateKwargs};
use libfuzzer_sys::fuzz_target;

/// Twenty times what the real templates need for these chats.
const FUEL: u64 = 20_000;

fn chat(i: u8) -> Vec<ChatMessage> {
    let m = ChatMessage::new;
    match i & 3 {
        0 => vec![m("user", "hello")],
        1 => vec![
            m("system", "You are a helpful assistant."),
            m("user", "What is 2+2?"),
            m("assistant", "4"),
            m("user", "And 3+3?"),
        ],
        2 => vec![
            m("developer", "be brief"),
            m("user", "<think>x</think> é 日本 {{ }} {% %}"),
            m("tool", "{\"ok\": true}"),
        ],
        _ => vec![m("system", "only a system message")],
    }
}

fn kwargs(i: u8) -> TemplateKwargs {
    let mut k = TemplateKwargs::new();
    match i & 3 {
        0 => {}
        1 => {
            k.insert("enable_thinking".into(), "false".into());
        }
        2 => {
            k.insert("preserve_reasoning".into(), "true".into());
            k.insert("reasoning_effort".into(), "\"high\"".into());
        }
        _ => {
            k.insert("tools".into(), "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}]".into());
        }
    }
    k
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let Ok(src) = std::str::from_utf8(rest) else {
        return;
    };
    let t = match ChatTemplates::from_source_with_fuel(src, "<s>", "</s>", true, FUEL) {
        Ok(t) => t,
        Err(e) => {
            assert!(!e.is_empty(), "a parse error without a message");
            return;
        }
    };
    let msgs = chat(sel >> 1);
    let kw = kwargs(sel >> 3);
    if let Err(e) = t.apply(&msgs, sel & 1 != 0, true, &kw) {
        assert!(!e.is_empty(), "a render error without a message");
    }
    if sel & 32 != 0 {
        if let Some((last, past)) = msgs.split_last() {
            let _ = t.format_single(past, last, sel & 1 != 0, true);
        }
    }
});
