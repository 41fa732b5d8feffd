// src1 (activations) as the CPU backend sees them in a matrix product with weights of TYPE:
// converted to the weights' vec_dot_type first (ggml-cpu's from_float), so that the GPU's
// products are the CPU's up to float rounding. F16 and BF16 weights: src1 rounded to that type.
// The 32-block types: Q8_0/Q8_1 codes (d = amax / 127 stored as f16, codes round(x * 127 / amax)
// half to even, as ggml's x86 quantize_row_q8_0). The K types: Q8_K codes (d = 1 / iscale,
// iscale = -127 / max with max the first largest |x|, codes min(127, round(iscale * x))).
#if TYPE == T_Q2_K || TYPE == T_Q3_K || TYPE == T_Q4_K || TYPE == T_Q5_K || TYPE == T_Q6_K
#define ACT_Q8K 1
#define ACT_QB 256
#elif TYPE == T_F32 || TYPE == T_F16 || TYPE == T_BF16
#define ACT_QB 32
#else
#define ACT_Q8 1
#define ACT_QB 32
#endif

// a / b rounded once. Where the driver computes a division through a reciprocal (so that the
// quotient may be an ulp off, which moves a Q8 code or d), EXACT_F64 divides in double: a double
// quotient of two floats rounded to float is the correctly rounded float quotient.
float act_div(float a, float b) {
#if defined(EXACT_F64)
    return float(double(a) / double(b));
#else
    return a / b;
#endif
}

// (code multiplier, d) of the activation block of ACT_QB values from b[base] with stride s.
vec2 act_block(uint base, uint s) {
#if defined(ACT_Q8)
    float amax = 0.0;
    for (uint j = 0; j < ACT_QB; j++) {
        amax = max(amax, abs(b[base + j * s]));
    }
    float d = float(float16_t(act_div(amax, 127.0)));
    return vec2(amax != 0.0 ? act_div(127.0, amax) : 0.0, d);
#elif defined(ACT_Q8K)
    float amax = 0.0;
    float mx = 0.0;
    for (uint j = 0; j < ACT_QB; j++) {
        float x = b[base + j * s];
        if (abs(x) > amax) {
            amax = abs(x);
            mx = x;
        }
    }
    if (amax == 0.0) {
        return vec2(0.0, 0.0);
    }
    float iscale = act_div(-127.0, mx);
    return vec2(iscale, act_div(1.0, iscale));
#else
    return vec2(1.0, 1.0);
#endif
}

// One src1 value as the CPU's dot product uses it, given its block's act_block().
float act_value(float x, vec2 blk) {
#if defined(ACT_Q8)
    return blk.y * roundEven(x * blk.x);
#elif defined(ACT_Q8K)
    return blk.y * min(127.0, roundEven(blk.x * x));
#elif TYPE == T_F16
    return float(float16_t(x));
#elif TYPE == T_BF16
    return bf16_to_f32(f32_to_bf16(x));
#else
    return x;
#endif
}
