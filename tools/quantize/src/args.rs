//! llama-quantize's command line: options first (each starting with `--`), then
//! `input [output] type [nthreads]`, with llama.cpp's messages and exit codes.

use std::path::Path;

use ggml::Type;
use llama::quant::{Ftype, KvOverride, QuantizeParams};
use regex::Regex;

/// The process should exit with this code (the message is already printed).
#[derive(Debug, PartialEq)]
pub struct Exit(pub u8);

#[derive(Debug)]
pub struct Args {
    pub input: String,
    pub output: String,
    pub ftype_name: String,
    pub nthread: i64,
    pub dry_run: bool,
    pub allow_requantize: bool,
    pub keep_split: bool,
    pub types: QuantizeParams,
    pub kv_overrides: Vec<KvOverride>,
    /// Sorted, without duplicates.
    pub prune_layers: Vec<u32>,
    pub imatrix_file: Option<String>,
    pub include_weights: Vec<String>,
    pub exclude_weights: Vec<String>,
}

/// The QUANT_OPTIONS this build can produce: name, ftype, llama.cpp's description.
const QUANT_OPTIONS: &[(&str, Option<Ftype>, &str)] = &[
    ("Q1_0", Some(Ftype::Q1_0), " 1.125 bpw quantization"),
    (
        "Q2_0",
        Some(Ftype::Q2_0),
        " 2.25 bpw quantization (group 64)",
    ),
    (
        "Q4_0",
        Some(Ftype::Q4_0),
        " 4.34G, +0.4685 ppl @ Llama-3-8B",
    ),
    (
        "Q4_1",
        Some(Ftype::Q4_1),
        " 4.78G, +0.4511 ppl @ Llama-3-8B",
    ),
    ("MXFP4_MOE", Some(Ftype::Mxfp4Moe), " MXFP4 MoE"),
    (
        "Q5_0",
        Some(Ftype::Q5_0),
        " 5.21G, +0.1316 ppl @ Llama-3-8B",
    ),
    (
        "Q5_1",
        Some(Ftype::Q5_1),
        " 5.65G, +0.1062 ppl @ Llama-3-8B",
    ),
    ("IQ2_XXS", Some(Ftype::Iq2Xxs), " 2.06 bpw quantization"),
    ("IQ2_XS", Some(Ftype::Iq2Xs), " 2.31 bpw quantization"),
    ("IQ2_S", Some(Ftype::Iq2S), " 2.5  bpw quantization"),
    ("IQ2_M", Some(Ftype::Iq2M), " 2.7  bpw quantization"),
    ("IQ1_S", Some(Ftype::Iq1S), " 1.56 bpw quantization"),
    ("IQ1_M", Some(Ftype::Iq1M), " 1.75 bpw quantization"),
    ("TQ1_0", Some(Ftype::Tq1_0), " 1.69 bpw ternarization"),
    ("TQ2_0", Some(Ftype::Tq2_0), " 2.06 bpw ternarization"),
    ("Q2_K", Some(Ftype::Q2K), " 2.96G, +3.5199 ppl @ Llama-3-8B"),
    (
        "Q2_K_S",
        Some(Ftype::Q2KS),
        " 2.96G, +3.1836 ppl @ Llama-3-8B",
    ),
    ("IQ3_XXS", Some(Ftype::Iq3Xxs), " 3.06 bpw quantization"),
    ("IQ3_S", Some(Ftype::Iq3S), " 3.44 bpw quantization"),
    ("IQ3_M", Some(Ftype::Iq3M), " 3.66 bpw quantization mix"),
    ("Q3_K", Some(Ftype::Q3KM), "alias for Q3_K_M"),
    ("IQ3_XS", Some(Ftype::Iq3Xs), " 3.3 bpw quantization"),
    (
        "Q3_K_S",
        Some(Ftype::Q3KS),
        " 3.41G, +1.6321 ppl @ Llama-3-8B",
    ),
    (
        "Q3_K_M",
        Some(Ftype::Q3KM),
        " 3.74G, +0.6569 ppl @ Llama-3-8B",
    ),
    (
        "Q3_K_L",
        Some(Ftype::Q3KL),
        " 4.03G, +0.5562 ppl @ Llama-3-8B",
    ),
    (
        "IQ4_NL",
        Some(Ftype::Iq4Nl),
        " 4.50 bpw non-linear quantization",
    ),
    (
        "IQ4_XS",
        Some(Ftype::Iq4Xs),
        " 4.25 bpw non-linear quantization",
    ),
    ("Q4_K", Some(Ftype::Q4KM), "alias for Q4_K_M"),
    (
        "Q4_K_S",
        Some(Ftype::Q4KS),
        " 4.37G, +0.2689 ppl @ Llama-3-8B",
    ),
    (
        "Q4_K_M",
        Some(Ftype::Q4KM),
        " 4.58G, +0.1754 ppl @ Llama-3-8B",
    ),
    ("Q5_K", Some(Ftype::Q5KM), "alias for Q5_K_M"),
    (
        "Q5_K_S",
        Some(Ftype::Q5KS),
        " 5.21G, +0.1049 ppl @ Llama-3-8B",
    ),
    (
        "Q5_K_M",
        Some(Ftype::Q5KM),
        " 5.33G, +0.0569 ppl @ Llama-3-8B",
    ),
    ("Q6_K", Some(Ftype::Q6K), " 6.14G, +0.0217 ppl @ Llama-3-8B"),
    (
        "Q8_0",
        Some(Ftype::Q8_0),
        " 7.96G, +0.0026 ppl @ Llama-3-8B",
    ),
    ("F16", Some(Ftype::F16), "14.00G, +0.0020 ppl @ Mistral-7B"),
    (
        "BF16",
        Some(Ftype::Bf16),
        "14.00G, -0.0050 ppl @ Mistral-7B",
    ),
    ("F32", Some(Ftype::AllF32), "26.00G              @ 7B"),
    ("COPY", None, "only copy tensors, no quantizing"),
];

fn usage(exe: &str) -> Exit {
    let mut s = String::new();
    s += &format!("usage: {exe} [--help] [--allow-requantize] [--leave-output-tensor] [--pure] [--imatrix] [--include-weights]\n");
    s += "       [--exclude-weights] [--output-tensor-type] [--token-embedding-type] [--tensor-type] [--tensor-type-file]\n";
    s += "       [--prune-layers] [--keep-split] [--override-kv] [--dry-run] [--max-buffer-size]\n";
    s += "       model-f32.gguf [model-quant.gguf] type [nthreads]\n\n";
    let opts: &[(&str, &[&str])] = &[
        ("--allow-requantize", &["allow requantizing tensors that have already been quantized", "WARNING: this can severely reduce quality compared to quantizing", "         from 16bit or 32bit!"]),
        ("--leave-output-tensor", &["leave output.weight un(re)quantized", "increases model size but may also increase quality, especially when requantizing"]),
        ("--pure", &["disable k-quant mixtures and quantize all tensors to the same type"]),
        ("--imatrix file_name", &["use data in file_name as importance matrix for quant optimizations"]),
        ("--include-weights tensor_name", &["use importance matrix for this/these tensor(s)"]),
        ("--exclude-weights tensor_name", &["do not use importance matrix for this/these tensor(s)"]),
        ("--output-tensor-type ggml_type", &["use this ggml_type for the output.weight tensor"]),
        ("--token-embedding-type ggml_type", &["use this ggml_type for the token embeddings tensor"]),
        ("--tensor-type tensor_name=ggml_type", &["quantize this tensor to this ggml_type", "this is an advanced option to selectively quantize tensors. may be specified multiple times.", "example: --tensor-type attn_q=q8_0"]),
        ("--tensor-type-file tensor_types.txt", &["list of tensors to quantize to a specific ggml_type", "this is an advanced option to selectively quantize a long list of tensors.", "the file should use the same format as above, separated by spaces or newlines."]),
        ("--prune-layers L0,L1,L2...", &["comma-separated list of layer numbers to prune from the model", "WARNING: this is an advanced option, use with care."]),
        ("--keep-split", &["generate quantized model in the same shards as input"]),
        ("--override-kv KEY=TYPE:VALUE", &["override model metadata by key in the quantized model; may be specified multiple times.", "WARNING: this is an advanced option, use with care."]),
        ("--dry-run", &["calculate and show the final quantization size without performing quantization", "example: llama-quantize --dry-run model-f32.gguf Q4_K"]),
        ("--max-buffer-size MiB", &["max amount of tensor rows kept in memory while quantizing one tensor (default: 8192)", "lower it to quantize models with very large tensors on a machine with little RAM"]),
    ];
    for (flag, lines) in opts {
        s += &format!("  {flag}\n");
        for l in *lines {
            s += &format!("                                      {l}\n");
        }
    }
    s += "\nnote: --include-weights and --exclude-weights cannot be used together\n";
    s += "\n-----------------------------------------------------------------------------\n";
    s += " allowed quantization types\n";
    s += "-----------------------------------------------------------------------------\n\n";
    for (name, ft, desc) in QUANT_OPTIONS {
        match ft {
            Some(f) => s += &format!("  {:2}  or  ", f.id()),
            None => s += "          ",
        }
        s += &format!("{name:<7} : {desc}\n");
    }
    print!("{s}");
    Exit(1)
}

/// try_parse_ftype: a name (case-insensitive) or a numeric ftype; the first entry wins.
fn parse_ftype(s: &str) -> Option<(Option<Ftype>, &'static str)> {
    let up = s.to_ascii_uppercase();
    if let Some((name, f, _)) = QUANT_OPTIONS.iter().find(|(n, _, _)| *n == up) {
        return Some((*f, name));
    }
    let id: i64 = s.trim().parse().ok()?;
    QUANT_OPTIONS
        .iter()
        .find(|(_, f, _)| f.map(|f| f.id() as i64) == Some(id))
        .map(|(n, f, _)| (*f, *n))
}

fn parse_type(s: &str) -> Option<Type> {
    Type::from_name(s).filter(|t| ggml::quants::is_supported(*t))
}

fn parse_tensor_type(spec: &str, out: &mut Vec<(Regex, Type)>) -> Result<(), String> {
    let f = "parse_tensor_type";
    let Some((name, ty)) = spec.split_once('=') else {
        return Err(format!("\n{f}: malformed tensor type '{spec}'\n\n"));
    };
    if name.is_empty() {
        return Err(format!("\n{f}: missing tensor name\n\n"));
    }
    if ty.is_empty() {
        return Err(format!("\n{f}: missing quantization type\n\n"));
    }
    let Some(t) = parse_type(ty) else {
        eprint!("\nparse_ggml_type: invalid ggml_type '{ty}'\n\n");
        return Err(format!("\n{f}: invalid quantization type '{ty}'\n\n"));
    };
    let re = Regex::new(&name.to_lowercase())
        .map_err(|e| format!("invalid tensor name pattern '{name}': {e}"))?;
    out.push((re, t));
    Ok(())
}

pub fn parse(argv: &[String]) -> Result<Args, Exit> {
    let exe = argv.first().map(|s| s.as_str()).unwrap_or("llama-quantize");
    if argv.len() < 3 {
        return Err(usage(exe));
    }
    let mut types = QuantizeParams::new(Ftype::Q5_1);
    let (mut dry_run, mut allow_requantize, mut keep_split) = (false, false, false);
    let mut kv_overrides = Vec::new();
    let mut prune_layers: Vec<u32> = Vec::new();
    let mut imatrix_file = None;
    let (mut include_weights, mut exclude_weights) = (Vec::new(), Vec::new());
    let mut i = 1;
    while i < argv.len() && argv[i].starts_with("--") {
        let value = |i: usize| argv.get(i + 1).cloned();
        match argv[i].as_str() {
            "--leave-output-tensor" => types.quantize_output_tensor = false,
            "--allow-requantize" => allow_requantize = true,
            "--pure" => types.pure = true,
            "--dry-run" => dry_run = true,
            "--keep-split" => keep_split = true,
            "--output-tensor-type" | "--token-embedding-type" => {
                let Some(v) = value(i) else {
                    return Err(usage(exe));
                };
                let Some(t) = parse_type(&v) else {
                    eprint!("\nparse_ggml_type: invalid ggml_type '{v}'\n\n");
                    return Err(usage(exe));
                };
                if argv[i] == "--output-tensor-type" {
                    types.output_tensor_type = Some(t);
                } else {
                    types.token_embedding_type = Some(t);
                }
                i += 1;
            }
            "--tensor-type" => {
                let Some(v) = value(i) else {
                    return Err(usage(exe));
                };
                if let Err(e) = parse_tensor_type(&v, &mut types.tensor_types) {
                    print!("{e}");
                    return Err(usage(exe));
                }
                i += 1;
            }
            "--tensor-type-file" => {
                let Some(v) = value(i) else {
                    return Err(usage(exe));
                };
                let text = match std::fs::read_to_string(&v) {
                    Ok(t) => t,
                    Err(e) => {
                        print!(
                            "\nparse_tensor_type_file: failed to open file '{v}': {}\n\n",
                            strerror(&e)
                        );
                        return Err(usage(exe));
                    }
                };
                for spec in text.split_whitespace() {
                    if let Err(e) = parse_tensor_type(spec, &mut types.tensor_types) {
                        print!("{e}");
                        return Err(usage(exe));
                    }
                }
                i += 1;
            }
            "--max-buffer-size" => {
                let Some(v) = value(i) else {
                    return Err(usage(exe));
                };
                if v.parse::<f64>().map(|m| m <= 0.0).unwrap_or(true) {
                    eprintln!("llama_quantize: invalid --max-buffer-size '{v}'");
                    return Err(Exit(1));
                }
                i += 1;
            }
            "--imatrix" | "--include-weights" | "--exclude-weights" => {
                let Some(v) = value(i) else {
                    return Err(usage(exe));
                };
                match argv[i].as_str() {
                    "--imatrix" => imatrix_file = Some(v),
                    "--include-weights" => include_weights.push(v),
                    _ => exclude_weights.push(v),
                }
                i += 1;
            }
            "--prune-layers" => {
                let Some(v) = value(i) else {
                    return Err(usage(exe));
                };
                match parse_layer_prune(&v) {
                    Ok(mut ids) => prune_layers.append(&mut ids),
                    Err(e) => {
                        print!("{e}");
                        return Err(usage(exe));
                    }
                }
                prune_layers.sort_unstable();
                prune_layers.dedup();
                i += 1;
            }
            "--override-kv" => {
                let Some(v) = value(i) else {
                    return Err(usage(exe));
                };
                match KvOverride::parse(&v) {
                    Ok(o) => kv_overrides.push(o),
                    Err(e) => {
                        eprintln!("{e}");
                        return Err(usage(exe));
                    }
                }
                i += 1;
            }
            _ => return Err(usage(exe)),
        }
        i += 1;
    }
    if argv.len() - i < 2 {
        println!("{exe}: bad arguments");
        return Err(usage(exe));
    }
    if !include_weights.is_empty() && !exclude_weights.is_empty() {
        return Err(usage(exe));
    }
    let input = argv[i].clone();
    i += 1;
    let (ftype, ftype_name, output);
    if let Some((f, name)) = parse_ftype(&argv[i]) {
        let dir = match input.rfind(['/', '\\']) {
            Some(p) => &input[..=p],
            None => "",
        };
        let suffix = if keep_split { "" } else { ".gguf" };
        output = if dry_run {
            String::new()
        } else {
            format!("{dir}ggml-model-{name}{suffix}")
        };
        (ftype, ftype_name) = (f, name);
        i += 1;
    } else {
        // With --keep-split the shard names are added to the output name, so llama.cpp cuts
        // ".gguf" off (the last five characters, wherever the suffix was found).
        output = if keep_split && argv[i].contains(".gguf") {
            let o = &argv[i];
            let mut end = o.len() - 5;
            while !o.is_char_boundary(end) {
                end -= 1;
            }
            o[..end].to_string()
        } else {
            argv[i].clone()
        };
        i += 1;
        let Some(spec) = argv.get(i) else {
            eprintln!("llama_quantize: missing ftype");
            return Err(Exit(1));
        };
        let Some((f, name)) = parse_ftype(spec) else {
            eprintln!("llama_quantize: invalid ftype '{spec}'");
            return Err(Exit(1));
        };
        (ftype, ftype_name) = (f, name);
        i += 1;
    }
    types.ftype = ftype.unwrap_or(Ftype::AllF32);
    types.only_copy = ftype.is_none();
    let mut nthread = 0i64;
    if let Some(s) = argv.get(i) {
        match s.trim().parse::<i64>() {
            Ok(n) => nthread = n,
            Err(e) => {
                eprintln!("llama_quantize: invalid nthread '{s}' ({e})");
                return Err(Exit(1));
            }
        }
    }
    if !dry_run && same_file(&input, &output) {
        eprintln!("llama_quantize: error: input and output files are the same: '{input}'");
        return Err(Exit(1));
    }
    Ok(Args {
        input,
        output,
        ftype_name: ftype_name.to_string(),
        nthread,
        dry_run,
        allow_requantize,
        keep_split,
        types,
        kv_overrides,
        prune_layers,
        imatrix_file,
        include_weights,
        exclude_weights,
    })
}

/// C's strerror text for an I/O error (Rust appends " (os error N)").
fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(p) => s[..p].to_string(),
        None => s,
    }
}

/// std::stoi: optional blanks and sign, then at least one digit; the rest is ignored.
fn stoi(s: &str) -> Option<i64> {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let n = digits.bytes().take_while(u8::is_ascii_digit).count();
    let v: i32 = digits[..n].parse().ok()?;
    Some(if neg { -(v as i64) } else { v as i64 })
}

/// parse_layer_prune: comma-separated layer ids, each >= 0.
fn parse_layer_prune(data: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for id in data.split(',') {
        match stoi(id) {
            Some(v) if v >= 0 => out.push(v as u32),
            _ => return Err(format!("\nparse_layer_prune: invalid layer id '{id}'\n\n")),
        }
    }
    Ok(out)
}

fn same_file(a: &str, b: &str) -> bool {
    match (Path::new(a).canonicalize(), Path::new(b).canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn positional_forms() {
        let a = parse(&argv("q dir/m.gguf q4_k_m")).unwrap();
        assert_eq!(
            (a.output.as_str(), a.ftype_name.as_str()),
            ("dir/ggml-model-Q4_K_M.gguf", "Q4_K_M")
        );
        assert_eq!(a.types.ftype, Ftype::Q4KM);
        let a = parse(&argv("q m.gguf out.gguf 15 3")).unwrap();
        assert_eq!(
            (a.output.as_str(), a.ftype_name.as_str(), a.nthread),
            ("out.gguf", "Q4_K", 3)
        );
        let a = parse(&argv("q m.gguf out.gguf COPY")).unwrap();
        assert!(a.types.only_copy);
        assert_eq!(parse(&argv("q m.gguf out.gguf")).unwrap_err(), Exit(1));
        assert_eq!(parse(&argv("q m.gguf out.gguf Q9_9")).unwrap_err(), Exit(1));
        assert_eq!(
            parse(&argv("q m.gguf out.gguf q8_0 x")).unwrap_err(),
            Exit(1)
        );
    }

    #[test]
    fn options() {
        let a = parse(&argv(
            "q --pure --leave-output-tensor --output-tensor-type q8_0 --token-embedding-type F16 --tensor-type attn_v=q6_k m.gguf o.gguf q4_0",
        ))
        .unwrap();
        assert!(a.types.pure && !a.types.quantize_output_tensor);
        assert_eq!(a.types.output_tensor_type, Some(Type::Q8_0));
        assert_eq!(a.types.token_embedding_type, Some(Type::F16));
        assert_eq!(a.types.tensor_types[0].1, Type::Q6K);
        assert_eq!(
            parse(&argv("q --bogus m.gguf o.gguf q4_0")).unwrap_err(),
            Exit(1)
        );
        assert_eq!(
            parse(&argv("q --tensor-type attn_v m.gguf o.gguf q4_0")).unwrap_err(),
            Exit(1)
        );
    }
}
