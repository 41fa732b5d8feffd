//! `--prompt-cache FILE` as completion.cpp runs it: the session file's tokens and KV state are
//! loaded at start, the part of the prompt they match is not evaluated again (its last token is
//! replayed, since logits are not part of the state), and the state is saved just before the
//! prompt's last token (`--prompt-cache-ro`: never saved; `--prompt-cache-all`: saved once
//! more at the end, with the generated tokens).

use common::{log_err, log_inf, log_out, log_wrn};
use llama::{Batch, Context};
use std::path::Path;

const F: &str = "llama_completion";

pub struct Session {
    path: String,
    /// every token the context has evaluated, starting with the loaded ones
    tokens: Vec<i32>,
    consumed: usize,
    do_save: bool,
}

impl Session {
    /// The start-of-run part of completion.cpp: load the file when there is one.
    pub fn open(path: &str, ctx: &mut Context, n_ctx: usize) -> Result<Session, ()> {
        let mut tokens = Vec::new();
        if !path.is_empty() {
            log_inf!("{F}: attempting to load saved session from '{path}'\n");
            match std::fs::metadata(path) {
                Err(_) => log_inf!("{F}: session file does not exist, will create.\n"),
                Ok(m) if m.len() == 0 => {
                    log_inf!("{F}: The session file is empty. A new session will be initialized.\n")
                }
                Ok(_) => match ctx.state_load_file(Path::new(path), n_ctx) {
                    Ok(t) => {
                        tokens = t;
                        log_inf!(
                            "{F}: loaded a session with prompt size of {} tokens\n",
                            tokens.len()
                        );
                    }
                    Err(e) => {
                        log_err!("llama_state_load_file: error loading session file: {e}\n");
                        log_err!("{F}: failed to load session file '{path}'\n");
                        return Err(());
                    }
                },
            }
        }
        Ok(Session {
            path: path.to_string(),
            tokens,
            consumed: 0,
            do_save: false,
        })
    }

    /// The loaded tokens stand for the prompt when none is given.
    pub fn loaded_tokens(&self) -> &[i32] {
        &self.tokens
    }

    /// Compares the loaded tokens with the prompt, drops the cached part that does not match
    /// and replays the last matching token (completion.cpp, before generation starts).
    pub fn match_prompt(
        &mut self,
        ctx: &mut Context,
        embd_inp: &[i32],
        prompt_empty: bool,
        read_only: bool,
    ) -> Result<(), ()> {
        let mut n_match = 0;
        if !self.tokens.is_empty() {
            n_match = self
                .tokens
                .iter()
                .zip(embd_inp)
                .take_while(|(a, b)| a == b)
                .count();
            if prompt_empty && n_match == embd_inp.len() {
                log_inf!("{F}: using full prompt from session file\n");
            } else if n_match >= embd_inp.len() {
                log_inf!("{F}: session file has exact match for prompt!\n");
            } else if n_match < embd_inp.len() / 2 {
                log_wrn!("{F}: session file has low similarity to prompt ({} / {} tokens); will mostly be reevaluated\n", n_match, embd_inp.len());
            } else {
                log_inf!(
                    "{F}: session file matches {} / {} tokens of prompt\n",
                    n_match,
                    embd_inp.len()
                );
            }
            if self.tokens.len() > n_match {
                let pos = n_match.saturating_sub(1) as i32;
                if !ctx.memory_seq_rm(-1, pos, -1) {
                    log_wrn!("{F}: unable to reuse common prefix (for example, when the memory is recurrent)\n");
                    ctx.memory_clear(true);
                    self.tokens.clear();
                    n_match = 0;
                } else {
                    self.tokens.truncate(n_match);
                }
            }
        }
        self.do_save = !self.path.is_empty() && n_match < embd_inp.len() && !read_only;
        if !self.tokens.is_empty() && n_match > 0 && n_match == self.tokens.len() {
            let mut b = Batch::new();
            b.add(self.tokens[n_match - 1], n_match as i32 - 1, &[0], true);
            if ctx.decode(&b) != 0 {
                log_err!("common_replay_last_token: failed to replay last token\n");
                return Err(());
            }
            self.do_save = false;
            log_inf!("{F}: replayed last token from session\n");
        }
        Ok(())
    }

    /// Removes from `embd` the leading tokens the loaded state already holds; returns how many.
    pub fn reuse_prefix(&mut self, embd: &mut Vec<i32>) -> usize {
        if self.consumed >= self.tokens.len() {
            return 0;
        }
        let mut i = 0;
        while i < embd.len() {
            if embd[i] != self.tokens[self.consumed] {
                self.tokens.truncate(self.consumed);
                break;
            }
            self.consumed += 1;
            i += 1;
            if self.consumed >= self.tokens.len() {
                break;
            }
        }
        embd.drain(..i);
        i
    }

    /// common_prompt_batch_decode: evaluates `embd`; on the prompt's last batch of a run that
    /// saves, everything but its last token first, then the state, then that token.
    pub fn decode(
        &mut self,
        ctx: &mut Context,
        embd: &[i32],
        is_last_batch: bool,
    ) -> Result<(), i32> {
        let save_now = self.do_save && is_last_batch;
        self.tokens.extend_from_slice(embd);
        self.consumed += embd.len();
        if save_now {
            self.do_save = false;
        }
        if save_now && embd.len() > 1 {
            let (head, last) = embd.split_at(embd.len() - 1);
            let rc = ctx.decode(&Batch::get_one(head));
            if rc != 0 {
                log_err!("cmn  common_promp: failed to eval\n");
                return Err(rc);
            }
            self.save(ctx);
            log_inf!(
                "cmn  common_promp: saved session before last token to {}, n_new = {}\n",
                self.path,
                self.tokens.len()
            );
            let rc = ctx.decode(&Batch::get_one(last));
            if rc != 0 {
                log_err!("cmn  common_promp: failed to eval last token\n");
                return Err(rc);
            }
            return Ok(());
        }
        let rc = ctx.decode(&Batch::get_one(embd));
        if rc != 0 {
            log_err!("cmn  common_promp: failed to eval\n");
            return Err(rc);
        }
        Ok(())
    }

    fn save(&self, ctx: &Context) {
        if let Err(e) = ctx.state_save_file(Path::new(&self.path), &self.tokens) {
            log_err!("llama_state_save_file: error saving session file: {e}\n");
        }
    }

    /// Context shifting invalidates the cache (`path_session.clear()`).
    pub fn disable(&mut self) {
        self.path.clear();
    }

    /// `--prompt-cache-all`: the end of the run saves the generated tokens too; `pending` is
    /// the sampled token not yet evaluated.
    pub fn finish(&mut self, ctx: &Context, save_all: bool, pending: &[i32]) {
        if self.path.is_empty() || !save_all {
            return;
        }
        log_out!(
            "\n{F}: saving final output to session file '{}'\n",
            self.path
        );
        self.tokens.extend_from_slice(pending);
        self.save(ctx);
        log_inf!(
            "saved final session to {}, n_tokens = {}\n",
            self.path,
            self.tokens.len()
        );
    }
}
