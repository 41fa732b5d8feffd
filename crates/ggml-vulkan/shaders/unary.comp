#version 450
// The element-wise f32 ops of one source: ggml's unary ops by number (ggml::UnaryOp order),
// then SQR, SQRT, SCALE (x * f0 + f1) and CLAMP (to [f0, f1]).
#define WG_SIZE 256
#include "common.glsl"
#include "generic.glsl"
#include "act.glsl"

layout(local_size_x = WG_SIZE) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 3) writeonly buffer D { float d[]; };

float apply(float x) {
    switch (p.op) {
    case 0: return abs(x);
    case 1: return sign(x);
    case 2: return -x;
    case 3: return x > 0.0 ? 1.0 : 0.0;
    case 4: return tanh(x);
    case 5: return x > 0.0 ? x : exp(x) - 1.0;
    case 6: return max(x, 0.0);
    case 7: return 1.0 / (1.0 + exp(-x));
    case 8: return act_gelu(x);
    case 9: return act_gelu_quick(x);
    case 10: return act_silu(x);
    case 11: return x * min(1.0, max(0.0, (x + 3.0) / 6.0));
    case 12: return min(1.0, max(0.0, (x + 3.0) / 6.0));
    case 13: return exp(x);
    case 14: return act_gelu_erf(x);
    case 100: return x * x;
    case 101: return sqrt(x);
    case 102: return x * p.f0 + p.f1;
    case 103: return clamp(x, p.f0, p.f1);
    }
    return x;
}

void main() {
    uint n = p.ne0 * p.ne1 * p.ne2 * p.ne3;
    for (uint i = flat_gid(); i < n; i += flat_nthreads()) {
        uvec4 c = coords(i, p.ne0, p.ne1, p.ne2);
        float x = a[p.off0 + c.x * p.nb00 + c.y * p.nb01 + c.z * p.nb02 + c.w * p.nb03];
        d[p.offd + c.x * p.nb0 + c.y * p.nb1 + c.z * p.nb2 + c.w * p.nb3] = apply(x);
    }
}
