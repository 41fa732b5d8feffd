//! `llm_chat_apply_template`: each built-in layout, byte for byte as llama.cpp writes it
//! (its quirks included: some layouts ignore `add_ass`, some drop roles they do not know).

use super::template::ChatTemplate::{self, *};
use super::ChatMessage;

/// Trims what C's `isspace` calls space (`\v` included, which `u8::is_ascii_whitespace` is not).
fn trim(s: &str) -> &str {
    let sp = |c: char| matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r');
    s.trim_matches(sp)
}

/// Formats `chat` in the layout `tmpl`; `add_ass` appends the assistant's opening where the
/// layout has one.
pub fn apply_template(tmpl: ChatTemplate, chat: &[ChatMessage], add_ass: bool) -> String {
    let mut ss = String::new();
    let last = chat.len().wrapping_sub(1);
    match tmpl {
        Chatml => {
            for m in chat {
                push(
                    &mut ss,
                    &["<|im_start|>", &m.role, "\n", &m.content, "<|im_end|>\n"],
                );
            }
            if add_ass {
                ss.push_str("<|im_start|>assistant\n");
            }
        }
        MistralV7 | MistralV7Tekken => {
            let sp = if tmpl == MistralV7 { " " } else { "" };
            for m in chat {
                match m.role.as_str() {
                    "system" => push(
                        &mut ss,
                        &["[SYSTEM_PROMPT]", sp, &m.content, "[/SYSTEM_PROMPT]"],
                    ),
                    "user" => push(&mut ss, &["[INST]", sp, &m.content, "[/INST]"]),
                    _ => push(&mut ss, &[sp, &m.content, "</s>"]),
                }
            }
        }
        MistralV1 | MistralV3 | MistralV3Tekken => {
            let leading = if tmpl == MistralV1 { " " } else { "" };
            let trailing = if tmpl == MistralV3Tekken { "" } else { " " };
            let trim_assistant = tmpl == MistralV3;
            let mut inside_turn = false;
            for m in chat {
                if !inside_turn {
                    push(&mut ss, &[leading, "[INST]", trailing]);
                    inside_turn = true;
                }
                match m.role.as_str() {
                    "system" => push(&mut ss, &[&m.content, "\n\n"]),
                    "user" => push(&mut ss, &[&m.content, leading, "[/INST]"]),
                    _ => {
                        let c = if trim_assistant {
                            trim(&m.content)
                        } else {
                            &m.content
                        };
                        push(&mut ss, &[trailing, c, "</s>"]);
                        inside_turn = false;
                    }
                }
            }
        }
        Llama2 | Llama2Sys | Llama2SysBos | Llama2SysStrip => {
            let support_system = tmpl != Llama2;
            let bos_inside_history = tmpl == Llama2SysBos;
            let strip = tmpl == Llama2SysStrip;
            // the first turn's opening is written up front, without BOS
            let mut inside_turn = true;
            ss.push_str("[INST] ");
            for m in chat {
                let content = if strip { trim(&m.content) } else { &m.content };
                if !inside_turn {
                    inside_turn = true;
                    ss.push_str(if bos_inside_history {
                        "<s>[INST] "
                    } else {
                        "[INST] "
                    });
                }
                match m.role.as_str() {
                    "system" if support_system => {
                        push(&mut ss, &["<<SYS>>\n", content, "\n<</SYS>>\n\n"])
                    }
                    "system" => push(&mut ss, &[content, "\n"]),
                    "user" => push(&mut ss, &[content, " [/INST]"]),
                    _ => {
                        push(&mut ss, &[content, "</s>"]);
                        inside_turn = false;
                    }
                }
            }
        }
        Phi3 => {
            for m in chat {
                push(&mut ss, &["<|", &m.role, "|>\n", &m.content, "<|end|>\n"]);
            }
            if add_ass {
                ss.push_str("<|assistant|>\n");
            }
        }
        Phi4 => {
            for m in chat {
                push(
                    &mut ss,
                    &[
                        "<|im_start|>",
                        &m.role,
                        "<|im_sep|>",
                        &m.content,
                        "<|im_end|>",
                    ],
                );
            }
            if add_ass {
                ss.push_str("<|im_start|>assistant<|im_sep|>");
            }
        }
        Falcon3 => {
            for m in chat {
                push(&mut ss, &["<|", &m.role, "|>\n", &m.content, "\n"]);
            }
            if add_ass {
                ss.push_str("<|assistant|>\n");
            }
        }
        Zephyr => {
            for m in chat {
                push(
                    &mut ss,
                    &["<|", &m.role, "|>\n", &m.content, "<|endoftext|>\n"],
                );
            }
            if add_ass {
                ss.push_str("<|assistant|>\n");
            }
        }
        Monarch => {
            for (i, m) in chat.iter().enumerate() {
                // the first message goes without BOS: the tokenizer adds that one
                let bos = if i == 0 { "" } else { "<s>" };
                push(&mut ss, &[bos, &m.role, "\n", &m.content, "</s>\n"]);
            }
            if add_ass {
                ss.push_str("<s>assistant\n");
            }
        }
        Gemma => {
            // Gemma has no system turn: the system text opens the next user turn instead
            let mut system_prompt = String::new();
            for m in chat {
                if m.role == "system" {
                    system_prompt.push_str(trim(&m.content));
                    continue;
                }
                let role = if m.role == "assistant" {
                    "model"
                } else {
                    &m.role
                };
                push(&mut ss, &["<start_of_turn>", role, "\n"]);
                if !system_prompt.is_empty() && role != "model" {
                    push(&mut ss, &[&system_prompt, "\n\n"]);
                    system_prompt.clear();
                }
                push(&mut ss, &[trim(&m.content), "<end_of_turn>\n"]);
            }
            if add_ass {
                ss.push_str("<start_of_turn>model\n");
            }
        }
        Orion => {
            let mut system_prompt = String::new();
            for m in chat {
                match m.role.as_str() {
                    "system" => system_prompt.push_str(&m.content),
                    "user" => {
                        ss.push_str("Human: ");
                        if !system_prompt.is_empty() {
                            push(&mut ss, &[&system_prompt, "\n\n"]);
                            system_prompt.clear();
                        }
                        push(&mut ss, &[&m.content, "\n\nAssistant: </s>"]);
                    }
                    _ => push(&mut ss, &[&m.content, "</s>"]),
                }
            }
        }
        Openchat => {
            for m in chat {
                if m.role == "system" {
                    push(&mut ss, &[&m.content, "<|end_of_turn|>"]);
                } else {
                    let role = upper_first(&m.role);
                    push(
                        &mut ss,
                        &["GPT4 Correct ", &role, ": ", &m.content, "<|end_of_turn|>"],
                    );
                }
            }
            if add_ass {
                ss.push_str("GPT4 Correct Assistant:");
            }
        }
        Vicuna | VicunaOrca => {
            for m in chat {
                match m.role.as_str() {
                    "system" if tmpl == VicunaOrca => {
                        push(&mut ss, &["SYSTEM: ", &m.content, "\n"])
                    }
                    "system" => push(&mut ss, &[&m.content, "\n\n"]),
                    "user" => push(&mut ss, &["USER: ", &m.content, "\n"]),
                    "assistant" => push(&mut ss, &["ASSISTANT: ", &m.content, "</s>\n"]),
                    _ => {}
                }
            }
            if add_ass {
                ss.push_str("ASSISTANT:");
            }
        }
        Deepseek => {
            for m in chat {
                match m.role.as_str() {
                    "system" => ss.push_str(&m.content),
                    "user" => push(&mut ss, &["### Instruction:\n", &m.content, "\n"]),
                    "assistant" => push(&mut ss, &["### Response:\n", &m.content, "\n<|EOT|>\n"]),
                    _ => {}
                }
            }
            if add_ass {
                ss.push_str("### Response:\n");
            }
        }
        CommandR => {
            for m in chat {
                let open = match m.role.as_str() {
                    "system" => "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>",
                    "user" => "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>",
                    "assistant" => "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
                    _ => continue,
                };
                push(&mut ss, &[open, trim(&m.content), "<|END_OF_TURN_TOKEN|>"]);
            }
            if add_ass {
                ss.push_str("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>");
            }
        }
        Llama3 => {
            for m in chat {
                push(
                    &mut ss,
                    &[
                        "<|start_header_id|>",
                        &m.role,
                        "<|end_header_id|>\n\n",
                        trim(&m.content),
                        "<|eot_id|>",
                    ],
                );
            }
            if add_ass {
                ss.push_str("<|start_header_id|>assistant<|end_header_id|>\n\n");
            }
        }
        Chatglm3 => {
            ss.push_str("[gMASK]sop");
            for m in chat {
                push(&mut ss, &["<|", &m.role, "|>\n ", &m.content]);
            }
            if add_ass {
                ss.push_str("<|assistant|>");
            }
        }
        Chatglm4 => {
            ss.push_str("[gMASK]<sop>");
            for m in chat {
                push(&mut ss, &["<|", &m.role, "|>\n", &m.content]);
            }
            if add_ass {
                ss.push_str("<|assistant|>\n");
            }
        }
        Glmedge => {
            for m in chat {
                push(&mut ss, &["<|", &m.role, "|>\n", &m.content]);
            }
            if add_ass {
                ss.push_str("<|assistant|>");
            }
        }
        Minicpm => {
            for m in chat {
                if m.role == "user" {
                    push(&mut ss, &["<用户>", trim(&m.content), "<AI>"]);
                } else {
                    ss.push_str(trim(&m.content));
                }
            }
        }
        Deepseek2 => {
            for m in chat {
                match m.role.as_str() {
                    "system" => push(&mut ss, &[&m.content, "\n\n"]),
                    "user" => push(&mut ss, &["User: ", &m.content, "\n\n"]),
                    "assistant" => push(
                        &mut ss,
                        &["Assistant: ", &m.content, "<｜end▁of▁sentence｜>"],
                    ),
                    _ => {}
                }
            }
            if add_ass {
                ss.push_str("Assistant:");
            }
        }
        Deepseek3 => {
            for m in chat {
                match m.role.as_str() {
                    "system" => push(&mut ss, &[&m.content, "\n\n"]),
                    "user" => push(&mut ss, &["<｜User｜>", &m.content]),
                    "assistant" => push(
                        &mut ss,
                        &["<｜Assistant｜>", &m.content, "<｜end▁of▁sentence｜>"],
                    ),
                    _ => {}
                }
            }
            if add_ass {
                ss.push_str("<｜Assistant｜>");
            }
        }
        DeepseekOcr => {
            for m in chat {
                ss.push_str(&m.content);
            }
        }
        Exaone3 | Exaone4 => {
            for m in chat {
                let c = trim(&m.content);
                match m.role.as_str() {
                    "system" => push(&mut ss, &["[|system|]", c, "[|endofturn|]\n"]),
                    "user" => push(&mut ss, &["[|user|]", c, "\n"]),
                    "assistant" => push(&mut ss, &["[|assistant|]", c, "[|endofturn|]\n"]),
                    "tool" if tmpl == Exaone4 => push(&mut ss, &["[|tool|]", c, "[|endofturn|]\n"]),
                    _ => {}
                }
            }
            if add_ass {
                ss.push_str("[|assistant|]");
            }
        }
        ExaoneMoe => {
            for m in chat {
                let open = match m.role.as_str() {
                    "system" => "<|system|>\n",
                    "user" => "<|user|>\n",
                    "assistant" => "<|assistant|>\n",
                    "tool" => "<|tool|>\n",
                    _ => continue,
                };
                push(&mut ss, &[open, trim(&m.content), "<|endofturn|>\n"]);
            }
            if add_ass {
                ss.push_str("<|assistant|>\n");
            }
        }
        RwkvWorld => {
            // "\n\n" is this model's end of turn; the opening follows the last user turn
            // whatever `add_ass` says
            for (i, m) in chat.iter().enumerate() {
                let c = trim(&m.content);
                match m.role.as_str() {
                    "system" => push(&mut ss, &["System: ", c, "\n\n"]),
                    "user" => {
                        push(&mut ss, &["User: ", c, "\n\n"]);
                        if i == last {
                            ss.push_str("Assistant:");
                        }
                    }
                    "assistant" => push(&mut ss, &["Assistant: ", c, "\n\n"]),
                    _ => {}
                }
            }
        }
        Granite3X => {
            for m in chat {
                push(&mut ss, &["<|start_of_role|>", &m.role, "<|end_of_role|>"]);
                if m.role == "assistant_tool_call" {
                    ss.push_str("<|tool_call|>");
                }
                push(&mut ss, &[&m.content, "<|end_of_text|>\n"]);
            }
            if add_ass {
                ss.push_str("<|start_of_role|>assistant<|end_of_role|>");
            }
        }
        Granite40 | Granite41 => {
            for m in chat {
                if m.role == "assistant_tool_call" {
                    ss.push_str("<|start_of_role|>assistant<|end_of_role|><|tool_call|>");
                } else {
                    push(&mut ss, &["<|start_of_role|>", &m.role, "<|end_of_role|>"]);
                }
                push(&mut ss, &[&m.content, "<|end_of_text|>\n"]);
            }
            if add_ass {
                ss.push_str("<|start_of_role|>assistant<|end_of_role|>");
            }
        }
        Gigachat => {
            let has_system = chat.first().is_some_and(|m| m.role == "system");
            if has_system {
                push(&mut ss, &["<s>", &chat[0].content, "<|message_sep|>"]);
            } else {
                ss.push_str("<s>");
            }
            for m in &chat[usize::from(has_system)..] {
                match m.role.as_str() {
                    "user" => push(
                        &mut ss,
                        &[
                            "user<|role_sep|>",
                            &m.content,
                            "<|message_sep|>available functions<|role_sep|>[]<|message_sep|>",
                        ],
                    ),
                    "assistant" => push(
                        &mut ss,
                        &["assistant<|role_sep|>", &m.content, "<|message_sep|>"],
                    ),
                    _ => {}
                }
            }
            if add_ass {
                ss.push_str("assistant<|role_sep|>");
            }
        }
        Megrez => {
            for m in chat {
                push(
                    &mut ss,
                    &[
                        "<|role_start|>",
                        &m.role,
                        "<|role_end|>",
                        &m.content,
                        "<|turn_end|>",
                    ],
                );
            }
            if add_ass {
                ss.push_str("<|role_start|>assistant<|role_end|>");
            }
        }
        Yandex => {
            for m in chat {
                match m.role.as_str() {
                    "user" => push(&mut ss, &[" Пользователь: ", &m.content, "\n\n"]),
                    "assistant" => push(&mut ss, &[" Ассистент: ", &m.content, "\n\n"]),
                    _ => {}
                }
            }
            if add_ass {
                ss.push_str(" Ассистент:[SEP]");
            }
        }
        Bailing | BailingThink => {
            for m in chat {
                let role = bailing_role(&m.role);
                push(&mut ss, &["<role>", &role, "</role>", &m.content]);
            }
            if add_ass {
                ss.push_str("<role>ASSISTANT</role>");
                if tmpl == BailingThink {
                    ss.push_str("<think>");
                }
            }
        }
        Bailing2 => {
            let has_system = chat.first().is_some_and(|m| m.role == "system");
            if !has_system {
                ss.push_str("<role>SYSTEM</role>detailed thinking off<|role_end|>");
            }
            for m in chat {
                let role = bailing_role(&m.role);
                push(
                    &mut ss,
                    &["<role>", &role, "</role>", &m.content, "<|role_end|>"],
                );
            }
            if add_ass {
                ss.push_str("<role>ASSISTANT</role>");
            }
        }
        Llama4 => {
            for m in chat {
                push(
                    &mut ss,
                    &[
                        "<|header_start|>",
                        &m.role,
                        "<|header_end|>\n\n",
                        trim(&m.content),
                        "<|eot|>",
                    ],
                );
            }
            if add_ass {
                ss.push_str("<|header_start|>assistant<|header_end|>\n\n");
            }
        }
        Smolvlm => {
            // <|im_start|> serves as BOS here; the turns themselves are not ChatML
            ss.push_str("<|im_start|>");
            for m in chat {
                match m.role.as_str() {
                    "system" => push(&mut ss, &[&m.content, "\n\n"]),
                    "user" => push(&mut ss, &["User: ", &m.content, "<end_of_utterance>\n"]),
                    _ => push(
                        &mut ss,
                        &["Assistant: ", &m.content, "<end_of_utterance>\n"],
                    ),
                }
            }
            if add_ass {
                ss.push_str("Assistant:");
            }
        }
        Dots1 => {
            for m in chat {
                match m.role.as_str() {
                    "system" => push(&mut ss, &["<|system|>", &m.content, "<|endofsystem|>"]),
                    "user" => push(
                        &mut ss,
                        &["<|userprompt|>", &m.content, "<|endofuserprompt|>"],
                    ),
                    _ => push(&mut ss, &["<|response|>", &m.content, "<|endofresponse|>"]),
                }
            }
            if add_ass {
                ss.push_str("<|response|>");
            }
        }
        HunyuanMoe => {
            for m in chat {
                match m.role.as_str() {
                    "system" => push(&mut ss, &["<|startoftext|>", &m.content, "<|extra_4|>"]),
                    "assistant" => push(&mut ss, &[&m.content, "<|eos|>"]),
                    _ => push(&mut ss, &["<|startoftext|>", &m.content, "<|extra_0|>"]),
                }
            }
        }
        OpenaiMoe => {
            for m in chat {
                let end = if m.role == "assistant" {
                    "<|return|>"
                } else {
                    "<|end|>"
                };
                push(
                    &mut ss,
                    &["<|start|>", &m.role, "<|message|>", &m.content, end],
                );
            }
            if add_ass {
                ss.push_str("<|start|>assistant");
            }
        }
        HunyuanDense => {
            for (i, m) in chat.iter().enumerate() {
                if i == 0 && m.role == "system" {
                    push(&mut ss, &[&m.content, "<｜hy_place▁holder▁no▁3｜>"]);
                }
                match m.role.as_str() {
                    "assistant" => push(
                        &mut ss,
                        &[
                            "<｜hy_Assistant｜>",
                            &m.content,
                            "<｜hy_place▁holder▁no▁2｜>",
                        ],
                    ),
                    "user" => push(
                        &mut ss,
                        &["<｜hy_User｜>", &m.content, "<｜hy_Assistant｜>"],
                    ),
                    _ => {}
                }
            }
        }
        HunyuanVl => {
            ss.push_str("<｜hy_begin▁of▁sentence｜>");
            for (i, m) in chat.iter().enumerate() {
                if i == 0 && m.role == "system" {
                    push(&mut ss, &[&m.content, "<｜hy_place▁holder▁no▁3｜>"]);
                    continue;
                }
                match m.role.as_str() {
                    "user" => push(&mut ss, &[&m.content, "<｜hy_User｜>"]),
                    "assistant" => push(&mut ss, &[&m.content, "<｜hy_Assistant｜>"]),
                    _ => {}
                }
            }
        }
        KimiK2 => {
            for m in chat {
                let open = match m.role.as_str() {
                    "system" => "<|im_system|>system<|im_middle|>",
                    "user" => "<|im_user|>user<|im_middle|>",
                    "assistant" => "<|im_assistant|>assistant<|im_middle|>",
                    "tool" => "<|im_system|>tool<|im_middle|>",
                    _ => "",
                };
                push(&mut ss, &[open, &m.content, "<|im_end|>"]);
            }
            if add_ass {
                ss.push_str("<|im_assistant|>assistant<|im_middle|>");
            }
        }
        SeedOss => {
            for m in chat {
                let c = if m.role == "assistant" {
                    trim(&m.content)
                } else {
                    &m.content
                };
                push(&mut ss, &["<seed:bos>", &m.role, "\n", c, "<seed:eos>"]);
            }
            if add_ass {
                ss.push_str("<seed:bos>assistant\n");
            }
        }
        Grok2 => {
            for m in chat {
                match m.role.as_str() {
                    "system" => push(
                        &mut ss,
                        &["System: ", trim(&m.content), "<|separator|>\n\n"],
                    ),
                    "user" => push(&mut ss, &["Human: ", trim(&m.content), "<|separator|>\n\n"]),
                    "assistant" => push(&mut ss, &["Assistant: ", &m.content, "<|separator|>\n\n"]),
                    _ => {}
                }
            }
            if add_ass {
                ss.push_str("Assistant:");
            }
        }
        PanguEmbed => {
            for (i, m) in chat.iter().enumerate() {
                if i == 0 && m.role != "system" {
                    ss.push_str("[unused9]系统：[unused10]");
                }
                let open = match m.role.as_str() {
                    "system" => "[unused9]系统：",
                    "user" => "[unused9]用户：",
                    "assistant" => "[unused9]助手：",
                    "tool" => "[unused9]工具：",
                    "function" => "[unused9]方法：",
                    _ => continue,
                };
                push(&mut ss, &[open, &m.content, "[unused10]"]);
            }
            if add_ass {
                ss.push_str("[unused9]助手：");
            }
        }
        SolarOpen => {
            for m in chat {
                push(
                    &mut ss,
                    &["<|begin|>", &m.role, "<|content|>", &m.content, "<|end|>"],
                );
            }
            if add_ass {
                ss.push_str("<|begin|>assistant");
            }
        }
    }
    ss
}

fn push(ss: &mut String, parts: &[&str]) {
    for p in parts {
        ss.push_str(p);
    }
}

/// OpenChat's role: the first byte upper-cased as C's `toupper` does (ASCII only).
fn upper_first(role: &str) -> String {
    let mut bytes = role.as_bytes().to_vec();
    if let Some(b) = bytes.first_mut() {
        b.make_ascii_uppercase();
    }
    // an ASCII byte changed for an ASCII byte keeps the text valid UTF-8
    String::from_utf8(bytes).unwrap_or_else(|_| role.to_string())
}

/// Bailing's role: `user` is `HUMAN`, every other role upper-cased byte by byte.
fn bailing_role(role: &str) -> String {
    if role == "user" {
        "HUMAN".to_string()
    } else {
        role.to_ascii_uppercase()
    }
}
