//! `llm_chat_detect_template`: which built-in layout a model's Jinja template text is, by the
//! marker strings llama.cpp looks for, tested in llama.cpp's order (earlier tests win).

use super::template::ChatTemplate::{self, *};

/// A built-in name, or the layout whose markers `tmpl` contains; `None` where nothing matches.
pub fn detect_template(tmpl: &str) -> Option<ChatTemplate> {
    if let Some(t) = ChatTemplate::from_name(tmpl) {
        return Some(t);
    }
    let has = |s: &str| tmpl.contains(s);
    let t = if has("<|im_start|>") {
        if has("<|im_sep|>") {
            Phi4
        } else if has("<end_of_utterance>") {
            // SmolVLM starts with <|im_start|> as its BOS but is not ChatML
            Smolvlm
        } else {
            Chatml
        }
    } else if tmpl.starts_with("mistral") || has("[INST]") {
        if has("[SYSTEM_PROMPT]") {
            MistralV7
        } else if has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]") {
            // the official mistral v1, v3 and v3-tekken templates
            if has(" [INST]") {
                MistralV1
            } else if has("\"[INST]\"") {
                MistralV3Tekken
            } else {
                MistralV3
            }
        } else if has("content.strip()") {
            Llama2SysStrip
        } else if has("bos_token + '[INST]") {
            Llama2SysBos
        } else if has("<<SYS>>") {
            Llama2Sys
        } else {
            Llama2
        }
    } else if has("<|assistant|>") && has("<|end|>") {
        Phi3
    } else if has("[gMASK]<sop>") {
        Chatglm4
    } else if has("<|assistant|>") && has("<|user|>") {
        if has("<|tool_declare|>") {
            ExaoneMoe
        } else if has("</s>") {
            Falcon3
        } else {
            Glmedge
        }
    } else if has("<|{{ item['role'] }}|>") && has("<|begin_of_image|>") {
        Glmedge
    } else if has("<|user|>") && has("<|endoftext|>") {
        Zephyr
    } else if has("bos_token + message['role']") {
        Monarch
    } else if has("<start_of_turn>") {
        Gemma
    } else if has("'\\n\\nAssistant: ' + eos_token") {
        Orion
    } else if has("GPT4 Correct ") {
        Openchat
    } else if has("USER: ") && has("ASSISTANT: ") {
        if has("SYSTEM: ") {
            VicunaOrca
        } else {
            Vicuna
        }
    } else if has("### Instruction:") && has("<|EOT|>") {
        Deepseek
    } else if has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>") {
        CommandR
    } else if has("<|start_header_id|>") && has("<|end_header_id|>") {
        Llama3
    } else if has("[gMASK]sop") {
        Chatglm3
    } else if has("<用户>") {
        Minicpm
    } else if has("'Assistant: ' + message['content'] + eos_token") {
        Deepseek2
    } else if has("<｜Assistant｜>") && has("<｜User｜>") && has("<｜end▁of▁sentence｜>") {
        Deepseek3
    } else if has("[|system|]") && has("[|assistant|]") && has("[|endofturn|]") {
        if has("[|tool|]") {
            Exaone4
        } else {
            Exaone3
        }
    } else if has("rwkv-world") || has("{{- 'User: ' + message['content']|trim + '\\n\\n' -}}") {
        RwkvWorld
    } else if has("<|start_of_role|>") {
        if has("<tool_call>") || has("<tools>") {
            if has("g4_default_system_message") {
                Granite40
            } else {
                Granite41
            }
        } else {
            Granite3X
        }
    } else if has("message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]") {
        Gigachat
    } else if has("<|role_start|>") {
        Megrez
    } else if has(" Ассистент:") {
        Yandex
    } else if has("<role>ASSISTANT</role>") && has("'HUMAN'") {
        Bailing
    } else if has("<role>ASSISTANT</role>") && has("\"HUMAN\"") && has("<think>") {
        BailingThink
    } else if has("<role>ASSISTANT</role>") && has("<role>HUMAN</role>") && has("<|role_end|>") {
        Bailing2
    } else if has("<|header_start|>") && has("<|header_end|>") {
        Llama4
    } else if has("<|endofuserprompt|>") {
        Dots1
    } else if has("<|extra_0|>") && has("<|extra_4|>") {
        HunyuanMoe
    } else if has("<|start|>") && has("<|channel|>") {
        OpenaiMoe
    } else if has("<｜hy_Assistant｜>") && has("<｜hy_begin▁of▁sentence｜>") {
        HunyuanVl
    } else if has("<｜hy_Assistant｜>") && has("<｜hy_place▁holder▁no▁3｜>") {
        HunyuanDense
    } else if has("<|im_assistant|>assistant<|im_middle|>") {
        KimiK2
    } else if has("<seed:bos>") {
        SeedOss
    } else if has("'Assistant: '  + message['content'] + '<|separator|>") {
        Grok2
    } else if has("[unused9]系统：[unused10]") {
        PanguEmbed
    } else if has("<|begin|>") && has("<|end|>") && has("<|content|>") {
        SolarOpen
    } else {
        return None;
    };
    Some(t)
}
