//! llama-tokenize: print the tokens of a prompt (`-p`, `-f` or `--stdin`) as llama.cpp's
//! tools/tokenize does, loading only the vocabulary of the model (its metadata, never the
//! weights). Flags and errors come from the common parser (`LLAMA_EXAMPLE_TOKENIZE`).

use std::io::{Read, Write};

use common::args::{self, Example, ParseEnv, ParseOutput};
use llama::vocab::Vocab;

fn print_usage(out: &mut dyn ParseOutput) {
    let argv0 = std::env::args()
        .next()
        .unwrap_or_else(|| "llama-tokenize".into());
    out.out("\nexample usage:\n");
    out.out(&format!(
        "\n  {argv0} -m your_model.gguf -p \"Hello world\"\n"
    ));
    out.out(&format!(
        "\n  {argv0} -m your_model.gguf -f prompt.txt --ids\n"
    ));
    out.out(&format!(
        "\n  cat prompt.txt | {argv0} -m your_model.gguf --stdin --show-count\n"
    ));
    out.out("\n");
}

fn raw_prompt(parsed: &str, escape: bool) -> Vec<u8> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        let mut raw: Option<&[u8]> = None;
        let mut i = 1;
        while i < args.len() {
            let a = args[i].as_bytes();
            if (a == b"-p" || a == b"--prompt") && i + 1 < args.len() {
                raw = Some(args[i + 1].as_bytes());
                i += 1;
            }
            i += 1;
        }
        if let Some(raw) = raw {
            let bytes = if escape {
                args::util::process_escapes_bytes(raw)
            } else {
                raw.to_vec()
            };
            if String::from_utf8_lossy(&bytes) == parsed {
                return bytes;
            }
        }
    }
    let _ = escape;
    parsed.as_bytes().to_vec()
}

fn fail(msg: &str) -> ! {
    common::log_err!("{}", msg);
    std::process::exit(1);
}

fn main() {
    common::log::init();
    let p = args::parse_or_exit(Example::Tokenize, &ParseEnv::default(), Some(&print_usage));
    args::apply_log_settings(&p);

    let use_stdin = p.tok_stdin;
    let use_file = !p.prompt_file.is_empty();
    if !use_stdin && !use_file && p.prompt.is_empty() {
        fail("error: must specify one of: --stdin, --file or --prompt\n");
    }

    let mut prompt: Vec<u8> = Vec::new();
    if use_file {
        // Verbatim: the common -f handler drops one trailing newline, but a trailing newline
        // is itself a token.
        match std::fs::read(&p.prompt_file) {
            Ok(b) => {
                prompt = if p.escape {
                    args::util::process_escapes_bytes(&b)
                } else {
                    b
                }
            }
            Err(_) => fail(&format!(
                "error: could not open file '{}' for reading\n",
                p.prompt_file
            )),
        }
    } else if !use_stdin {
        prompt = raw_prompt(&p.prompt, p.escape);
    }

    let vocab = match gguf::GgufFile::open_metadata(&p.model)
        .map_err(|e| e.to_string())
        .and_then(|f| Vocab::from_gguf(&f).map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(e) => {
            ggml::log_error!("llama_model_load: error loading model: {}\n", e);
            ggml::log_error!("llama_model_load_from_file_impl: failed to load model\n");
            fail(&format!(
                "error: could not load model from file '{}'.\n",
                p.model
            ));
        }
    };
    vocab.print_info();

    if use_stdin {
        let mut buf = Vec::new();
        if std::io::stdin().lock().read_to_end(&mut buf).is_err() {
            fail("error: could not read the entire standard input.\n");
        }
        prompt = if p.escape {
            args::util::process_escapes_bytes(&buf)
        } else {
            buf
        };
    }

    let add_bos = vocab.add_bos() && !p.tok_no_bos;
    let tokens = vocab.tokenize(&prompt, add_bos, p.parse_special);

    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut text: Vec<u8> = Vec::new();
    if p.tok_ids {
        text.push(b'[');
        for (i, t) in tokens.iter().enumerate() {
            if i > 0 {
                text.extend_from_slice(b", ");
            }
            text.extend_from_slice(t.to_string().as_bytes());
        }
        text.extend_from_slice(b"]\n");
    } else {
        for &t in &tokens {
            text.extend_from_slice(format!("{t:6} -> '").as_bytes());
            // printf("%s") stops at a NUL byte.
            let piece = vocab.token_to_piece(t, 0, true);
            let end = piece.iter().position(|&b| b == 0).unwrap_or(piece.len());
            text.extend_from_slice(&piece[..end]);
            text.extend_from_slice(b"'\n");
        }
    }
    if p.tok_show_count {
        text.extend_from_slice(format!("Total number of tokens: {}\n", tokens.len()).as_bytes());
    }
    if out.write_all(&text).and_then(|_| out.flush()).is_err() {
        std::process::exit(1);
    }
}
