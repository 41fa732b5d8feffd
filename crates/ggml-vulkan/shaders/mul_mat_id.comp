#version 450
// MUL_MAT_ID: dst[:, i, t] = src0[:, :, ids[i, t]] x src1[:, i % ne11, t], src0 of type TYPE
// (rows contiguous), src1 f32, ids i32. One invocation per (row, slot, token), grid-stride.
#define WG_SIZE 64
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(push_constant) uniform Params {
    uint ne00, ne01, n_as;
    uint nb01, nb02;         // src0 byte strides (row, expert)
    uint ne11;
    uint nb10, nb11, nb12;   // src1 element strides
    uint n_used, n_tok;      // ids shape
    uint nbi0, nbi1;         // ids element strides
    uint nb1, nb2;           // dst element strides
    uint off0;               // bytes
    uint off1, off2, offd;   // elements
} p;

#include "dequant.glsl"

layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) readonly buffer I { int ids[]; };
layout(std430, binding = 3) writeonly buffer D { float d[]; };

#include "src1_round.glsl"

void main() {
    uint n = p.ne01 * p.n_used * p.n_tok;
    for (uint g = flat_gid(); g < n; g += flat_nthreads()) {
        uint m = g % p.ne01;
        uint i = (g / p.ne01) % p.n_used;
        uint t = g / (p.ne01 * p.n_used);
        int e = ids[p.off2 + i * p.nbi0 + t * p.nbi1];
        float acc = 0.0;
        if (e >= 0 && uint(e) < p.n_as) {
            uint row = p.off0 + m * p.nb01 + uint(e) * p.nb02;
            uint col = p.off1 + (i % p.ne11) * p.nb11 + t * p.nb12;
            for (uint kb = 0; kb < p.ne00; kb += ACT_QB) {
                vec2 blk = act_block(col + kb * p.nb10, p.nb10);
                for (uint k = kb; k < min(kb + ACT_QB, p.ne00); k++) {
                    acc += dequant(row, k) * act_value(b[col + k * p.nb10], blk);
                }
            }
        }
        d[p.offd + m + i * p.nb1 + t * p.nb2] = acc;
    }
}
