// The CPU backend's float steps, rounded as the CPU rounds them, for the `_f64` shader
// variants on a device whose fma is a multiply and an add and whose division may be an ulp off
// (lavapipe): a product and sum in double rounded once to float is the fused multiply-add
// (except on a float tie of the double, about 2^-29 of sums); a quotient of floats in double
// rounded to float is the correctly rounded one. Needs shaderFloat64 and shaderInt64.
float exact_fma(float a, float b, float c) {
    precise double r = double(a) * double(b) + double(c);
    return float(r);
}

// expf as glibc computes it (the CPU backend's f32::exp): x * 32 / ln 2 = k + r, 2^(k/32) from
// a table of 2^(j/32) (the doubles nearest them) scaled by 2^(k >> 5), a cubic in r, all in
// double, rounded to float at the end. Equal to glibc's expf on 300000 random inputs in
// [-40, 5] (docs/vulkan.md).
const double EXPF_T[32] = double[32](
    1.0lf, 1.0218971486541166lf, 1.0442737824274138lf, 1.0671404006768237lf,
    1.0905077326652577lf, 1.1143867425958924lf, 1.1387886347566916lf, 1.1637248587775775lf,
    1.189207115002721lf, 1.215247359980469lf, 1.241857812073484lf, 1.2690509571917332lf,
    1.2968395546510096lf, 1.3252366431597413lf, 1.3542555469368927lf, 1.383909881963832lf,
    1.4142135623730951lf, 1.4451808069770467lf, 1.4768261459394993lf, 1.5091644275934228lf,
    1.5422108254079407lf, 1.5759808451078865lf, 1.6104903319492543lf, 1.645755478153965lf,
    1.681792830507429lf, 1.718619298122478lf, 1.7562521603732995lf, 1.7947090750031072lf,
    1.8340080864093424lf, 1.8741676341103lf, 1.9152065613971474lf, 1.9571441241754002lf);

float glibc_expf(float x) {
    if (isnan(x)) {
        return x;
    }
    if (x > 88.72283172607421875) {
        return 1.0 / 0.0;
    }
    if (x < -103.97207641601562) {
        return 0.0;
    }
    double z = 46.16624130844683lf * double(x);
    double kd = roundEven(z);
    int k = int(kd);
    double r = z - kd;
    double s = ldexp(EXPF_T[k & 31], k >> 5);
    precise double zz = 1.6938359250920212e-06lf * r + 0.00023459809789509004lf;
    precise double r2 = r * r;
    precise double y = 0.021660849396613134lf * r + 1.0lf;
    precise double y2 = zz * r2 + y;
    return float(y2 * s);
}

float exact_div(float a, float b) {
    return float(double(a) / double(b));
}

float cf(uint bits) {
    return uintBitsToFloat(bits);
}

// ggml_v_expf of ggml's AVX2 path (8 lanes; one lane here): the polynomial times 2^n as an
// exponent add, the |n| > 126 and > 192 cases as ggml blends them.
float v_expf8(float x) {
    float r = cf(0x4b400000u);
    float z = exact_fma(x, cf(0x3fb8aa3bu), r);
    float n = z - r;
    float b = exact_fma(-n, cf(0x35bfbe8eu), exact_fma(-n, cf(0x3f317200u), x));
    uint e = floatBitsToUint(z) << 23;
    float k = uintBitsToFloat(e + floatBitsToUint(1.0));
    float an = abs(n);
    float u = b * b;
    float j = exact_fma(exact_fma(exact_fma(cf(0x3c072010u), b, cf(0x3d2b9f17u)), u,
                                  exact_fma(cf(0x3e2aaf33u), b, cf(0x3efffedbu))),
                        u, cf(0x3f7ffff6u) * b);
    if (!(an > 126.0)) {
        return exact_fma(j, k, k);
    }
    uint g = n <= 0.0 ? 0x82000000u : 0u;
    float s1 = uintBitsToFloat(g + 0x7f000000u);
    float s2 = uintBitsToFloat(e - g);
    if (an > 192.0) {
        return s1 * s1;
    }
    return exact_fma(s2, j, s2) * s1;
}

// ggml_v_expf of ggml's AVX-512 path (16 lanes; one lane here): the polynomial ends in
// fma(c, b, 1) and is scaled by _mm512_scalef_ps (j * 2^n, rounded once: done in double);
// |n| > 192 gives 0 below zero and inf above.
float v_expf16(float x) {
    float r = cf(0x4b400000u);
    float z = exact_fma(x, cf(0x3fb8aa3bu), r);
    float n = z - r;
    float b = exact_fma(-n, cf(0x35bfbe8eu), exact_fma(-n, cf(0x3f317200u), x));
    float u = b * b;
    float j = exact_fma(exact_fma(exact_fma(cf(0x3c072010u), b, cf(0x3d2b9f17u)), u,
                                  exact_fma(cf(0x3e2aaf33u), b, cf(0x3efffedbu))),
                        u, exact_fma(cf(0x3f7ffff6u), b, 1.0));
    if (abs(n) > 192.0) {
        return n <= 0.0 ? 0.0 : 1.0 / 0.0;
    }
    return float(double(j) * ldexp(1.0lf, int(n)));
}

// ggml_v_silu: x / (1 + exp(-x)) with the vector exp of `lanes` (8 or 16)
float v_silu(float x, uint lanes) {
    float e = lanes == 16u ? v_expf16(0.0 - x) : v_expf8(0.0 - x);
    return exact_div(x, 1.0 + e);
}
