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
    uint kord;               // K types: the CPU's float order (KORD_*; 0: element by element)
} p;

// The orders of the CPU backend's K-quant kernels (crates/ggml-cpu/src/ops/ktile.rs and
// dot/x86.rs), chosen on the host as the CPU chooses them for the same shapes.
// Weights in a Vulkan buffer are never in CPU_REPACK, so the orders are those of the CPU's
// plain buffers (as llama.cpp's, whose CPU layers sit in Vulkan_Host when a Vulkan device is
// present): 1 and 4 (the repacked q4_K_8x8 gemm and gemv) are no longer used.
#define KORD_ELEM 0u
#define KORD_TILED 2u
// the AVX2 vec_dot (Q4_K, Q6_K)
#define KORD_VEC 3u

#include "dequant.glsl"

layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 3) writeonly buffer D { float d[]; };

#include "src1_round.glsl"

// fma(a, b, c) rounded once, as the CPU's FMA instructions do. Where the driver splits GLSL's
// fma into a multiply and an add (lavapipe does), EXACT_F64 computes it in double: the product
// of two floats is exact there, and the sum is rounded to double and then to float, which
// differs from one rounding only when the double lands on a float tie (about 2^-29 of sums).
#if defined(EXACT_F64)
float exact_fma(float a, float b, float c) {
    precise double r = double(a) * double(b) + double(c);
    return float(r);
}
#else
float exact_fma(float a, float b, float c) {
    return fma(a, b, c);
}
#endif

#if TYPE == T_Q8_0
#define Q32_BYTES 34
#elif TYPE == T_Q5_0
#define Q32_BYTES 22
#elif TYPE == T_Q4_0
#define Q32_BYTES 18
#endif

#if defined(KQ_BYTES)
// One row of K-quant weights (from byte `row`) times the src1 column at element `col`, in the
// float order of the CPU kernel p.kord names. Per 256-value block the integer parts are exact:
// for each 16-value sub-block j the sum of code x Q8_K code (raw) and of the Q8_K codes (bs), so
// that S (codes x scales over the block, the KQ_BIAS taken off through bs), M (mins x
// activation sums, per 64 values) and the AVX2 vec_dot's 8 lanes (lane l: elements 4l..4l+3 of
// every 32) are the CPU's integers; only the float steps follow the order.
float kq_dot(uint row, uint col) {
    uint ord = p.kord;
    float acc = 0.0;
    float l8[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    float m4[4] = float[4](0.0, 0.0, 0.0, 0.0);
    for (uint kb = 0; kb < p.ne00; kb += 256) {
        uint bw = row + (kb / 256) * KQ_BYTES;
        uint base = col + kb * p.nb10;
        vec2 blk = act_block(base, p.nb10);
        int sc[16];
        int bs[16];
        int lane[8] = int[8](0, 0, 0, 0, 0, 0, 0, 0);
        int s = 0;
        for (uint j = 0; j < 16; j++) {
            sc[j] = kq_scale16(bw, j);
            int raw = 0;
            int sum = 0;
            for (uint t = 0; t < 16; t++) {
                uint e = 16 * j + t;
                int y = int(min(127.0, roundEven(blk.x * b[base + e * p.nb10])));
                int prod = kq_code(bw, e) * y;
                raw += prod;
                sum += y;
                if (t % 4 == 3) {
                    lane[4 * (j % 2) + t / 4] += sc[j] * raw;
                    s += sc[j] * raw;
                    raw = 0;
                }
            }
            bs[j] = sum;
            s -= KQ_BIAS * sc[j] * sum;
        }
        int mm[4];
        for (uint q = 0; q < 4; q++) {
            mm[q] = kq_min32(bw, 2 * q) * (bs[4 * q] + bs[4 * q + 1])
                + kq_min32(bw, 2 * q + 1) * (bs[4 * q + 2] + bs[4 * q + 3]);
        }
        float dx = kq_d(bw);
        float dmin = kq_dmin(bw);
        float dy = blk.y;
        if (ord == KORD_TILED) {
            float r = float(s) * dx;
#if TYPE == T_Q4_K || TYPE == T_Q5_K
            r = exact_fma(-dmin, float(mm[0] + mm[1] + mm[2] + mm[3]), r);
#endif
            acc = exact_fma(r, dy, acc);
        } else {
            // vec_dot: Q6_K's lanes lose 32 x (scale x activation sum) of sub-blocks 2l, 2l + 1
            float d = dy * dx;
            for (uint q = 0; q < 8; q++) {
                int v = lane[q];
#if TYPE == T_Q6_K
                v -= 32 * (sc[2 * q] * bs[2 * q] + sc[2 * q + 1] * bs[2 * q + 1]);
#endif
                l8[q] = exact_fma(d, float(v), l8[q]);
            }
#if TYPE == T_Q4_K
            float dm = -dy * dmin;
            for (uint q = 0; q < 4; q++) {
                m4[q] = exact_fma(dm, float(mm[q]), m4[q]);
            }
#endif
        }
    }
    if (ord == KORD_VEC) {
        float h = ((l8[0] + l8[4]) + (l8[2] + l8[6])) + ((l8[1] + l8[5]) + (l8[3] + l8[7]));
#if TYPE == T_Q4_K
        h += (m4[0] + m4[2]) + (m4[1] + m4[3]);
#endif
        return h;
    }
    return acc;
}
#endif

#if TYPE == T_F16 && defined(EXACT_F64)
// One F16 row (from byte `row`) times the src1 column at element `col` (rounded to f16 as the
// CPU's conversion) in the CPU's order, p.kord: 1 llamafile's tinyBLAS tile with 8 lanes of
// fused products summed as hsum_float_8, 5 the same with 16 lanes and _mm512_reduce_add_ps
// (AVX-512); 3 ggml_vec_dot_f16 on AVX2 (4 x 8 lanes per 32 values, GGML_F32x8_REDUCE), 6 on
// AVX-512 (4 x 16 lanes per 64 values, GGML_F32x16_REDUCE), the tail's products in double.
float f16_y(uint col, uint i) {
    return float(float16_t(b[col + i * p.nb10]));
}

float f16_dot(uint row, uint col) {
    uint w0 = row >> 1;
    if (p.kord == 1u || p.kord == 5u) {
        uint lanes = p.kord == 5u ? 16u : 8u;
        float l[16];
        for (uint j = 0; j < 16; j++) {
            l[j] = 0.0;
        }
        uint i = 0;
        for (; i + lanes <= p.ne00; i += lanes) {
            for (uint j = 0; j < lanes; j++) {
                l[j] = exact_fma(float(qh16[w0 + i + j]), f16_y(col, i + j), l[j]);
            }
        }
        if (lanes == 16u) {
            for (uint j = 0; j < 8; j++) {
                l[j] = l[j] + l[8 + j];
            }
        }
        float s = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
        for (; i < p.ne00; i++) {
            s += float(qh16[w0 + i]) * f16_y(col, i);
        }
        return s;
    }
    uint lanes = p.kord == 6u ? 16u : 8u;
    uint step = 4u * lanes;
    float a[64];
    for (uint j = 0; j < 64; j++) {
        a[j] = 0.0;
    }
    uint i = 0;
    for (; i + step <= p.ne00; i += step) {
        for (uint j = 0; j < step; j++) {
            a[j] = exact_fma(float(qh16[w0 + i + j]), f16_y(col, i + j), a[j]);
        }
    }
    // accumulators 0+2 and 1+3, then those two, then the register's lanes
    float v[16];
    for (uint j = 0; j < lanes; j++) {
        v[j] = (a[j] + a[2u * lanes + j]) + (a[lanes + j] + a[3u * lanes + j]);
    }
    if (lanes == 16u) {
        for (uint j = 0; j < 8; j++) {
            v[j] = v[8 + j] + v[j];
        }
    }
    float t0[4];
    for (uint j = 0; j < 4; j++) {
        t0[j] = v[j] + v[4 + j];
    }
    double sum = double((t0[0] + t0[1]) + (t0[2] + t0[3]));
    if (lanes == 16u) {
        sum = double((t0[0] + t0[2]) + (t0[1] + t0[3]));
    }
    for (; i < p.ne00; i++) {
        sum += double(float(qh16[w0 + i]) * f16_y(col, i));
    }
    return float(sum);
}
#endif

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
#if TYPE == T_Q8_0 || TYPE == T_Q5_0 || TYPE == T_Q4_0
        // the CPU backend's order for Q8_0, Q5_0 and Q4_0 in plain buffers (ggml's AVX2
        // vec_dot_q8_0_q8_0 / vec_dot_q5_0_q8_0 / vec_dot_q4_0_q8_0 and their tiles): lane j of
        // 8 f32 accumulators takes the exact integer sum of products 4j..4j+3 of each block,
        // fused times f32(dx) * f32(dy); the lanes are summed at the end as hsum_float_8 does
        for (uint c = 0; c < ncols; c++) {
            float l[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
            for (uint kb = 0; kb < p.ne00; kb += 32) {
                uint bw = row + (kb / 32) * Q32_BYTES;
#if TYPE == T_Q5_0
                uint qh = q_u8(bw + 2) | (q_u8(bw + 3) << 8) | (q_u8(bw + 4) << 16)
                    | (q_u8(bw + 5) << 24);
#endif
                uint base = col + kb * p.nb10 + c * p.nb11;
                vec2 blk = act_block(base, p.nb10);
                float dd = q_half(bw) * blk.y;
                for (uint j = 0; j < 8; j++) {
                    int isum = 0;
                    for (uint t = 0; t < 4; t++) {
                        uint k = 4 * j + t;
#if TYPE == T_Q8_0
                        int q = q_i8(bw + 2 + k);
#elif TYPE == T_Q4_0
                        uint nib = k < 16 ? (q_u8(bw + 2 + k) & 0xFu) : (q_u8(bw + 2 + k - 16) >> 4);
                        int q = int(nib) - 8;
#else
                        uint lo = k < 16 ? (q_u8(bw + 6 + k) & 0xFu) : (q_u8(bw + 6 + k - 16) >> 4);
                        int q = int(lo | (((qh >> k) & 1u) << 4)) - 16;
#endif
                        isum += q * int(roundEven(b[base + k * p.nb10] * blk.x));
                    }
                    l[j] = exact_fma(dd, float(isum), l[j]);
                }
            }
            acc[c] = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
        }
#else
#if TYPE == T_F16 && defined(EXACT_F64)
        if (p.kord != KORD_ELEM) {
            for (uint c = 0; c < ncols; c++) {
                acc[c] = f16_dot(row, col + c * p.nb11);
            }
        } else
#endif
#if defined(KQ_BYTES)
        if (p.kord != KORD_ELEM) {
            for (uint c = 0; c < ncols; c++) {
                acc[c] = kq_dot(row, col + c * p.nb11);
            }
        } else
#endif
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
