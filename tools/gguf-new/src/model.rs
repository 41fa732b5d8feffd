//! The model to write: shape from a preset and flags, its KV pairs, its tensors, and the
//! streaming write with a progress bar.

use std::path::Path;
use std::time::Instant;

use gguf::{GgufWriter, Value};
use indicatif::{ProgressBar, ProgressStyle};

use crate::vocab::{self, Vocab};
use crate::weights::{self, Init, STEP};
use crate::{Arch, Args};

#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    pub arch: Arch,
    pub layers: u32,
    pub embd: u32,
    pub heads: u32,
    pub heads_kv: u32,
    pub ff: u32,
    pub ctx: u32,
    pub n_vocab: u64,
    pub rope_freq_base: f32,
    pub rms_eps: f32,
    /// the sliding window written for architectures that have one
    pub swa: u32,
    /// --swa was given: architectures whose window is optional (olmo2) get one
    pub swa_set: bool,
    pub moe: crate::moe::MoeShape,
    /// mistral3's YaRN factor (--yarn)
    pub yarn: Option<f32>,
    /// NextN layers after `layers` (--nextn)
    pub nextn: u32,
    /// deepseek2: one fused ffn_gate_up_exps stack (--fused-gate-up-exps)
    pub fused_gate_up: bool,
    /// deepseek2: the older un-split attn_kv_b form (--mla-kv-b)
    pub kv_b: bool,
}

/// Known shapes. `tiny` is the reference model of make-tiny-model.py.
pub fn preset(name: &str) -> Option<Shape> {
    let s =
        |arch, layers, embd, heads, heads_kv, ff, ctx, n_vocab, rope_freq_base, rms_eps| Shape {
            arch,
            layers,
            embd,
            heads,
            heads_kv,
            ff,
            ctx,
            n_vocab,
            rope_freq_base,
            rms_eps,
            swa: 4096,
            swa_set: false,
            moe: Default::default(),
            yarn: None,
            nextn: 0,
            fused_gate_up: false,
            kv_b: false,
        };
    Some(match name {
        "tiny" => s(Arch::Llama, 4, 256, 8, 2, 704, 4096, 151936, 500000.0, 1e-5),
        "qwen2-0.5b" => s(Arch::Qwen2, 24, 896, 14, 2, 4864, 32768, 151936, 1e6, 1e-6),
        "tinyllama-1.1b" => s(
            Arch::Llama,
            22,
            2048,
            32,
            4,
            5632,
            2048,
            32000,
            10000.0,
            1e-5,
        ),
        "llama-7b" => s(
            Arch::Llama,
            32,
            4096,
            32,
            32,
            11008,
            4096,
            32000,
            10000.0,
            1e-5,
        ),
        "llama3-8b" => s(
            Arch::Llama,
            32,
            4096,
            32,
            8,
            14336,
            8192,
            128256,
            500000.0,
            1e-5,
        ),
        _ => return None,
    })
}

pub const PRESETS: [&str; 5] = [
    "tiny",
    "qwen2-0.5b",
    "tinyllama-1.1b",
    "llama-7b",
    "llama3-8b",
];

fn resolve_shape(args: &Args) -> Result<Shape, String> {
    let base = match &args.preset {
        Some(p) => preset(p)
            .ok_or_else(|| format!("unknown preset '{p}' (known: {})", PRESETS.join(", ")))?,
        None => preset("tiny").expect("tiny preset exists"),
    };
    let heads = args.heads.unwrap_or(base.heads);
    // Keep the preset's KV heads when they still divide the heads, else plain multi-head.
    let heads_kv = args
        .heads_kv
        .unwrap_or(if heads.is_multiple_of(base.heads_kv) {
            base.heads_kv
        } else {
            heads
        });
    let s = Shape {
        arch: args.arch.unwrap_or(base.arch),
        layers: args.layers.unwrap_or(base.layers),
        embd: args.embd.unwrap_or(base.embd),
        heads,
        heads_kv,
        ff: args.ff.unwrap_or(base.ff),
        ctx: args.ctx.unwrap_or(base.ctx),
        n_vocab: args.vocab_size.unwrap_or(base.n_vocab),
        rope_freq_base: args.rope_freq_base.unwrap_or(base.rope_freq_base),
        rms_eps: args.rms_eps.unwrap_or(base.rms_eps),
        swa: args.swa.unwrap_or(base.swa),
        swa_set: args.swa.is_some(),
        moe: crate::moe::MoeShape {
            experts: args.experts.unwrap_or(base.moe.experts),
            experts_used: args.experts_used.unwrap_or(base.moe.experts_used),
            ff_exp: args.ff_exp,
            ff_shexp: args.ff_shexp,
            shared: args.experts_shared.unwrap_or(base.moe.shared),
            dense_lead: args.dense_lead.unwrap_or(base.moe.dense_lead),
            scales: args.expert_scales,
        },
        yarn: args.yarn,
        nextn: args.nextn.unwrap_or(0),
        fused_gate_up: args.fused_gate_up_exps,
        kv_b: args.mla_kv_b,
    };
    if let Some(f) = s.yarn {
        if s.arch != Arch::Mistral3 {
            return Err("--yarn applies to mistral3 only".into());
        }
        if f.is_nan() || f <= 1.0 {
            return Err("--yarn must be a factor above 1".into());
        }
    }
    crate::moe::check(&s)?;
    crate::deepseek2::check(&s)?;
    crate::nextn::check(&s)?;
    for (name, v) in [
        ("layers", s.layers),
        ("embd", s.embd),
        ("heads", s.heads),
        ("heads-kv", s.heads_kv),
        ("ff", s.ff),
        ("ctx", s.ctx),
        ("swa", s.swa),
    ] {
        if v == 0 {
            return Err(format!("--{name} must be at least 1"));
        }
    }
    if args.vocab_size.is_some_and(|n| n < 259) {
        return Err(
            "--vocab-size must be at least 259 (256 byte tokens and 3 control tokens)".into(),
        );
    }
    if !s.embd.is_multiple_of(s.heads) {
        return Err(format!(
            "--embd {} is not a multiple of --heads {}",
            s.embd, s.heads
        ));
    }
    if !s.heads.is_multiple_of(s.heads_kv) {
        return Err(format!(
            "--heads {} is not a multiple of --heads-kv {}",
            s.heads, s.heads_kv
        ));
    }
    Ok(s)
}

/// One tensor to write.
pub struct Spec {
    pub name: String,
    pub shape: Vec<u64>,
    pub ty: ggml::Type,
    pub init: Init,
}

/// Tensor names, shapes (ggml order: row length first) and initial values, in file order.
pub fn tensors(s: &Shape, n_vocab: u64, wtype: ggml::Type) -> Vec<Spec> {
    if let Some(t) = crate::dense::tensors(s, n_vocab, wtype) {
        return t;
    }
    let (e, ff) = (s.embd as u64, s.ff as u64);
    let kv = s.heads_kv as u64 * (e / s.heads as u64);
    let std = |fan_in: u64| Init::Normal((fan_in as f32).powf(-0.5));
    let mat = |name: String, shape: Vec<u64>, init| Spec {
        name,
        shape,
        ty: wtype,
        init,
    };
    let vec = |name: String, len: u64, init| Spec {
        name,
        shape: vec![len],
        ty: ggml::Type::F32,
        init,
    };
    let mut out = vec![mat(
        "token_embd.weight".into(),
        vec![e, n_vocab],
        Init::Normal(1.0),
    )];
    let head = e / s.heads as u64;
    let gemma = s.arch == Arch::Gemma2;
    for il in 0..s.layers + s.nextn {
        let p = |n: &str| format!("blk.{il}.{n}");
        out.push(vec(p("attn_norm.weight"), e, Init::Norm));
        if crate::deepseek2::is_deepseek2(s.arch) {
            out.extend(crate::deepseek2::attn_tensors(s, il, wtype));
            out.push(vec(p("ffn_norm.weight"), e, Init::Norm));
            out.extend(crate::moe::ffn_tensors(s, il, wtype));
            out.extend(crate::nextn::tensors(s, il, n_vocab, wtype));
            continue;
        }
        out.push(mat(p("attn_q.weight"), vec![e, e], std(e)));
        if matches!(s.arch, Arch::Qwen2 | Arch::Qwen2moe) {
            out.push(vec(p("attn_q.bias"), e, Init::Normal(0.02)));
        }
        out.push(mat(p("attn_k.weight"), vec![e, kv], std(e)));
        if matches!(s.arch, Arch::Qwen2 | Arch::Qwen2moe) {
            out.push(vec(p("attn_k.bias"), kv, Init::Normal(0.02)));
        }
        out.push(mat(p("attn_v.weight"), vec![e, kv], std(e)));
        if matches!(s.arch, Arch::Qwen2 | Arch::Qwen2moe) {
            out.push(vec(p("attn_v.bias"), kv, Init::Normal(0.02)));
        }
        out.push(mat(p("attn_output.weight"), vec![e, e], std(e)));
        if matches!(s.arch, Arch::Qwen3 | Arch::Qwen3moe) {
            out.push(vec(p("attn_q_norm.weight"), head, Init::Norm));
            out.push(vec(p("attn_k_norm.weight"), head, Init::Norm));
        }
        if s.arch == Arch::Olmoe {
            out.push(vec(p("attn_q_norm.weight"), e, Init::Norm));
            out.push(vec(p("attn_k_norm.weight"), e, Init::Norm));
        }
        if gemma {
            out.push(vec(p("post_attention_norm.weight"), e, Init::Norm));
        }
        out.push(vec(p("ffn_norm.weight"), e, Init::Norm));
        if s.arch.is_moe() {
            out.extend(crate::moe::ffn_tensors(s, il, wtype));
            continue;
        }
        out.push(mat(p("ffn_gate.weight"), vec![e, ff], std(e)));
        out.push(mat(p("ffn_up.weight"), vec![e, ff], std(e)));
        out.push(mat(p("ffn_down.weight"), vec![ff, e], std(ff)));
        if gemma {
            out.push(vec(p("post_ffw_norm.weight"), e, Init::Norm));
        }
    }
    out.push(vec("output_norm.weight".into(), e, Init::Norm));
    // gemma2 always ties the output head to the embedding
    if !gemma {
        out.push(mat("output.weight".into(), vec![e, n_vocab], std(e)));
    }
    out
}

/// The KV pairs in make-tiny-model.py's order, then the tokenizer's.
fn kv_pairs(s: &Shape, name: &str, ftype: u32, vocab: Vocab) -> Vec<(String, Value)> {
    let a = s.arch.name();
    let mut kv: Vec<(String, Value)> = vec![
        ("general.architecture".into(), a.into()),
        ("general.name".into(), name.into()),
        (format!("{a}.context_length"), Value::U32(s.ctx)),
        (format!("{a}.embedding_length"), Value::U32(s.embd)),
        (format!("{a}.block_count"), Value::U32(s.layers + s.nextn)),
        (format!("{a}.feed_forward_length"), Value::U32(s.ff)),
        (format!("{a}.attention.head_count"), Value::U32(s.heads)),
        (
            format!("{a}.attention.head_count_kv"),
            Value::U32(s.heads_kv),
        ),
        (format!("{a}.rope.freq_base"), Value::F32(s.rope_freq_base)),
        (
            format!("{a}.attention.layer_norm_rms_epsilon"),
            Value::F32(s.rms_eps),
        ),
        ("general.file_type".into(), Value::U32(ftype)),
        (
            format!("{a}.rope.dimension_count"),
            Value::U32(s.embd / s.heads),
        ),
    ];
    if s.arch == Arch::Gemma2 {
        // gemma2's soft-caps and window as convert_hf_to_gguf writes them
        let head = s.embd / s.heads;
        kv.extend([
            (format!("{a}.attention.key_length"), Value::U32(head)),
            (format!("{a}.attention.value_length"), Value::U32(head)),
            (format!("{a}.attn_logit_softcapping"), Value::F32(50.0)),
            (format!("{a}.final_logit_softcapping"), Value::F32(30.0)),
            (format!("{a}.attention.sliding_window"), Value::U32(s.swa)),
        ]);
    }
    // the dense architectures' own keys replace common ones of the same name
    for (key, v) in crate::dense::kv(s)
        .into_iter()
        .chain(crate::deepseek2::kv(s))
    {
        match kv.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = v,
            None => kv.push((key, v)),
        }
    }
    kv.extend(crate::moe::kv(s));
    kv.extend(crate::nextn::kv(s));
    kv.extend(vocab.kv);
    kv
}

fn human_bytes(n: u64) -> String {
    if n >= 1 << 30 {
        format!("{:.2} GiB", n as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.2} MiB", n as f64 / (1u64 << 20) as f64)
    }
}

/// Larger files need `--force`: a slip in a shape (`--embd 100000`) would otherwise fill the
/// disk before anyone notices. The 7B presets in f32 are past it on purpose.
pub const SIZE_LIMIT: u64 = 4 << 30;

/// Refuses, before anything is written, a file over `SIZE_LIMIT` without `force`, and one that
/// does not fit in the free space of the output's file system even with it.
fn check_size(size: u64, output: &Path, force: bool) -> Result<(), String> {
    if size > SIZE_LIMIT && !force {
        return Err(format!(
            "the file would take {} ({size} bytes), more than the limit of {}; pass --force to write it",
            human_bytes(size),
            human_bytes(SIZE_LIMIT)
        ));
    }
    let dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if let Some(free) = free_bytes(dir) {
        if size > free {
            return Err(format!(
                "the file would take {} ({size} bytes) but only {} are free in {}",
                human_bytes(size),
                human_bytes(free),
                dir.display()
            ));
        }
    }
    Ok(())
}

/// Bytes an unprivileged process may still write on `dir`'s file system; None if unknown.
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: `c` is a valid C string; `st` is a plain C struct that statvfs fills in and that
    // is read only when it succeeded.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut st) != 0 {
            return None;
        }
        // the field types differ between targets (u32 on some 32-bit ones)
        #[allow(clippy::unnecessary_cast)]
        Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
    }
}

pub fn run(args: &Args) -> Result<(), String> {
    let mut shape = resolve_shape(args)?;
    let vocab = match &args.vocab {
        Some(path) => {
            if args.vocab_size.is_some() {
                return Err(
                    "--vocab-size applies to the built-in vocabulary, not to --vocab".into(),
                );
            }
            vocab::from_file(path)?
        }
        None => {
            let pre = if shape.arch == Arch::Qwen2 {
                "qwen2"
            } else {
                "default"
            };
            vocab::builtin(shape.n_vocab, pre)
        }
    };
    shape.n_vocab = vocab.n_tokens;
    let wtype = args.ty.ty;
    let name = args.name.clone().unwrap_or_else(|| {
        format!(
            "random-{}",
            args.preset.as_deref().unwrap_or(shape.arch.name())
        )
    });

    let mut w = GgufWriter::new();
    for (k, v) in kv_pairs(&shape, &name, args.ty.ftype, vocab) {
        w.add_kv(k, v).map_err(|e| e.to_string())?;
    }
    let specs = tensors(&shape, shape.n_vocab, wtype);
    for t in &specs {
        w.add_tensor(t.name.clone(), t.ty, &t.shape)
            .map_err(|e| e.to_string())?;
    }
    let total: u64 = w.tensors().iter().map(|t| t.size).sum();
    let n_params: u64 = w.tensors().iter().map(|t| t.n_elements()).sum();
    check_size(w.file_size(), &args.output, args.force)?;

    let started = Instant::now();
    let mut file = w.create(&args.output).map_err(|e| e.to_string())?;
    let bar = if args.quiet || total < 256 << 20 {
        ProgressBar::hidden()
    } else {
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta} {msg}",
            )
            .expect("valid template"),
        );
        bar
    };
    let mut buf = vec![0f32; STEP];
    for (i, t) in specs.iter().enumerate() {
        bar.set_message(t.name.clone());
        let n: u64 = t.shape.iter().product();
        let row = t.shape[0];
        // Whole rows per step, so that block-quantized types convert cleanly later.
        let step = ((STEP as u64 / row).max(1) * row) as usize;
        if buf.len() < step {
            buf.resize(step, 0.0);
        }
        let mut done = 0u64;
        while done < n {
            let len = (n - done).min(step as u64) as usize;
            fill_rows(args.seed, i as u64, t.init, done, &mut buf[..len]);
            let bytes = weights::convert(t.ty, &buf[..len], row as usize)?;
            file.write_data(&bytes).map_err(|e| e.to_string())?;
            bar.inc(bytes.len() as u64);
            done += len as u64;
        }
    }
    file.finish().map_err(|e| e.to_string())?;
    bar.finish_and_clear();
    eprintln!(
        "wrote {}: {} {}, {} layers, {} tokens, {} parameters, {} in {:.1} s",
        args.output.display(),
        shape.arch.name(),
        wtype.name(),
        shape.layers,
        shape.n_vocab,
        gguf::display::format_params(n_params),
        human_bytes(total),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `weights::fill` for a range that may not start on a chunk boundary: generate from the chunk
/// boundary before it and copy the wanted part.
fn fill_rows(seed: u64, tensor: u64, init: Init, start: u64, out: &mut [f32]) {
    const CHUNK: u64 = 1 << 16;
    let lead = (start % CHUNK) as usize;
    if lead == 0 {
        weights::fill(seed, tensor, init, start, out);
    } else {
        let mut tmp = vec![0f32; lead + out.len()];
        weights::fill(seed, tensor, init, start - lead as u64, &mut tmp);
        out.copy_from_slice(&tmp[lead..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_preset_has_reference_tensors() {
        let s = preset("tiny").unwrap();
        let t = tensors(&s, 151936, ggml::Type::F32);
        assert_eq!(t.len(), 39);
        assert_eq!(t[0].shape, vec![256, 151936]);
        assert_eq!(t[3].name, "blk.0.attn_k.weight");
        assert_eq!(t[3].shape, vec![256, 64]);
        let n: u64 = t.iter().map(|x| x.shape.iter().product::<u64>()).sum();
        assert_eq!(n, 80_611_584);
    }

    #[test]
    fn qwen2_adds_biases() {
        let s = preset("qwen2-0.5b").unwrap();
        let t = tensors(&s, 100, ggml::Type::F16);
        assert_eq!(t.len(), 2 + 24 * 12 + 1);
        let kb = t.iter().find(|x| x.name == "blk.0.attn_k.bias").unwrap();
        assert_eq!((kb.shape.clone(), kb.ty), (vec![128], ggml::Type::F32));
    }

    #[test]
    fn fill_rows_matches_whole_generation() {
        let mut whole = vec![0f32; 200_000];
        fill_rows(3, 1, Init::Normal(1.0), 0, &mut whole);
        let mut part = vec![0f32; 100_000];
        fill_rows(3, 1, Init::Normal(1.0), 70_000, &mut part);
        assert_eq!(&whole[70_000..170_000], &part[..]);
    }
}
