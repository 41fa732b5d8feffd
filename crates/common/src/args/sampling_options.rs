//! The sampling options (`set_sparam` in llama.cpp): every flag of common_params_sampling.

use super::opt::{Handler, Opt};
use super::options::read_file;
use super::util::{stof, stoul};
use super::Params;
use crate::json_schema::json_schema_text_to_grammar;
use llama::sampling::SamplerType;

/// The sampling options, in llama.cpp's declaration order.
pub(super) fn sampling_options(d: &Params) -> Vec<Opt> {
    use Handler::*;
    let s = &d.sampling;
    let sampler_names = s.samplers_string();
    let sampler_chars: String = s.samplers.iter().map(|t| t.to_chr()).collect();
    let breakers = s
        .dry_sequence_breakers
        .iter()
        .map(|b| format!("'{}'", if b == "\n" { "\\n" } else { b }))
        .collect::<Vec<_>>()
        .join(", ");
    vec![
        Opt::new(&["--samplers"], Some("SAMPLERS"), format!("samplers that will be used for generation in the order, separated by ';'\n(default: {sampler_names})"), Str(|p, _, v| {
            let names: Vec<&str> = v.split(';').collect();
            p.sampling.samplers = SamplerType::from_names(&names, true);
            Ok(())
        })).sp(),
        Opt::new(&["-s", "--seed"], Some("SEED"), format!("RNG seed (default: {}, use random seed for {})", s.seed as i32, llama::sampling::DEFAULT_SEED as i32), Str(|p, _, v| {
            p.sampling.seed = stoul(v)? as u32;
            Ok(())
        })).sp(),
        Opt::new(&["--sampler-seq", "--sampling-seq"], Some("SEQUENCE"), format!("simplified sequence for samplers that will be used (default: {sampler_chars})"), Str(|p, _, v| {
            p.sampling.samplers = SamplerType::from_chars(v);
            Ok(())
        })).sp(),
        Opt::new(&["--ignore-eos"], None, "ignore end of stream token and continue generating (implies --logit-bias EOS-inf)", Void(|p, _| {
            p.sampling.ignore_eos = true;
            Ok(())
        })).sp(),
        Opt::new(&["--temp", "--temperature"], Some("N"), format!("temperature (default: {:.2})", s.temp), Str(|p, _, v| {
            p.sampling.temp = stof(v)?.max(0.0);
            Ok(())
        })).sp().env("LLAMA_ARG_TEMPERATURE"),
        Opt::new(&["--top-k"], Some("N"), format!("top-k sampling (default: {}, 0 = disabled)", s.top_k), Int(|p, _, v| {
            p.sampling.top_k = v;
            Ok(())
        })).sp().env("LLAMA_ARG_TOP_K"),
        Opt::new(&["--top-p"], Some("N"), format!("top-p sampling (default: {:.2}, 1.0 = disabled)", s.top_p), Str(|p, _, v| {
            p.sampling.top_p = stof(v)?;
            Ok(())
        })).sp().env("LLAMA_ARG_TOP_P"),
        Opt::new(&["--min-p"], Some("N"), format!("min-p sampling (default: {:.2}, 0.0 = disabled)", s.min_p), Str(|p, _, v| {
            p.sampling.min_p = stof(v)?;
            Ok(())
        })).sp().env("LLAMA_ARG_MIN_P"),
        Opt::new(&["--top-nsigma", "--top-n-sigma"], Some("N"), format!("top-n-sigma sampling (default: {:.2}, -1.0 = disabled)", s.top_n_sigma), Str(|p, _, v| {
            p.sampling.top_n_sigma = stof(v)?;
            Ok(())
        })).sp(),
        Opt::new(&["--xtc-probability"], Some("N"), format!("xtc probability (default: {:.2}, 0.0 = disabled)", s.xtc_probability), Str(|p, _, v| {
            p.sampling.xtc_probability = stof(v)?;
            Ok(())
        })).sp(),
        Opt::new(&["--xtc-threshold"], Some("N"), format!("xtc threshold (default: {:.2}, 1.0 = disabled)", s.xtc_threshold), Str(|p, _, v| {
            p.sampling.xtc_threshold = stof(v)?;
            Ok(())
        })).sp(),
        Opt::new(&["--typical", "--typical-p"], Some("N"), format!("locally typical sampling, parameter p (default: {:.2}, 1.0 = disabled)", s.typ_p), Str(|p, _, v| {
            p.sampling.typ_p = stof(v)?;
            Ok(())
        })).sp(),
        Opt::new(&["--repeat-last-n"], Some("N"), format!("last n tokens to consider for penalize (default: {}, 0 = disabled, -1 = ctx_size)", s.penalty_last_n), Int(|p, _, v| {
            if v < -1 {
                return Err(format!("error: invalid repeat-last-n = {v}\n"));
            }
            p.sampling.penalty_last_n = v;
            p.sampling.n_prev = p.sampling.n_prev.max(v);
            Ok(())
        })).sp(),
        Opt::new(&["--repeat-penalty"], Some("N"), format!("penalize repeat sequence of tokens (default: {:.2}, 1.0 = disabled)", s.penalty_repeat), Str(|p, _, v| {
            p.sampling.penalty_repeat = stof(v)?;
            Ok(())
        })).sp().env("LLAMA_ARG_REPEAT_PENALTY"),
        Opt::new(&["--presence-penalty"], Some("N"), format!("repeat alpha presence penalty (default: {:.2}, 0.0 = disabled)", s.penalty_present), Str(|p, _, v| {
            p.sampling.penalty_present = stof(v)?;
            Ok(())
        })).sp().env("LLAMA_ARG_PRESENCE_PENALTY"),
        Opt::new(&["--frequency-penalty"], Some("N"), format!("repeat alpha frequency penalty (default: {:.2}, 0.0 = disabled)", s.penalty_freq), Str(|p, _, v| {
            p.sampling.penalty_freq = stof(v)?;
            Ok(())
        })).sp().env("LLAMA_ARG_FREQUENCY_PENALTY"),
        Opt::new(&["--dry-multiplier"], Some("N"), format!("set DRY sampling multiplier (default: {:.2}, 0.0 = disabled)", s.dry_multiplier), Str(|p, _, v| {
            p.sampling.dry_multiplier = stof(v)?;
            Ok(())
        })).sp(),
        Opt::new(&["--dry-base"], Some("N"), format!("set DRY sampling base value (default: {:.2})", s.dry_base), Str(|p, _, v| {
            let b = stof(v)?;
            if b >= 1.0 {
                p.sampling.dry_base = b;
            }
            Ok(())
        })).sp(),
        Opt::new(&["--dry-allowed-length"], Some("N"), format!("set allowed length for DRY sampling (default: {})", s.dry_allowed_length), Int(|p, _, v| {
            p.sampling.dry_allowed_length = v;
            Ok(())
        })).sp(),
        Opt::new(&["--dry-penalty-last-n"], Some("N"), format!("set DRY penalty for the last n tokens (default: {}, 0 = disable, -1 = context size)", s.dry_penalty_last_n), Int(|p, _, v| {
            if v < -1 {
                return Err(format!("error: invalid dry-penalty-last-n = {v}\n"));
            }
            p.sampling.dry_penalty_last_n = v;
            Ok(())
        })).sp(),
        Opt::new(&["--dry-sequence-breaker"], Some("STRING"), format!("add sequence breaker for DRY sampling, clearing out default breakers ({breakers}) in the process; use \"none\" to not use any sequence breakers\n"), Str(|p, ctx, v| {
            if ctx.clear_dry_breakers_once() {
                p.sampling.dry_sequence_breakers.clear();
            }
            if v == "none" {
                p.sampling.dry_sequence_breakers.clear();
            } else {
                p.sampling.dry_sequence_breakers.push(v.to_string());
            }
            Ok(())
        })).sp(),
        Opt::new(&["--adaptive-target"], Some("N"), format!("adaptive-p: select tokens near this probability (valid range 0.0 to 1.0; negative = disabled) (default: {:.2})", s.adaptive_target), Str(|p, _, v| {
            p.sampling.adaptive_target = stof(v)?;
            Ok(())
        })).sp(),
        Opt::new(&["--adaptive-decay"], Some("N"), format!("adaptive-p: decay rate for target adaptation over time. lower values are more reactive, higher values are more stable. (valid range 0.0 to 0.99) (default: {:.2})", s.adaptive_decay), Str(|p, _, v| {
            p.sampling.adaptive_decay = stof(v)?;
            Ok(())
        })).sp(),
        Opt::new(&["--dynatemp-range"], Some("N"), format!("dynamic temperature range (default: {:.2}, 0.0 = disabled)", s.dynatemp_range), Str(|p, _, v| {
            p.sampling.dynatemp_range = stof(v)?;
            Ok(())
        })).sp(),
        Opt::new(&["--dynatemp-exp"], Some("N"), format!("dynamic temperature exponent (default: {:.2})", s.dynatemp_exponent), Str(|p, _, v| {
            p.sampling.dynatemp_exponent = stof(v)?;
            Ok(())
        })).sp(),
        Opt::new(&["--mirostat"], Some("N"), format!("use Mirostat sampling.\nTop K, Nucleus and Locally Typical samplers are ignored if used.\n(default: {}, 0 = disabled, 1 = Mirostat, 2 = Mirostat 2.0)", s.mirostat), Int(|p, _, v| {
            p.sampling.mirostat = v;
            Ok(())
        })).sp(),
        Opt::new(&["--mirostat-lr"], Some("N"), format!("Mirostat learning rate, parameter eta (default: {:.2})", s.mirostat_eta), Str(|p, _, v| {
            p.sampling.mirostat_eta = stof(v)?;
            Ok(())
        })).sp(),
        Opt::new(&["--mirostat-ent"], Some("N"), format!("Mirostat target entropy, parameter tau (default: {:.2})", s.mirostat_tau), Str(|p, _, v| {
            p.sampling.mirostat_tau = stof(v)?;
            Ok(())
        })).sp(),
        Opt::new(&["-l", "--logit-bias"], Some("TOKEN_ID(+/-)BIAS"), "modifies the likelihood of token appearing in the completion,\ni.e. `--logit-bias 15043+1` to increase likelihood of token ' Hello',\nor `--logit-bias 15043-1` to decrease likelihood of token ' Hello'", Str(|p, _, v| {
            let (tok, bias) = parse_logit_bias(v).ok_or_else(|| "invalid input format".to_string())?;
            p.sampling.logit_bias.push((tok, bias));
            Ok(())
        })).sp(),
        Opt::new(&["--grammar"], Some("GRAMMAR"), "BNF-like grammar to constrain generations (see samples in grammars/ dir)", Str(|p, _, v| {
            p.sampling.grammar = v.to_string();
            Ok(())
        })).sp(),
        Opt::new(&["--grammar-file"], Some("FNAME"), "file to read grammar from", Str(|p, _, v| {
            p.sampling.grammar = read_file(v)?;
            Ok(())
        })).sp(),
        Opt::new(&["-j", "--json-schema"], Some("SCHEMA"), "JSON schema to constrain generations (https://json-schema.org/), e.g. `{\"type\": \"object\"}` for any JSON object", Str(|p, _, v| {
            p.sampling.grammar = json_schema_text_to_grammar(v)?;
            Ok(())
        })).sp(),
        Opt::new(&["-jf", "--json-schema-file"], Some("FILE"), "File containing a JSON schema to constrain generations (https://json-schema.org/), e.g. `{\"type\": \"object\"}` for any JSON object", Str(|p, _, v| {
            p.sampling.grammar = json_schema_text_to_grammar(&read_file(v)?)?;
            Ok(())
        })).sp(),
        Opt::new(&["-bs", "--backend-sampling"], None, "enable backend sampling (experimental) (default: disabled)", Void(|p, _| {
            p.backend_sampling = true;
            Ok(())
        })).sp().env("LLAMA_ARG_BACKEND_SAMPLING"),
    ]
}

/// `-l TOKEN(+|-)BIAS`: `ss >> key >> sign` then the rest as a float.
fn parse_logit_bias(v: &str) -> Option<(i32, f32)> {
    let t = v.trim_start();
    let end = t
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && (c == '-' || c == '+'))))
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    let key: i32 = t[..end].parse().ok()?;
    let rest = t[end..].trim_start();
    let sign = rest.chars().next()?;
    if sign != '+' && sign != '-' {
        return None;
    }
    let bias = stof(&rest[1..]).ok()?;
    Some((key, if sign == '-' { -bias } else { bias }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logit_bias_forms() {
        assert_eq!(parse_logit_bias("15043+1"), Some((15043, 1.0)));
        assert_eq!(parse_logit_bias("15043-1.5"), Some((15043, -1.5)));
        assert_eq!(
            parse_logit_bias("15043-inf"),
            Some((15043, f32::NEG_INFINITY))
        );
        assert_eq!(parse_logit_bias("abc"), None);
        assert_eq!(parse_logit_bias("12*3"), None);
    }

    fn parse_args(args: &[&str]) -> Result<crate::args::Params, String> {
        struct Quiet;
        impl crate::args::ParseOutput for Quiet {
            fn out(&mut self, _: &str) {}
            fn err(&mut self, _: &str) {}
        }
        let argv: Vec<String> = ["llama-completion", "-m", "model.gguf"]
            .into_iter()
            .chain(args.iter().copied())
            .map(String::from)
            .collect();
        crate::args::parse(
            &argv,
            crate::args::Example::Completion,
            &crate::args::ParseEnv::default(),
            &mut Quiet,
            None,
        )
        .map_err(|e| format!("{e:?}"))
    }

    #[test]
    fn grammar_flags_fill_the_sampling_grammar() {
        let p = parse_args(&["--grammar", "root ::= \"a\""]).unwrap();
        assert_eq!(p.sampling.grammar, "root ::= \"a\"");
        let schema =
            r#"{"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"]}"#;
        let p = parse_args(&["-j", schema]).unwrap();
        assert_eq!(
            p.sampling.grammar,
            crate::json_schema::json_schema_text_to_grammar(schema).unwrap()
        );
        assert!(p.sampling.grammar.contains("answer-kv ::="));
        let e = parse_args(&["-j", "{\"type\": \"foo\"}"]).unwrap_err();
        assert!(
            e.contains("error while handling argument \\\"-j\\\": JSON schema conversion failed"),
            "{e}"
        );
        let e = parse_args(&["-jf", "/nonexistent/schema.json"]).unwrap_err();
        assert!(e.contains("failed to open file"), "{e}");
        let e = parse_args(&["--grammar-file", "/nonexistent/g.gbnf"]).unwrap_err();
        assert!(e.contains("failed to open file"), "{e}");
    }
}
