//! llama-completion: text completion with llama.cpp's flags, log and output. The prompt and the
//! generated text go to stdout, everything else to stderr through the common logger.

mod chat;
mod display;
mod interrupt;
mod session;
mod user_input;

use std::time::Instant;

use common::args::{self, ConversationMode, Example, Params, ParseOutput};
use common::startup::{self, token_to_piece, SamplerTimes, VocabText};
use common::{log_cnt, log_dbg, log_err, log_inf, log_out, log_wrn};
use llama::grammar::GrammarError;
use llama::sampling::{sample_with_grammar, Chain, GrammarSampler, Sampler};
use llama::vocab::Vocab;
use llama::Context;

const F: &str = "llama_completion";

fn print_usage(out: &mut dyn ParseOutput) {
    let exe = std::env::args()
        .next()
        .unwrap_or_else(|| "llama-completion".into());
    out.out(&format!(
        "\nexample usage:\n\n  text generation:     {exe} -m your_model.gguf -p \"I believe the meaning of life is\" -n 128 -no-cnv\n\n  chat (conversation): {exe} -m your_model.gguf -sys \"You are a helpful assistant\"\n\n"
    ));
}

fn main() {
    std::process::exit(run());
}

/// `common_sampler`: the chain, the grammar kept beside it, the accepted history and the time
/// spent sampling.
struct Sampling {
    chain: Chain,
    grmr: Option<GrammarSampler>,
    prev: Vec<i32>,
    n_prev: usize,
    t_total: std::time::Duration,
}

impl Sampling {
    fn sample(&mut self, ctx: &Context) -> Option<i32> {
        let t0 = Instant::now();
        let logits = ctx.get_logits_ith(-1)?;
        let id = sample_with_grammar(&mut self.chain, self.grmr.as_ref(), logits, false);
        self.t_total += t0.elapsed();
        id
    }

    /// `common_sampler_accept`: generated tokens advance the grammar too, prompt tokens only
    /// the chain. Fails where llama.cpp's grammar throws (no way left to continue).
    fn accept(&mut self, id: i32, accept_grammar: bool) -> Result<(), GrammarError> {
        let t0 = Instant::now();
        if accept_grammar {
            if let Some(g) = &mut self.grmr {
                g.accept(id)?;
            }
        }
        self.chain.accept(id);
        if self.prev.len() == self.n_prev {
            self.prev.remove(0);
        }
        self.prev.push(id);
        self.t_total += t0.elapsed();
        Ok(())
    }

    fn last(&self) -> Option<i32> {
        self.prev.last().copied()
    }

    /// `common_sampler_prev_str`: the text of the last n accepted tokens.
    fn prev_str(&self, vocab: &Vocab, n: usize) -> String {
        let n = n.min(self.prev.len());
        self.prev[self.prev.len() - n..]
            .iter()
            .map(|&id| token_to_piece(vocab, id, true))
            .collect()
    }

    fn times(&self) -> SamplerTimes {
        SamplerTimes {
            chain: self.chain.perf(),
            t_sampling_ms: self.t_total.as_secs_f64() * 1e3,
        }
    }
}

fn tokenize(vocab: &Vocab, text: &str, add_special: bool, parse_special: bool) -> Vec<i32> {
    vocab.tokenize(text.as_bytes(), add_special, parse_special)
}

fn run() -> i32 {
    // the parser needs the backends (ggml_backend_load_all in common_params_parser_init)
    llama::backend_init();
    let env = args::ParseEnv::detect();
    let mut params = args::parse_or_exit(Example::Completion, &env, Some(&print_usage));
    common::log::init();
    args::apply_log_settings(&params);

    if params.n_ctx != 0 && params.n_ctx < 8 {
        log_wrn!("{F}: warning: minimum context size is 8, using minimum size.\n");
        params.n_ctx = 8;
    }
    if params.rope_freq_base != 0.0 {
        log_wrn!(
            "{F}: warning: changing RoPE frequency base to {}.\n",
            common::startup::fmt_g(params.rope_freq_base as f64)
        );
    }
    if params.rope_freq_scale != 0.0 {
        log_wrn!(
            "{F}: warning: scaling RoPE frequency by {}.\n",
            common::startup::fmt_g(params.rope_freq_scale as f64)
        );
    }

    log_inf!("{F}: llama backend init\n");

    log_inf!("{F}: load the model and apply lora adapter, if any\n");
    let startup::Loaded { model, mut ctx } = match startup::init_from_params(&mut params) {
        Ok(l) => l,
        Err(_) => {
            log_err!("{F}: error: unable to create context\n");
            return 1;
        }
    };
    let vocab: &Vocab = model.vocab();
    let Ok(template) = chat::Template::init(&model, &params) else {
        return 1;
    };
    chat::warn_unused_reasoning_flags(&params);

    // timings start here, after loading and warmup
    ctx.perf_reset();

    let n_ctx_train = model.n_ctx_train() as i32;
    let n_ctx = ctx.n_ctx() as i32;
    if n_ctx > n_ctx_train {
        log_wrn!(
            "{F}: model was trained on only {n_ctx_train} context tokens ({n_ctx} specified)\n"
        );
    }

    let has_chat_template = template.was_explicit();
    if params.conversation_mode == ConversationMode::Auto {
        if has_chat_template {
            log_inf!("{F}: chat template is available, enabling conversation mode (disable it with -no-cnv)\n");
            params.conversation_mode = ConversationMode::Enabled;
        } else {
            params.conversation_mode = ConversationMode::Disabled;
        }
    }
    let conversation = params.conversation_mode == ConversationMode::Enabled;
    if conversation && !has_chat_template {
        log_wrn!("{F}: chat template is not available or is not supported. This may cause the model to output suboptimal responses\n");
    }
    if conversation {
        if params.enable_chat_template {
            if !params.prompt.is_empty() && params.system_prompt.is_empty() {
                log_wrn!("*** User-specified prompt will pre-start conversation, did you mean to set --system-prompt (-sys) instead?\n");
            }
            match template.example() {
                Ok(ex) => log_inf!("{F}: chat template example:\n{ex}\n"),
                Err(e) => {
                    log_err!("{F}: error: failed to apply the chat template: {e}\n");
                    return 1;
                }
            }
        } else {
            log_inf!("{F}: in-suffix/prefix is specified, chat template will be disabled\n");
        }
    }

    log_inf!("\n");
    log_inf!("{}\n", startup::system_info(&params));
    log_inf!("\n");

    let mut session =
        match session::Session::open(&params.path_prompt_cache, &mut ctx, n_ctx as usize) {
            Ok(s) => s,
            Err(()) => return 1,
        };

    let add_bos = vocab.add_bos() && !params.use_jinja;
    log_dbg!("n_ctx: {}, add_bos: {}\n", n_ctx, add_bos as i32);

    let mut chat_msgs: Vec<chat::Message> = Vec::new();
    let mut waiting_for_first_input = false;
    let mut prompt = String::new();
    if conversation && params.enable_chat_template {
        if !params.system_prompt.is_empty() {
            chat_msgs.push(chat::Message::new("system", &params.system_prompt));
        }
        if !params.prompt.is_empty() {
            chat_msgs.push(chat::Message::new("user", &params.prompt));
        } else {
            waiting_for_first_input = true;
        }
        if !params.system_prompt.is_empty() || !params.prompt.is_empty() {
            prompt = match template.apply(&chat_msgs, !params.prompt.is_empty()) {
                Ok(p) => p,
                Err(e) => {
                    log_err!("{F}: error: failed to apply the chat template: {e}\n");
                    return 1;
                }
            };
        }
    } else {
        prompt = params.prompt.clone();
    }
    let mut embd_inp =
        if params.interactive_first || !prompt.is_empty() || session.loaded_tokens().is_empty() {
            tokenize(vocab, &prompt, true, true)
        } else {
            log_dbg!("use session tokens\n");
            session.loaded_tokens().to_vec()
        };
    log_dbg!("prompt: \"{}\"\n", prompt);

    if !waiting_for_first_input && embd_inp.is_empty() {
        if add_bos {
            embd_inp.push(vocab.bos());
            log_wrn!(
                "embd_inp was considered empty and bos was added: {}\n",
                string_from(vocab, &embd_inp)
            );
        } else {
            log_err!("input is empty\n");
            return -1;
        }
    }

    if embd_inp.len() as i32 > n_ctx - 4 {
        log_err!(
            "{F}: prompt is too long ({} tokens, max {})\n",
            embd_inp.len(),
            n_ctx - 4
        );
        return 1;
    }

    if session
        .match_prompt(
            &mut ctx,
            &embd_inp,
            params.prompt.is_empty(),
            params.prompt_cache_ro,
        )
        .is_err()
    {
        return 1;
    }

    if params.n_keep < 0 || params.n_keep > embd_inp.len() as i32 {
        params.n_keep = embd_inp.len() as i32;
    } else {
        params.n_keep += add_bos as i32;
    }

    if conversation {
        if params.single_turn && !params.prompt.is_empty() {
            params.interactive = false;
            params.interactive_first = false;
        } else {
            params.interactive_first = true;
        }
    }
    if params.interactive_first {
        params.interactive = true;
    }

    if params.verbose_prompt {
        log_inf!("{F}: prompt: '{}'\n", params.prompt);
        log_inf!("{F}: number of tokens in prompt = {}\n", embd_inp.len());
        for &t in &embd_inp {
            log_inf!("{:6} -> '{}'\n", t, token_to_piece(vocab, t, true));
        }
        if params.n_keep > add_bos as i32 {
            log_inf!("{F}: static prompt based on n_keep: '");
            for &t in &embd_inp[..params.n_keep as usize] {
                log_cnt!("{}", token_to_piece(vocab, t, true));
            }
            log_cnt!("'\n");
        }
        log_inf!("\n");
    }

    // where llama.cpp installs its handler; the abort callback lets Ctrl+C stop a long prompt
    interrupt::install();
    ctx.set_abort_callback(Some(interrupt::abort_callback()));

    if params.interactive {
        log_inf!("{F}: interactive mode on.\n");
        for a in &params.antiprompt {
            log_inf!("Reverse prompt: '{}'\n", a);
            if params.verbose_prompt {
                for t in tokenize(vocab, a, false, true) {
                    log_inf!("{:6} -> '{}'\n", t, token_to_piece(vocab, t, true));
                }
            }
        }
        if params.input_prefix_bos {
            log_inf!("Input prefix with BOS\n");
        }
        if !params.input_prefix.is_empty() {
            log_inf!("Input prefix: '{}'\n", params.input_prefix);
            if params.verbose_prompt {
                for t in tokenize(vocab, &params.input_prefix, true, true) {
                    log_inf!("{:6} -> '{}'\n", t, token_to_piece(vocab, t, true));
                }
            }
        }
        if !params.input_suffix.is_empty() {
            log_inf!("Input suffix: '{}'\n", params.input_suffix);
            if params.verbose_prompt {
                for t in tokenize(vocab, &params.input_suffix, false, true) {
                    log_inf!("{:6} -> '{}'\n", t, token_to_piece(vocab, t, true));
                }
            }
        }
    }

    let chain = match params.sampling.build_chain(&VocabText(vocab), n_ctx_train) {
        Ok(c) => c,
        Err(e) => {
            log_err!("{F}: error: failed to initialize sampling subsystem: {e}\n");
            return 1;
        }
    };
    let grmr = match params.sampling.build_grammar(vocab) {
        Ok(g) => g,
        Err(e) => {
            log_err!("{F}: error: {e}\n");
            return 1;
        }
    };
    if grmr.is_some() && params.backend_sampling {
        log_wrn!(
            "common_sampler_init: backend sampling is not compatible with grammar, disabling\n"
        );
        params.backend_sampling = false;
    }
    let mut smpl = Sampling {
        chain,
        grmr,
        prev: Vec::new(),
        n_prev: params.sampling.n_prev.max(32) as usize,
        t_total: Default::default(),
    };

    log_inf!("sampler seed: {}\n", smpl.chain.seed());
    log_inf!("sampler params: \n{}\n", params.sampling.print());
    log_inf!("sampler chain: {}\n", smpl.chain.describe());
    log_inf!(
        "generate: n_ctx = {}, n_batch = {}, n_predict = {}, n_keep = {}\n",
        n_ctx,
        params.n_batch,
        params.n_predict,
        params.n_keep
    );
    let ga_n = params.grp_attn_n;
    let ga_w = params.grp_attn_w;
    if ga_n != 1 {
        if ga_n <= 0 || ga_w % ga_n != 0 {
            log_err!("{F}: error: grp_attn_w ({ga_w}) must be a positive multiple of grp_attn_n ({ga_n})\n");
            return 1;
        }
        log_inf!(
            "self-extend: n_ctx_train = {n_ctx_train}, grp_attn_n = {ga_n}, grp_attn_w = {ga_w}\n"
        );
    }
    log_inf!("\n");

    if params.interactive {
        log_inf!("== Running in interactive mode. ==\n");
        log_inf!(" - Press Ctrl+C to interject at any time.\n");
        if params.multiline_input {
            log_inf!(" - To return control to the AI, end your input with '\\'.\n - To return control without starting a new line, end your input with '/'.\n");
        } else {
            log_inf!(" - Press Return to return control to the AI.\n - To return control without starting a new line, end your input with '/'.\n - If you want to submit another line, end your input with '\\'.\n");
        }
        if conversation && params.enable_chat_template && params.system_prompt.is_empty() {
            log_inf!(" - Not using system message. To change it, set a different value via -sys PROMPT\n");
        }
        log_inf!("\n");
    }

    let loop_state = Loop {
        params: &mut params,
        ctx: &mut ctx,
        vocab,
        smpl: &mut smpl,
        template: &template,
        chat_msgs,
        embd_inp,
        n_ctx,
        waiting_for_first_input,
        conversation,
        session: &mut session,
        prompt,
    };
    if let Err(code) = loop_state.run() {
        return code;
    }

    log_out!("\n\n");
    startup::perf_print(&ctx, Some(&smpl.times()));
    0
}

/// Generated text goes to stdout as the bytes of each token, and a character can be split
/// across two tokens: complete characters are written at once, an unfinished one waits for the
/// next token, and bytes that can never form one are written as U+FFFD.
#[derive(Default)]
struct Utf8Out {
    pending: Vec<u8>,
}

impl Utf8Out {
    fn bytes(&mut self, b: &[u8]) {
        let text = self.feed(b);
        if !text.is_empty() {
            log_out!("{text}");
        }
    }

    /// The text that `b` completes.
    fn feed(&mut self, b: &[u8]) -> String {
        self.pending.extend_from_slice(b);
        let mut text = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    text.push_str(s);
                    self.pending.clear();
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    text.push_str(std::str::from_utf8(&self.pending[..valid]).unwrap_or_default());
                    match e.error_len() {
                        None => {
                            self.pending.drain(..valid);
                            break;
                        }
                        Some(n) => {
                            text.push('\u{FFFD}');
                            self.pending.drain(..valid + n);
                        }
                    }
                }
            }
        }
        text
    }

    /// Other output: whatever is pending first.
    fn text(&mut self, s: &str) {
        self.flush();
        log_out!("{s}");
    }

    fn flush(&mut self) {
        if !self.pending.is_empty() {
            let s = String::from_utf8_lossy(&self.pending).into_owned();
            self.pending.clear();
            log_out!("{s}");
        }
    }
}

/// `string_from`: "[ 'piece':id, ... ]" for debug lines.
fn string_from(vocab: &Vocab, tokens: &[i32]) -> String {
    let items: Vec<String> = tokens
        .iter()
        .map(|&t| {
            let piece = token_to_piece(vocab, t, true).replace('\n', "\\n");
            format!("'{piece}':{t}")
        })
        .collect();
    format!("[ {} ]", items.join(", "))
}

/// The generation loop of completion.cpp, with its state.
struct Loop<'a> {
    params: &'a mut Params,
    ctx: &'a mut Context,
    vocab: &'a Vocab,
    smpl: &'a mut Sampling,
    template: &'a chat::Template,
    chat_msgs: Vec<chat::Message>,
    embd_inp: Vec<i32>,
    n_ctx: i32,
    waiting_for_first_input: bool,
    conversation: bool,
    session: &'a mut session::Session,
    prompt: String,
}

impl Loop<'_> {
    /// A Ctrl+C that stops the run: the timings and "Interrupted by user", status 130, as
    /// completion.cpp's handler does (it also skips saving the session).
    fn stop_interrupted(&self, out: &mut Utf8Out) -> ! {
        out.text("\n");
        startup::perf_print(self.ctx, Some(&self.smpl.times()));
        log_out!("Interrupted by user\n");
        std::process::exit(130);
    }

    fn run(mut self) -> Result<(), i32> {
        let vocab = self.vocab;
        let n_ctx = self.n_ctx;
        let ga_n = self.params.grp_attn_n;
        let ga_w = self.params.grp_attn_w;
        let mut ga_i = 0;
        let mut is_interacting = self.params.interactive_first;
        let mut is_antiprompt = false;
        let mut input_echo = true;
        let mut display = self.params.display_prompt;
        let mut n_past: i32 = 0;
        let mut n_remain = self.params.n_predict;
        let mut n_consumed = 0usize;
        let mut embd: Vec<i32> = Vec::new();
        let mut assistant = String::new();
        let mut need_insert_eot = false;
        let mut out = Utf8Out::default();
        // the first thing written is the prompt: its colour
        let mut colors = display::Display::new(self.params.use_color, self.params.simple_io);
        if let Some(esc) = colors.set(display::Kind::Prompt) {
            out.text(esc);
        }
        let format_chat = self.conversation && self.params.enable_chat_template;

        let antiprompt_token: Vec<i32> = self
            .params
            .antiprompt
            .iter()
            .filter_map(|a| {
                let ids = tokenize(vocab, a, false, true);
                (ids.len() == 1).then(|| ids[0])
            })
            .collect();

        let mut user_input = user_input::Reader::new(self.params.simple_io);
        while (n_remain != 0 && !is_antiprompt) || self.params.interactive {
            if interrupt::take_interject() {
                is_interacting = true;
                need_insert_eot = true;
            }
            if interrupt::stop_requested() {
                self.stop_interrupted(&mut out);
            }
            interrupt::arm_interject(self.params.interactive && !is_interacting);
            if !embd.is_empty() {
                let max_embd_size = (n_ctx - 4).max(0) as usize;
                if embd.len() > max_embd_size {
                    let skipped = embd.len() - max_embd_size;
                    embd.truncate(max_embd_size);
                    log_wrn!(
                        "<<input too long: skipped {} token{}>>",
                        skipped,
                        if skipped != 1 { "s" } else { "" }
                    );
                }
                if ga_n == 1 {
                    if n_past + embd.len() as i32 >= n_ctx {
                        if !self.params.ctx_shift {
                            log_wrn!(
                                "\n\n{F}: context full and context shift is disabled => stopping\n"
                            );
                            break;
                        }
                        if self.params.n_predict == -2 {
                            log_wrn!(
                                "\n\n{F}: context full and n_predict == {} => stopping\n",
                                self.params.n_predict
                            );
                            break;
                        }
                        let n_keep = self.params.n_keep;
                        let n_left = n_past - n_keep;
                        let n_discard = n_left / 2;
                        log_dbg!(
                            "context full, swapping: n_past = {}, n_left = {}, n_ctx = {}, n_keep = {}, n_discard = {}\n",
                            n_past, n_left, n_ctx, n_keep, n_discard
                        );
                        self.ctx.memory_seq_rm(0, n_keep, n_keep + n_discard);
                        self.ctx
                            .memory_seq_add(0, n_keep + n_discard, n_past, -n_discard);
                        n_past -= n_discard;
                        log_dbg!("after swap: n_past = {}\n", n_past);
                        self.session.disable();
                    }
                } else {
                    while n_past >= ga_i + ga_w {
                        let ib = (ga_n * ga_i) / ga_w;
                        let bd = (ga_w / ga_n) * (ga_n - 1);
                        let dd = (ga_w / ga_n) - ib * bd - ga_w;
                        self.ctx.memory_seq_add(0, ga_i, n_past, ib * bd);
                        self.ctx
                            .memory_seq_div(0, ga_i + ib * bd, ga_i + ib * bd + ga_w, ga_n);
                        self.ctx
                            .memory_seq_add(0, ga_i + ib * bd + ga_w, n_past + ib * bd, dd);
                        n_past -= bd;
                        ga_i += ga_w / ga_n;
                    }
                }

                n_past += self.session.reuse_prefix(&mut embd) as i32;

                if !embd.is_empty() {
                    log_dbg!("eval: {}\n", string_from(vocab, &embd));
                    let is_last_batch = n_consumed >= self.embd_inp.len();
                    if let Err(rc) = self.session.decode(self.ctx, &embd, is_last_batch) {
                        if rc == 2 && interrupt::stop_requested() {
                            self.stop_interrupted(&mut out);
                        }
                        return Err(1);
                    }
                    n_past += embd.len() as i32;
                    log_dbg!("n_past = {}\n", n_past);
                    if self.params.n_print > 0 && n_past % self.params.n_print == 0 {
                        log_dbg!(
                            "\n\x1b[31mTokens consumed so far = {} / {} \x1b[0m\n",
                            n_past,
                            n_ctx
                        );
                    }
                }
            }

            embd.clear();

            if self.embd_inp.len() <= n_consumed && !is_interacting {
                let Some(id) = self.smpl.sample(self.ctx) else {
                    log_err!(
                        "{F}: error: no token was selected - check your sampling configuration\n"
                    );
                    return Err(1);
                };
                if let Err(e) = self.smpl.accept(id, true) {
                    log_err!("{F}: error: {e}\n");
                    return Err(1);
                }
                embd.push(id);
                if self.conversation && !self.waiting_for_first_input && !vocab.is_eog(id) {
                    assistant.push_str(&token_to_piece(vocab, id, false));
                }
                input_echo = true;
                n_remain -= 1;
                log_dbg!("n_remain: {}\n", n_remain);
            } else {
                while self.embd_inp.len() > n_consumed {
                    let t = self.embd_inp[n_consumed];
                    embd.push(t);
                    // prompt tokens feed the repetition penalties too, not the grammar
                    let _ = self.smpl.accept(t, false);
                    n_consumed += 1;
                    if embd.len() as i32 == self.params.n_batch {
                        break;
                    }
                }
            }

            if input_echo && display {
                for &id in &embd {
                    out.bytes(&vocab.token_to_piece(id, 0, self.params.special));
                }
            }
            if input_echo && self.embd_inp.len() == n_consumed {
                if let Some(esc) = colors.set(display::Kind::Reset) {
                    out.text(esc);
                }
                display = true;
            }

            if self.embd_inp.len() <= n_consumed {
                if !self.params.antiprompt.is_empty() {
                    let last_output = self.smpl.prev_str(vocab, 32);
                    is_antiprompt = false;
                    let extra = if self.params.interactive { 0 } else { 2 };
                    for a in &self.params.antiprompt {
                        let start = last_output.len().saturating_sub(a.len() + extra);
                        if last_output.as_bytes()[start..]
                            .windows(a.len().max(1))
                            .any(|w| w == a.as_bytes())
                        {
                            if self.params.interactive {
                                is_interacting = true;
                            }
                            is_antiprompt = true;
                            break;
                        }
                    }
                    if !last_output.is_empty() {
                        if let Some(last) = self.smpl.last() {
                            if antiprompt_token.contains(&last) {
                                if self.params.interactive {
                                    is_interacting = true;
                                }
                                is_antiprompt = true;
                            }
                        }
                    }
                    if is_antiprompt {
                        log_dbg!("found antiprompt: {}\n", last_output);
                    }
                }

                if !self.waiting_for_first_input
                    && self.smpl.last().is_some_and(|t| vocab.is_eog(t))
                {
                    log_dbg!("found an EOG token\n");
                    if self.params.interactive {
                        if let Some(first) = self.params.antiprompt.first() {
                            self.embd_inp.extend(tokenize(vocab, first, false, true));
                            is_antiprompt = true;
                        }
                        if self.params.enable_chat_template {
                            self.chat_msgs
                                .push(chat::Message::new("assistant", &assistant));
                        }
                        is_interacting = true;
                        out.text("\n");
                    }
                }

                if self.conversation && !self.waiting_for_first_input && !self.prompt.is_empty() {
                    self.prompt.clear();
                    is_interacting = false;
                }

                if (n_past > 0 || self.waiting_for_first_input) && is_interacting {
                    log_dbg!("waiting for user input\n");
                    if self.conversation {
                        out.text("\n> ");
                    }
                    if self.params.input_prefix_bos {
                        self.embd_inp.push(vocab.bos());
                    }
                    if !self.params.input_prefix.is_empty() && !self.conversation {
                        out.text(&self.params.input_prefix);
                    }
                    // waiting for the user, a Ctrl+C stops the run
                    interrupt::arm_interject(false);
                    if let Some(esc) = colors.set(display::Kind::UserInput) {
                        out.text(esc);
                    }
                    let read = user_input.read(self.params.multiline_input);
                    let echo = user_input.take_echo();
                    if !echo.is_empty() {
                        out.text(&echo);
                    }
                    if let Some(esc) = colors.set(display::Kind::Reset) {
                        out.text(esc);
                    }
                    let mut buffer = match read {
                        user_input::Input::Text(t) => t,
                        user_input::Input::Eof => {
                            out.text("EOF by user\n");
                            break;
                        }
                        user_input::Input::Interrupted => self.stop_interrupted(&mut out),
                    };
                    if buffer.ends_with('\n') {
                        buffer.pop();
                    }
                    if buffer.is_empty() {
                        log_dbg!("empty line, passing control back\n");
                    } else {
                        if !self.params.input_suffix.is_empty() && !self.conversation {
                            out.text(&self.params.input_suffix);
                        }
                        let original_size = self.embd_inp.len();
                        if self.params.escape {
                            buffer = args::util::process_escapes(&buffer);
                        }
                        let user_inp = if format_chat {
                            let formatted =
                                match self
                                    .template
                                    .format_single(&self.chat_msgs, "user", &buffer)
                                {
                                    Ok(f) => f,
                                    Err(e) => {
                                        log_err!(
                                            "{F}: error: failed to apply the chat template: {e}\n"
                                        );
                                        return Err(1);
                                    }
                                };
                            self.chat_msgs.push(chat::Message::new("user", &buffer));
                            formatted
                        } else {
                            buffer
                        };
                        // an interrupted answer is closed before the next user turn
                        if need_insert_eot && format_chat {
                            let eot = vocab.eot();
                            self.embd_inp.push(if eot == llama::vocab::TOKEN_NULL {
                                vocab.eos()
                            } else {
                                eot
                            });
                            need_insert_eot = false;
                        }
                        let line_pfx = tokenize(vocab, &self.params.input_prefix, false, true);
                        let line_inp = tokenize(vocab, &user_inp, false, format_chat);
                        let line_sfx = tokenize(vocab, &self.params.input_suffix, false, true);
                        self.embd_inp.extend(&line_pfx);
                        self.embd_inp.extend(&line_inp);
                        self.embd_inp.extend(&line_sfx);
                        if self.params.verbose_prompt {
                            log_inf!(
                                "{F}: number of tokens in prompt = {}\n",
                                self.embd_inp.len() - original_size
                            );
                            for &t in &self.embd_inp[original_size..] {
                                log_inf!("{:6} -> '{}'\n", t, token_to_piece(vocab, t, true));
                            }
                        }
                        assistant.clear();
                        n_remain -= line_inp.len() as i32;
                    }
                    input_echo = false;
                }

                if n_past > 0 || self.waiting_for_first_input {
                    if is_interacting {
                        self.smpl.chain.reset();
                    }
                    is_interacting = false;
                    if self.waiting_for_first_input && self.params.single_turn {
                        self.params.interactive = false;
                        self.params.interactive_first = false;
                    }
                    self.waiting_for_first_input = false;
                }
            }

            if embd.last().is_some_and(|&t| vocab.is_eog(t)) && !self.params.interactive {
                out.text(" [end of text]\n");
                break;
            }

            if self.params.interactive && n_remain <= 0 && self.params.n_predict >= 0 {
                n_remain = self.params.n_predict;
                is_interacting = true;
            }
        }
        // console::cleanup
        if let Some(esc) = colors.set(display::Kind::Reset) {
            out.text(esc);
        }
        out.flush();
        self.session.finish(
            self.ctx,
            self.params.prompt_cache_all && !self.params.prompt_cache_ro,
            &embd,
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Utf8Out;

    #[test]
    fn characters_split_across_tokens_are_joined() {
        let mut o = Utf8Out::default();
        let e = "é".as_bytes();
        assert_eq!(o.feed(b"ab"), "ab");
        assert_eq!(o.feed(&e[..1]), "");
        assert_eq!(o.feed(&e[1..]), "é");
        // a byte that can never start a character is replaced at once
        assert_eq!(o.feed(&[b'x', 0xff, b'y']), "x\u{FFFD}y");
        // a 4-byte character in three pieces
        let g = "😀".as_bytes();
        assert_eq!(o.feed(&g[..1]), "");
        assert_eq!(o.feed(&g[1..3]), "");
        assert_eq!(o.feed(&g[3..]), "😀");
    }
}
