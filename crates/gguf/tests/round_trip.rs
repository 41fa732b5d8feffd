//! Writing and reading back: every value type, nested arrays, tensors of several types, the
//! streaming writer, and the atomic file write.

use gguf::{Array, GgufFile, GgufWriter, TensorInfo, Value, ValueType};

fn all_values() -> Vec<(String, Value)> {
    let nested = Array::from_arrays(vec![
        Array::from(vec![-1i32, 2]),
        Array::from(Vec::<i32>::new()),
    ]);
    let v: Vec<(&str, Value)> = vec![
        ("t.u8", Value::U8(250)),
        ("t.i8", Value::I8(-7)),
        ("t.u16", Value::U16(65000)),
        ("t.i16", Value::I16(-32000)),
        ("t.u32", Value::U32(4_000_000_000)),
        ("t.i32", Value::I32(-2_000_000_000)),
        ("t.f32", Value::F32(1e-5)),
        ("t.bool.t", Value::Bool(true)),
        ("t.bool.f", Value::Bool(false)),
        ("t.str", Value::Str("héllo ☃ \n\t\"".into())),
        ("t.str.empty", Value::Str(String::new())),
        ("t.u64", Value::U64(u64::MAX)),
        ("t.i64", Value::I64(i64::MIN)),
        ("t.f64", Value::F64(-2.5e300)),
        (
            "t.arr.str",
            Value::Array(Array::from_strs(["a", "", "Ġ Ġ"])),
        ),
        ("t.arr.f32", Value::Array(Array::from(vec![0.5f32, -0.0]))),
        ("t.arr.bool", Value::Array(Array::from(vec![true, false]))),
        (
            "t.arr.u8.empty",
            Value::Array(Array::from(Vec::<u8>::new())),
        ),
        ("t.arr.nested", Value::Array(nested)),
    ];
    v.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn sample_writer() -> (GgufWriter, Vec<Vec<u8>>) {
    let mut w = GgufWriter::new();
    for (k, v) in all_values() {
        w.add_kv(k, v).unwrap();
    }
    let shapes: [(&str, ggml::Type, &[u64]); 4] = [
        ("a", ggml::Type::F32, &[3, 2]),
        ("b", ggml::Type::F16, &[5]),
        ("c.q", ggml::Type::Q4_0, &[64, 1, 2]),
        ("empty", ggml::Type::F32, &[0, 4]),
    ];
    let mut data = Vec::new();
    for (i, (name, ty, shape)) in shapes.iter().enumerate() {
        let t = w.add_tensor(*name, *ty, shape).unwrap();
        data.push(
            (0..t.size)
                .map(|j| (j as u8).wrapping_mul(31).wrapping_add(i as u8))
                .collect(),
        );
    }
    (w, data)
}

#[test]
fn every_value_type_round_trips() {
    let (w, data) = sample_writer();
    let slices: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
    let size = w.file_size();
    let bytes = w.to_bytes(&slices).unwrap();
    assert_eq!(size, bytes.len() as u64);
    let f = GgufFile::from_bytes(bytes.clone()).unwrap();
    assert_eq!(f.version, 3);
    assert_eq!(f.kv, all_values());
    for (k, v) in all_values() {
        assert_eq!(f.get(&k), Some(&v), "{k}");
        assert_eq!(f.get(&k).unwrap().value_type(), v.value_type());
    }
    assert_eq!(f.tensors.len(), 4);
    for (t, d) in f.tensors.iter().zip(&data) {
        assert_eq!(t.offset % 32, 0);
        assert_eq!(f.tensor_data(t), d.as_slice(), "{}", t.name);
    }
    assert_eq!(f.tensor("c.q").unwrap().size, 2 * 18 * 2);
    assert_eq!(f.tensor("c.q").unwrap().ne, [64, 1, 2, 1]);
    assert_eq!(f.data_offset % 32, 0);
    assert_eq!(f.file_size % 32, 0);

    // Read and written again: byte-identical.
    let again: Vec<&[u8]> = f.tensors.iter().map(|t| f.tensor_data(t)).collect();
    let bytes2 = GgufWriter::from_gguf(&f).unwrap().to_bytes(&again).unwrap();
    assert_eq!(bytes2, bytes);
}

#[test]
fn custom_alignment_is_honoured() {
    let mut w = GgufWriter::new();
    w.add_kv("general.alignment", Value::U32(256)).unwrap();
    w.add_tensor("x", ggml::Type::F32, &[3]).unwrap();
    w.add_tensor("y", ggml::Type::F32, &[3]).unwrap();
    let bytes = w.to_bytes(&[&[1; 12], &[2; 12]]).unwrap();
    let f = GgufFile::from_bytes(bytes).unwrap();
    assert_eq!(f.alignment, 256);
    assert_eq!(f.data_offset % 256, 0);
    assert_eq!(f.tensor("y").unwrap().offset, 256);
    assert_eq!(f.tensor_data(f.tensor("y").unwrap()), &[2; 12]);
}

#[test]
fn accessors_convert_as_documented() {
    assert_eq!(Value::I32(5).as_u64(), Some(5));
    assert_eq!(Value::I32(-5).as_u64(), None);
    assert_eq!(Value::U64(u64::MAX).as_i64(), None);
    assert_eq!(Value::U8(7).as_i64(), Some(7));
    assert_eq!(Value::F64(0.25).as_f32(), Some(0.25));
    assert_eq!(Value::U32(1).as_f32(), None);
    assert_eq!(Value::Str("x".into()).as_str(), Some("x"));
    let a = Array::new(ValueType::I32, vec![Value::I32(1), Value::I32(-2)]).unwrap();
    assert_eq!(a.i32s(), Some(vec![1, -2]));
    assert_eq!(a.strings(), None);
    assert_eq!(a.f32s(), None);
    let s = Array::new(ValueType::Str, vec!["p".into(), "q".into()]).unwrap();
    assert_eq!(
        s.strings().map(|s| s.iter().collect()),
        Some(vec!["p", "q"])
    );
}

#[test]
fn stream_accepts_chunks_across_tensors() {
    let (w, data) = sample_writer();
    let slices: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
    let expected = w.clone().to_bytes(&slices).unwrap();
    let all: Vec<u8> = data.concat();
    let mut s = w.stream(Vec::new()).unwrap();
    for chunk in all.chunks(7) {
        s.write_data(chunk).unwrap();
    }
    assert_eq!(s.finish().unwrap(), expected);
}

#[test]
fn writer_rejects_what_the_format_cannot_hold() {
    let mut w = GgufWriter::new();
    w.add_kv("k", Value::U8(1)).unwrap();
    assert!(w.add_kv("k", Value::U8(2)).is_err());
    assert!(w.add_kv("", Value::U8(2)).is_err());
    assert!(w.add_kv("general.alignment", Value::U64(32)).is_err());
    assert!(w.add_kv("general.alignment", Value::U32(48)).is_err());
    let mixed = Array::new(ValueType::U8, vec![Value::U8(1), Value::I8(1)]).unwrap_err();
    assert_eq!(
        mixed.to_string(),
        "array of u8 elements holds a i8 at index 1"
    );
    w.add_tensor("t", ggml::Type::F32, &[4]).unwrap();
    assert!(w.add_tensor("t", ggml::Type::F32, &[4]).is_err());
    assert!(w.add_tensor("q", ggml::Type::Q4_0, &[16]).is_err());
    assert!(w
        .add_tensor("5d", ggml::Type::F32, &[1, 1, 1, 1, 1])
        .is_err());
    assert!(w.add_tensor("x".repeat(64), ggml::Type::F32, &[1]).is_err());
    assert!(w
        .add_tensor("huge", ggml::Type::F32, &[u64::MAX, 2])
        .is_err());
    assert!(w.add_kv("general.alignment", Value::U32(64)).is_err());
    let mut s = w.clone().stream(Vec::new()).unwrap();
    assert!(s.write_tensor(&[0; 15]).is_err());
    let s = w.stream(Vec::new()).unwrap();
    assert!(s.finish().is_err(), "missing tensor data must be an error");
}

#[test]
fn file_write_is_atomic_and_reads_back() {
    let dir = test_fixtures::scratch_dir("gguf-file-write");
    let path = dir.join("m.gguf");
    let t = TensorInfo::new("w", ggml::Type::F32, &[2, 2]).unwrap();
    let data: Vec<u8> = (0..16).collect();
    let kv = vec![("general.name".to_string(), Value::Str("m".into()))];
    gguf::write_gguf(&path, &kv, &[(t, &data)]).unwrap();
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        vec![std::ffi::OsString::from("m.gguf")],
        "no temporary file left"
    );
    let f = GgufFile::open(&path).unwrap();
    assert_eq!(f.tensor_data(f.tensor("w").unwrap()), data.as_slice());

    // An unfinished stream leaves neither the target nor its temporary file.
    let mut w = GgufWriter::new();
    w.add_tensor("w", ggml::Type::F32, &[2]).unwrap();
    let s = w.create(dir.join("unfinished.gguf")).unwrap();
    drop(s);
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1);
}
