//! A forward pass of the reference model (llama architecture, 4 layers, f32 weights mapped from
//! the GGUF file) built by hand from ggml ops and run on the CPU backend, for the prompt "hi"
//! (token 6023) at position 0. Every named intermediate's sum is compared with what
//! llama-eval-callback printed for the same model and token
//! (shared/reference/logs/eval-callback-hi.log), as llama.cpp's graph names them.

use ggml::backend::{set_tensor, tensor_to_f32, GraphView, Status};
use ggml::op::rope_mode;
use ggml::tensor::TensorData;
use ggml::{Context, Graph, RopeParams, TensorId, Type};
use ggml_op_tests::alloc::alloc_ctx;
use std::collections::HashMap;
use std::sync::Arc;

/// name -> the last sum printed for a tensor of that name.
fn reference_sums(log: &str) -> HashMap<String, f64> {
    let path = test_fixtures::shared_dir().join("reference/logs").join(log);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = HashMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("common_debug_cb_eval:") {
            current = rest.split(" = ").next().map(|n| n.trim().to_string());
        } else if let Some(v) = line.trim().strip_prefix("sum = ") {
            if let (Some(name), Ok(v)) = (current.take(), v.trim().parse::<f64>()) {
                out.insert(name, v);
            }
        }
    }
    out
}

struct Model {
    file: Arc<gguf::GgufFile>,
    buffer: Arc<ggml::backend::Buffer>,
}

impl Model {
    /// A weight tensor in `ctx` pointing into the mapped file.
    fn weight(&self, ctx: &mut Context, name: &str) -> TensorId {
        let info = self
            .file
            .tensor(name)
            .unwrap_or_else(|| panic!("no tensor {name}"));
        let ne: Vec<i64> = info.ne.iter().map(|&n| n as i64).collect();
        let t = ctx.new_tensor(info.ty, &ne);
        ctx.set_name(t, name);
        let addr = self.file.tensor_data(info).as_ptr() as usize;
        ctx[t].data = Some(TensorData {
            buffer: self.buffer.clone(),
            addr,
        });
        t
    }
}

#[test]
fn reference_model_forward_pass_matches_llama_cpp_sums() {
    forward("eval-callback-hi.log", true);
}

#[test]
fn reference_model_forward_pass_without_flash_attention() {
    forward("eval-callback-hi-fa-off.log", false);
}

fn forward(log: &str, flash_attn: bool) {
    let Some(path) = test_fixtures::reference_model_or_skip() else {
        return;
    };
    let file = Arc::new(gguf::GgufFile::open(&path).expect("open reference model"));
    let dev = ggml_cpu::device();
    let data = file.data();
    let owner: Arc<dyn Send + Sync> = file.clone();
    let buffer = dev
        .buffer_from_host_ptr_owned(data.as_ptr() as usize, data.len(), owner)
        .expect("CPU_Mapped buffer");
    assert_eq!(buffer.name(), "CPU_Mapped");
    let m = Model {
        file: file.clone(),
        buffer,
    };

    let (n_embd, n_head, n_head_kv, head_dim, n_layer, n_ctx) =
        (256i64, 8i64, 2i64, 32i64, 4, 256i64);
    let eps = 1e-5f32; // llama.attention.layer_norm_rms_epsilon
    let rope = RopeParams {
        n_dims: 32,
        mode: rope_mode::NORMAL,
        n_ctx_orig: 4096,
        freq_base: 500000.0,
        ..RopeParams::default()
    };

    let mut g = Graph::new(Context::new());
    let tokens = g.ctx.new_tensor_1d(Type::I32, 1);
    let pos = g.ctx.new_tensor_1d(Type::I32, 1);
    let kv_idx = g.ctx.new_tensor_1d(Type::I64, 1);
    let mask = g
        .ctx
        .new_tensor_2d(if flash_attn { Type::F16 } else { Type::F32 }, n_ctx, 1);
    // the transposed V cache (without flash attention) takes one row index per value
    let v_idx = g.ctx.new_tensor_1d(Type::I64, head_dim * n_head_kv);
    let tok_embd = m.weight(&mut g.ctx, "token_embd.weight");
    let mut inp = g.ctx.get_rows(tok_embd, tokens);
    g.ctx.set_name(inp, "embd");
    let mut named: Vec<TensorId> = vec![inp];
    let mut caches = Vec::new();
    for il in 0..n_layer {
        let w = |ctx: &mut Context, n: &str| m.weight(ctx, &format!("blk.{il}.{n}.weight"));
        let c = &mut g.ctx;
        let cur = c.rms_norm(inp, eps);
        let norm_w = w(c, "attn_norm");
        let cur = c.mul(cur, norm_w);
        c.set_name(cur, &format!("attn_norm-{il}"));
        let (wq, wk, wv, wo) = (
            w(c, "attn_q"),
            w(c, "attn_k"),
            w(c, "attn_v"),
            w(c, "attn_output"),
        );
        let q = c.mul_mat(wq, cur);
        let k = c.mul_mat(wk, cur);
        let v = c.mul_mat(wv, cur);
        let q = c.reshape_3d(q, head_dim, n_head, 1);
        let k = c.reshape_3d(k, head_dim, n_head_kv, 1);
        let v = c.reshape_3d(v, head_dim, n_head_kv, 1);
        let q = c.rope_ext(q, pos, None, rope);
        let k = c.rope_ext(k, pos, None, rope);
        c.set_name(q, &format!("Qcur-{il}"));
        c.set_name(k, &format!("Kcur-{il}"));
        c.set_name(v, &format!("Vcur-{il}"));
        let cache_k = c.new_tensor_2d(Type::F16, head_dim * n_head_kv, n_ctx);
        let cache_v = c.new_tensor_2d(Type::F16, head_dim * n_head_kv, n_ctx);
        caches.push(cache_k);
        caches.push(cache_v);
        let k2 = c.reshape_2d(k, head_dim * n_head_kv, 1);
        let v2 = c.reshape_2d(v, head_dim * n_head_kv, 1);
        let set_k = c.set_rows(cache_k, k2, kv_idx);
        let set_v = if flash_attn {
            c.set_rows(cache_v, v2, kv_idx)
        } else {
            let vt = c.reshape_2d(v2, 1, head_dim * n_head_kv);
            let cv = c.reshape_2d(cache_v, 1, head_dim * n_head_kv * n_ctx);
            c.set_rows(cv, vt, v_idx)
        };
        named.extend([cur, q, k, v]);
        // the cache writes come before the attention that reads the cache
        g.build_forward_expand(set_k);
        g.build_forward_expand(set_v);
        let c = &mut g.ctx;
        let row = c[cache_k].nb[1];
        let scale = 1.0 / (head_dim as f32).sqrt();
        let kview = c.view_3d(
            cache_k,
            head_dim,
            n_head_kv,
            n_ctx,
            2 * head_dim as usize,
            row,
            0,
        );
        let kp = c.permute(kview, 0, 2, 1, 3);
        let qp = c.permute(q, 0, 2, 1, 3);
        let attn = if flash_attn {
            let vview = c.view_3d(
                cache_v,
                head_dim,
                n_head_kv,
                n_ctx,
                2 * head_dim as usize,
                row,
                0,
            );
            let vp = c.permute(vview, 0, 2, 1, 3);
            c.flash_attn_ext(qp, kp, vp, Some(mask), scale, 0.0, 0.0)
        } else {
            // V transposed: element (d, h, j) at row (h * head_dim + d) * n_ctx + j
            let el = 2usize;
            let vview = c.view_3d(
                cache_v,
                n_ctx,
                n_head_kv,
                head_dim,
                el * (n_ctx * head_dim) as usize,
                el * n_ctx as usize,
                0,
            );
            let vp = c.permute(vview, 0, 2, 1, 3);
            let kq = c.mul_mat(kp, qp);
            c.set_name(kq, &format!("kq-{il}"));
            let sm = c.soft_max_ext(kq, Some(mask), scale, 0.0);
            c.set_name(sm, &format!("kq_soft_max-{il}"));
            let kqv = c.mul_mat(vp, sm);
            c.set_name(kqv, &format!("kqv-{il}"));
            named.extend([kq, sm, kqv]);
            c.permute(kqv, 0, 2, 1, 3)
        };
        let attn = if flash_attn { attn } else { c.cont(attn) };
        let kqv = c.reshape_2d(attn, n_embd, 1);
        c.set_name(kqv, &format!("kqv_out-{il}"));
        let attn_out = c.mul_mat(wo, kqv);
        c.set_name(attn_out, &format!("attn_out-{il}"));
        let ffn_inp = c.add(attn_out, inp);
        c.set_name(ffn_inp, &format!("ffn_inp-{il}"));
        let cur = c.rms_norm(ffn_inp, eps);
        c.set_name(cur, &format!("norm-{il}"));
        let norm_w = w(c, "ffn_norm");
        let cur = c.mul(cur, norm_w);
        c.set_name(cur, &format!("ffn_norm-{il}"));
        let (wg, wu, wd) = (w(c, "ffn_gate"), w(c, "ffn_up"), w(c, "ffn_down"));
        let gate = c.mul_mat(wg, cur);
        c.set_name(gate, &format!("ffn_gate-{il}"));
        let up = c.mul_mat(wu, cur);
        c.set_name(up, &format!("ffn_up-{il}"));
        let sw = c.swiglu_split(gate, up);
        c.set_name(sw, &format!("ffn_swiglu-{il}"));
        let down = c.mul_mat(wd, sw);
        c.set_name(down, &format!("ffn_out-{il}"));
        let out = c.add(down, ffn_inp);
        c.set_name(out, &format!("l_out-{il}"));
        named.extend([kqv, attn_out, ffn_inp, cur, gate, up, sw, down, out]);
        inp = out;
    }
    let c = &mut g.ctx;
    let cur = c.rms_norm(inp, eps);
    let out_norm = m.weight(c, "output_norm.weight");
    let cur = c.mul(cur, out_norm);
    c.set_name(cur, "result_norm");
    let output = m.weight(c, "output.weight");
    let logits = c.mul_mat(output, cur);
    c.set_name(logits, "result_output");
    named.extend([cur, logits]);
    g.build_forward_expand(logits);

    alloc_ctx(&mut g.ctx, &dev.buffer_type()).expect("alloc");
    set_tensor(&g.ctx[tokens], &6023i32.to_le_bytes(), 0).unwrap();
    set_tensor(&g.ctx[pos], &0i32.to_le_bytes(), 0).unwrap();
    set_tensor(&g.ctx[kv_idx], &0i64.to_le_bytes(), 0).unwrap();
    let mask_bytes: Vec<u8> = (0..n_ctx as usize)
        .flat_map(|j| match (flash_attn, j) {
            (true, 0) => 0u16.to_le_bytes().to_vec(),
            (true, _) => 0xFC00u16.to_le_bytes().to_vec(), // f16 -inf
            (false, 0) => 0f32.to_le_bytes().to_vec(),
            (false, _) => f32::NEG_INFINITY.to_le_bytes().to_vec(),
        })
        .collect();
    let v_rows: Vec<u8> = (0..head_dim * n_head_kv)
        .flat_map(|i| (i * n_ctx).to_le_bytes())
        .collect();
    set_tensor(&g.ctx[v_idx], &v_rows, 0).unwrap();
    set_tensor(&g.ctx[mask], &mask_bytes, 0).unwrap();
    for &cache in &caches {
        ggml::backend::memset_tensor(&g.ctx[cache], 0, 0, g.ctx[cache].nbytes()).unwrap();
    }

    let mut backend = ggml_cpu::CpuBackend::new(dev);
    backend.set_threads(2);
    let st = ggml::backend::Backend::graph_compute(
        &mut backend,
        GraphView {
            ctx: &g.ctx,
            nodes: &g.nodes,
        },
    );
    assert_eq!(st, Status::Success);

    let want = reference_sums(log);
    let mut checked = 0;
    let mut worst = (0.0f64, String::new());
    for &t in &named {
        let name = g.ctx[t].name.clone();
        let Some(&expect) = want.get(&name) else {
            continue;
        };
        let vals = if g.ctx[t].is_contiguous() {
            tensor_to_f32(&g.ctx[t]).unwrap()
        } else {
            panic!("{name} is not contiguous")
        };
        assert!(
            vals.iter().all(|v| v.is_finite()),
            "{name} has non-finite values"
        );
        let sum: f64 = vals.iter().map(|&v| v as f64).sum();
        let tol = 1e-3 + 1e-4 * expect.abs();
        assert!(
            (sum - expect).abs() <= tol,
            "{name}: sum {sum:.6} but llama.cpp printed {expect:.6}"
        );
        if (sum - expect).abs() > worst.0 {
            worst = ((sum - expect).abs(), name.clone());
        }
        checked += 1;
    }
    eprintln!(
        "{checked} sums compared; largest difference {:.2e} ({})",
        worst.0, worst.1
    );
    assert!(checked >= 40, "only {checked} tensors were compared");
    let logits = tensor_to_f32(&g.ctx[logits]).unwrap();
    assert_eq!(logits.len(), 151936);
}
