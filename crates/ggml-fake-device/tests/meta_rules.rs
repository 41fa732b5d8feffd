//! The meta device's split-state rules, each against the scheduler seed's description:
//! the matmul algebra, assume_sync, per-row ops, reshape, permute, flash attention on heads,
//! broadcasts, the rotation of uneven splits, the cache, and the whitelist's errors.

use ggml::meta::{split_counts, Resolver, SplitAxis, SplitState, StateCache};
use ggml::{Context, Tensor, TensorId, Type};
use std::collections::HashMap;

/// Resolves `t` in `ctx` with static tensors split as `table` says (by name; else mirrored).
fn resolve(
    ctx: &Context,
    table: &HashMap<String, SplitState>,
    t: TensorId,
    assume_sync: bool,
    n: usize,
) -> Result<SplitState, String> {
    let split = |x: &Tensor| {
        table
            .get(&x.name)
            .cloned()
            .unwrap_or_else(SplitState::mirrored)
    };
    let mut cache = StateCache::default();
    let mut r = Resolver {
        ctx,
        n,
        static_split: &split,
        cache: &mut cache,
    };
    r.state(t, assume_sync).map_err(|e| e.to_string())
}

fn leaf(ctx: &mut Context, name: &str, ne: &[i64]) -> TensorId {
    let t = ctx.new_tensor(Type::F32, ne);
    ctx.set_name(t, name)
}

fn table(entries: &[(&str, SplitState)]) -> HashMap<String, SplitState> {
    entries
        .iter()
        .map(|(n, s)| (n.to_string(), s.clone()))
        .collect()
}

#[test]
fn matmul_algebra() {
    let mut ctx = Context::new();
    let w_col = leaf(&mut ctx, "w_col", &[8, 6]); // split by output rows (axis 1)
    let w_row = leaf(&mut ctx, "w_row", &[6, 8]); // split by input columns (axis 0)
    let w_mir = leaf(&mut ctx, "w_mir", &[8, 8]);
    let x = leaf(&mut ctx, "x", &[8, 3]);
    let tab = table(&[
        ("w_col", SplitState::axis(1, vec![2, 4])),
        ("w_row", SplitState::axis(0, vec![2, 4])),
    ]);

    // MIRRORED x MIRRORED -> MIRRORED
    let mm = ctx.mul_mat(w_mir, x);
    assert_eq!(
        resolve(&ctx, &tab, mm, false, 2).unwrap(),
        SplitState::mirrored()
    );

    // AXIS_1 x MIRRORED -> AXIS_0 with the weight's counts
    let col = ctx.mul_mat(w_col, x);
    assert_eq!(
        resolve(&ctx, &tab, col, false, 2).unwrap(),
        SplitState::axis(0, vec![2, 4])
    );

    // AXIS_0 x AXIS_0 -> PARTIAL (and MIRRORED once assumed reduced)
    let row = ctx.mul_mat(w_row, col);
    assert!(resolve(&ctx, &tab, row, false, 2).unwrap().is_partial());
    assert!(resolve(&ctx, &tab, row, true, 2).unwrap().is_mirrored());

    // MIRRORED x AXIS_1 -> src1's state
    let xs = leaf(&mut ctx, "x_tok", &[8, 4]);
    let tab2 = table(&[("x_tok", SplitState::axis(1, vec![1, 3]))]);
    let m = ctx.mul_mat(w_mir, xs);
    assert_eq!(
        resolve(&ctx, &tab2, m, false, 2).unwrap(),
        SplitState::axis(1, vec![1, 3])
    );

    // AXIS_0 weight against a mirrored activation has no rule: the whitelist refuses by name
    let mirrored_act = leaf(&mut ctx, "act", &[6, 3]);
    let bad = ctx.mul_mat(w_row, mirrored_act);
    ctx.set_name(bad, "bad_mm");
    let e = resolve(&ctx, &tab, bad, false, 2).unwrap_err();
    assert!(e.contains("MUL_MAT") && e.contains("bad_mm"), "{e}");
}

#[test]
fn a_partial_source_counts_as_reduced() {
    let mut ctx = Context::new();
    let w_col = leaf(&mut ctx, "w_col", &[8, 6]);
    let w_row = leaf(&mut ctx, "w_row", &[6, 8]);
    let x = leaf(&mut ctx, "x", &[8, 3]);
    let tab = table(&[
        ("w_col", SplitState::axis(1, vec![3, 3])),
        ("w_row", SplitState::axis(0, vec![3, 3])),
    ]);
    let h = ctx.mul_mat(w_col, x);
    let p = ctx.mul_mat(w_row, h);
    // the residual add reads the partial sum after its reduce: MIRRORED + MIRRORED
    let res = ctx.add(p, x);
    assert!(resolve(&ctx, &tab, res, false, 2).unwrap().is_mirrored());
}

#[test]
fn per_row_ops_pass_splits_through_but_not_along_the_row() {
    let mut ctx = Context::new();
    let a = leaf(&mut ctx, "a", &[8, 4]);
    let tab = table(&[("a", SplitState::axis(1, vec![1, 3]))]);
    let n = ctx.rms_norm(a, 1e-5);
    assert_eq!(
        resolve(&ctx, &tab, n, false, 2).unwrap(),
        SplitState::axis(1, vec![1, 3])
    );
    let tab0 = table(&[("a", SplitState::axis(0, vec![4, 4]))]);
    let e = resolve(&ctx, &tab0, n, false, 2).unwrap_err();
    assert!(e.contains("RMS_NORM"), "{e}");
    let s = ctx.soft_max(a);
    assert_eq!(
        resolve(&ctx, &tab, s, false, 2).unwrap(),
        SplitState::axis(1, vec![1, 3])
    );
}

#[test]
fn reshape_moves_the_split_to_the_dimension_it_lands_on() {
    let mut ctx = Context::new();
    // Q rows of 4 heads of 8, split 1 head : 3 heads
    let q = leaf(&mut ctx, "q", &[32, 5]);
    let tab = table(&[("q", SplitState::axis(0, vec![8, 24]))]);
    let r = ctx.reshape_3d(q, 8, 4, 5);
    assert_eq!(
        resolve(&ctx, &tab, r, false, 2).unwrap(),
        SplitState::axis(1, vec![1, 3])
    );
    // and back: heads folded into rows again
    let back = ctx.reshape_2d(r, 32, 5);
    assert_eq!(
        resolve(&ctx, &tab, back, false, 2).unwrap(),
        SplitState::axis(0, vec![8, 24])
    );
    // a split along the last dimension stays on the last dimension
    let tab1 = table(&[("q", SplitState::axis(1, vec![2, 3]))]);
    let flat = ctx.reshape_1d(q, 160);
    assert_eq!(
        resolve(&ctx, &tab1, flat, false, 2).unwrap(),
        SplitState::axis(0, vec![64, 96])
    );
}

#[test]
fn permute_and_transpose_follow_the_axes() {
    let mut ctx = Context::new();
    let k = leaf(&mut ctx, "k", &[8, 4, 5]);
    let tab = table(&[("k", SplitState::axis(1, vec![2, 2]))]);
    let p = ctx.permute(k, 0, 2, 1, 3);
    assert_eq!(
        resolve(&ctx, &tab, p, false, 2).unwrap(),
        SplitState::axis(2, vec![2, 2])
    );
    let m = leaf(&mut ctx, "m", &[6, 4]);
    let tab_m = table(&[("m", SplitState::axis(0, vec![2, 4]))]);
    let t = ctx.transpose(m);
    assert_eq!(
        resolve(&ctx, &tab_m, t, false, 2).unwrap(),
        SplitState::axis(1, vec![2, 4])
    );
}

#[test]
fn flash_attention_is_split_on_heads() {
    let mut ctx = Context::new();
    let (d, nh, nkv, t, kv) = (8, 4, 2, 3, 16);
    let q = ctx.new_tensor_3d(Type::F32, d, t, nh); // after permute: heads on axis 2
    ctx.set_name(q, "q");
    let k = ctx.new_tensor_3d(Type::F16, d, kv, nkv);
    ctx.set_name(k, "k");
    let v = ctx.new_tensor_3d(Type::F16, d, kv, nkv);
    ctx.set_name(v, "v");
    let mask = ctx.new_tensor_2d(Type::F16, kv, t);
    ctx.set_name(mask, "mask");
    let fa = ctx.flash_attn_ext(q, k, v, Some(mask), 0.125, 0.0, 0.0);
    let tab = table(&[
        ("q", SplitState::axis(2, vec![2, 2])),
        ("k", SplitState::axis(2, vec![1, 1])),
        ("v", SplitState::axis(2, vec![1, 1])),
    ]);
    // the result [d, n_head, n_tokens] is split on its heads, axis 1
    assert_eq!(
        resolve(&ctx, &tab, fa, false, 2).unwrap(),
        SplitState::axis(1, vec![2, 2])
    );
    // all mirrored: mirrored
    assert!(resolve(&ctx, &HashMap::new(), fa, false, 2)
        .unwrap()
        .is_mirrored());
    // Q split on anything but heads is refused by name
    let bad = table(&[("q", SplitState::axis(0, vec![4, 4]))]);
    let e = resolve(&ctx, &bad, fa, false, 2).unwrap_err();
    assert!(e.contains("FLASH_ATTN_EXT"), "{e}");
}

#[test]
fn broadcasts_keep_the_split_of_the_big_operand() {
    let mut ctx = Context::new();
    let a = leaf(&mut ctx, "a", &[8, 4]);
    let b = leaf(&mut ctx, "b", &[8, 1]); // broadcast along axis 1, mirrored
    let tab = table(&[("a", SplitState::axis(1, vec![3, 1]))]);
    let s = ctx.add(a, b);
    assert_eq!(
        resolve(&ctx, &tab, s, false, 2).unwrap(),
        SplitState::axis(1, vec![3, 1])
    );
    // both split alike: that split
    let c = leaf(&mut ctx, "c", &[8, 4]);
    let tab2 = table(&[
        ("a", SplitState::axis(1, vec![3, 1])),
        ("c", SplitState::axis(1, vec![3, 1])),
    ]);
    let m = ctx.mul(a, c);
    assert_eq!(
        resolve(&ctx, &tab2, m, false, 2).unwrap(),
        SplitState::axis(1, vec![3, 1])
    );
    // split differently: refused
    let tab3 = table(&[
        ("a", SplitState::axis(1, vec![3, 1])),
        ("c", SplitState::axis(1, vec![2, 2])),
    ]);
    assert!(resolve(&ctx, &tab3, m, false, 2).is_err());
}

#[test]
fn uneven_splits_rotate_which_device_is_short() {
    // 3 heads over 2 devices: the layer's rotation decides who gets the extra one
    assert_eq!(split_counts(3, &[0.0, 0.0], 1, 0), vec![1, 2]);
    assert_eq!(split_counts(3, &[0.0, 0.0], 1, 1), vec![2, 1]);
    // proportions, rounded down to the granularity
    assert_eq!(split_counts(256, &[1.0, 3.0], 32, 0), vec![64, 192]);
    assert_eq!(split_counts(96, &[1.0, 1.0, 1.0], 32, 0), vec![32, 32, 32]);
    // fewer units than devices: someone gets nothing
    let c = split_counts(3, &[0.0; 4], 1, 0);
    assert_eq!(c.iter().sum::<i64>(), 3);
    assert!(c.contains(&0));
    // every rotation covers the whole dimension
    for rot in 0..5 {
        assert_eq!(split_counts(10, &[0.0; 5], 1, rot).iter().sum::<i64>(), 10);
    }
}

#[test]
fn the_cache_is_keyed_on_the_flag_and_dropped_when_a_tensor_changes() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let mut ctx = Context::new();
    let w_col = leaf(&mut ctx, "w_col", &[8, 6]);
    let w_row = leaf(&mut ctx, "w_row", &[6, 8]);
    let x = leaf(&mut ctx, "x", &[8, 3]);
    let h = ctx.mul_mat(w_col, x);
    let p = ctx.mul_mat(w_row, h);
    let calls = AtomicUsize::new(0);
    let split = |t: &Tensor| {
        calls.fetch_add(1, Ordering::SeqCst);
        match t.name.as_str() {
            "w_col" => SplitState::axis(1, vec![3, 3]),
            "w_row" => SplitState::axis(0, vec![3, 3]),
            _ => SplitState::mirrored(),
        }
    };
    let mut cache = StateCache::default();
    {
        let mut r = Resolver {
            ctx: &ctx,
            n: 2,
            static_split: &split,
            cache: &mut cache,
        };
        assert!(r.state(p, false).unwrap().is_partial());
        // the same tensor with the other flag is its own entry
        assert!(r.state(p, true).unwrap().is_mirrored());
        let before = calls.load(Ordering::SeqCst);
        assert!(r.state(p, false).unwrap().is_partial());
        assert!(r.state(h, true).unwrap().axis == SplitAxis::Axis(0));
        assert_eq!(
            calls.load(Ordering::SeqCst),
            before,
            "repeated lookups are served by the cache"
        );
    }
    assert!(cache.len() >= 5);
    // a changed tensor invalidates: its state is worked out again, from the callback up
    ctx[x].ne = [8, 4, 1, 1];
    ctx[x].nb = ggml::tensor::contiguous_strides(Type::F32, &ctx[x].ne);
    ctx[h].ne = [6, 4, 1, 1];
    ctx[h].nb = ggml::tensor::contiguous_strides(Type::F32, &ctx[h].ne);
    let before = calls.load(Ordering::SeqCst);
    let mut r = Resolver {
        ctx: &ctx,
        n: 2,
        static_split: &split,
        cache: &mut cache,
    };
    assert!(r.state(h, false).unwrap().axis == SplitAxis::Axis(0));
    assert!(calls.load(Ordering::SeqCst) > before);
}

#[test]
fn views_rows_rope_concat_and_reductions() {
    let mut ctx = Context::new();
    // a cache [n_embd_kv = 4 heads x 8, 16 cells] split by heads (axis 0)
    let cache = leaf(&mut ctx, "cache", &[32, 16]);
    let tab = table(&[
        ("cache", SplitState::axis(0, vec![8, 24])),
        ("rows", SplitState::axis(0, vec![8, 24])),
        ("x", SplitState::axis(1, vec![2, 2])),
        ("emb", SplitState::axis(0, vec![8, 24])),
    ]);
    // the per-head view [8, 4, n_kv] moves the split to the heads
    let nb = ctx[cache].nb;
    let v = ctx.view_3d(cache, 8, 4, 10, nb[0] * 8, nb[1], 0);
    assert_eq!(
        resolve(&ctx, &tab, v, false, 2).unwrap(),
        SplitState::axis(1, vec![1, 3])
    );
    // set_rows writes rows split like the destination, with mirrored indices
    let rows = leaf(&mut ctx, "rows", &[32, 3]);
    let idx = ctx.new_tensor_1d(Type::I64, 3);
    ctx.set_name(idx, "idx");
    let w = ctx.set_rows(cache, rows, idx);
    assert_eq!(
        resolve(&ctx, &tab, w, false, 2).unwrap(),
        SplitState::axis(0, vec![8, 24])
    );
    // get_rows of a table split along its rows' elements keeps that split
    let emb = leaf(&mut ctx, "emb", &[32, 100]);
    let ids = ctx.new_tensor_1d(Type::I32, 5);
    ctx.set_name(ids, "ids");
    let g = ctx.get_rows(emb, ids);
    assert_eq!(
        resolve(&ctx, &tab, g, false, 2).unwrap(),
        SplitState::axis(0, vec![8, 24])
    );
    // rope with mirrored positions passes the heads' split through
    let q = leaf(&mut ctx, "q3", &[8, 4, 5]);
    let tab_q = table(&[("q3", SplitState::axis(1, vec![1, 3]))]);
    let pos = ctx.new_tensor_1d(Type::I32, 5);
    ctx.set_name(pos, "pos");
    let r = ctx.rope_ext(
        q,
        pos,
        None,
        ggml::RopeParams {
            n_dims: 8,
            ..Default::default()
        },
    );
    assert_eq!(
        resolve(&ctx, &tab_q, r, false, 2).unwrap(),
        SplitState::axis(1, vec![1, 3])
    );
    // concat of a split and a mirrored tensor along another axis: the split survives
    let x = leaf(&mut ctx, "x", &[8, 4]);
    let m = leaf(&mut ctx, "m", &[3, 4]);
    let c = ctx.concat(x, m, 0);
    let tab_c = table(&[("x", SplitState::axis(1, vec![1, 3]))]);
    assert_eq!(
        resolve(&ctx, &tab_c, c, false, 2).unwrap(),
        SplitState::axis(1, vec![1, 3])
    );
    // along the split axis it cannot: refused by name
    let m2 = leaf(&mut ctx, "m2", &[8, 2]);
    let c2 = ctx.concat(x, m2, 1);
    let e = resolve(&ctx, &tab_c, c2, false, 2).unwrap_err();
    assert!(e.contains("CONCAT"), "{e}");
    // a whole-tensor reduction of a split tensor is refused (scalar only), of a mirrored one not
    let s = ctx.sum(x);
    let e = resolve(&ctx, &tab_c, s, false, 2).unwrap_err();
    assert!(e.contains("SUM"), "{e}");
    assert!(resolve(&ctx, &HashMap::new(), s, false, 2)
        .unwrap()
        .is_mirrored());
    // rows are independent for sum_rows unless split along the row
    let sr = ctx.sum_rows(x);
    assert_eq!(
        resolve(&ctx, &tab_c, sr, false, 2).unwrap(),
        SplitState::axis(1, vec![1, 3])
    );
}

/// A fused QKV of 6 heads of 4 over 3 KV heads (Q 24 rows, K and V 12 each) split on whole KV
/// groups: `q` and `kv` are the per-device rows of Q and of K (= V).
fn fused_qkv_graph(
    q: Vec<i64>,
    kv: Vec<i64>,
) -> (Context, HashMap<String, SplitState>, [TensorId; 5]) {
    let mut ctx = Context::new();
    let w = leaf(&mut ctx, "wqkv", &[16, 48]);
    let b = leaf(&mut ctx, "bqkv", &[48]);
    let x = leaf(&mut ctx, "x", &[16, 3]);
    let tab = table(&[
        (
            "wqkv",
            SplitState::segmented(1, &[(q.clone(), 1), (kv.clone(), 2)]),
        ),
        ("bqkv", SplitState::segmented(0, &[(q, 1), (kv, 2)])),
    ]);
    let mm = ctx.mul_mat(w, x);
    let qkv = ctx.add(mm, b);
    let nb1 = ctx[qkv].nb[1];
    // the Q, K and V parts of each row, as heads (build_qkv's views)
    let vq = ctx.view_3d(qkv, 4, 6, 3, 16, nb1, 0);
    let vk = ctx.view_3d(qkv, 4, 3, 3, 16, nb1, 24 * 4);
    let vv = ctx.view_3d(qkv, 4, 3, 3, 16, nb1, 36 * 4);
    (ctx, tab, [mm, qkv, vq, vk, vv])
}

#[test]
fn a_fused_qkv_gives_each_device_whole_heads_of_q_k_and_v() {
    // 3 KV groups (2 Q heads each) do not divide 2 or 4 devices; the counts are exact
    for (q, kv, heads_q, heads_kv) in [
        (vec![8, 16], vec![4, 8], vec![2, 4], vec![1, 2]),
        (vec![16, 8], vec![8, 4], vec![4, 2], vec![2, 1]),
        (vec![8, 8, 8], vec![4, 4, 4], vec![2, 2, 2], vec![1, 1, 1]),
        (
            vec![0, 8, 8, 8],
            vec![0, 4, 4, 4],
            vec![0, 2, 2, 2],
            vec![0, 1, 1, 1],
        ),
    ] {
        let n = q.len();
        let (ctx, tab, [mm, qkv, vq, vk, vv]) = fused_qkv_graph(q.clone(), kv.clone());
        // the product holds each device's Q, K and V rows back to back: one segment of their
        // sum (ggml's handle_mul_mat)
        let rows: Vec<i64> = (0..n).map(|j| q[j] + 2 * kv[j]).collect();
        assert_eq!(
            resolve(&ctx, &tab, mm, false, n).unwrap(),
            SplitState::axis(0, rows.clone())
        );
        // the segmented bias adds along the same rows
        assert_eq!(
            resolve(&ctx, &tab, qkv, false, n).unwrap(),
            SplitState::axis(0, rows)
        );
        // the views take each device's own heads of Q, K and V
        assert_eq!(
            resolve(&ctx, &tab, vq, false, n).unwrap(),
            SplitState::axis(1, heads_q)
        );
        assert_eq!(
            resolve(&ctx, &tab, vk, false, n).unwrap(),
            SplitState::axis(1, heads_kv.clone())
        );
        assert_eq!(
            resolve(&ctx, &tab, vv, false, n).unwrap(),
            SplitState::axis(1, heads_kv)
        );
    }
}

#[test]
fn segments_count_in_every_rule_that_compares_or_scales_splits() {
    let seg = SplitState::segmented(1, &[(vec![8, 16], 1), (vec![4, 8], 2)]);
    // per device: the sum over segments of count x repetitions
    assert_eq!((seg.count(0), seg.count(1)), (16, 32));
    assert_eq!(seg.n_segments(), 2);
    assert!(!seg.is_simple());
    // the same totals in one segment are the same split for the rules (split_states_equal)
    assert!(seg.equal(&SplitState::axis(1, vec![16, 32]), 2));
    assert!(!seg.equal(&SplitState::axis(1, vec![24, 24]), 2));
    // each device's rows in the whole tensor: Q, then K, then V
    assert_eq!(
        seg.index_map(),
        vec![
            [
                (0..8).collect::<Vec<i64>>(),
                (24..28).collect(),
                (36..40).collect()
            ]
            .concat(),
            [
                (8..24).collect::<Vec<i64>>(),
                (28..36).collect(),
                (40..48).collect()
            ]
            .concat(),
        ]
    );
    // GGML_META_DEBUG shows every segment
    assert_eq!(seg.to_string(), "1, {8x1, 16x1; 4x2, 8x2}");
    assert_eq!(SplitState::axis(0, vec![2, 3]).to_string(), "0, {2x1, 3x1}");

    let mut ctx = Context::new();
    let b = leaf(&mut ctx, "bqkv", &[48]);
    let tab = table(&[(
        "bqkv",
        SplitState::segmented(0, &[(vec![8, 16], 1), (vec![4, 8], 2)]),
    )]);
    // an elementwise op keeps the segments: it reads back in its source's layout
    let s = ctx.scale(b, 2.0);
    assert_eq!(resolve(&ctx, &tab, s, false, 2).unwrap(), tab["bqkv"]);
    // a reshape into heads of 4 counts whole rows of the totals
    let r = ctx.reshape_2d(b, 4, 12);
    assert_eq!(
        resolve(&ctx, &tab, r, false, 2).unwrap(),
        SplitState::axis(1, vec![4, 8])
    );
    // added to a product split with other totals: refused
    let x = leaf(&mut ctx, "x", &[16, 1]);
    let w = leaf(&mut ctx, "w", &[16, 48]);
    let tab2 = table(&[
        (
            "bqkv",
            SplitState::segmented(0, &[(vec![8, 16], 1), (vec![4, 8], 2)]),
        ),
        ("w", SplitState::axis(1, vec![24, 24])),
    ]);
    let mm = ctx.mul_mat(w, x);
    let add = ctx.add(mm, b);
    let e = resolve(&ctx, &tab2, add, false, 2).unwrap_err();
    assert!(e.contains("ADD"), "{e}");
    // segments that repeat have no one repetition count to permute (ggml asserts)
    let m = leaf(&mut ctx, "m", &[12, 4]);
    let tab3 = table(&[(
        "m",
        SplitState::segmented(0, &[(vec![2, 2], 2), (vec![2, 2], 1)]),
    )]);
    let p = ctx.transpose(m);
    let e = resolve(&ctx, &tab3, p, false, 2).unwrap_err();
    assert!(e.contains("TRANSPOSE") && e.contains("segments"), "{e}");
    // a static split whose segments do not cover the dimension is refused by name
    let tab4 = table(&[(
        "m",
        SplitState::segmented(0, &[(vec![2, 2], 2), (vec![2, 1], 1)]),
    )]);
    let e = resolve(&ctx, &tab4, p, false, 2).unwrap_err();
    assert!(e.contains("'m'") && e.contains("covers 11 of 12"), "{e}");
}

#[test]
fn fused_up_gate_halves_split_alike_through_the_glu() {
    let mut ctx = Context::new();
    // F = 12 FFN columns split 4 : 8, gate half then up half
    let w = leaf(&mut ctx, "w_up", &[16, 24]);
    let x = leaf(&mut ctx, "x", &[16, 3]);
    let tab = table(&[("w_up", SplitState::segmented(1, &[(vec![4, 8], 2)]))]);
    let up = ctx.mul_mat(w, x);
    // each device holds its gate and up rows: twice its share
    assert_eq!(
        resolve(&ctx, &tab, up, false, 2).unwrap(),
        SplitState::axis(0, vec![8, 16])
    );
    // SwiGLU halves each device's rows: its share of the FFN columns
    let a = ctx.glu(up, ggml::GluOp::Swiglu, false);
    assert_eq!(
        resolve(&ctx, &tab, a, false, 2).unwrap(),
        SplitState::axis(0, vec![4, 8])
    );
}

#[test]
fn a_reshape_that_folds_a_split_dimension_repeats_it() {
    let mut ctx = Context::new();
    // [6 columns split 2 : 4, 3 rows] flattened: the 2 : 4 pattern repeats once per row
    let a = leaf(&mut ctx, "a", &[6, 3]);
    let tab = table(&[("a", SplitState::axis(0, vec![2, 4]))]);
    let flat = ctx.reshape_1d(a, 18);
    let s = resolve(&ctx, &tab, flat, false, 2).unwrap();
    assert_eq!(s, SplitState::segmented(0, &[(vec![2, 4], 3)]));
    assert_eq!((s.count(0), s.count(1)), (6, 12));
    assert_eq!(s.index_map()[0], vec![0, 1, 6, 7, 12, 13]);
    // an elementwise op on it keeps the repetitions
    let sc = ctx.scale(flat, 0.5);
    assert_eq!(resolve(&ctx, &tab, sc, false, 2).unwrap(), s);
    // and folding it back recovers the one-row pattern
    let back = ctx.reshape_2d(sc, 6, 3);
    assert_eq!(
        resolve(&ctx, &tab, back, false, 2).unwrap(),
        SplitState::axis(0, vec![2, 4])
    );
}
