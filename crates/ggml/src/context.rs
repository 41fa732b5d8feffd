//! The tensor arena. Op constructors check shapes, compute the result's ne/nb and compute
//! nothing (Example 3 of the architecture seed). Shape violations are programming errors in a
//! graph builder, so they panic with the rule that was broken, as ggml's GGML_ASSERT does;
//! model loaders validate file shapes before any graph is built.

use crate::op::*;
use crate::tensor::*;
use crate::types::Type;

#[derive(Clone, Default, Debug)]
pub struct Context {
    tensors: Vec<Tensor>,
}

impl std::ops::Index<TensorId> for Context {
    type Output = Tensor;
    fn index(&self, id: TensorId) -> &Tensor {
        &self.tensors[id.index()]
    }
}

impl std::ops::IndexMut<TensorId> for Context {
    fn index_mut(&mut self, id: TensorId) -> &mut Tensor {
        &mut self.tensors[id.index()]
    }
}

fn ne4(ne: &[i64]) -> [i64; MAX_DIMS] {
    assert!(
        !ne.is_empty() && ne.len() <= MAX_DIMS,
        "a tensor has 1 to 4 dimensions, got {}",
        ne.len()
    );
    let mut out = [1i64; MAX_DIMS];
    out[..ne.len()].copy_from_slice(ne);
    out
}

impl Context {
    pub fn new() -> Context {
        Context {
            tensors: Vec::new(),
        }
    }

    pub fn with_capacity(n: usize) -> Context {
        Context {
            tensors: Vec::with_capacity(n),
        }
    }

    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    pub fn ids(&self) -> impl Iterator<Item = TensorId> {
        (0..self.tensors.len() as u32).map(TensorId)
    }

    pub fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }

    pub fn find(&self, name: &str) -> Option<TensorId> {
        self.tensors
            .iter()
            .position(|t| t.name == name)
            .map(|i| TensorId(i as u32))
    }

    /// Adds a tensor record as is (sources must already belong to this context).
    pub fn push(&mut self, t: Tensor) -> TensorId {
        let id = TensorId(self.tensors.len() as u32);
        self.tensors.push(t);
        id
    }

    /// Copies a tensor of another context (a weight, a cache) in as a leaf pointing at the same
    /// memory, so one arena holds everything a graph touches.
    pub fn import(&mut self, t: &Tensor) -> TensorId {
        let mut leaf = t.clone();
        leaf.op = Op::None;
        leaf.src = [None; MAX_SRC];
        leaf.view_src = None;
        leaf.view_offs = 0;
        self.push(leaf)
    }

    fn new_impl(
        &mut self,
        ty: Type,
        ne: [i64; MAX_DIMS],
        view_src: Option<TensorId>,
        view_offs: usize,
    ) -> TensorId {
        assert!(
            ne[0] % ty.block_size() as i64 == 0,
            "ne[0] = {} is not a multiple of the block size {} of {}",
            ne[0],
            ty.block_size(),
            ty
        );
        let (mut view_src, mut view_offs) = (view_src, view_offs);
        if let Some(v) = view_src {
            if let Some(root) = self[v].view_src {
                view_offs += self[v].view_offs;
                view_src = Some(root);
            }
        }
        let mut t = Tensor::new(ty, ne);
        if let Some(v) = view_src {
            let src = &self[v];
            // ggml checks the contiguous size of the new shape against the source
            let size = t.nbytes();
            assert!(
                size == 0 || view_offs + size <= src.nbytes(),
                "view of {} bytes at offset {} goes past the end of '{}' ({} bytes)",
                size,
                view_offs,
                src.name,
                src.nbytes()
            );
            if let Some(d) = &src.data {
                t.data = Some(TensorData {
                    buffer: d.buffer.clone(),
                    addr: d.addr + view_offs,
                });
            }
        }
        t.view_src = view_src;
        t.view_offs = view_offs;
        self.push(t)
    }

    pub fn new_tensor(&mut self, ty: Type, ne: &[i64]) -> TensorId {
        self.new_impl(ty, ne4(ne), None, 0)
    }
    pub fn new_tensor_1d(&mut self, ty: Type, ne0: i64) -> TensorId {
        self.new_tensor(ty, &[ne0])
    }
    pub fn new_tensor_2d(&mut self, ty: Type, ne0: i64, ne1: i64) -> TensorId {
        self.new_tensor(ty, &[ne0, ne1])
    }
    pub fn new_tensor_3d(&mut self, ty: Type, ne0: i64, ne1: i64, ne2: i64) -> TensorId {
        self.new_tensor(ty, &[ne0, ne1, ne2])
    }
    pub fn new_tensor_4d(&mut self, ty: Type, ne0: i64, ne1: i64, ne2: i64, ne3: i64) -> TensorId {
        self.new_tensor(ty, &[ne0, ne1, ne2, ne3])
    }

    pub fn dup_tensor(&mut self, a: TensorId) -> TensorId {
        let (ty, ne) = (self[a].ty, self[a].ne);
        self.new_impl(ty, ne, None, 0)
    }

    /// A view with a's shape and strides (named "<a> (view)").
    pub fn view_tensor(&mut self, a: TensorId) -> TensorId {
        let (ty, ne, nb) = (self[a].ty, self[a].ne, self[a].nb);
        let r = self.new_impl(ty, ne, Some(a), 0);
        self[r].nb = nb;
        let name = format!("{} (view)", self[a].name);
        self[r].set_name(&name);
        r
    }

    pub fn set_name(&mut self, t: TensorId, name: &str) -> TensorId {
        self[t].set_name(name);
        t
    }
    pub fn name(&self, t: TensorId) -> &str {
        &self[t].name
    }
    pub fn set_input(&mut self, t: TensorId) {
        self[t].flags |= flags::INPUT;
    }
    pub fn set_output(&mut self, t: TensorId) {
        self[t].flags |= flags::OUTPUT;
    }

    fn with_op(&mut self, r: TensorId, op: Op, srcs: &[Option<TensorId>]) -> TensorId {
        let t = &mut self[r];
        t.op = op;
        for (i, s) in srcs.iter().enumerate() {
            t.src[i] = *s;
        }
        r
    }

    fn result_like(&mut self, a: TensorId, inplace: bool) -> TensorId {
        if inplace {
            self.view_tensor(a)
        } else {
            self.dup_tensor(a)
        }
    }

    // ---- element-wise ----

    fn binary(&mut self, op: Op, a: TensorId, b: TensorId, inplace: bool) -> TensorId {
        assert!(
            self[b].can_repeat_to(&self[a]),
            "{}: b {:?} cannot be broadcast to a {:?}",
            op.name(),
            self[b].ne,
            self[a].ne
        );
        let r = self.result_like(a, inplace);
        self.with_op(r, op, &[Some(a), Some(b)])
    }
    pub fn add(&mut self, a: TensorId, b: TensorId) -> TensorId {
        self.binary(Op::Add, a, b, false)
    }
    pub fn add_inplace(&mut self, a: TensorId, b: TensorId) -> TensorId {
        self.binary(Op::Add, a, b, true)
    }
    pub fn sub(&mut self, a: TensorId, b: TensorId) -> TensorId {
        self.binary(Op::Sub, a, b, false)
    }
    pub fn mul(&mut self, a: TensorId, b: TensorId) -> TensorId {
        self.binary(Op::Mul, a, b, false)
    }
    pub fn mul_inplace(&mut self, a: TensorId, b: TensorId) -> TensorId {
        self.binary(Op::Mul, a, b, true)
    }
    pub fn div(&mut self, a: TensorId, b: TensorId) -> TensorId {
        self.binary(Op::Div, a, b, false)
    }

    /// a[:, i, t] += b[:, ids[i, t]]
    pub fn add_id(&mut self, a: TensorId, b: TensorId, ids: TensorId) -> TensorId {
        assert!(
            self[a].ne[0] == self[b].ne[0],
            "add_id: a and b rows differ"
        );
        assert!(
            self[a].ne[1] == self[ids].ne[0],
            "add_id: a.ne[1] != ids.ne[0]"
        );
        assert!(
            self[a].ne[2] == self[ids].ne[1],
            "add_id: a.ne[2] != ids.ne[1]"
        );
        assert!(self[ids].ty == Type::I32, "add_id: ids must be i32");
        let r = self.dup_tensor(a);
        self.with_op(r, Op::AddId, &[Some(a), Some(b), Some(ids)])
    }

    fn unary_like(&mut self, op: Op, a: TensorId, inplace: bool) -> TensorId {
        let r = self.result_like(a, inplace);
        self.with_op(r, op, &[Some(a)])
    }
    pub fn sqr(&mut self, a: TensorId) -> TensorId {
        self.unary_like(Op::Sqr, a, false)
    }
    pub fn sqrt(&mut self, a: TensorId) -> TensorId {
        self.unary_like(Op::Sqrt, a, false)
    }
    pub fn scale(&mut self, a: TensorId, s: f32) -> TensorId {
        self.unary_like(Op::Scale { s, b: 0.0 }, a, false)
    }
    pub fn scale_inplace(&mut self, a: TensorId, s: f32) -> TensorId {
        self.unary_like(Op::Scale { s, b: 0.0 }, a, true)
    }
    pub fn scale_bias(&mut self, a: TensorId, s: f32, b: f32) -> TensorId {
        self.unary_like(Op::Scale { s, b }, a, false)
    }
    pub fn norm(&mut self, a: TensorId, eps: f32) -> TensorId {
        self.unary_like(Op::Norm { eps }, a, false)
    }
    pub fn rms_norm(&mut self, a: TensorId, eps: f32) -> TensorId {
        self.unary_like(Op::RmsNorm { eps }, a, false)
    }
    pub fn unary(&mut self, a: TensorId, op: UnaryOp) -> TensorId {
        assert!(
            self[a].is_contiguous_1(),
            "unary {}: source rows must be contiguous",
            op.name()
        );
        self.unary_like(Op::Unary(op), a, false)
    }
    pub fn unary_inplace(&mut self, a: TensorId, op: UnaryOp) -> TensorId {
        assert!(
            self[a].is_contiguous_1(),
            "unary {}: source rows must be contiguous",
            op.name()
        );
        self.unary_like(Op::Unary(op), a, true)
    }
    pub fn silu(&mut self, a: TensorId) -> TensorId {
        self.unary(a, UnaryOp::Silu)
    }
    pub fn gelu(&mut self, a: TensorId) -> TensorId {
        self.unary(a, UnaryOp::Gelu)
    }
    pub fn relu(&mut self, a: TensorId) -> TensorId {
        self.unary(a, UnaryOp::Relu)
    }
    /// ggml_clamp returns a view of a (it writes in place).
    pub fn clamp(&mut self, a: TensorId, min: f32, max: f32) -> TensorId {
        self.unary_like(Op::Clamp { min, max }, a, true)
    }
    /// ggml_fill: a new tensor of a's shape with every element `c`.
    pub fn fill(&mut self, a: TensorId, c: f32) -> TensorId {
        assert!(
            matches!(self[a].ty, Type::F32 | Type::F16) && self[a].is_contiguous(),
            "fill: a must be a contiguous f32 or f16 tensor"
        );
        self.unary_like(Op::Fill { c }, a, false)
    }

    /// GLU on the two halves of a's rows (`b` None) or on a and b (`glu_split`).
    pub fn glu(&mut self, a: TensorId, op: GluOp, swapped: bool) -> TensorId {
        assert!(
            self[a].is_contiguous_1(),
            "glu: a's rows must be contiguous"
        );
        let mut ne = self[a].ne;
        ne[0] /= 2;
        let ty = self[a].ty;
        let r = self.new_impl(ty, ne, None, 0);
        self.with_op(r, Op::Glu { op, swapped }, &[Some(a)])
    }
    pub fn glu_split(&mut self, a: TensorId, b: TensorId, op: GluOp) -> TensorId {
        assert!(
            self[a].is_contiguous_1() && self[b].is_contiguous_1(),
            "glu: rows must be contiguous"
        );
        assert!(
            self[a].same_shape(&self[b]) && self[a].ty == self[b].ty,
            "glu_split: a and b differ"
        );
        let r = self.dup_tensor(a);
        self.with_op(r, Op::Glu { op, swapped: false }, &[Some(a), Some(b)])
    }
    pub fn swiglu_split(&mut self, a: TensorId, b: TensorId) -> TensorId {
        self.glu_split(a, b, GluOp::Swiglu)
    }
    pub fn geglu_split(&mut self, a: TensorId, b: TensorId) -> TensorId {
        self.glu_split(a, b, GluOp::Geglu)
    }

    // ---- reductions ----

    pub fn sum(&mut self, a: TensorId) -> TensorId {
        let ty = self[a].ty;
        let r = self.new_tensor_1d(ty, 1);
        self.with_op(r, Op::Sum, &[Some(a)])
    }
    pub fn sum_rows(&mut self, a: TensorId) -> TensorId {
        let mut ne = self[a].ne;
        ne[0] = 1;
        let ty = self[a].ty;
        let r = self.new_impl(ty, ne, None, 0);
        self.with_op(r, Op::SumRows, &[Some(a)])
    }
    pub fn mean(&mut self, a: TensorId) -> TensorId {
        let mut ne = self[a].ne;
        ne[0] = 1;
        let r = self.new_impl(Type::F32, ne, None, 0);
        self.with_op(r, Op::Mean, &[Some(a)])
    }
    pub fn argmax(&mut self, a: TensorId) -> TensorId {
        assert!(self[a].is_matrix(), "argmax: a must be a matrix");
        let n = self[a].ne[1];
        let r = self.new_tensor_1d(Type::I32, n);
        self.with_op(r, Op::Argmax, &[Some(a)])
    }
    pub fn argsort(&mut self, a: TensorId, order: SortOrder) -> TensorId {
        let ne = self[a].ne;
        let r = self.new_impl(Type::I32, ne, None, 0);
        self.with_op(r, Op::Argsort { order }, &[Some(a)])
    }
    /// Indices of the k largest values of each row, in no particular order.
    pub fn top_k(&mut self, a: TensorId, k: i32) -> TensorId {
        assert!(
            self[a].ne[0] >= k as i64,
            "top_k: k = {} exceeds the row length {}",
            k,
            self[a].ne[0]
        );
        let mut ne = self[a].ne;
        ne[0] = k as i64;
        let r = self.new_impl(Type::I32, ne, None, 0);
        self.with_op(r, Op::TopK { k }, &[Some(a)])
    }
    /// Tile a to b's shape.
    pub fn repeat(&mut self, a: TensorId, b: TensorId) -> TensorId {
        assert!(
            self[a].can_repeat_to(&self[b]),
            "repeat: a cannot be tiled to b's shape"
        );
        let (ty, ne) = (self[a].ty, self[b].ne);
        let r = self.new_impl(ty, ne, None, 0);
        self.with_op(r, Op::Repeat, &[Some(a)])
    }
    /// ggml_repeat_4d: a tiled to the shape `ne`.
    pub fn repeat_4d(&mut self, a: TensorId, ne: [i64; 4]) -> TensorId {
        let na = self[a].ne;
        assert!(
            (0..4).all(|d| na[d] > 0 && ne[d] % na[d] == 0),
            "repeat_4d: a cannot be tiled to {ne:?}"
        );
        let ty = self[a].ty;
        let r = self.new_impl(ty, ne, None, 0);
        self.with_op(r, Op::Repeat, &[Some(a)])
    }
    pub fn concat(&mut self, a: TensorId, b: TensorId, dim: i32) -> TensorId {
        assert!((0..MAX_DIMS as i32).contains(&dim), "concat: bad dim {dim}");
        assert!(self[a].ty == self[b].ty, "concat: types differ");
        let (na, nb) = (self[a].ne, self[b].ne);
        let mut ne = na;
        for (d, n) in ne.iter_mut().enumerate() {
            if d == dim as usize {
                *n = na[d] + nb[d];
            } else {
                assert!(na[d] == nb[d], "concat: dim {d} differs");
            }
        }
        let ty = self[a].ty;
        let r = self.new_impl(ty, ne, None, 0);
        self.with_op(r, Op::Concat { dim }, &[Some(a), Some(b)])
    }

    // ---- matrix products ----

    /// a {K, M, ..} times b {K, N, ..} gives {M, N, ..} in F32; a broadcasts over dims 2 and 3.
    pub fn mul_mat(&mut self, a: TensorId, b: TensorId) -> TensorId {
        let (ta, tb) = (&self[a], &self[b]);
        assert!(
            ta.ne[0] == tb.ne[0] && tb.ne[2] % ta.ne[2] == 0 && tb.ne[3] % ta.ne[3] == 0,
            "mul_mat: cannot multiply '{}' {:?} by '{}' {:?}",
            ta.name,
            ta.ne,
            tb.name,
            tb.ne
        );
        assert!(!ta.is_transposed(), "mul_mat: a must not be transposed");
        let ne = [ta.ne[1], tb.ne[1], tb.ne[2], tb.ne[3]];
        let r = self.new_impl(Type::F32, ne, None, 0);
        self.with_op(
            r,
            Op::MulMat {
                prec: Prec::Default,
            },
            &[Some(a), Some(b)],
        )
    }
    pub fn mul_mat_set_prec(&mut self, t: TensorId, p: Prec) {
        if let Op::MulMat { prec } = &mut self[t].op {
            *prec = p;
        }
    }
    /// as {K, M, n_expert}, b {K, n_used or 1, n_tokens}, ids {n_used, n_tokens} i32
    /// -> {M, n_used, n_tokens}
    pub fn mul_mat_id(&mut self, as_: TensorId, b: TensorId, ids: TensorId) -> TensorId {
        let (a, bb, i) = (&self[as_], &self[b], &self[ids]);
        assert!(
            !a.is_transposed(),
            "mul_mat_id: experts must not be transposed"
        );
        assert!(i.ty == Type::I32, "mul_mat_id: ids must be i32");
        assert!(
            a.ne[3] == 1 && bb.ne[3] == 1 && i.ne[2] == 1 && i.ne[3] == 1,
            "mul_mat_id: bad dims"
        );
        assert!(i.ne[1] == bb.ne[2], "mul_mat_id: one expert list per b row");
        assert!(a.ne[0] == bb.ne[0], "mul_mat_id: row lengths differ");
        assert!(
            i.ne[0] % bb.ne[1] == 0,
            "mul_mat_id: b cannot be broadcast over the used experts"
        );
        let ne = [a.ne[1], i.ne[0], bb.ne[2], 1];
        let r = self.new_impl(Type::F32, ne, None, 0);
        self.with_op(r, Op::MulMatId, &[Some(as_), Some(b), Some(ids)])
    }

    // ---- copies and layout ----

    /// Copy a into b's memory (converting the type); the result is a view of b.
    pub fn cpy(&mut self, a: TensorId, b: TensorId) -> TensorId {
        assert!(
            self[a].nelements() == self[b].nelements(),
            "cpy: element counts differ"
        );
        let r = self.view_tensor(b);
        let name = if self[b].name.is_empty() {
            format!("{} (copy)", self[a].name)
        } else {
            format!("{} (copy of {})", self[b].name, self[a].name)
        };
        self[r].set_name(&name);
        self.with_op(r, Op::Cpy, &[Some(a), Some(b)])
    }
    /// A new tensor of another type holding a's values (src 1 is the result itself, as ggml).
    pub fn cast(&mut self, a: TensorId, ty: Type) -> TensorId {
        let ne = self[a].ne;
        let r = self.new_impl(ty, ne, None, 0);
        let name = format!("{} (copy)", self[a].name);
        self[r].set_name(&name);
        self.with_op(r, Op::Cpy, &[Some(a), Some(r)])
    }
    pub fn dup(&mut self, a: TensorId) -> TensorId {
        self.unary_like(Op::Dup, a, false)
    }
    pub fn cont(&mut self, a: TensorId) -> TensorId {
        let ne = self[a].ne;
        self.cont_4d(a, ne[0], ne[1], ne[2], ne[3])
    }
    pub fn cont_2d(&mut self, a: TensorId, ne0: i64, ne1: i64) -> TensorId {
        self.cont_4d(a, ne0, ne1, 1, 1)
    }
    pub fn cont_3d(&mut self, a: TensorId, ne0: i64, ne1: i64, ne2: i64) -> TensorId {
        self.cont_4d(a, ne0, ne1, ne2, 1)
    }
    pub fn cont_4d(&mut self, a: TensorId, ne0: i64, ne1: i64, ne2: i64, ne3: i64) -> TensorId {
        assert!(
            self[a].nelements() == ne0 * ne1 * ne2 * ne3,
            "cont: element counts differ"
        );
        let ty = self[a].ty;
        let r = self.new_impl(ty, [ne0, ne1, ne2, ne3], None, 0);
        let name = format!("{} (cont)", self[a].name);
        self[r].set_name(&name);
        self.with_op(r, Op::Cont, &[Some(a)])
    }

    pub fn reshape(&mut self, a: TensorId, ne: &[i64]) -> TensorId {
        let ne = ne4(ne);
        assert!(
            self[a].is_contiguous(),
            "reshape: '{}' is not contiguous",
            self[a].name
        );
        assert!(
            self[a].nelements() == ne.iter().product::<i64>(),
            "reshape: element counts differ"
        );
        let ty = self[a].ty;
        let r = self.new_impl(ty, ne, Some(a), 0);
        let name = format!("{} (reshaped)", self[a].name);
        self[r].set_name(&name);
        self.with_op(r, Op::Reshape, &[Some(a)])
    }
    pub fn reshape_1d(&mut self, a: TensorId, ne0: i64) -> TensorId {
        self.reshape(a, &[ne0])
    }
    pub fn reshape_2d(&mut self, a: TensorId, ne0: i64, ne1: i64) -> TensorId {
        self.reshape(a, &[ne0, ne1])
    }
    pub fn reshape_3d(&mut self, a: TensorId, ne0: i64, ne1: i64, ne2: i64) -> TensorId {
        self.reshape(a, &[ne0, ne1, ne2])
    }
    pub fn reshape_4d(&mut self, a: TensorId, ne0: i64, ne1: i64, ne2: i64, ne3: i64) -> TensorId {
        self.reshape(a, &[ne0, ne1, ne2, ne3])
    }

    fn view_impl(&mut self, a: TensorId, ne: &[i64], offset: usize) -> TensorId {
        let ty = self[a].ty;
        let r = self.new_impl(ty, ne4(ne), Some(a), offset);
        let name = format!("{} (view)", self[a].name);
        self[r].set_name(&name);
        self.with_op(r, Op::View, &[Some(a)])
    }
    pub fn view_1d(&mut self, a: TensorId, ne0: i64, offset: usize) -> TensorId {
        self.view_impl(a, &[ne0], offset)
    }
    pub fn view_2d(
        &mut self,
        a: TensorId,
        ne0: i64,
        ne1: i64,
        nb1: usize,
        offset: usize,
    ) -> TensorId {
        let r = self.view_impl(a, &[ne0, ne1], offset);
        let t = &mut self[r];
        t.nb[1] = nb1;
        t.nb[2] = nb1 * ne1 as usize;
        t.nb[3] = t.nb[2];
        r
    }
    #[allow(clippy::too_many_arguments)]
    pub fn view_3d(
        &mut self,
        a: TensorId,
        ne0: i64,
        ne1: i64,
        ne2: i64,
        nb1: usize,
        nb2: usize,
        offset: usize,
    ) -> TensorId {
        let r = self.view_impl(a, &[ne0, ne1, ne2], offset);
        let t = &mut self[r];
        t.nb[1] = nb1;
        t.nb[2] = nb2;
        t.nb[3] = nb2 * ne2 as usize;
        r
    }
    #[allow(clippy::too_many_arguments)]
    pub fn view_4d(
        &mut self,
        a: TensorId,
        ne: [i64; 4],
        nb1: usize,
        nb2: usize,
        nb3: usize,
        offset: usize,
    ) -> TensorId {
        let r = self.view_impl(a, &ne, offset);
        let t = &mut self[r];
        t.nb[1] = nb1;
        t.nb[2] = nb2;
        t.nb[3] = nb3;
        r
    }

    /// Source dim i becomes result dim axes[i].
    pub fn permute(&mut self, a: TensorId, a0: i32, a1: i32, a2: i32, a3: i32) -> TensorId {
        let axes = [a0, a1, a2, a3];
        let mut seen = [false; 4];
        for &x in &axes {
            assert!(
                (0..4).contains(&x) && !seen[x as usize],
                "permute: axes {axes:?} are not a permutation"
            );
            seen[x as usize] = true;
        }
        let r = self.view_tensor(a);
        let name = format!("{} (permuted)", self[a].name);
        let (sne, snb) = (self[a].ne, self[a].nb);
        let t = &mut self[r];
        t.set_name(&name);
        for i in 0..4 {
            t.ne[axes[i] as usize] = sne[i];
            t.nb[axes[i] as usize] = snb[i];
        }
        self.with_op(r, Op::Permute { axes }, &[Some(a)])
    }
    pub fn transpose(&mut self, a: TensorId) -> TensorId {
        let r = self.view_tensor(a);
        let name = format!("{} (transposed)", self[a].name);
        let (sne, snb) = (self[a].ne, self[a].nb);
        let t = &mut self[r];
        t.set_name(&name);
        t.ne[0] = sne[1];
        t.ne[1] = sne[0];
        t.nb[0] = snb[1];
        t.nb[1] = snb[0];
        self.with_op(r, Op::Transpose, &[Some(a)])
    }

    // ---- rows ----

    /// Rows of a picked by the i32 indices b: {a.ne0, b.ne0, b.ne1, b.ne2}.
    pub fn get_rows(&mut self, a: TensorId, b: TensorId) -> TensorId {
        let (ta, tb) = (&self[a], &self[b]);
        assert!(
            ta.ne[2] == tb.ne[1] && ta.ne[3] == tb.ne[2] && tb.ne[3] == 1,
            "get_rows: shapes do not match"
        );
        assert!(tb.ty == Type::I32, "get_rows: indices must be i32");
        let ty = if ta.ty == Type::I32 {
            Type::I32
        } else {
            Type::F32
        };
        let ne = [ta.ne[0], tb.ne[0], tb.ne[1], tb.ne[2]];
        let r = self.new_impl(ty, ne, None, 0);
        self.with_op(r, Op::GetRows, &[Some(a), Some(b)])
    }
    /// Write the rows of b into a at the rows named by c; the result is a view of a.
    pub fn set_rows(&mut self, a: TensorId, b: TensorId, c: TensorId) -> TensorId {
        let (ta, tb, tc) = (&self[a], &self[b], &self[c]);
        assert!(
            ta.ne[0] == tb.ne[0] && ta.ne[2] == tb.ne[2] && ta.ne[3] == tb.ne[3],
            "set_rows: a and b differ"
        );
        assert!(
            tb.ne[1] == tc.ne[0]
                && tb.ne[2] % tc.ne[1] == 0
                && tb.ne[3] % tc.ne[2] == 0
                && tc.ne[3] == 1
        );
        assert!(tb.ty == Type::F32, "set_rows: b must be f32");
        assert!(
            tc.ty == Type::I64 || tc.ty == Type::I32,
            "set_rows: indices must be i64 or i32"
        );
        assert!(
            ta.is_contiguous_rows() && tb.is_contiguous_rows(),
            "set_rows: rows must be contiguous"
        );
        let r = self.view_tensor(a);
        self.with_op(r, Op::SetRows, &[Some(b), Some(c), Some(a)])
    }

    // ---- attention ----

    pub fn soft_max(&mut self, a: TensorId) -> TensorId {
        self.soft_max_ext(a, None, 1.0, 0.0)
    }
    pub fn soft_max_ext(
        &mut self,
        a: TensorId,
        mask: Option<TensorId>,
        scale: f32,
        max_bias: f32,
    ) -> TensorId {
        assert!(self[a].is_contiguous(), "soft_max: a must be contiguous");
        if let Some(m) = mask {
            let (tm, ta) = (&self[m], &self[a]);
            assert!(
                tm.ty == Type::F16 || tm.ty == Type::F32,
                "soft_max: mask must be f16 or f32"
            );
            assert!(tm.is_contiguous() && tm.ne[0] == ta.ne[0] && tm.ne[1] >= ta.ne[1]);
            assert!(
                ta.ne[2] % tm.ne[2] == 0 && ta.ne[3] % tm.ne[3] == 0,
                "soft_max: mask cannot broadcast"
            );
        }
        assert!(
            max_bias <= 0.0 || mask.is_some(),
            "soft_max: max_bias needs a mask"
        );
        let r = self.dup_tensor(a);
        self.with_op(r, Op::SoftMax { scale, max_bias }, &[Some(a), mask])
    }
    pub fn soft_max_add_sinks(&mut self, t: TensorId, sinks: Option<TensorId>) {
        self[t].src[2] = sinks;
    }

    pub fn rope_ext(
        &mut self,
        a: TensorId,
        pos: TensorId,
        freq_factors: Option<TensorId>,
        p: RopeParams,
    ) -> TensorId {
        self.rope_impl(a, pos, freq_factors, p, false)
    }
    pub fn rope_ext_inplace(
        &mut self,
        a: TensorId,
        pos: TensorId,
        ff: Option<TensorId>,
        p: RopeParams,
    ) -> TensorId {
        self.rope_impl(a, pos, ff, p, true)
    }
    /// ggml_rope_set_offset: the ROPE `t` rotates the n_dims values of each row from `n_offs`
    /// on (deepseek2's un-split attention keeps the rotated part last) and copies the rest.
    pub fn rope_set_offset(&mut self, t: TensorId, n_offs: i32) -> TensorId {
        let ne0 = self[t].ne[0];
        let Op::Rope(p) = &mut self[t].op else {
            panic!("rope_set_offset: not a ROPE");
        };
        assert!(
            p.mode != rope_mode::VISION,
            "rope_set_offset: not for vision rope"
        );
        assert!(
            n_offs >= 0 && n_offs % 2 == 0 && (n_offs + p.n_dims) as i64 <= ne0,
            "rope_set_offset: offset {n_offs} with {} rotated values exceeds the row of {ne0}",
            p.n_dims
        );
        p.n_offs = n_offs;
        t
    }
    fn rope_impl(
        &mut self,
        a: TensorId,
        pos: TensorId,
        ff: Option<TensorId>,
        p: RopeParams,
        inplace: bool,
    ) -> TensorId {
        assert!(p.mode & 1 == 0, "rope: mode & 1 is no longer supported");
        let (ta, tp) = (&self[a], &self[pos]);
        assert!(
            tp.is_vector() && tp.ty == Type::I32,
            "rope: positions must be an i32 vector"
        );
        if p.mode & rope_mode::MROPE != 0 {
            assert!(
                ta.ne[2] * 4 == tp.ne[0],
                "rope: mrope expects 4 positions per token"
            );
        } else {
            assert!(
                ta.ne[2] == tp.ne[0],
                "rope: one position per token: {} vs {}",
                ta.ne[2],
                tp.ne[0]
            );
        }
        if let Some(f) = ff {
            assert!(
                self[f].ty == Type::F32 && self[f].ne[0] >= p.n_dims as i64 / 2,
                "rope: bad freq factors"
            );
        }
        let r = self.result_like(a, inplace);
        self.with_op(r, Op::Rope(p), &[Some(a), Some(pos), ff])
    }

    /// q {Dk, n_q, H, ne3}, k {Dk, n_kv, H_kv, ne3}, v {Dv, n_kv, H_kv, ne3}, mask {n_kv, n_q_pad, ..}
    /// -> {Dv, H, n_q, ne3} (permuted).
    #[allow(clippy::too_many_arguments)]
    pub fn flash_attn_ext(
        &mut self,
        q: TensorId,
        k: TensorId,
        v: TensorId,
        mask: Option<TensorId>,
        scale: f32,
        max_bias: f32,
        logit_softcap: f32,
    ) -> TensorId {
        let (tq, tk, tv) = (&self[q], &self[k], &self[v]);
        assert!(
            tk.ne[0] == tq.ne[0],
            "flash_attn_ext: q and k head sizes differ"
        );
        assert!(
            tq.ne[2] % tk.ne[2] == 0 && tq.ne[3] % tk.ne[3] == 0,
            "flash_attn_ext: heads do not broadcast"
        );
        assert!(
            tk.ne[1] == tv.ne[1],
            "flash_attn_ext: k and v lengths differ"
        );
        if let Some(m) = mask {
            let tm = &self[m];
            assert!(
                tm.ne[0] == tk.ne[1],
                "flash_attn_ext: mask length {} != n_kv {}",
                tm.ne[0],
                tk.ne[1]
            );
            assert!(
                tm.ne[1] >= tq.ne[1],
                "flash_attn_ext: mask has fewer rows than q"
            );
            assert!(
                tq.ne[2] % tm.ne[2] == 0 && tq.ne[3] % tm.ne[3] == 0,
                "flash_attn_ext: mask cannot broadcast"
            );
        }
        assert!(
            max_bias <= 0.0 || mask.is_some(),
            "flash_attn_ext: max_bias needs a mask"
        );
        let ne = [tv.ne[0], tq.ne[2], tq.ne[1], tq.ne[3]];
        let r = self.new_impl(Type::F32, ne, None, 0);
        let op = Op::FlashAttnExt {
            scale,
            max_bias,
            logit_softcap,
            prec: Prec::Default,
        };
        self.with_op(r, op, &[Some(q), Some(k), Some(v), mask])
    }
    pub fn flash_attn_ext_set_prec(&mut self, t: TensorId, p: Prec) {
        if let Op::FlashAttnExt { prec, .. } = &mut self[t].op {
            *prec = p;
        }
    }
    pub fn flash_attn_ext_add_sinks(&mut self, t: TensorId, sinks: Option<TensorId>) {
        self[t].src[4] = sinks;
    }
}
