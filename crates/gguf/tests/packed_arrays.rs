//! Arrays are held packed (one slice of the element type, strings in one buffer): every element
//! type reads from its exact on-disk bytes and writes back to them, nested arrays keep each
//! inner array's type, strings read out as they were written, and bad elements are refused at
//! their byte.

use gguf::display::kv_line;
use gguf::{
    Array, ErrorKind, GgufError, GgufFile, GgufWriter, StrArray, Value, ValueRef, ValueType,
};

/// A file with no tensors and one KV pair `k` whose value bytes (type id first) are `value`.
fn file_with(value: &[u8]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&1u64.to_le_bytes());
    b.extend_from_slice(&1u64.to_le_bytes());
    b.push(b'k');
    b.extend_from_slice(value);
    b.resize(b.len().div_ceil(32) * 32, 0);
    b
}

/// The bytes of an array value: type 9, element type, count, then `payload`.
fn array_bytes(elem: ValueType, len: u64, payload: &[u8]) -> Vec<u8> {
    let mut b = 9u32.to_le_bytes().to_vec();
    b.extend_from_slice(&elem.id().to_le_bytes());
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(payload);
    b
}

fn write_one(v: Value) -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.add_kv("k", v).unwrap();
    // The size is counted without encoding: it must agree with what is written.
    let size = w.file_size();
    let bytes = w.to_bytes(&[]).unwrap();
    assert_eq!(size, bytes.len() as u64);
    bytes
}

fn read_one(bytes: Vec<u8>) -> Value {
    let f = GgufFile::from_bytes(bytes).unwrap();
    assert_eq!(f.kv.len(), 1);
    f.kv.into_iter().next().unwrap().1
}

/// Checks one fixed-size element type: the file bytes, the slice read back, element access,
/// the loose-value constructor and the byte-identical rewrite.
fn check_fixed<T>(values: Vec<T>, payload: Vec<u8>)
where
    T: gguf::Packed + PartialEq + std::fmt::Debug,
    Array: From<Vec<T>>,
    Value: From<T>,
{
    let ty = T::TYPE;
    let a = Array::from(values.clone());
    assert_eq!(a.elem_type(), ty);
    assert_eq!(a.len(), values.len());
    let bytes = write_one(Value::Array(a.clone()));
    let expected = file_with(&array_bytes(ty, values.len() as u64, &payload));
    assert_eq!(bytes, expected, "{ty} file bytes");

    let v = read_one(bytes.clone());
    let back = v.as_array().unwrap();
    assert_eq!(back, &a, "{ty}");
    assert_eq!(back.as_slice::<T>(), Some(values.as_slice()), "{ty}");
    for (i, x) in values.iter().enumerate() {
        assert_eq!(back.get(i), Some(Value::from(*x).view()), "{ty}[{i}]");
    }
    assert_eq!(back.get(values.len()), None);
    let loose: Vec<Value> = values.iter().map(|&x| Value::from(x)).collect();
    assert_eq!(
        back.iter().map(ValueRef::to_value).collect::<Vec<_>>(),
        loose
    );
    assert_eq!(back.iter().len(), values.len());
    assert_eq!(&Array::new(ty, loose).unwrap(), back, "{ty} from values");
    assert_eq!(back.strings(), None);
    assert_eq!(back.arrays(), None);
    // Another element type's view of it is refused, not reinterpreted.
    if ty != ValueType::U8 {
        assert_eq!(back.as_slice::<u8>(), None, "{ty}");
    } else {
        assert_eq!(back.as_slice::<i8>(), None);
    }

    let f = GgufFile::from_bytes(bytes.clone()).unwrap();
    let again = GgufWriter::from_gguf(&f).unwrap().to_bytes(&[]).unwrap();
    assert_eq!(again, bytes, "{ty} rewrite");
}

fn le<T: Copy, const N: usize>(v: &[T], f: fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

#[test]
fn every_fixed_size_type_reads_and_writes_its_exact_bytes() {
    let u8s = vec![0u8, 1, 127, 128, 255];
    check_fixed(u8s.clone(), u8s);
    let i8s = vec![i8::MIN, -1, 0, 1, i8::MAX];
    check_fixed(i8s.clone(), le(&i8s, i8::to_le_bytes));
    let u16s = vec![0u16, 1, 0x1234, u16::MAX];
    check_fixed(u16s.clone(), le(&u16s, u16::to_le_bytes));
    let i16s = vec![i16::MIN, -2, 0, i16::MAX];
    check_fixed(i16s.clone(), le(&i16s, i16::to_le_bytes));
    let u32s = vec![0u32, 7, 0xDEAD_BEEF, u32::MAX];
    check_fixed(u32s.clone(), le(&u32s, u32::to_le_bytes));
    let i32s = vec![i32::MIN, -3, 0, i32::MAX];
    check_fixed(i32s.clone(), le(&i32s, i32::to_le_bytes));
    let f32s = vec![0.5f32, -0.0, 1e-5, f32::INFINITY, f32::MIN_POSITIVE];
    check_fixed(f32s.clone(), le(&f32s, f32::to_le_bytes));
    let bools = vec![true, false, false, true];
    check_fixed(bools, vec![1, 0, 0, 1]);
    let u64s = vec![0u64, 1 << 40, u64::MAX];
    check_fixed(u64s.clone(), le(&u64s, u64::to_le_bytes));
    let i64s = vec![i64::MIN, -1, i64::MAX];
    check_fixed(i64s.clone(), le(&i64s, i64::to_le_bytes));
    let f64s = vec![-2.5e300, 0.1, f64::NEG_INFINITY];
    check_fixed(f64s.clone(), le(&f64s, f64::to_le_bytes));
    // Empty arrays of each kind.
    check_fixed(Vec::<u8>::new(), vec![]);
    check_fixed(Vec::<f64>::new(), vec![]);
}

#[test]
fn nan_payloads_survive_the_round_trip() {
    let nan = f32::from_bits(0x7FC0_1234);
    let bytes = write_one(Value::Array(Array::from(vec![nan])));
    let v = read_one(bytes);
    let s = v.as_array().unwrap().as_slice::<f32>().unwrap();
    assert_eq!(s[0].to_bits(), 0x7FC0_1234);
}

#[test]
fn strings_read_back_from_one_buffer() {
    let items = ["a", "", "Ġ Ġ", "quote \" and \\", "☃\n"];
    let a = Array::from_strs(items);
    let mut payload = Vec::new();
    for s in items {
        payload.extend_from_slice(&(s.len() as u64).to_le_bytes());
        payload.extend_from_slice(s.as_bytes());
    }
    let bytes = write_one(Value::Array(a.clone()));
    assert_eq!(bytes, file_with(&array_bytes(ValueType::Str, 5, &payload)));

    let v = read_one(bytes);
    let back = v.as_array().unwrap();
    assert_eq!(back, &a);
    assert_eq!(back.elem_type(), ValueType::Str);
    let s = back.strings().unwrap();
    assert_eq!(s.len(), 5);
    assert!(!s.is_empty());
    assert_eq!(s.iter().collect::<Vec<_>>(), items);
    assert_eq!(s.iter().len(), 5);
    for (i, want) in items.iter().enumerate() {
        assert_eq!(s.get(i), Some(*want));
        assert_eq!(&s[i], *want);
        assert_eq!(back.get(i), Some(ValueRef::Str(want)));
    }
    assert_eq!(s.get(5), None);
    assert_eq!(back.as_slice::<u8>(), None);
    assert_eq!(back.i32s(), None);
    assert_eq!(
        format!("{s:?}"),
        r#"["a", "", "Ġ Ġ", "quote \" and \\", "☃\n"]"#
    );
    let loose: Vec<Value> = items.iter().map(|&x| Value::from(x)).collect();
    assert_eq!(&Array::new(ValueType::Str, loose).unwrap(), back);
    // The dump quotes and escapes elements exactly as before.
    assert_eq!(
        String::from_utf8(kv_line(0, "k", &v, true)).unwrap(),
        format!(
            "- kv   0: {:>42} arr[str,5]       = [\"a\", \"\", \"Ġ Ġ\", \"quote \\\" and \\\\\", \"☃\\n\"]",
            "k"
        )
    );

    let built: StrArray = ["x", "yz"].into_iter().collect();
    let mut pushed = StrArray::new();
    pushed.push("x");
    pushed.push("yz");
    assert_eq!(built, pushed);
    assert!(StrArray::new().is_empty());
}

#[test]
fn an_invalid_utf8_element_is_repaired_in_place() {
    let mut payload = Vec::new();
    for s in [&b"ok"[..], &[0x66, 0xFF, 0x67], b"end"] {
        payload.extend_from_slice(&(s.len() as u64).to_le_bytes());
        payload.extend_from_slice(s);
    }
    let v = read_one(file_with(&array_bytes(ValueType::Str, 3, &payload)));
    let s = v.as_array().unwrap().strings().unwrap();
    assert_eq!(s.iter().collect::<Vec<_>>(), ["ok", "f\u{FFFD}g", "end"]);
}

#[test]
fn nested_arrays_keep_each_inner_type() {
    let inner_u8 = Array::from(vec![1u8, 2]);
    let inner_str = Array::from_strs(["p"]);
    let deeper = Array::from_arrays(vec![Array::from(vec![-1i64])]);
    let a = Array::from_arrays(vec![inner_u8.clone(), inner_str.clone(), deeper.clone()]);
    assert_eq!(a.elem_type(), ValueType::Array);
    assert_eq!(a.len(), 3);

    let mut payload = array_bytes(ValueType::U8, 2, &[1, 2])[4..].to_vec();
    let mut s = 1u64.to_le_bytes().to_vec();
    s.push(b'p');
    payload.extend_from_slice(&array_bytes(ValueType::Str, 1, &s)[4..]);
    let i64s = array_bytes(ValueType::I64, 1, &(-1i64).to_le_bytes());
    payload.extend_from_slice(&array_bytes(ValueType::Array, 1, &i64s[4..])[4..]);
    let bytes = write_one(Value::Array(a.clone()));
    assert_eq!(
        bytes,
        file_with(&array_bytes(ValueType::Array, 3, &payload))
    );

    let v = read_one(bytes.clone());
    let back = v.as_array().unwrap();
    assert_eq!(back, &a);
    let inner = back.arrays().unwrap();
    assert_eq!(inner, [inner_u8, inner_str, deeper.clone()]);
    assert_eq!(inner[0].as_slice::<u8>(), Some(&[1u8, 2][..]));
    assert_eq!(inner[1].strings().unwrap().get(0), Some("p"));
    assert_eq!(back.get(2), Some(ValueRef::Array(&deeper)));
    assert_eq!(
        inner[2].arrays().unwrap()[0].as_slice::<i64>(),
        Some(&[-1i64][..])
    );
    assert!(String::from_utf8(kv_line(0, "k", &v, true))
        .unwrap()
        .ends_with("arr[arr,3]       = [???, ???, ???]"));
    let f = GgufFile::from_bytes(bytes.clone()).unwrap();
    assert_eq!(
        GgufWriter::from_gguf(&f).unwrap().to_bytes(&[]).unwrap(),
        bytes
    );

    // The writer still refuses nesting the reader would refuse.
    let mut deep = Array::from(vec![0u8]);
    for _ in 0..gguf::MAX_ARRAY_DEPTH {
        deep = Array::from_arrays(vec![deep]);
    }
    let e = GgufWriter::new()
        .add_kv("deep", Value::Array(deep))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "cannot write GGUF: key 'deep': arrays nested deeper than 8 levels"
    );
}

#[test]
fn a_bool_element_other_than_0_or_1_is_refused_at_its_byte() {
    let bytes = file_with(&array_bytes(ValueType::Bool, 3, &[1, 0, 2]));
    // 24 header bytes, key length and key (9), type, element type and count (16).
    let e = GgufFile::from_bytes(bytes).unwrap_err();
    assert_eq!(e.kind(), Some(&ErrorKind::InvalidBool(2)));
    assert_eq!(e.offset(), Some(24 + 9 + 16 + 2));
    assert_eq!(
        e.to_string(),
        "invalid GGUF file: at byte 51, value of KV pair 0 'k'[2]: bool value 2 is neither 0 nor 1"
    );
}

#[test]
fn a_string_element_past_the_end_is_refused_at_its_length() {
    let mut payload = 1u64.to_le_bytes().to_vec();
    payload.push(b'a');
    payload.extend_from_slice(&1000u64.to_le_bytes());
    let mut bytes = b"GGUF".to_vec();
    bytes.extend_from_slice(&3u32.to_le_bytes());
    bytes.extend_from_slice(&0u64.to_le_bytes());
    bytes.extend_from_slice(&1u64.to_le_bytes());
    bytes.extend_from_slice(&1u64.to_le_bytes());
    bytes.push(b'k');
    bytes.extend_from_slice(&array_bytes(ValueType::Str, 2, &payload));
    let e = GgufFile::from_bytes(bytes).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid GGUF file: at byte 58, value of KV pair 0 'k'[1]: string length 1000 exceeds the 0 bytes left in the file"
    );
}

#[test]
fn loose_values_of_another_type_are_refused() {
    let cases = [
        (
            ValueType::U8,
            Value::I8(1),
            "array of u8 elements holds a i8 at index 1",
        ),
        (
            ValueType::F32,
            Value::F64(1.0),
            "array of f32 elements holds a f64 at index 1",
        ),
        (
            ValueType::Str,
            Value::U8(1),
            "array of str elements holds a u8 at index 1",
        ),
        (
            ValueType::Array,
            Value::Str("x".into()),
            "array of arr elements holds a str at index 1",
        ),
        (
            ValueType::Bool,
            Value::U8(1),
            "array of bool elements holds a u8 at index 1",
        ),
    ];
    for (ty, bad, want) in cases {
        let first = match ty {
            ValueType::U8 => Value::U8(0),
            ValueType::F32 => Value::F32(0.0),
            ValueType::Str => Value::from("ok"),
            ValueType::Array => Value::Array(Array::from(vec![0u8])),
            _ => Value::Bool(true),
        };
        let e = Array::new(ty, vec![first, bad]).unwrap_err();
        assert!(matches!(e, GgufError::MixedArray { .. }), "{e:?}");
        assert_eq!(e.to_string(), want);
    }
}

#[test]
fn conversions_follow_the_element_type() {
    assert_eq!(Array::from(vec![1u8, 255]).i32s(), Some(vec![1, 255]));
    assert_eq!(Array::from(vec![u32::MAX]).i32s(), None);
    assert_eq!(Array::from(vec![-5i64, 7]).i32s(), Some(vec![-5, 7]));
    assert_eq!(Array::from(vec![1.5f32]).i32s(), None);
    assert_eq!(Array::from(vec![true]).i32s(), None);
    assert_eq!(Array::from(vec![0.25f64]).f32s(), Some(vec![0.25]));
    assert_eq!(Array::from(vec![2.0f32]).f32s(), Some(vec![2.0]));
    assert_eq!(Array::from(vec![2i32]).f32s(), None);
    assert_eq!(Array::from(Vec::<i32>::new()).i32s(), Some(vec![]));
    assert!(Array::from(Vec::<i32>::new()).is_empty());
    assert_eq!(
        Array::from(vec![3u16]).get(0).and_then(ValueRef::as_u64),
        Some(3)
    );
}

#[test]
fn an_array_costs_its_elements_not_a_value_apiece() {
    // The handle of an inner array of an array of arrays, and of a KV value.
    assert!(std::mem::size_of::<Array>() <= 24);
    assert!(std::mem::size_of::<Value>() <= 32);
}

#[test]
fn metadata_only_reads_a_large_array_across_chunks() {
    // 3 MiB of u32, past the 1 MiB first read of open_metadata, then a tensor.
    let values: Vec<u32> = (0..(3 << 18)).collect();
    let mut w = GgufWriter::new();
    w.add_kv("big", Value::Array(Array::from(values.clone())))
        .unwrap();
    w.add_kv("after", Value::from("tail")).unwrap();
    w.add_tensor("t", ggml::Type::F32, &[4]).unwrap();
    let dir = test_fixtures::scratch_dir("gguf-packed-metadata");
    let path = dir.join("big.gguf");
    let size = w.file_size();
    let bytes = w.to_bytes(&[&[1; 16]]).unwrap();
    assert_eq!(size, bytes.len() as u64);
    std::fs::write(&path, bytes).unwrap();
    let meta = GgufFile::open_metadata(&path).unwrap();
    let whole = GgufFile::open(&path).unwrap();
    assert_eq!(meta.kv, whole.kv);
    assert_eq!(
        meta.get("big")
            .and_then(Value::as_array)
            .and_then(|a| a.as_slice::<u32>()),
        Some(values.as_slice())
    );
    assert_eq!(meta.get("after").and_then(Value::as_str), Some("tail"));
    assert_eq!(whole.tensor_data(whole.tensor("t").unwrap()), &[1; 16]);
    std::fs::remove_dir_all(&dir).unwrap();
}
