#version 450
// GET_ROWS: dst[:, i10, i11, i12] = src0[:, idx[i10, i11, i12], i11, i12] as f32, src0 of type
// TYPE. One invocation per dst element, grid-stride.
#define WG_SIZE 256
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(push_constant) uniform Params {
    uint ne00, ne01;
    uint nb01, nb02, nb03;   // src0 byte strides
    uint ne10, ne11, ne12;
    uint nb10, nb11, nb12;   // index element strides
    uint nb1, nb2, nb3;      // dst element strides
    uint off0;               // bytes
    uint off1, offd;         // elements
} p;

#include "dequant.glsl"

layout(std430, binding = 1) readonly buffer I { int idx[]; };
layout(std430, binding = 3) writeonly buffer D { float d[]; };

void main() {
    uint n = p.ne00 * p.ne10 * p.ne11 * p.ne12;
    for (uint i = flat_gid(); i < n; i += flat_nthreads()) {
        uint i0 = i % p.ne00;
        uint r = i / p.ne00;
        uint i10 = r % p.ne10;
        r /= p.ne10;
        uint i11 = r % p.ne11;
        uint i12 = r / p.ne11;
        int row = idx[p.off1 + i10 * p.nb10 + i11 * p.nb11 + i12 * p.nb12];
        float v = 0.0;
        if (row >= 0 && uint(row) < p.ne01) {
            v = dequant(p.off0 + uint(row) * p.nb01 + i11 * p.nb02 + i12 * p.nb03, i0);
        }
        d[p.offd + i0 + i10 * p.nb1 + i11 * p.nb2 + i12 * p.nb3] = v;
    }
}
