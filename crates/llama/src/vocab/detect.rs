//! Special tokens llama.cpp recognises by their text: EOT/EOM/FIM ids the metadata leaves
//! unset, "unused" control tokens, and the end-of-generation set, found while walking the
//! tokens in llama.cpp's hash-map order (so the first match and the warnings agree with it).

use std::collections::BTreeSet;

use super::hashorder;
use super::{attr, SpecialTokens, Token, Vocab, TOKEN_NULL};

fn warn_control_looking(id: Token, text: &str) {
    ggml::log_warn!(
        "load: control-looking token: {:6} '{}' was not control-type; this is probably a bug in the model. its type will be overridden\n",
        id,
        text
    );
}

struct Detect {
    names: &'static [&'static str],
}

const EOT_NAMES: Detect = Detect {
    names: &[
        "<|eot_id|>",
        "<|im_end|>",
        "<|end|>",
        "<end_of_turn>",
        "<|endoftext|>",
        "<|end_of_text|>",
        "<EOT>",
        "_<EOT>",
        "[EOT]",
        "<｜end▁of▁sentence｜>",
        "<end_of_utterance>",
    ],
};
const EOM_NAMES: Detect = Detect {
    names: &["<|eom_id|>"],
};
const FIM_PRE_NAMES: Detect = Detect {
    names: &[
        "<|fim_prefix|>",
        "<fim-prefix>",
        "<fim_prefix>",
        "<｜fim▁begin｜>",
        "<PRE>",
        "▁<PRE>",
        "<|code_prefix|>",
        "<|prefix|>",
    ],
};
const FIM_SUF_NAMES: Detect = Detect {
    names: &[
        "<|fim_suffix|>",
        "<fim-suffix>",
        "<fim_suffix>",
        "<｜fim▁hole｜>",
        "<SUF>",
        "▁<SUF>",
        "<|code_suffix|>",
        "<|suffix|>",
    ],
};
const FIM_MID_NAMES: Detect = Detect {
    names: &[
        "<|fim_middle|>",
        "<fim-middle>",
        "<fim_middle>",
        "<｜fim▁end｜>",
        "<MID>",
        "▁<MID>",
        "<|code_middle|>",
        "<|middle|>",
    ],
};
const FIM_PAD_NAMES: Detect = Detect {
    names: &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"],
};
const FIM_REP_NAMES: Detect = Detect {
    names: &[
        "<|fim_repo|>",
        "<|repo_name|>",
        "<fim-repo>",
        "<REPO>",
        "<reponame>",
    ],
};
const FIM_SEP_NAMES: Detect = Detect {
    names: &["<|file_sep|>"],
};
const EOG_NAMES: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

const GPT_OSS_NAMES: &[&str] = &["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

impl Vocab {
    /// EOT/EOM/FIM detection by text, unused-token marking and the EOG set, walking the
    /// tokens in llama.cpp's hash-map order.
    pub(super) fn detect_special_tokens(&mut self) {
        let keys: Vec<&[u8]> = self.tokens.iter().map(|t| t.text.as_bytes()).collect();
        let mut order = hashorder::iteration_order(&keys);
        // Only tokens named in the lists below, and control tokens, take part in what
        // follows; dropping the rest keeps llama.cpp's relative order of those that do.
        let mut named = vec![false; self.tokens.len()];
        let lists = [
            EOT_NAMES.names,
            EOM_NAMES.names,
            FIM_PRE_NAMES.names,
            FIM_SUF_NAMES.names,
            FIM_MID_NAMES.names,
            FIM_PAD_NAMES.names,
            FIM_REP_NAMES.names,
            FIM_SEP_NAMES.names,
            EOG_NAMES,
            GPT_OSS_NAMES,
        ];
        for name in lists.iter().flat_map(|l| l.iter()) {
            if let Some(&id) = self.token_to_id.get(name.as_bytes()) {
                named[id as usize] = true;
            }
        }
        order.retain(|&i| named[i] || self.tokens[i].attr & attr::CONTROL != 0);
        let ids: [fn(&mut SpecialTokens) -> &mut Token; 8] = [
            |s| &mut s.eot,
            |s| &mut s.eom,
            |s| &mut s.fim_pre,
            |s| &mut s.fim_suf,
            |s| &mut s.fim_mid,
            |s| &mut s.fim_pad,
            |s| &mut s.fim_rep,
            |s| &mut s.fim_sep,
        ];
        let names = [
            EOT_NAMES,
            EOM_NAMES,
            FIM_PRE_NAMES,
            FIM_SUF_NAMES,
            FIM_MID_NAMES,
            FIM_PAD_NAMES,
            FIM_REP_NAMES,
            FIM_SEP_NAMES,
        ];
        for &i in &order {
            for (get, d) in ids.iter().zip(names.iter()) {
                let slot = get(&mut self.special);
                if *slot != TOKEN_NULL || !d.names.contains(&self.tokens[i].text.as_str()) {
                    continue;
                }
                *slot = i as Token;
                let t = &mut self.tokens[i];
                if t.attr & attr::CONTROL == 0 {
                    warn_control_looking(i as Token, &t.text);
                    t.attr |= attr::CONTROL;
                }
            }
        }

        let mut n_unused = 0u32;
        for t in self.tokens.iter_mut() {
            if t.attr & attr::CONTROL == 0 {
                continue;
            }
            if t.attr & attr::UNUSED == 0 && t.text.contains("unused") {
                t.attr |= attr::UNUSED;
            }
            if t.attr & attr::UNUSED != 0 {
                n_unused += 1;
            }
        }
        ggml::log_info!("load: {} unused tokens\n", n_unused);

        let s = self.special;
        let mut eog = BTreeSet::new();
        for id in [s.fim_pad, s.fim_rep, s.fim_sep] {
            if id != TOKEN_NULL {
                eog.insert(id);
            }
        }
        for &i in &order {
            let t = &mut self.tokens[i];
            if EOG_NAMES.contains(&t.text.as_str()) {
                eog.insert(i as Token);
                if t.attr & attr::CONTROL == 0 {
                    warn_control_looking(i as Token, &t.text);
                    t.attr |= attr::CONTROL;
                }
            } else if t.attr & attr::CONTROL != 0
                && t.attr & attr::UNUSED == 0
                && !eog.contains(&(i as Token))
            {
                ggml::log_debug!(
                    "load: control token: {:6} '{}' is not marked as EOG\n",
                    i,
                    t.text
                );
            }
        }
        for &i in &order {
            let t = &mut self.tokens[i];
            if GPT_OSS_NAMES.contains(&t.text.as_str()) {
                ggml::log_warn!(
                    "load: setting token '{}' ({}) attribute to USER_DEFINED ({}), old attributes: {}\n",
                    t.text,
                    i,
                    attr::USER_DEFINED,
                    t.attr
                );
                t.attr = attr::USER_DEFINED;
            }
        }
        for (id, name) in [(s.eos, "eos"), (s.eot, "eot"), (s.eom, "eom")] {
            if id != TOKEN_NULL && !eog.contains(&id) {
                eog.insert(id);
                ggml::log_warn!(
                    "load: special_{}_id is not in special_eog_ids - the tokenizer config may be incorrect\n",
                    name
                );
            }
        }

        ggml::log_info!("load: printing all EOG tokens:\n");
        let (mut has_return, mut has_call, mut has_end, mut has_flush) =
            (false, false, false, false);
        let mut end_id = TOKEN_NULL;
        for &tid in &eog {
            let Some(t) = self.token(tid) else {
                ggml::log_warn!(
                    "load: EOG token id {} is out of range (vocab size {}), skipping\n",
                    tid,
                    self.tokens.len()
                );
                continue;
            };
            ggml::log_info!("load:   - {} ('{}')\n", tid, t.text);
            match t.text.as_str() {
                "<|return|>" => has_return = true,
                "<|call|>" | "<|calls|>" => has_call = true,
                "<|flush|>" => has_flush = true,
                "<|end|>" => {
                    has_end = true;
                    end_id = tid;
                }
                _ => {}
            }
        }
        if has_end && has_call && (has_return || has_flush) {
            eog.remove(&end_id);
            if let Some(t) = self.tokens.get_mut(end_id as usize) {
                t.attr = attr::USER_DEFINED;
            }
            ggml::log_warn!("load: special_eog_ids contains both '<|return|>' and '<|call|>', or '<|calls|>' and '<|flush|>' tokens, removing '<|end|>' token from EOG list\n");
        }
        let mut has_marker = false;
        let mut s_id = TOKEN_NULL;
        for &tid in &eog {
            match self.token(tid).map(|t| t.text.as_str()) {
                Some("<|tool_response>") | Some("<|plamo:eos|>") => has_marker = true,
                Some("</s>") => s_id = tid,
                _ => {}
            }
        }
        if has_marker && s_id != TOKEN_NULL {
            eog.remove(&s_id);
            self.tokens[s_id as usize].attr = attr::NORMAL;
            ggml::log_warn!("load: '</s>' is a normal token here, removing it from EOG list\n");
        }
        self.eog = eog;
    }
}
