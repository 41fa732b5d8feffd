use super::upstream_cases::CASES;
use super::*;

/// test-chat-template.cpp's conversation.
fn conversation() -> Vec<ChatMessage> {
    [
        ("system", "You are a helpful assistant"),
        ("user", "Hello"),
        ("assistant", "Hi there"),
        ("user", "Who are you"),
        ("assistant", "   I am an assistant   "),
        ("user", "Another question"),
    ]
    .iter()
    .map(|(r, c)| ChatMessage::new(r, c))
    .collect()
}

#[test]
fn upstream_cases_detect_and_format_as_llama_cpp() {
    assert_eq!(CASES.len(), 36);
    let mut failed = Vec::new();
    for case in CASES {
        let mut chat = conversation();
        chat.extend(case.extra.iter().map(|(r, c)| ChatMessage::new(r, c)));
        match chat_apply_template(Some(case.template), &chat, true) {
            Some(out) if out == case.expected => {}
            Some(out) => failed.push(format!(
                "{}:\n  want {:?}\n  got  {:?}",
                case.name, case.expected, out
            )),
            None => failed.push(format!("{}: no built-in template detected", case.name)),
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn invalid_template_is_refused() {
    assert_eq!(
        chat_apply_template(Some("INVALID TEMPLATE"), &conversation(), true),
        None
    );
    assert_eq!(detect_template(""), None);
}

#[test]
fn default_is_chatml() {
    let chat = [ChatMessage::new("user", "hi")];
    assert_eq!(
        chat_apply_template(None, &chat, true).as_deref(),
        Some("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    );
}

#[test]
fn builtin_names_sorted_and_round_trip() {
    let names = builtin_templates();
    assert_eq!(names.len(), 54);
    assert!(names.windows(2).all(|w| w[0] < w[1]));
    // std::map order: '-' sorts before digits
    let pos = |n: &str| names.iter().position(|x| *x == n).unwrap();
    assert!(pos("deepseek") < pos("deepseek-ocr") && pos("deepseek-ocr") < pos("deepseek2"));
    for n in &names {
        let t = ChatTemplate::from_name(n).unwrap();
        assert_eq!(t.name(), Some(*n));
        assert_eq!(detect_template(n), Some(t));
    }
    assert_eq!(ChatTemplate::from_name("dots1"), None);
    assert_eq!(ChatTemplate::Dots1.name(), None);
}

#[test]
fn layouts_only_named_upstream() {
    let chat = [
        ChatMessage::new("system", "S"),
        ChatMessage::new("user", " U "),
        ChatMessage::new("assistant", " A "),
    ];
    let f = |name: &str, add: bool| chat_apply_template(Some(name), &chat, add).unwrap();
    assert_eq!(f("deepseek-ocr", true), "S U  A ");
    assert_eq!(f("llama4", true), "<|header_start|>system<|header_end|>\n\nS<|eot|><|header_start|>user<|header_end|>\n\nU<|eot|><|header_start|>assistant<|header_end|>\n\nA<|eot|><|header_start|>assistant<|header_end|>\n\n");
    assert_eq!(f("gpt-oss", true), "<|start|>system<|message|>S<|end|><|start|>user<|message|> U <|end|><|start|>assistant<|message|> A <|return|><|start|>assistant");
    assert_eq!(f("kimi-k2", false), "<|im_system|>system<|im_middle|>S<|im_end|><|im_user|>user<|im_middle|> U <|im_end|><|im_assistant|>assistant<|im_middle|> A <|im_end|>");
    assert_eq!(f("bailing-think", true), "<role>SYSTEM</role>S<role>HUMAN</role> U <role>ASSISTANT</role> A <role>ASSISTANT</role><think>");
    assert_eq!(f("bailing2", false), "<role>SYSTEM</role>S<|role_end|><role>HUMAN</role> U <|role_end|><role>ASSISTANT</role> A <|role_end|>");
    assert_eq!(
        f("rwkv-world", false),
        "System: S\n\nUser: U\n\nAssistant: A\n\n"
    );
    assert_eq!(f("hunyuan-vl", true), "<｜hy_begin▁of▁sentence｜>S<｜hy_place▁holder▁no▁3｜> U <｜hy_User｜> A <｜hy_Assistant｜>");
    assert_eq!(f("pangu-embedded", true), "[unused9]系统：S[unused10][unused9]用户： U [unused10][unused9]助手： A [unused10][unused9]助手：");
    assert_eq!(f("solar-open", true), "<|begin|>system<|content|>S<|end|><|begin|>user<|content|> U <|end|><|begin|>assistant<|content|> A <|end|><|begin|>assistant");
    assert_eq!(f("exaone-moe", true), "<|system|>\nS<|endofturn|>\n<|user|>\nU<|endofturn|>\n<|assistant|>\nA<|endofturn|>\n<|assistant|>\n");
    assert_eq!(
        f("mistral-v7-tekken", true),
        "[SYSTEM_PROMPT]S[/SYSTEM_PROMPT][INST] U [/INST] A </s>"
    );
    // C's isspace trims \v and \f too
    let odd = [ChatMessage::new("user", "\x0b\x0cx\r\n")];
    assert_eq!(
        chat_apply_template(Some("llama3"), &odd, false).unwrap(),
        "<|start_header_id|>user<|end_header_id|>\n\nx<|eot_id|>"
    );
}

#[test]
fn detection_of_unnamed_and_marker_only_layouts() {
    assert_eq!(
        detect_template("{{'<|userprompt|>' + m + '<|endofuserprompt|>'}}"),
        Some(ChatTemplate::Dots1)
    );
    assert_eq!(
        detect_template("mistral something"),
        Some(ChatTemplate::Llama2)
    );
    assert_eq!(
        detect_template("<|im_start|><end_of_utterance>"),
        Some(ChatTemplate::Smolvlm)
    );
    assert_eq!(
        detect_template("<|assistant|><|user|><|tool_declare|>"),
        Some(ChatTemplate::ExaoneMoe)
    );
}
