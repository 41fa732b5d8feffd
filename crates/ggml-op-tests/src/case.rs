//! One test case: a closure that builds a tiny graph in a fresh context, how to fill its inputs,
//! and how strictly a backend's result must match the reference.

use ggml::{Context, TensorId, Type};

/// How to fill an input tensor.
#[derive(Clone, Debug)]
pub enum Init {
    Uniform(f32, f32),
    /// Random row indices below `max` (distinct within each row of the index tensor when
    /// `unique`).
    Index {
        max: usize,
        unique: bool,
    },
    /// 0 on and below the causal diagonal (with `n_kv - n_q` past positions), -inf above.
    CausalMask,
    /// The given values, in ne order.
    Values(Vec<f32>),
}

/// How results are compared.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Compare {
    /// Normalized mean squared error at most this.
    Nmse(f64),
    /// Each row's values as a set (TOP_K returns its indices in no particular order).
    SortedRows,
}

pub struct Built {
    pub out: TensorId,
    pub init: Vec<(TensorId, Init)>,
}

impl Built {
    pub fn new(out: TensorId) -> Built {
        Built {
            out,
            init: Vec::new(),
        }
    }
    pub fn with(mut self, t: TensorId, init: Init) -> Built {
        self.init.push((t, init));
        self
    }
}

pub type BuildFn = Box<dyn Fn(&mut Context) -> Built + Send + Sync>;

pub struct Case {
    /// The op as ggml_op_desc names it (the UNARY and GLU ops by their own names).
    pub op: &'static str,
    /// The type the coverage table files this case under.
    pub ty: Type,
    /// A unique description: op, types and shapes.
    pub desc: String,
    pub build: BuildFn,
    pub compare: Compare,
}

impl Case {
    pub fn new(
        op: &'static str,
        ty: Type,
        desc: String,
        compare: Compare,
        build: impl Fn(&mut Context) -> Built + Send + Sync + 'static,
    ) -> Case {
        Case {
            op,
            ty,
            desc,
            build: Box::new(build),
            compare,
        }
    }
}

/// Deterministic pseudo-random numbers (xorshift64*), seeded per case.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// A stable seed from a case description.
pub fn seed_of(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}
