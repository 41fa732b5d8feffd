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
