//! llama-completion --prompt-cache: session files in llama.cpp's format. A file llama.cpp wrote
//! (tests/fixtures/prompt-cache, recorded with its llama-completion on the reference model, see
//! the README there) loads here and gives llama.cpp's text; a file written here has llama.cpp's
//! layout; a second run reuses the prompt; bad files are refused with the cause.

use std::path::{Path, PathBuf};
use std::process::Output;

const PROMPT: &str = "Hello my name is";

fn completion(args: &[&str]) -> Output {
    test_fixtures::run_tool("llama-completion", args)
}

use test_fixtures::text;

fn fixture(name: &str) -> PathBuf {
    test_fixtures::repo_root()
        .join("tests/fixtures/prompt-cache")
        .join(name)
}

/// Greedy run on the reference model with a session file; asserts success.
fn run(model: &Path, prompt: &str, session: &Path, extra: &[&str]) -> (String, String) {
    let mut args = vec![
        "-m",
        model.to_str().unwrap(),
        "-p",
        prompt,
        "-n",
        "8",
        "--temp",
        "0",
        "-no-cnv",
        "--prompt-cache",
        session.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = completion(&args);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{args:?} failed:\n{err}");
    (text(&o.stdout), err)
}

fn no_cache_run(model: &Path, prompt: &str) -> String {
    let m = model.to_str().unwrap();
    let o = completion(&["-m", m, "-p", prompt, "-n", "8", "--temp", "0", "-no-cnv"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    text(&o.stdout)
}

/// A session file taken apart: (tokens, bytes before the first layer's K data, the K/V data of
/// every layer as f16 bits).
struct Parsed {
    tokens: Vec<i32>,
    head: Vec<u8>,
    data: Vec<Vec<u16>>,
}

fn parse(path: &Path) -> Parsed {
    let b = std::fs::read(path).unwrap();
    let mut o = 0usize;
    let u32_at = |o: &mut usize| {
        let v = u32::from_le_bytes(b[*o..*o + 4].try_into().unwrap());
        *o += 4;
        v
    };
    assert_eq!(u32_at(&mut o), 0x6767_736e, "magic");
    assert_eq!(u32_at(&mut o), 10, "version");
    let nt = u32_at(&mut o) as usize;
    let tokens = (0..nt).map(|_| u32_at(&mut o) as i32).collect();
    let n = u32_at(&mut o) as usize;
    o += n;
    assert_eq!(u32_at(&mut o), 1, "n_stream");
    let cells = u32_at(&mut o) as usize;
    for _ in 0..cells {
        let _pos = u32_at(&mut o);
        let k = u32_at(&mut o) as usize;
        o += 4 * k;
    }
    assert_eq!(
        u32_at(&mut o),
        0,
        "v_trans (flash attention is on by default)"
    );
    let n_layer = u32_at(&mut o) as usize;
    let head = b[..o].to_vec();
    let mut data = Vec::new();
    for _ in 0..2 * n_layer {
        assert_eq!(u32_at(&mut o), 1, "f16 cache type");
        let row = u64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize;
        o += 8;
        let bytes = &b[o..o + cells * row];
        o += cells * row;
        data.push(
            bytes
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect(),
        );
    }
    assert_eq!(o, b.len(), "trailing bytes in {}", path.display());
    Parsed { tokens, head, data }
}

/// IEEE half to f32 (normal and subnormal; the cache holds no inf or NaN here).
fn f16(bits: u16) -> f32 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((bits >> 10) & 0x1f) as i32;
    let man = (bits & 0x3ff) as f32;
    sign * if exp == 0 {
        man * 2f32.powi(-24)
    } else {
        (1.0 + man / 1024.0) * 2f32.powi(exp - 15)
    }
}

#[test]
fn a_session_written_by_llamacpp_loads_and_gives_its_text() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = test_fixtures::scratch_dir("prompt-cache-llamacpp");
    let session = dir.join("llamacpp.session");
    std::fs::copy(fixture("llamacpp-hello.session"), &session).unwrap();
    let (out, err) = run(&model, PROMPT, &session, &["--prompt-cache-ro"]);
    assert!(
        err.contains("loaded a session with prompt size of 4 tokens"),
        "{err}"
    );
    assert!(
        err.contains("session file has exact match for prompt!"),
        "{err}"
    );
    assert!(err.contains("replayed last token from session"), "{err}");
    let want = std::fs::read_to_string(fixture("llamacpp-hello.txt")).unwrap();
    assert_eq!(out, want);
    assert_eq!(
        std::fs::read(&session).unwrap(),
        std::fs::read(fixture("llamacpp-hello.session")).unwrap(),
        "a read-only cache must stay as it was"
    );
}

#[test]
fn a_session_written_here_has_llamacpps_layout_and_is_reused() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = test_fixtures::scratch_dir("prompt-cache-ours");
    let session = dir.join("ours.session");
    let _ = std::fs::remove_file(&session);
    let (first, err) = run(&model, PROMPT, &session, &[]);
    assert!(
        err.contains("session file does not exist, will create."),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "saved session before last token to {}, n_new = 4",
            session.display()
        )),
        "{err}"
    );
    assert_eq!(first, no_cache_run(&model, PROMPT));

    // same header and cells as llama.cpp's file; the cached K/V equal up to f16 rounding of
    // sums taken in another order
    let ours = parse(&session);
    let theirs = parse(&fixture("llamacpp-hello.session"));
    assert_eq!(ours.tokens, theirs.tokens);
    assert_eq!(ours.head, theirs.head);
    assert_eq!(ours.data.len(), theirs.data.len());
    for (a, b) in ours.data.iter().zip(&theirs.data) {
        assert_eq!(a.len(), b.len());
        for (&x, &y) in a.iter().zip(b) {
            let (x, y) = (f16(x), f16(y));
            assert!((x - y).abs() <= 2e-3 * y.abs().max(1.0), "{x} vs {y}");
        }
    }

    // the second run evaluates only the replayed token and says so
    let (second, err) = run(&model, PROMPT, &session, &[]);
    assert!(
        err.contains("session file has exact match for prompt!"),
        "{err}"
    );
    assert!(err.contains("replayed last token from session"), "{err}");
    assert!(!err.contains("saved session before last token"), "{err}");
    assert_eq!(second, first);

    // a longer prompt reuses the cached part and saves the new one
    let longer = "Hello my name is John and";
    let (out, err) = run(&model, longer, &session, &[]);
    assert!(err.contains("replayed last token from session"), "{err}");
    assert!(err.contains("session file matches 4 / "), "{err}");
    assert_eq!(out, no_cache_run(&model, longer));
}

#[test]
fn prompt_cache_all_saves_the_generated_tokens_and_ro_saves_nothing() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = test_fixtures::scratch_dir("prompt-cache-all");
    let session = dir.join("all.session");
    let _ = std::fs::remove_file(&session);
    let (out, err) = run(&model, PROMPT, &session, &["--prompt-cache-ro"]);
    assert!(!session.exists(), "--prompt-cache-ro wrote a file:\n{err}");

    let (out_all, err) = run(&model, PROMPT, &session, &["--prompt-cache-all"]);
    let line = format!(
        "\nllama_completion: saving final output to session file '{}'\n",
        session.display()
    );
    assert!(out_all.contains(&line), "{out_all:?}");
    assert_eq!(out_all.replace(&line, ""), out);
    assert!(err.contains("saved final session to"), "{err}");
    // the 4 prompt tokens and the 8 generated ones
    assert_eq!(parse(&session).tokens.len(), 12);
}

#[test]
fn bad_session_files_are_refused_with_the_cause() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = test_fixtures::scratch_dir("prompt-cache-bad");
    let good = std::fs::read(fixture("llamacpp-hello.session")).unwrap();
    let cases: [(&str, Vec<u8>, &str); 3] = [
        (
            "truncated",
            good[..good.len() - 7].to_vec(),
            "unexpectedly reached end of file",
        ),
        (
            "magic",
            [b"xxxx".as_slice(), &good[4..]].concat(),
            "unknown (magic, version) for session file: 78787878, 0000000a",
        ),
        (
            "trailing",
            [good.as_slice(), b"junk"].concat(),
            "did not read all of the session file data!",
        ),
    ];
    for (name, bytes, want) in cases {
        let p = dir.join(format!("{name}.session"));
        std::fs::write(&p, &bytes).unwrap();
        let o = completion(&[
            "-m",
            model.to_str().unwrap(),
            "-p",
            PROMPT,
            "-n",
            "2",
            "-no-cnv",
            "--prompt-cache",
            p.to_str().unwrap(),
        ]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{name}:\n{err}");
        assert!(err.contains(want), "{name}: want {want:?} in\n{err}");
        assert!(
            err.contains("failed to load session file"),
            "{name}:\n{err}"
        );
        assert!(!err.contains("panicked"), "{name}:\n{err}");
        assert_eq!(std::fs::read(&p).unwrap(), bytes, "{name}: file changed");
    }
}
