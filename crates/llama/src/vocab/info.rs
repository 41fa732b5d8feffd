//! The vocabulary lines of llama.cpp's `print_info`.

use super::{Token, Vocab, TOKEN_NULL};

impl Vocab {
    pub fn print_info(&self) {
        ggml::log_info!(
            "print_info: vocab type            = {}\n",
            self.vtype.name()
        );
        ggml::log_info!(
            "print_info: n_vocab               = {}\n",
            self.tokens.len()
        );
        ggml::log_info!("print_info: n_merges              = {}\n", self.n_merges);
        let s = &self.special;
        let line = |name: &str, id: Token| {
            if id == TOKEN_NULL {
                return;
            }
            if let Some(text) = self.token_text(id) {
                ggml::log_info!("print_info: {:<22}= {} '{}'\n", name, id, text);
            }
        };
        line("BOS token", s.bos);
        line("EOS token", s.eos);
        line("EOT token", s.eot);
        line("EOM token", s.eom);
        line("UNK token", s.unk);
        line("SEP token", s.sep);
        line("PAD token", s.pad);
        line("MASK token", s.mask);
        line("LF token", s.linefeed);
        line("FIM PRE token", s.fim_pre);
        line("FIM SUF token", s.fim_suf);
        line("FIM MID token", s.fim_mid);
        line("FIM PAD token", s.fim_pad);
        line("FIM REP token", s.fim_rep);
        line("FIM SEP token", s.fim_sep);
        for &id in &self.eog {
            line("EOG token", id);
        }
        ggml::log_info!(
            "print_info: max token length      = {}\n",
            self.max_token_len
        );
    }
}
