#version 450
// SOFT_MAX of f32 rows: x * scale + slope * mask, then softmax, with an optional sink logit per
// head. One workgroup per row (grid-stride). The mask (binding 1) is f16 (u0 = 1) or f32
// (u0 = 2) or absent (u0 = 0), broadcast over dims 2 and 3; sinks (binding 2) when u1 = 1.
#define WG 128
#define WG_SIZE WG
#include "common.glsl"

layout(local_size_x = WG) in;

layout(push_constant) uniform Params {
    uint ne00, ne01, ne02, ne03;
    uint nb01, nb02, nb03;       // src0 element strides (rows contiguous)
    uint ne11, ne12, ne13;       // mask shape (dims 1..3)
    uint nb11, nb12, nb13;       // mask element strides
    uint nb1, nb2, nb3;          // dst element strides
    uint off0, off1, off2, offd;
    float scale, max_bias, m0, m1;
    uint n_head_log2;
    uint u0, u1;
    uint lanes;                  // the host's ggml_v_expf width (the `_f64` variant's order)
} p;

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer M32 { float m32[]; };
layout(std430, binding = 1) readonly buffer M16 { float16_t m16[]; };
layout(std430, binding = 2) readonly buffer S { float sinks[]; };
layout(std430, binding = 3) buffer D { float d[]; };

#if defined(EXACT_F64)
// The CPU backend's SOFT_MAX on a device whose fma is a multiply and an add (lavapipe): one
// invocation per row walks it in the CPU's order, exp as ggml_v_expf over whole chunks of the
// host's vector width (p.lanes: 16 with AVX-512F/DQ, 8 with AVX2, 0 scalar) and glibc's expf
// for the rest, each chunk's lane sum (as the CPU reduces it) added in double.
#include "exact_f64.glsl"
#endif

shared float red[WG];

float reduce_max(float v) {
    uint tid = gl_LocalInvocationID.x;
    red[tid] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (tid < s) {
            red[tid] = max(red[tid], red[tid + s]);
        }
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}

float reduce_sum(float v) {
    uint tid = gl_LocalInvocationID.x;
    red[tid] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (tid < s) {
            red[tid] += red[tid + s];
        }
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint nrows = p.ne01 * p.ne02 * p.ne03;
    uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    uint nwg = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
    for (uint r = wg; r < nrows; r += nwg) {
        uint i1 = r % p.ne01;
        uint i2 = (r / p.ne01) % p.ne02;
        uint i3 = r / (p.ne01 * p.ne02);
        uint src = p.off0 + i1 * p.nb01 + i2 * p.nb02 + i3 * p.nb03;
        uint dst = p.offd + i1 * p.nb1 + i2 * p.nb2 + i3 * p.nb3;
        uint mrow = p.off1 + i1 * p.nb11 + (i2 % p.ne12) * p.nb12 + (i3 % p.ne13) * p.nb13;
        float slope = 1.0;
        if (p.max_bias > 0.0) {
            slope = i2 < p.n_head_log2 ? pow(p.m0, float(i2 + 1))
                                       : pow(p.m1, float(2 * (i2 - p.n_head_log2) + 1));
        }
#if defined(EXACT_F64)
        if (tid == 0) {
            float mx = -1.0 / 0.0;
            for (uint i = 0; i < p.ne00; i++) {
                float v = a[src + i] * p.scale;
                if (p.u0 == 1) {
                    float m = float(m16[mrow + i]);
                    v += slope != 1.0 ? slope * m : m;
                } else if (p.u0 == 2) {
                    v += slope != 1.0 ? slope * m32[mrow + i] : m32[mrow + i];
                }
                d[dst + i] = v;
                mx = max(mx, v);
            }
            float sink = 0.0;
            if (p.u1 == 1) {
                sink = sinks[p.off2 + i2];
                mx = max(mx, sink);
            }
            double sum = 0.0lf;
            uint i = 0;
            for (; p.lanes == 16u && i + 16 <= p.ne00; i += 16) {
                float e[16];
                for (uint l = 0; l < 16; l++) {
                    e[l] = v_expf16(d[dst + i + l] - mx);
                    d[dst + i + l] = e[l];
                }
                // _mm512_reduce_add_ps as GCC expands it: halves, quarters, pairs
                float h4[4];
                for (uint l = 0; l < 4; l++) {
                    h4[l] = (e[12 + l] + e[4 + l]) + (e[8 + l] + e[l]);
                }
                sum += double((h4[0] + h4[2]) + (h4[1] + h4[3]));
            }
            for (; p.lanes == 8u && i + 8 <= p.ne00; i += 8) {
                float e[8];
                for (uint l = 0; l < 8; l++) {
                    e[l] = v_expf8(d[dst + i + l] - mx);
                    d[dst + i + l] = e[l];
                }
                float h0 = e[4] + e[0];
                float h1 = e[5] + e[1];
                float h2 = e[6] + e[2];
                float h3 = e[7] + e[3];
                sum += double((h0 + h2) + (h1 + h3));
            }
            for (; i < p.ne00; i++) {
                float e = glibc_expf(d[dst + i] - mx);
                d[dst + i] = e;
                sum += double(e);
            }
            if (p.u1 == 1) {
                sum += double(glibc_expf(sink - mx));
            }
            float inv = float(1.0lf / sum);
            for (uint j = 0; j < p.ne00; j++) {
                d[dst + j] *= inv;
            }
        }
        continue;
#endif
        float mx = -1.0 / 0.0;
        for (uint i = tid; i < p.ne00; i += WG) {
            float v = a[src + i] * p.scale;
            if (p.u0 == 1) {
                v += slope * float(m16[mrow + i]);
            } else if (p.u0 == 2) {
                v += slope * m32[mrow + i];
            }
            d[dst + i] = v;
            mx = max(mx, v);
        }
        mx = reduce_max(mx);
        float sink = 0.0;
        if (p.u1 == 1) {
            sink = sinks[p.off2 + i2];
            mx = max(mx, sink);
        }
        float s = 0.0;
        for (uint i = tid; i < p.ne00; i += WG) {
            float e = d[dst + i] == -1.0 / 0.0 ? 0.0 : exp(d[dst + i] - mx);
            d[dst + i] = e;
            s += e;
        }
        s = reduce_sum(s);
        if (p.u1 == 1) {
            s += exp(sink - mx);
        }
        float inv = 1.0 / s;
        for (uint i = tid; i < p.ne00; i += WG) {
            d[dst + i] *= inv;
        }
    }
}
