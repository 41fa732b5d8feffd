//! A corpus of broken files, made here byte by byte: each class must give its own error kind,
//! at the right byte offset, and no input may panic.

use gguf::{ErrorKind, GgufError, GgufFile};

/// Raw little-endian builder for hand-made (and deliberately wrong) files.
#[derive(Default, Clone)]
struct Raw(Vec<u8>);

impl Raw {
    fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
    fn str(self, s: &str) -> Self {
        self.u64(s.len() as u64).bytes(s.as_bytes())
    }
    fn header(n_tensors: u64, n_kv: u64) -> Self {
        Raw::default()
            .bytes(b"GGUF")
            .u32(3)
            .u64(n_tensors)
            .u64(n_kv)
    }
    /// A KV pair of type u32.
    fn kv_u32(self, key: &str, v: u32) -> Self {
        self.str(key).u32(4).u32(v)
    }
    fn tensor(self, name: &str, ne: &[u64], ty: u32, offset: u64) -> Self {
        let mut r = self.str(name).u32(ne.len() as u32);
        for &d in ne {
            r = r.u64(d);
        }
        r.u32(ty).u64(offset)
    }
    /// Pad to 32 and append `n` data bytes.
    fn data(mut self, n: usize) -> Self {
        let padded = self.0.len().div_ceil(32) * 32;
        self.0.resize(padded + n, 0xAB);
        self
    }
    fn parse(&self) -> Result<GgufFile, GgufError> {
        GgufFile::from_bytes(self.0.clone())
    }
}

fn err(r: &Raw) -> GgufError {
    match r.parse() {
        Ok(_) => panic!("a broken file was accepted"),
        Err(e) => e,
    }
}

/// A valid file with two tensors (f32 [4, 2] and f32 [8]).
fn valid() -> Raw {
    Raw::header(2, 2)
        .str("general.name")
        .u32(8)
        .str("ok")
        .kv_u32("k.u32", 7)
        .tensor("a", &[4, 2], 0, 0)
        .tensor("b", &[8], 0, 32)
        .data(64)
}

#[test]
fn the_valid_base_file_parses() {
    let f = valid().parse().unwrap();
    assert_eq!(f.tensors.len(), 2);
    assert_eq!(f.tensor_data(f.tensor("b").unwrap()), &[0xAB; 32]);
}

#[test]
fn every_truncation_is_an_error_without_panic() {
    let full = valid().0;
    for len in 0..full.len() {
        let e = GgufFile::from_bytes(full[..len].to_vec()).expect_err("truncated file accepted");
        match e.kind() {
            // A cut inside the header leaves too few bytes for the counts it announces.
            Some(ErrorKind::Truncated { .. })
            | Some(ErrorKind::TooManyKv { .. })
            | Some(ErrorKind::TooManyTensors { .. })
            | Some(ErrorKind::StringTooLong { .. })
            | Some(ErrorKind::TensorOutOfFile { .. }) => {}
            other => panic!("length {len}: unexpected error {other:?}"),
        }
        // In the metadata the error is a truncation at or before the cut.
        if let Some(ErrorKind::Truncated { .. }) = e.kind() {
            assert!(e.offset().unwrap() <= len as u64, "length {len}: {e}");
        }
    }
}

#[test]
fn truncation_names_the_field() {
    let full = valid().0;
    let e = GgufFile::from_bytes(full[..6].to_vec()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid GGUF file: at byte 4, version: needs 4 bytes but the file ends after 2 more"
    );
    let one_kv = Raw::header(0, 1)
        .str("general.name")
        .u32(8)
        .str("a long name")
        .0;
    let e = GgufFile::from_bytes(one_kv[..one_kv.len() - 4].to_vec()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid GGUF file: at byte 48, value of KV pair 0 'general.name': \
         string length 11 exceeds the 7 bytes left in the file"
    );
}

#[test]
fn wrong_magic() {
    let mut r = valid();
    r.0[..4].copy_from_slice(b"GGML");
    let e = err(&r);
    assert_eq!(
        e.kind(),
        Some(&ErrorKind::BadMagic {
            found: "GGML".into()
        })
    );
    assert_eq!(
        e.to_string(),
        "invalid GGUF file: at byte 0, magic: invalid magic characters: 'GGML', expected 'GGUF'"
    );
}

#[test]
fn unsupported_versions() {
    let with_version = |v: u32| {
        let mut r = valid();
        r.0[4..8].copy_from_slice(&v.to_le_bytes());
        err(&r)
    };
    assert_eq!(with_version(0).kind(), Some(&ErrorKind::VersionZero));
    assert_eq!(with_version(1).kind(), Some(&ErrorKind::VersionOne));
    assert_eq!(with_version(4).kind(), Some(&ErrorKind::VersionTooNew(4)));
    assert_eq!(
        with_version(3 << 24).kind(),
        Some(&ErrorKind::VersionByteSwapped(3 << 24))
    );
    assert_eq!(with_version(4).offset(), Some(4));
    let mut v2 = valid();
    v2.0[4..8].copy_from_slice(&2u32.to_le_bytes());
    assert_eq!(v2.parse().unwrap().version, 2);
}

#[test]
fn absurd_counts() {
    let e = err(&Raw::header(0, u64::MAX).kv_u32("a", 1));
    assert!(
        matches!(
            e.kind(),
            Some(ErrorKind::TooManyKv {
                count: u64::MAX,
                max: 1
            })
        ),
        "{e}"
    );
    assert_eq!(e.offset(), Some(16));
    let e = err(&Raw::header(1 << 40, 0).data(100));
    assert!(
        matches!(e.kind(), Some(ErrorKind::TooManyTensors { .. })),
        "{e}"
    );
    assert_eq!(e.offset(), Some(8));
}

#[test]
fn absurd_string_and_array_lengths() {
    let e = err(&Raw::header(0, 1).u64(u64::MAX - 3).bytes(b"key").u64(0));
    assert!(
        matches!(e.kind(), Some(ErrorKind::StringTooLong { .. })),
        "{e}"
    );
    assert_eq!(e.offset(), Some(24));
    let e = err(&Raw::header(0, 1)
        .str("arr")
        .u32(9)
        .u32(4)
        .u64(1 << 60)
        .u64(0));
    assert!(
        matches!(e.kind(), Some(ErrorKind::ArrayTooLong { len, .. }) if *len == 1 << 60),
        "{e}"
    );
    assert_eq!(e.offset(), Some(24 + 11 + 4 + 4));
    // An array of strings needs 8 bytes per element at least.
    let e = err(&Raw::header(0, 1)
        .str("arr")
        .u32(9)
        .u32(8)
        .u64(3)
        .u64(0)
        .u64(0));
    assert!(
        matches!(e.kind(), Some(ErrorKind::ArrayTooLong { .. })),
        "{e}"
    );
}

#[test]
fn bad_value_types() {
    let e = err(&Raw::header(0, 1).str("k").u32(13).u32(0));
    assert_eq!(e.kind(), Some(&ErrorKind::InvalidValueType(13)));
    assert_eq!(e.offset(), Some(24 + 9));
    let e = err(&Raw::header(0, 1).str("k").u32(9).u32(99).u64(0));
    assert_eq!(e.kind(), Some(&ErrorKind::InvalidValueType(99)));
    assert!(e.to_string().contains("array element type"), "{e}");
    let e = err(&Raw::header(0, 1).str("k").u32(7).bytes(&[2]).u32(0));
    assert_eq!(e.kind(), Some(&ErrorKind::InvalidBool(2)));
}

#[test]
fn arrays_nested_too_deep() {
    let mut r = Raw::header(0, 1).str("deep").u32(9);
    for _ in 0..64 {
        r = r.u32(9).u64(1);
    }
    let e = err(&r.u32(0).u64(0));
    assert!(matches!(e.kind(), Some(ErrorKind::ArrayTooDeep(_))), "{e}");
}

#[test]
fn bad_keys() {
    let e = err(&Raw::header(0, 1).kv_u32("", 1));
    assert_eq!(e.kind(), Some(&ErrorKind::EmptyKey));
    let e = err(&Raw::header(0, 2).kv_u32("k", 1).kv_u32("k", 2));
    assert_eq!(
        e.kind(),
        Some(&ErrorKind::DuplicateKey {
            key: "k".into(),
            first: 0
        })
    );
    assert_eq!(e.offset(), Some(24 + 17));
}

#[test]
fn bad_alignment() {
    let e = err(&Raw::header(0, 1).str("general.alignment").u32(10).u64(32));
    assert!(matches!(e.kind(), Some(ErrorKind::WrongType { .. })), "{e}");
    assert!(
        e.to_string().contains("must be of type u32 but is u64"),
        "{e}"
    );
    let e = err(&Raw::header(0, 1).kv_u32("general.alignment", 48));
    assert_eq!(e.kind(), Some(&ErrorKind::BadAlignment(48)));
    let e = err(&Raw::header(0, 1).kv_u32("general.alignment", 0));
    assert_eq!(e.kind(), Some(&ErrorKind::BadAlignment(0)));
}

#[test]
fn bad_tensor_infos() {
    let one = |name: &str, ne: &[u64], ty: u32, offset: u64| {
        err(&Raw::header(1, 0).tensor(name, ne, ty, offset).data(4096))
    };
    let e = one(&"n".repeat(64), &[1], 0, 0);
    assert!(
        matches!(e.kind(), Some(ErrorKind::TensorNameTooLong { len: 64, .. })),
        "{e}"
    );
    let e = one("t", &[1, 1, 1, 1, 1], 0, 0);
    assert!(
        matches!(e.kind(), Some(ErrorKind::TooManyDims { n_dims: 5, .. })),
        "{e}"
    );
    let e = one("t", &[1], 4, 0);
    assert!(
        matches!(e.kind(), Some(ErrorKind::InvalidTensorType { ty: 4, .. })),
        "{e}"
    );
    let e = one("t", &[1], 1000, 0);
    assert!(
        matches!(
            e.kind(),
            Some(ErrorKind::InvalidTensorType { ty: 1000, .. })
        ),
        "{e}"
    );
    let e = one("t", &[4, u64::MAX], 0, 0);
    assert!(
        matches!(e.kind(), Some(ErrorKind::NegativeDim { dim: 1, .. })),
        "{e}"
    );
    let e = one("t", &[1 << 32, 1 << 32], 0, 0);
    assert!(
        matches!(e.kind(), Some(ErrorKind::ElementCountOverflow { .. })),
        "{e}"
    );
    // q4_0 blocks are 32 elements.
    let e = one("t", &[16], 2, 0);
    assert!(
        matches!(
            e.kind(),
            Some(ErrorKind::NotBlockMultiple {
                ne0: 16,
                block: 32,
                ..
            })
        ),
        "{e}"
    );
    let e = one("t", &[4], 0, 16);
    assert!(
        matches!(
            e.kind(),
            Some(ErrorKind::MisalignedTensor {
                tensor_offset: 16,
                ..
            })
        ),
        "{e}"
    );
    let e = one("t", &[2048], 0, 0);
    assert!(
        matches!(e.kind(), Some(ErrorKind::TensorOutOfFile { .. })),
        "{e}"
    );
    let e = one("t", &[4], 0, u64::MAX - 31);
    assert!(
        matches!(e.kind(), Some(ErrorKind::TensorOutOfFile { .. })),
        "{e}"
    );
    // The error points at the offset field: header 24 + name 9 + n_dims 4 + ne 8 + type 4.
    assert_eq!(e.offset(), Some(24 + 9 + 4 + 8 + 4));
}

#[test]
fn duplicate_and_overlapping_tensors() {
    let e = err(&Raw::header(2, 0)
        .tensor("a", &[4], 0, 0)
        .tensor("a", &[4], 0, 32)
        .data(64));
    assert_eq!(
        e.kind(),
        Some(&ErrorKind::DuplicateTensor {
            name: "a".into(),
            first: 0
        })
    );
    let e = err(&Raw::header(2, 0)
        .tensor("a", &[16], 0, 0)
        .tensor("b", &[4], 0, 32)
        .data(96));
    match e.kind() {
        Some(ErrorKind::TensorOverlap { name, other, .. }) => {
            assert_eq!((name.as_str(), other.as_str()), ("b", "a"));
        }
        other => panic!("{other:?}"),
    }
    // Two tensors sharing an offset overlap too, whatever their order in the file.
    let e = err(&Raw::header(2, 0)
        .tensor("a", &[4], 0, 32)
        .tensor("b", &[4], 0, 32)
        .data(96));
    assert!(
        matches!(e.kind(), Some(ErrorKind::TensorOverlap { .. })),
        "{e}"
    );
    // Empty tensors occupy nothing and may share an offset.
    let ok = Raw::header(2, 0)
        .tensor("a", &[0], 0, 0)
        .tensor("b", &[4], 0, 0)
        .data(32);
    ok.parse().unwrap();
}

#[test]
fn each_class_has_its_own_message() {
    let cases: Vec<Raw> = vec![
        Raw::default().bytes(b"GGU"),
        Raw::default().bytes(b"XXXX").u32(3),
        Raw::default().bytes(b"GGUF").u32(1),
        Raw::default().bytes(b"GGUF").u32(4),
        Raw::header(0, 9).kv_u32("a", 1),
        Raw::header(0, 1).str("k").u32(77).u32(0),
        Raw::header(0, 2).kv_u32("k", 1).kv_u32("k", 1),
        Raw::header(0, 1).kv_u32("general.alignment", 3),
        Raw::header(1, 0).tensor("t", &[4], 0, 16).data(64),
        Raw::header(1, 0).tensor("t", &[64], 0, 0).data(64),
    ];
    let mut seen = std::collections::HashSet::new();
    for r in &cases {
        let e = err(r);
        let msg = e.to_string();
        let class = format!("{:?}", e.kind().unwrap());
        let class = class.split(['{', '(', ' ']).next().unwrap().to_string();
        assert!(seen.insert(class.clone()), "{class} twice: {msg}");
    }
}

/// Pseudo-random corruption of a valid file: whatever comes out, it is a value or an error.
#[test]
fn random_corruptions_never_panic() {
    let base = valid().0;
    let mut state = 0x9E3779B97F4A7C15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..20_000 {
        let mut b = base.clone();
        for _ in 0..1 + next() % 4 {
            let i = (next() % b.len() as u64) as usize;
            b[i] = next() as u8;
        }
        if let Ok(f) = GgufFile::from_bytes(b) {
            for t in &f.tensors {
                assert_eq!(f.tensor_data(t).len() as u64, t.size);
            }
        }
    }
}
