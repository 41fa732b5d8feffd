//! LoRA adapters (--lora, --lora-scaled) on the reference model: llama.cpp's greedy text for
//! each adapter and scale, its loader's log lines, and its refusals (tests/fixtures/lora/).

use std::path::{Path, PathBuf};
use std::process::Command;
use test_fixtures::text;

fn fixture(name: &str) -> String {
    let p = test_fixtures::repo_root()
        .join("tests/fixtures/lora")
        .join(name);
    // llama.cpp's output on this CPU's SIMD class (avx512/ on AVX-512 CPUs, see the README)
    let p = test_fixtures::simd_fixture(&p);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The two adapters of the fixtures' README, written again into a scratch directory.
fn adapters(model: &Path, dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let script = test_fixtures::repo_root().join("scripts/make-lora-adapter.py");
    let (a, b) = (dir.join("a.gguf"), dir.join("b.gguf"));
    #[rustfmt::skip]
    let jobs: [(&Path, &[&str]); 2] = [
        (&a, &["--std", "0.05"]),
        (&b, &["--targets", "token_embd,output,attn_q", "--type", "f16", "--seed", "3",
            "--std", "0.05", "--alpha", "0"]),
    ];
    for (out, args) in jobs {
        match Command::new("python3")
            .arg(&script)
            .arg(model)
            .arg(out)
            .args(args)
            .output()
        {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                test_fixtures::skip(&format!("make-lora-adapter.py failed: {}", text(&o.stderr)));
                return None;
            }
            Err(e) => {
                test_fixtures::skip(&format!("python3 not runnable: {e}"));
                return None;
            }
        }
    }
    Some((a, b))
}

fn complete(model: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "-m",
        model.to_str().unwrap(),
        "-p",
        "Hello my name is",
        "-n",
        "24",
        "--temp",
        "0",
        "-no-cnv",
        "-c",
        "256",
        "-t",
        "2",
        "-lv",
        "4",
    ];
    args.extend_from_slice(extra);
    test_fixtures::run_tool("llama-completion", &args)
}

#[test]
fn greedy_text_with_adapters_matches_llama_cpp() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = test_fixtures::scratch_dir("lora-greedy");
    let Some((a, b)) = adapters(&model, &dir) else {
        return;
    };
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let b_half = format!("{b}:0.5");
    let b_two = format!("{b}:2");
    let a_zero = format!("{a}:0");
    let a_neg = format!("{a}:-1.5");
    let cases: [(&str, Vec<&str>); 5] = [
        ("a", vec!["--lora", a]),
        ("b-scaled-0.5", vec!["--lora-scaled", &b_half]),
        ("a+b-scaled-2", vec!["--lora", a, "--lora-scaled", &b_two]),
        ("a-scaled-0", vec!["--lora-scaled", &a_zero]),
        ("a-scaled-neg1.5", vec!["--lora-scaled", &a_neg]),
    ];
    let mut texts = Vec::new();
    for (name, args) in &cases {
        let o = complete(&model, args);
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        let got = text(&o.stdout);
        assert_eq!(got, fixture(&format!("{name}.greedy.txt")), "{name}");
        texts.push(got);
        if *name == "a+b-scaled-2" {
            let log: Vec<String> = text(&o.stderr)
                .lines()
                .filter(|l| l.contains("llama_adapter_lora"))
                .map(|l| l.split_once(' ').map_or(l, |x| x.1).to_string())
                .map(|l| l.replace(&format!("{}/", dir.display()), "/tmp/lora/"))
                .collect();
            let want = fixture("a+b.lora-log.txt");
            assert_eq!(log, want.lines().collect::<Vec<_>>());
        }
    }
    // the adapters change the text; scale 0 leaves the base model's
    assert_ne!(texts[0], texts[3]);
    assert_ne!(texts[1], texts[3]);
    let base = complete(&model, &[]);
    assert_eq!(text(&base.stdout), texts[3]);
}

#[test]
fn perplexity_with_an_adapter_is_llama_cpp_s() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = test_fixtures::scratch_dir("lora-ppl");
    let Some((a, _)) = adapters(&model, &dir) else {
        return;
    };
    let text_file = test_fixtures::shared_dir().join("reference/text/gpl-3.txt");
    #[rustfmt::skip]
    let o = test_fixtures::run_tool("llama-perplexity", &["-m", model.to_str().unwrap(),
        "-f", text_file.to_str().unwrap(), "-c", "128", "--chunks", "3", "-t", "2",
        "--lora", a.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let got = err
        .lines()
        .find_map(|l| l.find("Final estimate").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("no final estimate in:\n{err}"));
    assert_eq!(got, fixture("a.perplexity.txt").trim_end());
}

/// Builds a copy of adapter `src` with one key or tensor changed, through the gguf package.
fn edited(src: &Path, out: &Path, edit: &str) -> bool {
    let py = r#"
import sys, gguf
r = gguf.GGUFReader(sys.argv[1])
edit = sys.argv[3]
arch = "qwen2" if edit == "arch" else "llama"
w = gguf.GGUFWriter(sys.argv[2], arch)
w.add_string("general.type", "model" if edit == "type" else "adapter")
w.add_string("adapter.type", "lora")
w.add_float32("adapter.lora.alpha", 16.0)
for i, t in enumerate(r.tensors):
    name = t.name
    if edit == "unpaired" and name.endswith(".lora_b") and i == 1:
        continue
    if edit == "unknown" and i < 2:
        name = name.replace("attn_q", "attn_zz")
    if edit == "suffix" and i == 0:
        name = name + "_x"
    data = t.data
    if edit == "shape" and i == 0:
        data = data.reshape(-1, 4)
    if edit == "rank" and i == 0:
        data = data[:4]
    w.add_tensor(name, data)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
"#;
    Command::new("python3")
        .args(["-c", py])
        .arg(src)
        .arg(out)
        .arg(edit)
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn bad_adapters_are_refused_with_llama_cpp_s_reason() {
    let Some(model) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let dir = test_fixtures::scratch_dir("lora-bad");
    let Some((a, _)) = adapters(&model, &dir) else {
        return;
    };
    let m = model.to_str().unwrap();
    let missing = dir.join("missing.gguf");
    let mut cases: Vec<(PathBuf, String)> = vec![
        (
            missing.clone(),
            format!(
                "llama_adapter_lora_init: failed to open '{}': No such file or directory",
                missing.display()
            ),
        ),
        (
            model.clone(),
            "failed to apply lora adapter: expect general.type to be 'adapter', but got: ".into(),
        ),
    ];
    #[rustfmt::skip]
    let edits = [
        ("type", "expect general.type to be 'adapter', but got: model"),
        ("arch", "model arch and LoRA arch mismatch"),
        ("unpaired", "LoRA tensor pair for 'blk.0.attn_q.weight' is missing one component"),
        ("unknown", "LoRA tensor 'blk.0.attn_zz.weight' does not exist in base model (hint: maybe wrong base model?)"),
        ("suffix", "LoRA tensor 'blk.0.attn_q.weight.lora_a_x' has unexpected suffix"),
        ("shape", "tensor 'blk.0.attn_q.weight' has incorrect shape (hint: maybe wrong base model?)"),
        ("rank", "lora_a tensor is not transposed (hint: adapter from \"finetune\" example is no longer supported)"),
    ];
    for (edit, why) in edits {
        let out = dir.join(format!("{edit}.gguf"));
        assert!(edited(&a, &out, edit), "could not write the {edit} adapter");
        cases.push((out, format!("failed to apply lora adapter: {why}")));
    }
    for (path, why) in cases {
        let p = path.to_str().unwrap();
        let o = test_fixtures::run_tool(
            "llama-completion",
            &["-m", m, "-p", "hi", "-n", "2", "-no-cnv", "--lora", p],
        );
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{p}: {err}");
        assert!(err.contains(&why), "{p}: want {why:?} in:\n{err}");
        assert!(
            err.contains(&format!("failed to load lora adapter '{p}'")),
            "{p}: {err}"
        );
    }
}
