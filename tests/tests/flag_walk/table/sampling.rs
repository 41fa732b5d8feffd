//! The sampling flags: llama-completion's sampler lines, the others' warnings.

use super::*;

pub(super) fn sampling_flags(v: &mut Vec<Entry>) {
    use Want::*;
    let c: &[&str] = &["completion"];
    // ----- sampling -----
    samp(
        v,
        &["--samplers"],
        &["top_k;temperature"],
        "sampler chain: logits -> top-k -> temp-ext",
        "s3",
    );
    samp(v, &["-s", "--seed"], &["7"], "sampler seed: 7", "s1");
    samp(
        v,
        &["--sampler-seq", "--sampling-seq"],
        &["kt"],
        "sampler chain: logits -> top-k -> temp-ext",
        "s4",
    );
    samp(
        v,
        &["--ignore-eos"],
        &[],
        "sampler chain: logits -> logit-bias",
        "s1",
    );
    samp(
        v,
        &["--temp", "--temperature"],
        &["0.5"],
        "temp = 0.500",
        "s1",
    );
    samp(v, &["--top-k"], &["7"], "top_k = 7,", "s1");
    samp(v, &["--top-p"], &["0.5"], "top_p = 0.500", "s1");
    samp(v, &["--min-p"], &["0.2"], "min_p = 0.200", "s1");
    samp(
        v,
        &["--top-nsigma", "--top-n-sigma"],
        &["2"],
        "top_n_sigma = 2.000",
        "s1",
    );
    samp(
        v,
        &["--xtc-probability"],
        &["0.5"],
        "xtc_probability = 0.500",
        "s1",
    );
    samp(
        v,
        &["--xtc-threshold"],
        &["0.3"],
        "xtc_threshold = 0.300",
        "s1",
    );
    samp(
        v,
        &["--typical", "--typical-p"],
        &["0.5"],
        "typical_p = 0.500",
        "s1",
    );
    samp(
        v,
        &["--repeat-last-n"],
        &["16"],
        "repeat_last_n = 16,",
        "s1",
    );
    samp(
        v,
        &["--repeat-penalty"],
        &["1.5"],
        "repeat_penalty = 1.500",
        "s1",
    );
    samp(
        v,
        &["--presence-penalty"],
        &["0.5"],
        "presence_penalty = 0.500",
        "s1",
    );
    samp(
        v,
        &["--frequency-penalty"],
        &["0.5"],
        "frequency_penalty = 0.500",
        "s1",
    );
    samp(
        v,
        &["--dry-multiplier"],
        &["0.5"],
        "dry_multiplier = 0.500",
        "s1",
    );
    samp(v, &["--dry-base"], &["2"], "dry_base = 2.000", "s1");
    samp(
        v,
        &["--dry-allowed-length"],
        &["3"],
        "dry_allowed_length = 3,",
        "s1",
    );
    samp(
        v,
        &["--dry-penalty-last-n"],
        &["16"],
        "dry_penalty_last_n = 16",
        "s1",
    );
    v.push(e(c, &["--dry-sequence-breaker"], &["none"], Unwalked, ""));
    v.push(e(
        NO_SAMPLING,
        &["--dry-sequence-breaker"],
        &["none"],
        Warn,
        "warn",
    ));
    samp(
        v,
        &["--adaptive-target"],
        &["0.5"],
        "adaptive_target = 0.500",
        "s1",
    );
    samp(
        v,
        &["--adaptive-decay"],
        &["0.5"],
        "adaptive_decay = 0.500",
        "s1",
    );
    v.push(e(c, &["--dynatemp-range"], &["0.5"], OutDiffers, ""));
    v.push(e(
        NO_SAMPLING,
        &["--dynatemp-range"],
        &["0.5"],
        Warn,
        "warn",
    ));
    v.push(pre(
        e(c, &["--dynatemp-exp"], &["4"], OutDiffers, ""),
        &["--dynatemp-range", "0.5", "-n", "8"],
    ));
    v.push(e(NO_SAMPLING, &["--dynatemp-exp"], &["4"], Warn, "warn"));
    samp(v, &["--mirostat"], &["2"], "mirostat = 2,", "s2");
    samp(v, &["--mirostat-lr"], &["0.5"], "mirostat_lr = 0.500", "s2");
    samp(v, &["--mirostat-ent"], &["3"], "mirostat_ent = 3.000", "s2");
    samp(
        v,
        &["-l", "--logit-bias"],
        &["14990+1"],
        "sampler chain: logits -> logit-bias",
        "s5",
    );
    samp(
        v,
        &["--grammar"],
        &["root ::= \"yes\""],
        "eval: [ 'y':88 ]",
        "",
    );
    samp(
        v,
        &["--grammar-file"],
        &["{D}/grammar.gbnf"],
        "eval: [ 'y':88 ]",
        "",
    );
    samp(
        v,
        &["-j", "--json-schema"],
        &["{\"type\":\"integer\"}"],
        "eval: [ '4':19 ]",
        "",
    );
    samp(
        v,
        &["-jf", "--json-schema-file"],
        &["{D}/schema.json"],
        "eval: [ '4':19 ]",
        "",
    );
    v.push(e(COMMON, &["-bs", "--backend-sampling"], &[], Warn, "warn"));
}
