//! llama_model::print_info: the hyperparameters and derived values of startup-log part 1.

use crate::cfmt;
use crate::hparams::SwaType;
use crate::model::Model;

impl Model {
    pub(crate) fn print_info(&self, no_alloc: bool) {
        let p = |k: &str, v: String| ggml::log_info!("print_info: {:<22}= {}\n", k, v);
        p("arch", self.arch_name.clone());
        p("vocab_only", (self.vocab_only as i32).to_string());
        p("no_alloc", (no_alloc as i32).to_string());
        if !self.vocab_only {
            self.print_hparams();
        }
        p("model type", self.type_name.to_string());
        let n = self.n_elements as f64;
        let params = if n >= 1e12 {
            format!("{:.2} T", n / 1e12)
        } else if n >= 1e9 {
            format!("{:.2} B", n / 1e9)
        } else if n >= 1e6 {
            format!("{:.2} M", n / 1e6)
        } else {
            format!("{:.2} K", n / 1e3)
        };
        p("model params", params);
        p("general.name", self.name.clone());
        if !self.vocab_only {
            crate::arch::moe::print_info(&self.arch_name, &self.hparams);
        }
        if self.arch_name == "granite" {
            let hp = &self.hparams;
            p("f_embedding_scale", format!("{:.6}", hp.f_embedding_scale));
            p("f_residual_scale", format!("{:.6}", hp.f_residual_scale));
            p("f_attention_scale", format!("{:.6}", hp.f_attention_scale));
            p("n_ff_shexp", "0".into());
        }
        self.vocab.print_info();
    }

    fn print_hparams(&self) {
        let hp = &self.hparams;
        let p = |k: &str, v: String| ggml::log_info!("print_info: {:<22}= {}\n", k, v);
        p("n_ctx_train", hp.n_ctx_train.to_string());
        p("n_embd_inp", hp.n_embd.to_string());
        p("n_embd", hp.n_embd.to_string());
        p("n_embd_out", hp.n_embd.to_string());
        p("n_layer", hp.n_layer.to_string());
        p("n_layer_all", hp.n_layer_all().to_string());
        p("n_head", hp.fmt_per_layer(|il| hp.n_head(il)));
        p("n_head_kv", hp.fmt_per_layer(|il| hp.n_head_kv(il)));
        p("n_rot", hp.n_rot.to_string());
        p("n_swa", hp.n_swa.to_string());
        p("is_swa_any", (hp.is_swa_any() as u32).to_string());
        p("non_causal_type", hp.non_causal_type.to_string());
        p("n_embd_head_k", hp.n_embd_head_k.to_string());
        p("n_embd_head_v", hp.n_embd_head_v.to_string());
        p("n_gqa", hp.fmt_per_layer(|il| hp.n_gqa(il)));
        p("n_embd_k_gqa", hp.fmt_per_layer(|il| hp.n_embd_k_gqa(il)));
        p("n_embd_v_gqa", hp.fmt_per_layer(|il| hp.n_embd_v_gqa(il)));
        p("f_norm_eps", cfmt::exp(hp.f_norm_eps as f64, 1));
        p("f_norm_rms_eps", cfmt::exp(hp.f_norm_rms_eps as f64, 1));
        p("f_clamp_kqv", cfmt::exp(hp.f_clamp_kqv as f64, 1));
        p("f_max_alibi_bias", cfmt::exp(hp.f_max_alibi_bias as f64, 1));
        p("f_logit_scale", cfmt::exp(hp.f_logit_scale as f64, 1));
        p("f_attn_scale", cfmt::exp(hp.f_attention_scale as f64, 1));
        p(
            "f_attn_value_scale",
            format!("{:.4}", hp.f_attn_value_scale),
        );
        p("n_ff", hp.fmt_per_layer(|il| hp.n_ff(il)));
        p("n_expert", hp.n_expert.to_string());
        p("n_expert_used", hp.n_expert_used.to_string());
        p("n_expert_groups", hp.n_expert_groups.to_string());
        p("n_group_used", hp.n_group_used.to_string());
        p("causal attn", (hp.causal_attn as i32).to_string());
        p("pooling type", hp.pooling_type.to_string());
        p("rope type", (hp.rope_type as i32).to_string());
        p(
            "rope scaling",
            hp.rope_scaling_type_train.name().to_string(),
        );
        p("freq_base_train", format!("{:.1}", hp.rope_freq_base_train));
        p("freq_scale_train", cfmt::g(hp.rope_freq_scale_train as f64));
        if hp.swa_type != SwaType::None {
            p(
                "freq_base_swa",
                format!("{:.1}", hp.rope_freq_base_train_swa),
            );
            p(
                "freq_scale_swa",
                cfmt::g(hp.rope_freq_scale_train_swa as f64),
            );
            p("n_embd_head_k_swa", hp.n_embd_head_k_swa.to_string());
            p("n_embd_head_v_swa", hp.n_embd_head_v_swa.to_string());
            p("n_rot_swa", hp.n_rot_swa.to_string());
        }
        p("n_ctx_orig_yarn", hp.n_ctx_orig_yarn.to_string());
        p("rope_yarn_log_mul", format!("{:.4}", hp.rope_yarn_log_mul));
        p(
            "rope_finetuned",
            (if hp.rope_finetuned { "yes" } else { "unknown" }).to_string(),
        );
    }
}
