#[path = "../../../llama/src/chat/upstream_cases.rs"]
mod upstream_cases;

use super::*;
use upstream_cases::CASES;

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

/// test-chat-template.cpp's Jinja half: each model's template rendered through the common
/// layer gives what llama.cpp's engine gives.
#[test]
fn upstream_cases_render_with_jinja_as_llama_cpp() {
    let mut failed = Vec::new();
    let mut ran = 0;
    for case in CASES.iter().filter(|c| c.supported_with_jinja) {
        ran += 1;
        let mut chat = conversation();
        chat.extend(case.extra.iter().map(|(r, c)| ChatMessage::new(r, c)));
        let want = if case.expected_jinja.is_empty() {
            case.expected
        } else {
            case.expected_jinja
        };
        let got = ChatTemplates::from_source(case.template, case.bos, case.eos, true)
            .and_then(|t| t.apply(&chat, true, true, &TemplateKwargs::new()));
        match got {
            Ok(out) if out == want => {}
            Ok(out) => failed.push(format!("{}:\n  want {want:?}\n  got  {out:?}", case.name)),
            Err(e) => failed.push(format!("{}: {e}", case.name)),
        }
    }
    assert_eq!(ran, 35);
    assert!(
        failed.is_empty(),
        "{} of {ran} differ:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

#[test]
fn legacy_apply_and_unknown_template() {
    let t = ChatTemplates::from_source("chatml", "", "", false).unwrap();
    let msgs = [ChatMessage::new("user", "hi")];
    assert_eq!(
        t.apply(&msgs, true, false, &TemplateKwargs::new()).unwrap(),
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
    let bad = ChatTemplates::from_source("{{ nothing known }}", "", "", false).unwrap();
    assert_eq!(
        bad.apply(&msgs, true, false, &TemplateKwargs::new())
            .unwrap_err(),
        "this custom template is not supported, try using --jinja"
    );
    assert!(verify_template("llama3", false));
    assert!(!verify_template("llama-9000", false));
    assert!(verify_template("{{ messages[0].content }}", true));
    assert!(!verify_template("{% if %}", true));
}

#[test]
fn format_single_is_the_new_text_only() {
    for use_jinja in [false, true] {
        let t = ChatTemplates::from_source("chatml", "", "", use_jinja).unwrap();
        let past = [
            ChatMessage::new("system", "S"),
            ChatMessage::new("user", "hi"),
            ChatMessage::new("assistant", "yo"),
        ];
        let s = t
            .format_single(&past, &ChatMessage::new("user", "again"), true, use_jinja)
            .unwrap();
        assert_eq!(
            s,
            "\n<|im_start|>user\nagain<|im_end|>\n<|im_start|>assistant\n"
        );
        let first = t
            .format_single(&[], &ChatMessage::new("system", "S"), false, use_jinja)
            .unwrap();
        assert_eq!(first, "<|im_start|>system\nS<|im_end|>\n");
    }
}

#[test]
fn example_and_kwargs_reach_the_template() {
    // the template prints every content, so the system message stays its own turn
    let t = ChatTemplates::from_source(
        "{{ messages | length }}{% for m in messages %}|{{ m.content }}{% endfor %}|{{ enable_thinking }}|{{ add_generation_prompt }}",
        "",
        "",
        true,
    )
    .unwrap();
    let mut kw = TemplateKwargs::new();
    assert_eq!(
        t.format_example(true, &kw).unwrap(),
        "4|You are a helpful assistant|Hello|Hi there|How are you?|True|True"
    );
    kw.insert("enable_thinking".into(), "false".into());
    assert_eq!(
        t.format_example(true, &kw).unwrap(),
        "4|You are a helpful assistant|Hello|Hi there|How are you?|False|True"
    );
    let none = t.apply(&[], false, true, &TemplateKwargs::new()).unwrap();
    assert_eq!(
        none, "0|True|",
        "add_generation_prompt stays undefined when off"
    );
}

/// Real models' templates (llama.cpp's models/templates) render the example chat through
/// minijinja: each turn's text is there, and where the layout is short, all of it.
#[test]
fn model_templates_render() {
    let cases: [(&str, &str, &str, &str); 8] = [
        (
            "Llama-3.1-8B-Instruct",
            include_str!("testdata/meta-llama-Llama-3.1-8B-Instruct.jinja"),
            "<|begin_of_text|>",
            "<|eot_id|>",
        ),
        (
            "Qwen3-0.6B",
            include_str!("testdata/Qwen-Qwen3-0.6B.jinja"),
            "",
            "<|im_end|>",
        ),
        (
            "gemma-2-2b-it",
            include_str!("testdata/google-gemma-2-2b-it.jinja"),
            "<bos>",
            "<eos>",
        ),
        (
            "Phi-3.5-mini-instruct",
            include_str!("testdata/microsoft-Phi-3.5-mini-instruct.jinja"),
            "<s>",
            "<|endoftext|>",
        ),
        (
            "Mistral-Nemo-Instruct-2407",
            include_str!("testdata/mistralai-Mistral-Nemo-Instruct-2407.jinja"),
            "<s>",
            "</s>",
        ),
        (
            "gpt-oss-120b",
            include_str!("testdata/openai-gpt-oss-120b.jinja"),
            "<|startoftext|>",
            "<|return|>",
        ),
        (
            "SmolLM3-3B",
            include_str!("testdata/HuggingFaceTB-SmolLM3-3B.jinja"),
            "",
            "<|im_end|>",
        ),
        (
            "LFM2.5-8B-A1B",
            include_str!("testdata/LFM2.5-8B-A1B.jinja"),
            "<|startoftext|>",
            "<|im_end|>",
        ),
    ];
    for (name, src, bos, eos) in cases {
        let t = ChatTemplates::from_source(src, bos, eos, true)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let out = t
            .format_example(true, &TemplateKwargs::new())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        for part in [
            "You are a helpful assistant",
            "Hello",
            "Hi there",
            "How are you?",
        ] {
            assert!(out.contains(part), "{name} lost {part:?}:\n{out}");
        }
        match name {
            // raises on a system role: the system text joins the first user turn
            "gemma-2-2b-it" => assert_eq!(out, "<bos><start_of_turn>user\nYou are a helpful assistant\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n<start_of_turn>user\nHow are you?<end_of_turn>\n<start_of_turn>model\n"),
            "Phi-3.5-mini-instruct" => assert_eq!(out, "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n<|user|>\nHow are you?<|end|>\n<|assistant|>\n"),
            "Qwen3-0.6B" => assert!(out.starts_with("<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n") && out.ends_with("<|im_start|>user\nHow are you?<|im_end|>\n<|im_start|>assistant\n"), "{out}"),
            "Llama-3.1-8B-Instruct" => assert!(out.starts_with("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: ") && out.ends_with("<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"), "{out}"),
            _ => {}
        }
    }
}

#[test]
fn runaway_template_fails_through_apply() {
    // what `--jinja` with a template that loops without end gets: an error, not a hang
    let t = ChatTemplates::from_source_with_fuel(
        "{% for m in messages %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{% endfor %}",
        "",
        "",
        true,
        50_000,
    )
    .unwrap();
    let msgs = [ChatMessage::new("user", "hi")];
    let e = t
        .apply(&msgs, true, true, &TemplateKwargs::new())
        .unwrap_err();
    assert!(e.contains("more work than any chat needs (50000"), "{e}");
}
