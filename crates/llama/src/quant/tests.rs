use super::*;

fn tiny_model() -> ModelInfo {
    ModelInfo {
        arch: "llama".into(),
        n_layer: 4,
        n_expert: 0,
        n_head: 8,
        n_head_kv: 2,
        is_70b: false,
    }
}

/// The tensors of one file section of shared/reference/quant/sha256.txt with their types.
fn reference_section(file_suffix: &str) -> Vec<(TensorDesc, Type)> {
    let path = test_fixtures::shared_dir().join("reference/quant/sha256.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    let mut in_section = false;
    for line in text.lines() {
        if !line.starts_with(' ') {
            in_section = line.trim_end().ends_with(file_suffix);
            continue;
        }
        if !in_section {
            continue;
        }
        let (head, shape) = line.split_once('[').expect("shape");
        let f: Vec<&str> = head.split_whitespace().collect();
        let mut ne = [1u64; 4];
        for (i, d) in shape.trim_end_matches(']').split(',').enumerate() {
            ne[i] = d.trim().parse().unwrap();
        }
        let ty = Type::from_name(f[2]).unwrap();
        out.push((
            TensorDesc {
                name: f[1].to_string(),
                ne,
                ty: Type::F32,
            },
            ty,
        ));
    }
    out
}

fn check_reference(file_suffix: &str, ftype: Ftype) {
    let section = reference_section(file_suffix);
    assert_eq!(section.len(), 39, "{file_suffix}");
    // The reference lists tensors in llama-quantize's output order, which is the loader's.
    let names: Vec<String> = section.iter().map(|(t, _)| t.name.clone()).collect();
    let mut sorted = names.clone();
    loader_order(&mut sorted);
    assert_eq!(names, sorted);
    let model = tiny_model();
    let params = QuantizeParams::new(ftype);
    let name_refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    let mut chooser = TypeChooser::new(&model, &params, &name_refs);
    for (t, want) in &section {
        let got = chooser.choose(t).unwrap();
        assert_eq!(got.ty, *want, "{file_suffix}: {}", t.name);
    }
}

#[test]
fn q4_k_m_matches_llama_quantize() {
    check_reference("q4_k_m.gguf", Ftype::Q4KM);
}

#[test]
fn q4_0_q8_0_f16_match_llama_quantize() {
    check_reference("q4_0.gguf", Ftype::Q4_0);
    check_reference("q8_0.gguf", Ftype::Q8_0);
    check_reference("f16.gguf", Ftype::F16);
}

fn desc(name: &str, ne0: u64, ne1: u64) -> TensorDesc {
    TensorDesc {
        name: name.into(),
        ne: [ne0, ne1, 1, 1],
        ty: Type::F32,
    }
}

fn run(
    ftype: Ftype,
    edit: impl FnOnce(&mut QuantizeParams),
    tensors: &[TensorDesc],
) -> Vec<Choice> {
    let model = tiny_model();
    let mut params = QuantizeParams::new(ftype);
    edit(&mut params);
    let names: Vec<&str> = tensors.iter().map(|t| t.name.as_str()).collect();
    TypeChooser::new(&model, &params, &names)
        .choose_all(tensors)
        .unwrap()
}

#[test]
fn fallback_warns_and_picks_a_32_block_type() {
    let c = run(
        Ftype::Q4KM,
        |_| {},
        &[desc("blk.0.ffn_down.weight", 704, 256)],
    );
    assert_eq!(c[0].ty, Type::Q5_0);
    assert_eq!(
        c[0].warnings,
        vec![format!(
            "warning: {:<36} - ncols    704 not divisible by 256 (required for type    q4_K) -> falling back to    q5_0\n",
            "blk.0.ffn_down.weight"
        )]
    );
    // A row of 100 fits no block: F16.
    let c = run(Ftype::Q6K, |_| {}, &[desc("blk.0.attn_q.weight", 100, 8)]);
    assert_eq!(c[0].ty, Type::F16);
    assert!(c[0].warnings[0].contains("(WARNING: must use F16 due to unusual shape) "));
}

#[test]
fn overrides_pure_and_leave_output() {
    let ts = [
        desc("output.weight", 256, 1000),
        desc("token_embd.weight", 256, 1000),
        desc("blk.0.attn_v.weight", 256, 64),
    ];
    let c = run(Ftype::Q4KM, |p| p.pure = true, &ts);
    assert_eq!(c.iter().map(|c| c.ty).collect::<Vec<_>>(), [Type::Q4K; 3]);
    let c = run(Ftype::Q4KM, |p| p.quantize_output_tensor = false, &ts);
    assert_eq!(c[0].ty, Type::F32);
    let c = run(
        Ftype::Q4_0,
        |p| {
            p.output_tensor_type = Some(Type::Q8_0);
            p.token_embedding_type = Some(Type::F16);
            p.tensor_types = vec![(Regex::new("attn_v").unwrap(), Type::Q5_1)];
        },
        &ts,
    );
    assert_eq!(
        c.iter().map(|c| c.ty).collect::<Vec<_>>(),
        [Type::Q8_0, Type::F16, Type::Q5_1]
    );
    assert!(c[2].warnings[0].contains("applying manual override: q4_0 -> q5_1"));
    // Without output.weight the embeddings are tied and follow the output rule.
    let c = run(Ftype::Q4_0, |_| {}, &ts[1..2]);
    assert_eq!(c[0].ty, Type::Q6K);
}

#[test]
fn norms_and_vectors_are_never_quantized() {
    let ts = [
        TensorDesc {
            name: "blk.0.attn_norm.weight".into(),
            ne: [256, 1, 1, 1],
            ty: Type::F32,
        },
        desc("blk.0.ffn_norm.weight", 256, 4),
        desc("blk.0.attn_q.bias", 256, 4),
        desc("blk.0.ffn_gate_inp.weight", 256, 8),
    ];
    let c = run(Ftype::Q8_0, |_| {}, &ts);
    assert!(c.iter().all(|c| c.ty == Type::F32));
}

#[test]
fn mixtures_follow_layer_rules() {
    let mut ts = Vec::new();
    for il in 0..8 {
        ts.push(desc(&format!("blk.{il}.attn_v.weight"), 256, 64));
        ts.push(desc(&format!("blk.{il}.ffn_down.weight"), 512, 256));
        ts.push(desc(&format!("blk.{il}.attn_output.weight"), 256, 256));
    }
    let model = ModelInfo {
        n_layer: 8,
        ..tiny_model()
    };
    let params = QuantizeParams::new(Ftype::Q3KM);
    let names: Vec<&str> = ts.iter().map(|t| t.name.as_str()).collect();
    let c = TypeChooser::new(&model, &params, &names)
        .choose_all(&ts)
        .unwrap();
    let v: Vec<Type> = c.iter().step_by(3).map(|c| c.ty).collect();
    assert_eq!(&v[..3], [Type::Q5K, Type::Q5K, Type::Q4K]);
    let down: Vec<Type> = c.iter().skip(1).step_by(3).map(|c| c.ty).collect();
    assert_eq!(down, [Type::Q4K; 8]); // n_layer/16 = 0 layers of Q5_K, llama keeps Q4_K
    assert!(c.iter().skip(2).step_by(3).all(|c| c.ty == Type::Q4K));

    let params = QuantizeParams::new(Ftype::Q2K);
    let c = TypeChooser::new(&model, &params, &names)
        .choose_all(&ts)
        .unwrap();
    assert_eq!(
        (c[0].ty, c[1].ty, c[2].ty),
        (Type::Q4K, Type::Q3K, Type::Q3K)
    ); // gqa 4

    let params = QuantizeParams::new(Ftype::Q5KM);
    let c = TypeChooser::new(&model, &params, &names)
        .choose_all(&ts)
        .unwrap();
    let down: Vec<Type> = c.iter().skip(1).step_by(3).map(|c| c.ty).collect();
    use Type::{Q5K, Q6K};
    assert_eq!(down, [Q6K, Q5K, Q5K, Q6K, Q5K, Q5K, Q6K, Q6K]);
}

#[test]
fn moe_layers_come_from_the_name() {
    let model = ModelInfo {
        n_expert: 4,
        ..tiny_model()
    };
    let params = QuantizeParams::new(Ftype::Q4KM);
    let ts = [desc("blk.9.ffn_down_exps.weight", 256, 256)];
    let err = TypeChooser::new(&model, &params, &["blk.9.ffn_down_exps.weight"])
        .choose(&ts[0])
        .unwrap_err();
    assert_eq!(
        err,
        QuantError::BadLayer(9, "blk.9.ffn_down_exps.weight".into(), 4)
    );
    let ts = [desc("blk.3.ffn_down_exps.weight", 256, 256)];
    let c = TypeChooser::new(&model, &params, &["x"])
        .choose(&ts[0])
        .unwrap();
    assert_eq!(c.ty, Type::Q6K); // layer 3 of 4 gets more bits
}

#[test]
fn ftype_names_and_ids() {
    for f in Ftype::ALL {
        assert_eq!(Ftype::from_name(f.name()), Some(f));
        assert_eq!(Ftype::from_id(f.id()), Some(f));
    }
    assert_eq!(Ftype::from_name("q4_k"), Some(Ftype::Q4KM));
    assert_eq!(layer_of("blk.12.attn_q.weight"), Some(12));
    assert_eq!(layer_of("output.weight"), None);
}

#[test]
fn kv_override_parsing_follows_llama_cpp() {
    use kv_override::{atof, atol, KvOverride, OverrideValue as V};
    let p = |s: &str| KvOverride::parse(s).map(|o| (o.key, o.value));
    assert_eq!(p("a.b=int:42"), Ok(("a.b".into(), V::Int(42))));
    assert_eq!(p("a=int:  -7xyz"), Ok(("a".into(), V::Int(-7))));
    assert_eq!(p("a=int:junk"), Ok(("a".into(), V::Int(0))));
    assert_eq!(p("a=float:1.5e2z"), Ok(("a".into(), V::Float(150.0))));
    assert_eq!(p("a=bool:false"), Ok(("a".into(), V::Bool(false))));
    assert_eq!(p("a=str:x=y:z"), Ok(("a".into(), V::Str("x=y:z".into()))));
    assert!(p("a=bool:TRUE")
        .unwrap_err()
        .contains("invalid boolean value"));
    assert!(p("a=i:1")
        .unwrap_err()
        .contains("invalid type for KV override 'a=i:1'"));
    assert!(p(&format!("{}=int:1", "k".repeat(128)))
        .unwrap_err()
        .contains("malformed KV override"));
    assert!(p(&format!("{}=int:1", "k".repeat(127))).is_ok());
    assert_eq!(atol("99999999999999999999"), i64::MAX);
    assert_eq!(atof("  .5"), 0.5);
    assert_eq!(atof("-"), 0.0);
    assert_eq!(V::Int(-5).to_gguf(), gguf::Value::U32(5));
    // An empty key ends llama.cpp's override list.
    let list = [
        KvOverride::parse("a=int:1").unwrap(),
        KvOverride::parse("=int:2").unwrap(),
        KvOverride::parse("c=int:3").unwrap(),
    ];
    assert_eq!(kv_override::effective(&list).len(), 1);
    let long = KvOverride::str_truncated("k", &"é".repeat(100));
    assert_eq!(long.value, V::Str("é".repeat(63)));
}

#[test]
fn imatrix_values_are_means_per_matrix() {
    let mut m = Imatrix::default();
    m.entries.insert(
        "w".into(),
        ImatrixEntry {
            sums: vec![2.0, 4.0, 6.0, 8.0],
            counts: vec![2, 0],
        },
    );
    m.entries.insert("none".into(), ImatrixEntry::default());
    let (v, skipped) = imatrix::importance(&m);
    // The second matrix saw nothing: its weights are 1.
    assert_eq!(v["w"], [1.0, 2.0, 1.0, 1.0]);
    assert_eq!(
        skipped,
        ["load_imatrix: no counts for entry 'none', skipping"]
    );
    m.is_legacy = true;
    m.entries.get_mut("w").unwrap().counts = vec![4];
    assert_eq!(imatrix::importance(&m).0["w"], [0.5, 1.0, 1.5, 2.0]);

    let mut data: std::collections::HashMap<String, Vec<f32>> = ["blk.0.attn_q", "blk.0.ffn_up"]
        .iter()
        .map(|n| (n.to_string(), vec![1.0]))
        .collect();
    imatrix::filter(&mut data, &[], &["attn".into()]);
    assert_eq!(data.keys().collect::<Vec<_>>(), ["blk.0.ffn_up"]);

    // A legacy file cut short reports which entry failed.
    let dir = test_fixtures::scratch_dir("quant-imatrix-unit");
    let path = dir.join("short.dat");
    let mut b = 1i32.to_le_bytes().to_vec();
    b.extend(1i32.to_le_bytes());
    b.push(b'w');
    b.extend(1i32.to_le_bytes());
    b.extend(4i32.to_le_bytes());
    b.extend(1f32.to_le_bytes());
    std::fs::write(&path, b).unwrap();
    assert_eq!(imatrix::load(&path), Err(ImatrixError::Data(0)));
    std::fs::write(&path, 0i32.to_le_bytes()).unwrap();
    assert!(matches!(
        imatrix::load(&path),
        Err(ImatrixError::NoData(..))
    ));
}
