#version 450
// MUL_MAT with src0 of type TYPE (rows contiguous, dequantized element by element) and f32
// src1 of any strides (taken as the CPU's vec_dot_type values, src1_round.glsl), into
// contiguous f32 dst. Each invocation computes one src0 row against
// up to NCOLS src1 columns: with one column it is the mat-vec path of a single token, with more
// a 1 x NCOLS register tile that dequantizes each weight once for all its columns. There is no
// shared-memory reduction: workgroup barriers are what a CPU implementation of Vulkan
// (lavapipe) pays most for. Rows loop grid-stride past the 65535 workgroup limit.
#define WG_SIZE 64
#define NCOLS 8
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(push_constant) uniform Params {
    uint ne00, ne01, ne02, ne03;
    uint nb01, nb02, nb03;   // src0 byte strides
    uint ne11, ne12, ne13;
    uint nb10, nb11, nb12, nb13; // src1 element strides
    uint nb1, nb2, nb3;      // dst element strides
    uint off0;               // src0 byte offset
    uint off1, offd;         // element offsets
    uint r2, r3;             // src1 / src0 broadcast ratios in dims 2 and 3
} p;

#include "dequant.glsl"

layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 3) writeonly buffer D { float d[]; };

#include "src1_round.glsl"

void main() {
    uint j0 = gl_WorkGroupID.y * NCOLS;
    uint i12 = gl_WorkGroupID.z % p.ne12;
    uint i13 = gl_WorkGroupID.z / p.ne12;
    uint i02 = i12 / p.r2;
    uint i03 = i13 / p.r3;
    uint ncols = min(NCOLS, p.ne11 - j0);
    uint stride = gl_NumWorkGroups.x * WG_SIZE;
    for (uint i01 = gl_GlobalInvocationID.x; i01 < p.ne01; i01 += stride) {
        uint row = p.off0 + i01 * p.nb01 + i02 * p.nb02 + i03 * p.nb03;
        uint col = p.off1 + j0 * p.nb11 + i12 * p.nb12 + i13 * p.nb13;
        float acc[NCOLS];
        for (uint c = 0; c < NCOLS; c++) {
            acc[c] = 0.0;
        }
        for (uint kb = 0; kb < p.ne00; kb += ACT_QB) {
            vec2 blk[NCOLS];
            for (uint c = 0; c < ncols; c++) {
                blk[c] = act_block(col + kb * p.nb10 + c * p.nb11, p.nb10);
            }
            for (uint k = kb; k < min(kb + ACT_QB, p.ne00); k++) {
                float w = dequant(row, k);
                uint bk = col + k * p.nb10;
                for (uint c = 0; c < ncols; c++) {
                    acc[c] += w * act_value(b[bk + c * p.nb11], blk[c]);
                }
            }
        }
        for (uint c = 0; c < ncols; c++) {
            d[p.offd + i01 + (j0 + c) * p.nb1 + i12 * p.nb2 + i13 * p.nb3] = acc[c];
        }
    }
}
