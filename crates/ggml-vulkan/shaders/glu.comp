#version 450
// The gated ops: dst = act(a) * b, with a and b the two halves of each src0 row (u0 = 0, u1
// says whether they are swapped) or src0 and src1 (u0 = 1). op: 0 REGLU, 1 GEGLU, 2 SWIGLU,
// 3 GEGLU_ERF, 4 GEGLU_QUICK.
#define WG_SIZE 256
#include "common.glsl"
#include "generic.glsl"
#include "act.glsl"
#if defined(EXACT_F64)
#include "exact_f64.glsl"
#endif

layout(local_size_x = WG_SIZE) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 3) writeonly buffer D { float d[]; };

float act(float x) {
    switch (p.op & 255u) {
    case 0: return max(x, 0.0);
    case 1: return act_gelu(x);
    case 2: return act_silu(x);
    case 3: return act_gelu_erf(x);
    case 4: return act_gelu_quick(x);
    }
    return x;
}

void main() {
    uint n = p.ne0 * p.ne1 * p.ne2 * p.ne3;
    for (uint i = flat_gid(); i < n; i += flat_nthreads()) {
        uvec4 c = coords(i, p.ne0, p.ne1, p.ne2);
        uint row0 = p.off0 + c.y * p.nb01 + c.z * p.nb02 + c.w * p.nb03;
        float x;
        float g;
        if (p.u0 == 1) {
            x = a[row0 + c.x * p.nb00];
            g = b[p.off1 + c.x * p.nb10 + c.y * p.nb11 + c.z * p.nb12 + c.w * p.nb13];
        } else {
            uint ia = c.x + (p.u1 == 1 ? p.ne0 : 0);
            uint ib = c.x + (p.u1 == 1 ? 0 : p.ne0);
            x = a[row0 + ia * p.nb00];
            g = a[row0 + ib * p.nb00];
        }
        float r;
#if defined(EXACT_F64)
        if ((p.op & 255u) == 2u) {
            // SWIGLU as the CPU backend computes each row: ggml_v_silu over the whole chunks of
            // its vector width (op >> 8: 16 with AVX-512F/DQ, 8 with AVX2, 0 without), then
            // x / (1 + expf(-x)) for the rest, times g
            uint lanes = p.op >> 8;
            uint whole = lanes == 0u ? 0u : p.ne0 - p.ne0 % lanes;
            float s = c.x < whole ? v_silu(x, lanes) : exact_div(x, 1.0 + glibc_expf(0.0 - x));
            r = s * g;
        } else
#endif
        r = act(x) * g;
        d[p.offd + c.x * p.nb0 + c.y * p.nb1 + c.z * p.nb2 + c.w * p.nb3] = r;
    }
}
