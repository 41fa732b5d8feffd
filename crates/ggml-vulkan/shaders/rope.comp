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

#if defined(EXACT_F64)
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
// The CPU backend's ROPE on a device whose fma is a multiply and an add (lavapipe): the angle
// by repeated multiplication as ggml's rope cache, sinf / cosf as glibc computes them (its
// one-step reduction below 120, the 4/pi table above, its polynomials in double; equal to
// glibc on 250000 random inputs, docs/vulkan.md), the rotation's products fused as the CPU's.
float exact_fma(float a, float b, float c) {
    precise double r = double(a) * double(b) + double(c);
    return float(r);
}

const double SC_C[5] = double[5](1.0lf, -0.49999999725108224lf, 0.041666623324344516lf,
    -0.001388676379437604lf, 2.4390450703564542e-05lf);
const double SC_S[3] = double[3](-0.16666654943701084lf, 0.008332178146138854lf,
    -0.00019517298981385725lf);
const uint INV_PIO4[24] = uint[24](0xa2u, 0xa2f9u, 0xa2f983u, 0xa2f9836eu, 0xf9836e4eu,
    0x836e4e44u, 0x6e4e4415u, 0x4e441529u, 0x441529fcu, 0x1529fc27u, 0x29fc2757u, 0xfc2757d1u,
    0x2757d1f5u, 0x57d1f534u, 0xd1f534ddu, 0xf534ddc0u, 0x34ddc0dbu, 0xddc0db62u, 0xc0db6295u,
    0xdb629599u, 0x6295993cu, 0x95993c43u, 0x993c4390u, 0x3c439041u);

uint top12(float x) {
    return (floatBitsToUint(x) >> 20) & 0x7ffu;
}

// glibc's sinf_poly: the sine polynomial for an even quadrant n, the cosine one (negated
// when neg) for an odd one
float sc_poly(double x, double x2, bool neg, int n) {
    if ((n & 1) == 0) {
        double x3 = x * x2;
        double s1 = SC_S[1] + x2 * SC_S[2];
        double x7 = x3 * x2;
        double s = x + x3 * SC_S[0];
        return float(s + x7 * s1);
    }
    double g = neg ? -1.0lf : 1.0lf;
    double x4 = x2 * x2;
    double c2 = g * SC_C[3] + x2 * (g * SC_C[4]);
    double c1 = g * SC_C[0] + x2 * (g * SC_C[1]);
    double x6 = x4 * x2;
    double c = c1 + x4 * (g * SC_C[2]);
    return float(c + x6 * c2);
}

// sinf (cosine: cosine = 1) of y as glibc
float glibc_sincosf(float y, int cosine) {
    double x = double(y);
    uint t = top12(y);
    if (t < top12(0.78539818525314331)) {
        if (t < top12(0.000244140625)) {
            return cosine == 1 ? 1.0 : y;
        }
        return sc_poly(x, x * x, false, cosine);
    }
    int n;
    int k;
    if (t < top12(120.0)) {
        double r = x * 10680707.430881744lf;
        n = (int(r) + 0x800000) >> 24;
        x = x - double(n) * 1.5707963267948966lf;
        k = n;
    } else if (t < top12(1.0 / 0.0)) {
        uint xi = floatBitsToUint(y);
        uint a = (xi >> 26) & 15u;
        uint m = ((xi & 0xffffffu) | 0x800000u) << ((xi >> 23) & 7u);
        uint64_t res0 = uint64_t(m * INV_PIO4[a]);
        uint64_t res1 = uint64_t(m) * uint64_t(INV_PIO4[a + 4]);
        uint64_t res2 = uint64_t(m) * uint64_t(INV_PIO4[a + 8]);
        res0 = (res2 >> 32) | (res0 << 32);
        res0 += res1;
        uint64_t q = (res0 + (uint64_t(1) << 61)) >> 62;
        res0 -= q << 62;
        x = double(int64_t(res0)) * 3.4061215800865545e-19lf;
        n = int(q);
        k = n + int(xi >> 31);
    } else {
        return (y - y) / (y - y);
    }
    double sg = (k & 3) == 1 || (k & 3) == 2 ? -1.0lf : 1.0lf;
    return sc_poly(x * sg, x * x, (k & 2) != 0, n + cosine);
}
#endif

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
#if defined(EXACT_F64)
        float theta_extrap = float(pos[p.off1 + i2]);
        for (uint j = 0; j < ip; j++) {
            theta_extrap *= p.theta_scale;
        }
        if (p.has_ff == 1) {
            theta_extrap = float(double(theta_extrap) / double(ff[p.off2 + ip]));
        }
#else
        float theta_extrap = float(pos[p.off1 + i2]) * pow(p.theta_scale, float(ip));
        if (p.has_ff == 1) {
            theta_extrap /= ff[p.off2 + ip];
        }
#endif
        float theta_interp = p.freq_scale * theta_extrap;
        float theta = theta_interp;
        float mscale = p.attn_factor;
        if (p.ext_factor != 0.0) {
            float y = (float(ip) - p.corr0) / max(0.001, p.corr1 - p.corr0);
            float ramp_mix = (1.0 - min(1.0, max(0.0, y))) * p.ext_factor;
            theta = theta_interp * (1.0 - ramp_mix) + theta_extrap * ramp_mix;
            mscale *= 1.0 + 0.1 * log(1.0 / p.freq_scale);
        }
        float x0 = load(src + j0);
        float x1 = load(src + j1);
#if defined(EXACT_F64)
        float c = glibc_sincosf(theta, 1) * mscale;
        float s = glibc_sincosf(theta, 0) * mscale;
        store(dst + j0, exact_fma(x0, c, -(x1 * s)));
        store(dst + j1, exact_fma(x0, s, x1 * c));
#else
        float c = cos(theta) * mscale;
        float s = sin(theta) * mscale;
        store(dst + j0, x0 * c - x1 * s);
        store(dst + j1, x0 * s + x1 * c);
#endif
    }
}
