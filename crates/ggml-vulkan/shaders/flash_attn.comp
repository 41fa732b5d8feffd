#version 450
// FLASH_ATTN_EXT: one invocation per (query row, head, sequence), one pass of online softmax
// over the KV cells in f32. K and V are f16 or f32 (flags bits 0 and 1), the mask f16 (bit 2
// says there is one), sinks f32 (bit 3). q is f32; dst is [Dv, n_head, n_q, n_seq] f32.
// Bindings: 0 q, 1 k, 2 v, 3 dst, 4 mask, 5 sinks.
#define WG_SIZE 32
#define MAX_DV 256
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(push_constant) uniform Params {
    uint dk, dv, n_q, n_head, n_seq, n_kv;
    uint nb01, nb02, nb03;   // q element strides
    uint nb11, nb12, nb13;   // k element strides
    uint nb21, nb22, nb23;   // v element strides
    uint nb31, ne32, ne33, nb32, nb33; // mask row stride, broadcast dims and strides
    uint offq, offk, offv, offm, offd;
    float scale, max_bias, softcap;
    uint n_head_log2;
    uint flags;
    uint n_head_kv;          // k's heads (v has the same)
    uint n_seq_kv;           // k's dim 3
} p;

layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K32 { float k32[]; };
layout(std430, binding = 1) readonly buffer K16 { float16_t k16[]; };
layout(std430, binding = 2) readonly buffer V32 { float v32[]; };
layout(std430, binding = 2) readonly buffer V16 { float16_t v16[]; };
layout(std430, binding = 3) writeonly buffer D { float d[]; };
layout(std430, binding = 4) readonly buffer M { float16_t m16[]; };
layout(std430, binding = 5) readonly buffer S { float sinks[]; };

#if defined(EXACT_F64)
#include "exact_f64.glsl"
#define FA_EXP glibc_expf
#else
float exact_fma(float a, float b, float c) {
    return fma(a, b, c);
}
#define FA_EXP exp
#endif

float kat(uint i) {
    return (p.flags & 1u) != 0u ? float(k16[i]) : k32[i];
}

float vat(uint i) {
    return (p.flags & 2u) != 0u ? float(v16[i]) : v32[i];
}

void main() {
    uint n = p.n_q * p.n_head * p.n_seq;
    for (uint g = flat_gid(); g < n; g += flat_nthreads()) {
        uint iq1 = g % p.n_q;
        uint iq2 = (g / p.n_q) % p.n_head;
        uint iq3 = g / (p.n_q * p.n_head);
        uint hk = iq2 / (p.n_head / p.n_head_kv);
        uint k3 = iq3 / (p.n_seq / p.n_seq_kv);
        uint qrow = p.offq + iq1 * p.nb01 + iq2 * p.nb02 + iq3 * p.nb03;
        uint kbase = p.offk + hk * p.nb12 + k3 * p.nb13;
        uint vbase = p.offv + hk * p.nb22 + k3 * p.nb23;
        uint mrow = p.offm + iq1 * p.nb31 + (iq2 % p.ne32) * p.nb32 + (iq3 % p.ne33) * p.nb33;
        float slope = 1.0;
        if (p.max_bias > 0.0) {
            float m0 = exp2(-p.max_bias / float(p.n_head_log2));
            float m1 = exp2(-p.max_bias / 2.0 / float(p.n_head_log2));
            slope = iq2 < p.n_head_log2 ? pow(m0, float(iq2 + 1))
                                        : pow(m1, float(2 * (iq2 - p.n_head_log2) + 1));
        }
        float acc[MAX_DV];
        for (uint i = 0; i < p.dv; i++) {
            acc[i] = 0.0;
        }
        float mx = -1.0 / 0.0;
        float sum = 0.0;
        bool vf16 = (p.flags & 2u) != 0u;
        for (uint ic = 0; ic < p.n_kv; ic++) {
            float mv = 0.0;
            if ((p.flags & 4u) != 0u) {
                mv = slope * float(m16[mrow + ic]);
                if (mv == -1.0 / 0.0) {
                    continue;
                }
            }
            uint krow = kbase + ic * p.nb11;
            float s = 0.0;
            // as the CPU: q converted to K's type (f16) before the dot product
            bool kf16 = (p.flags & 1u) != 0u;
#if defined(EXACT_F64)
            if (kf16 && (p.flags & 16u) != 0u) {
                // ggml_vec_dot_f16 on AVX-512: 4 x 16 lanes of fused products per 64 values,
                // GGML_F32x16_REDUCE (0+2 and 1+3, those two, then _mm512_reduce_add_ps as
                // GCC expands it: halves, quarters, pairs), then the tail in double
                float a[64];
                for (uint j = 0; j < 64; j++) {
                    a[j] = 0.0;
                }
                uint i = 0;
                for (; i + 64 <= p.dk; i += 64) {
                    for (uint j = 0; j < 64; j++) {
                        float qv = float(float16_t(q[qrow + i + j]));
                        a[j] = exact_fma(kat(krow + i + j), qv, a[j]);
                    }
                }
                float v16[16];
                for (uint l = 0; l < 16; l++) {
                    v16[l] = (a[l] + a[32 + l]) + (a[16 + l] + a[48 + l]);
                }
                float h8[8];
                for (uint l = 0; l < 8; l++) {
                    h8[l] = v16[8 + l] + v16[l];
                }
                float h4[4];
                for (uint l = 0; l < 4; l++) {
                    h4[l] = h8[4 + l] + h8[l];
                }
                float h0 = h4[0] + h4[2];
                float h1 = h4[1] + h4[3];
                double sum = double(h0 + h1);
                for (; i < p.dk; i++) {
                    sum += double(kat(krow + i) * float(float16_t(q[qrow + i])));
                }
                s = float(sum);
            } else if (kf16) {
                // ggml_vec_dot_f16 on AVX2: 4 x 8 lanes of fused products per 32 values,
                // GGML_F32x8_REDUCE, then the tail's products added in double
                float a[32];
                for (uint j = 0; j < 32; j++) {
                    a[j] = 0.0;
                }
                uint i = 0;
                for (; i + 32 <= p.dk; i += 32) {
                    for (uint j = 0; j < 32; j++) {
                        float qv = float(float16_t(q[qrow + i + j]));
                        a[j] = exact_fma(kat(krow + i + j), qv, a[j]);
                    }
                }
                float t0[4];
                for (uint l = 0; l < 4; l++) {
                    float lo = (a[l] + a[16 + l]) + (a[8 + l] + a[24 + l]);
                    float hi = (a[l + 4] + a[20 + l]) + (a[12 + l] + a[28 + l]);
                    t0[l] = lo + hi;
                }
                double sum = double((t0[0] + t0[1]) + (t0[2] + t0[3]));
                for (; i < p.dk; i++) {
                    sum += double(kat(krow + i) * float(float16_t(q[qrow + i])));
                }
                s = float(sum);
            } else
#endif
            for (uint i = 0; i < p.dk; i++) {
                float qv = q[qrow + i];
                s += (kf16 ? float(float16_t(qv)) : qv) * kat(krow + i);
            }
            s *= p.scale;
            if (p.softcap != 0.0) {
                s = p.softcap * tanh(s / p.softcap);
            }
            s += mv;
            float ms = 1.0;
            float vs = 1.0;
            if (s > mx) {
                ms = FA_EXP(mx - s);
                mx = s;
                for (uint i = 0; i < p.dv; i++) {
                    acc[i] = vf16 ? float(float16_t(acc[i] * ms)) : acc[i] * ms;
                }
            } else {
                vs = FA_EXP(s - mx);
            }
            uint vrow = vbase + ic * p.nb21;
            // an f16 V accumulates in f16, rounded at every step, as ggml's CPU kernel
            // (ggml_vec_mad_f16 fuses whole 8-lane chunks only; its tail rounds twice)
            uint fused = vf16 ? p.dv - p.dv % 8u : p.dv;
            for (uint i = 0; i < p.dv; i++) {
                float a = i < fused ? exact_fma(vat(vrow + i), vs, acc[i])
                                    : acc[i] + vat(vrow + i) * vs;
                acc[i] = vf16 ? float(float16_t(a)) : a;
            }
            sum = exact_fma(sum, ms, vs);
        }
        if ((p.flags & 8u) != 0u) {
            float sink = sinks[iq2];
            if (sink > mx) {
                float ms = FA_EXP(mx - sink);
                for (uint i = 0; i < p.dv; i++) {
                    acc[i] *= ms;
                }
                sum = sum * ms + 1.0;
            } else {
                sum += FA_EXP(sink - mx);
            }
        }
#if defined(EXACT_F64)
        float inv = sum == 0.0 ? 0.0 : float(1.0lf / double(sum));
#else
        float inv = sum == 0.0 ? 0.0 : 1.0 / sum;
#endif
        uint drow = p.offd + ((iq3 * p.n_q + iq1) * p.n_head + iq2) * p.dv;
        for (uint i = 0; i < p.dv; i++) {
            d[drow + i] = acc[i] * inv;
        }
    }
}
