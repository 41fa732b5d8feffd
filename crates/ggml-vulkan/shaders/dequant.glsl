// Element k of a row of src0 (binding 0) whose first block starts at byte `row`, for the weight
// type TYPE (a -D define of the build script): blocks are read byte by byte and f16 scales as
// float16_t (every block size and scale offset is even).
layout(std430, binding = 0) readonly buffer QB { uint8_t qb[]; };
layout(std430, binding = 0) readonly buffer QH { float16_t qh16[]; };
layout(std430, binding = 0) readonly buffer QF { float qf[]; };

#define T_F32 0
#define T_F16 1
#define T_BF16 30
#define T_Q4_0 2
#define T_Q4_1 3
#define T_Q5_0 6
#define T_Q5_1 7
#define T_Q8_0 8
#define T_Q2_K 10
#define T_Q3_K 11
#define T_Q4_K 12
#define T_Q5_K 13
#define T_Q6_K 14
#define T_IQ4_NL 20

float q_half(uint byte_off) {
    return float(qh16[byte_off >> 1]);
}

uint q_u8(uint byte_off) {
    return uint(qb[byte_off]);
}

int q_i8(uint byte_off) {
    uint v = uint(qb[byte_off]);
    return int(v) - int((v & 128u) << 1);
}

#if TYPE == T_Q4_K || TYPE == T_Q5_K
// get_scale_min_k4: the 6-bit scale and min of sub-block j from the 12 packed bytes at s.
vec2 scale_min_k4(uint s, uint j) {
    if (j < 4) {
        return vec2(float(q_u8(s + j) & 63u), float(q_u8(s + j + 4) & 63u));
    }
    uint sc = (q_u8(s + j + 4) & 0xFu) | ((q_u8(s + j - 4) >> 6) << 4);
    uint m = (q_u8(s + j + 4) >> 4) | ((q_u8(s + j) >> 6) << 4);
    return vec2(float(sc), float(m));
}
#endif

#if TYPE == T_IQ4_NL
const float kvalues_iq4nl[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0,
    -10.0, 1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);
#endif

#if TYPE == T_Q3_K || TYPE == T_Q4_K || TYPE == T_Q5_K || TYPE == T_Q6_K
// The integer parts of the K-quant blocks, for products that keep the CPU's float order
// (mul_mat.comp): the unsigned code of element i of the block at byte b (Q6_K stores it +32,
// Q3_K +4: KQ_BIAS), the signed scale of its 16-value sub-block j, Q4_K/Q5_K's min of its
// 32-value sub-block s, and the block's f16 scales.
#if TYPE == T_Q4_K
#define KQ_BYTES 144
#define KQ_BIAS 0
#elif TYPE == T_Q5_K
#define KQ_BYTES 176
#define KQ_BIAS 0
#elif TYPE == T_Q6_K
#define KQ_BYTES 210
#define KQ_BIAS 32
#else
#define KQ_BYTES 110
#define KQ_BIAS 4
#endif

int kq_code(uint b, uint i) {
#if TYPE == T_Q4_K || TYPE == T_Q5_K
    uint c = i / 64;
    uint l = i % 32;
    bool high = (i % 64) >= 32;
#if TYPE == T_Q4_K
    uint q = q_u8(b + 16 + 32 * c + l);
#else
    uint q = q_u8(b + 48 + 32 * c + l);
#endif
    q = high ? (q >> 4) : (q & 0xFu);
#if TYPE == T_Q5_K
    uint hbit = high ? (2u << (2 * c)) : (1u << (2 * c));
    if ((q_u8(b + 16 + l) & hbit) != 0u) {
        q += 16u;
    }
#endif
    return int(q);
#elif TYPE == T_Q6_K
    uint n = i / 128;
    uint r = i % 128;
    uint quarter = r / 32;
    uint l = r % 32;
    uint ql = q_u8(b + 64 * n + l + ((quarter & 1u) != 0u ? 32u : 0u));
    ql = quarter >= 2 ? (ql >> 4) : (ql & 0xFu);
    uint qh = (q_u8(b + 128 + 32 * n + l) >> (2 * quarter)) & 3u;
    return int(ql | (qh << 4));
#else
    uint n = i / 128;
    uint r = i % 128;
    uint j = r / 32;
    uint l = r % 32;
    uint q = (q_u8(b + 32 + 32 * n + l) >> (2 * j)) & 3u;
    uint hi = (q_u8(b + l) >> (4 * n + j)) & 1u;
    return int(q | (hi << 2));
#endif
}

int kq_scale16(uint b, uint j) {
#if TYPE == T_Q4_K || TYPE == T_Q5_K
    return int(scale_min_k4(b + 4, j / 2).x);
#elif TYPE == T_Q6_K
    return q_i8(b + 192 + j);
#else
    uint lo4 = j < 8 ? (q_u8(b + 96 + j) & 0xFu) : (q_u8(b + 96 + j - 8) >> 4);
    uint hi2 = (q_u8(b + 96 + 8 + j % 4) >> (2 * (j / 4))) & 3u;
    return int(lo4 | (hi2 << 4)) - 32;
#endif
}

int kq_min32(uint b, uint s) {
#if TYPE == T_Q4_K || TYPE == T_Q5_K
    return int(scale_min_k4(b + 4, s).y);
#else
    return 0;
#endif
}

float kq_d(uint b) {
#if TYPE == T_Q4_K || TYPE == T_Q5_K
    return q_half(b);
#elif TYPE == T_Q6_K
    return q_half(b + 208);
#else
    return q_half(b + 108);
#endif
}

float kq_dmin(uint b) {
#if TYPE == T_Q4_K || TYPE == T_Q5_K
    return q_half(b + 2);
#else
    return 0.0;
#endif
}
#endif

float dequant(uint row, uint k) {
#if TYPE == T_F32
    return qf[(row >> 2) + k];
#elif TYPE == T_F16
    return float(qh16[(row >> 1) + k]);
#elif TYPE == T_BF16
    return bf16_to_f32(uint(qb[row + 2 * k]) | (uint(qb[row + 2 * k + 1]) << 8));
#elif TYPE == T_Q8_0
    uint b = row + (k / 32) * 34;
    return q_half(b) * float(q_i8(b + 2 + k % 32));
#elif TYPE == T_Q4_0
    uint b = row + (k / 32) * 18;
    uint i = k % 32;
    uint q = i < 16 ? (q_u8(b + 2 + i) & 0xFu) : (q_u8(b + 2 + i - 16) >> 4);
    return q_half(b) * (float(q) - 8.0);
#elif TYPE == T_Q4_1
    uint b = row + (k / 32) * 20;
    uint i = k % 32;
    uint q = i < 16 ? (q_u8(b + 4 + i) & 0xFu) : (q_u8(b + 4 + i - 16) >> 4);
    return q_half(b) * float(q) + q_half(b + 2);
#elif TYPE == T_Q5_0
    uint b = row + (k / 32) * 22;
    uint i = k % 32;
    uint qh = q_u8(b + 2) | (q_u8(b + 3) << 8) | (q_u8(b + 4) << 16) | (q_u8(b + 5) << 24);
    uint lo = i < 16 ? (q_u8(b + 6 + i) & 0xFu) : (q_u8(b + 6 + i - 16) >> 4);
    uint hi = ((qh >> i) & 1u) << 4;
    return q_half(b) * (float(lo | hi) - 16.0);
#elif TYPE == T_Q5_1
    uint b = row + (k / 32) * 24;
    uint i = k % 32;
    uint qh = q_u8(b + 4) | (q_u8(b + 5) << 8) | (q_u8(b + 6) << 16) | (q_u8(b + 7) << 24);
    uint lo = i < 16 ? (q_u8(b + 8 + i) & 0xFu) : (q_u8(b + 8 + i - 16) >> 4);
    uint hi = ((qh >> i) & 1u) << 4;
    return q_half(b) * float(lo | hi) + q_half(b + 2);
#elif TYPE == T_IQ4_NL
    uint b = row + (k / 32) * 18;
    uint i = k % 32;
    uint q = i < 16 ? (q_u8(b + 2 + i) & 0xFu) : (q_u8(b + 2 + i - 16) >> 4);
    return q_half(b) * kvalues_iq4nl[q];
#elif TYPE == T_Q4_K
    // d, dmin, scales[12], qs[128]: 64-value chunks, low nibbles then high nibbles
    uint b = row + (k / 256) * 144;
    uint i = k % 256;
    uint c = i / 64;
    uint l = i % 32;
    bool high = (i % 64) >= 32;
    vec2 sm = scale_min_k4(b + 4, 2 * c + (high ? 1 : 0));
    uint q = q_u8(b + 16 + 32 * c + l);
    q = high ? (q >> 4) : (q & 0xFu);
    return q_half(b) * sm.x * float(q) - q_half(b + 2) * sm.y;
#elif TYPE == T_Q5_K
    // d, dmin, scales[12], qh[32], qs[128]
    uint b = row + (k / 256) * 176;
    uint i = k % 256;
    uint c = i / 64;
    uint l = i % 32;
    bool high = (i % 64) >= 32;
    vec2 sm = scale_min_k4(b + 4, 2 * c + (high ? 1 : 0));
    uint q = q_u8(b + 48 + 32 * c + l);
    q = high ? (q >> 4) : (q & 0xFu);
    uint hbit = high ? (2u << (2 * c)) : (1u << (2 * c));
    if ((q_u8(b + 16 + l) & hbit) != 0u) {
        q += 16u;
    }
    return q_half(b) * sm.x * float(q) - q_half(b + 2) * sm.y;
#elif TYPE == T_Q6_K
    // ql[128], qh[64], scales[16] (int8), d
    uint b = row + (k / 256) * 210;
    uint i = k % 256;
    uint n = i / 128;
    uint r = i % 128;
    uint quarter = r / 32;
    uint l = r % 32;
    uint is = l / 16;
    uint ql = q_u8(b + 64 * n + l + ((quarter & 1u) != 0u ? 32u : 0u));
    ql = quarter >= 2 ? (ql >> 4) : (ql & 0xFu);
    uint qh = (q_u8(b + 128 + 32 * n + l) >> (2 * quarter)) & 3u;
    int q = int(ql | (qh << 4)) - 32;
    float sc = float(q_i8(b + 192 + 8 * n + is + 2 * quarter));
    return q_half(b + 208) * sc * float(q);
#elif TYPE == T_Q3_K
    // hmask[32], qs[64], scales[12], d
    uint b = row + (k / 256) * 110;
    uint i = k % 256;
    uint n = i / 128;
    uint r = i % 128;
    uint j = r / 32;
    uint l = r % 32;
    uint is = 8 * n + 2 * j + l / 16;
    // the 16 6-bit scales, unpacked as ggml's kmask1/kmask2 dance does
    uint lo4;
    uint hi2;
    if (is < 8) {
        lo4 = q_u8(b + 96 + is) & 0xFu;
    } else {
        lo4 = q_u8(b + 96 + is - 8) >> 4;
    }
    hi2 = (q_u8(b + 96 + 8 + is % 4) >> (2 * (is / 4))) & 3u;
    int sc = int(lo4 | (hi2 << 4)) - 32;
    uint q = (q_u8(b + 32 + 32 * n + l) >> (2 * j)) & 3u;
    uint m = 1u << (4 * n + j);
    int v = int(q) - (((q_u8(b + l) & m) != 0u) ? 0 : 4);
    return q_half(b + 108) * float(sc) * float(v);
#elif TYPE == T_Q2_K
    // scales[16], qs[64], d, dmin
    uint b = row + (k / 256) * 84;
    uint i = k % 256;
    uint n = i / 128;
    uint r = i % 128;
    uint j = r / 32;
    uint l = r % 32;
    uint sc = q_u8(b + 8 * n + 2 * j + l / 16);
    uint q = (q_u8(b + 16 + 32 * n + l) >> (2 * j)) & 3u;
    return q_half(b + 80) * float(sc & 0xFu) * float(q) - q_half(b + 82) * float(sc >> 4);
#else
#error unknown TYPE
#endif
}
