#version 450
// MUL_MAT with src0 of type TYPE (rows contiguous, dequantized element by element) and f32
// src1 of any strides, into contiguous f32 dst. A workgroup takes one src0 row and up to NCOLS
// src1 columns: one column is the mat-vec path of a single token, NCOLS columns the batch path
// that dequantizes each weight once for all of them. Rows loop grid-stride past the 65535
// workgroup limit.
#define WG 64
#define WG_SIZE WG
#include "common.glsl"

#define NCOLS 8
layout(local_size_x = WG) in;

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

shared float red[NCOLS][WG];

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint j0 = gl_WorkGroupID.y * NCOLS;
    uint i12 = gl_WorkGroupID.z % p.ne12;
    uint i13 = gl_WorkGroupID.z / p.ne12;
    uint i02 = i12 / p.r2;
    uint i03 = i13 / p.r3;
    uint ncols = min(NCOLS, p.ne11 - j0);
    for (uint i01 = gl_WorkGroupID.x; i01 < p.ne01; i01 += gl_NumWorkGroups.x) {
        uint row = p.off0 + i01 * p.nb01 + i02 * p.nb02 + i03 * p.nb03;
        uint col = p.off1 + j0 * p.nb11 + i12 * p.nb12 + i13 * p.nb13;
        float acc[NCOLS];
        for (uint c = 0; c < NCOLS; c++) {
            acc[c] = 0.0;
        }
        for (uint k = tid; k < p.ne00; k += WG) {
            float w = dequant(row, k);
            uint bk = col + k * p.nb10;
            for (uint c = 0; c < ncols; c++) {
                acc[c] += w * b[bk + c * p.nb11];
            }
        }
        for (uint c = 0; c < NCOLS; c++) {
            red[c][tid] = acc[c];
        }
        barrier();
        for (uint s = WG / 2; s > 0; s >>= 1) {
            if (tid < s) {
                for (uint c = 0; c < NCOLS; c++) {
                    red[c][tid] += red[c][tid + s];
                }
            }
            barrier();
        }
        if (tid < ncols) {
            d[p.offd + i01 + (j0 + tid) * p.nb1 + i12 * p.nb2 + i13 * p.nb3] = red[tid][0];
        }
        barrier();
    }
}
