//! Fuzz the GBNF grammar parser and matcher (`llama::grammar`, what --grammar / --grammar-file
//! build) and the JSON-schema-to-grammar converter (`common::json_schema`, -j / -jf).
//!
//! Input: a selector byte, then the source (grammar text, or schema text with bit 0 set), a
//! NUL, then the feed. Where the source builds a grammar over a small synthetic vocabulary,
//! the feed drives it: each feed byte picks a token (bit 1 clear: masked with `apply` first)
//! or, with bit 1 set, the feed is taken as text (`accept_str`, a byte at a time). With bits
//! 2-4 all set the grammar is lazy, triggered by token 257 or the pattern "x", and built by
//! `Grammar::new` as the tools build theirs; the others are built from the parsed rules with
//! the vocabulary's pieces made once, so that an input costs its grammar, not the vocabulary.
//! At most `MAX_STEPS` steps, so an input costs a bounded number of matcher steps; and the
//! matcher is driven only while its work per step is bounded: no rule longer than
//! `MAX_RULE_LEN` elements and at most `MAX_LIVE` stack positions before each step. Stack
//! matching (llama.cpp's algorithm, which ours keeps) compares each new stack with every live
//! one, so `("0x"?){654}` (654 skippable copies: hundreds of live stacks, hundreds of positions
//! deep) costs seconds per character, there as here. Such grammars are still parsed and
//! printed; the longest rule of llama.cpp's grammars and test cases has 34 elements.
//!
//! Invariants beyond "no panic": a schema that converts gives a grammar that parses and has
//! a `root` (or fails on a repetition count or a pattern, as llama.cpp's does); a parsed
//! grammar prints; a token that `apply` leaves unmasked, after tokens it left unmasked, is
//! accepted.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use llama::grammar::{parse, print_grammar, Grammar, GrammarTokens, GrammarVocab};
use llama::sampling::{TokenData, TokenDataArray};

const MAX_STEPS: usize = 8;
const MAX_RULE_LEN: usize = 128;
const MAX_LIVE: usize = 4096;

fn bounded(g: &Grammar) -> bool {
    g.stacks().iter().map(|s| s.len() + 1).sum::<usize>() <= MAX_LIVE
}

/// 256 single bytes, some words, a piece that ends inside a character, an empty piece, a
/// control token and EOG: what the matcher's UTF-8 and token paths need.
struct MiniVocab {
    pieces: Vec<Vec<u8>>,
}

const EOG: i32 = 256;

impl MiniVocab {
    fn new() -> Self {
        let mut pieces: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        pieces.push(b"</s>".to_vec());
        for w in [
            &b"<|tool_call|>"[..],
            &b""[..],
            &b"\xe2\x82"[..],
            &b"\xac"[..],
            &b"true"[..],
            &b"false"[..],
            &b"null"[..],
            &b"{\""[..],
            &b"\":"[..],
            &b" \""[..],
            &b"\","[..],
            &b"[1"[..],
            &b"aa"[..],
            &b"ab"[..],
            &b"\xc3\xa9"[..],
            &b"\xe6\x97\xa5\xe6\x9c\xac"[..],
            &b"\n\n"[..],
            &b"  "[..],
        ] {
            pieces.push(w.to_vec());
        }
        MiniVocab { pieces }
    }
}

impl GrammarVocab for MiniVocab {
    fn n_tokens(&self) -> usize {
        self.pieces.len()
    }
    fn piece(&self, id: i32) -> Vec<u8> {
        self.pieces.get(id as usize).cloned().unwrap_or_default()
    }
    fn is_eog(&self, id: i32) -> bool {
        id == EOG
    }
    fn tokenize_special(&self, text: &[u8]) -> Vec<i32> {
        match self.pieces.iter().position(|p| p == text) {
            Some(i) => vec![i as i32],
            None => text.iter().map(|&b| b as i32).collect(),
        }
    }
}

fn vocab() -> &'static MiniVocab {
    static V: OnceLock<MiniVocab> = OnceLock::new();
    V.get_or_init(|| {
        ggml::log::set_log_callback(Some(Box::new(|_, _| {})));
        MiniVocab::new()
    })
}

/// The vocabulary's pieces as the grammar keeps them, built once (`Grammar::new` builds them
/// for each grammar).
fn tokens() -> &'static Arc<GrammarTokens> {
    static T: OnceLock<Arc<GrammarTokens>> = OnceLock::new();
    T.get_or_init(|| Arc::new(GrammarTokens::from_vocab(vocab())))
}

fn drive(g: &mut Grammar, v: &MiniVocab, feed: &[u8], sel: u8) {
    let n = v.n_tokens();
    if sel & 2 != 0 {
        // a byte at a time (a character split over calls is the partial-UTF-8 state's job), so
        // the bound holds before each character: four characters of `root ::= [ab] root*{63}`
        // took minutes from a bounded state
        for byte in feed.chunks(1).take(4 * MAX_STEPS) {
            if !bounded(g) || g.accept_str(byte).is_err() {
                return;
            }
        }
        return;
    }
    let mut all_allowed = true;
    let ids: Vec<i32> = feed.iter().map(|&b| (b as usize % n) as i32).collect();
    for (step, &tok) in ids.iter().enumerate().take(MAX_STEPS) {
        if !bounded(g) {
            return;
        }
        if g.awaiting_trigger() {
            let _ = g.accept(tok);
            continue;
        }
        // the candidates are this token and the next few of the feed (the whole vocabulary
        // at each step would cost most of the run)
        let mut cur = TokenDataArray::from_logits(&[]);
        for &id in ids[step..].iter().take(8) {
            if !cur.data.iter().any(|d| d.id == id) {
                cur.data.push(TokenData {
                    id,
                    logit: 0.0,
                    p: 0.0,
                });
            }
        }
        g.apply(&mut cur).expect("the grammar has a vocabulary");
        let allowed = cur.data[0].logit.is_finite();
        let r = g.accept(tok);
        // only where every earlier token was allowed too: a masked one can leave a state
        // sampling never reaches (0xC0, masked as the start of an overlong form, then 0x80
        // completes a U+0000 that apply reads as the end of the piece)
        if allowed && all_allowed {
            assert!(
                r.is_ok(),
                "token {tok} was left unmasked by apply but not accepted: {r:?}"
            );
        }
        if r.is_err() {
            return;
        }
        all_allowed &= allowed;
    }
}

fn repetition_count_error(msg: &str) -> bool {
    msg.starts_with("expecting an int at -") || msg.contains("repetition") || msg.contains("stoull")
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let v = vocab();
    let (src, feed) = match rest.iter().position(|&b| b == 0) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let Ok(src) = std::str::from_utf8(src) else {
        return;
    };
    let gbnf = if sel & 1 != 0 {
        let Ok(g) = common::json_schema::json_schema_text_to_grammar(src) else {
            return;
        };
        match parse(&g, None) {
            Ok(parsed) => assert!(
                parsed.symbol_ids.contains_key("root"),
                "the converted schema has no root:\n{g}"
            ),
            // llama.cpp's converter writes a pattern's `{n,m}` as it reads it (`std::stoi`:
            // `{-9}` stays negative, `{5000}` stays large) and passes regex syntax it does not
            // check (`a||*b`) into the grammar; its grammar parser then refuses them, as ours
            // and `additionalProperties: false` writes the not-these-keys rule as one group per
            // character of the longest key, so a key of 512 characters or more passes the
            // parser's nesting bound (docs/grammar.md)
            Err(e) => assert!(
                repetition_count_error(&e.0)
                    || src.contains("\"pattern\"")
                    || e.0.starts_with("groups nest deeper than"),
                "the converted schema does not parse: {e}\n{g}"
            ),
        }
        g
    } else {
        src.to_string()
    };
    let Ok(parsed) = parse(&gbnf, Some(v)) else {
        return;
    };
    if !parsed.rules.is_empty() {
        print_grammar(&parsed).expect("a parsed grammar prints");
    }
    if parsed.rules.iter().any(|r| r.len() > MAX_RULE_LEN) {
        return;
    }
    let g = if sel & 0x1c == 0x1c {
        // lazy: the path the tools take, which reads the vocabulary's pieces again
        Grammar::new(Some(v), &gbnf, "root", true, &["x".into()], &[257])
    } else {
        let Some(&root) = parsed.symbol_ids.get("root") else {
            return;
        };
        Grammar::from_rules(Some(tokens().clone()), &parsed.rules, root as usize)
    };
    if let Ok(mut g) = g {
        drive(&mut g, v, feed, sel);
    }
});
