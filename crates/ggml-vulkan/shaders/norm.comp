#version 450
// RMS_NORM (op 0) and NORM (op 1) of f32 rows, eps in f0: one workgroup per row (grid-stride
// over rows), a shared-memory tree reduction.
#define WG 128
#define WG_SIZE WG
#include "common.glsl"
#include "generic.glsl"

layout(local_size_x = WG) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 3) writeonly buffer D { float d[]; };

shared float sum[WG];
#if defined(EXACT_F64)
shared float rms_scale;
#endif

float reduce(float v) {
    uint tid = gl_LocalInvocationID.x;
    sum[tid] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sum[tid] += sum[tid + s];
        }
        barrier();
    }
    float r = sum[0];
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
        float mean = 0.0;
        if (p.op == 1) {
            float s = 0.0;
            for (uint i = tid; i < p.ne00; i += WG) {
                s += a[src + i * p.nb00];
            }
            mean = reduce(s) / float(p.ne00);
        }
#if defined(EXACT_F64)
        if (p.op == 0) {
            // the CPU backend's RMS_NORM: the f32 squares summed in order in double, the mean
            // rounded to f32, scale = 1 / sqrt(mean + eps) in f32 (each step rounded once; a
            // double quotient or root of floats rounded to float is the float result)
            if (tid == 0) {
                double acc = 0.0;
                for (uint i = 0; i < p.ne00; i++) {
                    float x = a[src + i * p.nb00];
                    acc += double(x * x);
                }
                float m = float(acc / double(p.ne00));
                float root = float(sqrt(double(m + p.f0)));
                rms_scale = float(1.0lf / double(root));
            }
            barrier();
            float sc = rms_scale;
            for (uint i = tid; i < p.ne00; i += WG) {
                d[dst + i * p.nb0] = a[src + i * p.nb00] * sc;
            }
            barrier();
            continue;
        }
#endif
        float s2 = 0.0;
        for (uint i = tid; i < p.ne00; i += WG) {
            float v = a[src + i * p.nb00] - mean;
            s2 += v * v;
        }
        float scale = inversesqrt(reduce(s2) / float(p.ne00) + p.f0);
        for (uint i = tid; i < p.ne00; i += WG) {
            d[dst + i * p.nb0] = (a[src + i * p.nb00] - mean) * scale;
        }
    }
}
