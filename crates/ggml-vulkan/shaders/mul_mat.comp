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
#if TYPE == T_Q4_0
        // the CPU backend's order for Q4_0 (llama.cpp's repacked q4_0_8x8 gemv and gemm on
        // AVX2): the exact integer sum of each block against the Q8_0 codes, then one fused
        // multiply-add of it times f32(dx) * f32(dy) into the accumulator, in block order, so
        // the result is the CPU's to the bit
        for (uint kb = 0; kb < p.ne00; kb += 32) {
            uint bw = row + (kb / 32) * 18;
            float dx = q_half(bw);
            for (uint c = 0; c < ncols; c++) {
                uint base = col + kb * p.nb10 + c * p.nb11;
                vec2 blk = act_block(base, p.nb10);
                int isum = 0;
                for (uint i = 0; i < 16; i++) {
                    uint q = q_u8(bw + 2 + i);
                    int a0 = int(roundEven(b[base + i * p.nb10] * blk.x));
                    int a1 = int(roundEven(b[base + (i + 16) * p.nb10] * blk.x));
                    isum += (int(q & 0xFu) - 8) * a0 + (int(q >> 4) - 8) * a1;
                }
                acc[c] = fma(float(isum), dx * blk.y, acc[c]);
            }
        }
#elif TYPE == T_Q8_0
        // the CPU backend's order for Q8_0 (ggml's AVX2 vec_dot_q8_0_q8_0 and its tiles): lane
        // j of 8 f32 accumulators takes the exact integer sum of products 4j..4j+3 of each
        // block, fused times f32(dx) * f32(dy); the lanes are summed at the end as
        // hsum_float_8 does
        for (uint c = 0; c < ncols; c++) {
            float l[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
            for (uint kb = 0; kb < p.ne00; kb += 32) {
                uint bw = row + (kb / 32) * 34;
                uint base = col + kb * p.nb10 + c * p.nb11;
                vec2 blk = act_block(base, p.nb10);
                float dd = q_half(bw) * blk.y;
                for (uint j = 0; j < 8; j++) {
                    int isum = 0;
                    for (uint t = 0; t < 4; t++) {
                        uint k = 4 * j + t;
                        isum += q_i8(bw + 2 + k) * int(roundEven(b[base + k * p.nb10] * blk.x));
                    }
                    l[j] = fma(dd, float(isum), l[j]);
                }
            }
            acc[c] = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
        }
#else
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
#endif
        for (uint c = 0; c < ncols; c++) {
            d[p.offd + i01 + (j0 + c) * p.nb1 + i12 * p.nb2 + i13 * p.nb3] = acc[c];
        }
    }
}
