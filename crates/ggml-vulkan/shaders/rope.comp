#version 450
// ROPE of f32 (u0 = 0) or f16 (u0 = 1) src0, normal (adjacent pairs) or NeoX (halves, neox = 1),
// with ggml's YaRN ramp; positions are i32 (binding 1), frequency factors optional (binding 2,
// has_ff = 1). One invocation per pair, grid-stride; pairs past n_dims are copied.
#define WG_SIZE 256
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(push_constant) uniform Params {
    uint ne0, ne1, ne2, ne3;
    uint nb01, nb02, nb03;   // src0 element strides (rows contiguous)
    uint nb1, nb2, nb3;      // dst element strides
    uint off0, off1, off2, offd;
    uint n_dims, neox, has_ff, u0, u1;
    float theta_scale, freq_scale, ext_factor, attn_factor, corr0, corr1;
} p;

layout(std430, binding = 0) readonly buffer A32 { float a32[]; };
layout(std430, binding = 0) readonly buffer A16 { float16_t a16[]; };
layout(std430, binding = 1) readonly buffer P { int pos[]; };
layout(std430, binding = 2) readonly buffer F { float ff[]; };
layout(std430, binding = 3) writeonly buffer D32 { float d32[]; };
layout(std430, binding = 3) writeonly buffer D16 { float16_t d16[]; };

float load(uint i) {
    return p.u0 == 1 ? float(a16[i]) : a32[i];
}

void store(uint i, float v) {
    if (p.u1 == 1) {
        d16[i] = float16_t(v);
    } else {
        d32[i] = v;
    }
}

void main() {
    uint half_ne0 = p.ne0 / 2;
    uint n = half_ne0 * p.ne1 * p.ne2 * p.ne3;
    for (uint g = flat_gid(); g < n; g += flat_nthreads()) {
        uint ip = g % half_ne0;
        uint r = g / half_ne0;
        uint i1 = r % p.ne1;
        uint i2 = (r / p.ne1) % p.ne2;
        uint i3 = r / (p.ne1 * p.ne2);
        uint src = p.off0 + i1 * p.nb01 + i2 * p.nb02 + i3 * p.nb03;
        uint dst = p.offd + i1 * p.nb1 + i2 * p.nb2 + i3 * p.nb3;
        uint i0 = 2 * ip;
        if (i0 >= p.n_dims) {
            store(dst + i0, load(src + i0));
            store(dst + i0 + 1, load(src + i0 + 1));
            continue;
        }
        uint j0 = p.neox == 1 ? ip : i0;
        uint j1 = p.neox == 1 ? ip + p.n_dims / 2 : i0 + 1;
        float theta_extrap = float(pos[p.off1 + i2]) * pow(p.theta_scale, float(ip));
        if (p.has_ff == 1) {
            theta_extrap /= ff[p.off2 + ip];
        }
        float theta_interp = p.freq_scale * theta_extrap;
        float theta = theta_interp;
        float mscale = p.attn_factor;
        if (p.ext_factor != 0.0) {
            float y = (float(ip) - p.corr0) / max(0.001, p.corr1 - p.corr0);
            float ramp_mix = (1.0 - min(1.0, max(0.0, y))) * p.ext_factor;
            theta = theta_interp * (1.0 - ramp_mix) + theta_extrap * ramp_mix;
            mscale *= 1.0 + 0.1 * log(1.0 / p.freq_scale);
        }
        float c = cos(theta) * mscale;
        float s = sin(theta) * mscale;
        float x0 = load(src + j0);
        float x1 = load(src + j1);
        store(dst + j0, x0 * c - x1 * s);
        store(dst + j1, x0 * s + x1 * c);
    }
}
